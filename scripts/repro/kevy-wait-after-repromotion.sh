#!/usr/bin/env bash
# Shows the kevy 7.0.0 defect chaos seed 2126 found (conformance/README, scenario
# kevy-quorum-flap-then-isolate): after a primary is demoted and promoted again, `WAIT`
# counts a replica that cannot have the write.
#
# A primary and one replica on loopback; 300 writes the replica acknowledges (its slot's
# acked offset reaches 300). The primary is then demoted (`REPLICAOF` nowhere: how the
# elector fences kevy when its lease lapses) and promoted again (`REPLICAOF NO ONE`: the
# quorum is back). kevy bumps its feed generation and restarts offsets at 0, but keeps the
# replica's acked offset from the old generation (kevy-replicate slot.rs: acks only ever
# go up), so the replica counts as having acked everything below 300 of the new stream.
# The replica is frozen (SIGSTOP) before the new write: `WAIT 1 500` still answers 1.
# Redis, for comparison, answers 0. Exit 0 when kevy shows the defect.
# Usage: scripts/repro/kevy-wait-after-repromotion.sh   (needs kevy, redis-server, redis-cli)
set -euo pipefail
dir=$(mktemp -d)
pids=()
cleanup() { kill -CONT "${pids[@]}" 2>/dev/null || true; kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
base=$((20000 + RANDOM % 5000))
up() { for _ in $(seq 50); do redis-cli -p "$1" PING >/dev/null 2>&1 && return; sleep 0.1; done; echo "no server on $1" >&2; exit 1; }
# SET then WAIT on one connection (Redis's WAIT counts the connection's own writes).
set_and_wait() { printf 'SET written-while-the-replica-is-frozen 1\nWAIT 1 500\n' | redis-cli -p "$1" | tail -1; }
writes() { for i in $(seq 1 300); do echo "SET k$i v"; done | redis-cli -p "$1" >/dev/null; }

kevy_node() { # kevy_node PORT -> pid in $node_pid (starts as a detached replica, as the lab does)
  mkdir -p "$dir/k$1"
  printf '[server]\nbind = "127.0.0.1"\nport = %s\nthreads = 1\ndata_dir = "%s"\n[replication]\nrole = "replica"\nupstream = "127.0.0.1:1"\n' \
    "$1" "$dir/k$1" > "$dir/k$1.toml"
  kevy --config "$dir/k$1.toml" > "$dir/k$1.log" 2>&1 & node_pid=$!; pids+=("$node_pid")
}
p=$base; r=$((base + 1))
kevy_node "$p"; kevy_node "$r"; replica_pid=$node_pid
up "$p"; up "$r"
redis-cli -p "$p" REPLICAOF NO ONE >/dev/null
redis-cli -p "$r" REPLICAOF 127.0.0.1 $((p + 10000)) >/dev/null   # kevy: replication port = client + 10000
sleep 2
writes "$p"
echo "kevy $(kevy --version 2>&1 | head -1 | awk '{print $NF}'): before: WAIT 1 1000 -> $(redis-cli -p "$p" WAIT 1 1000)"
echo "  $(redis-cli -p "$p" INFO replication | grep -E '^slave0' | tr -d '\r')"
kill -STOP "$replica_pid"
echo "  control, replica frozen, no re-promotion: SET then WAIT 1 500 -> $(set_and_wait "$p")"
kill -CONT "$replica_pid"; sleep 1.5
redis-cli -p "$p" REPLICAOF 127.0.0.1 1 >/dev/null; sleep 0.3; redis-cli -p "$p" REPLICAOF NO ONE >/dev/null; sleep 1.5
echo "  demoted and promoted again: $(redis-cli -p "$p" INFO replication | grep -E '^(slave0|master_repl_offset)' | tr -d '\r' | tr '\n' ' ')"
kill -STOP "$replica_pid"
kevy_acks=$(set_and_wait "$p")
echo "  replica frozen; SET then WAIT 1 500 -> $kevy_acks (a replica that cannot have the write)"
kill -CONT "$replica_pid"

rp=$((base + 2)); rr=$((base + 3))
redis-server --port "$rp" --save '' --repl-diskless-sync-delay 0 --dir "$dir" --dbfilename p.rdb > "$dir/r1.log" 2>&1 & pids+=($!)
redis-server --port "$rr" --save '' --replicaof 127.0.0.1 "$rp" --dir "$dir" --dbfilename r.rdb > "$dir/r2.log" 2>&1 & redis_replica=$!; pids+=("$redis_replica")
up "$rp"; up "$rr"; sleep 1.5
writes "$rp"; redis-cli -p "$rp" WAIT 1 1000 >/dev/null
redis-cli -p "$rp" REPLICAOF 127.0.0.1 1 >/dev/null; sleep 0.3; redis-cli -p "$rp" REPLICAOF NO ONE >/dev/null; sleep 1.5
kill -STOP "$redis_replica"
echo "redis $(redis-server --version | awk '{print $3}'): the same steps: WAIT 1 500 -> $(set_and_wait "$rp")"
kill -CONT "$redis_replica"
[ "$kevy_acks" -ge 1 ]
