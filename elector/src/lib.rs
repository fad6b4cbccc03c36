//! `elector`: quorum-based primary failover for Redis-compatible stores.
//!
//! * [`core`]: the pure election state machine (`handle(now, event) -> actions`).
//! * [`protocol`] and [`codec`]: election messages and their RESP2 framing.
//! * The tokio shell (transport, data-node adapter, HTTP API, hooks) executes
//!   the core's actions; see `docs/architecture.md`.
#![forbid(unsafe_code)]

pub mod codec;
pub mod core;
pub mod protocol;
