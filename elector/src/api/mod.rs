//! The operator surface a tool talks to: the HTTP API ([`http`]), Prometheus
//! metrics, the status document, the Sentinel-compatible listener and signed
//! operator requests.
//!
//! These modules hold no protocol logic. The runtime owns the protocol core and
//! feeds them plain data (a [`status::StatusSnapshot`] through a `watch`
//! channel, a [`sentinel::ClusterView`], counters); they answer HTTP,
//! Prometheus and Sentinel-speaking clients. Keeping them on the far side of
//! channels means a slow scraper or a misbehaving client can never stall an
//! election.

pub mod accept_data_loss;
pub mod health;
pub mod http;
pub(crate) mod https;
pub(crate) mod listen;
pub mod metrics;
pub mod request_auth;
pub(crate) mod sentinel;
pub mod status;

pub use accept_data_loss::AcceptDataLossRequest;
pub use http::{
    router, serve, ApiState, LoopBeat, SwitchoverBody, SwitchoverError, SwitchoverRequest,
    DEFAULT_SWITCHOVER_TIMEOUT_MS, MAX_SWITCHOVER_TIMEOUT_MS, WRITABLE_MS_HEADER,
};
