//! Property-based fuzzing of everything that parses bytes from the network
//! (issue 39 §5): the election framing, the authentication header, the
//! messages, HELLO's fingerprint, and the HTTP API's signed-request header.
//!
//! cargo-fuzz needs a nightly toolchain, which cannot be installed here, so
//! these are proptest properties that run in `cargo test` (256 cases each by
//! default). `FUZZ_CASES=<n>` raises the count for `just fuzz`. Each property
//! states what must hold for *every* input, not only "does not panic": a
//! decoder never waits for more bytes than its limits allow (bounded
//! allocation), a frame split at any byte decodes to the same fields, and a
//! single changed byte of a signed header is refused.
//!
//! The sentinel listener's RESP has its own module
//! (`api/sentinel/fuzz.rs`), the config loader its own integration test
//! (`tests/fuzz_config.rs`), since they reach other private parts.

use crate::api::request_auth::{self, RequestVerifier};
use crate::net::auth::{AuthConfig, AuthMode, Authenticator, Secret, DEFAULT_MAX_SKEW_MS};
use crate::net::codec::{self, DecodeError, Limits};
use crate::net::fingerprint::Fingerprint;
use crate::protocol::{Heartbeat, Message, Role};
use proptest::prelude::*;
use std::time::{Duration, Instant};

const NOW: u64 = 1_760_000_000_000;

/// The number of cases per property: `FUZZ_CASES` or `default`.
pub(crate) fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        // Shrinking a failure of a cheap parser is quick; keep the default.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// No single input may take this long (a hang in a parser is a defect, and
/// 100 ms is the bound; debug builds on a shared machine get slack).
pub(crate) const SLOW: Duration = Duration::from_millis(250);

fn keyed(node: &str) -> Authenticator {
    let cfg = AuthConfig {
        mode: AuthMode::SharedKey,
        key: Some(Secret::new("fuzz-key-fuzz-key")),
        key_file: None,
        max_skew_ms: DEFAULT_MAX_SKEW_MS,
    };
    Authenticator::new(&cfg, node, NOW - 1_000).expect("keyed authenticator")
}

/// What the transport does with received bytes, as far as it parses: frame
/// after frame (§3.1), each opened (§3.5, keyed and unkeyed), decoded into a
/// message (§3.2), a HELLO's fingerprint parsed and compared (§3.7). Returns
/// the number of frames decoded; any panic fails the property.
fn receive(bytes: &[u8]) -> usize {
    let limits = Limits::default();
    let mut keyed = keyed("n2");
    let mut open = Authenticator::new(&AuthConfig::default(), "n2", NOW).expect("unkeyed");
    let ours = Fingerprint::new(["n1", "n2", "n3"], &crate::core::Timings::default());
    let mut rest = bytes;
    let mut frames = 0;
    while let Ok(Some((fields, used))) = codec::decode(rest, &limits) {
        assert!(used > 0 && used <= rest.len(), "a frame consumes its bytes");
        rest = &rest[used..];
        frames += 1;
        let opened = [
            keyed.open_verified(fields.clone(), NOW),
            open.open_verified(fields, NOW),
        ];
        for inner in opened.into_iter().flatten() {
            let Ok(msg) = Message::from_fields(&inner.fields) else {
                continue;
            };
            // What decodes encodes back to the same message (§3.2).
            assert_eq!(Message::from_fields(&msg.to_fields()).as_ref(), Ok(&msg));
            if let Message::Hello {
                fingerprint: Some(fp),
                ..
            } = msg
            {
                if let Some(theirs) = Fingerprint::parse(&fp) {
                    let _ = ours.differences(&theirs);
                    assert_eq!(Fingerprint::parse(&theirs.to_string()), Some(theirs));
                }
            }
        }
    }
    frames
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(took < SLOW, "{what} took {took:?}");
    out
}

fn heartbeat(epoch: u64, offset: u64) -> Message {
    Message::Hb(Heartbeat {
        epoch,
        node_id: "n1".into(),
        role: Role::Primary,
        offset,
        max_epoch: epoch,
        primary: Some("n1".into()),
        eligible: true,
        fenced: false,
        lease_lost: false,
        data_epoch: epoch,
        stamp: 41,
        echo: 40,
        priority: 100,
        floor: Some((epoch, offset)),
        unled: false,
    })
}

/// A few valid messages of every kind, the seeds mutations start from.
fn valid_messages() -> Vec<Message> {
    let fp = Fingerprint::new(["n1", "n2", "n3"], &crate::core::Timings::default());
    vec![
        Message::Hello {
            node_id: "n1".into(),
            fingerprint: Some(fp.to_string()),
        },
        Message::Hello {
            node_id: "n3".into(),
            fingerprint: None,
        },
        heartbeat(7, 123_456),
        Message::Offer {
            epoch: 8,
            candidate: "n2".into(),
            offset: 99,
            data_epoch: 7,
            forced: false,
            led: Some(6),
        },
        Message::Accept {
            epoch: 8,
            voter: "n3".into(),
        },
        Message::Announce {
            epoch: 8,
            primary: "n2".into(),
            primary_addr: "10.0.0.2:6379".into(),
            stamp: 1,
        },
        Message::Handover {
            epoch: 8,
            from: "n2".into(),
            to: "n1".into(),
        },
    ]
}

fn frame_of(msg: &Message, sealed: bool) -> Vec<u8> {
    let fields = msg.to_fields();
    let fields = if sealed {
        keyed("n1").seal_at("n2", fields, NOW)
    } else {
        fields
    };
    codec::encode_owned(&fields)
}

/// One mutation of a byte string, as a coverage-blind fuzzer would make.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
    /// Replaces the first number after a `*` or `$` with a huge or odd one.
    Length(usize, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let lengths = prop_oneof![
        Just("-1".to_string()),
        Just("-9223372036854775808".to_string()),
        Just("9223372036854775807".to_string()),
        Just("18446744073709551616".to_string()),
        Just("4294967296".to_string()),
        Just("65".to_string()),
        Just("4097".to_string()),
        Just("".to_string()),
        Just("+1".to_string()),
        Just("0x10".to_string()),
        Just("1 ".to_string()),
        Just("00000000000000000000001".to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (
            any::<usize>(),
            proptest::collection::vec(
                prop_oneof![
                    Just(b'\r'),
                    Just(b'\n'),
                    Just(b'*'),
                    Just(b'$'),
                    any::<u8>()
                ],
                1..6
            )
        )
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..8).prop_map(|(i, n)| Mutation::Delete(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), lengths).prop_map(|(i, s)| Mutation::Length(i, s)),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len().max(1);
        match m {
            Mutation::Flip(i, b) if !bytes.is_empty() => bytes[i % len] ^= b | 1,
            Mutation::Flip(..) => {}
            Mutation::Insert(i, ins) => {
                let at = i % (bytes.len() + 1);
                bytes.splice(at..at, ins.iter().copied());
            }
            Mutation::Delete(i, n) => {
                let at = i % len;
                let end = (at + n).min(bytes.len());
                if at < end {
                    bytes.drain(at..end);
                }
            }
            Mutation::Truncate(i) => bytes.truncate(i % len),
            Mutation::Length(i, s) => {
                let marks: Vec<usize> = bytes
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'*' || **b == b'$')
                    .map(|(k, _)| k + 1)
                    .collect();
                if marks.is_empty() {
                    continue;
                }
                let start = marks[i % marks.len()];
                let end = bytes[start..]
                    .iter()
                    .position(|b| *b == b'\r')
                    .map_or(bytes.len(), |p| start + p);
                bytes.splice(start..end, s.bytes());
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(config(256))]

    /// §3.1: arbitrary bytes give frames or a clear error, never a panic or a hang.
    #[test]
    fn arbitrary_bytes_never_panic_the_election_receive_path(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        timed("receive", || receive(&bytes));
    }

    /// §3.1, §3.5, §3.7: valid frames (sealed or not), mutated, never panic
    /// the decoder, the authenticator, the message parser or the fingerprint.
    #[test]
    fn mutated_valid_frames_never_panic_the_election_receive_path(
        picks in proptest::collection::vec((0usize..7, any::<bool>()), 1..4),
        mutations in proptest::collection::vec(mutation(), 0..4),
    ) {
        let msgs = valid_messages();
        let mut bytes = Vec::new();
        for (k, sealed) in &picks {
            bytes.extend(frame_of(&msgs[*k], *sealed));
        }
        let unmutated = picks.len();
        prop_assert_eq!(receive(&bytes), unmutated, "the unmutated stream decodes whole");
        let bytes = mutate(bytes, &mutations);
        timed("receive", || receive(&bytes));
    }

    /// §3.1 bounded allocation: a length prefix beyond the limits is refused
    /// as soon as its line is complete, never waited for; a decoded frame
    /// never holds more bytes than it consumed.
    #[test]
    fn a_huge_length_prefix_is_refused_before_its_bytes_arrive(
        count in any::<i64>(),
        len in any::<i64>(),
        tail in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let limits = Limits::default();
        let header = format!("*{count}\r\n");
        let verdict = codec::decode(header.as_bytes(), &limits);
        if count < 0 || count as u64 > limits.max_array_len as u64 {
            prop_assert!(verdict.is_err(), "array of {} accepted: {:?}", count, verdict);
        }
        let framed = format!("*1\r\n${len}\r\n");
        let mut bytes = framed.into_bytes();
        bytes.extend(&tail);
        match codec::decode(&bytes, &limits) {
            Err(DecodeError::BulkTooLong(_)) | Err(DecodeError::NegativeLength(_)) => {
                prop_assert!(len < 0 || len as u64 > limits.max_bulk_len as u64);
            }
            Ok(None) => prop_assert!((0..=limits.max_bulk_len as i64).contains(&len)),
            Ok(Some((fields, used))) => {
                let held: usize = fields.iter().map(Vec::len).sum();
                prop_assert!(held <= used);
            }
            Err(e) => prop_assert!(false, "unexpected {e:?}"),
        }
    }

    /// §3.1: a stream of frames split at every byte decodes to the same
    /// fields, and every proper prefix of a frame asks for more bytes.
    #[test]
    fn frames_split_at_every_byte_decode_the_same(
        picks in proptest::collection::vec((0usize..7, any::<bool>()), 1..4),
    ) {
        let msgs = valid_messages();
        let limits = Limits::default();
        let frames: Vec<Vec<u8>> = picks.iter().map(|(k, s)| frame_of(&msgs[*k], *s)).collect();
        for frame in &frames {
            for cut in 0..frame.len() {
                prop_assert_eq!(codec::decode(&frame[..cut], &limits), Ok(None), "cut {}", cut);
            }
        }
        // Fed one byte at a time, the receiver sees exactly the frames sent.
        let all: Vec<u8> = frames.concat();
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for b in all {
            buf.push(b);
            while let Some((fields, used)) = codec::decode(&buf, &limits).expect("valid stream") {
                buf.drain(..used);
                got.push(fields);
            }
        }
        prop_assert!(buf.is_empty());
        let sent: Vec<Vec<Vec<u8>>> = picks
            .iter()
            .zip(&frames)
            .map(|(_, f)| codec::decode(f, &limits).expect("valid").expect("whole").0)
            .collect();
        prop_assert_eq!(got, sent);
    }

    /// §3.7: the fingerprint parser takes any string; what it accepts prints
    /// to a canonical form that parses back to the same fingerprint, so two
    /// electors compare like with like.
    #[test]
    fn any_fingerprint_string_parses_or_is_refused(
        s in prop_oneof![
            ".{0,80}",
            "m[0-9a-fA-F]{14,18}(/[0-9]{0,21}){0,6}",
            "m[0-9a-f]{16}/[0-9]{1,5}/[0-9]{1,5}/[0-9]{1,5}(/[0-9]{1,5})?",
        ],
    ) {
        if let Some(fp) = timed("fingerprint", || Fingerprint::parse(&s)) {
            prop_assert_eq!(Fingerprint::parse(&fp.to_string()), Some(fp));
        }
    }

    /// HTTP API (§7): any `Authorization` header is refused with a reason
    /// or accepted only when it is the cluster key's signature of this very
    /// request; a header with one byte changed is never accepted.
    #[test]
    fn a_signed_request_header_is_accepted_only_unaltered(
        header in proptest::option::of(".{0,120}"),
        body in proptest::collection::vec(any::<u8>(), 0..64),
        flip in any::<usize>(),
        to in any::<char>(),
    ) {
        let key = Secret::new("api-key");
        let verifier = RequestVerifier::new(key.clone());
        let arbitrary = verifier.verify(header.as_deref(), "POST", "/switchover", &body, NOW);
        prop_assert!(arbitrary.is_err(), "an arbitrary header was accepted: {:?}", header);

        let signed = request_auth::sign(&key, "POST", "/switchover", NOW, &body);
        let mut chars: Vec<char> = signed.chars().collect();
        let at = flip % chars.len();
        if chars[at] != to && !(chars[at].is_ascii_hexdigit() && chars[at].eq_ignore_ascii_case(&to)) {
            chars[at] = to;
            let altered: String = chars.into_iter().collect();
            let fresh = RequestVerifier::new(key.clone());
            prop_assert!(
                fresh.verify(Some(&altered), "POST", "/switchover", &body, NOW).is_err(),
                "altered header accepted: {}", altered
            );
        }
        let fresh = RequestVerifier::new(key);
        prop_assert_eq!(fresh.verify(Some(&signed), "POST", "/switchover", &body, NOW), Ok(()));
        prop_assert!(fresh.verify(Some(&signed), "POST", "/switchover", &body, NOW).is_err(), "replay");
    }
}
