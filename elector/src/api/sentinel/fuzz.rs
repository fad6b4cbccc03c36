//! Property-based fuzzing of the Sentinel listener's request path (issue 39
//! §5): what `connection::serve` does with the bytes a client sends (frame,
//! execute, encode), without the socket. RESP2 and RESP3 (`HELLO 3` switches
//! mid-stream), pipelined, split at every byte. `FUZZ_CASES` raises the case
//! count (see `crate::fuzz`).
//!
//! Properties: no panic, no hang; every reply is well-formed RESP of the
//! protocol the session spoke when it was written (checked with the
//! `redis-protocol` crate's decoders, not ours); and the replies do not
//! depend on how the stream was split into reads.

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::Instant;

use proptest::prelude::*;
use tokio::sync::{broadcast, watch};

use super::commands::{self, Session};
use super::reply::Protocol;
use super::{run_id, ClusterView, NodeAddr, Shared};
use crate::fuzz::{config, SLOW};
use crate::net::codec;

fn addr(id: &str, port: u16) -> NodeAddr {
    NodeAddr {
        id: id.into(),
        host: "10.0.0.1".into(),
        port,
    }
}

fn shared(primary: bool) -> Shared {
    let view = ClusterView {
        master_name: "mymaster".into(),
        epoch: 4,
        primary: primary.then(|| addr("n1", 6379)),
        replicas: vec![(addr("n2", 6380), true), (addr("n3", 6381), false)],
        sentinels: vec![addr("n2", 26402), addr("n3", 26403)],
        quorum: 2,
        down_after_ms: 5000,
    };
    let (_tx, rx) = watch::channel(view);
    let (events, _) = broadcast::channel(64);
    Shared {
        node_id: "n1".into(),
        my_run_id: run_id("n1"),
        port: 26401,
        view: rx,
        last_primary: Mutex::new(None),
        events,
        next_client_id: AtomicU64::new(1),
        connected: AtomicU64::new(0),
    }
}

/// Checks that `bytes` is exactly a sequence of well-formed frames of `proto`.
fn well_formed(bytes: &[u8], proto: Protocol) -> Result<(), String> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let used = match proto {
            Protocol::Resp2 => match redis_protocol::resp2::decode::decode(rest) {
                Ok(Some((_, used))) => used,
                other => {
                    return Err(format!(
                        "RESP2 {other:?} at {:?}",
                        String::from_utf8_lossy(rest)
                    ))
                }
            },
            Protocol::Resp3 => match redis_protocol::resp3::decode::complete::decode(rest) {
                Ok(Some((_, used))) => used,
                other => {
                    return Err(format!(
                        "RESP3 {other:?} at {:?}",
                        String::from_utf8_lossy(rest)
                    ))
                }
            },
        };
        rest = &rest[used..];
    }
    Ok(())
}

/// Serves `chunks` as successive reads of one connection, as
/// `connection::serve` does; returns the bytes written back and whether the
/// connection ended (QUIT or a protocol error).
fn serve(shared: &Shared, chunks: &[&[u8]]) -> Result<(Vec<u8>, bool), String> {
    let mut session = Session::new(7);
    let limits = codec::Limits::default();
    let mut buf: Vec<u8> = Vec::new();
    let mut written = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match codec::decode(&buf, &limits) {
                Ok(Some((fields, used))) => {
                    buf.drain(..used);
                    let answer = commands::execute(&fields, shared, &mut session);
                    let mut out = Vec::new();
                    for r in answer.replies {
                        r.encode(&mut out, session.proto);
                    }
                    well_formed(&out, session.proto)?;
                    written.extend(out);
                    if answer.close {
                        return Ok((written, true));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let mut out = Vec::new();
                    super::reply::Reply::err(format!("ERR Protocol error: {e}"))
                        .encode(&mut out, session.proto);
                    well_formed(&out, session.proto)?;
                    written.extend(out);
                    return Ok((written, true));
                }
            }
        }
    }
    Ok((written, false))
}

/// Commands a Sentinel client sends, with arguments drawn from the names the
/// listener knows and from noise.
fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let word = prop_oneof![
        Just("mymaster"),
        Just("other"),
        Just("2"),
        Just("3"),
        Just("4"),
        Just("-1"),
        Just("setname"),
        Just("getname"),
        Just("id"),
        Just("setinfo"),
        Just("get-master-addr-by-name"),
        Just("masters"),
        Just("master"),
        Just("replicas"),
        Just("slaves"),
        Just("sentinels"),
        Just("myid"),
        Just("ckquorum"),
        Just("failover"),
        Just("+switch-master"),
        Just("*"),
        Just("__sentinel__:hello"),
        Just("AUTH"),
        Just("SETNAME"),
    ]
    .prop_map(|w| w.as_bytes().to_vec());
    let arg = prop_oneof![
        4 => word,
        1 => proptest::collection::vec(any::<u8>(), 0..12),
    ];
    let name = prop_oneof![
        Just("PING"),
        Just("ping"),
        Just("ECHO"),
        Just("HELLO"),
        Just("hello"),
        Just("AUTH"),
        Just("CLIENT"),
        Just("COMMAND"),
        Just("INFO"),
        Just("ROLE"),
        Just("SENTINEL"),
        Just("sentinel"),
        Just("SUBSCRIBE"),
        Just("PSUBSCRIBE"),
        Just("UNSUBSCRIBE"),
        Just("PUNSUBSCRIBE"),
        Just("RESET"),
        Just("GET"),
        Just(""),
    ]
    .prop_map(|w| w.as_bytes().to_vec());
    (name, proptest::collection::vec(arg, 0..5)).prop_map(|(n, mut args)| {
        args.insert(0, n);
        args
    })
}

fn encode(commands: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for c in commands {
        bytes.extend(codec::encode_owned(c));
    }
    bytes
}

proptest! {
    #![proptest_config(config(128))]

    /// A pipeline of commands (QUIT left out) in RESP2 and RESP3 answers one
    /// well-formed reply stream, the same whether it arrives whole, byte by
    /// byte, or cut at any single point.
    #[test]
    fn pipelined_commands_split_at_every_byte_get_the_same_replies(
        commands in proptest::collection::vec(command(), 1..8),
        primary in any::<bool>(),
    ) {
        let shared = shared(primary);
        let bytes = encode(&commands);
        let started = Instant::now();
        let whole = serve(&shared, &[&bytes]).map_err(TestCaseError::fail)?;
        prop_assert!(!whole.0.is_empty());
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(&serve(&shared, &bytewise).map_err(TestCaseError::fail)?, &whole);
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            let split = serve(&shared, &[a, b]).map_err(TestCaseError::fail)?;
            prop_assert_eq!(&split, &whole, "cut at {}", cut);
        }
        prop_assert!(started.elapsed() < SLOW * 8, "took {:?}", started.elapsed());
    }

    /// Arbitrary bytes, and valid pipelines mutated, never panic the
    /// listener; what it answers is well-formed RESP.
    #[test]
    fn arbitrary_or_mutated_requests_get_well_formed_answers(
        noise in proptest::collection::vec(any::<u8>(), 0..300),
        commands in proptest::collection::vec(command(), 1..5),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
    ) {
        let shared = shared(true);
        let started = Instant::now();
        serve(&shared, &[&noise]).map_err(TestCaseError::fail)?;
        let mut bytes = encode(&commands);
        for (at, b) in flips {
            let len = bytes.len();
            bytes[at % len] ^= b | 1;
        }
        bytes.truncate(bytes.len() - cut % (bytes.len() / 4 + 1));
        serve(&shared, &[&bytes]).map_err(TestCaseError::fail)?;
        prop_assert!(started.elapsed() < SLOW, "took {:?}", started.elapsed());
    }
}
