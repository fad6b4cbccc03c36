//! `elector`: quorum-based primary failover for Redis-compatible stores.
//!
//! * [`core`]: the pure election state machine (`handle(now, event) -> actions`).
//! * [`protocol`] and [`codec`]: election messages and their RESP2 framing.
//! * The tokio shell executes the core's actions: [`runtime`] (the protocol
//!   task), [`transport`], [`datanode`], [`persist`], and the operator
//!   surface in [`ops`] (HTTP API, metrics, hooks, auth, Sentinel, CLI).
//!   See `docs/architecture.md`.
#![forbid(unsafe_code)]

pub mod codec;
pub mod config;
pub mod core;
pub mod datanode;
pub mod fingerprint;
pub mod ops;
pub mod persist;
pub mod protocol;
pub mod runtime;
pub mod status_view;
pub mod transport;
pub mod watchdog;
