//! Authentication of election messages (`auth.mode: none | shared_key`).
//!
//! With a shared key every frame travels as
//!
//! ```text
//! AUTH <sender_id> <boot_id> <seq> <unix_ms> <hex hmac-sha256> <inner fields...>
//! ```
//!
//! The tag is HMAC-SHA256 (RustCrypto `hmac` + `sha2`) over a canonical,
//! length-prefixed encoding of a version label, sender, *receiver*, boot id,
//! sequence number, timestamp and every inner field. Binding the receiver
//! means a message captured on the way to n2 cannot be replayed into n3;
//! length prefixes mean no two different frames encode to the same bytes.
//!
//! Replay protection: `boot_id` grows with every start of the sender (it is
//! stored in the data dir as `max(previous + 1, start time in unix ms)`, so
//! a restart after the wall clock stepped back still gets a larger one;
//! `StateFile::next_boot_id`) and `seq` a counter that only grows within one process (one counter for
//! all receivers). A receiver keeps, per sender, the highest `(boot_id, seq)`
//! it accepted plus a 64-bit bitmap of which of the 64 sequence numbers below
//! it were seen, as IPsec does (RFC 4303 §3.4.3). A frame is accepted once: a
//! duplicate, anything at or below the window, or anything from an older boot
//! is a `replay`. The window exists because frames from one sender may travel
//! over two TCP connections (its outbound one and our inbound one, or an old
//! and a reconnected one) and so arrive slightly out of order; a strict
//! "must exceed the last" rule would drop such legitimate frames as replays.
//! A restarted sender has a larger `boot_id`, so it is heard again at once.
//! Timestamps further than `max_skew_ms` (30 s) from the receiver's clock are
//! dropped too, which bounds what a captured frame is worth after the
//! *receiver* restarts and forgets its windows.
//!
//! The check order is: shape, tag, timestamp, replay. The tag comes first so a
//! forged frame is always counted as `bad_tag`, and the high-water mark only
//! moves on an authentic frame, so a forger cannot poison it.
//!
//! Mode `none` passes frames through untouched, *except* a frame whose first
//! field is `AUTH`: that is a peer configured with a key talking to a node
//! without one. Passing it on would make the protocol layer see an unknown
//! `AUTH` message and drop it anyway; rejecting it here as
//! [`AuthError::UnexpectedTag`] names the misconfiguration in `/status` and
//! `/metrics` (`unexpected_tag`). No election message type is called `AUTH`.
//!
//! Threat model (as in seed 003): this authenticates and protects integrity
//! on a private network; it does not encrypt. The key never appears in
//! `Debug` output, logs or the API.

mod config;
mod replay;
mod tag;

use std::collections::HashMap;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::Mac;
use thiserror::Error;

pub use self::config::{AuthConfig, AuthConfigError, AuthMode, Secret, DEFAULT_MAX_SKEW_MS};
use self::replay::ReplayWindow;
use self::tag::{compute_tag, feed};
pub(crate) use self::tag::{hex_decode_32, hex_encode, put, HmacSha256};

/// First field of an authenticated frame.
pub(crate) const AUTH_MARKER: &[u8] = b"AUTH";
/// Fields before the inner message: marker, sender, boot id, seq, unix ms, tag.
const HEADER_FIELDS: usize = 6;
/// Node ids are at most 32 bytes (config contract); allow some slack.
const MAX_ID_LEN: usize = 64;

/// Why a frame was dropped. [`AuthError::reason`] is the metrics label.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum AuthError {
    #[error("frame carries no AUTH header")]
    MissingTag,
    #[error("authentication tag does not verify")]
    BadTag,
    #[error("sequence number is not above the last one accepted from this sender")]
    Replay,
    #[error("timestamp is {0} ms away from our clock")]
    Expired(i64),
    #[error("malformed AUTH header")]
    Malformed,
    #[error("AUTH header received but authentication is off here")]
    UnexpectedTag,
}

impl AuthError {
    /// Snake-case label for `messages_rejected{reason}` and `/status`.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            AuthError::MissingTag => "missing_tag",
            AuthError::BadTag => "bad_tag",
            AuthError::Replay => "replay",
            AuthError::Expired(_) => "expired",
            AuthError::Malformed => "malformed",
            AuthError::UnexpectedTag => "unexpected_tag",
        }
    }
}

/// An opened frame and who authentically sent it. The runtime should check
/// that the sender named inside the message equals `sender` (when auth is on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Opened {
    /// `None` in mode `none`.
    pub(crate) sender: Option<String>,
    pub(crate) fields: Vec<Vec<u8>>,
}

/// Seals outgoing and opens incoming frames for one node.
pub struct Authenticator {
    node_id: String,
    boot_id: u64,
    seq: u64,
    mac: Option<HmacSha256>,
    max_skew_ms: u64,
    /// Per sender: anti-replay window.
    high_water: HashMap<String, ReplayWindow>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("node_id", &self.node_id)
            .field("boot_id", &self.boot_id)
            .field("seq", &self.seq)
            .field(
                "mode",
                &if self.mac.is_some() {
                    "shared_key"
                } else {
                    "none"
                },
            )
            .field("max_skew_ms", &self.max_skew_ms)
            .finish_non_exhaustive()
    }
}

/// Milliseconds since the unix epoch (0 if the clock is before 1970).
pub(crate) fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Authenticator {
    /// `boot_id` should be the process start time in unix ms ([`unix_ms_now`]
    /// at startup), so it grows across restarts.
    pub fn new(config: &AuthConfig, node_id: &str, boot_id: u64) -> Result<Self, AuthConfigError> {
        let mac = match config.load_key()? {
            None => None,
            Some(key) => Some(
                HmacSha256::new_from_slice(key.expose()).map_err(|_| AuthConfigError::EmptyKey)?,
            ),
        };
        Ok(Authenticator {
            node_id: node_id.to_string(),
            boot_id,
            seq: 0,
            mac,
            max_skew_ms: config.max_skew_ms,
            high_water: HashMap::new(),
        })
    }

    /// Wraps `fields` for `to_id`, stamped with the current time.
    pub(crate) fn seal(&mut self, to_id: &str, fields: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        self.seal_at(to_id, fields, unix_ms_now())
    }

    /// [`Authenticator::seal`] with an explicit clock (tests, simulation).
    pub(crate) fn seal_at(
        &mut self,
        to_id: &str,
        fields: Vec<Vec<u8>>,
        now_unix_ms: u64,
    ) -> Vec<Vec<u8>> {
        let Some(mac) = &self.mac else {
            return fields;
        };
        self.seq += 1;
        let tag = compute_tag(
            mac.clone(),
            self.node_id.as_bytes(),
            to_id.as_bytes(),
            self.boot_id,
            self.seq,
            now_unix_ms,
            &fields,
        );
        let mut out = Vec::with_capacity(HEADER_FIELDS + fields.len());
        out.push(AUTH_MARKER.to_vec());
        out.push(self.node_id.as_bytes().to_vec());
        out.push(self.boot_id.to_string().into_bytes());
        out.push(self.seq.to_string().into_bytes());
        out.push(now_unix_ms.to_string().into_bytes());
        out.push(hex_encode(&tag).into_bytes());
        out.extend(fields);
        out
    }

    /// Verifies and unwraps a frame addressed to this node (for tests; the
    /// transport uses [`Authenticator::open_verified`]).
    #[cfg(test)]
    pub(crate) fn open(
        &mut self,
        fields: Vec<Vec<u8>>,
        now_unix_ms: u64,
    ) -> Result<Vec<Vec<u8>>, AuthError> {
        self.open_verified(fields, now_unix_ms).map(|o| o.fields)
    }

    /// Like [`Authenticator::open`], also returning the authenticated sender.
    pub(crate) fn open_verified(
        &mut self,
        mut fields: Vec<Vec<u8>>,
        now_unix_ms: u64,
    ) -> Result<Opened, AuthError> {
        let has_marker = fields.first().is_some_and(|f| f.as_slice() == AUTH_MARKER);
        let Some(mac) = &self.mac else {
            if has_marker {
                return Err(AuthError::UnexpectedTag);
            }
            return Ok(Opened {
                sender: None,
                fields,
            });
        };
        if !has_marker {
            return Err(AuthError::MissingTag);
        }
        // Header plus at least one inner field (the message type).
        if fields.len() <= HEADER_FIELDS {
            return Err(AuthError::Malformed);
        }
        let sender = &fields[1];
        if sender.is_empty() || sender.len() > MAX_ID_LEN {
            return Err(AuthError::Malformed);
        }
        let sender = std::str::from_utf8(sender)
            .map_err(|_| AuthError::Malformed)?
            .to_string();
        let boot_id = parse_u64(&fields[2])?;
        let seq = parse_u64(&fields[3])?;
        let sent_ms = parse_u64(&fields[4])?;
        let tag = hex_decode_32(&fields[5]).ok_or(AuthError::Malformed)?;
        let inner = fields.split_off(HEADER_FIELDS);

        let mut mac = mac.clone();
        feed(
            &mut mac,
            sender.as_bytes(),
            self.node_id.as_bytes(),
            boot_id,
            seq,
            sent_ms,
            &inner,
        );
        mac.verify_slice(&tag).map_err(|_| AuthError::BadTag)?;

        let skew = sent_ms as i128 - now_unix_ms as i128;
        if skew.unsigned_abs() > u128::from(self.max_skew_ms) {
            return Err(AuthError::Expired(
                skew.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            ));
        }
        match self.high_water.get_mut(&sender) {
            Some(window) => window.accept(boot_id, seq)?,
            None => {
                self.high_water
                    .insert(sender.clone(), ReplayWindow::new(boot_id, seq));
            }
        }
        Ok(Opened {
            sender: Some(sender),
            fields: inner,
        })
    }
}

/// Strict decimal: 1..=20 ASCII digits, no sign, fits in u64.
fn parse_u64(b: &[u8]) -> Result<u64, AuthError> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return Err(AuthError::Malformed);
    }
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(AuthError::Malformed)
}

#[cfg(test)]
mod tests;
