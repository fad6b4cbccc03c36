"""valkey-py's Sentinel (``valkey.sentinel.Sentinel.master_for``): a fork of
redis-py, the same discovery (``SENTINEL MASTERS`` on each new connection)."""

import sys

import valkey
from valkey.sentinel import Sentinel

from valkey.backoff import NoBackoff
from valkey.retry import Retry

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
        pipe = master.pipeline(transaction=False)
        pipe.set(key, key)
        pipe.execute_command("WAIT", 1, 1000)
        return pipe.execute()[1]

    run_sync(write, cfg)


if __name__ == "__main__":
    print(f"# valkey-py {valkey.__version__}", file=sys.stderr)
    main()
