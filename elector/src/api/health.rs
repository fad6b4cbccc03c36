//! Health checks for load balancers and schedulers (`docs/interfaces.md`,
//! "Health checks"). Patroni's REST API is the model: the same names mean
//! the same thing, so an HAProxy or Kubernetes configuration written for a
//! Patroni cluster reads the same here.
//!
//! Every check answers `GET`, `HEAD` and `OPTIONS` with 200 or 503 and a
//! one-line body, from the latest [`StatusSnapshot`] (or, for the loop's own
//! pulse, the [`LoopBeat`](super::http::LoopBeat)); none of them touches the
//! protocol loop or the data node, so a flood of checks costs a clone.
//!
//! - `/primary`, `/read-write`: the unfenced primary (where writes go).
//! - `/replica[?lag=N]`: a replica whose data node answers and whose link is
//!   not down; with `lag=N` also at most `N` behind the primary. The unit of
//!   `N` is the data node's replication offset: bytes on Redis, replicated
//!   commands on kevy 7.0.0 (its `master_repl_offset` counts commands).
//! - `/read-only[?lag=N]`: either of the above (any node that serves reads).
//! - `/liveness`: the protocol loop turns (restart the process if not).
//! - `/readiness`: a healthy member: the loop turns, the data node answers and
//!   this node hears a quorum, itself included. Never "is primary": a
//!   scheduler's budgets and rolling updates count ready members.

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use super::http::ApiState;
use super::status::StatusSnapshot;

/// The optional `?lag=N` of `/replica` and `/read-only`. A value that is not
/// a non-negative integer is refused with 400 by the extractor, so a typo in
/// a load balancer's check shows up at once instead of passing every node.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LagQuery {
    lag: Option<u64>,
}

/// The health routes, merged into the API's router.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/primary", get(primary).options(primary))
        .route("/read-write", get(primary).options(primary))
        .route("/replica", get(replica).options(replica))
        .route("/read-only", get(read_only).options(read_only))
        .route("/liveness", get(liveness).options(liveness))
        .route("/readiness", get(readiness).options(readiness))
}

/// A replica within `max_lag` of its primary (any lag when `None`). With a
/// bound, an unknown lag fails: the node cannot show it is close enough
/// (no primary heard within `down_after`, or a different data stream).
pub fn replica_within(snap: &StatusSnapshot, max_lag: Option<u64>) -> bool {
    snap.is_healthy_replica()
        && max_lag.is_none_or(|max| snap.data_node.lag.is_some_and(|lag| lag <= max))
}

/// A healthy member, for a scheduler's readiness: data node reachable and a
/// quorum heard (this node included). A witness has no data node to reach.
pub fn ready(snap: &StatusSnapshot) -> bool {
    let data_ok = snap.data_node.reachable || snap.data_node.kind == "none";
    data_ok && snap.quorum_ok()
}

fn check(ok: bool, yes: &'static str, no: &'static str) -> Response {
    let (code, body) = if ok {
        (StatusCode::OK, yes)
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, no)
    };
    (
        code,
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        body,
    )
        .into_response()
}

async fn primary(State(state): State<ApiState>) -> Response {
    let ok = state.status.borrow().is_writable_primary();
    check(ok, "primary\n", "not primary\n")
}

async fn replica(State(state): State<ApiState>, Query(q): Query<LagQuery>) -> Response {
    let ok = replica_within(&state.status.borrow(), q.lag);
    check(ok, "replica\n", "not a healthy replica\n")
}

async fn read_only(State(state): State<ApiState>, Query(q): Query<LagQuery>) -> Response {
    let snap = state.status.borrow();
    let ok = snap.is_writable_primary() || replica_within(&snap, q.lag);
    check(ok, "readable\n", "not readable\n")
}

async fn liveness(State(state): State<ApiState>) -> Response {
    let ok = state.loop_beat.stalled_for().is_none();
    check(ok, "alive\n", "protocol loop stalled\n")
}

async fn readiness(State(state): State<ApiState>) -> Response {
    let ok = state.loop_beat.stalled_for().is_none() && ready(&state.status.borrow());
    check(ok, "ready\n", "not ready\n")
}

#[cfg(test)]
mod tests;
