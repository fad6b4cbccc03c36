#!/usr/bin/env bash
# Builds the local base image elector-base:bookworm from Debian packages:
# debootstrap a minimal bookworm root filesystem on the host, then `docker import`.
# No image registry is needed. Skipped when the image already exists (FORCE=1 rebuilds).
#
# Env: BASE_IMAGE (default elector-base:bookworm), DEBIAN_MIRROR (default: first
# deb.debian.org-style URI in the apt sources, else http://deb.debian.org/debian),
# CACHE_DIR (default <repo>/.cache), FORCE=1.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE_IMAGE="${BASE_IMAGE:-elector-base:bookworm}"
CACHE_DIR="${CACHE_DIR:-$REPO/.cache}"
SUITE=bookworm
PACKAGES=redis-server,redis-sentinel,redis-tools,iproute2,iptables,iputils-arping,ca-certificates,curl,procps,netbase

log() { echo "build-base-image: $*" >&2; }
die() { echo "build-base-image: ERROR: $*" >&2; exit 1; }

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  log "$BASE_IMAGE exists, skipping (FORCE=1 to rebuild)"
  exit 0
fi

command -v debootstrap >/dev/null || die "debootstrap missing: run scripts/install-deps.sh"
command -v docker >/dev/null || die "docker missing: install Docker Engine"
docker info >/dev/null 2>&1 || die "cannot talk to the Docker daemon (is it running? are you root / in the docker group?)"
[ "$(id -u)" = 0 ] || die "debootstrap needs root"

if [ -z "${DEBIAN_MIRROR:-}" ]; then
  DEBIAN_MIRROR="$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | grep -v security | head -1 | awk '{print $2}')" || true
  DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
fi

mkdir -p "$CACHE_DIR"
ROOTFS="$CACHE_DIR/rootfs-$SUITE.tmp"
# A half-made rootfs from an interrupted run is not reusable: start clean.
if [ -d "$ROOTFS" ]; then
  umount -R "$ROOTFS/proc" "$ROOTFS/sys" "$ROOTFS/dev" 2>/dev/null || true
  rm -rf --one-file-system "$ROOTFS"
fi
trap 'rm -rf --one-file-system "$ROOTFS" 2>/dev/null || true' EXIT

log "debootstrap $SUITE from $DEBIAN_MIRROR (about a minute)"
start=$(date +%s)
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$DEBIAN_MIRROR" \
  > "$CACHE_DIR/debootstrap.log" 2>&1 \
  || { tail -30 "$CACHE_DIR/debootstrap.log" >&2; die "debootstrap failed (full log: $CACHE_DIR/debootstrap.log)"; }

# Trim: package caches and lists are not needed at run time.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
       "$ROOTFS"/var/log/*.log "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/*
# The packaged redis services are not used: the entrypoint starts what it needs.
rm -f "$ROOTFS"/etc/systemd/system/multi-user.target.wants/redis*.service
# Docker provides these at run time.
printf 'nameserver 127.0.0.11\n' > "$ROOTFS/etc/resolv.conf"
: > "$ROOTFS/etc/hostname"

log "docker import -> $BASE_IMAGE"
tar --numeric-owner -C "$ROOTFS" --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* -c . \
  | docker import \
      -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
      -c 'CMD ["/bin/bash"]' \
      -m "debootstrap --variant=minbase $SUITE ($PACKAGES)" - "$BASE_IMAGE" >/dev/null
log "built $BASE_IMAGE in $(( $(date +%s) - start ))s ($(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%d MB", $1/1e6}'))"
