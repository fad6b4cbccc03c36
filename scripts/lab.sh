#!/usr/bin/env bash
# Drives the Compose labs (compose/lab-{2,3,5,2w}.yml) with Compose v2 (`docker compose`)
# or v1 (`docker-compose`), whichever is installed (scripts/compose-cmd.sh). Used by the Justfile:
#   lab.sh up [N] [BACKEND]   build missing images, start, wait for an elected primary, print the table
#                             (N = 2, 3, 5, or 2w: data nodes n1 and n2 and the witness n3)
#   lab.sh down               remove the lab's containers, network and volumes (whatever N was)
#   lab.sh status [--json]    the table
#   lab.sh kill|start|pause|unpause|partition NODE      (NODE = n1 or 1)
#   lab.sh heal               drop every partition rule, unpause every node
# The running lab's N/backend/subnet are remembered in .lab/state (gitignored).
# Env: LAB_UP_TIMEOUT (s, default 90), LAB_SUBNET_PREFIX (default 10.77.0), NODE_IMAGE
#      (default elector-node:latest; BASE_IMAGE for the base), BACKEND,
#      ELECTOR_BIN, HB_INTERVAL_MS, DOWN_AFTER_MS, ELECTION_TIMEOUT_MS, BACKOFF_MIN_MS,
#      BACKOFF_MAX_MS, ELECTOR_EXTRA_YAML, PRIORITIES (passed to the containers), SKIP_BUILD=1,
#      LAB_MONITORING=1 (add compose/monitoring.yml: a Prometheus scraping every elector
#      and evaluating deploy/prometheus/elector-rules.yml, on 127.0.0.1:LAB_PROM_PORT,
#      default 9090; its image: scripts/build-prometheus-image.sh),
#      LAB_VIP (a virtual IP in the lab subnet, e.g. 10.77.0.100: it follows the primary,
#      clients that know only it use LAB_VIP:6379; docs/vip.md),
#      LAB_TLS=1 (Redis only: a throw-away CA and per-node certificates in .lab/tls, Redis
#      on its tls-port only, the elector's election, API and Sentinel ports over TLS;
#      clients trust .lab/tls/ca.crt; docs/security.md "A TLS lab").
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROJECT=elector-lab
STATE_DIR="$REPO/.lab"
STATE="$STATE_DIR/state"
TLS_DIR="$STATE_DIR/tls"
CHAIN=ELECTOR-LAB
export PATH="$HOME/.cargo/bin:$PATH"

log() { echo "lab: $*" >&2; }
die() { echo "lab: ERROR: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker not found: install Docker Engine"
# shellcheck source=scripts/compose-cmd.sh
. "$REPO/scripts/compose-cmd.sh"
compose_detect || die "neither docker compose (v2) nor docker-compose (v1) found: apt-get install docker-compose"

load_state() {
  LAB_N=""; LAB_BACKEND=""; LAB_PREFIX=""; LAB_MONITORING_ON=0; LAB_STATE_VIP=""; LAB_TLS_ON=0
  # shellcheck disable=SC1090
  [ -f "$STATE" ] && . "$STATE"
  return 0
}

lab_containers() { docker ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}' | sort; }

compose() {
  local files=(-f "$REPO/compose/lab-$LAB_N.yml")
  [ "${LAB_MONITORING_ON:-0}" != 1 ] || files+=(-f "$REPO/compose/monitoring.yml")
  [ "${LAB_TLS_ON:-0}" != 1 ] || files+=(-f "$REPO/compose/tls-$LAB_N.yml")
  "${COMPOSE[@]}" -p "$PROJECT" "${files[@]}" "$@"
}

# The lab Prometheus's config: one job scraping every node's elector API every second,
# the shipped rules evaluated every second (so the rules' `for:` durations, not the
# scrape cadence, set how long an alert takes).
write_prometheus_config() { # N PREFIX
  local n=$1 prefix=$2 i targets=""
  for i in $(seq 1 "$(lab_nodes "$n")"); do targets+="${targets:+, }'$prefix.1$i:9300'"; done
  mkdir -p "$STATE_DIR/prometheus"
  cat > "$STATE_DIR/prometheus/prometheus.yml" <<YAML
# Written by scripts/lab.sh (LAB_MONITORING=1) for the running $n lab.
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - /etc/prometheus/rules/elector-rules.yml
scrape_configs:
  - job_name: elector-lab
    static_configs:
      - targets: [$targets]
        labels: {cluster: lab}
YAML
  chmod -R a+rX "$STATE_DIR/prometheus"
}

# Waits until the lab Prometheus answers and has scraped every target once.
wait_prometheus() { # TIMEOUT_S
  local port="${LAB_PROM_PORT:-9090}" deadline=$(( $(date +%s) + $1 )) want
  want=$(lab_nodes "$LAB_N")
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if curl -fsS "http://127.0.0.1:$port/api/v1/query?query=count(up%3D%3D1)" 2>/dev/null \
        | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; sys.exit(0 if r and int(r[0]["value"][1])=='"$want"' else 1)'; then
      log "Prometheus: http://127.0.0.1:$port (rules: deploy/prometheus/elector-rules.yml; alerts: /api/v1/alerts)"
      return 0
    fi
    sleep 1
  done
  return 1
}

# The lab's node count and witnesses: 2w is 3 nodes, n3 a witness.
lab_nodes() { case "$1" in 2w) echo 3 ;; *) echo "$1" ;; esac; }
lab_witnesses() { case "$1" in 2w) echo n3 ;; *) echo "" ;; esac; }

node_index() { # n1 | 1 -> 1
  local n="${1#n}"
  [[ "$n" =~ ^[1-9]$ ]] || die "NODE must look like n1 or 1, got '$1'"
  load_state
  [ -n "$LAB_N" ] || die "no lab is running (just lab-up)"
  [ "$n" -le "$(lab_nodes "$LAB_N")" ] || die "node n$n is not in the running $LAB_N lab"
  echo "$n"
}

print_table() {
  local tls=()
  [ "${LAB_TLS_ON:-0}" != 1 ] || tls=(--tls-ca "$TLS_DIR/ca.crt")
  python3 "$REPO/scripts/lab-status.py" --n "$(lab_nodes "$LAB_N")" --witnesses "$(lab_witnesses "$LAB_N")" "${tls[@]}" "$@"
}

# A TLS lab's throw-away PKI in .lab/tls (openssl, as docs/security.md shows): a CA and,
# per node, one certificate for everything the node serves and dials (its Redis tls-port
# and replication, the election port with its node id as a DNS name, the API and the
# Sentinel port), naming nI, its lab address, localhost and 127.0.0.1 (the host side of
# the published ports). Made again when the lab's size or subnet changed, or within 30
# days of expiry. The keys are
# copied into the container and given to the elector's user there (mode 0600).
make_lab_pki() { # NODES PREFIX
  local nodes=$1 prefix=$2 i want
  command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
  want="nodes=$nodes prefix=$prefix"
  # Kept while made for this lab and more than 30 days from expiry (the elector warns
  # about certificates that expire within 30 days).
  if [ -f "$TLS_DIR/made-for" ] && [ "$(cat "$TLS_DIR/made-for")" = "$want" ] \
    && openssl x509 -checkend $((30 * 86400)) -noout -in "$TLS_DIR/ca.crt" >/dev/null 2>&1; then
    return 0
  fi
  rm -rf "$TLS_DIR"
  mkdir -p "$TLS_DIR"
  (
    cd "$TLS_DIR"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -keyout ca.key -out ca.crt -days 365 -subj "/CN=elector lab CA" 2>/dev/null
    for i in $(seq 1 "$nodes"); do
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "n$i.key" -out "n$i.csr" -subj "/CN=n$i" 2>/dev/null
      printf 'subjectAltName=DNS:n%s,DNS:localhost,IP:%s.1%s,IP:127.0.0.1\n' "$i" "$prefix" "$i" > "n$i.ext"
      openssl x509 -req -in "n$i.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days 365 -out "n$i.crt" -extfile "n$i.ext" 2>/dev/null
      rm -f "n$i.csr" "n$i.ext"
    done
    # Readable inside the containers (copied there and given to the elector's user).
    chmod 0644 ./*.crt ./n*.key
    chmod 0600 ca.key
  ) || die "making the lab's certificates in $TLS_DIR failed"
  echo "$want" > "$TLS_DIR/made-for"
  log "made a throw-away CA and $nodes node certificates in $TLS_DIR (valid 365 days)"
}

cmd_up() {
  local n="${1:-3}" backend="${2:-${BACKEND:-kevy}}" t0
  t0=$(date +%s)
  case "$n" in 2|3|5|2w) ;; *) die "N must be 2, 3, 5 or 2w (compose/lab-N.yml), got '$n'";; esac
  case "$backend" in kevy|redis) ;; *) die "backend must be kevy or redis, got '$backend'";; esac
  command -v python3 >/dev/null || die "python3 not found (scripts/install-deps.sh installs it)"
  local prefix="${LAB_SUBNET_PREFIX:-10.77.0}" monitoring="${LAB_MONITORING:-0}" vip="${LAB_VIP:-}" tls="${LAB_TLS:-0}"
  check_vip "$vip" "$prefix" "$(lab_nodes "$n")"
  case "$tls" in 0|1) ;; *) die "LAB_TLS must be 0 or 1, got '$tls'";; esac
  [ "$tls" = 0 ] || [ "$backend" = redis ] \
    || die "LAB_TLS=1 needs the redis backend: kevy 7.0.0 has no TLS (docs/security.md); LAB_TLS=1 just lab-up $n redis"
  load_state
  if [ -n "$(lab_containers)" ] && { [ "$LAB_N" != "$n" ] || [ "$LAB_BACKEND" != "$backend" ] || [ "$LAB_PREFIX" != "$prefix" ] || [ "$LAB_STATE_VIP" != "$vip" ] || [ "${LAB_TLS_ON:-0}" != "$tls" ]; }; then
    log "a different lab is running (N=${LAB_N:-?} backend=${LAB_BACKEND:-?} vip=${LAB_STATE_VIP:-none} tls=${LAB_TLS_ON:-0}): taking it down first"
    cmd_down
  fi
  [ "$tls" = 0 ] || make_lab_pki "$(lab_nodes "$n")" "$prefix"
  if [ "${SKIP_BUILD:-0}" != 1 ]; then
    "$REPO/scripts/build-images.sh" || die "image build failed (see above)"
    if [ "$monitoring" = 1 ]; then
      PROM_IMAGE="${LAB_PROM_IMAGE:-elector-prometheus:bookworm}" "$REPO/scripts/build-prometheus-image.sh" \
        || die "Prometheus image build failed (see above)"
    fi
  fi
  mkdir -p "$STATE_DIR"
  printf 'LAB_N=%s\nLAB_BACKEND=%s\nLAB_PREFIX=%s\nLAB_MONITORING_ON=%s\nLAB_STATE_VIP=%s\nLAB_TLS_ON=%s\n' "$n" "$backend" "$prefix" "$monitoring" "$vip" "$tls" > "$STATE"
  LAB_N=$n LAB_MONITORING_ON=$monitoring LAB_TLS_ON=$tls
  [ "$monitoring" != 1 ] || write_prometheus_config "$n" "$prefix"

  export BACKEND="$backend" LAB_SUBNET_PREFIX="$prefix" LAB_IMAGE="${NODE_IMAGE:-elector-node:latest}" LAB_VIP="$vip"
  log "${COMPOSE[*]} up: $n$( [ -z "$(lab_witnesses "$n")" ] && echo " nodes" || echo ": data nodes n1 n2, witness $(lab_witnesses "$n")"), backend $backend, network $prefix.0/24${vip:+, vip $vip:6379}"
  local out
  if ! out="$(compose up -d --remove-orphans 2>&1)"; then
    echo "$out" >&2
    if grep -qiE 'overlap|Pool overlaps' <<<"$out"; then
      die "the lab subnet $prefix.0/24 clashes with an existing network: set LAB_SUBNET_PREFIX (e.g. LAB_SUBNET_PREFIX=10.78.0 just lab-up)"
    fi
    if grep -qiE 'address already in use|port is already allocated' <<<"$out"; then
      die "a lab host port (600i, 930i, 2640i on 127.0.0.1) is already in use"
    fi
    die "${COMPOSE[*]} up failed"
  fi
  log "waiting for an elected primary (timeout ${LAB_UP_TIMEOUT:-90}s)"
  if ! print_table --wait "${LAB_UP_TIMEOUT:-90}"; then
    for c in $(lab_containers); do echo "--- docker logs $c (last 15 lines, kevy retry lines left out)" >&2; { docker logs "$c" 2>&1 | grep -v 'retrying in 250ms' | tail -15 >&2; } || true; done
    die "lab is up but no primary was elected (containers left running for inspection; just lab-down removes them)"
  fi
  if [ "$monitoring" = 1 ] && ! wait_prometheus 60; then
    docker logs --tail 20 elector-lab-prometheus >&2 || true
    die "the lab Prometheus did not scrape every elector within 60 s (docker logs elector-lab-prometheus)"
  fi
  [ -z "$vip" ] || wait_vip "$vip"
  if [ "$tls" = 1 ]; then
    log "TLS lab: clients trust $TLS_DIR/ca.crt, e.g. redis-cli --tls --cacert $TLS_DIR/ca.crt -p 26401 SENTINEL get-master-addr-by-name mymaster; curl --cacert $TLS_DIR/ca.crt https://127.0.0.1:9301/status"
  fi
  log "lab-up took $(( $(date +%s) - t0 ))s"
}

# check_vip VIP PREFIX NODES: an IPv4 address of the lab subnet that no node, nor
# the bridge's gateway (.1), already uses. Empty: no VIP.
check_vip() {
  local vip=$1 prefix=$2 nodes=$3 last
  [ -n "$vip" ] || return 0
  [[ "$vip" == "$prefix".* ]] || die "LAB_VIP $vip is not in the lab subnet $prefix.0/24 (set LAB_SUBNET_PREFIX or pick $prefix.100)"
  last="${vip##*.}"
  [[ "$last" =~ ^[0-9]{1,3}$ ]] && [ "$last" -ge 2 ] && [ "$last" -le 254 ] \
    || die "LAB_VIP $vip: the last part must be 2..254"
  [ "$last" -ge 11 ] && [ "$last" -le $((10 + nodes)) ] && die "LAB_VIP $vip is a node's address ($prefix.11..1$nodes)"
  return 0
}

# Waits until the VIP answers as the primary from the host (the holder adds it once
# its data node is writable; docs/vip.md).
wait_vip() {
  local vip=$1 i
  for i in $(seq 1 40); do
    local tls=()
    [ "${LAB_TLS_ON:-0}" != 1 ] || tls=(--tls --cacert "$TLS_DIR/ca.crt")
    if redis-cli "${tls[@]}" -h "$vip" -p 6379 INFO replication 2>/dev/null | tr -d '\r' | grep -qx 'role:master'; then
      log "vip $vip:6379 reaches the primary (redis-cli -h $vip -p 6379)"
      return 0
    fi
    sleep 0.5
  done
  log "WARNING: vip $vip:6379 does not reach a primary after 20 s (just lab-status shows the vip line)"
}

cmd_down() {
  load_state
  if [ -n "$LAB_N" ] && [ -f "$REPO/compose/lab-$LAB_N.yml" ]; then
    compose down -v --remove-orphans --timeout 5 2>&1 | grep -v '^$' >&2 || true
  fi
  # Sweep by label whatever is left (unknown N, state file lost, ...).
  local ids
  ids="$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")"
  [ -z "$ids" ] || docker rm -f $ids >/dev/null
  ids="$(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT")"
  [ -z "$ids" ] || docker volume rm $ids >/dev/null
  ids="$(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT")"
  [ -z "$ids" ] || docker network rm $ids >/dev/null
  rm -f "$STATE"
  log "lab removed (containers, network, volumes)"
}

cmd_status() {
  load_state
  [ -n "$LAB_N" ] || { [ -n "$(lab_containers)" ] && die "lab containers exist but .lab/state is missing: just lab-down"; die "no lab is running (just lab-up)"; }
  if [ -n "$(lab_witnesses "$LAB_N")" ]; then
    echo "lab: $(lab_nodes "$LAB_N") nodes, witness $(lab_witnesses "$LAB_N"), backend $LAB_BACKEND"
  else
    echo "lab: $LAB_N nodes, backend $LAB_BACKEND"
  fi
  print_table "$@"
}

container() { echo "elector-lab-n$1"; }

cmd_kill()    { local i; i=$(node_index "$1"); docker kill -s KILL "$(container "$i")" >/dev/null; log "n$i killed (SIGKILL)"; }
cmd_start()   { local i; i=$(node_index "$1"); docker start "$(container "$i")" >/dev/null; log "n$i started"; }
cmd_pause()   { local i; i=$(node_index "$1"); docker pause "$(container "$i")" >/dev/null; log "n$i paused (SIGSTOP via cgroup freezer)"; }
cmd_unpause() { local i; i=$(node_index "$1"); docker unpause "$(container "$i")" >/dev/null; log "n$i unpaused"; }

# Cut NODE off from every other lab node: in NODE's network namespace, drop all traffic
# to and from the other nodes' addresses (clients on the host still reach it through the
# published ports, as a client on NODE's side of a partition would).
cmd_partition() {
  local i j c ips=()
  i=$(node_index "$1"); c="$(container "$i")"
  load_state
  [ "$(docker inspect -f '{{.State.Running}}' "$c")" = true ] || die "n$i is not running"
  for j in $(seq 1 "$(lab_nodes "$LAB_N")"); do [ "$j" = "$i" ] || ips+=("$LAB_PREFIX.1$j"); done
  docker exec -i "$c" bash -s "$CHAIN" "${ips[@]}" <<'SH'
set -euo pipefail
chain=$1; shift
iptables -N "$chain" 2>/dev/null || iptables -F "$chain"
for ip in "$@"; do
  iptables -A "$chain" -s "$ip" -j DROP
  iptables -A "$chain" -d "$ip" -j DROP
done
iptables -C INPUT -j "$chain" 2>/dev/null || iptables -I INPUT -j "$chain"
iptables -C OUTPUT -j "$chain" 2>/dev/null || iptables -I OUTPUT -j "$chain"
SH
  log "n$i partitioned from ${ips[*]} (just lab-heal to undo)"
}

cmd_heal() {
  load_state
  local c
  for c in $(lab_containers); do
    case "$(docker inspect -f '{{.State.Status}}' "$c")" in
      paused) docker unpause "$c" >/dev/null; log "$c unpaused" ;;
    esac
    if [ "$(docker inspect -f '{{.State.Running}}' "$c")" = true ]; then
      docker exec "$c" sh -c "iptables -F $CHAIN 2>/dev/null || true"
    fi
  done
  log "healed: partition rules flushed, nodes unpaused"
}

sub="${1:-}"; shift || true
case "$sub" in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status "$@" ;;
  kill|start|pause|unpause|partition)
    [ $# -ge 1 ] || die "usage: lab.sh $sub NODE (n1 or 1)"
    "cmd_$sub" "$1" ;;
  heal) cmd_heal ;;
  *) die "usage: lab.sh up [N] [BACKEND] | down | status [--json] | kill|start|pause|unpause|partition NODE | heal" ;;
esac
