//! Invariant checkers: pure functions over a recorded [`History`].
//!
//! Each returns a [`CheckResult`]; a run passes when every applicable checker passes.

mod election;
mod epochs;
mod liveness;
mod lost_writes;
mod old_primary;
mod split_brain;
pub mod vip;

use serde::{Deserialize, Serialize};

use crate::history::{History, Ms};
use crate::scenario::Expect;

pub use election::{
    majority_elects, minority_never_elects, n2_never_fails_over, primary_stable,
    witness_never_primary,
};
pub use epochs::{epochs_monotonic, one_primary_per_epoch};
pub use liveness::{
    availability, availability_note, liveness_after_quiet, liveness_bound_ms, median, recoveries,
};
pub use lost_writes::{
    acknowledged_writes_survive, lost_count, lost_keys, replicas_converge, writes_acknowledged,
};
pub use old_primary::old_primary_follows;
pub use split_brain::single_writable_primary;

/// One violation, optionally over a time window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<Ms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<Ms>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

impl Violation {
    pub fn msg(message: impl Into<String>) -> Self {
        Violation {
            message: message.into(),
            start_ms: None,
            end_ms: None,
            nodes: vec![],
        }
    }
    pub fn window(message: impl Into<String>, start: Ms, end: Ms, nodes: Vec<String>) -> Self {
        Violation {
            message: message.into(),
            start_ms: Some(start),
            end_ms: Some(end),
            nodes,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    pub name: String,
    pub passed: bool,
    /// Not applicable to this run (passed is then true).
    #[serde(default)]
    pub skipped: bool,
    /// Notes that are not violations (e.g. tolerated overlaps, measured latencies).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<Violation>,
}

impl CheckResult {
    pub fn new(name: &str, violations: Vec<Violation>, notes: Vec<String>) -> Self {
        CheckResult {
            name: name.to_string(),
            passed: violations.is_empty(),
            skipped: false,
            notes,
            violations,
        }
    }
    pub fn skipped(name: &str, why: &str) -> Self {
        CheckResult {
            name: name.to_string(),
            passed: true,
            skipped: true,
            notes: vec![why.to_string()],
            violations: vec![],
        }
    }
}

/// Runs every checker that applies to the history and expectations.
pub fn check_all(h: &History, expect: &Expect) -> Vec<CheckResult> {
    vec![
        single_writable_primary(h),
        majority_elects(h, expect),
        minority_never_elects(h),
        primary_stable(h, expect),
        n2_never_fails_over(h),
        writes_acknowledged(h),
        acknowledged_writes_survive(h),
        replicas_converge(h),
        epochs_monotonic(h),
        one_primary_per_epoch(h),
        old_primary_follows(h),
        witness_never_primary(h),
        liveness_after_quiet(h),
        availability_note(h),
    ]
}
