//! The health checks over a real HTTP server on loopback, each check's
//! contract from `docs/interfaces.md` ("Health checks") as one test.

use std::time::Duration;

use super::super::http::tests::{http, primary_snapshot, start, start_full};
use super::super::status::Role;
use super::*;

fn replica_snapshot(lag: Option<u64>) -> StatusSnapshot {
    let mut s = primary_snapshot();
    s.role = Role::Replica;
    s.fenced = true;
    s.primary = Some("n2".into());
    s.data_node.link_up = Some(true);
    s.data_node.lag = lag;
    s
}

async fn code(addr: std::net::SocketAddr, method: &'static str, path: &str) -> u16 {
    http(method, format!("http://{addr}{path}"), None).await.0
}

#[test]
fn a_lag_bound_passes_a_replica_at_or_under_it_and_fails_an_unknown_lag() {
    assert!(replica_within(&replica_snapshot(Some(100)), Some(100)));
    assert!(replica_within(&replica_snapshot(Some(0)), Some(0)));
    assert!(!replica_within(&replica_snapshot(Some(101)), Some(100)));
    assert!(
        !replica_within(&replica_snapshot(None), Some(u64::MAX)),
        "an unknown lag cannot be shown to be within any bound"
    );
    assert!(
        replica_within(&replica_snapshot(None), None),
        "without a bound the lag does not matter"
    );
    assert!(
        !replica_within(&primary_snapshot(), None),
        "a primary is not a replica"
    );
}

#[test]
fn readiness_needs_the_data_node_and_a_quorum_but_not_the_primary_role() {
    let mut s = replica_snapshot(Some(5));
    assert!(ready(&s), "a replica is ready");
    assert!(ready(&primary_snapshot()));
    s.peers.iter_mut().for_each(|p| p.alive = false);
    assert!(!ready(&s), "a node that hears no quorum is not in the mesh");
    s.peers[0].alive = true;
    assert!(ready(&s), "itself and one peer of three is a quorum");
    s.data_node.reachable = false;
    assert!(!ready(&s), "a data node that does not answer");
    s.data_node.kind = "none".into();
    assert!(ready(&s), "a witness has no data node to reach");
}

#[tokio::test]
async fn replica_with_a_lag_bound_routes_by_the_lag_in_the_status() {
    let h = start().await;
    h.status.send_replace(replica_snapshot(Some(500)));
    for m in ["GET", "HEAD", "OPTIONS"] {
        assert_eq!(code(h.addr, m, "/replica?lag=1000").await, 200, "{m}");
        assert_eq!(code(h.addr, m, "/replica?lag=499").await, 503, "{m}");
    }
    assert_eq!(code(h.addr, "GET", "/replica").await, 200);
    assert_eq!(code(h.addr, "GET", "/replica?lag=500").await, 200);
    h.status.send_modify(|s| s.data_node.lag = None);
    assert_eq!(code(h.addr, "GET", "/replica?lag=1000000").await, 503);
    assert_eq!(code(h.addr, "GET", "/replica").await, 200);
}

#[tokio::test]
async fn a_lag_that_is_not_a_number_is_a_bad_request_not_a_pass() {
    let h = start().await;
    h.status.send_replace(replica_snapshot(Some(0)));
    for path in ["/replica?lag=16MB", "/replica?lag=-1", "/read-only?lag=x"] {
        assert_eq!(code(h.addr, "GET", path).await, 400, "{path}");
    }
    assert_eq!(code(h.addr, "GET", "/replica?max_lag=5").await, 400);
}

#[tokio::test]
async fn read_write_is_the_primary_check_under_patronis_name() {
    let h = start().await;
    for m in ["GET", "HEAD", "OPTIONS"] {
        assert_eq!(code(h.addr, m, "/read-write").await, 200, "{m}");
    }
    h.status.send_modify(|s| s.fenced = true);
    assert_eq!(code(h.addr, "GET", "/read-write").await, 503, "fenced");
    h.status.send_replace(replica_snapshot(Some(0)));
    assert_eq!(code(h.addr, "GET", "/read-write").await, 503, "replica");
}

#[tokio::test]
async fn read_only_passes_the_primary_and_replicas_within_the_bound() {
    let h = start().await;
    assert_eq!(code(h.addr, "GET", "/read-only").await, 200, "primary");
    assert_eq!(
        code(h.addr, "GET", "/read-only?lag=0").await,
        200,
        "primary"
    );
    h.status.send_replace(replica_snapshot(Some(10)));
    assert_eq!(code(h.addr, "GET", "/read-only").await, 200);
    assert_eq!(code(h.addr, "GET", "/read-only?lag=10").await, 200);
    assert_eq!(code(h.addr, "GET", "/read-only?lag=9").await, 503);
    h.status.send_modify(|s| s.role = Role::Candidate);
    assert_eq!(
        code(h.addr, "OPTIONS", "/read-only").await,
        503,
        "candidate"
    );
}

#[tokio::test]
async fn liveness_follows_the_loop_and_ignores_the_role_and_the_data_node() {
    let h = start_full(None, Duration::from_millis(200)).await;
    h.status.send_modify(|s| {
        s.data_node.reachable = false;
        s.role = Role::Candidate;
    });
    assert_eq!(code(h.addr, "GET", "/liveness").await, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(code(h.addr, "GET", "/liveness").await, 503, "stalled");
    assert_eq!(code(h.addr, "GET", "/readiness").await, 503, "stalled");
    h.loop_beat.beat(None);
    assert_eq!(code(h.addr, "HEAD", "/liveness").await, 200);
}

#[tokio::test]
async fn readiness_is_served_for_a_replica_and_refused_without_the_data_node() {
    let h = start().await;
    h.status.send_replace(replica_snapshot(None));
    for m in ["GET", "HEAD", "OPTIONS"] {
        assert_eq!(code(h.addr, m, "/readiness").await, 200, "{m}");
    }
    h.status.send_modify(|s| s.data_node.reachable = false);
    assert_eq!(code(h.addr, "GET", "/readiness").await, 503);
}
