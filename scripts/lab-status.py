#!/usr/bin/env python3
"""Prints the lab table (node, container, role, epoch, primary, client address, how to
connect) from each node's elector API (http://127.0.0.1:930i/status) and `docker inspect`.
With --wait SECS, polls until a primary is elected (one node reports role=primary, not
fenced, its data node already a master, and at least a quorum of the nodes whose API
answers agree on it), then prints the
table; exits 1 with a clear message on timeout.

Standard library only (python3 >= 3.7)."""
import argparse
import json
import ssl
import subprocess
import sys
import time
import urllib.request

API_BASE = 9300
CLIENT_BASE = 6000
CONTAINER = "elector-lab-n{}"
# A TLS lab (LAB_TLS=1): the CA of .lab/tls, which the APIs' certificates chain to
# (they carry IP 127.0.0.1, the host side of the published ports).
TLS_CA = None


def container_state(i):
    try:
        out = subprocess.run(
            ["docker", "inspect", "-f",
             "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}",
             CONTAINER.format(i)],
            capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    if out.returncode != 0:
        return "absent"
    parts = out.stdout.split()
    if len(parts) == 2 and parts[0] == "running":
        return "up/" + parts[1]       # up/healthy, up/starting, up/unhealthy
    return parts[0] if parts else "?"


def fetch_status(i, timeout=1.0):
    scheme = "https" if TLS_CA else "http"
    url = "{}://127.0.0.1:{}/status".format(scheme, API_BASE + i)
    context = ssl.create_default_context(cafile=TLS_CA) if TLS_CA else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as r:
            return json.loads(r.read().decode())
    except Exception as e:  # noqa: BLE001 - any failure = no answer
        return {"_error": type(e).__name__}


def snapshot(n):
    rows = []
    for i in range(1, n + 1):
        st = fetch_status(i)
        rows.append((i, container_state(i), st))
    return rows


def elected(rows, n):
    """The elected primary's id, or None."""
    quorum = n // 2 + 1
    answered = [st for _, _, st in rows if "_error" not in st]
    primaries = [st for st in answered if st.get("role") == "primary" and not st.get("fenced", False)
                 and (st.get("data_node") or {}).get("role", "master") == "master"]
    if len(primaries) != 1:
        return None
    pid = primaries[0].get("node_id")
    agree = [st for st in answered if st.get("node_id") == pid or st.get("primary") == pid]
    return pid if len(agree) >= quorum else None


def table(rows, witnesses=()):
    head = ["NODE", "CONTAINER", "ROLE", "EPOCH", "PRIMARY", "FENCED", "DATA NODE", "CLIENT", "CONNECT"]
    lines = []
    for i, cstate, st in rows:
        node = "n{}".format(i)
        if node in witnesses:
            # A witness: an elector with no data node (docs/protocol.md §4.5).
            if "_error" in st:
                role, epoch, prim = "-", "-", "-"
            else:
                role = "witness ({})".format(st.get("role", "?"))
                epoch = str(st.get("epoch", "?"))
                prim = str(st.get("primary") or "-")
            curl = ("curl --cacert {} https://127.0.0.1:{}/status".format(TLS_CA, API_BASE + i)
                    if TLS_CA else "curl 127.0.0.1:{}/status".format(API_BASE + i))
            lines.append([node, cstate, role, epoch, prim, "-", "none (votes only)", "-", curl])
            continue
        if "_error" in st:
            role, epoch, prim, fenced, data = "-", "-", "-", "-", "(no API answer)"
        else:
            role = str(st.get("role", "?"))
            epoch = str(st.get("epoch", "?"))
            prim = str(st.get("primary") or "-")
            fenced = "yes" if st.get("fenced") else "no"
            dn = st.get("data_node") or {}
            if dn.get("reachable", True) is False:
                data = "unreachable"
            else:
                data = "{} {}".format(dn.get("kind", ""), dn.get("role", "?")).strip()
        cli = "redis-cli -p {}".format(CLIENT_BASE + i)
        if TLS_CA:
            cli = "redis-cli --tls --cacert {} -p {}".format(TLS_CA, CLIENT_BASE + i)
        lines.append(["n{}".format(i), cstate, role, epoch, prim, fenced, data,
                      "127.0.0.1:{}".format(CLIENT_BASE + i), cli])
    widths = [max(len(r[c]) for r in [head] + lines) for c in range(len(head))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    out = [fmt.format(*head)] + [fmt.format(*r) for r in lines]
    return "\n".join(s.rstrip() for s in out)


def vip_line(rows):
    """Who holds the lab's VIP (docs/vip.md), from each elector's /status `vip`
    object; None when no node reports a VIP (a lab without LAB_VIP)."""
    vips = [(i, st["vip"]) for i, _, st in rows if isinstance(st.get("vip"), dict)]
    if not vips:
        return None
    address = vips[0][1].get("address", "?")
    holders = [(i, v) for i, v in vips if v.get("held")]
    if not holders:
        last = [v.get("last_error") for _, v in vips if v.get("last_error")]
        return "vip: {} held by no node{}".format(
            address, " (last error: {})".format(last[0]) if last else "")
    parts = []
    for i, v in holders:
        since = v.get("since_unix_ms")
        ago = " for {:.1f}s".format(max(0.0, time.time() - since / 1000.0)) if since else ""
        parts.append("n{} ({}{})".format(i, v.get("reason", "?"), ago))
    host = address.split("/")[0]
    more = "  TWO HOLDERS" if len(holders) > 1 else ""
    return "vip: {} held by {}; connect: redis-cli -h {} -p 6379{}".format(
        address, ", ".join(parts), host, more)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, required=True, help="number of lab nodes")
    ap.add_argument("--wait", type=float, default=0, help="seconds to wait for an elected primary")
    ap.add_argument("--json", action="store_true", help="print the raw /status documents")
    ap.add_argument("--witnesses", default="", help="comma-separated witness ids (no data node)")
    ap.add_argument("--tls-ca", default="", help="a TLS lab: the CA file the APIs chain to")
    a = ap.parse_args()
    global TLS_CA
    TLS_CA = a.tls_ca or None
    witnesses = tuple(w for w in a.witnesses.split(",") if w)

    if a.wait > 0:
        deadline = time.monotonic() + a.wait
        start = time.monotonic()
        while True:
            rows = snapshot(a.n)
            pid = elected(rows, a.n)
            if pid:
                print("lab: primary {} elected ({:.1f}s of waiting)".format(pid, time.monotonic() - start))
                break
            if time.monotonic() >= deadline:
                print(table(rows, witnesses))
                print("lab: ERROR: no primary elected within {:.0f}s (see the table above and "
                      "`docker logs elector-lab-nI`)".format(a.wait), file=sys.stderr)
                return 1
            time.sleep(0.5)
    else:
        rows = snapshot(a.n)
        pid = elected(rows, a.n)
    if a.json:
        print(json.dumps({"n{}".format(i): st for i, _, st in rows}, indent=2))
    else:
        print(table(rows, witnesses))
        if not a.wait:
            print("primary: {}".format(pid or "none elected (or no quorum agrees)"))
        line = vip_line(rows)
        if line:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
