//! `elector`: quorum-based primary failover for Redis-compatible stores.
//!
//! * [`core`]: the pure election state machine (`handle(now, event) -> actions`).
//! * [`protocol`]: election messages; [`net`]: how they travel (framing,
//!   transport, auth, configuration fingerprint).
//! * The tokio shell executes the core's actions: [`runtime`] (the protocol
//!   task), [`datanode`], [`persist`], [`hooks`], [`watchdog`]; the operator
//!   surface in [`api`] (HTTP API, metrics, status, Sentinel listener) and
//!   [`cli`] (the `status`/`switchover` client). See `docs/architecture.md`.
#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod config;
pub mod core;
pub mod datanode;
pub mod hooks;
pub mod net;
pub mod persist;
pub mod protocol;
pub mod runtime;
pub mod status_view;
pub(crate) mod tls;
pub mod vip;
pub mod watchdog;

#[cfg(test)]
mod fuzz;
