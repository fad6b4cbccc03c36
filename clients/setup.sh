#!/usr/bin/env bash
# Installs the client libraries `just clients` tests, idempotently (each step is skipped
# when what it installs is there): a Python venv with redis-py and valkey-py
# (~/.cache/elector/clients-venv), the Rust client (clients/rust, the `redis` crate with
# `sentinel`), and, with --debian, the Debian-packaged clients (Go, Ruby, PHP, Node, Perl).
# Versions: clients/versions.env.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
. "$HERE/versions.env"
export PATH="$HOME/.cargo/bin:$PATH"
VENV="${ELECTOR_CLIENTS_VENV:-$HOME/.cache/elector/clients-venv}"
log() { echo "clients-setup: $*" >&2; }

if ! "$VENV/bin/python" -c "import redis, valkey, sys; sys.exit(0 if (redis.__version__, valkey.__version__) == ('$REDIS_PY_VERSION', '$VALKEY_PY_VERSION') else 1)" 2>/dev/null; then
  dpkg -s python3-venv >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv; }
  log "pip install redis==$REDIS_PY_VERSION valkey==$VALKEY_PY_VERSION into $VENV"
  [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "redis==$REDIS_PY_VERSION" "valkey==$VALKEY_PY_VERSION"
fi

grep -q "^redis = { version = \"=$REDIS_RS_VERSION\"" "$HERE/rust/Cargo.toml" \
  || { log "ERROR: clients/rust/Cargo.toml does not pin redis =$REDIS_RS_VERSION (clients/versions.env)"; exit 1; }
log "cargo build --release (clients/rust, redis $REDIS_RS_VERSION)"
(cd "$HERE/rust" && nice -n 10 cargo build --release --quiet)

if [ "${1:-}" = --debian ]; then
  need=()
  for p in $DEBIAN_CLIENT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
  if [ ${#need[@]} -gt 0 ]; then
    log "apt-get install ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${need[@]}"
  fi
  # Go: built offline against Debian's packaged sources (GOPATH mode, no module proxy).
  if [ ! -x "$HERE/go/bin/client-goredis" ] || [ "$HERE/go/goredis.go" -nt "$HERE/go/bin/client-goredis" ] \
     || [ ! -x "$HERE/go/bin/client-redigo" ] || [ "$HERE/go/redigo.go" -nt "$HERE/go/bin/client-redigo" ]; then
    log "go build (GOPATH=/usr/share/gocode: Debian's packaged sources, GO111MODULE=off, GOPROXY=off)"
    mkdir -p "$HERE/go/bin"
    (cd "$HERE/go" && GOPATH=/usr/share/gocode GO111MODULE=off GOPROXY=off GOCACHE="$HOME/.cache/elector/go-build" \
      go build -o bin/client-goredis goredis.go common.go \
      && GOPATH=/usr/share/gocode GO111MODULE=off GOPROXY=off GOCACHE="$HOME/.cache/elector/go-build" \
      go build -o bin/client-redigo redigo.go common.go)
  fi
fi
