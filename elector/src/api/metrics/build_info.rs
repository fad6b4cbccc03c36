//! `elector_build_info{version, commit} 1`: which build a node runs.
//!
//! The Prometheus convention for build identity (an info gauge fixed at 1, the
//! identity in its labels) lets an operator see a rolling upgrade's progress,
//! and join the version onto any other series, without reading `--version`
//! on each host. The commit is what `build.rs` stamped (`unknown` outside git).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The crate version this binary was built from.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit `build.rs` stamped into this binary.
pub(crate) const COMMIT: &str = env!("BUILD_GIT_COMMIT");

/// `{version="0.1.0",commit="7c462f1abcde"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Build {
    version: &'static str,
    commit: &'static str,
}

/// Registers the one `elector_build_info` series.
pub(super) fn register(r: &mut Registry) {
    let info = Family::<Build, Gauge<u64, AtomicU64>>::default();
    info.get_or_create(&Build {
        version: VERSION,
        commit: COMMIT,
    })
    .set(1);
    r.register(
        "elector_build_info",
        "Always 1; the labels name the version and git commit this elector was built from",
        info,
    );
}
