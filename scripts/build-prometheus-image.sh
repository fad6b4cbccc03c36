#!/usr/bin/env bash
# Builds elector-prometheus:bookworm (docker/prometheus/Dockerfile): Debian's prometheus
# package installed on our base image elector-base:bookworm, for the lab's monitoring
# (LAB_MONITORING=1 just lab-up). Idempotent: the image carries a label with the hash of
# the Dockerfile and the base image id, and is rebuilt only when either changed.
# Env: PROM_IMAGE (default elector-prometheus:bookworm), BASE_IMAGE.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROM_IMAGE="${PROM_IMAGE:-elector-prometheus:bookworm}"
BASE_IMAGE="${BASE_IMAGE:-elector-base:bookworm}"
DOCKERFILE="$REPO/docker/prometheus/Dockerfile"
log() { echo "build-prometheus-image: $*" >&2; }
die() { echo "build-prometheus-image: ERROR: $*" >&2; exit 1; }

base_id="$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE" 2>/dev/null)" \
  || die "no $BASE_IMAGE: run scripts/build-images.sh first"
sum="$( { sha256sum < "$DOCKERFILE"; echo "$base_id"; } | sha256sum | cut -c1-32)"
have="$(docker image inspect -f '{{index .Config.Labels "elector.context"}}' "$PROM_IMAGE" 2>/dev/null || true)"
if [ "$have" = "$sum" ]; then
  log "$PROM_IMAGE is up to date"
  exit 0
fi
t0=$(date +%s)
log "docker build -> $PROM_IMAGE (apt-get install prometheus, about a minute)"
# The build context is the Dockerfile alone; host networking reaches the Debian mirror.
docker build -q --network host --label "elector.context=$sum" -t "$PROM_IMAGE" - < "$DOCKERFILE" >/dev/null \
  || die "docker build of $PROM_IMAGE failed"
log "built $PROM_IMAGE in $(( $(date +%s) - t0 ))s ($(docker run --rm "$PROM_IMAGE" --version 2>&1 | head -1))"
