#!/usr/bin/env bash
# The Ansible rehearsal (`just ansible-test N BACKEND`): builds what it needs,
# then onto N systemd containers: site.yml --check, site.yml, site.yml again
# (must change nothing), a config change through the restart handlers, the
# verify play, the failover drill (crash, then graceful) and the rolling
# upgrade to a newer elector package with the background writer; tears
# everything down (KEEP=1 keeps it). The elector goes on as its Debian package
# (just package); a virtual IP (VIP=none to leave it out) is checked to follow the primary.
#
#   ansible/tests/rehearse.sh [N=3] [kevy|redis]
#
# Needs Docker and the local image elector-base:bookworm (scripts/build-images.sh
# builds it when missing); Ansible and ansible-lint come from PyPI into
# .cache/ansible-venv. Cargo builds honour CARGO_TARGET_DIR and CARGO_JOBS.
# ELECTOR_DEB and ELECTOR_DEB_UPGRADE (both set): deploy these packages instead of
# building them (the upgrade one must carry a newer version).
set -euo pipefail
nodes=${1:-3}
backend=${2:-kevy}
case "$backend" in kevy|redis) ;; *) echo "rehearse: backend kevy|redis" >&2; exit 2;; esac
case "$nodes" in ''|*[!0-9]*) echo "rehearse: N must be a number" >&2; exit 2;; esac
ansible_dir=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$ansible_dir/.." && pwd)
venv=${ANSIBLE_VENV:-$repo/.cache/ansible-venv}
export PATH="$HOME/.cargo/bin:$PATH"
start=$(date +%s)
step() { echo "=== rehearse: $* ($(( $(date +%s) - start )) s)"; }

step "Ansible venv ($venv)"
if ! [ -x "$venv/bin/ansible-lint" ] || ! ls -d "$venv"/lib/python3*/site-packages/ansible_collections/community/docker >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q ansible ansible-lint
fi

step "ansible-lint"
(cd "$ansible_dir" && "$venv/bin/ansible-lint" -q)

target=${CARGO_TARGET_DIR:-$repo/target}
if [ -n "${ELECTOR_DEB:-}" ] && [ -n "${ELECTOR_DEB_UPGRADE:-}" ]; then
  step "elector packages given: $ELECTOR_DEB -> $ELECTOR_DEB_UPGRADE"
  export ELECTOR_DEB ELECTOR_DEB_UPGRADE
else
step "elector package (just package) and a newer one for the upgrade (cargo deb --deb-revision)"
[ -z "${CARGO_JOBS:-}" ] || export CARGO_BUILD_JOBS="$CARGO_JOBS"
(cd "$repo" && just package) >/dev/null
# Both packages are kept aside: cargo deb clears what it made before.
pkgs="$target/ansible-rehearsal"
rm -rf "$pkgs" && mkdir -p "$pkgs/upgrade"
cp "$(ls -t "$target"/debian/elector_*_amd64.deb | head -1)" "$pkgs/"
ELECTOR_DEB=$(ls "$pkgs"/elector_*_amd64.deb)
# The same build under a higher Debian revision: what an operator's next package
# looks like to apt (a newer version), so the upgrade really upgrades.
rev="$(date -u +%Y%m%d%H%M%S)"
(cd "$repo" && cargo deb -p elector --no-build --deb-revision "$rev" -o "$pkgs/upgrade/") >/dev/null 2>&1
ELECTOR_DEB_UPGRADE=$(ls "$pkgs"/upgrade/elector_*_amd64.deb)
export ELECTOR_DEB ELECTOR_DEB_UPGRADE
echo "   $(basename "$ELECTOR_DEB") -> $(basename "$ELECTOR_DEB_UPGRADE")"
fi

if [ "$backend" = kevy ] && ! kevy --version 2>/dev/null | grep -q '7\.0\.0'; then
  step "kevy 7.0.0 (scripts/install-deps.sh)"
  "$repo/scripts/install-deps.sh"
fi
if ! docker image inspect elector-base:bookworm >/dev/null 2>&1; then
  step "base image (scripts/build-images.sh)"
  "$repo/scripts/build-images.sh"
fi

step "deploy, drill and upgrade on $nodes systemd containers ($backend)"
REHEARSE=1 ANSIBLE_VENV="$venv" "$ansible_dir/tests/docker-deploy.sh" "$backend" "$nodes" systemd
step "PASS"
