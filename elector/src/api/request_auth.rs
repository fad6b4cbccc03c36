//! Signed operator requests: with `auth.mode: shared_key`, `POST /switchover`
//! must carry proof that the caller holds the cluster's key (issue 10,
//! finding 9). Anyone who can reach the API could otherwise move the
//! primary, and a switchover fences writes while it runs.
//!
//! The header is `Authorization: Elector-HMAC <unix_ms>:<hex>`, where `hex`
//! is HMAC-SHA256 over `elector-request-v1`, the method, the path, the
//! timestamp and the body (each length-prefixed, as election frames are).
//! The API accepts a request whose timestamp is within `MAX_SKEW_MS` of its
//! clock and later than the last one it accepted, so a captured request
//! cannot be replayed. The key never travels.

use std::sync::atomic::{AtomicU64, Ordering};

use hmac::Mac;
use thiserror::Error;

use crate::net::auth::{hex_decode_32, hex_encode, put, HmacSha256, Secret};

/// Authorization scheme name.
pub(crate) const SCHEME: &str = "Elector-HMAC";
/// How far a request's timestamp may be from the API's clock.
pub(crate) const MAX_SKEW_MS: u64 = 30_000;
const LABEL: &[u8] = b"elector-request-v1";

/// Why a signed request was refused (HTTP 401).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum RequestAuthError {
    #[error("auth is on: sign the request (elector switchover --config <file> does)")]
    Missing,
    #[error("the Authorization header is not `{SCHEME} <unix_ms>:<hex>`")]
    Malformed,
    #[error("the request is signed with another key")]
    BadTag,
    #[error("the request's timestamp is more than {MAX_SKEW_MS} ms from the node's clock")]
    Expired,
    #[error("the request was already used (timestamp not after the last one accepted)")]
    Replay,
}

/// The MAC over one request, ready to finalize or verify.
fn mac_over(key: &Secret, method: &str, path: &str, unix_ms: u64, body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key.expose()).expect("HMAC takes any key length");
    for part in [
        LABEL,
        method.as_bytes(),
        path.as_bytes(),
        unix_ms.to_string().as_bytes(),
        body,
    ] {
        put(&mut mac, part);
    }
    mac
}

/// The `Authorization` header value for a request (the CLI's side).
pub(crate) fn sign(key: &Secret, method: &str, path: &str, unix_ms: u64, body: &[u8]) -> String {
    format!(
        "{SCHEME} {unix_ms}:{}",
        hex_encode(
            &mac_over(key, method, path, unix_ms, body)
                .finalize()
                .into_bytes()
        )
    )
}

/// The API's side: checks signatures and remembers the newest accepted
/// timestamp.
#[derive(Debug)]
pub struct RequestVerifier {
    key: Secret,
    last_accepted_ms: AtomicU64,
}

impl RequestVerifier {
    pub(crate) fn new(key: Secret) -> Self {
        RequestVerifier {
            key,
            last_accepted_ms: AtomicU64::new(0),
        }
    }

    pub(crate) fn verify(
        &self,
        header: Option<&str>,
        method: &str,
        path: &str,
        body: &[u8],
        now_ms: u64,
    ) -> Result<(), RequestAuthError> {
        let header = header.ok_or(RequestAuthError::Missing)?;
        let rest = header
            .strip_prefix(SCHEME)
            .and_then(|r| r.strip_prefix(' '))
            .ok_or(RequestAuthError::Malformed)?;
        let (ts, mac_hex) = rest.split_once(':').ok_or(RequestAuthError::Malformed)?;
        let unix_ms: u64 = ts.parse().map_err(|_| RequestAuthError::Malformed)?;
        let given = hex_decode_32(mac_hex.as_bytes()).ok_or(RequestAuthError::Malformed)?;
        // Constant-time comparison through the MAC itself.
        let mac = mac_over(&self.key, method, path, unix_ms, body);
        mac.verify_slice(&given)
            .map_err(|_| RequestAuthError::BadTag)?;
        if unix_ms.abs_diff(now_ms) > MAX_SKEW_MS {
            return Err(RequestAuthError::Expired);
        }
        let mut last = self.last_accepted_ms.load(Ordering::SeqCst);
        loop {
            if unix_ms <= last {
                return Err(RequestAuthError::Replay);
            }
            match self.last_accepted_ms.compare_exchange(
                last,
                unix_ms,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => last = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    fn verifier() -> RequestVerifier {
        RequestVerifier::new(Secret::new("cluster-key"))
    }

    #[test]
    fn a_request_signed_with_the_cluster_key_is_accepted_once() {
        let v = verifier();
        let h = sign(
            &Secret::new("cluster-key"),
            "POST",
            "/switchover",
            NOW,
            b"{}",
        );
        assert_eq!(
            v.verify(Some(&h), "POST", "/switchover", b"{}", NOW),
            Ok(())
        );
        assert_eq!(
            v.verify(Some(&h), "POST", "/switchover", b"{}", NOW + 10),
            Err(RequestAuthError::Replay)
        );
    }

    #[test]
    fn an_unsigned_or_wrongly_signed_request_is_refused() {
        let v = verifier();
        assert_eq!(
            v.verify(None, "POST", "/switchover", b"{}", NOW),
            Err(RequestAuthError::Missing)
        );
        let other = sign(
            &Secret::new("another-key"),
            "POST",
            "/switchover",
            NOW,
            b"{}",
        );
        assert_eq!(
            v.verify(Some(&other), "POST", "/switchover", b"{}", NOW),
            Err(RequestAuthError::BadTag)
        );
        for bad in [
            "Bearer x",
            "Elector-HMAC 12",
            "Elector-HMAC x:00",
            "Elector-HMAC 1:zz",
        ] {
            assert_eq!(
                v.verify(Some(bad), "POST", "/switchover", b"{}", NOW),
                Err(RequestAuthError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_signed_request_cannot_be_replayed_with_another_body_or_much_later() {
        let v = verifier();
        let key = Secret::new("cluster-key");
        let h = sign(&key, "POST", "/switchover", NOW, br#"{"to":"n2"}"#);
        assert_eq!(
            v.verify(Some(&h), "POST", "/switchover", br#"{"to":"n3"}"#, NOW),
            Err(RequestAuthError::BadTag)
        );
        assert_eq!(
            v.verify(
                Some(&h),
                "POST",
                "/switchover",
                br#"{"to":"n2"}"#,
                NOW + MAX_SKEW_MS + 1
            ),
            Err(RequestAuthError::Expired)
        );
    }
}
