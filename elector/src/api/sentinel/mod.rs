//! A Redis Sentinel-compatible RESP listener (`listen.sentinel`).
//!
//! Sentinel-aware clients find the primary by asking a sentinel. Answering the
//! same questions from the elector's own view lets them follow elector
//! failovers with no code change: point them at the electors' sentinel ports
//! instead of at redis-sentinel processes.
//!
//! Which clients do, through a primary kill, with 0 acknowledged writes lost,
//! is measured by `just clients` (docs/clients.md: redis-py 8 sync and
//! asyncio, valkey-py, the `redis` crate's async `SentinelClient`, go-redis v5,
//! redigo with FZambia/sentinel, redis-rb 4, phpredis' `RedisSentinel`,
//! Redis.pm), side by side with real Redis Sentinel. Jedis and Lettuce are not
//! run here (their registry is out of reach); docs/clients.md lists the
//! commands they send, each answered below.
//!
//! What those clients ask, and therefore what this answers faithfully:
//! - `SENTINEL MASTERS` (entry `name`, `ip`, `port`, `flags` without
//!   `s_down`/`o_down`, `num-other-sentinels`), then `ROLE` on the data node
//!   itself: the `redis` crate, redis-py, valkey-py;
//! - `SENTINEL get-master-addr-by-name`: go-redis, redigo's helper, redis-rb,
//!   phpredis, Redis.pm, Jedis, Lettuce; `SENTINEL sentinels` (go-redis,
//!   Redis.pm), `SENTINEL SLAVES`/`replicas` for replicas;
//! - a subscription to `+switch-master` (go-redis, Jedis; Lettuce with
//!   `PSUBSCRIBE *`), published here whenever the primary's address changes.
//!
//! Entries are flat field/value arrays of bulk strings, as real Sentinel
//! sends them. Run ids are derived from node ids (first 40 hex digits of a
//! SHA-256), so they are stable across restarts and equal on every elector.
//!
//! When no primary is known (an election is under way),
//! `get-master-addr-by-name` answers nil and `SENTINEL MASTERS` lists the last
//! known address flagged `s_down,o_down`, so clients retry rather than write to
//! a node that may be fenced.
//!
//! Both RESP2 and RESP3 are spoken: a client that sends `HELLO 3` (redis-py 8
//! does by default, so does Lettuce) gets maps, nulls and pushes in RESP3
//! form; everyone else gets RESP2.
//!
//! Requests are parsed with the election transport's bounded RESP2 decoder
//! (`crate::net::codec`): arrays of bulk strings only, no inline commands. A frame
//! it rejects gets `-ERR Protocol error` and closes that connection; nothing
//! else is affected. Commands that would change Sentinel's configuration
//! (`SENTINEL FAILOVER`, `SET`, `MONITOR`, ...) are refused: the election
//! protocol owns failover (`elector switchover` is the planned handover).
//!
//! The listener is laid out like tokio's mini-redis: [`reply`] is the codec
//! (replies, written in RESP2 or RESP3 by the `redis-protocol` crate),
//! [`connection`] the per-client loop (framing, pipelining, write timeout,
//! event delivery), [`commands`] what each command answers, [`pubsub`] the
//! events and subscriptions, [`glob`] the `PSUBSCRIBE` patterns. This file
//! holds the view the runtime publishes and the accept loop.

mod commands;
mod connection;
mod glob;
mod pubsub;
mod reply;

use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::tls::server::ServerTls;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch, Semaphore};

use self::pubsub::Event;

/// Connections served at once; more wait in the kernel's backlog.
const MAX_CLIENTS: usize = 1024;
/// Events buffered per subscriber before it starts missing some.
const EVENT_BUFFER: usize = 64;

/// A node as clients should reach it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct NodeAddr {
    pub(crate) id: String,
    pub(crate) host: String,
    /// Data node client port.
    pub(crate) port: u16,
}

/// The elector's view of the cluster, as Sentinel would describe it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterView {
    /// The Sentinel master name (`cluster_name`, default `mymaster`).
    pub master_name: String,
    pub(crate) epoch: u64,
    /// The current writable primary, if any.
    pub(crate) primary: Option<NodeAddr>,
    /// Every other data node, with whether it is up and replicating.
    pub(crate) replicas: Vec<(NodeAddr, bool)>,
    /// Other electors' Sentinel-compatible listeners (`SENTINEL sentinels`,
    /// `num-other-sentinels`); may be empty.
    pub(crate) sentinels: Vec<NodeAddr>,
    pub(crate) quorum: usize,
    pub(crate) down_after_ms: u64,
}

/// Stable 40-hex-digit run id for a node id.
fn run_id(node_id: &str) -> String {
    let digest = Sha256::digest(format!("elector-run-id:{node_id}").as_bytes());
    let mut s = String::with_capacity(40);
    for b in &digest[..20] {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// State shared by every connection.
struct Shared {
    node_id: String,
    my_run_id: String,
    port: u16,
    view: watch::Receiver<ClusterView>,
    /// Last primary seen, kept across elections for `SENTINEL MASTERS`.
    last_primary: Mutex<Option<NodeAddr>>,
    events: broadcast::Sender<Event>,
    next_client_id: AtomicU64,
    connected: AtomicU64,
}

impl Shared {
    fn last_primary(&self) -> Option<NodeAddr> {
        self.last_primary
            .lock()
            // A poisoned lock only means a thread panicked while replacing
            // the address; the value is still whole.
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records `primary` as the last one seen; returns the one before.
    fn remember_primary(&self, primary: NodeAddr) -> Option<NodeAddr> {
        self.last_primary
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(primary)
    }
}

/// Serves Sentinel clients on `listener` until `shutdown` completes. `node_id`
/// is this elector's id (its `SENTINEL myid` is derived from it).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    node_id: String,
    view: watch::Receiver<ClusterView>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let (events, _) = broadcast::channel(EVENT_BUFFER);
    let initial_primary = view.borrow().primary.clone();
    let shared = Arc::new(Shared {
        my_run_id: run_id(&node_id),
        node_id,
        port,
        last_primary: Mutex::new(initial_primary),
        view,
        events,
        next_client_id: AtomicU64::new(1),
        connected: AtomicU64::new(0),
    });
    tracing::info!(port, tls = tls.is_some(), "Sentinel-compatible listener up");
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(pubsub::publish_changes(
        Arc::clone(&shared),
        stop_rx.clone(),
    ));
    let limit = Arc::new(Semaphore::new(MAX_CLIENTS));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = Arc::clone(&limit).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let shared = Arc::clone(&shared);
                let stop = stop_rx.clone();
                let acceptor = tls.as_ref().map(|t| t.acceptor());
                tokio::spawn(async move {
                    shared.connected.fetch_add(1, Ordering::Relaxed);
                    let served = match acceptor {
                        None => connection::serve(stream, &shared, stop).await,
                        Some(acceptor) => {
                            match crate::api::https::handshake(&acceptor, stream).await {
                                Ok(tls) => connection::serve(tls, &shared, stop).await,
                                Err(e) => Err(e),
                            }
                        }
                    };
                    if let Err(e) = served {
                        tracing::debug!(%peer, error = %e, "sentinel client connection ended");
                    }
                    shared.connected.fetch_sub(1, Ordering::Relaxed);
                    drop(permit);
                });
            }
            Err(e) => {
                // Usually EMFILE; back off instead of spinning.
                tracing::warn!(error = %e, "sentinel accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let _ = stop_tx.send(true);
    Ok(())
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
