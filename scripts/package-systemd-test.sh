#!/usr/bin/env bash
# The package under a real systemd, its sandbox in force (issue 36): a
# container from elector-base:bookworm with systemd as PID 1
# (image elector-systemd:bookworm, built here from Debian's systemd package;
# needs the Debian mirror once). Installs the .deb, starts both units, and shows:
#   - systemd-analyze security (online, the running units) <= 3.0 for both;
#   - inside the elector's own mount namespace, /var/lib/elector takes a write
#     and /etc does not (ProtectSystem=strict + StateDirectory=);
#   - the watchdog polls /healthz (elector_watchdog_last_probe_timestamp_seconds > 0);
#   - without a VIP: the elector's bounding set is CAP_NET_ADMIN CAP_NET_BIND_SERVICE,
#     the watchdog's empty; with a VIP in the config and no drop-ins both units refuse
#     to start; with the package's VIP drop-ins the elector, as user elector, adds the
#     VIP and announces it (arping), and the watchdog removes it when the elector is
#     frozen (SIGSTOP) past its lease.
# What it cannot show: the container's seccomp/AppArmor are off and systemd may skip
# sandboxing the container's kernel refuses (it logs that, the unit still starts);
# the network is a Docker bridge, so the gratuitous ARP reaches no real switch.
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

# Least privilege without a VIP: the elector's bounding set is CAP_NET_ADMIN
# (bit 12) and CAP_NET_BIND_SERVICE (bit 10), the watchdog's is empty.
capbnd() { cx "awk '/^CapBnd:/ { print \$2 }' /proc/\$(systemctl show -p MainPID --value $1)/status"; }
[ "$(capbnd elector.service)" = 0000000000001400 ] || die "elector.service bounding set $(capbnd elector.service), expected CAP_NET_ADMIN CAP_NET_BIND_SERVICE"
[ "$(capbnd elector-watchdog.service)" = 0000000000000000 ] || die "elector-watchdog.service bounding set $(capbnd elector-watchdog.service), expected empty"
log "without a VIP: elector CapBnd 0x1400 (NET_ADMIN NET_BIND_SERVICE), watchdog CapBnd 0 (none)"

# A VIP on eth0 (a single-node cluster on the image's own redis-server, so the
# elector is elected and adds it): without the package's VIP drop-ins both
# units must refuse to start, naming the drop-ins.
VIP=10.199.0.100
cx 'systemctl stop elector.service elector-watchdog.service'
cx 'systemctl is-active -q redis-server.service || systemctl start redis-server.service'
cx "cat > /etc/elector/elector.yaml <<EOF
node_id: n1
cluster_name: mymaster
listen: { election: \"127.0.0.1:7400\", api: \"0.0.0.0:9300\", sentinel: \"127.0.0.1:26379\" }
data_dir: /var/lib/elector
data_node: { kind: redis, address: \"127.0.0.1:6379\" }
peers:
  - { id: n1, election: \"127.0.0.1:7400\", data: \"127.0.0.1:6379\", api: \"127.0.0.1:9300\" }
vip: { address: \"$VIP/32\", interface: eth0 }
auth: { mode: none }
EOF"
cx 'systemctl reset-failed elector.service elector-watchdog.service 2>/dev/null || true'
if cx 'systemctl start elector.service' 2>/dev/null; then
  die "elector.service started with a VIP and without the VIP drop-in"
fi
journal="$(cx 'journalctl -u elector.service --no-pager -n 20')"
grep -q "CAP_NET_RAW; install the package's VIP drop-ins" <<<"$journal" \
  || die "elector.service's refusal does not name the VIP drop-ins"
if cx 'systemctl start elector-watchdog.service' 2>/dev/null; then
  die "elector-watchdog.service started with a VIP and without the VIP drop-in"
fi
journal="$(cx 'journalctl -u elector-watchdog.service --no-pager -n 20')"
grep -q "CAP_NET_ADMIN CAP_NET_RAW; install" <<<"$journal" \
  || die "elector-watchdog.service's refusal does not name the missing capabilities"
log "with a VIP and no drop-ins: both units refuse to start (check-config names the drop-ins)"

cx 'for u in elector elector-watchdog; do install -D -m 0644 /usr/share/elector/systemd/$u.service.d/vip.conf /etc/systemd/system/$u.service.d/vip.conf; done; systemctl daemon-reload'
cx 'systemctl reset-failed elector.service elector-watchdog.service 2>/dev/null || true'
cx 'systemctl start elector.service' || { cx 'journalctl -u elector --no-pager | tail -20' >&2 || true; die "elector.service did not start with the VIP drop-in"; }
# /status says held once the whole plan ran: the address, then arping's three
# announcements (about 2 s).
vip_status() { cx 'curl -fsS http://127.0.0.1:9300/status' | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("vip")))'; }
for _ in $(seq 1 100); do
  vip_json="$(vip_status 2>/dev/null || true)"
  case "$vip_json" in *'"held": true'*) break ;; esac
  sleep 0.2
done
cx "ip -o addr show dev eth0 | grep -q ' $VIP/32 '" \
  || die "the elector (user elector, drop-in caps) did not add $VIP: $vip_json"
# arping runs under its 2 s step timeout (vip/mod.rs) while `-U -c 3` takes
# about as long: a timed-out announcement has sent its ARPs. Without CAP_NET_RAW
# it fails at once ("socket: Operation not permitted"): any other arping error fails here.
announce_errors="$(cx 'journalctl -u elector --no-pager' | grep 'announcement or client kill failed' | grep -v 'timed out' || true)"
[ -z "$announce_errors" ] || die "the gratuitous ARP failed under the unit: $announce_errors"
echo "$vip_json" | python3 -c 'import json,sys; v=json.load(sys.stdin); sys.exit(0 if v["held"] and v["failures"] == 0 else 1)' \
  || { cx 'journalctl -u elector --no-pager | grep -i vip | tail -5' >&2 || true; die "the VIP move or its gratuitous ARP failed under the unit: $vip_json"; }
cx 'systemctl is-active -q elector-watchdog.service' || die "the watchdog did not start with its VIP drop-in"
log "with the drop-ins: the elector added $VIP and announced it (arping, CAP_NET_RAW): $vip_json"
for unit in elector.service elector-watchdog.service; do
  score="$(cx "systemd-analyze security --no-pager $unit" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
  log "systemd-analyze security with the VIP drop-in: $unit $score"
done

# The watchdog's own move: freeze the elector (SIGSTOP); past its lease the
# watchdog fences redis and removes the VIP the frozen elector still holds.
epid="$(cx 'systemctl show -p MainPID --value elector.service')"
cx "kill -STOP $epid"
gone=""
for _ in $(seq 1 300); do
  if ! cx "ip -o addr show dev eth0 | grep -q ' $VIP/32 '" 2>/dev/null; then gone=1; break; fi
  sleep 0.2
done
cx "kill -CONT $epid"
[ -n "$gone" ] || { cx 'journalctl -u elector-watchdog --no-pager | tail -20' >&2 || true; die "the watchdog did not remove $VIP from a frozen elector"; }
journal="$(cx 'journalctl -u elector-watchdog.service --no-pager')"
! grep -q "removing the vip failed" <<<"$journal" \
  || die "the watchdog logged a failed VIP removal"
log "the watchdog (user elector, drop-in caps) removed $VIP from the frozen elector's host"
log "ok"
