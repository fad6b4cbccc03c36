#!/usr/bin/env bash
# Real deploy of the playbook onto N containers (default 3) built from the local
# base image elector-base:bookworm, over the community.docker.docker connection.
#
#   ansible/tests/docker-deploy.sh [kevy|redis] [N] [none|systemd]
#   WITNESS=1 makes the last of the N hosts a witness (elector only)
#   ELECTOR_DEB: the elector package to deploy (default: the newest
#     target/debian/elector_*_amd64.deb, `just package`); REHEARSE=1 also needs
#     ELECTOR_DEB_UPGRADE, a newer version of it, for the rolling upgrade.
#   VIP (systemd mode; default PREFIX.100/24, "none" for no VIP): elector_vip_address;
#     the containers get NET_ADMIN and NET_RAW, and the drill checks the VIP moves.
#
# none (default): elector_service_manager=none, containers run `sleep`; after the
#   playbook laid the files down, the script starts each data node and elector
#   from them, as their service users.
# systemd: containers run systemd as PID 1 (unprivileged: tmpfs /run, cgroupfs
#   read-only); the playbook installs, enables and starts the units itself. The
#   image has no redis-server, so the redis backend goes through the playbook's
#   apt install (distro unit kept from starting, then masked).
#
# Steps: 1. build the target image (elector-base + python3 [+ systemd]) if missing;
# 2. start the containers, write an inventory, --check --diff must pass and write
# nothing; 3. run site.yml, then again: the
# second run must change nothing; 4. data nodes up and NOT writable (role slave,
# SET refused); 5. electors up, the playbook's verify play (one primary, every
# node agrees), the primary takes a write and the others refuse it.
# exit: 0 all passed; 1 a check failed; 3 the elector binary is still a stub:
#       steps 1-4 ran, step 5 could not.   KEEP=1 keeps containers and logs.
set -euo pipefail

backend=${1:-kevy}
nodes=${2:-3}
data_nodes=$(( nodes - ${WITNESS:-0} ))   # WITNESS=1: the last host votes only
mode=${3:-none}
case "$backend" in kevy|redis) ;; *) echo "backend: kevy|redis" >&2; exit 2;; esac
case "$mode" in none|systemd) ;; *) echo "mode: none|systemd" >&2; exit 2;; esac
ansible_dir=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$ansible_dir/.." && pwd)
venv=${ANSIBLE_VENV:-$repo/.cache/ansible-venv}
base_image=${BASE_IMAGE:-elector-base:bookworm}
py_image=elector-ansible-target:bookworm
sd_image=elector-ansible-systemd:bookworm
net=${NET_NAME:-elector-ansible-test}
prefix=${NET_PREFIX:-10.78.0}
cname() { echo "elector-ans-n$1"; }
# WITNESS=1: the last host is a witness (inventory group "witness"): elector only.
witness=${WITNESS:-0}
# Data node client port of node i: 6379 + its 0-based position (kevy 7 tells
# replicas apart by client port only; the role does the same).
dport() { echo $((6378 + $1)); }

t_start=$(date +%s)
say() { echo "docker-deploy: [$(( $(date +%s) - t_start )) s] $*"; }
die() { echo "docker-deploy: FAIL: $*" >&2; exit 1; }

[ -x "$venv/bin/ansible-playbook" ] || die "no ansible in $venv (python3 -m venv $venv && $venv/bin/pip install ansible)"
ls -d "$venv"/lib/python3*/site-packages/ansible_collections/community/docker >/dev/null 2>&1 \
  || die "community.docker missing: $venv/bin/pip install ansible  (the full package from PyPI)"
export PATH="$venv/bin:$PATH" ANSIBLE_CONFIG="$ansible_dir/ansible.cfg" ANSIBLE_NOCOLOR=1 ANSIBLE_FORKS=3
docker image inspect "$base_image" >/dev/null 2>&1 || die "no $base_image (scripts/build-base-image.sh)"

elector_deb=${ELECTOR_DEB:-$(ls -t "$repo"/target/debian/elector_*_amd64.deb 2>/dev/null | head -1 || true)}
[ -n "$elector_deb" ] && [ -f "$elector_deb" ] || die "no elector package (just package builds target/debian/elector_VERSION_amd64.deb; or set ELECTOR_DEB)"
kevy_bin=${KEVY_BIN:-$HOME/.cargo/bin/kevy}
[ "$backend" = redis ] || [ -x "$kevy_bin" ] || die "no kevy binary at $kevy_bin (scripts/install-deps.sh)"

tmp=$(mktemp -d)
# Deploy a snapshot: the package under target/ may be rebuilt while this runs.
mkdir -p "$tmp/pkg" "$tmp/pkg-root"
cp "$elector_deb" "$tmp/pkg/"
say "elector package: $elector_deb ($(dpkg-deb -f "$elector_deb" Version), $(date -r "$elector_deb" -u +%H:%M:%SZ), snapshot in $tmp/pkg)"
elector_deb=$tmp/pkg/$(basename "$elector_deb")
dpkg-deb -x "$elector_deb" "$tmp/pkg-root"
elector_bin=$tmp/pkg-root/usr/bin/elector
vip=${VIP:-$prefix.100/24}
if [ "$vip" = none ] || [ "$mode" != systemd ]; then vip=""; fi
# Is the elector binary real yet? (the lead replaces a stub main)
printf 'node_id: x\nlisten: 42\npeers: []\n' > "$tmp/broken.yaml"
stub=0
if "$elector_bin" check-config "$tmp/broken.yaml" >/dev/null 2>&1 \
   && timeout 2 "$elector_bin" run --config "$tmp/broken.yaml" >/dev/null 2>&1; then
  stub=1
  say "NOTE: $elector_bin accepts a broken config and exits at once: still a stub"
fi

# 1. target images
build_image() { # FROM TO PACKAGES [apt-get purge PACKAGES]
  local from=$1 to=$2 install=$3 purge=${4:-}
  docker image inspect "$to" >/dev/null 2>&1 && return 0
  say "building $to ($from + $install, about 30 s)"
  docker rm -f elector-ansible-build >/dev/null 2>&1 || true
  docker run --name elector-ansible-build --network host "$from" sh -c "
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends $install >/dev/null || exit 1
    if [ -n '$purge' ]; then apt-get purge -y -qq $purge >/dev/null || exit 1; fi
    rm -rf /var/lib/apt/lists/*" || die "building $to failed"
  if [ "$to" = "$sd_image" ]; then
    docker commit --change 'CMD ["/sbin/init"]' elector-ansible-build "$to" >/dev/null
  else
    docker commit --change 'CMD ["sleep", "infinity"]' elector-ansible-build "$to" >/dev/null
  fi
  docker rm elector-ansible-build >/dev/null
}
build_image "$base_image" "$py_image" "python3-minimal python3-apt"
image=$py_image
if [ "$mode" = systemd ]; then
  build_image "$py_image" "$sd_image" "systemd systemd-sysv dbus" "redis-server redis-sentinel"
  image=$sd_image
fi

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
    if [ "$mode" = systemd ]; then
      docker run -d --name "$(cname "$i")" --hostname "n$i" --network "$net" --ip "$prefix.1$i" \
        --cap-add NET_ADMIN --cap-add NET_RAW --tmpfs /run --tmpfs /run/lock -v /sys/fs/cgroup:/sys/fs/cgroup:ro "$image" >/dev/null
    else
      docker run -d --init --name "$(cname "$i")" --hostname "n$i" --network "$net" --ip "$prefix.1$i" \
        --cap-add NET_ADMIN "$image" sleep infinity >/dev/null
    fi
    echo "        $(cname "$i"):"
    echo "          elector_node_id: n$i"
    echo "          elector_address: $prefix.1$i"
  done
  echo "      vars:"
  echo "        ansible_connection: community.docker.docker"
  echo "        ansible_python_interpreter: /usr/bin/python3"
  echo "        ansible_become: false   # root in the container, no sudo"
  if [ "$witness" = 1 ]; then
    echo "    witness:"
    echo "      hosts:"
    echo "        $(cname "$nodes"):"
  fi
} > "$tmp/inventory/hosts.yml"
if [ "$mode" = systemd ]; then
  for i in $(seq 1 "$nodes"); do
    for _ in $(seq 1 30); do
      s=$(docker exec "$(cname "$i")" systemctl is-system-running 2>/dev/null || true)
      case "$s" in running|degraded) break;; esac; sleep 1
    done
    case "$s" in running|degraded) ;; *) die "$(cname "$i"): systemd not up ($s)";; esac
  done
  say "systemd is up in $nodes containers"
fi
cp "$ansible_dir/group_vars/all.yml.example" "$tmp/inventory/group_vars/all.yml"
cat > "$tmp/vars.yml" <<VARS
elector_backend: $backend
elector_service_manager: $mode
elector_package_src: $elector_deb
elector_vip_address: "$vip"
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
# 2b. --check --diff on the fresh hosts must pass and leave nothing behind
say "ansible-playbook site.yml --check --diff on the fresh containers"
play --check --diff > "$tmp/check.log" 2>&1 || { tail -40 "$tmp/check.log" >&2; die "--check on fresh hosts failed ($tmp/check.log)"; }
if docker exec "$(cname 1)" test -e /etc/elector; then die "--check wrote /etc/elector"; fi
say "--check --diff: ok, nothing written"

say "ansible-playbook site.yml onto $nodes containers, backend $backend, service manager $mode"
play > "$tmp/deploy1.log" 2>&1 || { tail -40 "$tmp/deploy1.log" >&2; die "first deploy failed ($tmp/deploy1.log)"; }
grep -E 'ok=.*changed=' "$tmp/deploy1.log" | sed 's/^/   /'
grep -E '^(RUNNING HANDLER|TASK \[datanode : Install redis-server from apt)' -A4 "$tmp/deploy1.log" \
  | grep -E '^(RUNNING|TASK|changed|ok|skipping)' | sed 's/^/   /' | head -20 || true
play > "$tmp/deploy2.log" 2>&1 || { tail -40 "$tmp/deploy2.log" >&2; die "second deploy failed"; }
# With a stub elector, systemd sees elector.service exit at once, so each run starts it again.
changed_tasks=$(awk '/^TASK \[/{t=$0} /^changed:/{print t}' "$tmp/deploy2.log" | sort -u \
  | { if [ $stub = 1 ]; then grep -v 'Enable and start the elector' || true; else cat; fi; })
if [ -n "$changed_tasks" ]; then
  echo "$changed_tasks" >&2
  if [ "$mode" = systemd ]; then
    docker exec "$(cname 1)" sh -c 'systemctl status elector --no-pager -n 0; journalctl -u elector --no-pager -n 25' >&2 || true
  fi
  die "second deploy changed something (not idempotent)"
fi
say "second run: nothing changed$( [ $stub = 1 ] && [ "$mode" = systemd ] && echo ' (apart from starting the stub elector again)')"
if [ "$mode" = systemd ]; then
  # A config change on running services must go through the restart handlers:
  # a data node setting rolls the data nodes one host at a time, each rejoined
  # before the next; then a fingerprinted elector timing restarts every
  # elector at once (members with different fingerprints ignore each other),
  # and the cluster must elect again (protocol §6.10: on kevy by the process
  # marks). The verify play after each run checks one primary.
  if [ "$backend" = kevy ]; then dn_change="kevy_aof=false"; else dn_change="redis_appendonly=false"; fi
  play -e "$dn_change" > "$tmp/deploy3.log" 2>&1 \
    || { tail -40 "$tmp/deploy3.log" >&2; die "third deploy (changed data node config) failed"; }
  # Tasks included by a handler print as RUNNING HANDLER.
  rolled=$(grep -cE "(TASK|HANDLER) \[datanode : Restart the data node \(" "$tmp/deploy3.log" || true)
  [ "$rolled" = "$data_nodes" ] \
    || die "changing the data node config restarted $rolled of $data_nodes data nodes one at a time ($tmp/deploy3.log)"
  say "data node config change ($dn_change): $rolled data nodes restarted one host at a time, each rejoined before the next"
  if [ $stub = 0 ]; then
    play -e "$dn_change" -e elector_hb_interval_ms=250 > "$tmp/deploy4.log" 2>&1 \
      || { tail -40 "$tmp/deploy4.log" >&2; die "fourth deploy (changed elector timing) failed"; }
    grep -A1 'RUNNING HANDLER \[elector : Restart elector\]' "$tmp/deploy4.log" | grep -q '^changed:' \
      || die "changing elector.yaml did not restart the elector ($tmp/deploy4.log)"
    say "elector timing change (hb_interval_ms 250): every elector restarted at once, one primary elected again"
  fi
fi
c1=$(cname 1)
docker exec "$c1" sh -c 'dpkg-query -W elector; ls -l /usr/bin/elector; ls -l /etc/elector /etc/elector/hooks; stat -c "%a %U:%G %n" /etc/elector/elector.yaml /etc/elector/auth.key /var/lib/elector' | sed 's/^/   /'
if [ "$mode" = systemd ]; then
  docker exec "$c1" sh -c 'for u in elector-datanode elector redis-server; do printf "   %-18s enabled=%-8s active=%s\n" $u "$(systemctl is-enabled $u 2>/dev/null)" "$(systemctl is-active $u 2>/dev/null)"; done'
fi

# 4. data nodes: up, and not writable before any elector acts
if [ "$mode" = none ]; then
  if [ "$backend" = kevy ]; then
    start_data='runuser -u kevy -- /usr/local/bin/kevy --config /etc/kevy/kevy.toml >/var/log/datanode.log 2>&1'
  else
    start_data='runuser -u redis -- /usr/bin/redis-server /etc/redis/elector-datanode.conf >/var/log/datanode.log 2>&1'
  fi
  for i in $(seq 1 "$data_nodes"); do docker exec -d "$(cname "$i")" sh -c "$start_data"; done
fi
check_readonly=1
if [ "$mode" = systemd ] && [ $stub = 0 ]; then
  check_readonly=0   # the electors already run and may have promoted a node
fi
for i in $(seq 1 "$data_nodes"); do
  c=$(cname "$i"); ok=0
  for _ in $(seq 1 50); do
    if docker exec "$c" redis-cli -p "$(dport "$i")" PING 2>/dev/null | grep -q PONG; then ok=1; break; fi
    sleep 0.2
  done
  [ $ok = 1 ] || die "$c: data node did not answer PING"
  if [ $check_readonly = 1 ]; then
    role=$(docker exec "$c" redis-cli -p "$(dport "$i")" INFO replication | tr -d '\r' | grep '^role:' || true)
    set_reply=$(docker exec "$c" redis-cli -p "$(dport "$i")" SET ansible-probe 1 2>&1 | tr -d '\r')
    [ "$role" = role:slave ] || die "$c: data node started as '$role', expected role:slave"
    case "$set_reply" in OK) die "$c: data node accepted a write with no elector running" ;; esac
    say "$c: data node up, $role, SET refused: $set_reply"
  else
    say "$c: data node up"
  fi
done

# 5. electors + the playbook's verify play
if [ $stub = 1 ]; then
  say "INCOMPLETE: $elector_bin is still a stub, so no elector runs and the cluster"
  say "  (verify play, one primary) was not tested."
  exit 3
fi
if [ "$mode" = none ]; then
  for i in $(seq 1 "$nodes"); do
    docker exec -d "$(cname "$i")" sh -c 'runuser -u elector -- /usr/bin/elector run --config /etc/elector/elector.yaml >/var/log/elector.log 2>&1'
  done
  sleep 1
fi
elector_log() {
  if [ "$mode" = none ]; then docker exec "$1" tail -20 /var/log/elector.log
  else docker exec "$1" journalctl -u elector --no-pager -n 20; fi
}
say "ansible-playbook site.yml --tags verify"
if ! play --tags verify -e elector_verify=true > "$tmp/verify.log" 2>&1; then
  tail -40 "$tmp/verify.log" >&2
  for i in $(seq 1 "$nodes"); do echo "--- $(cname "$i")" >&2; elector_log "$(cname "$i")" >&2 || true; done
  die "verify play failed"
fi
grep -E '"msg": "(elector-ans|one primary)' "$tmp/verify.log" | sed 's/^ *"msg": /   /'
primary=$(grep -oE '"msg": "one primary: [^"]+' "$tmp/verify.log" | sed 's/.*one primary: //' | head -1)
[ -n "$primary" ] || die "no primary in the verify output"
for i in $(seq 1 "$data_nodes"); do
  c=$(cname "$i")
  r=$(docker exec "$c" redis-cli -p "$(dport "$i")" SET ansible-probe "$i" 2>&1 | tr -d '\r')
  if [ "n$i" = "$primary" ]; then
    [ "$r" = OK ] || die "$c is the elected primary but SET answered: $r"
    say "$c (primary): SET -> OK"
  else
    [ "$r" != OK ] || die "$c is not the primary but accepted a write"
    say "$c (replica): SET -> $r"
  fi
done
if [ "$mode" = systemd ]; then
  # The data node must not outlive a dead elector, and both come back.
  c=$(cname 1)
  docker exec "$c" systemctl kill -s KILL elector
  gone=0
  for _ in $(seq 1 30); do
    if [ "$(docker exec "$c" systemctl is-active elector-datanode 2>/dev/null)" != active ]; then gone=1; break; fi
    sleep 0.1
  done
  [ $gone = 1 ] || die "$c: the data node kept running after its elector was killed"
  back=0
  for _ in $(seq 1 100); do
    if [ "$(docker exec "$c" systemctl is-active elector)" = active ] \
      && docker exec "$c" redis-cli -p "$(dport 1)" PING 2>/dev/null | grep -q PONG; then back=1; break; fi
    sleep 0.2
  done
  [ $back = 1 ] || die "$c: elector and data node did not come back after the elector was killed"
  say "$c: killing the elector stopped its data node; Restart= brought both back"
fi

# 6. (REHEARSE=1, systemd, 3+ nodes) the failover drill, crash then graceful,
# and a rolling upgrade to a changed elector (and kevy) binary with the
# background writer; each stage timed.
if [ "${REHEARSE:-0}" = 1 ]; then
  [ "$mode" = systemd ] || die "REHEARSE=1 needs the systemd mode"
  if [ "$nodes" -lt 3 ]; then
    say "REHEARSE: skipped the drill and the upgrade: $nodes nodes never fail over on their own"
  else
    stage() { # NAME LOG CMD...
      local name=$1 log=$2 t0; shift 2; t0=$(date +%s)
      if "$@" > "$log" 2>&1; then
        say "$name: ok ($(( $(date +%s) - t0 )) s)"
        awk '/TASK \[Report\]/{r=1} r && /"(drill|old|new|primary|writes|cluster|upgrade|components|writer|vip)/' "$log" \
          | sed 's/^ *"/   /; s/",\?$//'
      else
        tail -60 "$log" >&2
        for i in $(seq 1 "$nodes"); do echo "--- $(cname "$i")" >&2; elector_log "$(cname "$i")" >&2 || true; done
        die "$name failed after $(( $(date +%s) - t0 )) s ($log)"
      fi
    }
    pb() { local book=$1; shift; ansible-playbook -i "$tmp/inventory/hosts.yml" "$ansible_dir/$book" -e @"$tmp/vars.yml" "$@"; }
    # the elector killed above may still be coming back: wait for a healthy cluster first
    stage "drill (crash)" "$tmp/drill-crash.log" pb failover-drill.yml -e drill_mode=crash -e drill_wait_healthy_s=60
    stage "drill (graceful)" "$tmp/drill-graceful.log" pb failover-drill.yml -e drill_mode=graceful
    new_deb=${ELECTOR_DEB_UPGRADE:-}
    [ -n "$new_deb" ] && [ -f "$new_deb" ] || die "REHEARSE=1 needs ELECTOR_DEB_UPGRADE, a newer elector package (cargo deb --deb-revision N)"
    new_version=$(dpkg-deb -f "$new_deb" Version)
    dpkg --compare-versions "$new_version" gt "$(dpkg-deb -f "$elector_deb" Version)" \
      || die "ELECTOR_DEB_UPGRADE ($new_version) is not newer than ELECTOR_DEB ($(dpkg-deb -f "$elector_deb" Version))"
    mkdir -p "$tmp/pkg-new"; cp "$new_deb" "$tmp/pkg-new/"
    up_args=(-e upgrade_elector_package_src="$tmp/pkg-new/$(basename "$new_deb")")
    if [ "$backend" = kevy ]; then
      cp "$kevy_bin" "$tmp/kevy.new"; printf '\n# upgrade rehearsal %s\n' "$(date +%s)" >> "$tmp/kevy.new"
      up_args+=(-e upgrade_kevy_binary_src="$tmp/kevy.new")
    else
      up_args+=(-e upgrade_restart_datanode=true)
    fi
    stage "upgrade" "$tmp/upgrade.log" pb upgrade.yml "${up_args[@]}"
    for i in $(seq 1 "$nodes"); do
      have=$(docker exec "$(cname "$i")" dpkg-query -W -f '${Version}' elector)
      [ "$have" = "$new_version" ] || die "$(cname "$i"): elector package $have installed after the upgrade, expected $new_version"
      [ "$(docker exec "$(cname "$i")" systemctl is-active elector)" = active ] \
        || die "$(cname "$i"): elector not running after the upgrade"
    done
    say "upgrade: every node has elector $new_version installed (from $(dpkg-deb -f "$elector_deb" Version)) and running"
  fi
fi
say "PASS ($nodes nodes, $backend, $mode)"
