#!/usr/bin/env bash
# Installs everything a fresh machine lacks to build, test and run the labs:
# Debian packages (redis-server, redis-sentinel, debootstrap, network tools,
# prometheus for promtool, haproxy),
# clippy and rustfmt (for `just lint`), `just`, and kevy 7.0.0 built from
# crates.io with the machine's toolchain.
# Idempotent: each step is skipped when what it installs is already there.
set -euo pipefail

KEVY_VERSION=7.0.0
JUST_VERSION=1.36.0
export PATH="$HOME/.cargo/bin:$PATH"

need_apt=()
# openssl: the TLS lab's throw-away certificates (scripts/lab.sh, LAB_TLS=1).
for pkg in redis-server redis-sentinel debootstrap iproute2 iptables iputils-arping curl openssl; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# promtool (`just rules-test`) comes with Debian's prometheus package; haproxy checks
# the health endpoints in the lab test. Neither service is started (policy-rc.d below).
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v haproxy >/dev/null 2>&1 || need_apt+=(haproxy)
# The lab scripts need python3 (lab-status) and Compose: v2 (`docker compose`) when the
# machine has it, else Debian's docker-compose v1 (scripts/compose-cmd.sh).
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1 || need_apt+=(docker-compose)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Keep Debian's redis service from starting on install: the tests start their own.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
  rm -f /usr/sbin/policy-rc.d
fi

# `just lint` runs clippy and rustfmt: toolchain components, not always installed.
if ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    echo "install-deps: rustup component add clippy rustfmt"
    rustup component add clippy rustfmt
  else
    echo "install-deps: WARNING: no clippy/rustfmt and no rustup to add them: just lint will fail" >&2
  fi
fi

if ! command -v just >/dev/null 2>&1; then
  echo "install-deps: cargo install just $JUST_VERSION"
  cargo install just --version "$JUST_VERSION" --locked
fi

if ! kevy --version 2>/dev/null | grep -q "$KEVY_VERSION"; then
  echo "install-deps: cargo install kevy $KEVY_VERSION (about a minute)"
  # --ignore-rust-version: kevy 7.0.0 declares rust-version 1.97 (its authors'
  # toolchain); nothing in it needs more than our 1.95, and it builds without warnings.
  cargo install kevy --version "$KEVY_VERSION" --locked --ignore-rust-version
fi
# cargo-deb builds the Debian package (`just package`); pinned, built with our toolchain.
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
  echo "install-deps: cargo install cargo-deb $CARGO_DEB_VERSION"
  cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked
fi
# kubernetes-validate (PyPI) checks deploy/kubernetes offline against the schemas it
# bundles (`just k8s-validate`); in a venv of its own so the system Python stays as is.
K8S_VALIDATE_VERSION=1.37.0
K8S_VENV="${ELECTOR_TOOLS_VENV:-$HOME/.cache/elector/tools-venv}"
if ! "$K8S_VENV/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$K8S_VALIDATE_VERSION"; then
  dpkg -s python3-venv >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv; }
  echo "install-deps: pip install kubernetes-validate $K8S_VALIDATE_VERSION into $K8S_VENV"
  python3 -m venv "$K8S_VENV"
  "$K8S_VENV/bin/pip" install -q "kubernetes-validate==$K8S_VALIDATE_VERSION"
fi
command -v docker >/dev/null 2>&1 || echo "install-deps: WARNING: docker not found: the labs and images need Docker Engine (not installed by this script)" >&2
# The client libraries `just clients-ci` runs (redis-py, valkey-py in a venv; the redis
# crate's client): clients/setup.sh, idempotent. `just clients` adds the Debian ones.
"$(dirname "${BASH_SOURCE[0]}")/../clients/setup.sh"
echo "install-deps: ok (redis-server $(redis-server --version | awk '{print $3}'), $(kevy --version 2>&1 | head -1), just $(just --version | awk '{print $2}'))"
