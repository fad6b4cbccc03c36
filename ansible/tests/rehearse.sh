#!/usr/bin/env bash
# The Ansible rehearsal (`just ansible-test N BACKEND`): builds what it needs,
# then onto N systemd containers: site.yml --check, site.yml, site.yml again
# (must change nothing), a config change through the restart handlers, the
# verify play, the failover drill (crash, then graceful) and the rolling
# upgrade with the background writer; tears everything down (KEEP=1 keeps it).
#
#   ansible/tests/rehearse.sh [N=3] [kevy|redis]
#
# Needs Docker and the local image elector-base:bookworm (scripts/build-images.sh
# builds it when missing); Ansible and ansible-lint come from PyPI into
# .cache/ansible-venv. Cargo builds honour CARGO_TARGET_DIR and CARGO_JOBS.
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

step "elector binary (cargo build --release -p elector)"
cargo build --release -p elector ${CARGO_JOBS:+-j "$CARGO_JOBS"}
target=${CARGO_TARGET_DIR:-$repo/target}
export ELECTOR_BIN=$target/release/elector

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
