"""The loop every Python client program runs, and the lines it prints.

Every client program in clients/ (whatever its language) speaks the same small
protocol with clients/run.py, so one orchestrator can time them all:

- configuration from the environment: SENTINELS (``ip:port,ip:port``), or VIP
  (``ip:port``, the virtual IP, for clients with no Sentinel support), MASTER
  (the master name), PREFIX (key prefix, unique per run), STOP_FILE (the loop
  ends when it exists), DEADLINE_S (hard bound in seconds), MAX_WRITES (bound in
  count), PACE_MS (sleep between writes);
- output on stdout, one line each: ``ack MS KEY`` (SET then ``WAIT 1 1000``
  answered >= 1), ``nack MS KEY`` (WAIT answered 0: not acknowledged, not
  checked), ``err MS TEXT`` (an error the application saw), ``discover MS
  ADDR`` (the client asked a sentinel for the primary and got ADDR), ``switch
  MS TEXT`` (the client was told of a switch by a ``+switch-master`` event).
  MS is the Unix time in milliseconds. The value written is the key itself.

The application code is deliberately naive: on an error it sleeps briefly and
writes again through the same client object, so what follows the failover is
the library's own Sentinel logic, never an address given by hand.
"""

import os
import sys
import time


def now_ms():
    return int(time.time() * 1000)


def emit(kind, *fields):
    sys.stdout.write(" ".join([kind, str(now_ms()), *map(str, fields)]) + "\n")
    sys.stdout.flush()


def config():
    sentinels = []
    for item in filter(None, os.environ.get("SENTINELS", "").split(",")):
        host, port = item.rsplit(":", 1)
        sentinels.append((host, int(port)))
    vip = os.environ.get("VIP", "")
    return {
        "sentinels": sentinels,
        "vip": (vip.rsplit(":", 1)[0], int(vip.rsplit(":", 1)[1])) if vip else None,
        "master": os.environ.get("MASTER", "mymaster"),
        "prefix": os.environ.get("PREFIX", "clients"),
        "stop_file": os.environ.get("STOP_FILE", ""),
        "deadline": time.monotonic() + float(os.environ.get("DEADLINE_S", "60")),
        "max_writes": int(os.environ.get("MAX_WRITES", "20000")),
        "pace": int(os.environ.get("PACE_MS", "5")) / 1000.0,
    }


def should_stop(cfg, i):
    if i >= cfg["max_writes"] or time.monotonic() >= cfg["deadline"]:
        return True
    return bool(cfg["stop_file"]) and i % 10 == 0 and os.path.exists(cfg["stop_file"])


def one_line(exc):
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:200]


def run_sync(write, cfg):
    """write(key) -> replicas acknowledged (int); raises on an error."""
    i = 0
    while not should_stop(cfg, i):
        key = f"{cfg['prefix']}:{i}"
        i += 1
        try:
            acked = write(key)
        except Exception as exc:  # what the application sees, whatever it is
            emit("err", one_line(exc))
            time.sleep(0.05)
            continue
        emit("ack" if acked >= 1 else "nack", key)
        time.sleep(cfg["pace"])


async def run_async(write, cfg):
    import asyncio

    i = 0
    while not should_stop(cfg, i):
        key = f"{cfg['prefix']}:{i}"
        i += 1
        try:
            acked = await write(key)
        except Exception as exc:
            emit("err", one_line(exc))
            await asyncio.sleep(0.05)
            continue
        emit("ack" if acked >= 1 else "nack", key)
        await asyncio.sleep(cfg["pace"])


def run_sentinel_master_for(sentinel_cls, retry_cls, no_backoff_cls):
    """The redis-py shape (``Sentinel.master_for``), shared by redis-py and its
    fork valkey-py, which differ only in the package the classes come from.

    The sentinels are asked with short timeouts and no retry: with the
    defaults (3 retries with backoff on every sentinel connection) a dead
    sentinel first in the list costs several seconds per discovery, since the
    connection to the first sentinel is retried before the next is tried.
    ``discover`` lines come from wrapping ``Sentinel.discover_master``
    (instrumentation only: the library's own method runs)."""
    cfg = config()
    sentinel_kwargs = {"socket_timeout": 0.5, "socket_connect_timeout": 0.5,
                       "retry": retry_cls(no_backoff_cls(), 0)}
    sentinel = sentinel_cls(cfg["sentinels"], sentinel_kwargs=sentinel_kwargs,
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
