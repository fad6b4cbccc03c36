"""redis-py's asyncio Sentinel (``redis.asyncio.sentinel.Sentinel.master_for``):
the same discovery as the synchronous one, on asyncio connections."""

import asyncio
import sys

import redis
from redis.asyncio.sentinel import Sentinel

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from common import config, emit, run_async


# How the sentinels are asked: short timeouts and no retry. With the defaults
# (3 retries with backoff on every sentinel connection) a dead sentinel first in
# the list costs several seconds per discovery: the connection to the first
# sentinel is retried before the next one is tried.
SENTINEL_KWARGS = {"socket_timeout": 0.5, "socket_connect_timeout": 0.5, "retry": Retry(NoBackoff(), 0)}


async def main():
    cfg = config()
    sentinel = Sentinel(cfg["sentinels"], sentinel_kwargs=SENTINEL_KWARGS,
                        socket_timeout=1.0, socket_connect_timeout=1.0)
    original = sentinel.discover_master

    async def discover_master(name):
        addr = await original(name)
        emit("discover", f"{addr[0]}:{addr[1]}")
        return addr

    sentinel.discover_master = discover_master
    master = sentinel.master_for(cfg["master"], socket_timeout=2.0, socket_connect_timeout=1.0)

    async def write(key):
        pipe = master.pipeline(transaction=False)
        pipe.set(key, key)
        pipe.execute_command("WAIT", 1, 1000)
        return (await pipe.execute())[1]

    await run_async(write, cfg)
    await master.aclose()


if __name__ == "__main__":
    print(f"# redis-py {redis.__version__} (asyncio)", file=sys.stderr)
    asyncio.run(main())
