#!/usr/bin/env bash
# Starts an N-node loopback cluster (N = 2, 3 or 5) from examples/N-node/*.yaml:
# one kevy per node (one shard, started read-only as a replica of nowhere)
# and one elector each. Logs and data under /tmp/elector-example/N.
#   examples/run-loopback.sh 3          # start; Ctrl-C stops everything
#   elector status --node 127.0.0.1:9301 --watch   # in another terminal
#   kill -9 <pid of the primary's kevy and elector> # watch the failover
set -euo pipefail
n=${1:-3}
here=$(cd "$(dirname "$0")" && pwd)
bin=${ELECTOR_BIN:-$here/../target/release/elector}
[ -x "$bin" ] || bin=$here/../target/debug/elector
[ -x "$bin" ] || { echo "build first: cargo build --release -p elector" >&2; exit 1; }
command -v kevy >/dev/null || { echo "kevy missing: scripts/install-deps.sh installs it" >&2; exit 1; }
root=/tmp/elector-example/$n
mkdir -p "$root"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT INT TERM
for i in $(seq 1 "$n"); do
  mkdir -p "$root/kevy-n$i"
  cat > "$root/kevy-n$i.toml" <<TOML
[server]
bind = "127.0.0.1"
port = $((6000 + 10 * i))
threads = 1
data_dir = "$root/kevy-n$i"
[persistence]
aof = true
[replication]
role = "replica"
upstream = "127.0.0.1:1"
reconnect_window_ms = 1000
# behind the elector's replication gate (client port + 10000, protocol §6.10)
listen_port_base = $((6000 + 10 * i + 11000))
[expiry]
hz = 100
[advanced]
park_timeout_ms = 10
TOML
  kevy --config "$root/kevy-n$i.toml" > "$root/kevy-n$i.log" 2>&1 & pids+=($!)
done
sleep 0.5
for i in $(seq 1 "$n"); do
  "$bin" run --config "$here/$n-node/n$i.yaml" > "$root/elector-n$i.log" 2>&1 & pids+=($!)
  echo "n$i: kevy 127.0.0.1:$((6000 + 10 * i)) (redis-cli -p $((6000 + 10 * i))), API 127.0.0.1:$((9300 + i)), log $root/elector-n$i.log"
done
echo "processes: ${pids[*]}  (Ctrl-C stops them)"
wait
