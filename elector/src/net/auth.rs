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

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;
use thiserror::Error;

pub(crate) type HmacSha256 = Hmac<Sha256>;

/// First field of an authenticated frame.
pub const AUTH_MARKER: &[u8] = b"AUTH";
/// Fields before the inner message: marker, sender, boot id, seq, unix ms, tag.
const HEADER_FIELDS: usize = 6;
/// Domain separation for the tag, bumped if the canonical encoding changes.
const TAG_CONTEXT: &[u8] = b"elector-auth-v1";
/// Default tolerated clock difference between nodes.
pub const DEFAULT_MAX_SKEW_MS: u64 = 30_000;
/// Node ids are at most 32 bytes (config contract); allow some slack.
const MAX_ID_LEN: usize = 64;

/// `auth.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    #[default]
    None,
    SharedKey,
}

/// A secret string that never prints.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    pub(crate) fn expose(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

/// The `auth:` section of the config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default)]
    pub mode: AuthMode,
    #[serde(default)]
    pub key: Option<Secret>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Largest accepted difference between a frame's timestamp and ours.
    #[serde(default = "default_skew")]
    pub max_skew_ms: u64,
}

fn default_skew() -> u64 {
    DEFAULT_MAX_SKEW_MS
}

/// Why an `auth:` section cannot be used. Messages name the problem, never
/// the key.
#[derive(Debug, Error)]
pub enum AuthConfigError {
    #[error("auth.mode shared_key needs auth.key or auth.key_file")]
    MissingKey,
    #[error("auth.key and auth.key_file are both set; use one")]
    KeyAndKeyFile,
    #[error("auth key is empty")]
    EmptyKey,
    #[error("reading auth.key_file {path}: {source}")]
    KeyFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl AuthConfig {
    /// The key bytes for `shared_key`, `None` for mode `none`. A key file's
    /// trailing newline is not part of the key (editors and `echo` add one).
    pub fn load_key(&self) -> Result<Option<Secret>, AuthConfigError> {
        if self.mode == AuthMode::None {
            return Ok(None);
        }
        let key = match (&self.key, &self.key_file) {
            (Some(_), Some(_)) => return Err(AuthConfigError::KeyAndKeyFile),
            (None, None) => return Err(AuthConfigError::MissingKey),
            (Some(k), None) => k.clone(),
            (None, Some(path)) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| AuthConfigError::KeyFile {
                        path: path.clone(),
                        source,
                    })?;
                Secret(text.trim_end_matches(['\n', '\r']).to_string())
            }
        };
        if key.0.is_empty() {
            return Err(AuthConfigError::EmptyKey);
        }
        Ok(Some(key))
    }

    /// Non-fatal advice for `elector check-config`.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        match self.mode {
            AuthMode::None => {
                w.push(
                    "auth.mode is none: election messages are not authenticated (lab use only)"
                        .into(),
                );
                if self.key.is_some() || self.key_file.is_some() {
                    w.push("auth.key/key_file is set but ignored because auth.mode is none".into());
                }
            }
            AuthMode::SharedKey => {
                if let Some(k) = &self.key {
                    if k.0.len() < 16 {
                        w.push("auth.key is shorter than 16 bytes".into());
                    }
                }
            }
        }
        w
    }
}

/// Why a frame was dropped. [`AuthError::reason`] is the metrics label.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
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
    pub fn reason(&self) -> &'static str {
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
pub struct Opened {
    /// `None` in mode `none`.
    pub sender: Option<String>,
    pub fields: Vec<Vec<u8>>,
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
pub fn unix_ms_now() -> u64 {
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

    /// Whether frames are authenticated.
    pub fn enabled(&self) -> bool {
        self.mac.is_some()
    }

    /// Wraps `fields` for `to_id`, stamped with the current time.
    pub fn seal(&mut self, to_id: &str, fields: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        self.seal_at(to_id, fields, unix_ms_now())
    }

    /// [`Authenticator::seal`] with an explicit clock (tests, simulation).
    pub fn seal_at(&mut self, to_id: &str, fields: Vec<Vec<u8>>, now_unix_ms: u64) -> Vec<Vec<u8>> {
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

    /// Verifies and unwraps a frame addressed to this node.
    pub fn open(
        &mut self,
        fields: Vec<Vec<u8>>,
        now_unix_ms: u64,
    ) -> Result<Vec<Vec<u8>>, AuthError> {
        self.open_verified(fields, now_unix_ms).map(|o| o.fields)
    }

    /// Like [`Authenticator::open`], also returning the authenticated sender.
    pub fn open_verified(
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

/// Sequence numbers a sender may deliver out of order and still be heard.
const REPLAY_WINDOW: u64 = 64;

/// Highest `(boot_id, seq)` accepted from one sender and which of the
/// [`REPLAY_WINDOW`] sequence numbers below it were seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReplayWindow {
    boot_id: u64,
    top: u64,
    /// Bit `i` set: `top - i` was accepted (bit 0 is `top` itself).
    seen: u64,
}

impl ReplayWindow {
    fn new(boot_id: u64, seq: u64) -> Self {
        ReplayWindow {
            boot_id,
            top: seq,
            seen: 1,
        }
    }

    /// Records `(boot_id, seq)`, or says why it is a replay. Only called for
    /// authentic frames.
    fn accept(&mut self, boot_id: u64, seq: u64) -> Result<(), AuthError> {
        if boot_id < self.boot_id {
            return Err(AuthError::Replay);
        }
        if boot_id > self.boot_id {
            *self = ReplayWindow::new(boot_id, seq);
            return Ok(());
        }
        if seq > self.top {
            let shift = seq - self.top;
            self.seen = if shift >= REPLAY_WINDOW {
                0
            } else {
                self.seen << shift
            };
            self.seen |= 1;
            self.top = seq;
            return Ok(());
        }
        let behind = self.top - seq;
        if behind >= REPLAY_WINDOW || self.seen & (1 << behind) != 0 {
            return Err(AuthError::Replay);
        }
        self.seen |= 1 << behind;
        Ok(())
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

/// Feeds one length-prefixed field to a MAC, so no two field lists encode
/// alike.
pub(crate) fn put(mac: &mut HmacSha256, bytes: &[u8]) {
    mac.update(&(bytes.len() as u64).to_be_bytes());
    mac.update(bytes);
}

fn feed(
    mac: &mut HmacSha256,
    sender: &[u8],
    receiver: &[u8],
    boot_id: u64,
    seq: u64,
    unix_ms: u64,
    fields: &[Vec<u8>],
) {
    put(mac, TAG_CONTEXT);
    put(mac, sender);
    put(mac, receiver);
    mac.update(&boot_id.to_be_bytes());
    mac.update(&seq.to_be_bytes());
    mac.update(&unix_ms.to_be_bytes());
    mac.update(&(fields.len() as u64).to_be_bytes());
    for f in fields {
        put(mac, f);
    }
}

fn compute_tag(
    mut mac: HmacSha256,
    sender: &[u8],
    receiver: &[u8],
    boot_id: u64,
    seq: u64,
    unix_ms: u64,
    fields: &[Vec<u8>],
) -> [u8; 32] {
    feed(&mut mac, sender, receiver, boot_id, seq, unix_ms, fields);
    mac.finalize().into_bytes().into()
}

/// Lowercase hex (also used by signed operator requests and the
/// configuration fingerprint).
pub(crate) fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// Lowercase hex of exactly 32 bytes (an HMAC-SHA256 tag).
pub(crate) fn hex_decode_32(s: &[u8]) -> Option<[u8; 32]> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: u64 = 1_760_000_000_000;

    fn cfg(key: &str) -> AuthConfig {
        AuthConfig {
            mode: AuthMode::SharedKey,
            key: Some(Secret::new(key)),
            key_file: None,
            max_skew_ms: DEFAULT_MAX_SKEW_MS,
        }
    }

    fn pair(key: &str) -> (Authenticator, Authenticator) {
        (
            Authenticator::new(&cfg(key), "n1", NOW - 5_000).expect("n1"),
            Authenticator::new(&cfg(key), "n2", NOW - 9_000).expect("n2"),
        )
    }

    fn msg() -> Vec<Vec<u8>> {
        vec![
            b"HB".to_vec(),
            b"n1".to_vec(),
            b"3".to_vec(),
            b"1234".to_vec(),
        ]
    }

    #[test]
    fn a_sealed_frame_opens_to_the_original_fields() {
        let (mut a, mut b) = pair("k3y-k3y-k3y-k3y-k3y");
        let sealed = a.seal_at("n2", msg(), NOW);
        assert_eq!(sealed[0], b"AUTH");
        assert_eq!(sealed.len(), HEADER_FIELDS + msg().len());
        let opened = b.open_verified(sealed, NOW + 10).expect("opens");
        assert_eq!(opened.fields, msg());
        assert_eq!(opened.sender.as_deref(), Some("n1"));
    }

    #[test]
    fn any_flipped_byte_fails_the_tag() {
        let (mut a, _) = pair("secret");
        let sealed = a.seal_at("n2", msg(), NOW);
        // Every byte of every authenticated field (sender and beyond).
        for i in 1..sealed.len() {
            for j in 0..sealed[i].len() {
                let mut b = Authenticator::new(&cfg("secret"), "n2", NOW).expect("n2");
                let mut bad = sealed.clone();
                bad[i][j] ^= 0x01;
                let err = b.open(bad, NOW).expect_err("tampered frame must not open");
                assert!(
                    matches!(err, AuthError::BadTag | AuthError::Malformed),
                    "field {i} byte {j}: {err:?}"
                );
            }
        }
    }

    #[test]
    fn a_replayed_frame_is_rejected_as_replay() {
        let (mut a, mut b) = pair("secret");
        let first = a.seal_at("n2", msg(), NOW);
        b.open(first.clone(), NOW).expect("first delivery opens");
        assert_eq!(b.open(first, NOW), Err(AuthError::Replay));
    }

    #[test]
    fn a_frame_overtaken_by_a_newer_one_still_opens_once() {
        let (mut a, mut b) = pair("secret");
        let older = a.seal_at("n2", msg(), NOW);
        let newer = a.seal_at("n2", msg(), NOW);
        b.open(newer, NOW).expect("newer opens");
        b.open(older.clone(), NOW)
            .expect("reordered older frame opens");
        assert_eq!(b.open(older, NOW), Err(AuthError::Replay));
    }

    #[test]
    fn a_frame_older_than_the_window_is_rejected_as_replay() {
        let (mut a, mut b) = pair("secret");
        let ancient = a.seal_at("n2", msg(), NOW);
        let mut last = Vec::new();
        for _ in 0..REPLAY_WINDOW {
            last = a.seal_at("n2", msg(), NOW);
        }
        b.open(last, NOW).expect("opens");
        assert_eq!(b.open(ancient, NOW), Err(AuthError::Replay));
    }

    #[test]
    fn the_replay_window_accepts_each_sequence_number_exactly_once() {
        let mut w = ReplayWindow::new(1, 100);
        assert_eq!(w.accept(1, 100), Err(AuthError::Replay));
        for seq in [103, 101, 102, 200, 150, 137] {
            assert_eq!(w.accept(1, seq), Ok(()), "seq {seq}");
            assert_eq!(w.accept(1, seq), Err(AuthError::Replay), "seq {seq} twice");
        }
        assert_eq!(w.accept(1, 136), Err(AuthError::Replay), "below the window");
        assert_eq!(w.accept(0, 500), Err(AuthError::Replay), "older boot");
        assert_eq!(w.accept(2, 1), Ok(()), "newer boot restarts the window");
        assert_eq!(
            w.accept(1, 201),
            Err(AuthError::Replay),
            "old boot after the restart"
        );
    }

    #[test]
    fn a_restarted_sender_is_heard_again_but_its_old_boot_is_not() {
        let (mut a, mut b) = pair("secret");
        let old_boot = a.seal_at("n2", msg(), NOW);
        let mut old_boot_later = a.clone_for_test();
        b.open(a.seal_at("n2", msg(), NOW), NOW).expect("opens");
        let mut restarted = Authenticator::new(&cfg("secret"), "n1", NOW + 1).expect("restart");
        b.open(restarted.seal_at("n2", msg(), NOW + 2), NOW + 2)
            .expect("new boot id starts a new sequence");
        assert_eq!(b.open(old_boot, NOW + 2), Err(AuthError::Replay));
        let stale = old_boot_later.seal_at("n2", msg(), NOW + 3);
        assert_eq!(b.open(stale, NOW + 3), Err(AuthError::Replay));
    }

    #[test]
    fn a_wrong_key_fails_the_tag() {
        let mut a = Authenticator::new(&cfg("one key"), "n1", NOW).expect("n1");
        let mut b = Authenticator::new(&cfg("another"), "n2", NOW).expect("n2");
        assert_eq!(
            b.open(a.seal_at("n2", msg(), NOW), NOW),
            Err(AuthError::BadTag)
        );
    }

    #[test]
    fn a_frame_for_another_receiver_fails_the_tag() {
        let mut a = Authenticator::new(&cfg("k"), "n1", NOW).expect("n1");
        let mut c = Authenticator::new(&cfg("k"), "n3", NOW).expect("n3");
        assert_eq!(
            c.open(a.seal_at("n2", msg(), NOW), NOW),
            Err(AuthError::BadTag)
        );
    }

    #[test]
    fn a_frame_outside_the_skew_window_is_expired() {
        let (mut a, mut b) = pair("k");
        let sealed = a.seal_at("n2", msg(), NOW);
        assert_eq!(
            b.open(sealed.clone(), NOW + 30_001),
            Err(AuthError::Expired(-30_001))
        );
        let early = a.seal_at("n2", msg(), NOW + 31_000);
        assert_eq!(b.open(early, NOW), Err(AuthError::Expired(31_000)));
        // An expired frame does not advance the high-water mark.
        b.open(sealed, NOW + 1)
            .expect("still opens within the window");
    }

    #[test]
    fn truncated_frames_are_malformed() {
        let (mut a, _) = pair("k");
        let sealed = a.seal_at("n2", msg(), NOW);
        for len in 1..=HEADER_FIELDS {
            let mut b = Authenticator::new(&cfg("k"), "n2", NOW).expect("n2");
            assert_eq!(
                b.open(sealed[..len].to_vec(), NOW),
                Err(AuthError::Malformed),
                "len {len}"
            );
        }
        let mut b = Authenticator::new(&cfg("k"), "n2", NOW).expect("n2");
        let mut short_tag = sealed.clone();
        short_tag[5].truncate(63);
        assert_eq!(b.open(short_tag, NOW), Err(AuthError::Malformed));
    }

    #[test]
    fn an_unauthenticated_frame_is_missing_its_tag() {
        let (_, mut b) = pair("k");
        assert_eq!(b.open(msg(), NOW), Err(AuthError::MissingTag));
        assert_eq!(b.open(Vec::new(), NOW), Err(AuthError::MissingTag));
    }

    #[test]
    fn mode_none_passes_frames_through_and_flags_auth_headers() {
        let none = AuthConfig::default();
        let mut a = Authenticator::new(&none, "n1", NOW).expect("n1");
        let mut b = Authenticator::new(&none, "n2", NOW).expect("n2");
        let sealed = a.seal_at("n2", msg(), NOW);
        assert_eq!(sealed, msg());
        assert_eq!(b.open(sealed, NOW).expect("passes"), msg());
        let mut keyed = Authenticator::new(&cfg("k"), "n1", NOW).expect("keyed");
        assert_eq!(
            b.open(keyed.seal_at("n2", msg(), NOW), NOW),
            Err(AuthError::UnexpectedTag)
        );
    }

    #[test]
    fn the_key_never_appears_in_debug_output() {
        let c = cfg("super-secret-key-material");
        let a = Authenticator::new(&c, "n1", NOW).expect("n1");
        let printed = format!("{c:?} {a:?}");
        assert!(!printed.contains("super-secret"), "{printed}");
        assert!(printed.contains("redacted"));
    }

    #[test]
    fn config_parses_from_yaml_and_validates_the_key_source() {
        let c: AuthConfig = serde_yaml::from_str("mode: shared_key\nkey: abc\n").expect("yaml");
        assert_eq!(c.mode, AuthMode::SharedKey);
        assert_eq!(c.max_skew_ms, DEFAULT_MAX_SKEW_MS);
        assert!(c.load_key().expect("key").is_some());

        let none: AuthConfig = serde_yaml::from_str("mode: none\n").expect("yaml");
        assert!(none.load_key().expect("ok").is_none());

        let missing: AuthConfig = serde_yaml::from_str("mode: shared_key\n").expect("yaml");
        assert!(matches!(
            missing.load_key(),
            Err(AuthConfigError::MissingKey)
        ));

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("key");
        std::fs::write(&path, "from-file\n").expect("write");
        let from_file: AuthConfig =
            serde_yaml::from_str(&format!("mode: shared_key\nkey_file: {}\n", path.display()))
                .expect("yaml");
        let mut a = Authenticator::new(&from_file, "n1", NOW).expect("n1");
        let mut b = Authenticator::new(&cfg("from-file"), "n2", NOW).expect("n2");
        b.open(a.seal_at("n2", msg(), NOW), NOW)
            .expect("trailing newline is not part of the key");

        assert!(serde_yaml::from_str::<AuthConfig>("mode: hmac\n").is_err());
        assert!(serde_yaml::from_str::<AuthConfig>("mode: none\nkeys: x\n").is_err());
    }

    impl Authenticator {
        fn clone_for_test(&self) -> Authenticator {
            Authenticator {
                node_id: self.node_id.clone(),
                boot_id: self.boot_id,
                seq: self.seq,
                mac: self.mac.clone(),
                max_skew_ms: self.max_skew_ms,
                high_water: self.high_water.clone(),
            }
        }
    }

    proptest! {
        #[test]
        fn opening_arbitrary_frames_never_panics(
            fields in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..10),
            with_marker in any::<bool>(),
            now in any::<u64>(),
        ) {
            let mut fields = fields;
            if with_marker {
                fields.insert(0, AUTH_MARKER.to_vec());
            }
            let mut b = Authenticator::new(&cfg("k"), "n2", NOW).expect("n2");
            let _ = b.open(fields.clone(), now);
            let mut n = Authenticator::new(&AuthConfig::default(), "n2", NOW).expect("n2");
            let _ = n.open(fields, now);
        }

        #[test]
        fn any_inner_message_round_trips(
            fields in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..8),
        ) {
            let (mut a, mut b) = pair("prop-key");
            let sealed = a.seal_at("n2", fields.clone(), NOW);
            prop_assert_eq!(b.open(sealed, NOW).expect("opens"), fields);
        }

        #[test]
        fn a_mutated_header_number_never_opens(delta in 1u64..1000, which in 2usize..5) {
            let (mut a, mut b) = pair("prop-key");
            let mut sealed = a.seal_at("n2", msg(), NOW);
            let v: u64 = std::str::from_utf8(&sealed[which]).expect("utf8").parse().expect("num");
            sealed[which] = (v + delta).to_string().into_bytes();
            prop_assert!(b.open(sealed, NOW).is_err());
        }
    }
}
