"""redis-py's Sentinel (``redis.sentinel.Sentinel.master_for``), synchronous.

It finds the primary with ``SENTINEL MASTERS`` on each sentinel in turn whenever
its pool opens a connection; an error drops the connection, so the next write
asks again. It subscribes to nothing. ``discover`` lines come from wrapping
``Sentinel.discover_master`` (instrumentation only: the library's own method runs).
"""

import sys

import redis
from redis.sentinel import Sentinel

from redis.backoff import NoBackoff
from redis.retry import Retry

from common import config, emit, run_sync


# How the sentinels are asked: short timeouts and no retry. With the defaults
# (3 retries with backoff on every sentinel connection) a dead sentinel first in
# the list costs several seconds per discovery: the connection to the first
# sentinel is retried before the next one is tried.
SENTINEL_KWARGS = {"socket_timeout": 0.5, "socket_connect_timeout": 0.5, "retry": Retry(NoBackoff(), 0)}



def main():
    cfg = config()
    sentinel = Sentinel(cfg["sentinels"], sentinel_kwargs=SENTINEL_KWARGS,
                        socket_timeout=1.0, socket_connect_timeout=1.0)
    original = sentinel.discover_master

    def discover_master(name):
        addr = original(name)
        emit("discover", f"{addr[0]}:{addr[1]}")
        return addr

    sentinel.discover_master = discover_master
    master = sentinel.master_for(cfg["master"], socket_timeout=2.0, socket_connect_timeout=1.0)

    def write(key):
        # One pipeline: SET and WAIT travel on the same connection, as WAIT needs.
        pipe = master.pipeline(transaction=False)
        pipe.set(key, key)
        pipe.execute_command("WAIT", 1, 1000)
        return pipe.execute()[1]

    run_sync(write, cfg)


if __name__ == "__main__":
    print(f"# redis-py {redis.__version__}", file=sys.stderr)
    main()
