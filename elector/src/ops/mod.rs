//! Operator surface of the elector: everything a person or a tool uses to see,
//! explain, steer and secure a cluster without reading logs or capturing packets.
//!
//! These modules hold no protocol logic. The runtime owns the protocol core and
//! feeds them plain data (a [`status::StatusSnapshot`] through a `watch`
//! channel, a [`sentinel::ClusterView`], hook events, counters); they answer
//! HTTP, Prometheus, Sentinel-speaking clients and run hook scripts. Keeping
//! them on the far side of channels means a slow scraper, a hanging hook or a
//! misbehaving client can never stall an election.

pub mod api;
pub mod auth;
pub mod cli;
pub mod hooks;
pub mod listen;
pub mod metrics;
pub mod request_auth;
pub mod sentinel;
pub mod status;
