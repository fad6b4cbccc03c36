//! Sentinel's own questions: `SENTINEL <subcommand>` and `INFO`, answered from
//! the elector's view. Entries are flat field/value maps of bulk strings, in
//! the order and spelling real Sentinel uses, so clients that parse them by
//! name (redis-py, the `redis` crate) find every field they read.

use std::sync::atomic::Ordering;

use super::super::reply::Reply;
use super::super::{run_id, ClusterView, NodeAddr, Shared};
use super::client::REPORTED_VERSION;
use super::{lower, wrong_args};

/// `INFO`: the server, clients and sentinel sections Sentinel clients read.
pub(super) fn info(shared: &Shared) -> String {
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

/// `SENTINEL <subcommand> ...`.
pub(super) fn sentinel(args: &[Vec<u8>], shared: &Shared) -> Reply {
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
    entry(
        view.master_name.clone(),
        &addr,
        runid,
        flags,
        view,
        &[
            ("info-refresh", "0".into()),
            ("role-reported", "master".into()),
            ("role-reported-time", "0".into()),
            ("config-epoch", view.epoch.to_string()),
            ("num-slaves", view.replicas.len().to_string()),
            ("num-other-sentinels", view.sentinels.len().to_string()),
            ("quorum", view.quorum.to_string()),
            ("failover-timeout", (view.down_after_ms * 2).to_string()),
            ("parallel-syncs", "1".into()),
        ],
    )
}

fn replica_entry(view: &ClusterView, r: &NodeAddr, up: bool) -> Reply {
    let (mhost, mport) = match &view.primary {
        Some(p) => (p.host.clone(), p.port.to_string()),
        None => ("?".into(), "0".into()),
    };
    entry(
        format!("{}:{}", r.host, r.port),
        r,
        run_id(&r.id),
        if up { "slave" } else { "slave,s_down" },
        view,
        &[
            ("info-refresh", "0".into()),
            ("role-reported", "slave".into()),
            ("role-reported-time", "0".into()),
            ("master-link-down-time", "0".into()),
            ("master-link-status", if up { "ok" } else { "err" }.into()),
            ("master-host", mhost),
            ("master-port", mport),
            ("slave-priority", "100".into()),
            ("slave-repl-offset", "0".into()),
            ("replica-announced", "1".into()),
        ],
    )
}

fn sentinel_entry(view: &ClusterView, s: &NodeAddr) -> Reply {
    let id = run_id(&s.id);
    entry(
        id.clone(),
        s,
        id,
        "sentinel",
        view,
        &[
            ("last-hello-message", "0".into()),
            ("voted-leader", "?".into()),
            ("voted-leader-epoch", "0".into()),
        ],
    )
}

/// An instance entry: who it is and its flags, then the link fields every
/// kind of entry shares (constants: the elector answers from its view and
/// keeps no per-instance links), then the kind's own `rest`.
fn entry(
    name: String,
    addr: &NodeAddr,
    runid: String,
    flags: &str,
    view: &ClusterView,
    rest: &[(&str, String)],
) -> Reply {
    let mut fields = vec![
        ("name", name),
        ("ip", addr.host.clone()),
        ("port", addr.port.to_string()),
        ("runid", runid),
        ("flags", flags.to_string()),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "0".into()),
        ("last-ping-reply", "0".into()),
        ("down-after-milliseconds", view.down_after_ms.to_string()),
    ];
    fields.extend_from_slice(rest);
    Reply::fields(&fields)
}
