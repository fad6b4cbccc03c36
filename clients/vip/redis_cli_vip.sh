#!/usr/bin/env bash
# redis-cli on the virtual IP (docs/vip.md): one redis-cli process per write, SET
# and WAIT on its one connection (commands read from stdin). The loop and the
# lines printed: clients/python/common.py.
set -uo pipefail
host="${VIP%:*}" port="${VIP##*:}"
prefix="${PREFIX:-clients}" stop="${STOP_FILE:-}" max="${MAX_WRITES:-20000}"
end=$(( $(date +%s) + ${DEADLINE_S%.*} ))
pace=$(awk "BEGIN { print ${PACE_MS:-5} / 1000 }")
echo "# $(redis-cli --version) on the virtual IP" >&2
ms() { date +%s%3N; }
for ((i = 0; i < max; i++)); do
  [ "$(date +%s)" -lt "$end" ] || break
  if [ -n "$stop" ] && (( i % 10 == 0 )) && [ -e "$stop" ]; then break; fi
  key="$prefix:$i"
  out="$(printf 'SET %s %s\nWAIT 1 1000\n' "$key" "$key" | timeout 3 redis-cli -h "$host" -p "$port" 2>&1)"
  set -- $out
  if [ "${1:-}" = OK ] && [[ "${2:-}" =~ ^[0-9]+$ ]]; then
    if [ "$2" -ge 1 ]; then echo "ack $(ms) $key"; else echo "nack $(ms) $key"; fi
    sleep "$pace"
  else
    echo "err $(ms) ${out//$'\n'/ }" | cut -c1-220
    sleep 0.05
  fi
done
