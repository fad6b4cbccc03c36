//! The replication gate: replicas reach this node's data node only through
//! its elector (docs/protocol.md §6.10).
//!
//! kevy 7 replicas reconnect on their own, within ~250 ms, to whatever
//! process holds their upstream's address, and full-sync from it, even from
//! a kevy that was restarted empty a moment ago as a "replica of nowhere"
//! (it keeps a replication listener and serves snapshots). No elector can
//! win that race by reacting faster; so the address replicas are given is
//! not the data node's but this gate's, and the gate forwards a connection
//! only:
//! - while the adapter has validated the data node as a serving primary of
//!   the current incarnation (its primary target applied for the
//!   generation the core decided on), and
//! - after its own connect to the data node, when a `PING` on the tether
//!   (`tether.rs`) shows the incarnation that was validated still alive:
//!   a process that restarted before that connect (at any gap, with any
//!   PID) has a dead tether, so nothing it would serve reaches a replica.
//!
//! Everything else is closed at once: the replica keeps its data and keeps
//! retrying, and the cluster decides (a primary whose data node restarted
//! resigns, §6.8). When the gate closes (a demotion, a new incarnation) every
//! forwarded connection is cut. The gate is a byte pump, protocol-blind, so
//! it serves kevy's replication port and Redis's `PSYNC` alike.

use super::tether::Tether;
use crate::core::{DataNodeTarget, Observation};
use prometheus_client::metrics::counter::Counter;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The incarnation replicas may reach now, or `None`: closed.
pub type GateState = Option<u64>;

/// Whether a round's outcome opens the gate (§6.10): the round's target
/// (`seq`, chosen by the core for data-node `generation`) serves replicas
/// and was carried out on the generation it was chosen for. The shell and
/// the simulator both ask this.
pub fn opens(target: &DataNodeTarget, seq: u64, generation: u64, obs: &Observation) -> bool {
    matches!(
        target,
        DataNodeTarget::Primary | DataNodeTarget::FencedPrimary | DataNodeTarget::HandingOver
    ) && obs.reachable
        && obs.applied_seq == seq
        && obs.generation == generation
}

/// How long the gate waits for its own connect to the data node.
const FORWARD_CONNECT_TIMEOUT: Duration = Duration::from_millis(1_000);

/// Connections let through and turned away (`/metrics`:
/// `elector_replication_gate_forwarded_total`, `..._refused_total`).
#[derive(Debug, Default)]
pub struct GateCounts {
    pub forwarded: Counter,
    pub refused: Counter,
}

/// Serves `listener` until the task is dropped: each connection is
/// forwarded to `forward` (the data node's own replication address) under
/// the rules above.
pub async fn serve(
    listener: TcpListener,
    forward: String,
    tether: Arc<Tether>,
    state: watch::Receiver<GateState>,
    counts: Arc<GateCounts>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "replication gate: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (forward, tether, state, counts) = (
            forward.clone(),
            Arc::clone(&tether),
            state.clone(),
            Arc::clone(&counts),
        );
        tokio::spawn(async move {
            match admit(&forward, &tether, &state).await {
                Ok((upstream, incarnation)) => {
                    counts.forwarded.inc();
                    tracing::debug!(%peer, incarnation, "replication gate: replica forwarded");
                    pump(stream, upstream, incarnation, state).await;
                }
                Err(why) => {
                    counts.refused.inc();
                    tracing::info!(%peer, why, "replication gate: replica refused");
                    let mut stream = stream;
                    let _ = stream.shutdown().await;
                }
            }
        });
    }
}

/// Decides on one replica connection: the upstream connection to forward
/// to, or why not.
async fn admit(
    forward: &str,
    tether: &Tether,
    state: &watch::Receiver<GateState>,
) -> Result<(TcpStream, u64), &'static str> {
    let Some(incarnation) = *state.borrow() else {
        return Err("not a validated primary");
    };
    let upstream = tokio::time::timeout(FORWARD_CONNECT_TIMEOUT, TcpStream::connect(forward))
        .await
        .map_err(|_| "connect to the data node timed out")?
        .map_err(|_| "the data node refused the connect")?;
    // After the connect: the process that accepted it is the validated one
    // only if that one is still alive now (§6.10).
    if !tether.verify(incarnation).await {
        return Err("the data node is not the validated process");
    }
    if *state.borrow() != Some(incarnation) {
        return Err("closed meanwhile");
    }
    let _ = upstream.set_nodelay(true);
    Ok((upstream, incarnation))
}

/// Copies both ways until either side closes or the gate stops admitting
/// `incarnation`.
async fn pump(
    mut replica: TcpStream,
    mut upstream: TcpStream,
    incarnation: u64,
    mut state: watch::Receiver<GateState>,
) {
    let closed = async {
        loop {
            if state.changed().await.is_err() {
                return;
            }
            if *state.borrow() != Some(incarnation) {
                return;
            }
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut replica, &mut upstream) => {}
        _ = closed => {
            tracing::info!(incarnation, "replication gate: closed, cutting a forwarded replica");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datanode::Credentials;
    use tokio::io::AsyncReadExt;

    async fn gate(state: GateState, forward: String) -> (String, watch::Sender<GateState>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, rx) = watch::channel(state);
        let tether = Arc::new(Tether::new("127.0.0.1:1", &Credentials::default()));
        tokio::spawn(serve(
            listener,
            forward,
            tether,
            rx,
            Arc::new(GateCounts::default()),
        ));
        (addr, tx)
    }

    #[tokio::test]
    async fn a_closed_gate_closes_every_connection_without_a_byte() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let forward = upstream.local_addr().unwrap().to_string();
        let (addr, _tx) = gate(None, forward).await;
        let mut c = TcpStream::connect(&addr).await.unwrap();
        let mut buf = [0u8; 8];
        let n = tokio::time::timeout(Duration::from_secs(2), c.read(&mut buf))
            .await
            .expect("closed promptly")
            .unwrap_or(0);
        assert_eq!(n, 0);
    }

    #[tokio::test]
    async fn an_open_gate_whose_tether_is_dead_forwards_nothing() {
        // The tether here never connected: no incarnation is alive, so even
        // an open gate refuses (the data node cannot be shown to be the
        // process that was validated).
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let forward = upstream.local_addr().unwrap().to_string();
        let (addr, _tx) = gate(Some(1), forward).await;
        let mut c = TcpStream::connect(&addr).await.unwrap();
        let mut buf = [0u8; 8];
        let n = tokio::time::timeout(Duration::from_secs(3), c.read(&mut buf))
            .await
            .expect("closed promptly")
            .unwrap_or(0);
        assert_eq!(n, 0);
    }
}
