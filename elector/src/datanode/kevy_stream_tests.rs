use super::*;
use redis::Value;

fn replica(generation: u64, offset: u64, syncing: bool) -> Reading {
    Reading::Replica {
        generation,
        offset,
        syncing,
        follows_someone: true,
    }
}

fn nowhere() -> Reading {
    Reading::Replica {
        generation: 0,
        offset: 0,
        syncing: false,
        follows_someone: false,
    }
}

fn tracker() -> StreamPosition {
    let mut p = StreamPosition::default();
    p.identify(Some("process_id:7"));
    p
}

/// A floor read from `INFO` (generation unknown).
fn floor(offset: u64) -> UpstreamAt {
    UpstreamAt {
        offset,
        generation: None,
    }
}

#[test]
fn a_floor_read_in_the_upstreams_previous_feed_binds_no_runner_of_its_new_one() {
    let mut p = tracker();
    // Read in the tick after the upstream's promotion: its old feed, at 436.
    p.following(UpstreamAt {
        offset: 436,
        generation: Some(7),
    });
    let r = p.observe_at(&replica(8, 0, false), 0, None, 0);
    assert_eq!((r.offset, r.link_joined), (0, true));
    // Read in the feed the runner hears: binding.
    p.leaving_at(Some(&replica(8, 0, false)), None, 0);
    p.following(UpstreamAt {
        offset: 40,
        generation: Some(8),
    });
    assert!(!p.observe_at(&replica(8, 39, false), 0, None, 0).link_joined);
    assert!(p.observe_at(&replica(8, 40, false), 0, None, 0).link_joined);
}

#[test]
fn a_runner_short_only_of_its_floor_for_three_heartbeats_counts_as_joined() {
    let mut p = tracker();
    p.following(UpstreamAt {
        offset: 1,
        generation: Some(8),
    });
    let t0 = 1_000_000;
    assert!(
        !p.observe_at(&replica(8, 0, true), 0, None, t0).link_joined,
        "loading"
    );
    assert!(
        !p.observe_at(&replica(8, 0, false), 0, None, t0 + 100)
            .link_joined
    );
    assert!(
        !p.observe_at(&replica(8, 0, false), 0, None, t0 + 3_000)
            .link_joined
    );
    let r = p.observe_at(&replica(8, 0, false), 0, None, t0 + 3_100);
    assert_eq!((r.offset, r.link_joined), (0, true));
}

#[test]
fn a_primarys_position_is_its_tokens_with_info_as_the_fallback() {
    let info = ReplicationInfo {
        role: "master".into(),
        offset: 436,
        ..ReplicationInfo::default()
    };
    let token = Value::Array(vec![Value::Int(8), Value::Int(1)]);
    assert_eq!(
        UpstreamAt::of_primary(&info, Some(&token)),
        UpstreamAt {
            offset: 1,
            generation: Some(8)
        },
        "INFO's 436 is the previous feed's"
    );
    let lagging = ReplicationInfo {
        offset: 30,
        ..info.clone()
    };
    let token = Value::Array(vec![Value::Int(8), Value::Int(31)]);
    assert_eq!(
        UpstreamAt::of_primary(&lagging, Some(&token)).offset,
        30,
        "the lower"
    );
    assert_eq!(UpstreamAt::of_primary(&info, None), floor(436));
}

#[test]
fn a_replica_that_has_not_heard_its_new_upstream_reports_the_position_it_held_with_its_link_down() {
    let mut p = tracker();
    assert_eq!(
        p.observe_at(&replica(3, 1431, false), 1532, None, 0).offset,
        1431
    );
    p.leaving_at(Some(&replica(3, 1431, false)), None, 0);
    p.following(floor(40));
    // The new runner: no heartbeat yet, or its snapshot still loading, or
    // not yet at what the upstream held when we pointed the node there.
    for reading in [
        replica(0, 0, false),
        replica(5, 0, true),
        replica(5, 39, false),
    ] {
        let r = p.observe_at(&reading, 1532, None, 0);
        assert_eq!((r.offset, r.link_joined), (1431, false), "{reading:?}");
    }
    let r = p.observe_at(&replica(5, 40, false), 1532, None, 0);
    assert_eq!((r.offset, r.link_joined), (40, true));
}

#[test]
fn an_upstream_promoted_again_before_the_runner_joined_lifts_the_floor_of_its_old_feed() {
    let mut p = tracker();
    p.leaving_at(
        Some(&Reading::Primary {
            generation: None,
            offset: 50,
        }),
        None,
        0,
    );
    p.following(floor(500));
    assert!(!p.observe_at(&replica(7, 20, false), 0, None, 0).link_joined);
    // The upstream's feed restarted (generation 8): its offsets begin at 0.
    let r = p.observe_at(&replica(8, 3, false), 0, None, 0);
    assert_eq!((r.offset, r.link_joined), (3, true));
}

#[test]
fn an_isolated_replica_keeps_the_position_read_in_the_pipeline_of_its_isolation() {
    let mut p = tracker();
    p.observe_at(&replica(3, 900, false), 0, None, 0);
    // Frames acknowledged after the last poll are in the pipeline's read.
    p.leaving_at(Some(&replica(3, 1000, false)), None, 0);
    let r = p.observe_at(&nowhere(), 1532, None, 0);
    assert_eq!((r.offset, r.link_joined), (1000, false));
}

#[test]
fn a_runner_that_had_not_joined_when_isolated_leaves_the_older_position_held() {
    let mut p = tracker();
    p.observe_at(
        &Reading::Primary {
            generation: None,
            offset: 700,
        },
        0,
        None,
        0,
    );
    p.leaving_at(
        Some(&Reading::Primary {
            generation: None,
            offset: 720,
        }),
        None,
        0,
    );
    p.following(floor(10));
    p.leaving_at(Some(&replica(0, 0, false)), None, 0);
    assert_eq!(p.observe_at(&nowhere(), 1532, None, 0).offset, 720);
}

#[test]
fn with_nothing_held_the_info_offset_is_the_fallback() {
    let mut p = tracker();
    assert_eq!(p.observe_at(&nowhere(), 77, None, 0).offset, 77);
}

#[test]
fn the_watchdogs_newer_capture_beats_the_electors_memory_and_another_kevy_or_an_older_file_is_ignored(
) {
    let mut elector = StreamPosition::since(1_000);
    elector.identify(Some("process_id:7"));
    elector.observe_at(&replica(3, 500, false), 0, None, 1_100);
    // The elector is frozen; the watchdog isolates the node later and
    // writes what it read to the shared file.
    let mut watchdog = StreamPosition::since(1_200);
    watchdog.identify(Some("process_id:7"));
    watchdog.leaving_at(Some(&replica(3, 800, false)), None, 1_300);
    let file = watchdog
        .take_write()
        .expect("the watchdog writes its capture");
    assert_eq!(FileHeld::parse(&file.render()), Some(file.clone()));
    assert_eq!(
        elector.observe_at(&nowhere(), 0, Some(&file), 1_400).offset,
        800
    );
    // A restarted kevy (another process) holds nothing either wrote.
    elector.identify(Some("process_id:8"));
    assert_eq!(
        elector.observe_at(&nowhere(), 3, Some(&file), 1_500).offset,
        3
    );
    // A restarted elector does not trust a file from before its start: the
    // same process id may be a kevy restarted with its container.
    let mut restarted = StreamPosition::since(2_000);
    restarted.identify(Some("process_id:7"));
    assert_eq!(
        restarted
            .observe_at(&nowhere(), 1532, Some(&file), 2_100)
            .offset,
        1532
    );
}

fn info(text: &str) -> ReplicationInfo {
    ReplicationInfo::parse(text).unwrap()
}

#[test]
fn info_and_token_replies_are_read_as_kevy_answers_them() {
    let following = info("role:slave\r\nmaster_host:10.0.0.3\r\nmaster_port:16379\r\nmaster_link_status:up\r\nslave_repl_offset:1532\r\n");
    let token = Value::Array(vec![Value::Int(4), Value::Int(118)]);
    assert_eq!(
        parse_reading(&following, &token),
        Some(replica(4, 118, false))
    );
    let loading =
        redis::parse_redis_value(b"-LOADING kevy is loading the dataset in memory\r\n").unwrap();
    assert_eq!(
        parse_reading(&following, &loading),
        Some(replica(0, 0, true))
    );
    let isolated = info("role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:1\r\nmaster_link_status:up\r\nslave_repl_offset:1532\r\n");
    let zero = Value::Array(vec![Value::Int(0), Value::Int(0)]);
    assert_eq!(parse_reading(&isolated, &zero), Some(nowhere()));
    // A primary's token is live; its INFO offset a tick old.
    let primary = info("role:master\r\nconnected_slaves:0\r\nmaster_repl_offset:64\r\n");
    assert_eq!(
        parse_reading(&primary, &token),
        Some(Reading::Primary {
            generation: Some(4),
            offset: 118
        })
    );
    assert_eq!(
        parse_reading(&primary, &Value::Nil),
        Some(Reading::Primary {
            generation: None,
            offset: 64
        })
    );
    assert_eq!(parse_reading(&following, &Value::Nil), None);
}

const MARK: &str = "0123456789abcdef0123456789abcdef01234567";

/// What the elector's stop fence writes: the position its pipeline read,
/// under the process mark the same pipeline confirmed.
fn marked_capture(offset: u64, at: u64) -> FileHeld {
    let mut stopping = StreamPosition::since(at);
    stopping.identify(Some("process_id:1"));
    stopping.marks_confirmed(vec![MARK.to_string()]);
    stopping.leaving_at(Some(&replica(3, offset, false)), Some(MARK), at);
    stopping
        .take_write()
        .expect("a joined runner's position is written")
}

#[test]
fn a_restarted_elector_trusts_a_position_from_before_its_start_only_under_a_mark_still_in_the_process(
) {
    let file = marked_capture(800, 1_000);
    assert_eq!(file.mark(), Some(MARK));
    assert_eq!(FileHeld::parse(&file.render()), Some(file.clone()));
    // Restarted; the mark is in the process: the held position counts,
    // in its feed generation.
    let mut restarted = StreamPosition::since(2_000);
    restarted.identify(Some("process_id:1"));
    restarted.marks_confirmed(vec![MARK.to_string()]);
    let r = restarted.observe_at(&nowhere(), 1532, Some(&file), 2_100);
    assert_eq!((r.offset, r.generation), (800, Some(3)));
    // The mark is not in this process (a kevy restarted, same process id):
    // nothing is held; `INFO`'s number, unnamed, as before.
    let mut fresh = StreamPosition::since(2_000);
    fresh.identify(Some("process_id:1"));
    fresh.marks_confirmed(Vec::new());
    let r = fresh.observe_at(&nowhere(), 3, Some(&file), 2_100);
    assert_eq!((r.offset, r.generation), (3, None));
}

#[test]
fn a_marked_position_counts_only_while_the_node_follows_nobody() {
    let file = marked_capture(800, 1_000);
    let mut restarted = StreamPosition::since(2_000);
    restarted.identify(Some("process_id:1"));
    restarted.marks_confirmed(vec![MARK.to_string()]);
    // Loading someone's snapshot, or following someone not yet joined:
    // its data may already be another stream's.
    for reading in [replica(0, 0, true), replica(0, 0, false)] {
        let r = restarted.observe_at(&reading, 7, Some(&file), 2_100);
        assert_eq!(r.generation, None, "{reading:?}");
    }
}

#[test]
fn a_replicaof_towards_anyone_strips_the_mark_and_an_unmarked_file_needs_no_write() {
    let file = marked_capture(800, 1_000);
    let stripped = unvouched(&file.render()).expect("a marked entry is rewritten");
    let parsed = FileHeld::parse(&stripped).unwrap();
    assert_eq!(parsed.mark(), None);
    assert_eq!(parsed.held, file.held);
    assert_eq!(unvouched(&stripped), None);
    // The old shape (no mark, maybe no generation) still reads.
    let old = FileHeld::parse("process_id:7 900 1700000000000 5\n").unwrap();
    assert_eq!(
        (old.held.offset, old.held.generation, old.mark()),
        (900, Some(5), None)
    );
    assert_eq!(FileHeld::parse(&old.render()), Some(old));
}

/// A runner joined in generation 8 at 3, then found in generation 9 with
/// no `REPLICAOF` of ours in between (its upstream's process was replaced
/// and it reconnected by itself): kevy 7.0.0's token names 9 with 8's
/// offset until its next acknowledgement tick (protocol §6.11).
fn moved_by_itself(p: &mut StreamPosition, t0: u64) -> Reported {
    p.following(floor(0));
    let joined = p.observe_at(&replica(8, 3, false), 3, None, t0);
    assert_eq!((joined.generation, joined.offset), (Some(8), 3));
    p.observe_at(&replica(9, 3, false), 3, None, t0 + 100)
}

#[test]
fn a_runner_that_moved_to_another_feed_by_itself_is_placed_nowhere_until_its_offset_changes() {
    let mut p = tracker();
    let t0 = 1_000_000;
    let r = moved_by_itself(&mut p, t0);
    assert_eq!(
        (r.generation, r.link_joined),
        (None, false),
        "the carried-over offset is not a position in generation 9, nor is 8's held any more"
    );
    let r = p.observe_at(&replica(9, 3, false), 3, None, t0 + 900);
    assert_eq!(r.generation, None, "still the carried-over offset");
    let r = p.observe_at(&replica(9, 0, false), 3, None, t0 + 1_100);
    assert_eq!((r.generation, r.offset, r.link_joined), (Some(9), 0, true));
}

#[test]
fn a_carried_over_offset_that_never_changes_is_believed_after_three_heartbeats() {
    let mut p = tracker();
    let t0 = 1_000_000;
    moved_by_itself(&mut p, t0);
    let r = p.observe_at(&replica(9, 3, false), 3, None, t0 + 3_000);
    assert_eq!(r.generation, None);
    let r = p.observe_at(&replica(9, 3, false), 3, None, t0 + 3_100);
    assert_eq!((r.generation, r.offset), (Some(9), 3));
}

#[test]
fn a_new_generation_after_a_replicaof_of_ours_is_believed_at_once() {
    let mut p = tracker();
    p.following(floor(0));
    p.observe_at(&replica(8, 3, false), 3, None, 0);
    // Our REPLICAOF towards a new upstream: its runner starts over.
    p.leaving_at(Some(&replica(8, 3, false)), None, 10);
    p.following(floor(0));
    let r = p.observe_at(&replica(9, 2, false), 3, None, 20);
    assert_eq!((r.generation, r.offset, r.link_joined), (Some(9), 2, true));
}

#[test]
fn with_the_test_switch_the_carried_over_offset_is_believed_as_before() {
    let mut p = tracker().believing_a_resync_by_itself(true);
    let r = moved_by_itself(&mut p, 1_000_000);
    assert_eq!((r.generation, r.offset), (Some(9), 3));
}

#[test]
fn a_second_move_before_the_first_offset_was_believed_is_not_believed_either() {
    let mut p = tracker();
    let t0 = 1_000_000;
    moved_by_itself(&mut p, t0);
    let r = p.observe_at(&replica(10, 3, false), 3, None, t0 + 200);
    assert_eq!(
        r.generation, None,
        "generation 10 came with the same carried-over offset"
    );
}

#[test]
fn a_position_file_written_before_a_move_by_itself_is_not_reported_after_it() {
    let mut p = tracker();
    let t0 = 1_000_000;
    // Written by our last REPLICAOF's pipeline: generation 7 at 40.
    let file = FileHeld {
        identity: "process_id:7".into(),
        held: Held {
            generation: Some(7),
            offset: 40,
            at_ms: t0 - 10,
        },
        mark: None,
    };
    p.following(floor(0));
    p.observe_at(&replica(8, 3, false), 3, Some(&file), t0);
    p.observe_at(&replica(9, 3, false), 3, Some(&file), t0 + 100);
    // Syncing again: not joined, so a held position would be reported.
    let r = p.observe_at(&replica(9, 0, true), 3, Some(&file), t0 + 200);
    assert_ne!(
        (r.generation, r.offset),
        (Some(7), 40),
        "the file's generation-7 position is of data the node no longer has"
    );
}
