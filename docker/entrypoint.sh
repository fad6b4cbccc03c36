#!/usr/bin/env bash
# elector-node entrypoint: runs one lab node = a data node (kevy or redis-server)
# plus its elector sidecar, as described in docs/interfaces.md ("Lab node image").
#
# Environment:
#   NODE_ID              this node's id (required), e.g. n1
#   PEERS                every node, this one included: n1=HOST,n2=HOST,... (required
#                        unless /etc/elector/elector.yaml is mounted)
#   BACKEND              kevy (default) | redis
#   ELECTOR_BIN          elector (default) | elector-faulty | none (data node only: image tests)
#   HB_INTERVAL_MS, DOWN_AFTER_MS, ELECTION_TIMEOUT_MS, BACKOFF_MIN_MS, BACKOFF_MAX_MS
#                        election timings (defaults 200, 5000, 3000, 1000, 5000)
#   DATA_POLL_MS         optional, timings.data_poll_ms
#   CLUSTER_NAME         optional, default mymaster
#   FENCE_MARGIN_MS      optional, timings.fence_margin_ms (unset: the elector's default)
#   ELECTOR_EXTRA_YAML   optional YAML merged over the generated config (maps key by
#                        key): auth, hooks, priority, max_lag_bytes, data_node.password,
#                        unsafe_test_faults, ... Checked by the elector's own schema.
#   KEVY_THREADS         kevy worker threads (default 1: with more shards kevy reports
#                        per-shard INFO offsets)
#   KEVY_HZ              kevy's tick rate, [expiry] hz (default 100; kevy's own is 10)
#   KEVY_PARK_TIMEOUT_MS kevy's idle reactor sleep, [advanced] park_timeout_ms (default
#                        10; kevy's own is 50). kevy applies a promotion's feed
#                        generation bump, and its replicas' handshakes, on its tick:
#                        at kevy's defaults a new primary's first writes could land in
#                        the old generation (their WAIT never counts) and a retarget
#                        waited ~90 ms for its handshake. Idle cost ~0.7 % of a core,
#                        against ~0.1 % (docs/architecture.md §kevy, "The tick").
#   DATA_PORT_BASE       data port of the first node in PEERS (default 6379); node k
#                        (0-based, PEERS order) listens on DATA_PORT_BASE + k. Every
#                        node has its own client port because kevy 7 tells replicas
#                        apart by client port only: two replicas on 6379 of two hosts
#                        count once for WAIT. DATA_PORT overrides (mounted config).
#   WATCHDOG             1 (default): run `elector watchdog` beside the elector, the
#                        data node's dead-man switch (docs/protocol.md §6.4.1)
#   ELECTOR_USER         user the elector and watchdog run as (default elector; root
#                        keeps them as root)
#   ELECTOR_NOFILE       open-file limit of the elector and watchdog (default 1024, as
#                        on a host with systemd's default LimitNOFILE)
#   WITNESSES            optional, comma-separated ids in PEERS that are witnesses
#                        (docs/protocol.md §4.5): no data node, never primary. On a
#                        witness node the entrypoint starts the elector alone.
#   LAB_TLS              1: a TLS lab (Redis only; scripts/lab.sh mounts the certificates
#                        at /etc/elector/lab-tls): Redis on its tls-port only, replication
#                        over TLS, the elector's ports and its data-node link over TLS
#   DATA_NODE_RESTART    0 (default): the container exits when the data node dies;
#                        1: the entrypoint restarts the data node under the running
#                        elector, as systemd's Restart= would (parts failing alone)
#   DATA_NODE_RESTART_GAP_MS  with DATA_NODE_RESTART=1, how long the data node stays
#                        dead before it is started again (default 300; 0 = at once, as
#                        a supervisor can; safety must not depend on it, issue 34);
#                        a file /tmp/data-restart-gap-ms overrides it for the next
#                        restart only (written by conformance's fault injector)
#   VIP                  optional virtual IP that follows the writable primary
#                        (docs/vip.md): ADDRESS or ADDRESS/PREFIX (no prefix: /32, the
#                        address alone, no extra subnet route). Adds the config's `vip`
#                        block; the container needs NET_ADMIN and NET_RAW (arping).
#   VIP_INTERFACE        interface for the VIP (default eth0)
#   VIP_PORT             port clients use on the VIP (default 6379; mapped by DNAT to
#                        this node's data port when they differ)
#   PRIORITIES           optional per-node priorities, ID=PRIORITY,... (protocol §8.1):
#                        the entry for NODE_ID becomes the config's `priority`, so one
#                        environment serves every node (labs, conformance)
#
# In-container ports: data DATA_PORT, replication gate DATA_PORT+10000 (the elector:
# replicas dial it, protocol §6.10; kevy's own replication listener behind it at
# DATA_PORT+11000), election 7400, API 9300, Sentinel-compatible 26379. Elector state: /var/lib/elector; data
# node files: /data/<backend>. A mounted /etc/elector/elector.yaml wins over generation.
#
# The data node starts NON-WRITABLE (a replica of the unreachable 127.0.0.1:1), so no
# write lands before the elector decides. Supervision: when either process exits, the
# other is stopped and the container exits non-zero; SIGTERM/SIGINT go to both.
set -euo pipefail

log() { echo "entrypoint[${NODE_ID:-?}]: $*" >&2; }
die() { log "ERROR: $*"; exit 2; }

BACKEND="${BACKEND:-kevy}"
ELECTOR_BIN="${ELECTOR_BIN:-elector}"
CONF_DIR=/etc/elector
CONFIG="$CONF_DIR/elector.yaml"
GEN_MARK="# generated by the elector-node entrypoint"
DATA_ROOT=/data
STATE_DIR=/var/lib/elector
DATA_PORT_BASE="${DATA_PORT_BASE:-6379}"
ELECTION_PORT=7400
API_PORT=9300
SENTINEL_PORT=26379
FENCE_UPSTREAM_HOST=127.0.0.1   # nothing listens on port 1: the link stays down
FENCE_UPSTREAM_PORT=1

[ -n "${NODE_ID:-}" ] || die "NODE_ID is not set"
[[ "$NODE_ID" =~ ^[A-Za-z0-9._-]{1,32}$ ]] || die "NODE_ID '$NODE_ID' must be 1-32 chars of [A-Za-z0-9._-]"
case "$BACKEND" in kevy|redis) ;; *) die "BACKEND must be kevy or redis, got '$BACKEND'";; esac
case "$ELECTOR_BIN" in
  elector|elector-faulty|none) ;;
  *) die "ELECTOR_BIN must be elector, elector-faulty or none, got '$ELECTOR_BIN'";;
esac
num() { # num NAME DEFAULT: a non-negative integer env var
  local v="${!1:-$2}"
  [[ "$v" =~ ^[0-9]+$ ]] || die "$1 must be a non-negative integer, got '$v'"
  echo "$v"
}
HB_INTERVAL_MS=$(num HB_INTERVAL_MS 200)
DOWN_AFTER_MS=$(num DOWN_AFTER_MS 5000)
ELECTION_TIMEOUT_MS=$(num ELECTION_TIMEOUT_MS 3000)
BACKOFF_MIN_MS=$(num BACKOFF_MIN_MS 1000)
BACKOFF_MAX_MS=$(num BACKOFF_MAX_MS 5000)
KEVY_THREADS=$(num KEVY_THREADS 1)
KEVY_HZ=$(num KEVY_HZ 100)
KEVY_PARK_TIMEOUT_MS=$(num KEVY_PARK_TIMEOUT_MS 10)
DATA_PORT_BASE=$(num DATA_PORT_BASE 6379)
WATCHDOG=$(num WATCHDOG 1)
DATA_NODE_RESTART=$(num DATA_NODE_RESTART 0)
DATA_NODE_RESTART_GAP_MS=$(num DATA_NODE_RESTART_GAP_MS 300)
ELECTOR_USER="${ELECTOR_USER:-elector}"
ELECTOR_NOFILE=$(num ELECTOR_NOFILE 1024)

# This node's data port: its position in PEERS (or DATA_PORT when given).
data_port_of() { # data_port_of ID
  local k=0 entry
  IFS=',' read -r -a _entries <<< "${PEERS:-}"
  for entry in "${_entries[@]}"; do
    entry="${entry//[[:space:]]/}"
    [ -n "$entry" ] || continue
    [ "${entry%%=*}" = "$1" ] && { echo $((DATA_PORT_BASE + k)); return; }
    k=$((k + 1))
  done
  echo "$DATA_PORT_BASE"
}
DATA_PORT="${DATA_PORT:-$(data_port_of "$NODE_ID")}"
is_witness() { [[ ",${WITNESSES:-}," == *",$1,"* ]]; }
WITNESS=0
is_witness "$NODE_ID" && WITNESS=1

VIP="${VIP:-}"
if [ -n "$VIP" ]; then
  [[ "$VIP" =~ ^[0-9a-fA-F.:]+(/[0-9]{1,3})?$ ]] || die "VIP must be ADDRESS or ADDRESS/PREFIX, got '$VIP'"
  [[ "$VIP" == */* ]] || VIP="$VIP/$([[ "$VIP" == *:* ]] && echo 128 || echo 32)"
  VIP_INTERFACE="${VIP_INTERFACE:-eth0}"
  [[ "$VIP_INTERFACE" =~ ^[A-Za-z0-9._-]{1,15}$ ]] || die "VIP_INTERFACE '$VIP_INTERFACE' is not an interface name"
  VIP_PORT=$(num VIP_PORT 6379)
fi
# A TLS lab (LAB_TLS=1, Redis only; scripts/lab.sh makes the certificates and mounts
# them at /etc/elector/lab-tls): Redis serves its tls-port only and replicates over
# TLS, the elector speaks TLS to it and on its election, API and Sentinel ports.
LAB_TLS=$(num LAB_TLS 0)
LAB_TLS_SRC=/etc/elector/lab-tls
TLS_DIR="$CONF_DIR/tls"
CLI_TLS=()
if [ "$LAB_TLS" = 1 ]; then
  [ "$BACKEND" = redis ] || die "LAB_TLS=1 needs BACKEND=redis: kevy 7.0.0 has no TLS"
  for f in ca.crt "$NODE_ID.crt" "$NODE_ID.key"; do
    [ -r "$LAB_TLS_SRC/$f" ] || die "LAB_TLS=1 but $LAB_TLS_SRC/$f is missing (scripts/lab.sh makes it)"
  done
  CLI_TLS=(--tls --cacert "$TLS_DIR/ca.crt")
fi
# Copies this node's certificate and key where its users may read them: the key to
# the elector's user alone (mode 0600, as the elector requires of a secret file).
install_lab_tls() {
  mkdir -p "$TLS_DIR"
  cp "$LAB_TLS_SRC/ca.crt" "$TLS_DIR/ca.crt"
  cp "$LAB_TLS_SRC/$NODE_ID.crt" "$TLS_DIR/node.crt"
  # Redis runs as root here and reads the same file.
  install -m 0600 "$LAB_TLS_SRC/$NODE_ID.key" "$TLS_DIR/node.key"
  [ "$ELECTOR_USER" = root ] || chown "$ELECTOR_USER:" "$TLS_DIR/node.key"
}
# The elector's TLS settings in a TLS lab (merged over the rendered config).
lab_tls_yaml() {
  [ "$WITNESS" = 1 ] || printf 'data_node:\n  tls: { ca_file: %s }\n' "$TLS_DIR/ca.crt"
  cat <<YAML
tls:
  election: { ca_file: $TLS_DIR/ca.crt, cert_file: $TLS_DIR/node.crt, key_file: $TLS_DIR/node.key }
  api: { cert_file: $TLS_DIR/node.crt, key_file: $TLS_DIR/node.key, ca_file: $TLS_DIR/ca.crt }
  sentinel: { cert_file: $TLS_DIR/node.crt, key_file: $TLS_DIR/node.key }
YAML
}
# This node's priority from PRIORITIES (ID=PRIORITY,...), empty when not listed.
own_priority() {
  local entry
  IFS=',' read -r -a _prio <<< "${PRIORITIES:-}"
  for entry in "${_prio[@]}"; do
    entry="${entry//[[:space:]]/}"
    [ "${entry%%=*}" = "$NODE_ID" ] || continue
    [[ "${entry#*=}" =~ ^[0-9]+$ ]] || die "PRIORITIES: '$entry' is not ID=NUMBER"
    echo "${entry#*=}"
    return
  done
}
PRIORITY="$(own_priority)"

mkdir -p "$CONF_DIR" "$STATE_DIR" "$DATA_ROOT/$BACKEND"
[ "$LAB_TLS" = 0 ] || install_lab_tls
# For `docker exec` scripts (conformance): this node's data port.
echo "$DATA_PORT" > "$CONF_DIR/data-port"
[ "$ELECTOR_USER" = root ] || chown -R "$ELECTOR_USER:" "$STATE_DIR"
# CAP_NET_ADMIN, kept across the user switch when the container has it: with kevy
# the elector aborts the data node's hanging connects to a primary that is gone
# (`ss -K`), else kevy's REPLICAOF waits out a 5 s connect timeout
# (docs/architecture.md §kevy). With a VIP the elector and the watchdog also run
# `ip addr`, `iptables` (NET_ADMIN) and `arping` (NET_RAW) (docs/vip.md).
KEEP_CAPS=()
caps=""
# With kevy the elector also listens on nowhere, 127.0.0.1:1, a privileged port
# (NET_BIND_SERVICE): it holds kevy's connects there so that leaving it does not
# wait out kevy's 250 ms reconnect backoff (docs/architecture.md §kevy).
[ "$BACKEND" = kevy ] && caps=+net_admin,+net_bind_service
[ -n "$VIP" ] && caps=+net_admin,+net_raw
[ -n "$VIP" ] && [ "$BACKEND" = kevy ] && caps=+net_admin,+net_raw,+net_bind_service
if [ -n "$caps" ] && setpriv --inh-caps="$caps" --ambient-caps="$caps" true 2>/dev/null; then
  KEEP_CAPS=(--inh-caps="$caps" --ambient-caps="$caps")
elif [ -n "$VIP" ] && [ "$ELECTOR_USER" != root ]; then
  log "WARNING: the container lacks NET_ADMIN/NET_RAW: the VIP moves will fail (cap_add them)"
fi
# Runs the elector binary as ELECTOR_USER. Called with `&`: the exec replaces
# the background subshell, so the recorded PID is the binary's own.
as_elector_user() {
  ulimit -n "$ELECTOR_NOFILE"
  if [ "$ELECTOR_USER" = root ]; then
    exec "$@"
  fi
  exec setpriv --reuid="$ELECTOR_USER" --regid="$ELECTOR_USER" --init-groups "${KEEP_CAPS[@]}" -- "$@"
}

# ---- elector config ------------------------------------------------------------
# Rendered by the elector itself (`elector render-config`, docs/interfaces.md): the
# schema, its defaults and its checks live in one place, and a key the elector does
# not know (ELECTOR_EXTRA_YAML included) fails here, before anything starts.
generate_config() {
  [ -n "${PEERS:-}" ] || die "PEERS is not set (n1=HOST,n2=HOST,...) and no $CONFIG is mounted"
  # The binary that will run renders (elector-faulty accepts unsafe_test_faults).
  local bin="/usr/local/bin/$ELECTOR_BIN" extra="$CONF_DIR/extra.yaml" args=()
  [ "$ELECTOR_BIN" != none ] || bin=/usr/local/bin/elector
  local peers="${PEERS//[[:space:]]/}"
  args=(render-config --node-id "$NODE_ID" --peers "$peers" --backend "$BACKEND"
        --cluster-name "${CLUSTER_NAME:-mymaster}"
        --election-port "$ELECTION_PORT" --api-port "$API_PORT" --sentinel-port "$SENTINEL_PORT"
        --data-port-base "$DATA_PORT_BASE" --data-port-step 1
        --data-address "127.0.0.1:$DATA_PORT" --data-dir "$STATE_DIR"
        --hb-interval-ms "$HB_INTERVAL_MS" --down-after-ms "$DOWN_AFTER_MS"
        --election-timeout-ms "$ELECTION_TIMEOUT_MS"
        --backoff-min-ms "$BACKOFF_MIN_MS" --backoff-max-ms "$BACKOFF_MAX_MS")
  [ -n "${WITNESSES:-}" ] && args+=(--witnesses "${WITNESSES//[[:space:]]/}")
  [ -n "${DATA_POLL_MS:-}" ] && args+=(--data-poll-ms "$(num DATA_POLL_MS 100)")
  [ -n "${FENCE_MARGIN_MS:-}" ] && args+=(--fence-margin-ms "$(num FENCE_MARGIN_MS 0)")
  if [ -n "${ELECTOR_EXTRA_YAML:-}" ] || [ -n "$VIP" ] || [ -n "$PRIORITY" ] || [ "$LAB_TLS" = 1 ]; then
    {
      [ -z "${ELECTOR_EXTRA_YAML:-}" ] || printf '%s\n' "$ELECTOR_EXTRA_YAML"
      [ "$LAB_TLS" = 0 ] || lab_tls_yaml
      [ -z "$VIP" ] || printf 'vip: { address: "%s", interface: %s, port: %s }\n' "$VIP" "$VIP_INTERFACE" "$VIP_PORT"
      [ -z "$PRIORITY" ] || printf 'priority: %s\n' "$PRIORITY"
    } > "$extra"
    args+=(--extra "$extra")
  fi
  {
    echo "$GEN_MARK by elector render-config from NODE_ID/PEERS/BACKEND/timings; mount your own file to override"
    "$bin" "${args[@]}"
  } > "$CONFIG.tmp" || die "elector render-config refused the node's settings (above)"
  mv "$CONFIG.tmp" "$CONFIG"
  log "generated $CONFIG"
}

if [ -f "$CONFIG" ] && ! head -1 "$CONFIG" | grep -qF "$GEN_MARK"; then
  log "using the mounted $CONFIG"
else
  generate_config
fi

# ---- data node (starts fenced: replica of an unreachable upstream) ----------------
start_kevy() {
  local toml="$CONF_DIR/kevy.toml"
  cat > "$toml" <<TOML
# generated by the elector-node entrypoint
[server]
bind = "0.0.0.0"
port = $DATA_PORT
threads = $KEVY_THREADS
data_dir = "$DATA_ROOT/kevy"

[persistence]
aof = true

[replication]
# Start as a replica of an address where nothing listens: writes are refused until
# the elector promotes this node (REPLICAOF NO ONE) or points it at the primary.
# Never leave upstream empty: a replica without upstream turns writable by itself.
role = "replica"
upstream = "$FENCE_UPSTREAM_HOST:$FENCE_UPSTREAM_PORT"
# The elector's data_node.kevy_reconnect_window_ms (default 1000) must match:
# docs/architecture.md §kevy, "WAIT across a promotion".
reconnect_window_ms = 1000
# Behind the elector's replication gate (DATA_PORT+10000, protocol §6.10): only
# the gate dials kevy's own listener, and only while this kevy is the process
# the elector validated as a serving primary.
listen_port_base = $((DATA_PORT + 11000))

# A promotion's feed generation bump and a replica's handshake wait for kevy's
# tick: a fast one keeps a new primary's first WAIT in the new generation
# (docs/architecture.md §kevy, "The tick").
[expiry]
hz = $KEVY_HZ

[advanced]
park_timeout_ms = $KEVY_PARK_TIMEOUT_MS
TOML
  log "starting kevy ($(/usr/local/bin/kevy --version 2>&1 | head -1)), fenced as replica of $FENCE_UPSTREAM_HOST:$FENCE_UPSTREAM_PORT"
  /usr/local/bin/kevy --config "$toml" &
  DATA_PID=$!
}

start_redis() {
  local conf="$CONF_DIR/redis.conf"
  cat > "$conf" <<CONF
# generated by the elector-node entrypoint
bind 0.0.0.0
port $DATA_PORT
protected-mode no
daemonize no
dir $DATA_ROOT/redis
appendonly yes
# Start as a read-only replica of an address where nothing listens (fenced).
replicaof $FENCE_UPSTREAM_HOST $FENCE_UPSTREAM_PORT
replica-read-only yes
# Serve full syncs at once: the default 5 s wait (for more replicas) delays
# the first replica-acknowledged write after every failover by 5 s.
repl-diskless-sync-delay 0
CONF
  if [ "$LAB_TLS" = 1 ]; then
    # TLS only: the plain port closed, replication over TLS (through the elector's
    # gate, a byte pump), client certificates not required (the lab's clients hold
    # only the CA).
    sed -i "s/^port $DATA_PORT\$/port 0/" "$conf"
    cat >> "$conf" <<CONF
tls-port $DATA_PORT
tls-cert-file $TLS_DIR/node.crt
tls-key-file $TLS_DIR/node.key
tls-ca-cert-file $TLS_DIR/ca.crt
tls-replication yes
tls-auth-clients no
CONF
  fi
  log "starting $(redis-server --version | awk '{print $1, $3}'), fenced as replica of $FENCE_UPSTREAM_HOST:$FENCE_UPSTREAM_PORT"
  redis-server "$conf" &
  DATA_PID=$!
}

ELECTOR_PID=""
WATCHDOG_PID=""
# While the elector is down for a restart a fault injector asked for (below),
# the timer that starts it again.
ELECTOR_RESTART_TIMER=""
DATA_PID=""
STOPPING=0

stop_all() {
  local sig="${1:-TERM}"
  for pid in $ELECTOR_RESTART_TIMER $WATCHDOG_PID $ELECTOR_PID $DATA_PID; do
    kill -s "$sig" "$pid" 2>/dev/null || true
  done
}

on_signal() {
  log "got SIG$1: stopping the elector and the data node"
  STOPPING=1
  stop_all TERM
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT

if [ "$WITNESS" = 1 ]; then
  # A witness has no data node and so nothing for a watchdog to fence.
  log "witness: no data node; running the elector alone"
  WATCHDOG=0
  [ "$ELECTOR_BIN" != none ] || die "ELECTOR_BIN=none on a witness leaves nothing to run"
else
  "start_$BACKEND"
fi

# Wait until the data node answers (and so is known fenced) before the elector starts.
ready=0
[ "$WITNESS" = 1 ] && ready=1
for _ in $(seq 1 200); do
  [ "$WITNESS" = 1 ] && break
  if ! kill -0 "$DATA_PID" 2>/dev/null; then
    wait "$DATA_PID" || true
    die "$BACKEND exited during start-up"
  fi
  if [ "$(redis-cli "${CLI_TLS[@]}" -p "$DATA_PORT" PING 2>/dev/null)" = PONG ]; then ready=1; break; fi
  sleep 0.1
done
[ "$ready" = 1 ] || { stop_all KILL; die "$BACKEND did not answer PING on :$DATA_PORT within 20 s"; }
[ "$WITNESS" = 1 ] || log "$BACKEND is up on :$DATA_PORT$([ "$LAB_TLS" = 0 ] || echo " (TLS only)") ($(redis-cli "${CLI_TLS[@]}" -p "$DATA_PORT" ROLE 2>/dev/null | head -1))"

if [ "$ELECTOR_BIN" != none ]; then
  [ -x "/usr/local/bin/$ELECTOR_BIN" ] || { stop_all KILL; die "/usr/local/bin/$ELECTOR_BIN is missing from the image"; }
  log "starting $ELECTOR_BIN run --config $CONFIG"
  as_elector_user "/usr/local/bin/$ELECTOR_BIN" run --config "$CONFIG" &
  ELECTOR_PID=$!
  if [ "$WATCHDOG" = 1 ]; then
    # The dead-man switch lives in a process of its own: a frozen elector
    # cannot notice its own freeze (docs/protocol.md §6.4.1).
    log "starting the watchdog (fences the data node if the elector stops answering)"
    as_elector_user "/usr/local/bin/$ELECTOR_BIN" watchdog --config "$CONFIG" &
    WATCHDOG_PID=$!
  fi
else
  log "ELECTOR_BIN=none: running the data node only (stays fenced)"
fi

# Supervise: the first of the two to exit takes the container down.
rc=0
while :; do
  exited=""
  set +e
  # shellcheck disable=SC2086
  wait -n -p exited $DATA_PID $ELECTOR_PID $WATCHDOG_PID $ELECTOR_RESTART_TIMER
  rc=$?
  set -e
  # wait returns >128 when interrupted by a trapped signal; exited stays empty then.
  if [ -n "${exited:-}" ] && [ "$exited" = "$DATA_PID" ] && [ "$DATA_NODE_RESTART" = 1 ] && [ "$STOPPING" = 0 ]; then
    # The data node failed alone: start it again under the running elector,
    # which notices the new process and decides again (protocol §6.8).
    # A fault injector may give this one restart its own gap (conformance's
    # `restart_data { gap_ms }`, the chaos runs' fast restarts): read once.
    gap="$DATA_NODE_RESTART_GAP_MS"
    if [ -f /tmp/data-restart-gap-ms ]; then
      read -r gap < /tmp/data-restart-gap-ms || true
      rm -f /tmp/data-restart-gap-ms
      [[ "$gap" =~ ^[0-9]{1,6}$ ]] || gap="$DATA_NODE_RESTART_GAP_MS"
    fi
    log "$BACKEND exited (rc=$rc): restarting it in ${gap} ms (DATA_NODE_RESTART=1)"
    [ "$gap" = 0 ] || sleep "$(awk -v ms="$gap" 'BEGIN { printf "%.3f", ms / 1000 }')"
    "start_$BACKEND"
    continue
  fi
  if [ -n "${exited:-}" ] && [ "$exited" = "$ELECTOR_PID" ] && [ -f /tmp/elector-restart-gap-ms ] && [ "$STOPPING" = 0 ]; then
    # A fault injector (conformance's `restart_elector`) asked for the
    # elector alone to come back, its data node left running: what a host
    # supervisor that restarts the elector's unit alone does (`systemctl
    # restart elector`, the package's Restart=). Without the request an
    # elector that dies takes the node down (below). The gap runs in a timer
    # of its own, so a data node that dies meanwhile is still seen at once.
    read -r gap < /tmp/elector-restart-gap-ms || true
    rm -f /tmp/elector-restart-gap-ms
    [[ "$gap" =~ ^[0-9]{1,6}$ ]] || gap=0
    log "$ELECTOR_BIN exited (rc=$rc) as a fault injector asked: starting it again in ${gap} ms, the data node left running"
    ELECTOR_PID=""
    sleep "$(awk -v ms="$gap" 'BEGIN { printf "%.3f", ms / 1000 }')" &
    ELECTOR_RESTART_TIMER=$!
    continue
  fi
  if [ -n "${exited:-}" ] && [ "$exited" = "$ELECTOR_RESTART_TIMER" ] && [ "$STOPPING" = 0 ]; then
    ELECTOR_RESTART_TIMER=""
    log "starting $ELECTOR_BIN run --config $CONFIG again"
    as_elector_user "/usr/local/bin/$ELECTOR_BIN" run --config "$CONFIG" &
    ELECTOR_PID=$!
    continue
  fi
  if [ -n "${exited:-}" ] && [ "$exited" = "$WATCHDOG_PID" ] && [ "$STOPPING" = 0 ]; then
    # As the package's unit does (Restart=always, RestartSec=1): the
    # dead-man switch must not stay dead because it crashed once.
    log "the watchdog exited (rc=$rc): starting it again in 1 s"
    sleep 1
    as_elector_user "/usr/local/bin/$ELECTOR_BIN" watchdog --config "$CONFIG" &
    WATCHDOG_PID=$!
    continue
  fi
  [ -n "${exited:-}" ] && break
  if [ "$STOPPING" = 1 ]; then
    # keep waiting for the children to finish after forwarding the signal
    continue
  fi
done

if [ "$exited" = "$DATA_PID" ]; then who="$BACKEND (data node)"; other="$ELECTOR_PID"; else who="$ELECTOR_BIN"; other="$DATA_PID"; fi
if [ "$STOPPING" = 1 ]; then
  log "$who stopped (rc=$rc); waiting for the rest"
else
  log "$who exited unexpectedly (rc=$rc): stopping the other process and exiting"
  stop_all TERM
fi
# Give the other process a few seconds to stop cleanly, then kill it.
if [ -n "$other" ]; then
  for _ in $(seq 1 50); do kill -0 "$other" 2>/dev/null || break; sleep 0.1; done
  kill -s KILL "$other" 2>/dev/null || true
  wait "$other" 2>/dev/null || true
fi
if [ "$STOPPING" = 1 ]; then
  log "stopped"
  exit 0
fi
[ "$rc" = 0 ] && rc=1   # an unrequested exit is a failure even with status 0
exit "$rc"
