#!/usr/bin/env bash
# Render test for the playbook: runs site.yml with --tags render against the
# example inventories over a local connection, writing every host's files into
# a temp directory instead of /, then validates what came out:
#   - every elector.yaml with `elector check-config` (as the playbook's own
#     template validate: step), all of a cluster's files at once, so they must
#     share one fingerprint (members, witnesses, lease timings); the binary
#     target/{release,debug}/elector is required (it is the only schema);
#   - data nodes start non-writable (kevy
#     role=replica upstream=127.0.0.1:1; redis replicaof 127.0.0.1 1), units;
#   - the 2-node inventory prints the no-fault-tolerance warning;
#   - 2 data nodes + 1 witness (lab-2w): the witness gets the elector only (no
#     data_node, no data-node files or unit, no watchdog, no Wants= on a data node);
#   - Redis with a password and an ACL user: the same credentials in elector.yaml
#     and redis.conf (requirepass, masterauth, user, masteruser); kevy with
#     credentials is refused by the playbook;
#   - a second run changes nothing (idempotent).
# The shared key comes from an Ansible Vault file, as in production.
#
# usage: ansible/tests/render.sh            (KEEP=1 keeps the temp dir;
#        CASES="lab2w-kevy lab2w-redis-auth" runs only those cases)
set -euo pipefail

ansible_dir=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$ansible_dir/.." && pwd)
venv=${ANSIBLE_VENV:-$repo/.cache/ansible-venv}
if [ ! -x "$venv/bin/ansible-playbook" ]; then
  echo "render.sh: no ansible in $venv; install it with:" >&2
  echo "  python3 -m venv $venv && $venv/bin/pip install ansible-core" >&2
  exit 2
fi
export PATH="$venv/bin:$PATH"
export ANSIBLE_CONFIG="$ansible_dir/ansible.cfg"
export ANSIBLE_GATHERING=explicit      # facts are not needed to render
export ANSIBLE_NOCOLOR=1
export ANSIBLE_FORKS=2

elector_bin=""
for c in "$repo/target/release/elector" "$repo/target/debug/elector"; do
  if [ -x "$c" ]; then elector_bin=$c; break; fi
done
# elector.yaml is checked by the elector alone (no second schema here).
[ -n "$elector_bin" ] || { echo "render.sh: build the elector first (cargo build -p elector)" >&2; exit 2; }

tmp=$(mktemp -d)
if [ "${KEEP:-0}" = 1 ]; then echo "render.sh: keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi

# Vault with the shared key, encrypted with a throwaway password.
printf 'render-test-vault-password\n' > "$tmp/vault-pass"
printf 'vault_elector_auth_key: "%s"\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$tmp/vault.yml"
ansible-vault encrypt --vault-password-file "$tmp/vault-pass" "$tmp/vault.yml" >/dev/null
head -1 "$tmp/vault.yml" | grep -q '^\$ANSIBLE_VAULT' || { echo "vault encryption failed" >&2; exit 1; }

me=$(id -un); mygroup=$(id -gn)
fail=0

# run_case NAME INVENTORY_EXAMPLE BACKEND NODES AUTH [extra ansible-playbook args...]
run_case() {
  local name=$1 inv=$2 backend=$3 nodes=$4 auth=$5; shift 5
  LAST_LOG=""
  if [ -n "${CASES:-}" ] && [[ " $CASES " != *" $name "* ]]; then return; fi
  local dir="$tmp/$name" out="$tmp/$name/out"
  mkdir -p "$dir/inventory/group_vars" "$out"
  cp "$ansible_dir/inventory/$inv" "$dir/inventory/hosts.yml"
  cp "$ansible_dir/group_vars/all.yml.example" "$dir/inventory/group_vars/all.yml"
  # Redirect every path under $out/<host>/ and own files as the current user.
  cat > "$dir/render-vars.yml" <<VARS
ansible_connection: local
ansible_become: false
ansible_python_interpreter: $venv/bin/python
elector_backend: $backend
elector_auth_mode: $auth
elector_validate_config: true
elector_bin_path: "$elector_bin"
elector_config_dir: "$out/{{ inventory_hostname }}/etc/elector"
elector_data_dir: "$out/{{ inventory_hostname }}/var/lib/elector"
elector_systemd_dir: "$out/{{ inventory_hostname }}/etc/systemd/system"
kevy_config_dir: "$out/{{ inventory_hostname }}/etc/kevy"
kevy_data_dir: "$out/{{ inventory_hostname }}/var/lib/kevy"
redis_config_dir: "$out/{{ inventory_hostname }}/etc/redis"
redis_data_dir: "$out/{{ inventory_hostname }}/var/lib/redis"
elector_user: $me
elector_group: $mygroup
kevy_user: $me
kevy_group: $mygroup
redis_user: $me
redis_group: $mygroup
elector_file_owner: $me
elector_restart_on_change: false
datanode_restart_on_change: false
elector_file_group: $mygroup
VARS
  local log="$dir/ansible.log"
  echo "== $name: $inv, backend $backend, auth $auth"
  if ! ansible-playbook -i "$dir/inventory/hosts.yml" "$ansible_dir/site.yml" --tags render \
      -e @"$tmp/vault.yml" --vault-password-file "$tmp/vault-pass" -e @"$dir/render-vars.yml" \
      "$@" >"$log" 2>&1; then
    echo "FAIL: ansible-playbook ($log):" >&2; tail -40 "$log" >&2; fail=1; return
  fi
  grep -E '^(ok|changed|failed|fatal)|PLAY RECAP|ok=' "$log" | grep -E 'ok=' | sed 's/^/   /'
  # The elector's own schema and checks, per file and over the cluster (one
  # fingerprint: the same members, witnesses and lease timings everywhere).
  if "$elector_bin" check-config "$out"/*/etc/elector/elector.yaml >"$dir/check.out" 2>"$dir/check.err"; then
    sed 's/^/   check-config /' "$dir/check.out"
  else
    echo "FAIL: $elector_bin check-config on $name:" >&2; cat "$dir/check.out" "$dir/check.err" >&2; fail=1
  fi
  # The data nodes start non-writable and every unit restarts on failure.
  local h conf
  for h in "$out"/*/; do
    if ! grep -q "^data_node:" "$h/etc/elector/elector.yaml"; then  # a witness: elector only
      if [ -e "$h/etc/kevy" ] || [ -e "$h/etc/redis" ] || [ -e "$h/etc/systemd/system/elector-datanode.service" ] \
          || [ -e "$h/etc/systemd/system/elector-watchdog.service" ] \
          || grep -q 'elector-datanode' "$h/etc/systemd/system/elector.service"; then
        echo "FAIL: witness $h has data-node files, a watchdog or a data-node dependency" >&2; fail=1
      fi
      continue
    fi
    [ -e "$h/etc/systemd/system/elector-watchdog.service" ] \
      || { echo "FAIL: data host $h has no watchdog unit" >&2; fail=1; }
    case $backend in
      kevy) conf="$h/etc/kevy/kevy.toml"
            grep -qx 'role = "replica"' "$conf" && grep -qx 'upstream = "127.0.0.1:1"' "$conf" ;;
      redis) conf="$h/etc/redis/elector-datanode.conf"
            grep -qx 'replicaof 127.0.0.1 1' "$conf" ;;
    esac || { echo "FAIL: $conf does not start non-writable (replica of 127.0.0.1:1)" >&2; fail=1; }
    grep -q 'Restart=on-failure' "$h/etc/systemd/system/elector-datanode.service" \
      && grep -q 'Restart=on-failure' "$h/etc/systemd/system/elector.service" \
      || { echo "FAIL: a unit under $h lacks Restart=on-failure" >&2; fail=1; }
  done
  LAST_LOG=$log
}

run_case lab3-kevy lab-3.yml.example kevy 3 shared_key
# Idempotence: the same run again must change nothing.
if [ $fail = 0 ] && [ -n "$LAST_LOG" ]; then
  ansible-playbook -i "$tmp/lab3-kevy/inventory/hosts.yml" "$ansible_dir/site.yml" --tags render \
    -e @"$tmp/vault.yml" --vault-password-file "$tmp/vault-pass" -e @"$tmp/lab3-kevy/render-vars.yml" \
    > "$tmp/lab3-kevy/second.log" 2>&1 || { echo "FAIL: second run" >&2; tail -30 "$tmp/lab3-kevy/second.log" >&2; fail=1; }
  if grep -E 'changed=[1-9]' "$tmp/lab3-kevy/second.log" >/dev/null; then
    echo "FAIL: second run changed something:" >&2; grep -B3 '^changed:' "$tmp/lab3-kevy/second.log" >&2; fail=1
  else
    echo "   second run: changed=0 on every host (idempotent)"
  fi
fi
# The units carry the package's hardening; a data_dir outside /var/lib/elector (as
# here: every path is redirected) is writable under ProtectSystem=strict, and
# systemd accepts both units (systemd-analyze verify, when installed).
if [ $fail = 0 ] && [ -n "$LAST_LOG" ]; then
  u="$tmp/lab3-kevy/out/node1/etc/systemd/system"
  if grep -qx 'ProtectSystem=strict' "$u/elector.service" \
      && grep -qx "ReadWritePaths=$tmp/lab3-kevy/out/node1/var/lib/elector" "$u/elector.service" \
      && grep -qx "ReadWritePaths=-$tmp/lab3-kevy/out/node1/var/lib/elector" "$u/elector-watchdog.service" \
      && grep -qx 'CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_BIND_SERVICE' "$u/elector.service"; then
    echo "   units: ProtectSystem=strict, the custom data_dir writable, capabilities bounded"
  else
    echo "FAIL: lab3-kevy: $u/elector{,-watchdog}.service lack the hardening or the data_dir" >&2; fail=1
  fi
  if command -v systemd-analyze >/dev/null; then
    if (cd "$u" && systemd-analyze verify ./elector.service ./elector-watchdog.service) >"$tmp/verify.out" 2>&1; then
      echo "   systemd-analyze verify: both units ok"
    else
      echo "FAIL: systemd-analyze verify:" >&2; cat "$tmp/verify.out" >&2; fail=1
    fi
  fi
fi
# Every member names its Sentinel-compatible listener (SENTINEL sentinels lists the
# others'), and elector_sentinel_port: null leaves them out.
if [ $fail = 0 ] && [ -n "$LAST_LOG" ]; then
  n=$(grep -c '^    sentinel: ".*:26379"$' "$tmp/lab3-kevy/out/node1/etc/elector/elector.yaml" || true)
  if [ "$n" = 3 ]; then
    echo "   peers[].sentinel: 3 members with their listener"
  else
    echo "FAIL: lab3-kevy: $n peers with a sentinel address (want 3)" >&2; fail=1
  fi
fi
# kevy's quiesce fence limit reaches every data member's elector.yaml (a minute by default).
if [ $fail = 0 ] && [ -n "$LAST_LOG" ]; then
  n=$(cat "$tmp"/lab3-kevy/out/*/etc/elector/elector.yaml | grep -c '^  kevy_quiesce_fence_limit_ms: 60000$' || true)
  if [ "$n" = 3 ]; then
    echo "   data_node.kevy_quiesce_fence_limit_ms: 60000 on 3 members"
  else
    echo "FAIL: lab3-kevy: $n members with kevy_quiesce_fence_limit_ms 60000 (want 3)" >&2; fail=1
  fi
fi
run_case lab3-redis lab-3.yml.example redis 3 none -e '{"elector_sentinel_port": null}'
if [ $fail = 0 ] && [ -n "$LAST_LOG" ]; then
  if grep -q 'sentinel' "$tmp/lab3-redis/out/node1/etc/elector/elector.yaml"; then
    echo "FAIL: lab3-redis: elector_sentinel_port null still renders a sentinel address" >&2; fail=1
  else
    echo "   elector_sentinel_port: null renders no listener and no peers[].sentinel"
  fi
fi
run_case lab5-kevy lab-5.yml.example kevy 5 shared_key
run_case lab2-kevy lab-2.yml.example kevy 2 shared_key
if [ $fail = 0 ] && [ -n "$LAST_LOG" ]; then
  if grep -q 'WARNING: the group elector_nodes has 2 hosts' "$LAST_LOG"; then
    echo "   2-node warning printed"
  else
    echo "FAIL: no 2-node warning in $LAST_LOG" >&2; fail=1
  fi
fi

# 2 data nodes + 1 witness: exactly one host (w1) renders without a data node.
run_case lab2w-kevy lab-2w.yml.example kevy 3 shared_key
if [ $fail = 0 ] && [ -n "$LAST_LOG" ]; then
  n=$(grep -L '^data_node:' "$tmp"/lab2w-kevy/out/*/etc/elector/elector.yaml | wc -l)
  w=$(grep -c '^    witness: true' "$tmp/lab2w-kevy/out/node1/etc/elector/elector.yaml" || true)
  if [ "$n" = 1 ] && [ "$w" = 1 ] && [ ! -e "$tmp/lab2w-kevy/out/witness1/etc/kevy" ]; then
    echo "   witness1 renders as witness: elector only, marked witness in every peers list"
  else
    echo "FAIL: lab2w: $n configs without data_node, $w witness peers (want 1 and 1)" >&2; fail=1
  fi
fi

# Redis with a password (characters that need quoting) and an ACL user.
auth_pw='s3cr3t "quoted" \\ pw'
run_case lab2w-redis-auth lab-2w.yml.example redis 3 shared_key \
  -e elector_data_node_username=elector -e "{\"elector_data_node_password\": $(printf '%s' "$auth_pw" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}"
if [ $fail = 0 ] && [ -n "$LAST_LOG" ]; then
  d="$tmp/lab2w-redis-auth/out/node1"
  pw_json=$(printf '%s' "$auth_pw" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')
  gt_json=$(printf '>%s' "$auth_pw" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')
  if grep -qxF "requirepass $pw_json" "$d/etc/redis/elector-datanode.conf" \
      && grep -qxF "masterauth $pw_json" "$d/etc/redis/elector-datanode.conf" \
      && grep -qxF "masteruser elector-replication" "$d/etc/redis/elector-datanode.conf" \
      && grep -qxF "user elector on $gt_json $(sed -n 's/^user elector on >PASSWORD //p' "$repo/docs/security.md")" "$d/etc/redis/elector-datanode.conf" \
      && grep -qxF "user elector-replication on $gt_json $(sed -n 's/^user elector-replication on >PASSWORD //p' "$repo/docs/security.md")" "$d/etc/redis/elector-datanode.conf" \
      && grep -qxF "  username: \"elector\"" "$d/etc/elector/elector.yaml" \
      && grep -qxF "  password_file: \"$d/etc/elector/redis.password\"" "$d/etc/elector/elector.yaml" \
      && [ "$(cat "$d/etc/elector/redis.password")" = "$auth_pw" ] \
      && [ "$(stat -c %a "$d/etc/elector/redis.password")" = 600 ] \
      && [ "$(stat -c %a "$d/etc/elector/auth.key")" = 600 ] \
      && ! grep -q '^  password:' "$d/etc/elector/elector.yaml"; then
    echo "   redis credentials: the same user and password in elector.yaml (password_file, 0600) and redis.conf"
  else
    echo "FAIL: redis credentials differ between $d/etc/elector/elector.yaml and redis.conf" >&2; fail=1
  fi
  # Redis itself must accept the rendered file (quoting, ACL syntax): load it on a
  # spare port and log in with the user and password.
  if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
    rdir="$tmp/redis-parse"; mkdir -p "$rdir"
    sed -e 's/^port .*/port 0/' -e '/^replicaof /d' -e "s|^dir .*|dir $rdir|" -e 's/^bind .*/bind 127.0.0.1/' \
      "$d/etc/redis/elector-datanode.conf" > "$rdir/r.conf"
    printf 'unixsocket %s/r.sock\n' "$rdir" >> "$rdir/r.conf"
    redis-server "$rdir/r.conf" >"$rdir/log" 2>&1 & rpid=$!
    for _ in $(seq 50); do [ -S "$rdir/r.sock" ] && break; sleep 0.1; done
    if REDISCLI_AUTH="$auth_pw" redis-cli -s "$rdir/r.sock" --user elector PING 2>/dev/null | grep -qx PONG \
        && REDISCLI_AUTH="$auth_pw" redis-cli -s "$rdir/r.sock" --user elector SET k v 2>/dev/null | grep -q NOPERM \
        && redis-cli -s "$rdir/r.sock" PING 2>/dev/null | grep -q NOAUTH; then
      echo "   redis-server loads the rendered redis.conf; the ACL user logs in and may not SET, no password is refused"
    else
      echo "FAIL: redis-server with the rendered redis.conf (log $rdir/log):" >&2; cat "$rdir/log" >&2; fail=1
    fi
    kill "$rpid" 2>/dev/null; wait "$rpid" 2>/dev/null || true
  fi
fi

# kevy 7.0.0 has no AUTH: credentials with kevy must be refused.
if [ -z "${CASES:-}" ] || [[ " $CASES " == *" kevy-auth-refused "* ]]; then
  mkdir -p "$tmp/kevy-auth-refused/inventory/group_vars"
  cp "$tmp"/lab2w-kevy/render-vars.yml "$tmp/kevy-auth-refused/" 2>/dev/null || true
  cp "$ansible_dir/inventory/lab-2w.yml.example" "$tmp/kevy-auth-refused/inventory/hosts.yml"
  if [ -f "$tmp/kevy-auth-refused/render-vars.yml" ]; then
    if ansible-playbook -i "$tmp/kevy-auth-refused/inventory/hosts.yml" "$ansible_dir/site.yml" --tags render \
        -e @"$tmp/vault.yml" --vault-password-file "$tmp/vault-pass" -e @"$tmp/kevy-auth-refused/render-vars.yml" \
        -e elector_data_node_password=x > "$tmp/kevy-auth-refused/ansible.log" 2>&1; then
      echo "FAIL: kevy with a data-node password was accepted" >&2; fail=1
    elif grep -q 'kevy 7.0.0' "$tmp/kevy-auth-refused/ansible.log"; then
      echo "   kevy with a data-node password: refused by the playbook"
    else
      echo "FAIL: kevy with a password failed for another reason:" >&2; tail -20 "$tmp/kevy-auth-refused/ansible.log" >&2; fail=1
    fi
  fi
fi

# A quiesce fence limit check-config refuses stops the playbook at the template's
# validate step, before any file is written.
if [ -z "${CASES:-}" ] || [[ " $CASES " == *" kevy-quiesce-limit-refused "* ]]; then
  d="$tmp/kevy-quiesce-limit-refused"
  mkdir -p "$d/inventory/group_vars"
  cp "$tmp"/lab3-kevy/render-vars.yml "$d/" 2>/dev/null || true
  cp "$ansible_dir/inventory/lab-3.yml.example" "$d/inventory/hosts.yml"
  cp "$ansible_dir/group_vars/all.yml.example" "$d/inventory/group_vars/all.yml"
  if [ -f "$d/render-vars.yml" ]; then
    if ansible-playbook -i "$d/inventory/hosts.yml" "$ansible_dir/site.yml" --tags render \
        -e @"$tmp/vault.yml" --vault-password-file "$tmp/vault-pass" -e @"$d/render-vars.yml" \
        -e elector_kevy_quiesce_fence_limit_ms=500 > "$d/ansible.log" 2>&1; then
      echo "FAIL: a kevy quiesce fence limit of 500 ms was accepted" >&2; fail=1
    elif grep -q 'kevy_quiesce_fence_limit_ms 500 is outside' "$d/ansible.log"; then
      echo "   a kevy quiesce fence limit of 500 ms: refused by check-config in the playbook"
    else
      echo "FAIL: a 500 ms quiesce limit failed for another reason:" >&2; tail -20 "$d/ansible.log" >&2; fail=1
    fi
  fi
fi

if [ $fail = 0 ]; then echo "render.sh: PASS"; else echo "render.sh: FAIL"; fi
exit $fail
