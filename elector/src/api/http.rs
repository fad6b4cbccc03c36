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
//! `POST /switchover` is the one write. It is forwarded to the runtime over an
//! `mpsc` channel with a `oneshot` for the answer; the runtime owns the whole
//! fence / catch-up / hand-over sequence and its rollback.

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
            | SwitchoverError::InProgress => StatusCode::CONFLICT,
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

async fn healthz(State(state): State<ApiState>) -> Response {
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
    json_response(StatusCode::OK, &current(&state))
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
pub(super) mod tests {
    use super::super::status::{PeerStatus, Role};
    use super::*;
    use std::io::{Read, Write};
    use std::net::SocketAddr;

    /// A real API server on loopback over a snapshot the test changes.
    pub(in crate::api) struct Harness {
        pub(in crate::api) addr: SocketAddr,
        pub(in crate::api) status: watch::Sender<StatusSnapshot>,
        metrics: Arc<Metrics>,
        requests: mpsc::Receiver<SwitchoverRequest>,
        pub(in crate::api) loop_beat: Arc<LoopBeat>,
        _stop: oneshot::Sender<()>,
    }

    /// A reachable, unfenced primary n1 of three at epoch 3.
    pub(in crate::api) fn primary_snapshot() -> StatusSnapshot {
        let mut s = StatusSnapshot::initial("n1", "kevy", "127.0.0.1:6379", 3);
        s.role = Role::Primary;
        s.fenced = false;
        s.epoch = 3;
        s.primary = Some("n1".into());
        s.data_node.reachable = true;
        s.peers = ["n2", "n3"]
            .iter()
            .map(|id| PeerStatus {
                id: id.to_string(),
                alive: true,
                role: Some(Role::Replica),
                epoch: Some(3),
                offset: Some(10),
                last_seen_ms: Some(20),
                api: Some(format!("{id}.example:9300")),
            })
            .collect();
        s
    }

    pub(in crate::api) async fn start() -> Harness {
        start_with(None).await
    }

    pub(in crate::api) async fn start_with(request_auth: Option<Arc<RequestVerifier>>) -> Harness {
        start_full(request_auth, Duration::from_secs(60)).await
    }

    /// A harness whose loop counts as stalled after `stall_after` without a beat.
    pub(in crate::api) async fn start_full(
        request_auth: Option<Arc<RequestVerifier>>,
        stall_after: Duration,
    ) -> Harness {
        let listener = super::super::listen::bind_tcp("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (status, status_rx) = watch::channel(primary_snapshot());
        let metrics = Arc::new(Metrics::new());
        let (sw_tx, requests) = mpsc::channel(1);
        let (stop, stopped) = oneshot::channel::<()>();
        let loop_beat = Arc::new(LoopBeat::new(stall_after));
        let state = ApiState {
            status: status_rx,
            metrics: Arc::clone(&metrics),
            switchover: sw_tx,
            request_auth,
            loop_beat: Arc::clone(&loop_beat),
        };
        tokio::spawn(serve(listener, state, async {
            let _ = stopped.await;
        }));
        Harness {
            addr,
            status,
            metrics,
            requests,
            loop_beat,
            _stop: stop,
        }
    }

    /// The writable-time header of a `/healthz` answer, if any.
    async fn writable_header(url: &str) -> Option<String> {
        let url = url.to_string();
        tokio::task::spawn_blocking(move || {
            let r = ureq::get(&url).call().expect("healthz answers");
            r.header(WRITABLE_MS_HEADER).map(str::to_string)
        })
        .await
        .expect("join")
    }

    /// A real HTTP request through ureq, off the async runtime.
    pub(in crate::api) async fn http(
        method: &'static str,
        url: String,
        body: Option<String>,
    ) -> (u16, String) {
        tokio::task::spawn_blocking(move || {
            let req = ureq::request(method, &url).timeout(Duration::from_secs(20));
            let res = match body {
                Some(b) => req.send_string(&b),
                None => req.call(),
            };
            match res {
                Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
                Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
                Err(e) => panic!("transport error: {e}"),
            }
        })
        .await
        .expect("join")
    }

    /// Raw HTTP/1.0 exchange, the way HAProxy's `option httpchk` talks.
    async fn raw(addr: SocketAddr, request: &'static str) -> String {
        tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            s.write_all(request.as_bytes()).expect("write");
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            out
        })
        .await
        .expect("join")
    }

    #[tokio::test]
    async fn healthz_answers_ok() {
        let h = start().await;
        assert_eq!(
            http("GET", format!("http://{}/healthz", h.addr), None).await,
            (200, "ok\n".into())
        );
    }

    #[test]
    fn a_loop_that_stops_beating_is_reported_stalled() {
        let beat = LoopBeat::new(Duration::from_millis(20));
        assert_eq!(beat.stalled_for(), None);
        std::thread::sleep(Duration::from_millis(40));
        assert!(beat.stalled_for().is_some());
        beat.beat(None);
        assert_eq!(beat.stalled_for(), None);
    }

    #[tokio::test]
    async fn healthz_says_how_long_the_data_node_may_stay_writable() {
        // §6.4.1: the watchdog fences by it if the elector goes quiet first.
        let h = start().await;
        h.loop_beat.beat(Some(Duration::from_secs(5)));
        let resp = writable_header(&format!("http://{}/healthz", h.addr)).await;
        let left: u64 = resp.expect("the writable header").parse().unwrap();
        assert!((4_000..=5_000).contains(&left), "{left}");
        h.loop_beat.beat(None);
        assert_eq!(
            writable_header(&format!("http://{}/healthz", h.addr)).await,
            None
        );
    }

    #[tokio::test]
    async fn primary_check_is_200_only_for_the_unfenced_primary_with_every_method() {
        let h = start().await;
        let url = format!("http://{}/primary", h.addr);
        for m in ["GET", "HEAD", "OPTIONS"] {
            assert_eq!(http(m, url.clone(), None).await.0, 200, "{m}");
        }
        h.status.send_modify(|s| s.fenced = true);
        for m in ["GET", "HEAD", "OPTIONS"] {
            assert_eq!(http(m, url.clone(), None).await.0, 503, "{m} fenced");
        }
        h.status.send_modify(|s| {
            s.fenced = false;
            s.role = Role::Replica;
        });
        assert_eq!(http("GET", url, None).await.0, 503);
    }

    #[tokio::test]
    async fn replica_check_needs_a_reachable_data_node_with_its_link_up() {
        let h = start().await;
        let url = format!("http://{}/replica", h.addr);
        assert_eq!(
            http("GET", url.clone(), None).await.0,
            503,
            "a primary is not a replica"
        );
        h.status.send_modify(|s| {
            s.role = Role::Replica;
            s.data_node.link_up = Some(true);
        });
        for m in ["GET", "HEAD", "OPTIONS"] {
            assert_eq!(http(m, url.clone(), None).await.0, 200, "{m}");
        }
        h.status.send_modify(|s| s.data_node.link_up = Some(false));
        assert_eq!(http("OPTIONS", url.clone(), None).await.0, 503);
        h.status.send_modify(|s| {
            s.data_node.link_up = None;
            s.data_node.reachable = false;
        });
        assert_eq!(http("HEAD", url, None).await.0, 503);
    }

    #[tokio::test]
    async fn haproxy_style_http_1_0_options_check_gets_a_status_line() {
        let h = start().await;
        let reply = raw(h.addr, "OPTIONS /primary HTTP/1.0\r\n\r\n").await;
        assert!(
            reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200"),
            "{reply}"
        );
        h.status.send_modify(|s| s.fenced = true);
        let reply = raw(h.addr, "OPTIONS /primary HTTP/1.0\r\n\r\n").await;
        assert!(reply.contains(" 503 "), "{reply}");
    }

    #[tokio::test]
    async fn status_returns_the_snapshot_with_rejection_counts_from_metrics() {
        let h = start().await;
        h.metrics.message_rejected("replay");
        let (code, body) = http("GET", format!("http://{}/status", h.addr), None).await;
        assert_eq!(code, 200);
        let snap: StatusSnapshot = serde_json::from_str(&body).expect("valid status JSON");
        assert_eq!(snap.node_id, "n1");
        assert_eq!(snap.role, Role::Primary);
        assert_eq!(snap.rejected.get("replay"), Some(&1));
        assert_eq!(snap.rejected.get("bad_tag"), Some(&0));
    }

    #[tokio::test]
    async fn metrics_serves_prometheus_text() {
        let h = start().await;
        let (code, body) = http("GET", format!("http://{}/metrics", h.addr), None).await;
        assert_eq!(code, 200);
        assert!(body.contains("# TYPE elector_epoch gauge\n"));
        assert!(body.contains("elector_role{node=\"n1\",role=\"primary\"} 1\n"));
    }

    #[tokio::test]
    async fn switchover_is_forwarded_to_the_runtime_and_its_outcome_returned() {
        let mut h = start().await;
        let addr = h.addr;
        let runtime = tokio::spawn(async move {
            let req = h.requests.recv().await.expect("request");
            assert_eq!(req.to, "n2");
            assert_eq!(req.timeout, Duration::from_millis(2500));
            let _ = req.reply.send(Ok(
                serde_json::json!({"new_primary": "n2", "epoch": 4, "write_pause_ms": 87}),
            ));
            h
        });
        let (code, body) = http(
            "POST",
            format!("http://{addr}/switchover"),
            Some(r#"{"to":"n2","timeout_ms":2500}"#.into()),
        )
        .await;
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["new_primary"], "n2");
        runtime.await.expect("runtime task");
    }

    #[tokio::test]
    async fn with_auth_on_a_switchover_must_be_signed_with_the_cluster_key() {
        use super::super::request_auth::sign;
        use crate::net::auth::Secret;
        let key = Secret::new("cluster-key");
        let mut h = start_with(Some(Arc::new(RequestVerifier::new(key.clone())))).await;
        let url = format!("http://{}/switchover", h.addr);
        let body = r#"{"to":"n2","timeout_ms":2500}"#;
        let (code, text) = http("POST", url.clone(), Some(body.into())).await;
        assert_eq!(code, 401, "{text}");
        assert!(text.contains("unauthorized"), "{text}");
        assert_eq!(
            h.metrics.rejected_counts().get("api_unauthorized"),
            Some(&1)
        );

        let runtime = tokio::spawn(async move {
            let req = h
                .requests
                .recv()
                .await
                .expect("the signed request reached the runtime");
            let _ = req.reply.send(Ok(serde_json::json!({"new_primary": "n2"})));
        });
        let signed = sign(&key, "POST", "/switchover", unix_ms_now(), body.as_bytes());
        let (code, text) = tokio::task::spawn_blocking(move || {
            match ureq::post(&url)
                .set("authorization", &signed)
                .send_string(body)
            {
                Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
                Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap_or_default()),
                Err(e) => panic!("transport error: {e}"),
            }
        })
        .await
        .expect("join");
        assert_eq!(code, 200, "{text}");
        runtime.await.expect("runtime task");
    }

    #[tokio::test]
    async fn switchover_refusals_map_to_409_and_failures_to_503() {
        let mut h = start().await;
        let url = format!("http://{}/switchover", h.addr);
        let (code, body) = http("POST", url.clone(), Some(r#"{"to":"n9"}"#.into())).await;
        assert_eq!(code, 409);
        assert!(body.contains("unknown_target"), "{body}");

        let (code, _) = http("POST", url.clone(), Some(r#"{"to":"n1"}"#.into())).await;
        assert_eq!(code, 409, "switching over to itself");

        let (code, _) = http("POST", url.clone(), Some("not json".into())).await;
        assert_eq!(code, 400);

        // The runtime times out and rolls back.
        let addr = h.addr;
        let runtime = tokio::spawn(async move {
            let req = h.requests.recv().await.expect("request");
            let _ = req
                .reply
                .send(Err(SwitchoverError::Timeout { timeout_ms: 100 }));
            h
        });
        let (code, body) = http(
            "POST",
            format!("http://{addr}/switchover"),
            Some(r#"{"to":"n3","timeout_ms":100}"#.into()),
        )
        .await;
        assert_eq!(code, 503);
        assert!(body.contains("\"error\": \"timeout\""), "{body}");
        let h = runtime.await.expect("runtime");

        // Not the primary: 409 with a pointer to the primary's API.
        h.status.send_modify(|s| {
            s.role = Role::Replica;
            s.primary = Some("n2".into());
        });
        let (code, body) = http("POST", url, Some(r#"{"to":"n3"}"#.into())).await;
        assert_eq!(code, 409);
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["error"], "not_primary");
        assert_eq!(v["primary"], "n2");
        assert_eq!(v["primary_api"], "n2.example:9300");
    }

    #[tokio::test]
    async fn switchover_with_no_runtime_listening_is_503() {
        let h = start().await;
        let addr = h.addr;
        drop(h.requests);
        let (code, body) = http(
            "POST",
            format!("http://{addr}/switchover"),
            Some(r#"{"to":"n2"}"#.into()),
        )
        .await;
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("unavailable"));
    }
}
