# Redis.pm 2.000 (Debian's libredis-perl): Redis->new(sentinels => [...], service => ...).
# On every (re)connect it asks the sentinels in turn (SENTINEL
# get-master-addr-by-name); `reconnect` retries for that many seconds. SET and
# WAIT are pipelined on one socket (conservative_reconnect: never across a
# reconnect, where WAIT would count a new connection's empty offset). The loop and the lines printed: clients/python/common.py.
use strict;
use warnings;
use Redis;
use Time::HiRes qw(time sleep);

$| = 1;
sub now_ms { int(time() * 1000) }
sub emit { my ($kind, $rest) = @_; $rest =~ s/\n/ /g; print "$kind ", now_ms(), " $rest\n" }

my @sentinels = split /,/, $ENV{SENTINELS};
my $master = $ENV{MASTER} // 'mymaster';
my $prefix = $ENV{PREFIX} // 'clients';
my $stop = $ENV{STOP_FILE} // '';
my $deadline = time() + ($ENV{DEADLINE_S} // 60);
my $max = $ENV{MAX_WRITES} // 20000;
my $pace = ($ENV{PACE_MS} // 5) / 1000;
print STDERR "# Redis.pm $Redis::VERSION\n";

my $redis;
my $i = 0;
while ($i < $max && time() < $deadline) {
    last if $stop ne '' && $i % 10 == 0 && -e $stop;
    my $key = "$prefix:$i";
    $i++;
    my $n = eval {
        $redis //= do {
            my $r = Redis->new(sentinels => [@sentinels], service => $master, reconnect => 1,
                every => 100_000, cnx_timeout => 1, read_timeout => 2, write_timeout => 2,
                sentinels_cnx_timeout => 0.5, conservative_reconnect => 1);
            emit('discover', $r->{server});
            # Instrumentation only: report each address the library's own
            # reconnect resolves through the sentinels.
            my $build = $r->{builder};
            $r->{builder} = sub { my $sock = $build->(@_); emit('discover', $_[0]{server}); $sock };
            $r;
        };
        my ($set_err, $wait, $wait_err);
        $redis->set($key, $key, sub { $set_err = $_[1] });
        $redis->wait(1, 1000, sub { ($wait, $wait_err) = @_ });
        $redis->wait_all_responses;
        die "SET: $set_err" if $set_err;
        die "WAIT: $wait_err" if $wait_err;
        $wait;
    };
    if (defined $n) {
        emit($n >= 1 ? 'ack' : 'nack', $key);
        sleep($pace);
    } else {
        my $e = substr($@ // 'unknown', 0, 180);
        emit('err', $e);
        # After an error with pipelined replies pending, conservative_reconnect
        # leaves the object refusing every command ("reconnect disabled while
        # responses are pending"): a new object, which asks the sentinels again.
        undef $redis;
        sleep(0.05);
    }
}
