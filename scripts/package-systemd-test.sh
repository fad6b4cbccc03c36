#!/usr/bin/env bash
# The package under a real systemd, its sandbox in force (issue 36): a
# container from elector-base:bookworm with systemd as PID 1
# (image elector-systemd:bookworm, built here from Debian's systemd package;
# needs the Debian mirror once). Installs the .deb, starts both units, and shows:
#   - systemd-analyze security (online, the running units) <= 3.0 for both;
#   - inside the elector's own mount namespace, /var/lib/elector takes a write
#     and /etc does not (ProtectSystem=strict + StateDirectory=);
#   - the watchdog polls /healthz (elector_watchdog_last_probe_timestamp_seconds > 0).
# Not part of `just test` (privileged container, a network fetch on first use).
# Usage: scripts/package-systemd-test.sh target/debian/elector_<version>_amd64.deb
set -euo pipefail
DEB="${1:?usage: $0 path/to/elector_VERSION_amd64.deb}"
IMAGE="${SYSTEMD_IMAGE:-elector-systemd:bookworm}"
NAME="elector-systemd-test-$$"
log() { echo "package-systemd-test: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  ctx="$(mktemp -d)"
  cat > "$ctx/Dockerfile" <<'EOF'
FROM elector-base:bookworm
RUN export DEBIAN_FRONTEND=noninteractive && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends systemd systemd-sysv dbus iproute2 procps >/dev/null \
 && rm -rf /var/lib/apt/lists/*
STOPSIGNAL SIGRTMIN+3
CMD ["/sbin/init"]
EOF
  log "building $IMAGE"
  docker build -q -t "$IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
fi

cleanup() { docker rm -f "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# Not --privileged (refused where Docker itself runs confined): systemd as PID 1
# needs CAP_SYS_ADMIN for its mounts and namespaces, the elector's unit asks for
# CAP_NET_ADMIN, and nsenter into the unit's namespace needs CAP_SYS_PTRACE.
docker run -d --name "$NAME" --cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_PTRACE \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --cgroupns=private --tmpfs /run --tmpfs /run/lock \
  -v "$(realpath "$DEB"):/tmp/elector.deb:ro" "$IMAGE" >/dev/null
cx() { docker exec "$NAME" sh -euc "$1"; }
for _ in $(seq 1 50); do
  state="$(docker exec "$NAME" systemctl is-system-running 2>/dev/null || true)"
  case "$state" in running|degraded) break ;; esac
  sleep 0.2
done
log "systemd in the container: ${state:-unknown}"

cx 'dpkg -i /tmp/elector.deb >/tmp/install.log 2>&1' || { cx 'cat /tmp/install.log' >&2; die "dpkg -i failed"; }
cx 'cp /etc/elector/elector.yaml.example /etc/elector/elector.yaml && chgrp elector /etc/elector/elector.yaml && chmod 640 /etc/elector/elector.yaml'
cx 'systemctl enable --now elector.service >/dev/null 2>&1' || die "systemctl enable --now elector failed"
ok=""
for _ in $(seq 1 50); do
  if cx 'curl -fsS -o /dev/null http://127.0.0.1:9300/liveness' 2>/dev/null; then ok=1; break; fi
  sleep 0.2
done
[ -n "$ok" ] || { cx 'journalctl -u elector --no-pager | tail -30' >&2 || true; die "/liveness did not answer under systemd"; }
cx 'systemctl is-active elector-watchdog.service >/dev/null' || die "the watchdog unit is not active"
log "both units active under systemd"

for unit in elector.service elector-watchdog.service; do
  score="$(cx "systemd-analyze security --no-pager $unit" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
  awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || die "$unit: systemd-analyze security $score > 3.0"
  log "systemd-analyze security (running unit): $unit $score"
done

pid="$(cx 'systemctl show -p MainPID --value elector.service')"
cx "nsenter -t $pid -m sh -c 'touch /var/lib/elector/.sandbox-probe && rm /var/lib/elector/.sandbox-probe'" \
  || die "the state dir takes no write in the elector's namespace"
if out="$(cx "nsenter -t $pid -m touch /etc/elector/.sandbox-probe" 2>&1)"; then
  die "a write to /etc/elector succeeded inside the elector's sandbox"
fi
echo "$out" | grep -q "Read-only file system" || die "unexpected refusal: $out"
log "inside the elector's mount namespace: /var/lib/elector writable, /etc/elector: $out"

for _ in $(seq 1 25); do
  stamp="$(cx 'curl -fsS http://127.0.0.1:9300/metrics' | sed -n 's/^elector_watchdog_last_probe_timestamp_seconds{[^}]*} //p')"
  awk -v s="${stamp:-0}" 'BEGIN { exit !(s > 0) }' && break
  sleep 0.2
done
awk -v s="${stamp:-0}" 'BEGIN { exit !(s > 0) }' || die "no watchdog probe stamped (elector_watchdog_last_probe_timestamp_seconds ${stamp:-absent})"
log "the watchdog polls /healthz under its sandbox (last probe $stamp)"
log "ok"
