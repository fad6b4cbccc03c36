#!/usr/bin/env python3
"""Background writer for the rolling upgrade (runs on the control machine).

  acked-writer.py run    --nodes H:P,H:P,... --state FILE --stop-file F [--max-seconds S]
  acked-writer.py verify --nodes H:P,H:P,... --state FILE

run: writes keys <prefix>:<seq> = <seq> to whichever node takes them (it tries
the nodes in turn: a replica answers READONLY, a fenced or stopped node errors
or refuses the connection), each SET followed by WAIT 1 on the same
connection. A write counts as acknowledged only when WAIT says a replica has
it. Stops when the stop file appears (or after max-seconds) and writes the
state file: acknowledged sequence numbers, counts, and the longest time
without an acknowledged write.
verify: finds the primary the same way (the node that takes a probe write
with a replica's acknowledgement) and reads every acknowledged key back;
exit 1 if one is missing or wrong.
Python standard library only, RESP2 over plain sockets.
"""
import argparse
import json
import os
import socket
import sys
import time


class Resp:
    def __init__(self, addr, timeout=2.0):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ConnectionError(f"bad reply {line!r}")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._reply()


def acked_set(conn, key, value, wait_ms):
    r = conn.cmd("SET", key, value)
    if r != "OK":
        return False, f"SET: {r}"
    w = conn.cmd("WAIT", 1, wait_ms)
    if isinstance(w, int) and w >= 1:
        return True, "acked"
    return False, f"WAIT: {w}"


def run(args):
    nodes = args.nodes.split(",")
    state = {"prefix": args.prefix, "acked": [], "attempts": 0, "set_ok_not_acked": 0,
             "errors": 0, "max_gap_s": 0.0, "started": time.time(), "last_errors": [],
             "switches": 0}
    idx, conn, seq = 0, None, 0
    last_ack = time.time()
    deadline = time.time() + args.max_seconds

    def save():
        state["ended"] = time.time()
        tmp = args.state + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, args.state)

    while not os.path.exists(args.stop_file) and time.time() < deadline:
        seq += 1
        state["attempts"] += 1
        key = f"{args.prefix}:{seq}"
        try:
            if conn is None:
                conn = Resp(nodes[idx])
            ok, why = acked_set(conn, key, seq, args.wait_ms)
        except (OSError, ConnectionError) as e:
            ok, why = False, f"{type(e).__name__}: {e}"
            if conn is not None:
                conn.close()
            conn = None
        now = time.time()
        if ok:
            state["acked"].append(seq)
            state["max_gap_s"] = max(state["max_gap_s"], now - last_ack)
            last_ack = now
            time.sleep(args.interval)
        else:
            if why.startswith("WAIT"):
                state["set_ok_not_acked"] += 1
            else:
                state["errors"] += 1
            state["last_errors"] = (state["last_errors"] + [f"{nodes[idx]} {why}"])[-10:]
            if not why.startswith("WAIT"):
                # not the primary (READONLY, refused): try the next node
                if conn is not None:
                    conn.close()
                conn = None
                idx = (idx + 1) % len(nodes)
                state["switches"] += 1
            time.sleep(0.05)
        if state["attempts"] % 50 == 0:
            state["max_gap_s"] = max(state["max_gap_s"], time.time() - last_ack)
            save()
    state["max_gap_s"] = max(state["max_gap_s"], time.time() - last_ack)
    save()
    print(json.dumps({k: v for k, v in state.items() if k != "acked"} | {"acked": len(state["acked"])}))
    return 0


def verify(args):
    with open(args.state) as f:
        state = json.load(f)
    nodes = args.nodes.split(",")
    primary = None
    deadline = time.time() + args.timeout
    while primary is None and time.time() < deadline:
        for addr in nodes:
            try:
                c = Resp(addr)
                ok, _ = acked_set(c, f"{state['prefix']}:verify-probe", "1", 1000)
                if ok:
                    primary = (addr, c)
                    break
                c.close()
            except (OSError, ConnectionError):
                pass
        if primary is None:
            time.sleep(1)
    if primary is None:
        print(f"verify: no node took an acknowledged write within {args.timeout}s", file=sys.stderr)
        return 1
    addr, c = primary
    acked = state["acked"]
    missing = []
    for i in range(0, len(acked), 500):
        batch = acked[i:i + 500]
        vals = c.cmd("MGET", *[f"{state['prefix']}:{s}" for s in batch])
        missing += [s for s, v in zip(batch, vals) if v != str(s)]
    result = {"primary": addr, "acked": len(acked), "missing": len(missing),
              "missing_first": missing[:20], "attempts": state["attempts"],
              "set_ok_not_acked": state["set_ok_not_acked"], "errors": state["errors"],
              "node_switches": state["switches"], "max_gap_s": round(state["max_gap_s"], 2),
              "duration_s": round(state.get("ended", time.time()) - state["started"], 1)}
    print(json.dumps(result))
    return 1 if missing or not acked else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["run", "verify"])
    p.add_argument("--nodes", required=True)
    p.add_argument("--state", required=True)
    p.add_argument("--stop-file", default="/nonexistent")
    p.add_argument("--prefix", default=f"upgrade:{int(time.time())}")
    p.add_argument("--max-seconds", type=float, default=3600)
    p.add_argument("--interval", type=float, default=0.02)
    p.add_argument("--wait-ms", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()
    return run(a) if a.mode == "run" else verify(a)


if __name__ == "__main__":
    sys.exit(main())
