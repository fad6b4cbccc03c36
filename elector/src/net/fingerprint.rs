//! What two electors must agree on before they may count each other's votes
//! (protocol §3.7): the membership, and the timings the lease depends on.
//!
//! A primary's lease is safe only if its peers refuse other candidates for at
//! least as long as it stays writable (§6.2.1). Both sides compute their
//! windows from `hb_interval`, `down_after` and `fence_margin`, so a node
//! whose timings differ from its peers' can be writable while they elect a
//! successor. Two different peer lists can each form a quorum. HELLO carries
//! this fingerprint, and a connection whose fingerprint differs is refused
//! (counted as `config_mismatch`, shown in `/status`).
//!
//! The fingerprint is readable rather than an opaque hash, so the refusal
//! can say *what* differs: `m<members-hash>/<hb>/<down_after>/<margin>/<election_timeout>`.
//! `election_timeout` is there because a voter stops echoing the old
//! primary for as long as a candidacy it voted for may still win (§6.2): a
//! candidate with a longer timeout than its voters could win after they
//! resumed echoing, while the old primary's lease still held. A fingerprint
//! of four fields comes from an elector older than that and is compared on
//! those four, and such a peer is sent four fields in turn: it refuses a
//! fifth as malformed (a binary upgrade rolls; keep `election_timeout_ms`
//! the same on every node while it does).
//! Addresses are left out on purpose: two nodes may reach a third by
//! different addresses (NAT, DNS names); the ids are what votes count.

use sha2::{Digest, Sha256};
use std::fmt;

use crate::core::Timings;

/// Longest fingerprint accepted from the wire.
pub(crate) const MAX_FINGERPRINT_LEN: usize = 64;

/// How much of the fingerprint a peer's elector reads, as its own `HELLO`
/// shows (§3.7, §3.8): an elector refuses a fingerprint with more fields than
/// it knows as malformed, so during a binary upgrade each peer is sent the
/// form it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FingerprintForm {
    /// Every field this version sends.
    Full,
    /// From before `election_timeout` joined it: four fields.
    FourFields,
    /// From before the fingerprint: none at all.
    Absent,
}

impl FingerprintForm {
    /// The form a peer reads, from the fingerprint it sent (`None`: none).
    pub(crate) fn of(theirs: Option<&Fingerprint>) -> Self {
        match theirs {
            None => FingerprintForm::Absent,
            Some(f) if f.election_timeout_ms.is_none() => FingerprintForm::FourFields,
            Some(_) => FingerprintForm::Full,
        }
    }
}

/// The parts of a configuration peers must share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// First 8 bytes of SHA-256 over the sorted member ids, in hex.
    pub(crate) members: String,
    pub(crate) hb_interval_ms: u64,
    pub(crate) down_after_ms: u64,
    pub(crate) fence_margin_ms: u64,
    /// `None` from an elector older than this field.
    pub(crate) election_timeout_ms: Option<u64>,
}

impl Fingerprint {
    /// A membership of data members only (no witnesses).
    pub fn new<'a>(member_ids: impl IntoIterator<Item = &'a str>, t: &Timings) -> Self {
        Fingerprint::of(member_ids.into_iter().map(|id| (id, false)), t)
    }

    /// A membership given as `(id, is_witness)`: who is a witness is part of
    /// it (§4.5), since a witness counts for the quorum but not for the data
    /// promise. A membership without witnesses hashes exactly as before
    /// witnesses existed, so a rolling upgrade keeps its fingerprint.
    pub fn of<'a>(members: impl IntoIterator<Item = (&'a str, bool)>, t: &Timings) -> Self {
        let mut members: Vec<(&str, bool)> = members.into_iter().collect();
        members.sort_unstable();
        members.dedup();
        let mut h = Sha256::new();
        for (id, witness) in members {
            // Length-prefixed, so ["ab","c"] and ["a","bc"] differ; a
            // witness's record carries a NUL (never in a valid id) after it.
            let len = id.len() + usize::from(witness);
            h.update((len as u32).to_be_bytes());
            h.update(id.as_bytes());
            if witness {
                h.update([0u8]);
            }
        }
        let digest = h.finalize();
        let members = crate::net::auth::hex_encode(&digest[..8]);
        Fingerprint {
            members,
            hb_interval_ms: t.hb_interval_ms,
            down_after_ms: t.down_after_ms,
            fence_margin_ms: t.fence_margin_ms,
            election_timeout_ms: Some(t.election_timeout_ms),
        }
    }

    /// Parses the wire form; `None` for anything malformed.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        if s.len() > MAX_FINGERPRINT_LEN {
            return None;
        }
        let mut parts = s.split('/');
        let members = parts.next()?.strip_prefix('m')?;
        if members.len() != 16 || !members.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut num = || parts.next()?.parse::<u64>().ok();
        let (hb_interval_ms, down_after_ms, fence_margin_ms) = (num()?, num()?, num()?);
        let election_timeout_ms = match parts.next() {
            None => None,
            Some(v) => Some(v.parse::<u64>().ok()?),
        };
        let fp = Fingerprint {
            members: members.to_ascii_lowercase(),
            hb_interval_ms,
            down_after_ms,
            fence_margin_ms,
            election_timeout_ms,
        };
        parts.next().is_none().then_some(fp)
    }

    /// Our fingerprint as a peer that reads `form` expects it in `HELLO`
    /// (`None`: send none). A peer compares what it reads, and we compare
    /// its shorter fingerprint on the fields it has: neither side checks
    /// more than the older one knows, whichever way the `HELLO` goes.
    pub(crate) fn wire_for(&self, form: FingerprintForm) -> Option<String> {
        match form {
            FingerprintForm::Full => Some(self.to_string()),
            FingerprintForm::FourFields => Some(
                Fingerprint {
                    election_timeout_ms: None,
                    ..self.clone()
                }
                .to_string(),
            ),
            FingerprintForm::Absent => None,
        }
    }

    /// What differs between ours (`self`) and a peer's, for the refusal
    /// message; empty when they agree.
    pub(crate) fn differences(&self, theirs: &Fingerprint) -> Vec<String> {
        let mut out = vec![];
        if self.members != theirs.members {
            out.push("the member ids differ".to_string());
        }
        let mut cmp = |name: &str, ours: u64, peer: u64| {
            if ours != peer {
                out.push(format!("{name} {peer} (ours {ours})"));
            }
        };
        cmp("hb_interval_ms", self.hb_interval_ms, theirs.hb_interval_ms);
        cmp("down_after_ms", self.down_after_ms, theirs.down_after_ms);
        cmp(
            "fence_margin_ms",
            self.fence_margin_ms,
            theirs.fence_margin_ms,
        );
        if let (Some(ours), Some(peer)) = (self.election_timeout_ms, theirs.election_timeout_ms) {
            cmp("election_timeout_ms", ours, peer);
        }
        out
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "m{}/{}/{}/{}",
            self.members, self.hb_interval_ms, self.down_after_ms, self.fence_margin_ms
        )?;
        match self.election_timeout_ms {
            Some(ms) => write!(f, "/{ms}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_is_a_witness_is_part_of_the_fingerprint_and_data_only_clusters_hash_as_before() {
        // §3.7, §4.5
        let t = Timings::default();
        let plain = Fingerprint::new(["n1", "n2", "n3"], &t);
        let same = Fingerprint::of([("n1", false), ("n2", false), ("n3", false)], &t);
        let witness = Fingerprint::of([("n1", false), ("n2", false), ("n3", true)], &t);
        let other_witness = Fingerprint::of([("n1", true), ("n2", false), ("n3", false)], &t);
        assert_eq!(plain, same);
        assert_ne!(plain.members, witness.members);
        assert_ne!(witness.members, other_witness.members);
    }

    fn timings(down_after_ms: u64) -> Timings {
        Timings {
            down_after_ms,
            ..Timings::default()
        }
    }

    #[test]
    fn the_fingerprint_round_trips_through_its_wire_form() {
        let fp = Fingerprint::new(["n1", "n2", "n3"], &timings(3000));
        assert_eq!(Fingerprint::parse(&fp.to_string()), Some(fp));
    }

    #[test]
    fn member_order_does_not_matter_but_membership_does() {
        let t = timings(3000);
        let a = Fingerprint::new(["n1", "n2", "n3"], &t);
        assert_eq!(a, Fingerprint::new(["n3", "n1", "n2"], &t));
        let b = Fingerprint::new(["n1", "n2", "n4"], &t);
        assert_eq!(a.differences(&b), vec!["the member ids differ".to_string()]);
        let c = Fingerprint::new(["n1", "n2"], &t);
        assert_ne!(a, c);
        assert_ne!(
            Fingerprint::new(["ab", "c"], &t),
            Fingerprint::new(["a", "bc"], &t)
        );
    }

    #[test]
    fn a_different_down_after_is_named_in_the_differences() {
        let ours = Fingerprint::new(["n1", "n2", "n3"], &timings(3000));
        let theirs = Fingerprint::new(["n1", "n2", "n3"], &timings(5000));
        assert_eq!(
            ours.differences(&theirs),
            vec!["down_after_ms 5000 (ours 3000)".to_string()]
        );
        assert!(ours.differences(&ours).is_empty());
    }

    /// Every timing the safety argument reads is in the fingerprint
    /// (protocol §3.7, §6.2.1), and each one left out says why. A field
    /// added to `Timings` breaks this destructuring until it is sorted in.
    #[test]
    fn every_timing_the_safety_argument_reads_is_fingerprinted() {
        let base = Timings::default();
        let Timings {
            hb_interval_ms,
            down_after_ms,
            election_timeout_ms,
            backoff_min_ms,
            backoff_max_ms,
            fence_margin_ms,
        } = base;
        let fp = |t: Timings| Fingerprint::new(["n1", "n2", "n3"], &t);
        let ours = fp(base);
        // The lease, the voters' refusal window and the echo's suppression
        // after a vote (§6.2, §6.2.1, §6.3) are computed from these.
        let read_by_the_argument = [
            Timings {
                hb_interval_ms: hb_interval_ms + 1,
                ..base
            },
            Timings {
                down_after_ms: down_after_ms + 1,
                ..base
            },
            Timings {
                fence_margin_ms: fence_margin_ms + 1,
                ..base
            },
            Timings {
                election_timeout_ms: election_timeout_ms + 1,
                ..base
            },
        ];
        for t in read_by_the_argument {
            assert_ne!(fp(t), ours, "{t:?} must be refused by a peer with {base:?}");
        }
        // The backoff only paces a node's own retries after a lost
        // election: no window another node relies on is computed from it.
        let liveness_only = [
            Timings {
                backoff_min_ms: backoff_min_ms + 1,
                ..base
            },
            Timings {
                backoff_max_ms: backoff_max_ms + 1,
                ..base
            },
        ];
        for t in liveness_only {
            assert_eq!(fp(t), ours);
        }
    }

    #[test]
    fn an_older_electors_four_field_fingerprint_is_compared_on_those_four() {
        let ours = Fingerprint::new(["n1", "n2", "n3"], &timings(3000));
        let mut old = ours.clone();
        old.election_timeout_ms = None;
        let wire = old.to_string();
        assert_eq!(wire.matches('/').count(), 3);
        assert_eq!(Fingerprint::parse(&wire), Some(old.clone()));
        assert!(ours.differences(&old).is_empty());
        let mut other = ours.clone();
        other.election_timeout_ms = Some(9_999);
        assert_eq!(
            ours.differences(&other),
            vec!["election_timeout_ms 9999 (ours 3000)".to_string()]
        );
    }

    #[test]
    fn malformed_fingerprints_are_refused() {
        for bad in [
            "",
            "x",
            "m12/1/2/3",
            "m0123456789abcdef/1/2",
            "m0123456789abcdef/1/2/3/4/5",
            "m0123456789abcdef/1/2/3/x",
            "m0123456789abcdeg/1/2/3",
            "m0123456789abcdef/1/-2/3",
            &"m".repeat(80),
        ] {
            assert_eq!(Fingerprint::parse(bad), None, "{bad:?}");
        }
    }
}
