# redis-rb 4.x (Debian's ruby-redis): Redis.new(sentinels: ..., role: :master).
# On every (re)connect its Sentinel connector asks the sentinels in turn
# (SENTINEL get-master-addr-by-name), then checks ROLE on the address named; it
# subscribes to nothing. The loop and the lines printed: clients/python/common.py.
require "redis"

$stdout.sync = true
def now_ms = (Time.now.to_f * 1000).to_i
def emit(kind, rest) = puts("#{kind} #{now_ms} #{rest.to_s.tr("\n", ' ')}")

# Instrumentation only: print what the library's own resolve returned.
module ReportResolve
  def resolve
    addr = super
    emit("discover", "#{addr[:host]}:#{addr[:port]}")
    addr
  end
end
Redis::Client::Connector::Sentinel.prepend(ReportResolve)

sentinels = ENV.fetch("SENTINELS").split(",").map do |s|
  host, port = s.split(":")
  { host: host, port: port.to_i }
end
master = ENV.fetch("MASTER", "mymaster")
prefix = ENV.fetch("PREFIX", "clients")
stop_file = ENV.fetch("STOP_FILE", "")
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + ENV.fetch("DEADLINE_S", "60").to_f
max_writes = ENV.fetch("MAX_WRITES", "20000").to_i
pace = ENV.fetch("PACE_MS", "5").to_i / 1000.0
$stderr.puts "# redis-rb #{Redis::VERSION}"

redis = Redis.new(url: "redis://#{master}", sentinels: sentinels, role: :master,
                  connect_timeout: 1, timeout: 2, reconnect_attempts: 0)
i = 0
while i < max_writes && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  break if !stop_file.empty? && (i % 10).zero? && File.exist?(stop_file)
  key = "#{prefix}:#{i}"
  i += 1
  begin
    replies = redis.pipelined do |pipe|
      pipe.set(key, key)
      pipe.call("WAIT", 1, 1000)
    end
    emit(replies[1] >= 1 ? "ack" : "nack", key)
    sleep pace
  rescue StandardError => e
    emit("err", "#{e.class}: #{e.message}"[0, 200])
    sleep 0.05
  end
end
