//! A Redis Sentinel-compatible RESP listener (`listen.sentinel`).
//!
//! Sentinel-aware clients (the `redis` crate's `sentinel` feature, redis-py's
//! `Sentinel`, Jedis' `JedisSentinelPool`, Lettuce) find the primary by asking
//! a sentinel. Answering the same questions from the elector's own view lets
//! them follow elector failovers with no code change: point them at the
//! electors' sentinel ports instead of at redis-sentinel processes.
//!
//! What clients actually ask, and therefore what this answers faithfully:
//! - the `redis` crate: `SENTINEL MASTERS` (entry `name`, `ip`, `port`,
//!   `flags` without `s_down`/`o_down`), then `ROLE` on the data node itself;
//!   `SENTINEL SLAVES <name>` for replicas;
//! - redis-py: `SENTINEL MASTERS` (also `num-other-sentinels`), `SENTINEL
//!   SLAVES`; Jedis: `SENTINEL get-master-addr-by-name` plus a subscription to
//!   `+switch-master`, published here whenever the primary's address changes.
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

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch, Semaphore};

/// Connections served at once; more wait in the kernel's backlog.
const MAX_CLIENTS: usize = 1024;
/// A client that does not take its replies within this time is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Events buffered per subscriber before it starts missing some.
const EVENT_BUFFER: usize = 64;
/// Reported as `redis_version`; clients gate features on it.
const REPORTED_VERSION: &str = "7.0.0";

/// A node as clients should reach it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeAddr {
    pub id: String,
    pub host: String,
    /// Data node client port.
    pub port: u16,
}

/// The elector's view of the cluster, as Sentinel would describe it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterView {
    /// The Sentinel master name (`cluster_name`, default `mymaster`).
    pub master_name: String,
    pub epoch: u64,
    /// The current writable primary, if any.
    pub primary: Option<NodeAddr>,
    /// Every other data node, with whether it is up and replicating.
    pub replicas: Vec<(NodeAddr, bool)>,
    /// Other electors' Sentinel-compatible listeners (`SENTINEL sentinels`,
    /// `num-other-sentinels`); may be empty.
    pub sentinels: Vec<NodeAddr>,
    pub quorum: usize,
    pub down_after_ms: u64,
}

/// Stable 40-hex-digit run id for a node id.
pub fn run_id(node_id: &str) -> String {
    let digest = Sha256::digest(format!("elector-run-id:{node_id}").as_bytes());
    let mut s = String::with_capacity(40);
    for b in &digest[..20] {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// One RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// Null bulk string (`$-1` in RESP2).
    Nil,
    /// Null array (`*-1` in RESP2).
    NilArray,
    Array(Vec<Reply>),
    /// A map: `%` in RESP3, a flat key/value array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// Out-of-band data (pub/sub): `>` in RESP3, an array in RESP2.
    Push(Vec<Reply>),
}

impl Reply {
    fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    fn bulk(s: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(s.as_ref().to_vec())
    }

    fn err(s: impl Into<String>) -> Reply {
        Reply::Error(s.into())
    }

    /// A field/value map of bulk strings (Sentinel's instance entries).
    fn fields(pairs: &[(&str, String)]) -> Reply {
        Reply::Map(
            pairs
                .iter()
                .map(|(k, v)| (Reply::bulk(k), Reply::bulk(v)))
                .collect(),
        )
    }

    /// Encodes for protocol version `proto` (2 or 3, chosen by `HELLO`).
    fn encode(&self, out: &mut Vec<u8>, proto: u8) {
        let resp3 = proto >= 3;
        match self {
            // Simple strings and errors must not contain CR or LF.
            Reply::Simple(s) => {
                out.push(b'+');
                out.extend(s.bytes().filter(|b| *b != b'\r' && *b != b'\n'));
                out.extend_from_slice(b"\r\n");
            }
            Reply::Error(s) => {
                out.push(b'-');
                out.extend(s.bytes().filter(|b| *b != b'\r' && *b != b'\n'));
                out.extend_from_slice(b"\r\n");
            }
            Reply::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
            Reply::Bulk(b) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Nil | Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) | Reply::Push(items) => {
                let marker = if resp3 && matches!(self, Reply::Push(_)) {
                    '>'
                } else {
                    '*'
                };
                out.extend_from_slice(format!("{marker}{}\r\n", items.len()).as_bytes());
                for i in items {
                    i.encode(out, proto);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    out.extend_from_slice(format!("%{}\r\n", pairs.len()).as_bytes());
                } else {
                    out.extend_from_slice(format!("*{}\r\n", pairs.len() * 2).as_bytes());
                }
                for (k, v) in pairs {
                    k.encode(out, proto);
                    v.encode(out, proto);
                }
            }
        }
    }
}

/// A pub/sub event (`+switch-master`, `+new-epoch`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Event {
    channel: String,
    payload: String,
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
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Serves Sentinel clients on `listener` until `shutdown` completes. `node_id`
/// is this elector's id (its `SENTINEL myid` is derived from it).
pub async fn serve(
    listener: TcpListener,
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
    tracing::info!(port, "Sentinel-compatible listener up");
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(publish_changes(Arc::clone(&shared), stop_rx.clone()));
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
                let shared = Arc::clone(&shared);
                let stop = stop_rx.clone();
                tokio::spawn(async move {
                    shared.connected.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = connection(stream, &shared, stop).await {
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

/// Publishes `+switch-master` when the primary's address changes (and
/// `+new-epoch` when the epoch moves), like Sentinel after a failover.
async fn publish_changes(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut view = shared.view.clone();
    let mut epoch = view.borrow().epoch;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            changed = view.changed() => if changed.is_err() { return },
        }
        let current = view.borrow_and_update().clone();
        if current.epoch != epoch {
            epoch = current.epoch;
            let _ = shared.events.send(Event {
                channel: "+new-epoch".into(),
                payload: epoch.to_string(),
            });
        }
        let Some(new) = current.primary else { continue };
        let old = {
            let mut last = shared
                .last_primary
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            last.replace(new.clone())
        };
        match old {
            Some(old) if (old.host.as_str(), old.port) != (new.host.as_str(), new.port) => {
                let payload = format!(
                    "{} {} {} {} {}",
                    current.master_name, old.host, old.port, new.host, new.port
                );
                tracing::info!(%payload, "publishing +switch-master");
                let _ = shared.events.send(Event {
                    channel: "+switch-master".into(),
                    payload,
                });
            }
            _ => {}
        }
    }
}

/// Per-connection pub/sub state.
#[derive(Default)]
struct Subscriptions {
    channels: BTreeSet<Vec<u8>>,
    patterns: BTreeSet<Vec<u8>>,
    rx: Option<broadcast::Receiver<Event>>,
}

impl Subscriptions {
    fn count(&self) -> i64 {
        (self.channels.len() + self.patterns.len()) as i64
    }

    fn active(&self) -> bool {
        self.count() > 0
    }
}

async fn recv_event(rx: &mut Option<broadcast::Receiver<Event>>) -> Option<Event> {
    let Some(rx) = rx.as_mut() else {
        return std::future::pending().await;
    };
    loop {
        match rx.recv().await {
            Ok(e) => return Some(e),
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return None,
        }
    }
}

async fn write(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(bytes)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "client is not reading its replies",
        )),
    }
}

async fn connection(
    mut stream: TcpStream,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let client_id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let limits = crate::net::codec::Limits::default();
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut subs = Subscriptions::default();
    let mut name: Option<Vec<u8>> = None;
    // RESP2 until the client says `HELLO 3` (redis-py 8 and Lettuce do).
    let mut proto: u8 = 2;
    loop {
        // Answer every complete request already buffered (pipelining).
        let mut out = Vec::new();
        let mut quit = false;
        loop {
            match crate::net::codec::decode(&buf, &limits) {
                Ok(Some((fields, used))) => {
                    buf.drain(..used);
                    let (reply, close) =
                        command(&fields, shared, client_id, &mut subs, &mut name, &mut proto);
                    for r in reply {
                        r.encode(&mut out, proto);
                    }
                    if close {
                        quit = true;
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    Reply::err(format!("ERR Protocol error: {e}")).encode(&mut out, proto);
                    write(&mut stream, &out).await?;
                    return Ok(());
                }
            }
        }
        if !out.is_empty() {
            write(&mut stream, &out).await?;
        }
        if quit {
            return Ok(());
        }
        tokio::select! {
            n = stream.read_buf(&mut buf) => {
                if n? == 0 {
                    return Ok(());
                }
            }
            ev = recv_event(&mut subs.rx) => {
                let Some(ev) = ev else { return Ok(()) };
                let mut out = Vec::new();
                for r in deliveries(&ev, &subs) {
                    r.encode(&mut out, proto);
                }
                if !out.is_empty() {
                    write(&mut stream, &out).await?;
                }
            }
            _ = stop.changed() => return Ok(()),
        }
    }
}

/// Messages for `ev` on this connection: one per matching channel and pattern.
fn deliveries(ev: &Event, subs: &Subscriptions) -> Vec<Reply> {
    let mut out = Vec::new();
    if subs.channels.contains(ev.channel.as_bytes()) {
        out.push(Reply::Push(vec![
            Reply::bulk("message"),
            Reply::bulk(&ev.channel),
            Reply::bulk(&ev.payload),
        ]));
    }
    for p in &subs.patterns {
        if glob_match(p, ev.channel.as_bytes()) {
            out.push(Reply::Push(vec![
                Reply::bulk("pmessage"),
                Reply::bulk(p),
                Reply::bulk(&ev.channel),
                Reply::bulk(&ev.payload),
            ]));
        }
    }
    out
}

fn lower(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_lowercase()
}

/// Handles one request; returns its replies (several for `SUBSCRIBE a b`) and
/// whether to close the connection afterwards.
fn command(
    fields: &[Vec<u8>],
    shared: &Shared,
    client_id: u64,
    subs: &mut Subscriptions,
    name: &mut Option<Vec<u8>>,
    proto: &mut u8,
) -> (Vec<Reply>, bool) {
    let Some(first) = fields.first() else {
        return (vec![Reply::err("ERR empty command")], false);
    };
    let cmd = lower(first);
    let args = &fields[1..];
    let one = |r: Reply| (vec![r], false);

    // RESP2 restricts a subscribed connection; RESP3 multiplexes replies and
    // pushes, so any command is allowed there (as in Redis 7).
    if *proto == 2
        && subs.active()
        && !matches!(
            cmd.as_str(),
            "subscribe" | "psubscribe" | "unsubscribe" | "punsubscribe" | "ping" | "quit" | "reset"
        )
    {
        return one(Reply::err(format!(
            "ERR Can't execute '{cmd}': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        )));
    }

    match cmd.as_str() {
        "ping" => {
            if subs.active() && *proto == 2 {
                let msg = args.first().cloned().unwrap_or_default();
                one(Reply::Array(vec![Reply::bulk("pong"), Reply::Bulk(msg)]))
            } else {
                match args.first() {
                    Some(m) => one(Reply::Bulk(m.clone())),
                    None => one(Reply::Simple("PONG".into())),
                }
            }
        }
        "echo" => match args {
            [m] => one(Reply::Bulk(m.clone())),
            _ => one(wrong_args("echo")),
        },
        "quit" => (vec![Reply::ok()], true),
        "reset" => {
            *subs = Subscriptions::default();
            *name = None;
            *proto = 2;
            one(Reply::Simple("RESET".into()))
        }
        "hello" => hello(args, client_id, name, proto),
        "auth" => one(Reply::err(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        )),
        "client" => one(client(args, client_id, name)),
        "command" => one(Reply::Array(Vec::new())),
        "info" => one(Reply::Bulk(info(shared).into_bytes())),
        "role" => {
            let view = shared.view.borrow();
            one(Reply::Array(vec![
                Reply::bulk("sentinel"),
                Reply::Array(vec![Reply::bulk(&view.master_name)]),
            ]))
        }
        "sentinel" => one(sentinel(args, shared)),
        "subscribe" | "psubscribe" => {
            if args.is_empty() {
                return one(wrong_args(&cmd));
            }
            if subs.rx.is_none() {
                subs.rx = Some(shared.events.subscribe());
            }
            let mut replies = Vec::new();
            for a in args {
                if cmd == "subscribe" {
                    subs.channels.insert(a.clone());
                } else {
                    subs.patterns.insert(a.clone());
                }
                replies.push(Reply::Push(vec![
                    Reply::bulk(&cmd),
                    Reply::Bulk(a.clone()),
                    Reply::Int(subs.count()),
                ]));
            }
            (replies, false)
        }
        "unsubscribe" | "punsubscribe" => {
            let set = if cmd == "unsubscribe" {
                &mut subs.channels
            } else {
                &mut subs.patterns
            };
            let targets: Vec<Vec<u8>> = if args.is_empty() {
                set.iter().cloned().collect()
            } else {
                args.to_vec()
            };
            let mut replies = Vec::new();
            for t in &targets {
                let set = if cmd == "unsubscribe" {
                    &mut subs.channels
                } else {
                    &mut subs.patterns
                };
                set.remove(t);
                replies.push(Reply::Push(vec![
                    Reply::bulk(&cmd),
                    Reply::Bulk(t.clone()),
                    Reply::Int(subs.count()),
                ]));
            }
            if targets.is_empty() {
                replies.push(Reply::Push(vec![Reply::bulk(&cmd), Reply::Nil, Reply::Int(subs.count())]));
            }
            if !subs.active() {
                subs.rx = None;
            }
            (replies, false)
        }
        _ => {
            let shown: Vec<String> = args
                .iter()
                .take(3)
                .map(|a| format!("'{}'", String::from_utf8_lossy(a)))
                .collect();
            one(Reply::err(format!(
                "ERR unknown command '{}', with args beginning with: {}",
                String::from_utf8_lossy(first),
                shown.join(" ")
            )))
        }
    }
}

fn wrong_args(cmd: &str) -> Reply {
    Reply::err(format!("ERR wrong number of arguments for '{cmd}' command"))
}

/// `HELLO [protover [AUTH u p] [SETNAME n]]`: RESP2 and RESP3. The reply
/// is encoded in the protocol just chosen, as Redis does.
fn hello(
    args: &[Vec<u8>],
    client_id: u64,
    name: &mut Option<Vec<u8>>,
    proto: &mut u8,
) -> (Vec<Reply>, bool) {
    let chosen = match args.first().map(Vec::as_slice) {
        None => *proto,
        Some(b"2") => 2,
        Some(b"3") => 3,
        Some(_) => {
            return (
                vec![Reply::err(
                    "NOPROTO sorry, this protocol version is not supported",
                )],
                false,
            )
        }
    };
    let mut i = 1;
    let mut new_name = None;
    while i < args.len() {
        match lower(&args[i]).as_str() {
            "auth" if i + 2 < args.len() => i += 3,
            "setname" if i + 1 < args.len() => {
                new_name = Some(args[i + 1].clone());
                i += 2;
            }
            _ => return (vec![Reply::err("ERR Syntax error in HELLO option")], false),
        }
    }
    if new_name.is_some() {
        *name = new_name;
    }
    *proto = chosen;
    let pairs = vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(REPORTED_VERSION)),
        (Reply::bulk("proto"), Reply::Int(i64::from(chosen))),
        (Reply::bulk("id"), Reply::Int(client_id as i64)),
        (Reply::bulk("mode"), Reply::bulk("sentinel")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(Vec::new())),
    ];
    (vec![Reply::Map(pairs)], false)
}

fn client(args: &[Vec<u8>], client_id: u64, name: &mut Option<Vec<u8>>) -> Reply {
    let Some(sub) = args.first() else {
        return wrong_args("client");
    };
    match lower(sub).as_str() {
        "setname" => match args.get(1) {
            Some(n) => {
                *name = Some(n.clone());
                Reply::ok()
            }
            None => wrong_args("client|setname"),
        },
        "getname" => name.clone().map(Reply::Bulk).unwrap_or(Reply::Nil),
        "setinfo" => Reply::ok(),
        "id" => Reply::Int(client_id as i64),
        other => Reply::err(format!(
            "ERR unknown subcommand '{other}'. Try CLIENT HELP."
        )),
    }
}

fn info(shared: &Shared) -> String {
    let view = shared.view.borrow();
    let (status, addr) = match (&view.primary, shared.last_primary()) {
        (Some(p), _) => ("ok", format!("{}:{}", p.host, p.port)),
        (None, Some(p)) => ("odown", format!("{}:{}", p.host, p.port)),
        (None, None) => ("odown", "0.0.0.0:0".to_string()),
    };
    format!(
        "# Server\r\nredis_version:{REPORTED_VERSION}\r\nredis_mode:sentinel\r\nrun_id:{}\r\ntcp_port:{}\r\n\
         elector_node_id:{}\r\n\r\n# Clients\r\nconnected_clients:{}\r\n\r\n# Sentinel\r\nsentinel_masters:1\r\n\
         sentinel_tilt:0\r\nsentinel_tilt_since_seconds:-1\r\nsentinel_running_scripts:0\r\n\
         sentinel_scripts_queue_length:0\r\nsentinel_simulate_failure_flags:0\r\n\
         master0:name={},status={status},address={addr},slaves={},sentinels={}\r\n",
        shared.my_run_id,
        shared.port,
        shared.node_id,
        shared.connected.load(Ordering::Relaxed),
        view.master_name,
        view.replicas.len(),
        view.sentinels.len() + 1,
    )
}

fn sentinel(args: &[Vec<u8>], shared: &Shared) -> Reply {
    let Some(sub) = args.first() else {
        return wrong_args("sentinel");
    };
    let sub = lower(sub);
    let view = shared.view.borrow().clone();
    let named = |i: usize| -> Result<(), Reply> {
        match args.get(i) {
            None => Err(wrong_args(&format!("sentinel|{sub}"))),
            Some(n) if n.as_slice() == view.master_name.as_bytes() => Ok(()),
            Some(_) => Err(Reply::err("ERR No such master with that name")),
        }
    };
    match sub.as_str() {
        "get-master-addr-by-name" => match (args.get(1), &view.primary) {
            (Some(n), Some(p)) if n.as_slice() == view.master_name.as_bytes() => {
                Reply::Array(vec![Reply::bulk(&p.host), Reply::bulk(p.port.to_string())])
            }
            (Some(_), _) => Reply::NilArray,
            (None, _) => wrong_args("sentinel|get-master-addr-by-name"),
        },
        "masters" => Reply::Array(vec![master_entry(&view, shared)]),
        "master" => match named(1) {
            Ok(()) => master_entry(&view, shared),
            Err(e) => e,
        },
        "replicas" | "slaves" => match named(1) {
            Ok(()) => Reply::Array(view.replicas.iter().map(|(r, up)| replica_entry(&view, r, *up)).collect()),
            Err(e) => e,
        },
        "sentinels" => match named(1) {
            Ok(()) => Reply::Array(view.sentinels.iter().map(|s| sentinel_entry(&view, s)).collect()),
            Err(e) => e,
        },
        "myid" => Reply::bulk(&shared.my_run_id),
        "ckquorum" => match named(1) {
            Ok(()) if view.primary.is_some() => Reply::Simple(format!(
                "OK {} usable Sentinels. Quorum and failover authorization can be reached",
                view.sentinels.len() + 1
            )),
            Ok(()) => Reply::err("NOQUORUM no primary is elected right now"),
            Err(e) => e,
        },
        "failover" | "reset" | "set" | "monitor" | "remove" | "flushconfig" | "config" | "is-master-down-by-addr" => {
            Reply::err(format!(
                "ERR SENTINEL {sub} is not supported: failover is decided by the elector quorum; use `elector switchover` for a planned handover"
            ))
        }
        _ => Reply::err(format!("ERR Unknown sentinel subcommand '{sub}'")),
    }
}

fn master_entry(view: &ClusterView, shared: &Shared) -> Reply {
    let (addr, flags) = match (&view.primary, shared.last_primary()) {
        (Some(p), _) => (p.clone(), "master"),
        (None, Some(p)) => (p, "master,s_down,o_down"),
        (None, None) => (
            NodeAddr {
                id: String::new(),
                host: "0.0.0.0".into(),
                port: 0,
            },
            "master,s_down,o_down",
        ),
    };
    let runid = if addr.id.is_empty() {
        String::new()
    } else {
        run_id(&addr.id)
    };
    Reply::fields(&[
        ("name", view.master_name.clone()),
        ("ip", addr.host.clone()),
        ("port", addr.port.to_string()),
        ("runid", runid),
        ("flags", flags.into()),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "0".into()),
        ("last-ping-reply", "0".into()),
        ("down-after-milliseconds", view.down_after_ms.to_string()),
        ("info-refresh", "0".into()),
        ("role-reported", "master".into()),
        ("role-reported-time", "0".into()),
        ("config-epoch", view.epoch.to_string()),
        ("num-slaves", view.replicas.len().to_string()),
        ("num-other-sentinels", view.sentinels.len().to_string()),
        ("quorum", view.quorum.to_string()),
        ("failover-timeout", (view.down_after_ms * 2).to_string()),
        ("parallel-syncs", "1".into()),
    ])
}

fn replica_entry(view: &ClusterView, r: &NodeAddr, up: bool) -> Reply {
    let (mhost, mport) = match &view.primary {
        Some(p) => (p.host.clone(), p.port.to_string()),
        None => ("?".into(), "0".into()),
    };
    Reply::fields(&[
        ("name", format!("{}:{}", r.host, r.port)),
        ("ip", r.host.clone()),
        ("port", r.port.to_string()),
        ("runid", run_id(&r.id)),
        (
            "flags",
            if up {
                "slave".into()
            } else {
                "slave,s_down".into()
            },
        ),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "0".into()),
        ("last-ping-reply", "0".into()),
        ("down-after-milliseconds", view.down_after_ms.to_string()),
        ("info-refresh", "0".into()),
        ("role-reported", "slave".into()),
        ("role-reported-time", "0".into()),
        ("master-link-down-time", "0".into()),
        (
            "master-link-status",
            if up { "ok".into() } else { "err".into() },
        ),
        ("master-host", mhost),
        ("master-port", mport),
        ("slave-priority", "100".into()),
        ("slave-repl-offset", "0".into()),
        ("replica-announced", "1".into()),
    ])
}

fn sentinel_entry(view: &ClusterView, s: &NodeAddr) -> Reply {
    let id = run_id(&s.id);
    Reply::fields(&[
        ("name", id.clone()),
        ("ip", s.host.clone()),
        ("port", s.port.to_string()),
        ("runid", id),
        ("flags", "sentinel".into()),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "0".into()),
        ("last-ping-reply", "0".into()),
        ("down-after-milliseconds", view.down_after_ms.to_string()),
        ("last-hello-message", "0".into()),
        ("voted-leader", "?".into()),
        ("voted-leader-epoch", "0".into()),
    ])
}

/// Redis-style glob (`*`, `?`, `[abc]`, `[a-z]`, `[^x]`, `\x`), linear-time
/// backtracking so a hostile pattern cannot make matching explode.
fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    enum Tok {
        Star,
        Any,
        Lit(u8),
        Class(Vec<(u8, u8)>, bool),
    }
    let mut toks = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'*' => {
                if !matches!(toks.last(), Some(Tok::Star)) {
                    toks.push(Tok::Star);
                }
            }
            b'?' => toks.push(Tok::Any),
            b'\\' if i + 1 < pattern.len() => {
                i += 1;
                toks.push(Tok::Lit(pattern[i]));
            }
            b'[' => {
                let mut j = i + 1;
                let negate = pattern.get(j) == Some(&b'^');
                if negate {
                    j += 1;
                }
                let mut ranges = Vec::new();
                while j < pattern.len() && pattern[j] != b']' {
                    let mut c = pattern[j];
                    if c == b'\\' && j + 1 < pattern.len() {
                        j += 1;
                        c = pattern[j];
                    }
                    if pattern.get(j + 1) == Some(&b'-')
                        && j + 2 < pattern.len()
                        && pattern[j + 2] != b']'
                    {
                        let (a, b) = (c, pattern[j + 2]);
                        ranges.push((a.min(b), a.max(b)));
                        j += 3;
                    } else {
                        ranges.push((c, c));
                        j += 1;
                    }
                }
                toks.push(Tok::Class(ranges, negate));
                i = j; // at ']' or end
            }
            c => toks.push(Tok::Lit(c)),
        }
        i += 1;
    }
    let single = |t: &Tok, c: u8| match t {
        Tok::Any => true,
        Tok::Lit(l) => *l == c,
        Tok::Class(r, neg) => r.iter().any(|(a, b)| (*a..=*b).contains(&c)) != *neg,
        Tok::Star => false,
    };
    let (mut p, mut k) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while k < s.len() {
        if p < toks.len() && matches!(toks[p], Tok::Star) {
            star = Some((p, k));
            p += 1;
        } else if p < toks.len() && single(&toks[p], s[k]) {
            p += 1;
            k += 1;
        } else if let Some((sp, sk)) = star {
            p = sp + 1;
            k = sk + 1;
            star = Some((sp, sk + 1));
        } else {
            return false;
        }
    }
    while p < toks.len() && matches!(toks[p], Tok::Star) {
        p += 1;
    }
    p == toks.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tokio::io::{AsyncBufReadExt, BufReader};

    fn addr(id: &str, port: u16) -> NodeAddr {
        NodeAddr {
            id: id.into(),
            host: "127.0.0.1".into(),
            port,
        }
    }

    fn view(primary: Option<NodeAddr>, replicas: Vec<(NodeAddr, bool)>) -> ClusterView {
        ClusterView {
            master_name: "mymaster".into(),
            epoch: 3,
            primary,
            replicas,
            sentinels: vec![addr("n2", 26402), addr("n3", 26403)],
            quorum: 2,
            down_after_ms: 5000,
        }
    }

    struct Running {
        addr: SocketAddr,
        view: watch::Sender<ClusterView>,
        _stop: tokio::sync::oneshot::Sender<()>,
    }

    async fn start(initial: ClusterView) -> Running {
        let listener = super::super::listen::bind_tcp("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = watch::channel(initial);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, "n1".into(), rx, async {
            let _ = stopped.await;
        }));
        Running {
            addr,
            view: tx,
            _stop: stop,
        }
    }

    /// A stand-in data node: answers `ROLE` as a master (what the `redis`
    /// crate checks after asking the sentinel), `INFO` with its id, and OK to
    /// anything else.
    async fn fake_data_node(id: &'static str) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        while let Ok(Some((fields, used))) =
                            crate::net::codec::decode(&buf, &crate::net::codec::Limits::default())
                        {
                            buf.drain(..used);
                            let reply = match lower(&fields[0]).as_str() {
                                "role" => Reply::Array(vec![
                                    Reply::bulk("master"),
                                    Reply::Int(0),
                                    Reply::Array(vec![]),
                                ]),
                                "info" => Reply::bulk(format!("node:{id}")),
                                _ => Reply::ok(),
                            };
                            let mut out = Vec::new();
                            reply.encode(&mut out, 2);
                            if s.write_all(&out).await.is_err() {
                                return;
                            }
                        }
                        match s.read_buf(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                    }
                });
            }
        });
        port
    }

    /// Sends one command as RESP and reads the raw reply bytes until `done`
    /// says the reply is complete.
    async fn raw(stream: &mut TcpStream, cmd: &[&str]) -> Vec<u8> {
        let fields: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        let mut out = Vec::new();
        crate::net::codec::encode(&fields, &mut out);
        stream.write_all(&out).await.expect("write");
        read_some(stream).await
    }

    async fn read_some(stream: &mut TcpStream) -> Vec<u8> {
        let mut buf = vec![0u8; 65536];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("reply in time")
            .expect("read");
        buf.truncate(n);
        buf
    }

    #[tokio::test]
    async fn raw_resp_ping_and_get_master_addr_by_name() {
        let r = start(view(Some(addr("n1", 6001)), vec![])).await;
        let mut s = TcpStream::connect(r.addr).await.expect("connect");
        assert_eq!(raw(&mut s, &["PING"]).await, b"+PONG\r\n");
        assert_eq!(
            raw(&mut s, &["SENTINEL", "get-master-addr-by-name", "mymaster"]).await,
            b"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6001\r\n"
        );
        assert_eq!(
            raw(&mut s, &["sentinel", "GET-MASTER-ADDR-BY-NAME", "other"]).await,
            b"*-1\r\n"
        );
        r.view.send_modify(|v| v.primary = None);
        assert_eq!(
            raw(&mut s, &["SENTINEL", "get-master-addr-by-name", "mymaster"]).await,
            b"*-1\r\n",
            "no primary during an election"
        );
        let unknown = raw(&mut s, &["FLUSHALL"]).await;
        assert!(
            unknown.starts_with(b"-ERR unknown command 'FLUSHALL'"),
            "{unknown:?}"
        );
        let refused = raw(&mut s, &["SENTINEL", "failover", "mymaster"]).await;
        assert!(refused.starts_with(b"-ERR SENTINEL failover is not supported"));
        let myid = raw(&mut s, &["SENTINEL", "myid"]).await;
        assert_eq!(myid, format!("$40\r\n{}\r\n", run_id("n1")).into_bytes());
    }

    #[tokio::test]
    async fn a_bad_frame_closes_only_its_own_connection() {
        let r = start(view(Some(addr("n1", 6001)), vec![])).await;
        let mut good = TcpStream::connect(r.addr).await.expect("connect");
        let mut bad = TcpStream::connect(r.addr).await.expect("connect");
        bad.write_all(b"*1\r\n$999999999\r\n").await.expect("write");
        let reply = read_some(&mut bad).await;
        assert!(reply.starts_with(b"-ERR Protocol error"), "{reply:?}");
        assert_eq!(read_some(&mut bad).await, b"", "connection closed");
        assert_eq!(raw(&mut good, &["PING"]).await, b"+PONG\r\n");
    }

    #[tokio::test]
    async fn pipelined_requests_are_all_answered_in_order() {
        let r = start(view(Some(addr("n1", 6001)), vec![])).await;
        let mut s = TcpStream::connect(r.addr).await.expect("connect");
        let mut out = Vec::new();
        crate::net::codec::encode(&[b"PING"], &mut out);
        crate::net::codec::encode(&[b"ECHO", b"hi"], &mut out);
        crate::net::codec::encode(&[b"CLIENT", b"SETINFO", b"LIB-NAME", b"x"], &mut out);
        s.write_all(&out).await.expect("write");
        let mut got = Vec::new();
        while got.len() < b"+PONG\r\n$2\r\nhi\r\n+OK\r\n".len() {
            got.extend(read_some(&mut s).await);
        }
        assert_eq!(got, b"+PONG\r\n$2\r\nhi\r\n+OK\r\n");
    }

    #[tokio::test]
    async fn the_redis_crate_sentinel_client_finds_the_primary_and_follows_a_failover() {
        use redis::sentinel::{SentinelClient, SentinelServerType};
        let p1 = fake_data_node("n1").await;
        let p2 = fake_data_node("n2").await;
        let r = start(view(Some(addr("n1", p1)), vec![(addr("n2", p2), true)])).await;
        let url = format!("redis://{}", r.addr);

        let mut client = SentinelClient::build(
            vec![url.clone()],
            "mymaster".into(),
            None,
            SentinelServerType::Master,
        )
        .expect("sentinel client");
        let mut con = client
            .get_async_connection()
            .await
            .expect("resolves the primary");
        let who: String = redis::cmd("INFO")
            .query_async(&mut con)
            .await
            .expect("info");
        assert_eq!(who, "node:n1");

        // Failover: the elector now reports n2 as primary.
        r.view.send_modify(|v| {
            v.epoch = 4;
            v.primary = Some(addr("n2", p2));
            v.replicas = vec![(addr("n1", p1), false)];
        });
        let mut client = SentinelClient::build(
            vec![url],
            "mymaster".into(),
            None,
            SentinelServerType::Master,
        )
        .expect("sentinel client");
        let mut con = client
            .get_async_connection()
            .await
            .expect("resolves the new primary");
        let who: String = redis::cmd("INFO")
            .query_async(&mut con)
            .await
            .expect("info");
        assert_eq!(who, "node:n2");

        // The raw get-master-addr-by-name answer agrees.
        let mut s = TcpStream::connect(r.addr).await.expect("connect");
        let reply = raw(&mut s, &["SENTINEL", "get-master-addr-by-name", "mymaster"]).await;
        assert_eq!(
            reply,
            format!(
                "*2\r\n$9\r\n127.0.0.1\r\n${}\r\n{p2}\r\n",
                p2.to_string().len()
            )
            .into_bytes()
        );
    }

    #[tokio::test]
    async fn masters_and_replicas_entries_carry_the_fields_clients_parse() {
        let r = start(view(
            Some(addr("n1", 6001)),
            vec![(addr("n2", 6002), true), (addr("n3", 6003), false)],
        ))
        .await;
        let client = redis::Client::open(format!("redis://{}", r.addr)).expect("client");
        let mut con = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let masters: Vec<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
            .arg("MASTERS")
            .query_async(&mut con)
            .await
            .expect("masters");
        assert_eq!(masters.len(), 1);
        let m = &masters[0];
        assert_eq!(m["name"], "mymaster");
        assert_eq!(m["ip"], "127.0.0.1");
        assert_eq!(m["port"], "6001");
        assert_eq!(m["flags"], "master");
        assert_eq!(m["config-epoch"], "3");
        assert_eq!(m["num-slaves"], "2");
        assert_eq!(m["num-other-sentinels"], "2");
        assert_eq!(m["quorum"], "2");

        let replicas: Vec<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
            .arg("SLAVES")
            .arg("mymaster")
            .query_async(&mut con)
            .await
            .expect("slaves");
        assert_eq!(replicas.len(), 2);
        assert_eq!(replicas[0]["flags"], "slave");
        assert_eq!(replicas[0]["master-link-status"], "ok");
        assert_eq!(replicas[1]["flags"], "slave,s_down");
        assert_eq!(replicas[1]["port"], "6003");

        let sentinels: Vec<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
            .arg("sentinels")
            .arg("mymaster")
            .query_async(&mut con)
            .await
            .expect("sentinels");
        assert_eq!(sentinels.len(), 2);
        assert_eq!(sentinels[0]["flags"], "sentinel");

        let err = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg("nope")
            .query_async::<redis::Value>(&mut con)
            .await
            .expect_err("unknown master");
        assert!(err.to_string().contains("No such master"), "{err}");

        // During an election the entry stays, flagged down, at the last address.
        r.view.send_modify(|v| v.primary = None);
        let m: std::collections::HashMap<String, String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg("mymaster")
            .query_async(&mut con)
            .await
            .expect("master");
        assert_eq!(m["flags"], "master,s_down,o_down");
        assert_eq!(m["port"], "6001");

        let info: String = redis::cmd("INFO")
            .query_async(&mut con)
            .await
            .expect("info");
        assert!(info.contains("redis_mode:sentinel"));
        assert!(info.contains("master0:name=mymaster,status=odown,address=127.0.0.1:6001"));
    }

    #[tokio::test]
    async fn switch_master_is_delivered_to_a_subscriber() {
        let r = start(view(Some(addr("n1", 6001)), vec![])).await;
        let addr_ = r.addr;
        // A real client: the redis crate's blocking pub/sub.
        let (subscribed_tx, subscribed) = tokio::sync::oneshot::channel::<()>();
        let subscriber = tokio::task::spawn_blocking(move || {
            let client = redis::Client::open(format!("redis://{addr_}")).expect("client");
            let mut con = client.get_connection().expect("connect");
            let mut ps = con.as_pubsub();
            ps.subscribe("+switch-master").expect("subscribe");
            // subscribe() returns once the server acknowledged it.
            let _ = subscribed_tx.send(());
            ps.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            let msg = ps.get_message().expect("message");
            (
                msg.get_channel_name().to_string(),
                msg.get_payload::<String>().expect("payload"),
            )
        });
        // And a raw pattern subscriber.
        let mut raw_sub = TcpStream::connect(r.addr).await.expect("connect");
        let ack = raw(&mut raw_sub, &["PSUBSCRIBE", "+switch-*"]).await;
        assert_eq!(ack, b"*3\r\n$10\r\npsubscribe\r\n$9\r\n+switch-*\r\n:1\r\n");

        tokio::time::timeout(Duration::from_secs(10), subscribed)
            .await
            .expect("subscribed in time")
            .expect("subscriber alive");
        // Going through "no primary" first must not lose the old address.
        r.view.send_modify(|v| v.primary = None);
        tokio::time::sleep(Duration::from_millis(50)).await;
        r.view.send_modify(|v| {
            v.epoch = 4;
            v.primary = Some(addr("n2", 6002));
        });

        let (channel, payload) = subscriber.await.expect("join");
        assert_eq!(channel, "+switch-master");
        assert_eq!(payload, "mymaster 127.0.0.1 6001 127.0.0.1 6002");

        let mut lines = BufReader::new(&mut raw_sub);
        let mut got = String::new();
        // *4 pmessage <pattern> <channel> <payload>: 9 lines.
        for _ in 0..9 {
            tokio::time::timeout(Duration::from_secs(5), lines.read_line(&mut got))
                .await
                .expect("in time")
                .expect("read");
        }
        assert_eq!(
            got,
            "*4\r\n$8\r\npmessage\r\n$9\r\n+switch-*\r\n$14\r\n+switch-master\r\n$38\r\nmymaster 127.0.0.1 6001 127.0.0.1 6002\r\n"
        );
    }

    #[tokio::test]
    async fn subscribed_connections_refuse_other_commands() {
        let r = start(view(None, vec![])).await;
        let mut s = TcpStream::connect(r.addr).await.expect("connect");
        raw(&mut s, &["SUBSCRIBE", "+switch-master"]).await;
        let reply = raw(&mut s, &["SENTINEL", "masters"]).await;
        assert!(
            reply.starts_with(b"-ERR Can't execute 'sentinel'"),
            "{reply:?}"
        );
        assert_eq!(
            raw(&mut s, &["PING"]).await,
            b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
        );
        assert_eq!(
            raw(&mut s, &["UNSUBSCRIBE"]).await,
            b"*3\r\n$11\r\nunsubscribe\r\n$14\r\n+switch-master\r\n:0\r\n"
        );
        assert_eq!(raw(&mut s, &["PING"]).await, b"+PONG\r\n");
    }

    #[tokio::test]
    async fn hello_2_and_hello_3_switch_the_reply_protocol() {
        let r = start(view(Some(addr("n1", 6001)), vec![])).await;
        let mut s = TcpStream::connect(r.addr).await.expect("connect");
        let reply = raw(&mut s, &["HELLO", "4"]).await;
        assert!(reply.starts_with(b"-NOPROTO"), "{reply:?}");
        let reply = raw(&mut s, &["HELLO", "2", "SETNAME", "app"]).await;
        assert!(reply.starts_with(b"*14\r\n$6\r\nserver\r\n"), "{reply:?}");
        assert_eq!(raw(&mut s, &["CLIENT", "GETNAME"]).await, b"$3\r\napp\r\n");

        let reply = raw(&mut s, &["HELLO", "3"]).await;
        assert!(reply.starts_with(b"%7\r\n$6\r\nserver\r\n"), "{reply:?}");
        assert!(
            reply.windows(11).any(|w| w == b"proto\r\n:3\r\n"),
            "{reply:?}"
        );
        let master = raw(&mut s, &["SENTINEL", "master", "mymaster"]).await;
        assert!(
            master.starts_with(b"%20\r\n$4\r\nname\r\n$8\r\nmymaster\r\n"),
            "{master:?}"
        );
        assert_eq!(
            raw(&mut s, &["SENTINEL", "get-master-addr-by-name", "x"]).await,
            b"_\r\n"
        );
        assert_eq!(raw(&mut s, &["CLIENT", "GETNAME"]).await, b"$3\r\napp\r\n");
        let ack = raw(&mut s, &["SUBSCRIBE", "+switch-master"]).await;
        assert!(ack.starts_with(b">3\r\n$9\r\nsubscribe\r\n"), "{ack:?}");
        // RESP3 allows ordinary commands while subscribed.
        assert_eq!(raw(&mut s, &["PING"]).await, b"+PONG\r\n");
        r.view.send_modify(|v| v.primary = Some(addr("n2", 6002)));
        let push = read_some(&mut s).await;
        assert!(
            push.starts_with(b">3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n"),
            "{push:?}"
        );
    }

    #[test]
    fn glob_patterns_match_like_redis() {
        assert!(glob_match(b"*", b"+switch-master"));
        assert!(glob_match(b"+switch-*", b"+switch-master"));
        assert!(glob_match(b"+s?itch-master", b"+switch-master"));
        assert!(glob_match(b"+[rs]witch-*", b"+switch-master"));
        assert!(glob_match(b"+[a-z]witch-*", b"+switch-master"));
        assert!(!glob_match(b"+[^s]witch-*", b"+switch-master"));
        assert!(glob_match(b"\\*", b"*"));
        assert!(!glob_match(b"\\*", b"x"));
        assert!(!glob_match(b"+sdown", b"+switch-master"));
        assert!(!glob_match(b"a*b*c*d*e*f*g*h*i*j*k", &[b'a'; 4000]));
    }
}
