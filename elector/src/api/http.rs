//! The HTTP management API (`listen.api`; see `docs/interfaces.md`).
//!
//! The API reads state, it never computes it: the runtime publishes a
//! [`StatusSnapshot`] through a `watch` channel after every change, and every
//! read endpoint answers from the latest one. That keeps HTTP off the
//! protocol's path entirely; a flood of health checks costs a clone.
//!
//! The load-balancer and scheduler checks (`/primary`, `/replica?lag=`,
//! `/read-write`, `/read-only`, `/liveness`, `/readiness`) live in
//! [`super::health`]. They answer `GET`, `HEAD` and `OPTIONS` with 200 or 503
//! and a one-word body, so HAProxy's `option httpchk` works with its default
//! `OPTIONS` method as well as with `GET`, over HTTP/1.0 or 1.1.
//!
//! `POST /switchover` is the one routine write. It is forwarded to the runtime
//! over an `mpsc` channel with a `oneshot` for the answer; the runtime owns
//! the whole fence / catch-up / hand-over sequence and its rollback. `POST
//! /accept-data-loss` (protocol §6.10) is the operator's way out when no node
//! that holds the floor can be elected ([`super::accept_data_loss`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot, watch};

use super::metrics::Metrics;
use super::request_auth::RequestVerifier;
use super::status::StatusSnapshot;
use crate::net::auth::unix_ms_now;

/// Used when a switchover request names no `timeout_ms`.
pub const DEFAULT_SWITCHOVER_TIMEOUT_MS: u64 = 10_000;
/// Upper bound on a requested switchover timeout (writes stay fenced that long
/// in the worst case, so refuse absurd values).
pub const MAX_SWITCHOVER_TIMEOUT_MS: u64 = 120_000;
/// Extra time the handler waits for the runtime's answer beyond the
/// requested timeout (fencing, the hand-over round trip, rollback).
const REPLY_GRACE: Duration = Duration::from_secs(5);

/// What the API needs from the runtime.
#[derive(Clone)]
pub struct ApiState {
    pub status: watch::Receiver<StatusSnapshot>,
    pub metrics: Arc<Metrics>,
    pub switchover: mpsc::Sender<SwitchoverRequest>,
    /// `POST /accept-data-loss` (protocol §6.10).
    pub accept_data_loss: mpsc::Sender<super::AcceptDataLossRequest>,
    /// With `auth.mode: shared_key`, the check that `POST /switchover` was
    /// signed with the cluster key; `None` when auth is off.
    pub request_auth: Option<Arc<RequestVerifier>>,
    /// When the protocol loop last went round; `/healthz` fails once it
    /// stalls, so the watchdog fences a process that still answers HTTP
    /// but no longer runs its timers (protocol §6.4.1).
    pub loop_beat: Arc<LoopBeat>,
}

/// The protocol loop's pulse. The loop wakes at least once per heartbeat
/// interval, so a pulse older than `stall_after` means it is stuck.
/// With each pulse the loop also says until when its data node may stay
/// writable (the lease it holds, §6.2); `/healthz` passes that on so the
/// watchdog can fence at the lease's end if the elector goes quiet first.
#[derive(Debug)]
pub struct LoopBeat {
    last: std::sync::Mutex<(std::time::Instant, Option<std::time::Instant>)>,
    stall_after: Duration,
}

/// The header of a `/healthz` answer that carries how long the data node
/// may stay writable, in milliseconds (absent while it may not).
pub const WRITABLE_MS_HEADER: &str = "elector-writable-ms";

impl LoopBeat {
    pub fn new(stall_after: Duration) -> Self {
        LoopBeat {
            last: std::sync::Mutex::new((std::time::Instant::now(), None)),
            stall_after,
        }
    }

    /// Called by the protocol loop on every turn, with how much longer its
    /// data node may stay writable.
    pub fn beat(&self, writable_for: Option<Duration>) {
        let now = std::time::Instant::now();
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = (now, writable_for.map(|d| now + d));
    }

    /// How much longer the data node may stay writable, as of now.
    pub fn writable_for(&self) -> Option<Duration> {
        let (_, until) = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        until.map(|u| u.saturating_duration_since(std::time::Instant::now()))
    }

    /// How long the loop has been silent, if longer than the bound.
    pub fn stalled_for(&self) -> Option<Duration> {
        let age = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .elapsed();
        (age > self.stall_after).then_some(age)
    }
}

/// A planned handover request, answered through `reply`.
#[derive(Debug)]
pub struct SwitchoverRequest {
    /// Target node id.
    pub to: String,
    /// How long the target may take to catch up before everything rolls back.
    pub timeout: Duration,
    /// The outcome: a JSON document for 200 (free-form; e.g. new epoch, the
    /// measured write pause), or why it did not happen.
    pub reply: oneshot::Sender<Result<serde_json::Value, SwitchoverError>>,
}

/// Why a switchover did not happen. Serialises as
/// `{"error": "<variant>", ...fields}`.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum SwitchoverError {
    #[error("this node is not the primary")]
    NotPrimary { primary: Option<String> },
    #[error("no node {to} in the cluster")]
    UnknownTarget { to: String },
    #[error("node {to} cannot take over: {why}")]
    TargetNotEligible { to: String, why: String },
    #[error("a switchover is already in progress")]
    InProgress,
    /// The primary cannot hand over yet (its data node is still being
    /// promoted); the same request a moment later can succeed.
    #[error("not now: {why}")]
    NotReady { why: String },
    #[error(
        "the target did not catch up within {timeout_ms} ms; rolled back, the old primary resumed"
    )]
    Timeout { timeout_ms: u64 },
    #[error("switchover failed and was rolled back: {why}")]
    Failed { why: String },
    #[error("the elector is not accepting switchover requests")]
    Unavailable,
}

impl SwitchoverError {
    /// 409 for "not here / not now" (the caller can fix the request), 503 for
    /// "tried and could not" or "cannot try".
    pub fn http_status(&self) -> StatusCode {
        match self {
            SwitchoverError::NotPrimary { .. }
            | SwitchoverError::UnknownTarget { .. }
            | SwitchoverError::TargetNotEligible { .. }
            | SwitchoverError::InProgress
            | SwitchoverError::NotReady { .. } => StatusCode::CONFLICT,
            SwitchoverError::Timeout { .. }
            | SwitchoverError::Failed { .. }
            | SwitchoverError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Body of `POST /switchover`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchoverBody {
    pub to: String,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The router, for embedding or tests.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/switchover", post(switchover))
        .route(
            "/accept-data-loss",
            post(super::accept_data_loss::accept_data_loss),
        )
        .merge(super::health::routes())
        .with_state(state)
}

/// Serves the API on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ApiState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "HTTP API listening");
    }
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

/// The snapshot with `rejected` completed from the metrics registry, which is
/// the source of truth for rejection counts.
fn current(state: &ApiState) -> StatusSnapshot {
    let mut snap = state.status.borrow().clone();
    for (reason, count) in state.metrics.rejected_counts() {
        let entry = snap.rejected.entry(reason).or_insert(0);
        *entry = (*entry).max(count);
    }
    snap
}

async fn healthz(State(state): State<ApiState>, headers: axum::http::HeaderMap) -> Response {
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    if agent.is_some_and(super::metrics::is_watchdog_agent) {
        state.metrics.watchdog_probed(unix_ms_now());
    }
    match state.loop_beat.stalled_for() {
        None => match state.loop_beat.writable_for() {
            Some(left) => (
                StatusCode::OK,
                [(WRITABLE_MS_HEADER, left.as_millis().to_string())],
                "ok\n",
            )
                .into_response(),
            None => (StatusCode::OK, "ok\n").into_response(),
        },
        Some(age) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("protocol loop stalled for {} ms\n", age.as_millis()),
        )
            .into_response(),
    }
}

async fn status(State(state): State<ApiState>) -> Response {
    let mut snap = current(&state);
    // Only `/status` shows it: the clamp count is a file read, which
    // `/metrics` does once on its own and a switchover does not need.
    snap.watchdog = state.metrics.watchdog_status(unix_ms_now());
    json_response(StatusCode::OK, &snap)
}

async fn metrics(State(state): State<ApiState>) -> Response {
    let body = state.metrics.render(&current(&state));
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

fn json_response<T: Serialize>(code: StatusCode, value: &T) -> Response {
    match serde_json::to_vec_pretty(value) {
        Ok(mut body) => {
            body.push(b'\n');
            (
                code,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                body,
            )
                .into_response()
        }
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("serialising: {e}\n"),
        )
            .into_response(),
    }
}

fn bad_request(message: String) -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        &serde_json::json!({"error": "bad_request", "message": message}),
    )
}

/// Error body: the tagged error, a human message, and, for `not_primary`,
/// the primary's API address when known so a client can retry there.
fn switchover_error(err: &SwitchoverError, snap: &StatusSnapshot) -> Response {
    let mut body = serde_json::to_value(err).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(obj) = body.as_object_mut() {
        obj.insert("message".into(), err.to_string().into());
        if let SwitchoverError::NotPrimary { primary: Some(p) } = err {
            if let Some(api) = snap
                .peers
                .iter()
                .find(|x| &x.id == p)
                .and_then(|x| x.api.clone())
            {
                obj.insert("primary_api".into(), api.into());
            }
        }
    }
    json_response(err.http_status(), &body)
}

async fn switchover(
    State(state): State<ApiState>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(verifier) = &state.request_auth {
        let header = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if let Err(e) = verifier.verify(header, "POST", "/switchover", &body, unix_ms_now()) {
            state.metrics.message_rejected("api_unauthorized");
            tracing::warn!(error = %e, "unauthenticated switchover request refused");
            let body = serde_json::json!({"error": "unauthorized", "message": e.to_string()});
            return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
        }
    }
    let req: SwitchoverBody = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad_request(format!("expected {{\"to\": ID, \"timeout_ms\": N}}: {e}")),
    };
    let timeout_ms = req.timeout_ms.unwrap_or(DEFAULT_SWITCHOVER_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_SWITCHOVER_TIMEOUT_MS {
        return bad_request(format!(
            "timeout_ms must be 1..={MAX_SWITCHOVER_TIMEOUT_MS}"
        ));
    }
    let snap = current(&state);
    // Cheap checks against the latest snapshot; the runtime checks again
    // authoritatively (the snapshot may be a moment old).
    let precheck = if !snap.is_writable_primary() {
        Some(SwitchoverError::NotPrimary {
            primary: snap.primary.clone().filter(|p| p != &snap.node_id),
        })
    } else if req.to == snap.node_id {
        Some(SwitchoverError::TargetNotEligible {
            to: req.to.clone(),
            why: "it is already the primary".into(),
        })
    } else if !snap.peers.iter().any(|p| p.id == req.to) {
        Some(SwitchoverError::UnknownTarget { to: req.to.clone() })
    } else {
        None
    };
    if let Some(err) = precheck {
        return switchover_error(&err, &snap);
    }

    let (reply, answer) = oneshot::channel();
    let timeout = Duration::from_millis(timeout_ms);
    let sent = state.switchover.try_send(SwitchoverRequest {
        to: req.to.clone(),
        timeout,
        reply,
    });
    if let Err(e) = sent {
        let err = match e {
            mpsc::error::TrySendError::Full(_) => SwitchoverError::InProgress,
            mpsc::error::TrySendError::Closed(_) => SwitchoverError::Unavailable,
        };
        return switchover_error(&err, &snap);
    }
    tracing::info!(to = %req.to, timeout_ms, "switchover requested over the API");
    let outcome = match tokio::time::timeout(timeout + REPLY_GRACE, answer).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_dropped)) => Err(SwitchoverError::Unavailable),
        Err(_elapsed) => Err(SwitchoverError::Timeout { timeout_ms }),
    };
    match outcome {
        Ok(value) => json_response(StatusCode::OK, &value),
        Err(err) => {
            tracing::warn!(to = %req.to, error = %err, "switchover refused or rolled back");
            switchover_error(&err, &current(&state))
        }
    }
}

#[cfg(test)]
pub(super) mod tests;
