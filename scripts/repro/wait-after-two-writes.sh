#!/usr/bin/env bash
# Shows kevy 7.0.0's replica acknowledgement cadence next to Redis (README, Known limits):
# a primary and one replica on loopback; 10 times, on one connection, two SETs then
# `WAIT 1 500`. Prints how many WAITs answered 0 (not acknowledged within 500 ms) and 1.
#
# kevy's replica acknowledges at most once per 100 ms and only when a frame or the
# primary's 1 s ping arrives, so the second write of a burst waits for the next one:
# most WAITs time out. Redis asks its replicas for an acknowledgement (GETACK): all answer 1.
# Usage: scripts/repro/wait-after-two-writes.sh   (needs kevy, redis-server, redis-cli)
set -euo pipefail
dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
base=$((20000 + RANDOM % 5000))

kevy_node() { # kevy_node PORT ROLE
  mkdir -p "$dir/k$1"
  printf '[server]\nbind = "127.0.0.1"\nport = %s\nthreads = 1\ndata_dir = "%s"\n[replication]\nrole = "%s"\n%s\n' \
    "$1" "$dir/k$1" "$2" "$([ "$2" = replica ] && echo 'upstream = "127.0.0.1:1"')" > "$dir/k$1.toml"
  kevy --config "$dir/k$1.toml" > "$dir/k$1.log" 2>&1 & pids+=($!)
}
burst() { # burst PORT: 10 × (SET, SET, WAIT 1 500) -> counts of WAIT answers
  for j in $(seq 1 10); do
    printf 'SET a%s 1\nSET b%s 1\nWAIT 1 500\n' "$j" "$j" | redis-cli -p "$1" | tail -1
    sleep 0.3
  done | sort | uniq -c | awk '{printf "  WAIT answered %s: %s of 10\n", $2, $1}'
}
up() { for _ in $(seq 50); do redis-cli -p "$1" PING >/dev/null 2>&1 && return; sleep 0.1; done; echo "no server on $1" >&2; exit 1; }

kevy_node "$base" primary; kevy_node $((base + 1)) replica
up "$base"; up $((base + 1))
redis-cli -p $((base + 1)) REPLICAOF 127.0.0.1 $((base + 10000)) >/dev/null   # kevy: replication port = client + 10000
sleep 1.5
echo "kevy $(kevy --version 2>&1 | head -1 | awk '{print $NF}'): SET, SET, WAIT 1 500"
burst "$base"

r=$((base + 2))
redis-server --port "$r" --save '' --repl-diskless-sync-delay 0 --dir "$dir" --dbfilename p.rdb > "$dir/r1.log" 2>&1 & pids+=($!)
redis-server --port $((r + 1)) --save '' --replicaof 127.0.0.1 "$r" --dir "$dir" --dbfilename r.rdb > "$dir/r2.log" 2>&1 & pids+=($!)
up "$r"; up $((r + 1)); sleep 1.5
echo "redis $(redis-server --version | awk '{print $3}'): SET, SET, WAIT 1 500"
burst "$r"
