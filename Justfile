# elector: labs, images and tests. `just --list` shows the recipes.
# Lab node i: client 127.0.0.1:600i (redis-cli -p 600i), elector API 127.0.0.1:930i,
# Sentinel-compatible 127.0.0.1:2640i.

set shell := ["bash", "-euo", "pipefail", "-c"]

export PATH := env_var("HOME") + "/.cargo/bin:" + env_var("PATH")

# list the recipes
default:
    @just --list

# build the lab images that are missing or stale (base: debootstrap; node: kevy + elector)
images:
    @scripts/build-images.sh

# install missing deps, start a lab (N = 2, 3 or 5 nodes, or 2w: data nodes n1 n2 and the witness n3; backend = kevy or redis), wait for a primary, print the table; LAB_MONITORING=1 adds a Prometheus on 127.0.0.1:9090 with the alert rules
lab-up N="3" backend="kevy":
    @scripts/lab-up.sh {{N}} {{backend}}

# remove the lab's containers, network and volumes (whatever N it was started with)
lab-down:
    @scripts/lab.sh down

# print node, role, epoch, primary and how to connect, for every lab node
lab-status:
    @scripts/lab.sh status

# SIGKILL a lab node's container (NODE = n1 or 1)
lab-kill NODE:
    @scripts/lab.sh kill {{NODE}}

# start a stopped lab node again
lab-start NODE:
    @scripts/lab.sh start {{NODE}}

# freeze a lab node (docker pause)
lab-pause NODE:
    @scripts/lab.sh pause {{NODE}}

# thaw a paused lab node
lab-unpause NODE:
    @scripts/lab.sh unpause {{NODE}}

# cut a lab node off from the other nodes (iptables in its network namespace)
lab-partition NODE:
    @scripts/lab.sh partition {{NODE}}

# undo every lab-partition and lab-pause
lab-heal:
    @scripts/lab.sh heal

# end-to-end lab check (args: N BACKEND pairs; default 3 kevy 5 kevy 2 kevy 3 redis)
lab-smoke *SPECS:
    @scripts/lab-smoke.sh {{SPECS}}

# the lint gate: clippy with every warning an error, and rustfmt's check, over the whole workspace
lint:
    cargo clippy --workspace --all-targets -- -D warnings
    cargo fmt --all --check

# the README's test command: dependencies, unit tests, alert rules, images, the package (about 1 min), conformance suite, a short chaos run
test:
    scripts/install-deps.sh
    @echo "=== just test: cargo test --workspace ($(date +%T))"
    cargo test --workspace
    @echo "=== just test: rules, k8s-validate ($(date +%T))"
    just rules-test
    just k8s-validate
    @echo "=== just test: images ($(date +%T))"
    scripts/build-images.sh
    @echo "=== just test: clients-ci ($(date +%T))"
    just clients-ci
    @echo "=== just test: package-test ($(date +%T))"
    just package-test
    @echo "=== just test: monitoring-test ($(date +%T))"
    just monitoring-test
    @echo "=== just test: conformance ($(date +%T))"
    just conformance
    @echo "=== just test: conformance-chaos-short ($(date +%T))"
    just conformance-chaos-short
    @echo "=== just test: done ($(date +%T))"

# build target/debian/elector_<version>_amd64.deb (cargo-deb; units, example config, man pages from deploy/debian and `elector man`, the config reference and runbooks) and, beside it, the stripped binary's debug symbols as elector-dbgsym_<version>_amd64.ddeb
package:
    cargo build --release -p elector
    rm -rf target/man && target/release/elector man --dir target/man && gzip -9n target/man/*.1 target/man/*.5
    cargo deb -p elector --no-build --dbgsym
    @ls -1 target/debian/elector_*_amd64.deb

# install, start, check /liveness, stop and purge the .deb in a container from elector-base:bookworm (about 30 s)
package-test: package
    scripts/package-test.sh "$(ls -t target/debian/elector_*_amd64.deb | head -1)"

# the .deb under a real systemd (privileged container): both units active, systemd-analyze security <= 3.0, the sandbox refusing a write outside the state dir, the watchdog's probes seen (not part of `just test`)
package-systemd-test: package
    scripts/package-systemd-test.sh "$(ls -t target/debian/elector_*_amd64.deb | head -1)"

# rolling binary upgrades across wire forms (docs/protocol.md §3.8): builds the electors of 222ffcb~1 (Legacy), 2890e2e~1 (no flag F) and dc9c913 (Floors) once into target/old-electors (minutes the first time), then runs elector/tests/mixed_versions.rs against this build, kevy and redis-server, one test at a time (not part of `just test`)
mixed-versions *ARGS:
    scripts/build-old-electors.sh
    cargo test -p elector --test mixed_versions -- --include-ignored --test-threads 1 {{ARGS}}

# the alert rules in a real Prometheus (Debian's package, our image): a 3-node lab per backend with LAB_MONITORING=1, kill the primary, ElectorPeerUnreachable must fire and then resolve after the restart, through Prometheus's HTTP API (about 1 min per backend)
monitoring-test *BACKENDS:
    scripts/monitoring-test.py {{BACKENDS}}

# validate deploy/kubernetes offline (kubernetes-validate --strict, from install-deps' venv); no cluster runs them
k8s-validate:
    "${ELECTOR_TOOLS_VENV:-$HOME/.cache/elector/tools-venv}/bin/kubernetes-validate" --strict --quiet deploy/kubernetes/*.yaml

# the Kubernetes manifests' preStop hook (deploy/kubernetes/configmap.yaml's prestop.sh, verbatim) run in a 3-node lab's primary as the pod's user, then SIGTERM as the kubelet sends: the switchover must be done before the stop and the stop must cause no election (about 1 min per backend; needs the node image; not part of `just test`) (`just k8s-prestop-drill --control` runs it with a hook that does not hand over and passes only if the drill fails)
k8s-prestop-drill *BACKENDS:
    "${ELECTOR_TOOLS_VENV:-$HOME/.cache/elector/tools-venv}/bin/python" scripts/k8s-prestop-drill.py {{BACKENDS}}

# unit tests of the Prometheus alert and recording rules (promtool, Debian's prometheus package)
rules-test:
    promtool check rules deploy/prometheus/elector-rules.yml
    promtool test rules deploy/prometheus/tests/*.test.yml

# conformance scenarios (quick set) against real containers, kevy 7.0.0 and Redis 7
conformance:
    cargo run -p conformance --release -- run --suite quick --backend both

# randomized composed faults, replayable by seed: CHAOS_MINUTES (default 10) per backend, half on 3 and half on 5 nodes; CHAOS_SEED (default random, printed); CHAOS_BACKEND (kevy, redis, both)
conformance-chaos:
    cargo run -p conformance --release -- chaos

# the short chaos run of `just test`: 3 minutes per backend (1.5 on 3 nodes, 1.5 on 5), both backends, seed 7 unless CHAOS_SEED says otherwise (CHAOS_SEED=random draws one; seed 21 finds the open Redis defect in conformance/README); a failure prints the seed and each schedule's replay command
conformance-chaos-short:
    #!/usr/bin/env bash
    set -euo pipefail
    seed="${CHAOS_SEED:-7}"
    if [ "$seed" = random ]; then unset CHAOS_SEED; else export CHAOS_SEED="$seed"; fi
    CHAOS_MINUTES=3 CHAOS_BACKEND=both cargo run -p conformance --release -- chaos

# the parts failing alone (data node, elector, disk, fence, forged input), both backends
conformance-parts:
    cargo run -p conformance --release -- run --tag parts --backend both

# every elector restarted at once with the data nodes running (clean stop; SIGKILL with the watchdogs clamping; and with the old primary's data node emptied meanwhile): ELECTOR_RESTART_SEEDS seeds (default 5), both backends
conformance-elector-restart:
    cargo run -p conformance --release -- run --tag elector-restart --seeds "${ELECTOR_RESTART_SEEDS:-5}" --backend both

# issue 34 (c): the only holder of acknowledged writes out of reach (crashed or cut off) while a replica's data node comes back empty or from older files; no election below the floor, 0 lost; FLOOR_SEEDS seeds (default 5), both backends (about 15 minutes)
conformance-floor:
    cargo run -p conformance --release -- run --tag floor --seeds "${FLOOR_SEEDS:-5}" --backend both

# the primary's data node wiped and started again after 0, 30, 100 and 1000 ms (DATA_NODE_RESTART_GAP_MS) under its running elector, RESTART_GAP_SEEDS seeds (default 5), both backends (about 25 minutes; the 0 ms one is in the quick suite)
conformance-restart-gaps:
    cargo run -p conformance --release -- run --tag restart-gap --seeds "${RESTART_GAP_SEEDS:-5}" --backend both

# issue 34 (b) at kevy's quiesce limit (1 s here): the primary alone past the limit while a replica's data node is stalled, healed, then killed; QUIESCE_LIMIT_SEEDS seeds (default 5), both backends
conformance-quiesce-limit:
    cargo run -p conformance --release -- run --tag quiesce-limit --seeds "${QUIESCE_LIMIT_SEEDS:-5}" --backend both

# partitions of 10-60 s and a one-way cut healing within seconds, and a half-HELLO flood, both backends
conformance-heal:
    cargo run -p conformance --release -- run --tag heal --backend both

# partitions of 5 minutes healing within seconds, both backends (about 12 minutes)
conformance-heal-long:
    cargo run -p conformance --release -- run --tag heal-long --backend both

# every conformance scenario but those tagged long, 3 seeds, both backends (about 1.3 hours; one seed on one backend: 13 minutes)
conformance-full:
    cargo run -p conformance --release -- run --suite full --seeds 3 --backend both

# failover side by side: our elector (kevy, Redis), kevy's built-in election, Redis Sentinel; primary-kill and isolate-primary BENCH_RUNS times each (default 10), the loss soak BENCH_SOAK_RUNS times (default 2), all at BENCH_DOWN_AFTER_MS (default 5000); BENCH_TARGETS picks targets (default all); writes docs/benchmarks.md and its chart
bench-failover:
    scripts/install-deps.sh
    scripts/build-images.sh
    cargo run -p conformance --release -- bench --target "${BENCH_TARGETS:-all}" --docs docs --command "just bench-failover"

# the fastest safe detection per target: the loss soak at BENCH_DETECTION_VALUES (default 500,750,1000,1500,2000,3000 ms; kevy's built-in at 5000 only) up to BENCH_SOAK_RUNS times (default 10) for BENCH_SOAK_SECS (default 120), values ascending, a value abandoned at its first unsafe run, a target stopped at its first safe value (BENCH_PARALLEL targets' soaks at once, default 1); then durable write latency per target (1 and 16 clients, BENCH_WRITE_SECS, default 10) and primary-kill then isolate-primary BENCH_RUNS times (default 10) at each target's fastest safe value; BENCH_PHASE=sweep|writes|failover|render splits it into chunks sharing target/bench-detection (each resumes from the runs stored there); writes docs/benchmarks-detection.md
bench-detection:
    scripts/install-deps.sh
    scripts/build-images.sh
    cargo run -p conformance --release -- bench-detection --command "just bench-detection"

# durable failover (primary-kill) against the data set size: BENCH_SCALE_SIZES MB (default 0,100,1000) loaded and acknowledged before the kill, BENCH_RUNS per size and target (default 5), BENCH_TARGETS (default all), BENCH_DOWN_AFTER_MS (default 3000), NODE_IMAGE (default elector-node:latest); phases and full syncs from the containers' logs; writes docs/benchmarks-scale.md and its chart (defaults: see the page for the time it took)
bench-scale:
    scripts/install-deps.sh
    scripts/build-images.sh
    cargo run -p conformance --release -- bench-scale --image "${NODE_IMAGE:-elector-node:latest}" --command "just bench-scale"

# durable write latency (SET + WAIT 1) on loopback, 3 real nodes per backend, 1 and 16 clients: p50, p99, acknowledged writes/s (BENCH_WRITE_SECS, default 10; BENCH_WRITE_BACKENDS; BENCH_WRITE_EXTRA adds data_node settings, e.g. "ack_nudge: false")
bench-writes:
    cargo test -p elector --release --test write_latency_bench measure_durable_write_latency -- --ignored --nocapture

# the elector and Redis Sentinel side by side on loopback (BENCH_RUNS, BENCH_DOWN_AFTER_MS)
bench-sentinel:
    cargo test -p elector --release --test failover_bench sentinel_and_elector -- --ignored --nocapture

# regenerate compose/lab-{2,3,5}.yml from scripts/gen-compose.sh
compose-gen:
    scripts/gen-compose.sh

# check that compose/ matches scripts/gen-compose.sh and that Compose (v2 `docker compose` or v1 `docker-compose`, whichever is installed) accepts it
compose-check:
    #!/usr/bin/env bash
    set -euo pipefail
    . scripts/compose-cmd.sh
    compose_detect || { echo "neither docker compose (v2) nor docker-compose (v1) found" >&2; exit 1; }
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    scripts/gen-compose.sh "$tmp" 2>/dev/null
    diff -ru "$tmp" compose/ || { echo "compose/ is stale: run just compose-gen" >&2; exit 1; }
    for n in 2 3 5 2w; do
      "${COMPOSE[@]}" -p elector-lab -f compose/lab-$n.yml config -q
      "${COMPOSE[@]}" -p elector-lab -f compose/lab-$n.yml -f compose/tls-$n.yml config -q
    done
    echo "compose: ok (${COMPOSE[*]} $("${COMPOSE[@]}" version --short 2>/dev/null || true))"

# Ansible rehearsal on N systemd containers with the elector's Debian package and a VIP: site.yml twice (2nd changes nothing), failover drill (crash, graceful; the VIP follows the primary), rolling upgrade to a newer package (6-10 min; WITNESS=1: the last host a witness)
ansible-test N="3" backend="kevy":
    ansible/tests/rehearse.sh {{N}} {{backend}}

# exhaustive model check of the real election core (tests/model_check.rs, protocol §9.4): the full bounds (MODEL_FULL=1: one duplicated message) to MODEL_DEPTH (default 9; `cargo test` runs 6 to 9 without duplicates), and the control that must find a violation; prints states explored, depth and time per search
model-check:
    MODEL_FULL=1 MODEL_DEPTH="${MODEL_DEPTH:-9}" cargo test --release -p elector --test model_check -- --include-ignored --nocapture --test-threads 1

# property-based fuzzing of every parser of outside input (codec, HELLO, auth, Sentinel RESP, signed API header, config, render-config) with FUZZ_CASES inputs per property (default 100000; `cargo test` runs 128 to 256)
fuzz:
    FUZZ_CASES="${FUZZ_CASES:-100000}" cargo test --release -p elector --lib fuzz -- --nocapture
    FUZZ_CASES="${FUZZ_CASES:-100000}" cargo test --release -p elector --test fuzz_config -- --nocapture

# Sentinel-aware client libraries through a primary kill (clients/, versions in clients/versions.env): each against our electors on kevy and on Redis and against real Redis Sentinel, in containers of its own (no lab port), CLIENTS_RUNS runs each (default 3), CLIENTS (default all), CLIENTS_TARGETS (default kevy,redis,sentinel); writes docs/clients.md (about 35 minutes; redis-py-replica also reads through slave_for)
clients:
    scripts/install-deps.sh
    clients/setup.sh --debian
    scripts/build-images.sh
    "${ELECTOR_CLIENTS_VENV:-$HOME/.cache/elector/clients-venv}/bin/python" clients/run.py --runs "${CLIENTS_RUNS:-3}" --clients "${CLIENTS:-all}" --targets "${CLIENTS_TARGETS:-kevy,redis,sentinel}" --docs docs/clients.md --command "just clients"

# the client check of `just test`: redis-py and the redis crate (async Sentinel) through one primary kill on Redis, redis-py on kevy, its writes through master_for and reads through slave_for (the redis crate checks ROLE, which kevy 7.0.0 gets wrong on a promoted node: docs/clients.md); fails unless each follows the failover with 0 acknowledged writes lost (about 1 minute; needs the node image)
clients-ci:
    clients/setup.sh
    "${ELECTOR_CLIENTS_VENV:-$HOME/.cache/elector/clients-venv}/bin/python" clients/run.py --targets redis --clients redis-py,redis-rs --runs 1 --assert
    "${ELECTOR_CLIENTS_VENV:-$HOME/.cache/elector/clients-venv}/bin/python" clients/run.py --targets kevy --clients redis-py-replica --runs 1 --assert
