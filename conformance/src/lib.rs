//! Conformance suite for `elector`: starts labs of real containers, injects faults,
//! drives client load, records a history and checks the product's invariants over it.
//!
//! Pure parts (no Docker): [`scenario`], [`history`], [`checkers`], [`metrics`],
//! [`report`], [`nemesis`] rules, [`probe`] parsers. Container work: [`cluster`],
//! [`docker`], [`workload`], [`runner`].
#![forbid(unsafe_code)]

pub mod bench;
pub mod chaos;
pub mod checkers;
pub mod cluster;
pub mod docker;
pub mod error;
pub mod history;
pub mod load;
pub mod metrics;
pub mod nemesis;
pub mod probe;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod smoke;
pub mod suite;
pub mod target;
pub mod usage;
pub mod vip;
pub mod workload;

pub use error::{Error, Result};
