#!/usr/bin/env bash
# Real deploy of the playbook onto N containers (default 3) from the local base
# image elector-base:bookworm, over the community.docker.docker connection, with
# elector_service_manager=none (containers have no systemd):
#   1. builds elector-ansible-target:bookworm = elector-base:bookworm + python3
#      (Ansible needs it on the target; apt from the Debian mirror, host network);
#   2. starts N containers on a private network, writes an inventory for them;
#   3. runs site.yml (users, binaries, configs, hook, vault key), then again:
#      the second run must change nothing;
#   4. starts each data node from the files the playbook laid down, as its
#      service user, and checks it is up and NOT writable (role slave, SET refused);
#   5. starts each elector the same way and runs the playbook's verify play
#      (one primary, all nodes agree), then checks that primary accepts a write.
#
# usage: ansible/tests/docker-deploy.sh [kevy|redis] [N]      KEEP=1 keeps the containers
# exit: 0 all passed; 1 a check failed; 3 the elector binary is still a stub, so
#       steps 1-4 ran and step 5 did not.
set -euo pipefail

backend=${1:-kevy}
nodes=${2:-3}
ansible_dir=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$ansible_dir/.." && pwd)
venv=${ANSIBLE_VENV:-$repo/.cache/ansible-venv}
base_image=${BASE_IMAGE:-elector-base:bookworm}
target_image=${TARGET_IMAGE:-elector-ansible-target:bookworm}
net=${NET_NAME:-elector-ansible-test}
prefix=${NET_PREFIX:-10.78.0}
cname() { echo "elector-ans-n$1"; }

say() { echo "docker-deploy: $*"; }
die() { echo "docker-deploy: FAIL: $*" >&2; exit 1; }

[ -x "$venv/bin/ansible-playbook" ] || die "no ansible in $venv (python3 -m venv $venv && $venv/bin/pip install ansible)"
[ -d "$venv/lib" ] && ls "$venv"/lib/python3*/site-packages/ansible_collections/community/docker >/dev/null 2>&1 \
  || die "community.docker missing: $venv/bin/pip install ansible  (the full package from PyPI)"
export PATH="$venv/bin:$PATH" ANSIBLE_CONFIG="$ansible_dir/ansible.cfg" ANSIBLE_NOCOLOR=1 ANSIBLE_FORKS=3
docker image inspect "$base_image" >/dev/null 2>&1 || die "no $base_image (scripts/build-base-image.sh)"

elector_bin=${ELECTOR_BIN:-}
for c in "$repo/target/release/elector" "$repo/target/debug/elector"; do
  [ -n "$elector_bin" ] && break; [ -x "$c" ] && elector_bin=$c
done
[ -n "$elector_bin" ] || die "no target/{release,debug}/elector (cargo build -p elector)"
kevy_bin=${KEVY_BIN:-$HOME/.cargo/bin/kevy}
[ "$backend" = redis ] || [ -x "$kevy_bin" ] || die "no kevy binary at $kevy_bin (scripts/install-deps.sh)"

# 1. target image
if ! docker image inspect "$target_image" >/dev/null 2>&1; then
  say "building $target_image ($base_image + python3, about 30 s)"
  docker rm -f elector-ansible-target-build >/dev/null 2>&1 || true
  docker run --name elector-ansible-target-build --network host "$base_image" sh -c \
    'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-minimal python3-apt >/dev/null && rm -rf /var/lib/apt/lists/*' \
    || die "apt-get install python3 in $base_image failed"
  docker commit --change 'CMD ["sleep", "infinity"]' elector-ansible-target-build "$target_image" >/dev/null
  docker rm elector-ansible-target-build >/dev/null
fi

tmp=$(mktemp -d)
cleanup() {
  if [ "${KEEP:-0}" = 1 ]; then say "keeping containers and $tmp"; return; fi
  for i in $(seq 1 "$nodes"); do docker rm -f "$(cname "$i")" >/dev/null 2>&1 || true; done
  docker network rm "$net" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# 2. containers + inventory
for i in $(seq 1 "$nodes"); do docker rm -f "$(cname "$i")" >/dev/null 2>&1 || true; done
docker network rm "$net" >/dev/null 2>&1 || true
docker network create --subnet "$prefix.0/24" "$net" >/dev/null
mkdir -p "$tmp/inventory/group_vars"
{
  echo "all:"
  echo "  children:"
  echo "    elector_nodes:"
  echo "      hosts:"
  for i in $(seq 1 "$nodes"); do
    docker run -d --init --name "$(cname "$i")" --hostname "n$i" --network "$net" --ip "$prefix.1$i" \
      "$target_image" sleep infinity >/dev/null
    echo "        $(cname "$i"):"
    echo "          elector_node_id: n$i"
    echo "          elector_address: $prefix.1$i"
  done
  echo "      vars:"
  echo "        ansible_connection: community.docker.docker"
  echo "        ansible_python_interpreter: /usr/bin/python3"
  echo "        ansible_become: false   # root in the container, no sudo"
} > "$tmp/inventory/hosts.yml"
cp "$ansible_dir/group_vars/all.yml.example" "$tmp/inventory/group_vars/all.yml"
cat > "$tmp/vars.yml" <<VARS
elector_backend: $backend
elector_service_manager: none
elector_binary_src: $elector_bin
kevy_binary_src: $kevy_bin
vault_elector_auth_key: "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
elector_down_after_ms: 3000
elector_election_timeout_ms: 2000
elector_backoff_min_ms: 500
elector_backoff_max_ms: 1500
elector_verify: false          # the verify play runs in step 5
elector_verify_timeout_s: 45
VARS

# 3. deploy, twice
play() { ansible-playbook -i "$tmp/inventory/hosts.yml" "$ansible_dir/site.yml" -e @"$tmp/vars.yml" "$@"; }
say "ansible-playbook site.yml onto $nodes containers, backend $backend, service manager none"
play > "$tmp/deploy1.log" 2>&1 || { tail -40 "$tmp/deploy1.log" >&2; die "first deploy failed ($tmp/deploy1.log)"; }
grep -E 'ok=.*changed=' "$tmp/deploy1.log" | sed 's/^/   /'
play > "$tmp/deploy2.log" 2>&1 || { tail -40 "$tmp/deploy2.log" >&2; die "second deploy failed"; }
if grep -E 'changed=[1-9]' "$tmp/deploy2.log" >/dev/null; then
  grep -B2 '^changed:' "$tmp/deploy2.log" >&2; die "second deploy changed something (not idempotent)"
fi
say "second run: changed=0 on every host (idempotent)"
c1=$(cname 1)
docker exec "$c1" sh -c 'ls -l /usr/local/bin/elector /etc/elector /etc/elector/hooks; stat -c "%a %U:%G %n" /etc/elector/elector.yaml /etc/elector/auth.key /var/lib/elector' | sed 's/^/   /'

# 4. data nodes from the laid-down files
if [ "$backend" = kevy ]; then
  start_data='runuser -u kevy -- /usr/local/bin/kevy --config /etc/kevy/kevy.toml >/var/log/datanode.log 2>&1'
else
  start_data='runuser -u redis -- /usr/bin/redis-server /etc/redis/elector-datanode.conf >/var/log/datanode.log 2>&1'
fi
for i in $(seq 1 "$nodes"); do docker exec -d "$(cname "$i")" sh -c "$start_data"; done
for i in $(seq 1 "$nodes"); do
  c=$(cname "$i"); ok=0
  for _ in $(seq 1 50); do
    if docker exec "$c" redis-cli -p 6379 PING 2>/dev/null | grep -q PONG; then ok=1; break; fi
    sleep 0.2
  done
  [ $ok = 1 ] || { docker exec "$c" tail -20 /var/log/datanode.log >&2; die "$c: data node did not answer PING"; }
  role=$(docker exec "$c" redis-cli -p 6379 INFO replication | tr -d '\r' | grep '^role:' || true)
  set_reply=$(docker exec "$c" redis-cli -p 6379 SET ansible-probe 1 2>&1 | tr -d '\r')
  [ "$role" = role:slave ] || die "$c: data node started as '$role', expected role:slave"
  case "$set_reply" in OK) die "$c: data node accepted a write right after start" ;; esac
  say "$c: data node up, $role, SET refused: $set_reply"
done

# 5. electors + the playbook's verify play
printf 'node_id: x\nlisten: 42\npeers: []\n' > "$tmp/broken.yaml"
if "$elector_bin" check-config "$tmp/broken.yaml" >/dev/null 2>&1; then
  stub=1
else
  stub=0
fi
for i in $(seq 1 "$nodes"); do
  docker exec -d "$(cname "$i")" sh -c 'runuser -u elector -- /usr/local/bin/elector run --config /etc/elector/elector.yaml >/var/log/elector.log 2>&1'
done
sleep 2
alive=0
for i in $(seq 1 "$nodes"); do
  if docker exec "$(cname "$i")" pgrep -x elector >/dev/null; then alive=$((alive + 1)); fi
done
if [ $alive = 0 ] && [ $stub = 1 ]; then
  say "INCOMPLETE: $elector_bin exits at once and its check-config accepts a broken config:"
  say "  it is still a stub, so no elector runs and the cluster (verify play) was not tested."
  exit 3
fi
[ $alive = "$nodes" ] || { docker exec "$c1" tail -20 /var/log/elector.log >&2; die "only $alive of $nodes electors running"; }
say "electors running; ansible-playbook site.yml --tags verify"
if ! play --tags verify -e elector_verify=true > "$tmp/verify.log" 2>&1; then
  tail -40 "$tmp/verify.log" >&2
  for i in $(seq 1 "$nodes"); do echo "--- $(cname "$i") elector.log" >&2; docker exec "$(cname "$i")" tail -15 /var/log/elector.log >&2; done
  die "verify play failed"
fi
grep -E '"msg": "(elector-ans|one primary)' "$tmp/verify.log" | sed 's/^ *"msg": /   /'
primary=$(grep -oE '"msg": "one primary: [^"]+' "$tmp/verify.log" | sed 's/.*one primary: //' | head -1)
for i in $(seq 1 "$nodes"); do
  c=$(cname "$i")
  if [ "n$i" = "$primary" ]; then
    r=$(docker exec "$c" redis-cli -p 6379 SET ansible-probe 1 | tr -d '\r')
    [ "$r" = OK ] || die "$c is the elected primary but SET answered: $r"
    say "$c (primary $primary): SET ansible-probe -> OK"
  fi
done
say "PASS ($nodes nodes, $backend)"
