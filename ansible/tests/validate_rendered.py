#!/usr/bin/env python3
"""Checks the files tests/render.sh rendered for one inventory against the
contract in docs/interfaces.md (elector.yaml schema) and the data node rules
(start non-writable). Structural check only: `elector check-config` is the
authority and render.sh runs it too when the binary exists.

usage: validate_rendered.py OUT_DIR --backend kevy|redis --nodes N [--auth none|shared_key]
OUT_DIR holds one directory per inventory host (etc/elector/elector.yaml, ...).
"""
import argparse
import re
import sys
import tomllib
from pathlib import Path

import yaml

TOP = {"node_id", "cluster_name", "listen", "data_dir", "priority", "max_lag_bytes",
       "data_node", "peers", "timings", "auth", "hooks"}
REQUIRED_TOP = {"node_id", "listen", "data_dir", "data_node", "peers", "timings", "auth"}
LISTEN = {"election", "api", "sentinel"}
DATA_NODE = {"kind", "address", "replication_port_offset", "abort_stale_connects", "ack_nudge"}
PEER = {"id", "election", "data", "api"}
TIMINGS = {"hb_interval_ms", "down_after_ms", "election_timeout_ms", "backoff_min_ms",
           "backoff_max_ms", "data_poll_ms"}
HOOK_EVENTS = {"on_promote", "on_demote", "on_follow", "on_fence", "on_fault"}
HOSTPORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")
LISTEN_RE = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]*):(\d{1,5})$")

errors = []


def err(where, msg):
    errors.append(f"{where}: {msg}")


def check_keys(where, obj, allowed, required=()):
    if not isinstance(obj, dict):
        err(where, f"must be a mapping, got {type(obj).__name__}")
        return False
    for k in obj:
        if k not in allowed:
            err(where, f"unknown key {k!r}")
    for k in required:
        if k not in obj:
            err(where, f"missing key {k!r}")
    return True


def check_addr(where, value, listen=False):
    if not isinstance(value, str):
        err(where, f"must be a string host:port, got {value!r}")
        return
    m = (LISTEN_RE if listen else HOSTPORT).match(value)
    if not m or not 0 < int(m.group(2)) < 65536:
        err(where, f"not a {'listen ' if listen else ''}host:port: {value!r}")


def check_elector(path, backend, auth):
    doc = yaml.safe_load(path.read_text())
    w = str(path)
    if not check_keys(w, doc, TOP, REQUIRED_TOP):
        return None
    nid = doc.get("node_id")
    if not (isinstance(nid, str) and 0 < len(nid.encode()) <= 32 and nid.isascii()):
        err(w, f"node_id must be 1..32 ASCII bytes: {nid!r}")
    if "cluster_name" in doc and not isinstance(doc["cluster_name"], str):
        err(w, "cluster_name must be a string")
    if check_keys(f"{w}: listen", doc["listen"], LISTEN, ("election", "api")):
        for k, v in doc["listen"].items():
            check_addr(f"{w}: listen.{k}", v, listen=True)
    if not isinstance(doc["data_dir"], str) or not doc["data_dir"].startswith("/"):
        err(w, "data_dir must be an absolute path")
    for k in ("priority", "max_lag_bytes"):
        if k in doc and not (isinstance(doc[k], int) and doc[k] >= 0):
            err(w, f"{k} must be a non-negative integer")
    dn = doc["data_node"]
    if check_keys(f"{w}: data_node", dn, DATA_NODE, ("kind", "address")):
        if dn["kind"] != backend:
            err(w, f"data_node.kind is {dn['kind']!r}, expected {backend!r}")
        check_addr(f"{w}: data_node.address", dn["address"])
        if backend == "kevy" and dn.get("replication_port_offset") != 10000:
            err(w, "kevy: data_node.replication_port_offset should be 10000")
    peers = doc["peers"]
    if not isinstance(peers, list) or not peers:
        err(w, "peers must be a non-empty list")
        peers = []
    ids = []
    for i, p in enumerate(peers):
        if check_keys(f"{w}: peers[{i}]", p, PEER, ("id", "election", "data")):
            ids.append(p["id"])
            for k in ("election", "data", "api"):
                if k in p:
                    check_addr(f"{w}: peers[{i}].{k}", p[k])
    if len(ids) != len(set(ids)):
        err(w, f"duplicate peer ids: {ids}")
    if nid not in ids:
        err(w, f"node_id {nid!r} is not among the peers {ids} (peers must list every node)")
    if check_keys(f"{w}: timings", doc["timings"], TIMINGS, TIMINGS):
        for k, v in doc["timings"].items():
            if not (isinstance(v, int) and v > 0):
                err(w, f"timings.{k} must be a positive integer")
        t = doc["timings"]
        if isinstance(t.get("backoff_min_ms"), int) and isinstance(t.get("backoff_max_ms"), int) \
                and t["backoff_min_ms"] > t["backoff_max_ms"]:
            err(w, "timings.backoff_min_ms > backoff_max_ms")
    a = doc["auth"]
    if check_keys(f"{w}: auth", a, {"mode", "key", "key_file"}, ("mode",)):
        if a["mode"] != auth:
            err(w, f"auth.mode is {a['mode']!r}, expected {auth!r}")
        if a["mode"] == "shared_key":
            if ("key" in a) == ("key_file" in a):
                err(w, "shared_key needs exactly one of auth.key / auth.key_file")
            if "key_file" in a:
                kf = Path(a["key_file"])
                if not kf.is_file() or not kf.read_text().strip():
                    err(w, f"auth.key_file {kf} missing or empty")
                elif kf.stat().st_mode & 0o007:
                    err(w, f"auth.key_file {kf} is world-accessible")
        elif set(a) != {"mode"}:
            err(w, "auth.mode none takes no key")
    if "hooks" in doc:
        h = doc["hooks"]
        if check_keys(f"{w}: hooks", h, HOOK_EVENTS | {"timeout_ms"}):
            for k, v in h.items():
                if k in HOOK_EVENTS and not Path(v).is_file():
                    err(w, f"hooks.{k}: {v} does not exist")
    return doc


def check_datanode(host_dir, backend, data_port):
    if backend == "kevy":
        p = host_dir / "etc/kevy/kevy.toml"
        t = tomllib.loads(p.read_text())
        rep = t.get("replication", {})
        if rep.get("role") != "replica" or rep.get("upstream") != "127.0.0.1:1":
            err(str(p), "kevy must start as role=replica, upstream=127.0.0.1:1 (non-writable)")
        if t.get("server", {}).get("port") != data_port:
            err(str(p), f"server.port {t.get('server', {}).get('port')} != data port {data_port}")
        for section, keys in t.items():  # kevy rejects unknown sections/keys
            if section not in {"server", "persistence", "replication"}:
                err(str(p), f"unexpected section [{section}]")
    else:
        p = host_dir / "etc/redis/elector-datanode.conf"
        lines = [l.split() for l in p.read_text().splitlines() if l.strip() and not l.startswith("#")]
        if ["replicaof", "127.0.0.1", "1"] not in lines:
            err(str(p), "redis must start with 'replicaof 127.0.0.1 1' (non-writable)")
        if ["port", str(data_port)] not in lines:
            err(str(p), f"redis port is not {data_port}")
    unit = host_dir / "etc/systemd/system/elector-datanode.service"
    text = unit.read_text()
    if "Restart=on-failure" not in text:
        err(str(unit), "no Restart=on-failure")
    unit = host_dir / "etc/systemd/system/elector.service"
    text = unit.read_text()
    for needle in ("Restart=on-failure", "After=network-online.target elector-datanode.service",
                   "run --config "):
        if needle not in text:
            err(str(unit), f"missing {needle!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--backend", required=True, choices=["kevy", "redis"])
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--auth", default="none", choices=["none", "shared_key"])
    args = ap.parse_args()
    hosts = sorted(d for d in Path(args.out).iterdir() if d.is_dir())
    if len(hosts) != args.nodes:
        err(args.out, f"{len(hosts)} host directories, expected {args.nodes}")
    docs = {}
    for h in hosts:
        doc = check_elector(h / "etc/elector/elector.yaml", args.backend, args.auth)
        if doc is None:
            continue
        docs[h.name] = doc
        port = int(doc["data_node"]["address"].rsplit(":", 1)[1])
        check_datanode(h, args.backend, port)
    # Cross-node: one cluster, one peer list, every node listed once.
    peer_lists = {name: d["peers"] for name, d in docs.items()}
    first = next(iter(peer_lists.values()), [])
    for name, pl in peer_lists.items():
        if pl != first:
            err(name, "peers differ from the other nodes' peers")
    ids = sorted(d["node_id"] for d in docs.values())
    if sorted(p["id"] for p in first) != ids:
        err(args.out, f"peer ids {[p['id'] for p in first]} != node ids {ids}")
    if len(set(ids)) != len(ids):
        err(args.out, f"node ids not unique: {ids}")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    print(f"ok: {len(docs)} elector.yaml files match the documented schema; "
          f"peers identical on all nodes ({', '.join(ids)}); data nodes start non-writable")
    return 0


if __name__ == "__main__":
    sys.exit(main())
