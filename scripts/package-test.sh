#!/usr/bin/env bash
# The Debian package's life cycle in a throwaway container from our base image
# (elector-base:bookworm, --network none: dpkg fails unless every dependency is in it).
# dpkg -i, not apt-get install ./deb: apt 2.6 in the base image, whose package lists
# are empty, fails with "Internal Error, Pathname to install is not absolute".
#   dpkg -i elector_*.deb -> user, dirs, units, man pages present
#   -> start the unit's ExecStart as the unit's user -> /liveness answers
#   -> stop -> apt-get purge -> no user, group, file, dir or unit left.
# The base image has no systemd, so systemd cannot be PID 1 here: the units are
# checked with `systemd-analyze verify` on the host instead (against the
# unpacked package), and the ExecStart line is taken from the installed unit.
# Usage: scripts/package-test.sh target/debian/elector_<version>_amd64.deb
set -euo pipefail

DEB="${1:?usage: $0 path/to/elector_VERSION_amd64.deb}"
BASE_IMAGE="${BASE_IMAGE:-elector-base:bookworm}"
NAME="elector-package-test-$$"
log() { echo "package-test: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
[ -f "$DEB" ] || die "no such package: $DEB"

# 1. The units, offline, on the host: syntax, directives, the binary they name.
if command -v systemd-analyze >/dev/null 2>&1; then
  root="$(mktemp -d)"; trap 'rm -rf "$root"' EXIT
  dpkg-deb -x "$DEB" "$root"
  # verify resolves ExecStart= against the host: point it at the unpacked binary.
  for unit in elector.service elector-watchdog.service; do
    sed "s|/usr/bin/elector|$root/usr/bin/elector|g" "$root/lib/systemd/system/$unit" > "$root/$unit"
  done
  (cd "$root" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no ./elector.service ./elector-watchdog.service) \
    || die "systemd-analyze verify rejects the units"
  log "systemd-analyze verify: units ok"
  # The same units with the package's VIP drop-ins beside them (verify reads
  # drop-ins from the unit file's own directory).
  mkdir -p "$root/vip"
  cp "$root/elector.service" "$root/elector-watchdog.service" "$root/vip/"
  for unit in elector.service elector-watchdog.service; do
    [ -f "$root/usr/share/elector/systemd/$unit.d/vip.conf" ] || die "the package ships no VIP drop-in for $unit"
    cp -r "$root/usr/share/elector/systemd/$unit.d" "$root/vip/"
  done
  # An unknown key in a drop-in is only a warning to verify: any output fails here.
  out="$(cd "$root/vip" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no ./elector.service ./elector-watchdog.service 2>&1)" \
    || die "systemd-analyze verify rejects the units with the VIP drop-ins: $out"
  [ -z "$out" ] || die "systemd-analyze verify warns about the units with the VIP drop-ins: $out"
  log "systemd-analyze verify: units with the VIP drop-ins ok"
  # The sandbox's exposure, as systemd scores it (offline: the unit files
  # alone); the bar is 3.0 for both units.
  for unit in elector.service elector-watchdog.service; do
    score="$(cd "$root" && systemd-analyze security --offline=yes --no-pager "./$unit" 2>/dev/null \
      | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
    [ -n "$score" ] || die "systemd-analyze security gave no score for $unit"
    awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || die "$unit: systemd-analyze security $score > 3.0"
    log "systemd-analyze security --offline: $unit $score"
  done
else
  log "WARNING: no systemd-analyze on this host: units not verified"
fi

# The control file and the binary: tools recommended, debug symbols split off.
recommends="$(dpkg-deb -f "$DEB" Recommends)"
for tool in iproute2 iptables arping; do
  echo "$recommends" | grep -qw "$tool" || die "Recommends lacks $tool: $recommends"
done
size="$(dpkg-deb -c "$DEB" | awk '$NF == "./usr/bin/elector" { print $3 }')"
[ "${size:-0}" -lt $((20 * 1024 * 1024)) ] || die "usr/bin/elector is $size bytes: not stripped"
ddeb="$(ls -t "$(dirname "$DEB")"/elector-dbgsym_*.ddeb 2>/dev/null | head -1 || true)"
[ -n "$ddeb" ] && dpkg-deb -c "$ddeb" | grep -q '/usr/lib/debug/.build-id/.*\.debug' \
  || die "no elector-dbgsym .ddeb with the debug symbols beside $DEB"
log "Recommends: $recommends; /usr/bin/elector $size bytes; debug symbols in $(basename "$ddeb")"

cleanup() { docker rm -f "$NAME" >/dev/null 2>&1 || true; }
trap 'cleanup; rm -rf "${root:-}"' EXIT
docker run -d --name "$NAME" --network none -v "$(realpath "$DEB"):/tmp/elector.deb:ro" \
  --entrypoint sleep "$BASE_IMAGE" 600 >/dev/null
cx() { docker exec "$NAME" sh -euc "$1"; }

# 2. Install offline (--network none: everything it depends on is in the image).
cx 'mkdir -p /root/pkg && cp /tmp/elector.deb /root/pkg/elector.deb && cd /root/pkg && dpkg -i ./elector.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }' \
  || die "apt-get install failed"
cx 'getent passwd elector >/dev/null' || die "no elector user after install"
cx 'test "$(stat -c %U:%a /var/lib/elector)" = elector:750' || die "/var/lib/elector not elector-owned 0750"
cx 'grep -q "Upgrades never restart a running elector" /tmp/apt.log' || die "the install does not state the upgrade policy"
for f in /usr/bin/elector /lib/systemd/system/elector.service /lib/systemd/system/elector-watchdog.service \
         /etc/elector/elector.yaml.example /usr/share/man/man1/elector.1.gz /usr/share/man/man1/elector-run.1.gz \
         /usr/share/man/man5/elector.yaml.5.gz /usr/share/doc/elector/config-reference.md \
         /usr/share/doc/elector/runbooks/ElectorNoPrimary.md; do
  cx "test -e $f" || die "missing after install: $f"
done
version="$(cx 'elector --version')"
log "installed: $version"
echo "$version" | grep -Eq '^elector [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{7,}' || die "unexpected --version: $version"

# 3. Start it as the unit would (user, environment, working dir, ExecStartPre, ExecStart).
cx 'cp /etc/elector/elector.yaml.example /etc/elector/elector.yaml && chgrp elector /etc/elector/elector.yaml && chmod 640 /etc/elector/elector.yaml'
unit=/lib/systemd/system/elector.service
pre="$(cx "sed -n 's/^ExecStartPre=//p' $unit")"
start="$(cx "sed -n 's/^ExecStart=//p' $unit")"
cx "cd /var/lib/elector && setpriv --reuid=elector --regid=elector --init-groups $pre" || die "ExecStartPre failed: $pre"
docker exec -d -w /var/lib/elector -e ELECTOR_CONFIG=/etc/elector/elector.yaml "$NAME" \
  setpriv --reuid=elector --regid=elector --init-groups sh -c "exec $start >/tmp/elector.log 2>&1"
ok=""
for _ in $(seq 1 50); do
  if cx 'curl -fsS -o /dev/null http://127.0.0.1:9300/liveness' 2>/dev/null; then ok=1; break; fi
  sleep 0.2
done
[ -n "$ok" ] || { cx 'cat /tmp/elector.log' >&2 || true; die "/liveness did not answer within 10 s"; }
log "running as $(cx 'ps -o user= -C elector' | head -1): /liveness answers"
cx 'test -s /var/lib/elector/state.json || ls -A /var/lib/elector | grep -q .' || die "nothing written to the state dir"

# 4. Stop (SIGTERM, as systemctl stop), then purge.
cx 'pkill -TERM -x elector; for i in $(seq 1 50); do pgrep -x elector >/dev/null || exit 0; sleep 0.2; done; exit 1' \
  || die "the elector did not stop on SIGTERM within 10 s"
# An upgrade (the same package again) says it does not restart the elector.
cx 'cd /root/pkg && dpkg -i ./elector.deb >/tmp/upgrade.log 2>&1 && grep -q "does not restart it" /tmp/upgrade.log' \
  || die "an upgrade does not state that the running elector is not restarted"
# Purge keeps the durable vote (and says so); a reinstall resumes from it.
cx 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq elector >/tmp/purge.log 2>&1' || die "apt-get purge failed"
cx 'grep -q "kept /var/lib/elector" /tmp/purge.log && test -s /var/lib/elector/state.json' \
  || die "purge dropped the durable vote (or did not say it kept it)"
cx 'cd /root/pkg && dpkg -i ./elector.deb >/tmp/reinstall.log 2>&1 && grep -q "resumes with its durable epoch" /tmp/reinstall.log' \
  || die "a reinstall does not pick up the kept vote"
cx 'test "$(stat -c %U /var/lib/elector/state.json)" = elector' || die "the kept vote is not the new elector user's"
log "purge kept the vote; the reinstall resumes from it"
cx 'rm -rf /var/lib/elector && DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq elector >/dev/null' || die "apt-get purge failed"
left=""
cx 'getent passwd elector >/dev/null' && left="$left user"
cx 'getent group elector >/dev/null' && left="$left group"
for f in /usr/bin/elector /lib/systemd/system/elector.service /lib/systemd/system/elector-watchdog.service \
         /etc/elector /var/lib/elector /usr/share/man/man1/elector.1.gz /usr/share/doc/elector; do
  cx "test ! -e $f" || left="$left $f"
done
cx 'dpkg -s elector >/dev/null 2>&1' && left="$left dpkg-status"
[ -z "$left" ] || die "left after purge:$left"
log "ok: installed, started (/liveness), upgraded, purged keeping the vote, reinstalled, purged with nothing left"
