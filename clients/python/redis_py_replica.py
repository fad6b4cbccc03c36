"""redis-py's replica reads (``Sentinel.slave_for``) beside its writes
(``master_for``), through a primary kill.

Writes are the redis-py program's (SET + ``WAIT 1 1000`` through ``master_for``).
After each acknowledged write the key is read through ``slave_for``, whose pool
asks ``SENTINEL REPLICAS`` (``discover_slaves``) and rotates over the replicas
named; with none named it falls back to the primary. Each read prints
``rread MS KEY hit|miss ADDR``, ADDR being the server that answered, so
clients/run.py can tell a read served by a live replica from one served by the
primary or one that never came back after the kill. A read error prints an
``err`` line like a write error.
"""

import sys
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from common import config, emit, one_line, should_stop


def main():
    cfg = config()
    sentinel_kwargs = {"socket_timeout": 0.5, "socket_connect_timeout": 0.5,
                       "retry": Retry(NoBackoff(), 0)}
    sentinel = Sentinel(cfg["sentinels"], sentinel_kwargs=sentinel_kwargs,
                        socket_timeout=1.0, socket_connect_timeout=1.0)
    original = sentinel.discover_master

    def discover_master(name):
        addr = original(name)
        emit("discover", f"{addr[0]}:{addr[1]}")
        return addr

    sentinel.discover_master = discover_master
    master = sentinel.master_for(cfg["master"], socket_timeout=2.0, socket_connect_timeout=1.0)
    replica = sentinel.slave_for(cfg["master"], socket_timeout=1.0, socket_connect_timeout=1.0)
    pool = replica.connection_pool

    def read(key):
        # The pool's own connection, so the answering server's address is known;
        # the library picks it (rotate_slaves) as for any replica.get().
        conn = pool.get_connection()
        try:
            conn.send_command("GET", key)
            value = conn.read_response()
            addr = f"{conn.host}:{conn.port}"
        except Exception:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        if isinstance(value, bytes):
            value = value.decode()
        return ("hit" if value == key else "miss"), addr

    def write(key):
        pipe = master.pipeline(transaction=False)
        pipe.set(key, key)
        pipe.execute_command("WAIT", 1, 1000)
        return pipe.execute()[1]

    # run_sync's loop, with the read after the write's line is printed (a read
    # that waits must not delay the write's timestamp).
    i = 0
    while not should_stop(cfg, i):
        key = f"{cfg['prefix']}:{i}"
        i += 1
        try:
            acked = write(key)
        except Exception as exc:
            emit("err", one_line(exc))
            time.sleep(0.05)
            continue
        emit("ack" if acked >= 1 else "nack", key)
        if acked >= 1:
            try:
                outcome, addr = read(key)
                emit("rread", key, outcome, addr)
            except Exception as exc:
                emit("err", "replica read: " + one_line(exc))
        time.sleep(cfg["pace"])


if __name__ == "__main__":
    print(f"# redis-py {redis.__version__} (slave_for)", file=sys.stderr)
    main()
