#!/usr/bin/env bash
# The README's first command, for a bare Debian/Ubuntu machine (Docker Engine
# and a Rust toolchain present, `just` not needed):
#   scripts/lab-up.sh [N=3] [kevy|redis]
# installs what is missing (scripts/install-deps.sh: Debian packages, just,
# kevy 7.0.0; idempotent, quick when everything is there), then builds the
# missing images, starts an N-node lab and waits for a primary (scripts/lab.sh up).
# `just lab-up` runs this script.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null || { echo "lab-up: ERROR: no Rust toolchain (cargo) on PATH: install it with rustup first" >&2; exit 1; }
command -v docker >/dev/null && docker info >/dev/null 2>&1 \
  || { echo "lab-up: ERROR: Docker Engine not reachable (docker info failed): install and start it first" >&2; exit 1; }
"$repo/scripts/install-deps.sh"
exec "$repo/scripts/lab.sh" up "${1:-3}" "${2:-kevy}"
