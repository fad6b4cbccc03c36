"""redis-py with no Sentinel at all: a plain ``redis.Redis`` on the virtual IP
(docs/vip.md). After the kill its connection fails; redis-py reconnects to the
same address, which the new primary holds once the elector has moved the VIP."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import redis  # noqa: E402

from common import config, run_sync  # noqa: E402


def main():
    cfg = config()
    host, port = cfg["vip"]
    r = redis.Redis(host=host, port=port, socket_timeout=2.0, socket_connect_timeout=1.0)

    def write(key):
        pipe = r.pipeline(transaction=False)
        pipe.set(key, key)
        pipe.execute_command("WAIT", 1, 1000)
        return pipe.execute()[1]

    run_sync(write, cfg)


if __name__ == "__main__":
    print(f"# redis-py {redis.__version__} on the virtual IP", file=sys.stderr)
    main()
