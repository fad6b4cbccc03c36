#!/usr/bin/env bash
# End-to-end lab check, as a new user would do it: for each "N backend" given (default:
# "3 kevy" "5 kevy" "2 kevy" "3 redis"; N may be 2w: data nodes n1 n2, witness n3),
# `lab-up`, write through the primary, and (N >= 3, or 2w)
# SIGKILL the primary, wait for a new primary, check the write survived where kevy allows,
# restart the old primary and check it rejoins as a replica; then `lab-down` and check
# nothing is left. Prints timings. Exit 0 only if every step passed.
# LAB_TLS=1 (Redis specs only): the same over the TLS lab (docs/security.md "A TLS lab"),
# every client over TLS with the lab's CA, and the first write must be acknowledged by a
# replica (`WAIT`, so replication runs over TLS) and found on the new primary.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAB="$REPO/scripts/lab.sh"
FAILOVER_TIMEOUT="${FAILOVER_TIMEOUT:-30}"
# Arguments: pairs N BACKEND (e.g. `3 kevy 3 redis`).
[ $# -gt 0 ] || set -- 3 kevy 5 kevy 2 kevy 3 redis
[ $(( $# % 2 )) = 0 ] || { echo "lab-smoke: usage: lab-smoke.sh [N BACKEND]..." >&2; exit 2; }
specs=()
while [ $# -gt 0 ]; do specs+=("$1 $2"); shift 2; done

log() { echo "lab-smoke: $*" >&2; }
now_ms() { date +%s%3N; }
secs_since() { local d=$(( $(now_ms) - $1 )); printf "%d.%03d" $((d / 1000)) $((d % 1000)); }
fail() { echo "lab-smoke: FAIL: $*" >&2; "$LAB" status >&2 || true; exit 1; }

TLS="${LAB_TLS:-0}"
CA="$REPO/.lab/tls/ca.crt"
CLI_TLS=(); STATUS_TLS=(); CURL_TLS=(); SCHEME=http
if [ "$TLS" = 1 ]; then
  CLI_TLS=(--tls --cacert "$CA"); STATUS_TLS=(--tls-ca "$CA"); CURL_TLS=(--cacert "$CA"); SCHEME=https
fi
rcli() { redis-cli "${CLI_TLS[@]}" "$@"; }
# primary N [EXCLUDE]: id of the unfenced primary a quorum agrees on, or empty
primary() {
  python3 - "$1" "${2:-}" "${STATUS_TLS[@]}" <<'PY'
import json, sys, subprocess
n, excl = int(sys.argv[1]), sys.argv[2]
out = subprocess.run([sys.executable, "scripts/lab-status.py", "--n", str(n), "--json"] + sys.argv[3:],
                     capture_output=True, text=True).stdout
st = json.loads(out)
answered = [s for s in st.values() if "_error" not in s]
prim = [s["node_id"] for s in answered if s.get("role") == "primary" and not s.get("fenced")]
if len(prim) == 1 and prim[0] != excl:
    agree = [s for s in answered if s.get("node_id") == prim[0] or s.get("primary") == prim[0]]
    if len(agree) >= n // 2 + 1:
        print(prim[0])
PY
}

cd "$REPO"
for spec in "${specs[@]}"; do
  read -r lab backend <<<"$spec"
  # 2w: three members, n3 a witness (no data node, never primary).
  case "$lab" in 2w) n=3; witness=n3 ;; *) n=$lab; witness="" ;; esac
  log "=== lab $lab, $backend"
  t0=$(now_ms)
  "$LAB" up "$lab" "$backend" || fail "lab-up $lab $backend"
  log "lab-up $lab $backend: $(secs_since $t0) s"
  p=$(primary "$n"); [ -n "$p" ] || fail "no primary after lab-up"
  [ "$p" != "$witness" ] || fail "the witness $witness became primary"
  pi=${p#n}
  [ "$(rcli -p "600$pi" SET smoke "$spec")" = OK ] || fail "SET on primary $p (127.0.0.1:600$pi) failed"
  if [ "$TLS" = 1 ]; then
    acked=$(rcli -p "600$pi" WAIT 1 5000)
    [ "${acked:-0}" -ge 1 ] || fail "the write was not acknowledged by a replica over TLS (WAIT 1 answered '$acked')"
    log "TLS: the write is acknowledged by $acked replica(s) (WAIT 1)"
    [ "$(redis-cli -p "600$pi" PING 2>&1 || true)" != PONG ] || fail "the data node answered plain text on its TLS port"
  fi
  for i in $(seq 1 "$n"); do
    [ "$i" = "$pi" ] || [ "n$i" = "$witness" ] && continue
    r=$(rcli -p "600$i" SET smoke x 2>&1 || true)
    [[ "$r" == READONLY* ]] || fail "replica n$i accepted a write or errored oddly: $r"
  done
  log "primary $p takes writes; replicas answer READONLY"
  if [ "$n" -ge 3 ]; then
    "$LAB" kill "$p"
    tk=$(now_ms); np=""
    while [ -z "$np" ]; do
      np=$(primary "$n" "$p")
      (( $(now_ms) - $tk > FAILOVER_TIMEOUT * 1000 )) && fail "no new primary within ${FAILOVER_TIMEOUT}s after killing $p"
      [ -n "$np" ] || sleep 0.2
    done
    log "killed $p -> new primary $np visible in /status after $(secs_since $tk) s"
    [ "$np" != "$witness" ] || fail "the witness $witness became primary"
    "$LAB" status
    npi=${np#n}
    [ "$(rcli -p "600$npi" SET smoke2 ok)" = OK ] || fail "SET on new primary $np failed"
    got=$(rcli -p "600$npi" GET smoke)
    log "GET smoke on new primary: '$got' (written before the kill)"
    if [ "$TLS" = 1 ]; then
      [ "$got" = "$spec" ] || fail "the acknowledged write is not on the new primary (got '$got')"
      sentinel=$(rcli -p "2640$npi" SENTINEL get-master-addr-by-name mymaster | tr '\n' ' ')
      log "TLS: the Sentinel port of $np names the primary: $sentinel"
    fi
    "$LAB" start "$p"
    tr=$(now_ms); ok=""
    while [ -z "$ok" ]; do
      role=$(curl -fsS "${CURL_TLS[@]}" "$SCHEME://127.0.0.1:930$pi/status" 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["role"], d.get("primary"))' 2>/dev/null || true)
      [ "$role" = "replica $np" ] && ok=1
      (( $(now_ms) - $tr > FAILOVER_TIMEOUT * 1000 )) && fail "restarted $p did not rejoin as replica of $np (last: '$role')"
      [ -n "$ok" ] || sleep 0.3
    done
    log "restarted $p rejoined as replica of $np after $(secs_since $tr) s"
    r=$(rcli -p "600$pi" SET smoke x 2>&1 || true)
    [[ "$r" == READONLY* ]] || fail "rejoined old primary $p accepted a write: $r"
  fi
  "$LAB" status
  "$LAB" down
  left=$(docker ps -aq --filter label=com.docker.compose.project=elector-lab; docker volume ls -q --filter label=com.docker.compose.project=elector-lab; docker network ls -q --filter label=com.docker.compose.project=elector-lab)
  [ -z "$left" ] || fail "lab-down left: $left"
  log "=== lab $lab, $backend: ok"
done
log "all ok"
