#!/usr/bin/env bash
# Shows why Sentinel-aware clients that check `ROLE` after discovery (the `redis` crate's
# `sentinel` feature, redis-rb) refuse a kevy 7.0.0 primary the elector promoted
# (issue 37), and why no kevy configuration on our side avoids it without giving up
# the startup fence.
#
# 1. As every deployment starts it (docker/entrypoint.sh, ansible kevy.toml.j2, the
#    tests): `role = "replica"` of 127.0.0.1:1. After `REPLICAOF NO ONE`, `INFO
#    replication` says role:master, but `ROLE` says `slave 127.0.0.1 1`: kevy's
#    cmd_role (kevy src/ops/replication.rs) answers from the live upstream when there is
#    one and otherwise from the *config file's* role, which is still "replica".
# 2. `role = "primary"` is the only role whose fallback is `master`, and after a
#    demotion and `REPLICAOF NO ONE` its `ROLE` is right; but such a kevy accepts
#    writes from its first moment, before any elector has decided (a restarted old
#    primary would take writes from clients still pointed at it). `standalone` is
#    writable too and has no replication listener. Both break the rule that a data
#    node starts fenced (docs/architecture.md §kevy), so neither is used.
# Exit 0 when kevy shows the defect (1) and the writable start (2).
# Usage: scripts/repro/kevy-role-after-promotion.sh   (needs kevy and redis-cli)
set -euo pipefail
dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
base=$((20000 + RANDOM % 5000))
up() { for _ in $(seq 50); do redis-cli -p "$1" PING >/dev/null 2>&1 && return; sleep 0.1; done; echo "no server on $1" >&2; exit 1; }
kevy_node() { # kevy_node PORT ROLE
  mkdir -p "$dir/k$1"
  printf '[server]\nbind = "127.0.0.1"\nport = %s\nthreads = 1\ndata_dir = "%s"\n[replication]\nrole = "%s"\nupstream = "127.0.0.1:1"\n' \
    "$1" "$dir/k$1" "$2" > "$dir/k$1.toml"
  kevy --config "$dir/k$1.toml" > "$dir/k$1.log" 2>&1 & pids+=($!)
}
line() { tr -d '\r' | tr '\n' ' '; }
role_of() { redis-cli -p "$1" ROLE | line; }
info_role() { redis-cli -p "$1" INFO replication | grep '^role:' | tr -d '\r'; }

echo "kevy $(kevy --version 2>&1 | head -1 | awk '{print $NF}')"
p=$base
kevy_node "$p" replica; up "$p"
echo "1. role = \"replica\" of 127.0.0.1:1 (how we start kevy)"
echo "   at start:               ROLE -> $(role_of "$p")| $(info_role "$p") | SET -> $(redis-cli -p "$p" SET k v)"
redis-cli -p "$p" REPLICAOF NO ONE >/dev/null; sleep 0.3
role_after=$(role_of "$p")
echo "   after REPLICAOF NO ONE: ROLE -> $role_after| $(info_role "$p") | SET -> $(redis-cli -p "$p" SET k v)"

q=$((base + 1))
kevy_node "$q" primary; up "$q"
first_write=$(redis-cli -p "$q" SET written-before-any-elector 1)
echo "2. role = \"primary\""
echo "   at start:               ROLE -> $(role_of "$q")| SET -> $first_write (writable before any elector decided)"
redis-cli -p "$q" REPLICAOF 127.0.0.1 1 >/dev/null; sleep 0.3
echo "   fenced (REPLICAOF 127.0.0.1 1): ROLE -> $(role_of "$q")| SET -> $(redis-cli -p "$q" SET k v)"
redis-cli -p "$q" REPLICAOF NO ONE >/dev/null; sleep 0.3
echo "   after REPLICAOF NO ONE: ROLE -> $(role_of "$q")| $(info_role "$q")"
[[ "$role_after" == slave* ]] && [ "$first_write" = OK ]
