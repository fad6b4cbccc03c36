#!/usr/bin/env python3
"""The Kubernetes manifests' preStop hook against a real 3-node lab (issue 36).

No cluster runs here (no kind/k3s images), so the rolling update's one step that
decides between a switchover and a failover is run as the kubelet would run it:
`prestop.sh`, taken verbatim from deploy/kubernetes/configmap.yaml, executed
inside the primary's container as the elector's user (the pod's runAsUser), with
the config at the path the manifests mount it (/etc/elector/elector.yaml, which
the lab's entrypoint also uses). Then, as the kubelet does after preStop, the
container gets SIGTERM (`docker stop`).

Passes when, per backend:
  - the hook returns within the pod's terminationGracePeriodSeconds (30 s);
  - by the time it returns, another node answers /primary (200) and the old one
    does not: the switchover finished *before* the pod would stop;
  - the new primary's last transition is a switchover, not a failover;
  - after the SIGTERM the primary and its epoch stay as they were (the stop
    causes no second election).

What it does not show: the kubelet itself, the StatefulSet controller's order
(highest ordinal first), Service endpoint updates, probes gating the next pod.

The drill can fail: `--control` runs it with a preStop hook that does not
hand over (it only exits 0, as the old hook did when it found no python3) and
passes only if the drill then fails, on the check that the primary moved
before the stop.

Usage (under the lab lock): flock /work/locks/lab.lock scripts/k8s-prestop-drill.py [--control] [kevy] [redis]
Env: NODE_IMAGE (default elector-node:latest).
"""

import json
import os
import subprocess
import sys
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRACE_S = 30.0


def log(msg):
    print(f"k8s-prestop-drill: {msg}", file=sys.stderr, flush=True)


def sh(*args, check=True, timeout=120):
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=timeout)


def prestop_script():
    with open(os.path.join(REPO, "deploy/kubernetes/configmap.yaml")) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc.get("kind") == "ConfigMap" and "prestop.sh" in doc.get("data", {}):
                return doc["data"]["prestop.sh"]
    raise SystemExit("k8s-prestop-drill: no prestop.sh in deploy/kubernetes/configmap.yaml")


def container(i):
    return f"elector-lab-n{i}"


def api(i, path):
    """(HTTP status, body) of the node's own API, asked from inside its container."""
    r = sh("docker", "exec", container(i), "curl", "-sS", "-o", "/dev/stdout", "-w", "\n%{http_code}",
           f"http://127.0.0.1:9300{path}", check=False, timeout=10)
    body, _, code = r.stdout.rpartition("\n")
    return (int(code) if code.isdigit() else 0), body


def primaries(nodes):
    return [i for i in nodes if api(i, "/primary")[0] == 200]


def status(i):
    code, body = api(i, "/status")
    return json.loads(body) if code == 200 else {}


# The negative control's hook: returns at once, hands nothing over.
SILENT_HOOK = "#!/bin/sh\n# does not hand over\nexit 0\n"


def drill(backend, script=None):
    env = dict(os.environ, SKIP_BUILD="1")
    log(f"{backend}: lab up (3 nodes, {env.get('NODE_IMAGE', 'elector-node:latest')})")
    subprocess.run([os.path.join(REPO, "scripts/lab.sh"), "up", "3", backend], check=True, env=env,
                   stdout=subprocess.DEVNULL, timeout=300)
    nodes = [1, 2, 3]
    try:
        deadline = time.monotonic() + 60
        while True:
            p = primaries(nodes)
            if len(p) == 1 and all(status(i).get("epoch") for i in nodes):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"k8s-prestop-drill: {backend}: no single primary: {p}")
            time.sleep(0.5)
        old = p[0]
        epoch_before = status(old).get("epoch")
        # Every replica caught up, as a running cluster's would be.
        time.sleep(3)
        script = script or prestop_script()
        subprocess.run(["docker", "exec", "-i", container(old), "sh", "-c", "cat > /tmp/prestop.sh"],
                       input=script, text=True, check=True)
        t0 = time.monotonic()
        hook = subprocess.run(["docker", "exec", "-u", "elector", container(old), "sh", "/tmp/prestop.sh"],
                              capture_output=True, text=True, timeout=GRACE_S + 5)
        took = time.monotonic() - t0
        after = primaries(nodes)
        log(f"{backend}: preStop on n{old} took {took * 1000:.0f} ms (exit {hook.returncode}); "
            f"primaries then: {['n%d' % i for i in after]}")
        for line in (hook.stdout + hook.stderr).strip().splitlines():
            log(f"{backend}:   hook: {line}")
        if took > GRACE_S:
            raise SystemExit(f"k8s-prestop-drill: {backend}: preStop took {took:.1f} s > {GRACE_S} s grace")
        if len(after) != 1 or after[0] == old:
            raise SystemExit(f"k8s-prestop-drill: {backend}: after preStop the primary is {after}, "
                             f"expected one node other than n{old}")
        new = after[0]
        st = status(new)
        epoch_after = st.get("epoch")
        # Why each side changed role: a planned handover says `switchover`; a
        # failover would say peer_timeout / won_election after a silence.
        became = [t for t in st.get("transitions", []) if t.get("to") == "primary" and t.get("from") != "primary"]
        left = [t for t in status(old).get("transitions", []) if t.get("from") == "primary" and t.get("to") != "primary"]
        why = (became[-1]["reason"] if became else None, left[-1]["reason"] if left else None)
        log(f"{backend}: n{new} became primary by {why[0]!r}, n{old} left it by {why[1]!r}")
        if "switchover" not in why:
            raise SystemExit(f"k8s-prestop-drill: {backend}: the handover is not a switchover: {why}")
        # The kubelet's SIGTERM after preStop.
        sh("docker", "stop", "-t", "10", container(old), timeout=30)
        time.sleep(5)
        survivors = [i for i in nodes if i != old]
        still = primaries(survivors)
        epoch_end = status(new).get("epoch")
        if still != [new] or epoch_end != epoch_after:
            raise SystemExit(f"k8s-prestop-drill: {backend}: after SIGTERM primaries {still}, epoch "
                             f"{epoch_after} -> {epoch_end}: the stop caused another election")
        log(f"{backend}: ok: n{old} -> n{new} by switchover before the stop (epoch {epoch_before} -> "
            f"{epoch_after}); SIGTERM to n{old} changed nothing (epoch {epoch_end})")
        return took
    finally:
        subprocess.run([os.path.join(REPO, "scripts/lab.sh"), "down"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)


def control(backend):
    """The drill with a hook that does not hand over must fail, and on the
    primary-moved check, not on something incidental."""
    try:
        drill(backend, script=SILENT_HOOK)
    except SystemExit as e:
        if "after preStop the primary is" not in str(e):
            raise SystemExit(f"k8s-prestop-drill: control: {backend}: failed for another reason: {e}")
        log(f"{backend}: control ok: a hook that does not hand over fails the drill ({e})")
        return
    raise SystemExit(f"k8s-prestop-drill: control: {backend}: a hook that does not hand over passed")


def main():
    args = sys.argv[1:]
    negative = "--control" in args
    backends = [a for a in args if a != "--control"] or ["kevy", "redis"]
    for b in backends:
        control(b) if negative else drill(b)
    log("ok")


if __name__ == "__main__":
    main()
