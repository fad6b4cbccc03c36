//! The elector's network layer: how election messages travel between
//! electors (docs/protocol.md §3).
//!
//! * [`codec`]: bounded RESP2 framing.
//! * [`transport`]: one connection per ordered pair of nodes, liveness,
//!   redial, the hardened listener.
//! * [`auth`]: shared-key HMAC on every frame, with a replay window.
//! * [`fingerprint`]: what two electors must agree on (members, lease
//!   timings) before they count each other's messages.

pub mod auth;
pub mod codec;
pub mod fingerprint;
pub mod transport;
