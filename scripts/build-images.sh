#!/usr/bin/env bash
# Builds the lab images, incrementally and without any image registry:
#   elector-base:bookworm  debootstrap + docker import (scripts/build-base-image.sh;
#                          skipped when present)
#   elector-node:latest    base + kevy (host build, scripts/install-deps.sh) + elector +
#                          elector-faulty (cargo build --release on the host, one target
#                          dir) + entrypoint
# Binaries are staged in .cache/node-context; the image is rebuilt only when the staged
# context changed (its sha256 is kept as an image label).
#
# Env: NODE_IMAGE (default elector-node:latest), BASE_IMAGE, CARGO (default cargo),
#      SKIP_ELECTOR=1 (development only: stage stubs instead of the elector binaries,
#      for testing the image with the data node alone; such an image cannot run a lab).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_IMAGE="${NODE_IMAGE:-elector-node:latest}"
export BASE_IMAGE="${BASE_IMAGE:-elector-base:bookworm}"
CARGO="${CARGO:-cargo}"
KEVY_VERSION=7.0.0
CTX="$REPO/.cache/node-context"
export PATH="$HOME/.cargo/bin:$PATH"

log() { echo "build-images: $*" >&2; }
die() { echo "build-images: ERROR: $*" >&2; exit 1; }
t0=$(date +%s)

# install_if_changed SRC DST: copy only when the content differs (keeps docker's cache warm)
install_if_changed() {
  if ! cmp -s "$1" "$2"; then
    install -m 0755 "$1" "$2.tmp" && mv "$2.tmp" "$2"
    log "staged $(basename "$2") ($(du -h "$2" | cut -f1))"
  fi
}

"$REPO/scripts/build-base-image.sh"

mkdir -p "$CTX"
install -m 0644 "$REPO/docker/Dockerfile" "$CTX/Dockerfile.tmp" && mv "$CTX/Dockerfile.tmp" "$CTX/Dockerfile"
install_if_changed "$REPO/docker/entrypoint.sh" "$CTX/entrypoint.sh"

# kevy: built on the host by scripts/install-deps.sh (host and image are both bookworm,
# so the glibc it links against is the image's).
KEVY="$(command -v kevy || true)"
[ -n "$KEVY" ] || die "kevy not found on PATH: run scripts/install-deps.sh (cargo install kevy --version $KEVY_VERSION --locked)"
"$KEVY" --version 2>&1 | grep -q "$KEVY_VERSION" \
  || die "$KEVY is not kevy $KEVY_VERSION ($("$KEVY" --version 2>&1 | head -1)): run scripts/install-deps.sh"
if ldd "$KEVY" | grep -q 'not found'; then die "kevy has unresolved libraries: $(ldd "$KEVY" | grep 'not found')"; fi
install_if_changed "$KEVY" "$CTX/kevy"

# elector and elector-faulty (both target/release, built one after the other).
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
if [ "${SKIP_ELECTOR:-0}" = 1 ]; then
  log "SKIP_ELECTOR=1: staging stub elector binaries (data-node-only image, cannot run a lab)"
  for b in elector elector-faulty; do
    printf '#!/bin/sh\necho "%s: stub (image built with SKIP_ELECTOR=1)" >&2\nexit 1\n' "$b" > "$CTX/$b.stub"
    install_if_changed "$CTX/$b.stub" "$CTX/$b"; rm -f "$CTX/$b.stub"
  done
else
  # elector-faulty first, then elector, in one target dir: the feature only adds code
  # to the elector crate, so the second build reuses every dependency (about 1 min
  # instead of 4 in a dir of its own) and cargo keeps both builds fresh side by side;
  # the plain build last leaves target/release/elector the production binary (the
  # package, the clients and conformance use it).
  log "cargo build --release -p elector --features test-faults"
  (cd "$REPO" && "$CARGO" build --release -p elector --features test-faults) \
    || die "the elector crate does not build with --features test-faults (see above)"
  install_if_changed "$TARGET_DIR/release/elector" "$CTX/elector-faulty"
  log "cargo build --release -p elector"
  (cd "$REPO" && "$CARGO" build --release -p elector) \
    || die "the elector crate does not build (cargo build --release -p elector failed, see above)"
  [ -x "$TARGET_DIR/release/elector" ] || die "cargo built no binary at $TARGET_DIR/release/elector"
  install_if_changed "$TARGET_DIR/release/elector" "$CTX/elector"
fi

# Rebuild the node image only when the staged context or the base changed.
base_id="$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")"
ctx_sum="$( (cd "$CTX" && sha256sum Dockerfile entrypoint.sh kevy elector elector-faulty; echo "$base_id") | sha256sum | cut -c1-32)"
have_sum="$(docker image inspect -f '{{index .Config.Labels "elector.context"}}' "$NODE_IMAGE" 2>/dev/null || true)"
if [ "$have_sum" = "$ctx_sum" ]; then
  log "$NODE_IMAGE is up to date (context $ctx_sum)"
else
  log "docker build -> $NODE_IMAGE"
  docker build -q --label "elector.context=$ctx_sum" -t "$NODE_IMAGE" "$CTX" >/dev/null \
    || die "docker build of $NODE_IMAGE failed (context: $CTX)"
  log "built $NODE_IMAGE ($(docker image inspect -f '{{.Size}}' "$NODE_IMAGE" | awk '{printf "%d MB", $1/1e6}'))"
fi
log "done in $(( $(date +%s) - t0 ))s"
