"""redis-py's Sentinel (``redis.sentinel.Sentinel.master_for``), synchronous.

It finds the primary with ``SENTINEL MASTERS`` on each sentinel in turn whenever
its pool opens a connection; an error drops the connection, so the next write
asks again. It subscribes to nothing.
"""

import sys

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from common import run_sentinel_master_for


if __name__ == "__main__":
    print(f"# redis-py {redis.__version__}", file=sys.stderr)
    run_sentinel_master_for(Sentinel, Retry, NoBackoff)
