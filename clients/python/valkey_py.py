"""valkey-py's Sentinel (``valkey.sentinel.Sentinel.master_for``): a fork of
redis-py, the same discovery (``SENTINEL MASTERS`` on each new connection)."""

import sys

import valkey
from valkey.backoff import NoBackoff
from valkey.retry import Retry
from valkey.sentinel import Sentinel

from common import run_sentinel_master_for


if __name__ == "__main__":
    print(f"# valkey-py {valkey.__version__}", file=sys.stderr)
    run_sentinel_master_for(Sentinel, Retry, NoBackoff)
