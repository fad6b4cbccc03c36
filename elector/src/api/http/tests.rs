//! Tests of the HTTP API: routes, status codes and the switchover endpoint.

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
            eligible: Some(true),
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
        accept_data_loss: tokio::sync::mpsc::channel(1).0,
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

/// `elector_watchdog_last_probe_timestamp_seconds` from a scrape.
async fn last_watchdog_probe(addr: SocketAddr) -> f64 {
    let (_, text) = http("GET", format!("http://{addr}/metrics"), None).await;
    text.lines()
        .find_map(|l| l.strip_prefix("elector_watchdog_last_probe_timestamp_seconds{node=\"n1\"} "))
        .expect("the watchdog probe gauge is exported")
        .parse()
        .expect("a number")
}

#[tokio::test]
async fn a_healthz_poll_from_the_watchdogs_client_is_stamped_and_a_curl_health_check_is_not() {
    let h = start().await;
    h.metrics.set_limits(crate::api::metrics::Limits {
        fence_budget: Duration::from_millis(300),
        max_lag: 1,
        watchdog_clamps: Some(std::path::PathBuf::from("/nonexistent/watchdog-clamps")),
    });
    assert_eq!(last_watchdog_probe(h.addr).await, 0.0, "no probe yet");
    assert_eq!(watchdog_in_status(h.addr).await, (false, None));
    // Docker's health check: curl. It must not count as a live watchdog.
    let curl = raw(
        h.addr,
        "GET /healthz HTTP/1.0\r\nUser-Agent: curl/7.88.1\r\n\r\n",
    )
    .await;
    assert!(curl.starts_with("HTTP/1.0 200"), "{curl}");
    assert_eq!(
        last_watchdog_probe(h.addr).await,
        0.0,
        "curl is not the watchdog"
    );
    // The watchdog's own client: a default ureq agent, as in watchdog.rs.
    let url = format!("http://{}/healthz", h.addr);
    tokio::task::spawn_blocking(move || {
        ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(5))
            .build()
            .get(&url)
            .call()
            .expect("healthz answers")
    })
    .await
    .expect("join");
    let now = crate::net::auth::unix_ms_now() as f64 / 1000.0;
    let stamped = last_watchdog_probe(h.addr).await;
    assert!((now - stamped).abs() < 5.0, "stamped {stamped}, now {now}");
    let (live, ago) = watchdog_in_status(h.addr).await;
    assert!(live && ago.is_some_and(|a| a < 5_000), "{live} {ago:?}");
}

/// `/status`'s `watchdog`: (`live`, `last_probe_ms_ago`).
async fn watchdog_in_status(addr: SocketAddr) -> (bool, Option<u64>) {
    let (_, body) = http("GET", format!("http://{addr}/status"), None).await;
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let w = &v["watchdog"];
    (
        w["live"]
            .as_bool()
            .expect("a node with a data node shows its watchdog"),
        w["last_probe_ms_ago"].as_u64(),
    )
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
