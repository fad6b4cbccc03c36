#!/usr/bin/env python3
"""`just clients`: real Sentinel-aware client libraries through a primary kill.

For each target (our electors on kevy, on Redis, and real Redis Sentinel) it
starts three nodes in containers on a network of its own, then for each client
and run: starts the client program (clients/<lang>/..., given only the
sentinel addresses and the master name), waits for acknowledged writes, kills
the primary's container, waits until the client has written through its own
Sentinel logic again, stops it, reads back every acknowledged key from the
new primary, and restarts the killed node. Results: one JSON line per run in
target/clients/runs.jsonl and, with --docs, the table in docs/clients.md.

Containers and networks are named clients-<target>-*, on 10.137.<k>.0/24 (no
host port is published: the host reaches the containers' addresses on the
bridge), so this never touches the lab's fixed ports or names.
Run it with the clients venv's python (clients/setup.sh makes it): the
reader and the readiness checks use redis-py.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = sys.executable
MASTER = "mymaster"
SENTINEL_PORT = 26379

# Each client: language, how to print its version, the command that runs it, and how
# it finds the primary (from its source; the run's own lines confirm or refute it).
CLIENTS = {
    "redis-py": dict(
        lang="Python",
        version=[PY, "-c", "import redis; print('redis-py', redis.__version__)"],
        cmd=[PY, os.path.join(HERE, "python", "redis_py.py")],
        configure="`Sentinel([(ip, 26379), ...], sentinel_kwargs=SENTINEL_KWARGS, socket_timeout=1.0).master_for('mymaster', socket_timeout=2.0)`, SENTINEL_KWARGS = `{'socket_timeout': 0.5, 'socket_connect_timeout': 0.5, 'retry': Retry(NoBackoff(), 0)}` (see below)",
    ),
    "redis-py-replica": dict(
        lang="Python",
        version=[PY, "-c", "import redis; print('redis-py', redis.__version__)"],
        cmd=[PY, os.path.join(HERE, "python", "redis_py_replica.py")],
        configure="as redis-py, plus `sentinel.slave_for('mymaster', socket_timeout=1.0)` for the reads",
        replica_reads=True,
    ),
    "redis-py-asyncio": dict(
        lang="Python (asyncio)",
        version=[PY, "-c", "import redis; print('redis-py', redis.__version__, 'asyncio')"],
        cmd=[PY, os.path.join(HERE, "python", "redis_py_async.py")],
        configure="`redis.asyncio.sentinel.Sentinel([...], sentinel_kwargs=SENTINEL_KWARGS, ...).master_for('mymaster', ...)`, as redis-py",
    ),
    "valkey-py": dict(
        lang="Python",
        version=[PY, "-c", "import valkey; print('valkey-py', valkey.__version__)"],
        cmd=[PY, os.path.join(HERE, "python", "valkey_py.py")],
        configure="`valkey.sentinel.Sentinel([...], sentinel_kwargs=SENTINEL_KWARGS, ...).master_for('mymaster', ...)`, as redis-py",
    ),
    "redis-rs": dict(
        lang="Rust (tokio)",
        version=["sh", "-c", "grep -o 'redis = { version = \"=[^\"]*' " + shlex.quote(os.path.join(HERE, "rust", "Cargo.toml")) + " | sed 's/.*=/redis crate /'"],
        cmd=[os.path.join(HERE, "rust", "target", "release", "client-redis-rs"), "async"],
        configure="`SentinelClientBuilder::new([ConnectionAddr::Tcp(ip, 26379), ...], \"mymaster\", SentinelServerType::Master)`, then `get_async_connection_with_config` with a response timeout above WAIT's (the default 500 ms is below `WAIT 1 1000`)",
    ),
    "redis-rs-sync": dict(
        lang="Rust",
        version=["sh", "-c", "grep -o 'redis = { version = \"=[^\"]*' " + shlex.quote(os.path.join(HERE, "rust", "Cargo.toml")) + " | sed 's/.*=/redis crate /'"],
        cmd=[os.path.join(HERE, "rust", "target", "release", "client-redis-rs"), "sync"],
        configure="the same builder, then `get_client()` and a blocking connection (no connect timeout to the sentinels: see below)",
    ),
    "go-redis-v5": dict(
        lang="Go",
        version=["sh", "-c", "echo go-redis $(dpkg-query -W -f '${Version}' golang-gopkg-redis.v5-dev)"],
        cmd=[os.path.join(HERE, "go", "bin", "client-goredis")],
        configure="`redis.NewFailoverClient(&redis.FailoverOptions{MasterName: \"mymaster\", SentinelAddrs: [...], DialTimeout: 1s, ReadTimeout: 2s})`",
    ),
    "redigo+sentinel": dict(
        lang="Go",
        version=["sh", "-c", "echo redigo $(dpkg-query -W -f '${Version}' golang-github-gomodule-redigo-dev) + FZambia/sentinel $(dpkg-query -W -f '${Version}' golang-github-fzambia-sentinel-dev)"],
        cmd=[os.path.join(HERE, "go", "bin", "client-redigo")],
        configure="`sentinel.Sentinel{Addrs: [...], MasterName: \"mymaster\"}` + a `redis.Pool` dialing `MasterAddr()`, `TestRole(c, \"master\")` on borrow",
    ),
    "ruby-redis": dict(
        lang="Ruby",
        version=["sh", "-c", "echo ruby-redis $(dpkg-query -W -f '${Version}' ruby-redis)"],
        cmd=["ruby", os.path.join(HERE, "ruby", "client.rb")],
        configure="`Redis.new(url: 'redis://mymaster', sentinels: [{host:, port:}, ...], role: :master, connect_timeout: 1, timeout: 2, reconnect_attempts: 0)`",
    ),
    "php-redis": dict(
        lang="PHP",
        version=["sh", "-c", "echo phpredis $(dpkg-query -W -f '${Version}' php-redis)"],
        cmd=["php", os.path.join(HERE, "php", "client.php")],
        configure="`(new RedisSentinel(ip, 26379))->getMasterAddrByName('mymaster')`, asked again by the application after an error",
    ),
    "perl-redis": dict(
        lang="Perl",
        version=["sh", "-c", "echo Redis.pm $(dpkg-query -W -f '${Version}' libredis-perl)"],
        cmd=["perl", os.path.join(HERE, "perl", "client.pl")],
        configure="`Redis->new(sentinels => ['ip:26379', ...], service => 'mymaster', reconnect => 1, conservative_reconnect => 1, cnx_timeout => 1, read_timeout => 2, sentinels_cnx_timeout => 0.5)`; a new object after an error (see below)",
    ),
    # No Sentinel support (or none used): the virtual IP that follows the primary
    # (docs/vip.md), on the elector targets only.
    "redis-py-vip": dict(
        lang="Python",
        version=[PY, "-c", "import redis; print('redis-py', redis.__version__)"],
        cmd=[PY, os.path.join(HERE, "vip", "redis_py_vip.py")],
        configure="`redis.Redis(host=VIP, port=6379, socket_timeout=2.0, socket_connect_timeout=1.0)`",
        vip=True,
    ),
    "node-redis-vip": dict(
        lang="JavaScript (Node)",
        version=["sh", "-c", "echo node-redis $(dpkg-query -W -f '${Version}' node-redis)"],
        cmd=["env", "NODE_PATH=/usr/share/nodejs", "node", os.path.join(HERE, "vip", "node_vip.js")],
        configure="`createClient({url: 'redis://VIP:6379', socket: {connectTimeout: 1000, reconnectStrategy: () => 50}, disableOfflineQueue: true})`",
        vip=True,
    ),
    "redis-cli-vip": dict(
        lang="shell",
        version=["sh", "-c", "redis-cli --version"],
        cmd=[os.path.join(HERE, "vip", "redis_cli_vip.sh")],
        configure="`redis-cli -h VIP -p 6379`, one process per write",
        vip=True,
    ),
}

TARGETS = {"kevy": 1, "redis": 2, "sentinel": 3}


def log(msg):
    print(f"clients: {msg}", file=sys.stderr, flush=True)


def sh(*args, check=True, capture=False):
    return subprocess.run(args, check=check, text=True,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.PIPE if capture else None)


def now_ms():
    return int(time.time() * 1000)


class Target:
    """Three nodes in containers on a network of their own."""

    def __init__(self, name, image, base_image, down_after_ms, vip=False):
        self.name = name
        self.image = image
        self.base_image = base_image
        self.down_after_ms = down_after_ms
        self.prefix = f"10.137.{TARGETS[name]}"
        self.net = f"clients-{name}"
        self.nodes = {f"n{i}": f"{self.prefix}.1{i}" for i in (1, 2, 3)}
        # The electors' virtual IP (docs/vip.md), when a client needs it.
        self.vip = f"{self.prefix}.100" if vip and name in ("kevy", "redis") else None

    def container(self, node):
        return f"clients-{self.name}-{node}"

    @property
    def sentinels(self):
        return [f"{ip}:{SENTINEL_PORT}" for ip in self.nodes.values()]

    def down(self):
        names = [self.container(n) for n in self.nodes]
        sh("docker", "rm", "-f", *names, check=False, capture=True)
        sh("docker", "network", "rm", self.net, check=False, capture=True)

    def up(self):
        self.down()
        sh("docker", "network", "create", "--subnet", f"{self.prefix}.0/24", self.net, capture=True)
        for i, (node, ip) in enumerate(self.nodes.items()):
            sh("docker", "run", "-d", *self.run_args(i, node, ip), capture=True)
        self.wait_ready(90)

    def run_args(self, index, node, ip):
        common = ["--name", self.container(node), "--hostname", node, "--network", self.net,
                  "--ip", ip, "--log-opt", "max-size=20m",
                  "--sysctl", "net.ipv4.neigh.eth0.base_reachable_time_ms=250",
                  "--sysctl", "net.ipv4.neigh.eth0.delay_first_probe_time=1",
                  "--sysctl", "net.ipv4.neigh.eth0.retrans_time_ms=100"]
        if self.name in ("kevy", "redis"):
            # As compose/lab-3.yml lays a node out (timings: its defaults, DOWN_AFTER_MS here).
            peers = ",".join(f"{n}={a}" for n, a in self.nodes.items())
            env = dict(NODE_ID=node, PEERS=peers, BACKEND=self.name, HB_INTERVAL_MS="200",
                       DOWN_AFTER_MS=str(self.down_after_ms), ELECTION_TIMEOUT_MS="2000",
                       BACKOFF_MIN_MS="500", BACKOFF_MAX_MS="1500")
            if self.vip:
                env.update(VIP=self.vip, VIP_PORT="6379")
            envs = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
            return common + ["--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW", *envs, self.image]
        # Real Redis Sentinel: redis-server and redis-sentinel from Debian (the base image),
        # n1 the first primary. Configs are written on first start only, so a restarted
        # node keeps what Sentinel rewrote into them (as a real install does).
        primary = self.nodes["n1"]
        replicaof = "" if node == "n1" else f"replicaof {primary} 6379"
        script = f"""
set -e
mkdir -p /etc/clients
[ -f /etc/clients/redis.conf ] || printf '%s\\n' 'bind 0.0.0.0' 'protected-mode no' 'port 6379' \\
  'save ""' 'appendonly no' 'repl-diskless-sync-delay 0' 'dir /tmp' '{replicaof}' > /etc/clients/redis.conf
[ -f /etc/clients/sentinel.conf ] || printf '%s\\n' 'bind 0.0.0.0' 'protected-mode no' 'port {SENTINEL_PORT}' \\
  'dir /tmp' 'sentinel monitor {MASTER} {primary} 6379 2' \\
  'sentinel down-after-milliseconds {MASTER} {self.down_after_ms}' \\
  'sentinel failover-timeout {MASTER} 10000' 'sentinel parallel-syncs {MASTER} 1' > /etc/clients/sentinel.conf
redis-server /etc/clients/redis.conf &
redis-sentinel /etc/clients/sentinel.conf &
wait -n
exit 1
"""
        return common + ["--entrypoint", "bash", self.base_image, "-c", script]

    def sentinel_conn(self, ip):
        return redis.Redis(host=ip, port=SENTINEL_PORT, socket_timeout=1, socket_connect_timeout=1,
                           decode_responses=True)

    def master_addr(self, exclude=()):
        """The primary as a reachable sentinel names it (or None)."""
        for node, ip in self.nodes.items():
            if node in exclude:
                continue
            try:
                addr = self.sentinel_conn(ip).execute_command("SENTINEL", "get-master-addr-by-name", MASTER)
            except redis.RedisError:
                continue
            if addr:
                return addr[0], int(addr[1])
        return None

    def node_of(self, ip):
        return next(n for n, a in self.nodes.items() if a == ip)

    def ready(self):
        """One primary every sentinel agrees on, two linked replicas, a durable write."""
        addrs = set()
        for ip in self.nodes.values():
            s = self.sentinel_conn(ip)
            addr = s.execute_command("SENTINEL", "get-master-addr-by-name", MASTER)
            if not addr:
                return False
            addrs.add((addr[0], int(addr[1])))
            master = s.execute_command("SENTINEL", "master", MASTER)
            if isinstance(master, list):
                master = dict(zip(master[::2], master[1::2]))
            if "down" in master.get("flags", ""):
                return False
            # Real Sentinel: every sentinel has heard the other two (a failover needs them).
            if self.name == "sentinel" and int(master.get("num-other-sentinels", 0)) < 2:
                return False
            replicas = s.execute_command("SENTINEL", "replicas", MASTER)
            ok = 0
            for r in replicas:
                if isinstance(r, list):
                    r = dict(zip(r[::2], r[1::2]))
                if r.get("flags") == "slave" and r.get("master-link-status") == "ok":
                    ok += 1
            if ok < 2:
                return False
        if len(addrs) != 1:
            return False
        host, port = addrs.pop()
        node = redis.Redis(host=host, port=port, socket_timeout=3, socket_connect_timeout=1)
        node.set("clients:ready", "1")
        if node.execute_command("WAIT", 2, 2000) < 2:
            return False
        if self.vip:
            via = redis.Redis(host=self.vip, port=6379, socket_timeout=1, socket_connect_timeout=1)
            return via.info("replication").get("role") == "master"
        return True

    def wait_ready(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            try:
                if self.ready():
                    return
            except (redis.RedisError, OSError, ValueError) as e:
                last = e
            time.sleep(0.5)
        for node in self.nodes:
            out = sh("docker", "logs", "--tail", "15", self.container(node), check=False, capture=True)
            log(f"--- {self.container(node)}\n{out.stdout}{out.stderr}")
        raise SystemExit(f"clients: {self.name}: not ready within {timeout_s}s (last error: {last})")


def run_once(target, client, run, args):
    """One client through one primary kill; returns the run's record."""
    spec = CLIENTS[client]
    prefix = f"c37:{target.name}:{client}:{run}:{now_ms()}"
    stop_file = tempfile.mktemp(prefix="clients-stop-")
    where = dict(VIP=f"{target.vip}:6379") if spec.get("vip") else dict(SENTINELS=",".join(target.sentinels))
    env = dict(os.environ, **where, MASTER=MASTER, PREFIX=prefix,
               STOP_FILE=stop_file, DEADLINE_S=str(args.client_deadline_s), MAX_WRITES="200000",
               PACE_MS=str(args.pace_ms))
    old = target.master_addr()
    proc = subprocess.Popen(spec["cmd"], env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    lines = []
    stderr = []
    threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True).start()

    def reader():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
    t = threading.Thread(target=reader, daemon=True)
    t.start()

    def acks(after=0):
        return sum(1 for l in list(lines) if l.startswith("ack ") and int(l.split()[1]) > after)

    deadline = time.monotonic() + 20
    while acks() < args.warmup_acks and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    record = dict(client=client, target=target.name, run=run, old_primary=f"{old[0]}:{old[1]}")
    if acks() < args.warmup_acks:
        proc.kill()
        t.join(5)
        record.update(ok=False, problem=f"only {acks()} acknowledged writes before the kill",
                      stderr="".join(stderr)[-800:], lines=lines[-5:],
                      first_errors=sorted({l.split(" ", 2)[2][:110] for l in lines if l.startswith("err ")})[:3])
        return record
    victim = target.node_of(old[0])
    t_before = now_ms()
    sh("docker", "kill", target.container(victim), capture=True)
    kill_ms = now_ms()
    record.update(victim=victim, kill_ms=kill_ms, kill_call_ms=kill_ms - t_before)
    # When the target itself names a new primary (polled on a surviving sentinel),
    # to tell the target's failover apart from the client's catching up.
    switched = {}

    def watch_switch():
        end = time.monotonic() + args.failover_timeout_s
        while time.monotonic() < end and "ms" not in switched:
            addr = target.master_addr(exclude=(victim,))
            if addr is not None and addr != old:
                switched["ms"] = now_ms()
                return
            time.sleep(0.05)
    watcher = threading.Thread(target=watch_switch, daemon=True)
    watcher.start()
    deadline = time.monotonic() + args.failover_timeout_s
    while acks(kill_ms) < args.after_acks and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    open(stop_file, "w").close()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    t.join(5)
    watcher.join(1)
    os.unlink(stop_file)

    acked = [l.split()[2] for l in lines if l.startswith("ack ")]
    after = [int(l.split()[1]) for l in lines if l.startswith("ack ") and int(l.split()[1]) > kill_ms]
    errs = [l for l in lines if l.startswith("err ") and int(l.split()[1]) > kill_ms]
    nacks = [l for l in lines if l.startswith("nack ")]
    discovers = [l.split()[2] for l in lines if l.startswith("discover ") and int(l.split()[1]) > kill_ms]
    switches = [l for l in lines if l.startswith("switch ") and int(l.split()[1]) > kill_ms]
    new = target.master_addr(exclude=(victim,))
    replica_reads = replica_read_check(spec, lines, kill_ms, new, target.nodes[victim])
    # The reader: every acknowledged key, from the new primary.
    lost = []
    if new is not None:
        node = redis.Redis(host=new[0], port=new[1], socket_timeout=5, decode_responses=True)
        for i in range(0, len(acked), 1000):
            chunk = acked[i:i + 1000]
            values = node.mget(chunk)
            lost += [k for k, v in zip(chunk, values) if v != k]
    if spec.get("vip"):
        learnt = "virtual IP"
    elif switches:
        learnt = "+switch-master"
    elif discovers:
        learnt = "asked again"
    else:
        learnt = "unseen"
    # Followed: it named the new primary itself (a discover or switch line after the kill).
    new_addr = f"{new[0]}:{new[1]}" if new else None
    followed = new_addr is not None and any(new_addr in l for l in lines if (
        l.startswith("discover ") or l.startswith("switch ")) and int(l.split()[1]) > kill_ms)
    if spec.get("vip"):
        # One address throughout: writes acknowledged after the kill came from the
        # node that holds the VIP now, which the surviving electors name as primary.
        followed = bool(after) and new_addr is not None
    if replica_reads is not None:
        record["replica_reads"] = replica_reads
    record.update(
        ok=bool(after) and after[0] - kill_ms <= args.failover_timeout_s * 1000
        and new is not None and not lost and followed
        and (replica_reads is None or replica_reads["ok"]),
        followed=followed,
        new_primary=f"{new[0]}:{new[1]}" if new else None,
        acked=len(acked), acked_after_kill=len(after), nacks=len(nacks),
        failover_ms=(after[0] - kill_ms) if after else None,
        target_switch_ms=(switched["ms"] - kill_ms) if "ms" in switched else None,
        timeline=[f"{int(l.split()[1]) - kill_ms:+d} {l.split(' ', 2)[0]} {l.split(' ', 2)[2][:100]}"
                  for l in lines if not l.startswith("ack ") and int(l.split()[1]) > kill_ms - 500][:12],
        errors_after_kill=len(errs), first_errors=sorted({e.split(" ", 2)[2][:90] for e in errs})[:3],
        lost=len(lost), lost_sample=lost[:5], learnt=learnt,
        discovers_after_kill=len(discovers), discovered_new=sorted(set(discovers))[:3],
        switch_lines=[s.split(" ", 2)[2][:120] for s in switches[:2]],
        exit=proc.returncode, stderr="".join(stderr)[-400:] if proc.returncode else "",
    )
    if not after or after[0] - kill_ms > args.failover_timeout_s * 1000:
        record["problem"] = f"no acknowledged write within {args.failover_timeout_s:g}s of the kill"
    elif lost:
        record["problem"] = f"{len(lost)} acknowledged writes lost"
    elif not followed:
        record["problem"] = f"writes acknowledged after the kill, but the client never named {new_addr}"
    elif replica_reads is not None and not replica_reads["ok"]:
        record["problem"] = f"replica reads: {replica_reads['problem']}"
    # Put the cluster back to three nodes for the next run.
    sh("docker", "start", target.container(victim), capture=True)
    target.wait_ready(120)
    return record


def replica_read_check(spec, lines, kill_ms, new, victim_ip):
    """The replica-read check of a client that reads through its library's replica
    routing (``rread MS KEY hit|miss ADDR`` lines): after the kill its reads must
    come back, and none may be answered by the killed node. Reads served by the new
    primary are counted, not failed: redis-py keeps a replica connection whose
    server was promoted (it checks no role on a live connection), so when the
    replica it read from is the one elected, it reads the primary from then on, on
    real Sentinel as on us. Misses are counted, not failed: ``WAIT 1`` promises the
    write on one replica, not on the one read."""
    if not spec.get("replica_reads"):
        return None
    reads = [l.split() for l in lines if l.startswith("rread ")]
    before = [r for r in reads if int(r[1]) <= kill_ms]
    after = [r for r in reads if int(r[1]) > kill_ms]
    new_addr = f"{new[0]}:{new[1]}" if new else None
    from_primary = [r for r in after if r[4] == new_addr]
    from_victim = [r for r in after if r[4].rsplit(":", 1)[0] == victim_ip]
    out = dict(before=len(before), after=len(after),
               hosts_after=sorted({r[4] for r in after}),
               misses_after=sum(1 for r in after if r[3] == "miss"),
               from_primary_after=len(from_primary), from_victim_after=len(from_victim),
               first_after_ms=(int(after[0][1]) - kill_ms) if after else None)
    problem = None
    if not before:
        problem = "no replica read answered before the kill"
    elif not after:
        problem = "no replica read answered after the kill"
    elif from_victim:
        problem = f"{len(from_victim)} reads after the kill answered by the killed node"
    out.update(ok=problem is None, problem=problem)
    return out


def client_version(client):
    out = sh(*CLIENTS[client]["version"], check=False, capture=True)
    return (out.stdout.strip() or "?").splitlines()[0]


def fmt_ms(values):
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.0f}"
    return f"{med:.0f} ({min(values)}-{max(values)})"


def render(records, versions, args):
    limit = args.failover_timeout_s * 1000
    for r in records:  # records stored by an older run.py kept late writes as ok
        if r.get("ok") and (r.get("failover_ms") or 0) > limit:
            r["ok"] = False
            r["problem"] = (f"no acknowledged write within {args.failover_timeout_s:g}s of the kill "
                            f"(the first came at {r['failover_ms']} ms)")
    lines = [
        "# Sentinel-aware clients through a primary kill",
        "",
        "<!-- generated by clients/run.py; do not edit by hand -->",
        "",
        f"Produced by `{args.command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"{args.runs} run(s) per client and target; detection (`down_after_ms`, Sentinel's "
        f"`down-after-milliseconds`) {args.down_after_ms} ms on every target.",
        "",
        "Each run: three nodes in containers (our electors beside kevy 7.0.0 or Redis 7; or "
        "Debian's redis-server 7 and redis-sentinel, one of each per container, quorum 2). "
        "The client program (clients/, one per library) is given only the three sentinel "
        "addresses and the master name; it writes `SET k k` then `WAIT 1 1000` in a loop, "
        "printing each key WAIT acknowledged. After "
        f"{args.warmup_acks} acknowledged writes the primary's container is `docker kill`ed; "
        f"the client keeps going through its own Sentinel logic until {args.after_acks} more "
        "writes are acknowledged; then every acknowledged key is read back from the new "
        "primary, and the killed container is started again (it rejoins as a replica). "
        "Clients named `-vip` are given only the electors' virtual IP (docs/vip.md) "
        "instead of the sentinel addresses; Redis Sentinel has none, so they run on the "
        "elector targets only.",
        "",
        "- **failover ms**: from the return of `docker kill` to the client's first "
        "acknowledged write; median (min-max) over the runs.",
        "- **target switched ms**: from the same instant to the first time a surviving "
        "sentinel (ours or Redis's) named the new primary, polled every 50 ms; the "
        "difference is the client's own delay.",
        "- **errors**: errors the application saw after the kill (median per run).",
        "- **lost**: acknowledged writes missing on the new primary, summed over the runs "
        "(must be 0).",
        "- **learnt by**: `+switch-master` when the client printed a switch event it "
        "received; `asked again` when it found the new primary by querying a sentinel "
        "after the kill (each client prints what its library asked).",
        "",
        "| client | language | version | target | runs ok | failover ms | target switched ms | errors | lost | learnt by |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    keys = []
    for r in records:
        k = (r["client"], r["target"])
        if k not in keys:
            keys.append(k)
    for client, target in keys:
        rs = [r for r in records if r["client"] == client and r["target"] == target]
        ok = sum(1 for r in rs if r.get("ok"))
        good = [r for r in rs if r.get("ok")]
        fo = [r["failover_ms"] for r in good]
        errs = [r["errors_after_kill"] for r in good]
        lost = sum(r.get("lost", 0) for r in rs)
        learnt = sorted({r["learnt"] for r in good}) or ["-"]
        tname = {"kevy": "elector + kevy", "redis": "elector + Redis", "sentinel": "Redis Sentinel"}[target]
        sw = [r["target_switch_ms"] for r in rs if r.get("target_switch_ms") is not None]
        err_col = f"{statistics.median(errs):g}" if errs else "-"
        lines.append(
            f"| {client} | {CLIENTS[client]['lang']} | {versions[client]} | {tname} | {ok}/{len(rs)} "
            f"| {fmt_ms(fo)} | {fmt_ms(sw)} | {err_col} | {lost} | {', '.join(learnt)} |")
    problems = [r for r in records if not r.get("ok")]
    if problems:
        lines += ["", "## Runs that failed", ""]
        for r in problems:
            errs = r.get("first_errors") or sorted(
                {l.split(" ", 2)[2][:110] for l in r.get("lines", []) if l.startswith("err ")})
            shown = "; ".join(f"`{e}`" for e in errs[:3]) or "none: the client was blocked"
            lines.append(f"- {r['client']} on {r['target']}, run {r['run']}: {r.get('problem', '?')}"
                         f" (errors: {shown})")
    lines += ["", "## What each client needs configured", "",
              "| client | configuration |", "| --- | --- |"]
    for client in dict.fromkeys(r["client"] for r in records):
        lines.append(f"| {client} | {CLIENTS[client]['configure']} |")
    lines += ["", "## Errors the application saw (first kinds, per client and target)", ""]
    for client, target in keys:
        kinds = sorted({e for r in records if r["client"] == client and r["target"] == target
                        for e in r.get("first_errors", [])})[:3]
        if kinds:
            lines.append(f"- {client} on {target}: " + "; ".join(f"`{k}`" for k in kinds))
    rr = [r for r in records if r.get("replica_reads")]
    if rr:
        lines += ["", "## Replica reads", "",
                  "Clients that also read through their library's replica routing read each "
                  "acknowledged key back through it. **after kill**: reads answered after the "
                  "kill (median per run), by which nodes; **from primary**: of those, served by "
                  "the new primary (redis-py keeps its connection to a replica that was promoted, "
                  "and falls back to the primary when it knows no replica); **misses**: "
                  "reads that did not find the key (`WAIT 1` promises one replica, not the "
                  "one read). A run fails the check when reads never come back after the "
                  "kill, or any is answered by the killed node.", "",
                  "| client | target | runs ok | first read after kill, ms | reads after kill | answered by | from primary | misses |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for client, target in keys:
            rs = [r for r in rr if r["client"] == client and r["target"] == target]
            if not rs:
                continue
            ok = sum(1 for r in rs if r["replica_reads"]["ok"])
            firsts = [r["replica_reads"]["first_after_ms"] for r in rs
                      if r["replica_reads"]["first_after_ms"] is not None]
            hosts = sorted({h for r in rs for h in r["replica_reads"]["hosts_after"]})
            lines.append(
                f"| {client} | {target} | {ok}/{len(rs)} | {fmt_ms(firsts)} "
                f"| {statistics.median(r['replica_reads']['after'] for r in rs):g} "
                f"| {', '.join(hosts) or '-'} "
                f"| {sum(r['replica_reads']['from_primary_after'] for r in rs)} "
                f"| {sum(r['replica_reads']['misses_after'] for r in rs)} |")
    extra = os.path.join(HERE, "NOTES.md")
    if os.path.exists(extra):
        lines += ["", open(extra).read().rstrip()]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", default="kevy,redis,sentinel")
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--image", default=os.environ.get("NODE_IMAGE", "elector-node:latest"))
    p.add_argument("--base-image", default=os.environ.get("BASE_IMAGE", "elector-base:bookworm"))
    p.add_argument("--down-after-ms", type=int, default=3000)
    p.add_argument("--warmup-acks", type=int, default=20)
    p.add_argument("--after-acks", type=int, default=20)
    p.add_argument("--pace-ms", type=int, default=5)
    p.add_argument("--failover-timeout-s", type=float, default=30)
    p.add_argument("--client-deadline-s", type=float, default=90)
    p.add_argument("--docs", help="write the table to this file (docs/clients.md)")
    p.add_argument("--command", default="just clients")
    p.add_argument("--assert", dest="check", action="store_true",
                   help="exit 1 unless every run followed the failover with 0 lost")
    p.add_argument("--keep", action="store_true", help="leave the containers running at the end")
    p.add_argument("--replace", action="store_true",
                   help="keep the other clients' runs in target/clients/last-<target>.jsonl "
                        "(rerun some clients without losing the rest)")
    p.add_argument("--render-only", action="store_true",
                   help="run nothing: render --docs from the last runs stored per target "
                        "(target/clients/last-<target>.jsonl)")
    args = p.parse_args()

    clients = list(CLIENTS) if args.clients == "all" else [c for c in args.clients.split(",") if c]
    for c in clients:
        if c not in CLIENTS:
            raise SystemExit(f"clients: unknown client {c} (known: {', '.join(CLIENTS)})")
        if not (os.path.exists(CLIENTS[c]["cmd"][0]) or sh("sh", "-c", f"command -v {CLIENTS[c]['cmd'][0]}", check=False, capture=True).returncode == 0):
            raise SystemExit(f"clients: {c}: {CLIENTS[c]['cmd'][0]} is missing (clients/setup.sh --debian)")
    versions = {c: client_version(c) for c in clients}
    out_dir = os.path.join(REPO, "target", "clients")
    os.makedirs(out_dir, exist_ok=True)
    records = []
    targets = [t for t in args.targets.split(",") if t]
    if args.render_only:
        for tname in targets:
            with open(os.path.join(out_dir, f"last-{tname}.jsonl")) as f:
                records += [r for r in map(json.loads, f) if r["client"] in clients]
    for tname in [] if args.render_only else targets:
        wants_vip = any(CLIENTS[c].get("vip") for c in clients)
        target = Target(tname, args.image, args.base_image, args.down_after_ms, vip=wants_vip)
        log(f"{tname}: starting 3 nodes on {target.prefix}.0/24")
        t0 = time.monotonic()
        last_path = os.path.join(out_dir, f"last-{tname}.jsonl")
        kept = []
        if args.replace and os.path.exists(last_path):
            with open(last_path) as f:
                kept = [r for r in map(json.loads, f) if r["client"] not in clients]
        with open(os.path.join(out_dir, "runs.jsonl"), "a") as raw, open(last_path, "w") as last:
            for r in kept:
                last.write(json.dumps(r) + "\n")
            try:
                target.up()
                log(f"{tname}: ready in {time.monotonic() - t0:.0f}s")
                for run in range(1, args.runs + 1):
                    for client in clients:
                        if CLIENTS[client].get("vip") and not target.vip:
                            continue  # Redis Sentinel has no virtual IP
                        r = run_once(target, client, run, args)
                        records.append(r)
                        for f in (raw, last):
                            f.write(json.dumps(r) + "\n")
                            f.flush()
                        log(f"{tname} {client} run {run}: failover {r.get('failover_ms')} ms "
                            f"(target switched at {r.get('target_switch_ms')} ms), "
                            f"errors {r.get('errors_after_kill')}, acked {r.get('acked')}, "
                            f"lost {r.get('lost')}, learnt {r.get('learnt')}"
                            + (f"  PROBLEM: {r['problem']}" if r.get("problem") else ""))
            finally:
                if not args.keep:
                    target.down()
    if args.docs:
        with open(args.docs, "w") as f:
            f.write(render(records, versions, args))
        log(f"wrote {args.docs}")
    bad = [r for r in records if not r.get("ok")]
    if args.check and bad:
        for r in bad:
            log(f"FAILED: {r['client']} on {r['target']} run {r['run']}: {r.get('problem')}")
        sys.exit(1)


if __name__ == "__main__":
    main()
