//! The tag: HMAC-SHA256 over a canonical, length-prefixed encoding of the
//! frame, and the hex spelling it travels in.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub(crate) type HmacSha256 = Hmac<Sha256>;

/// Domain separation for the tag, bumped if the canonical encoding changes.
const TAG_CONTEXT: &[u8] = b"elector-auth-v1";

/// Feeds one length-prefixed field to a MAC, so no two field lists encode
/// alike.
pub(crate) fn put(mac: &mut HmacSha256, bytes: &[u8]) {
    mac.update(&(bytes.len() as u64).to_be_bytes());
    mac.update(bytes);
}

pub(super) fn feed(
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

pub(super) fn compute_tag(
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
