//! Replies and their encoding in RESP2 or RESP3, written by the maintained
//! `redis-protocol` crate.
//!
//! [`Reply`] says what a reply *means* (a map, a push, "no value"); the
//! protocol the client chose with `HELLO` decides its bytes. The crate writes
//! both: a map is `%` in RESP3 and a flat key/value array in RESP2, a push is
//! `>` or an array, a null is `_` or `$-1`. Its `index-map` feature keeps map
//! entries in the order we give them, as real Sentinel sends them.
//!
//! One reply the crate cannot spell: RESP2's null *array* (`*-1`), which
//! Sentinel answers to `get-master-addr-by-name` when it knows no primary.
//! Its RESP2 frames have one null, the null bulk string (`$-1`), so
//! [`Reply::NilArray`] is written by hand, and only at the top level, where
//! it is only ever used.
//!
//! Requests are not decoded here: they go through the election transport's
//! bounded decoder (`crate::net::codec`), which caps array and bulk lengths
//! before buffering; the crate's decoder has no such limits.

use redis_protocol::resp2::types::{OwnedFrame as Resp2, Resp2Frame as _};
use redis_protocol::resp3::types::{FrameMap, OwnedFrame as Resp3, Resp3Frame as _};

/// The protocol a connection speaks: RESP2 until the client sends `HELLO 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

impl Protocol {
    /// The number `HELLO` reports as `proto`.
    pub(super) fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// Null bulk string (`$-1` in RESP2).
    Nil,
    /// Null array (`*-1` in RESP2); top level only (see the module doc).
    NilArray,
    Array(Vec<Reply>),
    /// A map: `%` in RESP3, a flat key/value array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// Out-of-band data (pub/sub): `>` in RESP3, an array in RESP2.
    Push(Vec<Reply>),
}

impl Reply {
    pub(super) fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    pub(super) fn bulk(s: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(s.as_ref().to_vec())
    }

    pub(super) fn err(s: impl Into<String>) -> Reply {
        Reply::Error(s.into())
    }

    /// A field/value map of bulk strings (Sentinel's instance entries).
    pub(super) fn fields(pairs: &[(&str, String)]) -> Reply {
        Reply::Map(
            pairs
                .iter()
                .map(|(k, v)| (Reply::bulk(k), Reply::bulk(v)))
                .collect(),
        )
    }

    /// Appends the reply's bytes in `proto` to `out`.
    pub(super) fn encode(self, out: &mut Vec<u8>, proto: Protocol) {
        let start = out.len();
        let written = match (proto, self) {
            (Protocol::Resp2, Reply::NilArray) => {
                out.extend_from_slice(b"*-1\r\n");
                return;
            }
            (Protocol::Resp2, reply) => {
                let frame = reply.into_resp2();
                out.resize(start + frame.encode_len(false), 0);
                redis_protocol::resp2::encode::encode(&mut out[start..], &frame, false)
            }
            (Protocol::Resp3, reply) => {
                let frame = reply.into_resp3();
                out.resize(start + frame.encode_len(false), 0);
                redis_protocol::resp3::encode::complete::encode(&mut out[start..], &frame, false)
            }
        };
        // The buffer was sized by the crate's own `encode_len`, so the only
        // error it reports (buffer too small) cannot happen; should it
        // anyway, send nothing rather than a torn frame.
        match written {
            Ok(n) => out.truncate(start + n),
            Err(e) => {
                tracing::error!(error = %e, "could not encode a sentinel reply");
                out.truncate(start);
            }
        }
    }

    fn into_resp2(self) -> Resp2 {
        match self {
            Reply::Simple(s) => Resp2::SimpleString(one_line(s).into_bytes()),
            Reply::Error(s) => Resp2::Error(one_line(s)),
            Reply::Int(i) => Resp2::Integer(i),
            Reply::Bulk(b) => Resp2::BulkString(b),
            Reply::Nil | Reply::NilArray => Resp2::Null,
            Reply::Array(items) | Reply::Push(items) => {
                Resp2::Array(items.into_iter().map(Reply::into_resp2).collect())
            }
            Reply::Map(pairs) => Resp2::Array(
                pairs
                    .into_iter()
                    .flat_map(|(k, v)| [k.into_resp2(), v.into_resp2()])
                    .collect(),
            ),
        }
    }

    fn into_resp3(self) -> Resp3 {
        match self {
            Reply::Simple(s) => Resp3::SimpleString {
                data: one_line(s).into_bytes(),
                attributes: None,
            },
            Reply::Error(s) => Resp3::SimpleError {
                data: one_line(s),
                attributes: None,
            },
            Reply::Int(i) => Resp3::Number {
                data: i,
                attributes: None,
            },
            Reply::Bulk(b) => Resp3::BlobString {
                data: b,
                attributes: None,
            },
            Reply::Nil | Reply::NilArray => Resp3::Null,
            Reply::Array(items) => Resp3::Array {
                data: items.into_iter().map(Reply::into_resp3).collect(),
                attributes: None,
            },
            Reply::Push(items) => Resp3::Push {
                data: items.into_iter().map(Reply::into_resp3).collect(),
                attributes: None,
            },
            Reply::Map(pairs) => Resp3::Map {
                data: pairs
                    .into_iter()
                    .map(|(k, v)| (k.into_resp3(), v.into_resp3()))
                    .collect::<FrameMap<_, _>>(),
                attributes: None,
            },
        }
    }
}

/// Simple strings and errors are one line: CR and LF would end the frame.
fn one_line(s: String) -> String {
    if s.contains(['\r', '\n']) {
        s.replace(['\r', '\n'], "")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(reply: Reply, proto: Protocol) -> Vec<u8> {
        let mut out = Vec::new();
        reply.encode(&mut out, proto);
        out
    }

    #[test]
    fn a_map_is_a_flat_array_in_resp2_and_a_map_in_resp3_in_the_given_order() {
        let map = Reply::fields(&[("name", "m".into()), ("ip", "h".into())]);
        assert_eq!(
            bytes(map.clone(), Protocol::Resp2),
            b"*4\r\n$4\r\nname\r\n$1\r\nm\r\n$2\r\nip\r\n$1\r\nh\r\n"
        );
        assert_eq!(
            bytes(map, Protocol::Resp3),
            b"%2\r\n$4\r\nname\r\n$1\r\nm\r\n$2\r\nip\r\n$1\r\nh\r\n"
        );
    }

    #[test]
    fn nulls_are_typed_in_resp2_and_one_null_in_resp3() {
        assert_eq!(bytes(Reply::Nil, Protocol::Resp2), b"$-1\r\n");
        assert_eq!(bytes(Reply::NilArray, Protocol::Resp2), b"*-1\r\n");
        assert_eq!(bytes(Reply::Nil, Protocol::Resp3), b"_\r\n");
        assert_eq!(bytes(Reply::NilArray, Protocol::Resp3), b"_\r\n");
    }

    #[test]
    fn a_push_is_an_array_in_resp2_and_a_push_in_resp3() {
        let push = Reply::Push(vec![Reply::bulk("message"), Reply::Int(1)]);
        assert_eq!(
            bytes(push.clone(), Protocol::Resp2),
            b"*2\r\n$7\r\nmessage\r\n:1\r\n"
        );
        assert_eq!(
            bytes(push, Protocol::Resp3),
            b">2\r\n$7\r\nmessage\r\n:1\r\n"
        );
    }

    #[test]
    fn line_breaks_cannot_end_a_simple_string_or_error_early() {
        assert_eq!(
            bytes(Reply::err("ERR a\r\nb"), Protocol::Resp2),
            b"-ERR ab\r\n"
        );
        assert_eq!(
            bytes(Reply::Simple("x\ny".into()), Protocol::Resp3),
            b"+xy\r\n"
        );
    }
}
