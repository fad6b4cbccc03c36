<?php
// phpredis (Debian's php-redis) RedisSentinel. phpredis has no failover client:
// RedisSentinel only asks (getMasterAddrByName = SENTINEL get-master-addr-by-name),
// so the application asks again after an error, as phpredis' documentation shows.
// The loop and the lines printed: clients/python/common.py.
function now_ms() { return (int) floor(microtime(true) * 1000); }
function emit($kind, $rest) { echo $kind, ' ', now_ms(), ' ', str_replace("\n", ' ', $rest), "\n"; }

$sentinels = array_map(fn($s) => explode(':', $s), explode(',', getenv('SENTINELS')));
$master = getenv('MASTER') ?: 'mymaster';
$prefix = getenv('PREFIX') ?: 'clients';
$stop = getenv('STOP_FILE') ?: '';
$deadline = microtime(true) + (float) (getenv('DEADLINE_S') ?: 60);
$max = (int) (getenv('MAX_WRITES') ?: 20000);
$pace = (int) (getenv('PACE_MS') ?: 5) * 1000;
fwrite(STDERR, '# phpredis ' . phpversion('redis') . "\n");

function connect_master($sentinels, $master) {
    foreach ($sentinels as [$host, $port]) {
        try {
            $s = new RedisSentinel($host, (int) $port, 1.0);
            $addr = $s->getMasterAddrByName($master);
        } catch (RedisException $e) {
            continue;
        }
        if (!$addr) continue;
        emit('discover', "$addr[0]:$addr[1]");
        $r = new Redis();
        $r->connect($addr[0], (int) $addr[1], 1.0);
        $r->setOption(Redis::OPT_READ_TIMEOUT, 2);
        return $r;
    }
    throw new RedisException('no sentinel named a primary');
}

$r = null;
for ($i = 0; $i < $max && microtime(true) < $deadline; ) {
    if ($stop !== '' && $i % 10 == 0 && file_exists($stop)) break;
    $key = "$prefix:$i";
    $i++;
    try {
        if ($r === null) $r = connect_master($sentinels, $master);
        $r->set($key, $key);
        $n = $r->rawCommand('WAIT', 1, 1000);
        emit($n >= 1 ? 'ack' : 'nack', $key);
        usleep($pace);
    } catch (RedisException $e) {
        emit('err', get_class($e) . ': ' . substr($e->getMessage(), 0, 180));
        $r = null;
        usleep(50000);
    }
}
