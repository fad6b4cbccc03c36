//! docs/architecture.md §kevy, "Promotion hold": kevy 7.0.0 keeps each
//! replica's acknowledged offset across its own promotions (offsets restart
//! at 0 in the new feed generation) and `WAIT` counts it, so a primary that
//! was fenced (demoted) and promoted again would acknowledge writes no replica
//! has (chaos seed 2126; `scripts/repro/kevy-wait-after-repromotion.sh`). The
//! kevy adapter therefore fences a primary whose lease lapsed with the write
//! quiesce, which keeps it a primary in the same feed generation, instead of
//! demoting it.
//!
//! Real kevy 7.0.0 processes (`reconnect_window_ms = 1000`) and real electors
//! on loopback. The quorum flap: both replicas' electors are frozen until the
//! primary's lease lapses and its fence is in force (writes refused), then
//! thawed before they would elect; the primary renews its lease and takes
//! writes again. Both replicas' kevy are then frozen: `SET` + `WAIT 1 500`
//! must answer 0. The second test freezes the primary's own elector until its
//! watchdog fences the node (the quiesce too), then thaws it, twice: the same. The
//! third: a primary demoted by someone else (an operator's `REPLICAOF`) whose
//! replicas stay attached holds their old acknowledgements once promoted
//! again; its elector says so and pads the feed past them
//! (`datanode/kevy_pad.rs`), after which `WAIT` counts no frozen replica.
//! The fourth switches over and straight back (found chasing chaos seed 2126).
//! The fifth cuts a replica off early in a new feed generation and kills the
//! primary: the node holding its acknowledged writes must win (the offset a
//! kevy offers, `datanode/kevy_stream.rs`).

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::{Backend, Cluster};

/// down_after 3 s: the primary's lease lapses well before its peers would
/// elect, so thawing them once the fence is seen keeps the same primary.
const FLAP_TIMINGS: (&str, u64) = (
    "{ hb_interval_ms: 100, down_after_ms: 3000, election_timeout_ms: 1000, backoff_min_ms: 100, backoff_max_ms: 300, data_poll_ms: 50 }",
    3000,
);

fn role(cluster: &Cluster, i: usize) -> Option<String> {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut cluster.client(i))
        .ok()?;
    info.lines()
        .find_map(|l| l.trim().strip_prefix("role:").map(str::to_string))
}

fn wait_for(within: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal_data(cluster: &Cluster, i: usize, signal: &str) {
    let pid = cluster.nodes[i]
        .data
        .as_ref()
        .expect("data node running")
        .id();
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{signal} {pid}");
    if signal == "STOP" {
        wait_for(Duration::from_secs(2), "every thread stopped", || {
            all_threads_stopped(pid)
        });
    }
}

/// `kill` returns once the signal is pending; a thread running on another
/// CPU stops at its next interrupt, which a loaded virtual machine can
/// delay long enough for a replica to acknowledge one more frame. Stopped
/// means every thread's state in `/proc` is `T`.
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            // The state follows the parenthesised command name.
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        })
    })
}

/// The error a `SET` on node `i` gets, if any.
fn write_refusal(cluster: &Cluster, i: usize) -> Option<String> {
    let r: redis::RedisResult<()> = redis::cmd("SET")
        .arg("flap-probe")
        .arg(1)
        .query(&mut cluster.client(i));
    r.err().map(|e| e.to_string())
}

fn promotions_logged(cluster: &Cluster, i: usize) -> usize {
    std::fs::read_to_string(cluster.nodes[i].dir.join("data.log"))
        .unwrap_or_default()
        .matches("replication feed generation bumped")
        .count()
}

fn elector_log(cluster: &Cluster, i: usize) -> String {
    let n = &cluster.nodes[i];
    std::fs::read_to_string(n.dir.join(format!("elector-{}.log", n.id))).unwrap_or_default()
}

/// A primary whose replicas acknowledged a first term of writes.
fn cluster_after_a_first_term() -> (Cluster, usize, Vec<usize>) {
    cluster_after_a_first_term_with("")
}

/// [`cluster_after_a_first_term`] with more `data_node` settings.
fn cluster_after_a_first_term_with(data_node_extra: &str) -> (Cluster, usize, Vec<usize>) {
    support::require("kevy");
    let cluster = Cluster::start_configured(Backend::Kevy, 3, FLAP_TIMINGS, data_node_extra);
    let p = cluster.wait_primary(Duration::from_secs(20));
    wait_for(
        Duration::from_secs(10),
        "the primary's kevy promoted",
        || write_refusal(&cluster, p).is_none(),
    );
    cluster.wait_replica_links(p);
    let mut c = cluster.client(p);
    let mut pipe = redis::pipe();
    for i in 0..300 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    let _: () = pipe.query(&mut c).expect("the primary takes writes");
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(3000).query(&mut c).unwrap();
    assert_eq!(
        acked, 2,
        "both replicas acknowledge the first term's writes"
    );
    let others = (0..3).filter(|&i| i != p).collect();
    (cluster, p, others)
}

/// `SET` then `WAIT 1 500` on `p` with every replica's kevy frozen.
fn acks_with_replicas_frozen(cluster: &Cluster, p: usize, others: &[usize]) -> i64 {
    for &o in others {
        signal_data(cluster, o, "STOP");
    }
    let mut c = cluster.client(p);
    let _: () = redis::cmd("SET")
        .arg("written-while-the-replicas-are-frozen")
        .arg(1)
        .query(&mut c)
        .expect("the primary takes writes again");
    // A read the test process's signals interrupt (EINTR, seen once under
    // load) is asked again on a new connection: `WAIT` there counts the
    // same writes.
    let acks: i64 = match redis::cmd("WAIT").arg(1).arg(500).query(&mut c) {
        Err(e) if e.kind() == redis::ErrorKind::IoError => {
            eprintln!("WAIT interrupted ({e}); asked again");
            redis::cmd("WAIT")
                .arg(1)
                .arg(500)
                .query(&mut cluster.client(p))
                .unwrap()
        }
        r => r.unwrap(),
    };
    for &o in others {
        signal_data(cluster, o, "CONT");
    }
    acks
}

/// After the fault's end (just now): `p` takes writes again, still the
/// primary, without a promotion (`promotions` as before the fault), and
/// `WAIT 1` with every replica frozen answers 0.
fn reopens_in_the_same_generation(
    cluster: &Cluster,
    p: usize,
    others: &[usize],
    promotions: usize,
) {
    let thawed = Instant::now();
    wait_for(
        Duration::from_secs(10),
        "the primary writable again",
        || write_refusal(cluster, p).is_none(),
    );
    eprintln!(
        "writable again {} ms after the fault's end",
        thawed.elapsed().as_millis()
    );
    assert_eq!(
        cluster.wait_primary(Duration::from_secs(5)),
        p,
        "the same primary"
    );
    assert_eq!(
        promotions_logged(cluster, p),
        promotions,
        "no promotion, so no new feed generation"
    );
    let acks = acks_with_replicas_frozen(cluster, p, others);
    if acks != 0 {
        cluster.dump_logs();
    }
    assert_eq!(acks, 0, "WAIT counted a frozen replica");
    assert!(!elector_log(cluster, p).contains("kevy counts a replica acknowledgement from before"));
}

#[test]
fn a_kevy_primary_fenced_by_a_quorum_flap_stays_in_its_feed_generation_and_wait_counts_no_frozen_replica(
) {
    let (cluster, p, others) = cluster_after_a_first_term();
    let promotions = promotions_logged(&cluster, p);
    for &o in &others {
        cluster.signal_elector(o, "STOP");
    }
    wait_for(Duration::from_secs(3), "the lapsed lease's fence", || {
        write_refusal(&cluster, p).is_some()
    });
    let refusal = write_refusal(&cluster, p).unwrap_or_default();
    assert!(
        refusal.contains("QUIESCED"),
        "fenced by the quiesce: {refusal}"
    );
    assert_eq!(
        role(&cluster, p).as_deref(),
        Some("master"),
        "fenced by the quiesce, not demoted"
    );
    for &o in &others {
        cluster.signal_elector(o, "CONT");
    }
    reopens_in_the_same_generation(&cluster, p, &others, promotions);
}

/// Twice: the watchdog's adapter outlives a silence, and the elector lifts
/// the watchdog's quiesce when it comes back, so a second silence must not
/// find the watchdog believing its first quiesce still in force (it did:
/// the second freeze left the node writable). On each thaw the elector may
/// re-open the node and fence it again within milliseconds (its peers'
/// connections closed while it was frozen, so its quorum flaps); that fence
/// quiesces again rather than demote (`datanode/kevy_quiesce.rs`).
#[test]
fn a_kevy_primary_whose_elector_freezes_twice_is_quiesced_by_the_watchdog_each_time_and_reopens_in_its_feed_generation(
) {
    let (mut cluster, p, others) = cluster_after_a_first_term();
    for i in 0..3 {
        cluster.start_watchdog(i);
    }
    std::thread::sleep(Duration::from_millis(500));
    let promotions = promotions_logged(&cluster, p);
    for round in 1..=2 {
        cluster.signal_elector(p, "STOP");
        let frozen = Instant::now();
        let fenced = (|| {
            while frozen.elapsed() < Duration::from_secs(3) {
                if let Some(refusal) = write_refusal(&cluster, p) {
                    return Some(refusal);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        })();
        cluster.signal_elector(p, "CONT");
        let refusal = fenced.unwrap_or_else(|| {
            panic!("freeze {round}: the node still took writes 3 s into the elector's silence")
        });
        assert!(
            refusal.contains("QUIESCED"),
            "freeze {round}: the watchdog quiesced the primary: {refusal}"
        );
        wait_for(
            Duration::from_secs(10),
            "the primary writable again",
            || write_refusal(&cluster, p).is_none(),
        );
        // Its peers hear it for a while before the next freeze, or its two
        // silences add up to their down_after and they elect.
        std::thread::sleep(Duration::from_secs(1));
    }
    reopens_in_the_same_generation(&cluster, p, &others, promotions);
}

#[test]
fn a_kevy_primary_demoted_by_someone_else_resigns_and_wait_counts_no_acknowledgement_of_its_first_term(
) {
    let (cluster, p, _) = cluster_after_a_first_term();
    let epoch = cluster.status(p).unwrap()["epoch"].as_u64().unwrap();
    // An operator's demotion with the replicas attached. Promoted again in
    // the same epoch, kevy's new feed generation would restart its offsets
    // under the same data epoch (issue 34 (b)); the elector resigns instead
    // and a new election starts the next stream (protocol §6.10).
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(1)
        .query(&mut cluster.client(p))
        .unwrap();
    wait_for(Duration::from_secs(5), "the primary's resignation", || {
        elector_log(&cluster, p).contains("stream_ended")
    });
    let mut q = p;
    wait_for(
        Duration::from_secs(15),
        "a primary of a later epoch",
        || {
            cluster.writable_primary().is_some_and(|w| {
                q = w;
                cluster
                    .status(w)
                    .is_some_and(|s| s["epoch"].as_u64().unwrap_or(0) > epoch)
            })
        },
    );
    cluster.wait_replica_links(q);
    let others: Vec<usize> = (0..cluster.nodes.len()).filter(|&i| i != q).collect();
    let acks = acks_with_replicas_frozen(&cluster, q, &others);
    if acks != 0 {
        cluster.dump_logs();
    }
    assert_eq!(
        acks, 0,
        "WAIT counted a frozen replica's acknowledgement of an earlier term"
    );
}

/// `POST /switchover` on `from`'s API towards node `to`, once `from` sees
/// `to` alive and eligible (docs/interfaces.md `/status`: a primary that
/// has just handed over is not eligible until its first heartbeat as a
/// replica; CI once asked 9 ms after the first switchover and got 409;
/// and a primary elected a moment ago answers `not_ready` until its data
/// node is promoted, asked again); panics if refused.
fn switchover(cluster: &Cluster, from: usize, to: usize) {
    let to_id = cluster.nodes[to].id.clone();
    wait_for(
        Duration::from_secs(10),
        "the switchover target alive and eligible in the primary's view",
        || {
            cluster
                .peer_in(from, &to_id)
                .is_some_and(|p| p["alive"] == true && p["eligible"] == true)
        },
    );
    if let Err(e) = support::post_switchover(cluster.nodes[from].api_port, &to_id, 10_000) {
        panic!("switchover {from} -> {to} refused: {e}");
    }
}

/// Found chasing chaos seed 2126 (5 nodes): a switchover back to a node that was the
/// primary a moment ago. Its promotion waits out the hold (here the
/// elector is told kevy's window is 2.5 s, so 2.75 s), longer than one
/// attempt of a replica to see its new primary promoted (1 s). A replica
/// that then followed it anyway, as one did before, streamed its *old*
/// generation from it and acknowledged old-generation offsets, which kevy
/// kept through the promotion and `WAIT` counted; now it waits.
#[test]
fn a_switchover_back_to_the_last_primary_leaves_no_acknowledgement_wait_would_count_from_its_old_generation(
) {
    let (cluster, p, others) = cluster_after_a_first_term_with("kevy_reconnect_window_ms: 2500");
    let a = others[0];
    switchover(&cluster, p, a);
    wait_for(Duration::from_secs(10), "the first switchover", || {
        cluster.writable_primary() == Some(a)
    });
    switchover(&cluster, a, p);
    wait_for(Duration::from_secs(15), "the switchover back", || {
        cluster.writable_primary() == Some(p) && write_refusal(&cluster, p).is_none()
    });
    cluster.wait_replica_links(p);
    std::thread::sleep(Duration::from_millis(300));
    let acks = acks_with_replicas_frozen(&cluster, p, &others);
    if acks != 0 || std::env::var("DUMP").is_ok() {
        cluster.dump_logs();
    }
    assert_eq!(acks, 0, "WAIT counted a frozen replica");
}

/// The offset a node reports in `/status` (what it offers and votes with).
fn reported_offset(cluster: &Cluster, i: usize) -> Option<u64> {
    cluster.status(i)?["data_node"]["offset"].as_u64()
}

/// `SET n<i>` for each `i`, then `WAIT replicas 3000`: how many acknowledged.
fn set_then_wait(c: &mut redis::Connection, keys: std::ops::Range<u32>, replicas: i64) -> i64 {
    for i in keys {
        let _: () = redis::cmd("SET")
            .arg(format!("n{i}"))
            .arg(i)
            .query(c)
            .unwrap();
    }
    redis::cmd("WAIT").arg(replicas).arg(3000).query(c).unwrap()
}

fn info_field(cluster: &Cluster, i: usize, field: &str) -> Option<u64> {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut cluster.client(i))
        .ok()?;
    info.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{field}:"))?.parse().ok())
}

/// docs/architecture.md §kevy, "The offset a kevy offers" (chaos seed 2126,
/// 5 nodes): kevy's `INFO` `slave_repl_offset` is the largest offset of any
/// feed generation the process followed, so after a switchover a replica
/// reported the old primary's 300-frame feed against the new one's 10, and
/// a replica cut off before the new primary's last acknowledged writes
/// offered more than the node holding them, which voted for it. Now it
/// offers its place in the new feed (`REPL.TOKEN`), held through its
/// isolation, and the holder wins.
#[test]
fn a_replica_cut_off_in_a_new_feed_generation_offers_its_place_in_it_and_loses_to_the_holder_of_acknowledged_writes(
) {
    let (mut cluster, p, others) = cluster_after_a_first_term();
    let (a, b) = (others[0], others[1]);
    switchover(&cluster, p, a);
    wait_for(Duration::from_secs(15), "the switchover", || {
        cluster.writable_primary() == Some(a) && write_refusal(&cluster, a).is_none()
    });
    cluster.wait_replica_links(a);
    let mut c = cluster.client(a);
    assert_eq!(
        set_then_wait(&mut c, 0..10, 2),
        2,
        "both replicas acknowledge the new term's first writes"
    );
    // The feed's live offset (`INFO`'s is a tick old).
    let token: Vec<u64> = redis::cmd("REPL.TOKEN").query(&mut c).unwrap();
    let primary_offset = token[1];
    wait_for(
        Duration::from_secs(5),
        "b to report its place in the new feed",
        || reported_offset(&cluster, b).is_some_and(|o| o > 0),
    );
    let kevy_says = info_field(&cluster, b, "slave_repl_offset").unwrap_or(0);
    let reported = reported_offset(&cluster, b).unwrap();
    println!("new primary at {primary_offset}; b: kevy INFO says {kevy_says}, the elector reports {reported}");
    assert!(
        reported <= primary_offset,
        "b reports {reported}, beyond its primary's {primary_offset} (kevy's INFO: {kevy_says})"
    );

    // b's kevy misses the last writes, which p acknowledges; then the
    // primary dies and b comes back.
    signal_data(&cluster, b, "STOP");
    assert_eq!(
        set_then_wait(&mut c, 10..30, 1),
        1,
        "p acknowledges the writes b misses"
    );
    cluster.kill_node(a);
    signal_data(&cluster, b, "CONT");
    let winner = cluster.wait_primary(Duration::from_secs(20));
    wait_for(
        Duration::from_secs(10),
        "the winner's kevy promoted",
        || write_refusal(&cluster, winner).is_none(),
    );
    let mut w = cluster.client(winner);
    let missing: Vec<String> = (0..30)
        .map(|i| format!("n{i}"))
        .filter(|k| {
            let v: Option<String> = redis::cmd("GET").arg(k).query(&mut w).unwrap();
            v.is_none()
        })
        .collect();
    if !missing.is_empty() || std::env::var("DUMP").is_ok() {
        cluster.dump_logs();
    }
    assert!(
        missing.is_empty(),
        "node {winner} won without acknowledged writes {missing:?}"
    );
    assert_eq!(winner, p, "only p holds every acknowledged write");
}
