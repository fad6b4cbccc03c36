#!/usr/bin/env python3
"""The shipped alert rules, proven by a real Prometheus (issue 24, item 2; `just
monitoring-test`).

For each backend given (default: kevy redis): start a 3-node lab with LAB_MONITORING=1
(scripts/lab.sh: a Prometheus from Debian's package scraping every elector each second
and evaluating deploy/prometheus/elector-rules.yml), then, asking Prometheus's HTTP API
only:

  1. the cluster is quiet: one writable primary (elector:writable_primaries:sum == 1)
     and no elector alert pending or firing;
  2. SIGKILL the primary's container: ElectorPeerUnreachable{peer=<old primary>} must
     go pending and then firing on every survivor (rule `for: 30s`), a new writable
     primary must appear, and ElectorNoPrimary / ElectorMultiplePrimaries must never
     fire (a failover is shorter than their `for:`);
  3. start the old primary again: every ElectorPeerUnreachable must resolve (leave
     /api/v1/alerts) and the cluster must have one writable primary.

The lab is always taken down at the end, and a lab that was running before (`just lab-up`)
is brought back with the same settings. Prints the times from the kill to firing and
from the restart to resolution. Exit 0 when every backend passed, 1 otherwise.
Env: LAB_PROM_PORT (default 9090), NODE_IMAGE, LAB_SUBNET_PREFIX (passed to lab.sh).
Standard library only."""
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB = os.path.join(REPO, "scripts", "lab.sh")
LAB_PROJECT = "elector-lab"  # scripts/lab.sh PROJECT
PORT = int(os.environ.get("LAB_PROM_PORT", "9090"))
FIRE_TIMEOUT_S = 90      # ElectorPeerUnreachable has `for: 30s`; a minute of slack
RESOLVE_TIMEOUT_S = 90
NEVER_FIRING = ("ElectorNoPrimary", "ElectorMultiplePrimaries")


class Failed(Exception):
    pass


def log(msg):
    print("monitoring-test: " + msg, file=sys.stderr, flush=True)


def prom(path, **params):
    url = "http://127.0.0.1:{}{}".format(PORT, path)
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=3) as r:
        doc = json.loads(r.read().decode())
    if doc.get("status") != "success":
        raise Failed("Prometheus {} answered {}".format(path, doc))
    return doc["data"]


def query(expr):
    return prom("/api/v1/query", query=expr)["result"]


def elector_alerts():
    """Active (pending or firing) alerts of the elector rules."""
    return [a for a in prom("/api/v1/alerts")["alerts"]
            if a["labels"].get("alertname", "").startswith("Elector")]


def writable_primaries():
    """The nodes Prometheus last saw as unfenced primaries."""
    rows = query('elector_role{role="primary"} == 1 unless on (node) elector_fenced == 1')
    return sorted(r["metric"]["node"] for r in rows)


def show(alert):
    lab = alert["labels"]
    return "{}{{node={},peer={}}} {}".format(
        lab.get("alertname"), lab.get("node", "-"), lab.get("peer", "-"), alert["state"])


def poll(what, timeout_s, check):
    """Calls check() every second until it returns a true value; Failed on timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        got = check()
        if got:
            return got, time.monotonic() - t0
        time.sleep(1)
    raise Failed("timed out after {} s waiting for {}".format(timeout_s, what))


def forbid_never_firing(alerts):
    bad = [show(a) for a in alerts if a["labels"]["alertname"] in NEVER_FIRING and a["state"] == "firing"]
    if bad:
        raise Failed("an alert that a failover must not raise fired: {}".format(bad))


def lab(*args, env=None):
    subprocess.run([LAB] + list(args), check=True, env=env)


def run_backend(backend):
    env = dict(os.environ, LAB_MONITORING="1", LAB_PROM_PORT=str(PORT))
    t_up = time.monotonic()
    lab("up", "3", backend, env=env)
    log("{}: lab with Prometheus up in {:.0f} s".format(backend, time.monotonic() - t_up))

    # 1. quiet: one writable primary, no elector alert at all (start-up pendings clear).
    def quiet():
        prims = writable_primaries()
        return prims if len(prims) == 1 and not elector_alerts() else None
    (old,), waited = poll("a quiet cluster (one writable primary, no alert)", 60, quiet)
    log("{}: quiet after {:.0f} s; Prometheus sees primary {}".format(backend, waited, old))

    # 2. kill the primary; the survivors' PeerUnreachable about it must fire.
    survivors = {"n1", "n2", "n3"} - {old}
    lab("kill", old)
    t_kill = time.monotonic()
    seen = {"pending": None, "new_primary": None}

    def fired():
        alerts = elector_alerts()
        forbid_never_firing(alerts)
        now = time.monotonic() - t_kill
        about_old = [a for a in alerts if a["labels"]["alertname"] == "ElectorPeerUnreachable"
                     and a["labels"].get("peer") == old]
        if about_old and seen["pending"] is None:
            seen["pending"] = now
        prims = writable_primaries()
        if seen["new_primary"] is None and len(prims) == 1 and prims[0] != old:
            seen["new_primary"] = (prims[0], now)
        firing = {a["labels"].get("node") for a in about_old if a["state"] == "firing"}
        return about_old if firing >= survivors and seen["new_primary"] else None
    about_old, t_fire = poll("ElectorPeerUnreachable{{peer={}}} firing on {}".format(old, sorted(survivors)),
                             FIRE_TIMEOUT_S, fired)
    log("{}: after the kill of {}: new primary {} seen at {:.1f} s, pending at {:.1f} s, firing at {:.1f} s: {}".format(
        backend, old, seen["new_primary"][0], seen["new_primary"][1], seen["pending"], t_fire,
        ", ".join(show(a) for a in about_old)))

    # 3. the old primary returns: every PeerUnreachable resolves.
    lab("start", old)

    def resolved():
        alerts = elector_alerts()
        forbid_never_firing(alerts)
        left = [a for a in alerts if a["labels"]["alertname"] == "ElectorPeerUnreachable"]
        return True if not left and len(writable_primaries()) == 1 else None
    _, t_resolve = poll("every ElectorPeerUnreachable resolved", RESOLVE_TIMEOUT_S, resolved)
    firing_now = query('ALERTS{alertname="ElectorPeerUnreachable",alertstate="firing"}')
    if firing_now:
        raise Failed("ALERTS still has firing ElectorPeerUnreachable series: {}".format(firing_now))
    log("{}: {} restarted: alerts resolved after {:.1f} s; writable primary {}".format(
        backend, old, t_resolve, writable_primaries()[0]))
    return {"backend": backend, "killed": old, "new_primary": seen["new_primary"][0],
            "new_primary_s": round(seen["new_primary"][1], 1), "pending_s": round(seen["pending"], 1),
            "firing_s": round(t_fire, 1), "resolved_s": round(t_resolve, 1)}


def running_lab():
    """The lab an operator left running (`just lab-up`), as lab.sh recorded it, so
    the test can bring it back afterwards instead of leaving it down: the README's
    set-up brings a lab up and then runs the tests, which include this one."""
    names = subprocess.run(
        ["docker", "ps", "-q", "--filter", "label=com.docker.compose.project=" + LAB_PROJECT],
        capture_output=True, text=True, check=False).stdout.split()
    state = {}
    try:
        with open(os.path.join(REPO, ".lab", "state")) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                state[key] = value
    except OSError:
        return None
    return state if names and state.get("LAB_N") else None


def restore_lab(state):
    env = dict(os.environ, SKIP_BUILD="1",
               LAB_VIP=state.get("LAB_STATE_VIP", ""),
               LAB_MONITORING=state.get("LAB_MONITORING_ON", "0"),
               LAB_SUBNET_PREFIX=state.get("LAB_PREFIX", "10.77.0"))
    log("bringing back the lab that was running before: {} nodes, {}".format(
        state["LAB_N"], state.get("LAB_BACKEND", "kevy")))
    subprocess.run([LAB, "up", state["LAB_N"], state.get("LAB_BACKEND", "kevy")],
                   check=False, env=env)


def main(argv):
    backends = argv or ["kevy", "redis"]
    for b in backends:
        if b not in ("kevy", "redis"):
            log("backend must be kevy or redis, got {!r}".format(b))
            return 2
    results, failed = [], []
    before = running_lab()
    for b in backends:
        t0 = time.monotonic()
        try:
            r = run_backend(b)
            r["wall_s"] = round(time.monotonic() - t0)
            results.append(r)
        except (Failed, subprocess.CalledProcessError, OSError, ValueError, KeyError) as e:
            log("{}: FAIL: {}".format(b, e))
            failed.append(b)
        finally:
            subprocess.run([LAB, "down"], check=False)
    if before:
        restore_lab(before)
    for r in results:
        print(json.dumps(r))
    if failed:
        log("FAIL on {}".format(", ".join(failed)))
        return 1
    log("PASS ({})".format(", ".join(backends)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
