//! The tokio shell (docs/architecture.md): one protocol task owns the core
//! and executes its actions; transport, data-node adapter, persister, HTTP
//! API, Sentinel listener and hooks run beside it and talk to it through
//! channels, so none of them can block an election.

use crate::api::listen::bind_tcp;
use crate::api::metrics::Metrics;
use crate::api::request_auth::RequestVerifier;
use crate::api::sentinel;
use crate::api::{self, ApiState, LoopBeat, SwitchoverError, SwitchoverRequest};
use crate::config::Config;
use crate::core::{
    Action, Core, DataNodeTarget, Event, Fence, Gate, Notice, Output, Reason, SwitchoverFailure,
};
use crate::datanode::{self, AnyNode, DataNodeReport};
use crate::hooks::{HookEvent, HookKind, HookRunner};
use crate::net::auth::{unix_ms_now, AuthConfigError, Authenticator};
use crate::net::transport::{self, Inbound, Transport};
use crate::persist::{probe_data_dir, DataDirError, PersistError, StateFile};
use crate::protocol::Role;
use crate::status_view::{self, StatusBook};
use crate::vip::VipHandle;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot, watch};

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Persist(#[from] PersistError),
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error("auth: {0}")]
    Auth(#[from] AuthConfigError),
    #[error(transparent)]
    Tls(#[from] crate::tls::files::TlsFileError),
    #[error("cannot listen on {what} {spec}: {source}")]
    Listen {
        what: &'static str,
        spec: String,
        source: std::io::Error,
    },
}

/// Milliseconds on a clock that is monotonic within the process and starts
/// at the wall-clock time of boot, so heartbeat stamps of a new incarnation
/// are always above those of the last one.
struct Clock {
    boot: Instant,
    base: u64,
}

impl Clock {
    fn now(&self) -> u64 {
        self.base + self.boot.elapsed().as_millis() as u64
    }
}

/// Runs the elector until `shutdown` completes.
pub async fn run(
    config: Config,
    reset_state: bool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RuntimeError> {
    let clock = Clock {
        boot: Instant::now(),
        base: unix_ms_now(),
    };
    // A data_dir that cannot take a durable write would silence this node
    // at its first vote (§5.2); refuse to start instead.
    probe_data_dir(&config.data_dir)?;
    let state_file = StateFile::new(&config.data_dir);
    let recovered = state_file.load(reset_state)?;
    if !state_file.path().exists() {
        // Record the fresh state at once: a directory that holds anything
        // else but no state.json is refused at the next start (§5.2).
        state_file.store(&recovered)?;
    }
    tracing::info!(
        node = %config.node_id,
        epoch = recovered.epoch,
        voted_epoch = recovered.voted_epoch,
        voted_for = %recovered.voted_for.as_deref().unwrap_or("none"),
        data_epoch = recovered.data_epoch,
        "starting"
    );
    let metrics = Arc::new(Metrics::new());
    metrics.set_limits(api::metrics::Limits {
        fence_budget: Duration::from_millis(config.timings.fence_margin_ms()),
        max_lag: config.max_lag_bytes,
        watchdog_clamps: config
            .data_node
            .as_ref()
            .map(|_| api::metrics::watchdog_clamps_path(&config.data_dir)),
    });
    let boot_id = state_file.next_boot_id(clock.base)?;
    let auth = Arc::new(Mutex::new(Authenticator::new(
        &config.auth,
        &config.node_id,
        boot_id,
    )?));

    let bind = |what: &'static str, spec: &str| {
        bind_tcp(spec).map_err(|source| RuntimeError::Listen {
            what,
            spec: spec.to_string(),
            source,
        })
    };
    let ports_tls = crate::tls::PortsTls::load(&config)?;
    // `data_node.tls` is re-read with our ports' files: every clone of it
    // (the adapter's, the tether's) shares what a reload replaces.
    tokio::spawn(
        ports_tls
            .reloader()
            .with(config.data_node_tls_section())
            .run(),
    );
    let election_listener = bind("election", &config.listen.election)?;
    let api_listener = bind("api", &config.listen.api)?;
    let sentinel_listener = match &config.listen.sentinel {
        Some(spec) => Some(bind("sentinel", spec)?),
        None => None,
    };
    // The replication gate (§6.10) takes the address peers replicate from;
    // if anything else holds it (kevy itself, still configured there), the
    // node refuses to start rather than leave replicas unguarded.
    let gate_listener = match config.gate_listen() {
        Some(spec) => Some(bind("replication gate", &spec).map_err(|e| {
            tracing::error!(error = %e,
                "the replication gate cannot listen: is the data node's own replication listener still there? \
                 kevy: set [replication] listen_port_base = client port + data_node.local_replication_port_offset");
            e
        })?),
        None => None,
    };

    // The core, and the start-up clamp before anything else.
    let recovered_epoch = recovered.epoch;
    let joining_process = recovered.joining_process().map(str::to_string);
    let mut core = Core::new(config.core_config(rand::random()), recovered, clock.now());
    let start_actions = core.start(clock.now());

    let (target_tx, target_rx) = watch::channel((0u64, 0u64, DataNodeTarget::Isolated));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (report_tx, mut report_rx) = mpsc::channel::<DataNodeReport>(16);
    let poll = Duration::from_millis(config.timings.data_poll_ms);
    // A witness has no data node (§4.5): no adapter, nothing to report.
    let nowhere_hold = datanode::NowhereHold::for_config(&config).await;
    let data_node_task = match (
        AnyNode::with_hold(&config, nowhere_hold.clone())
            .map(|node| node.asking_about_joining_process(joining_process)),
        config.data_node.as_ref(),
    ) {
        (Some(node), Some(dn)) => {
            let credentials = dn.credentials();
            let tether = Arc::new(datanode::tether::Tether::new(&dn.address, &credentials));
            let gate = match (gate_listener, config.gate_forward()) {
                (Some(listener), Some(forward)) => {
                    let (gate_tx, gate_rx) = watch::channel(None);
                    let listen = listener
                        .local_addr()
                        .map(|a| a.to_string())
                        .unwrap_or_default();
                    tracing::info!(%listen, %forward,
                        "replication gate: replicas reach the data node only through it (protocol §6.10)");
                    tokio::spawn(datanode::gate::serve(
                        listener,
                        forward,
                        Arc::clone(&tether),
                        gate_rx,
                        metrics.gate_counts(),
                    ));
                    Some(gate_tx)
                }
                _ => {
                    tracing::warn!("replication gate off: replicas may sync from a data node that restarted before this elector noticed (protocol §6.10)");
                    None
                }
            };
            let hint = datanode::floor_hint::path(&config.data_dir);
            Some(tokio::spawn(datanode::run(
                node,
                datanode::Channels {
                    targets: target_rx,
                    reports: report_tx,
                    stop: stop_rx.clone(),
                },
                poll,
                tether,
                gate,
                Some(hint),
            )))
        }
        _ => {
            tracing::info!("witness: no data node to drive");
            None
        }
    };

    let (persist_tx, persist_rx) = mpsc::unbounded_channel();
    let (persisted_tx, mut persisted_rx) = mpsc::unbounded_channel();
    tokio::spawn(persister(state_file, persist_rx, persisted_tx));

    let (inbound_tx, mut inbound_rx) = mpsc::channel::<Inbound>(1024);
    let peers = config
        .peers
        .iter()
        .filter(|p| p.id != config.node_id)
        .map(|p| (p.id.clone(), p.election.clone()))
        .collect();
    let fingerprint = config.fingerprint();
    tracing::info!(%fingerprint, "configuration fingerprint (members and lease timings)");
    let transport = transport::start_with_tls(
        transport::LocalIdentity {
            node_id: config.node_id.clone(),
            fingerprint,
        },
        election_listener,
        ports_tls.election.clone(),
        peers,
        Arc::clone(&auth),
        Arc::clone(&metrics),
        transport::LinkTimings::from_timings(
            config.timings.hb_interval_ms,
            config.timings.down_after_ms,
        ),
        inbound_tx,
    );

    let book = StatusBook::new(&config, recovered_epoch, boot_id);
    let (status_tx, status_rx) =
        watch::channel(book.snapshot(&core, &config, &metrics, clock.now()));
    let (view_tx, view_rx) = watch::channel(status_view::cluster_view(&core, &config));
    let (switch_tx, mut switch_rx) = mpsc::channel::<SwitchoverRequest>(4);
    let (accept_tx, mut accept_rx) = mpsc::channel::<api::AcceptDataLossRequest>(1);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    // The loop wakes at least every heartbeat; two missed turns is a stall.
    let loop_beat = Arc::new(LoopBeat::new(Duration::from_millis(
        2 * config.timings.hb_interval_ms + 100,
    )));
    let api_state = ApiState {
        loop_beat: Arc::clone(&loop_beat),
        status: status_rx,
        metrics: Arc::clone(&metrics),
        switchover: switch_tx,
        accept_data_loss: accept_tx,
        request_auth: config
            .auth
            .load_key()?
            .map(|key| Arc::new(RequestVerifier::new(key))),
    };
    match ports_tls.api.clone() {
        None => tokio::spawn(api::serve(
            api_listener,
            api_state,
            stopped(stop_rx.clone()),
        )),
        Some(tls) => tokio::spawn(api::https::serve_tls(
            api_listener,
            api_state,
            tls,
            stopped(stop_rx.clone()),
        )),
    };
    if let Some(listener) = sentinel_listener {
        tokio::spawn(sentinel::serve(
            listener,
            ports_tls.sentinel.clone(),
            config.node_id.clone(),
            view_rx,
            stopped(stop_rx.clone()),
        ));
    }
    let hooks = HookRunner::new(config.hooks.clone(), Arc::clone(&metrics));
    // Checked by `Config::check` before `run`; a bad one here is not started.
    let vip = config.vip().ok().flatten();
    let vip_handle = vip.clone().map(VipHandle::start);

    let mut shell = Shell {
        transport,
        persist_tx,
        target_tx,
        hooks,
        metrics,
        book,
        pending_switchover: None,
        node_id: config.node_id.clone(),
        gate: Gate::default(),
        vip: vip_handle,
    };
    shell.execute(&core, start_actions, clock.now());

    tokio::pin!(shutdown);
    let mut accept_reply = None;
    loop {
        let wake = core.next_wakeup();
        let sleep_for = Duration::from_millis(wake.saturating_sub(clock.now()));
        let event = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            Some((seq, gates, result)) = persisted_rx.recv() => match result {
                Ok(epoch) => {
                    shell.book.persisted(epoch);
                    // What waited for this write leaves before the core
                    // sees it durable (§5.2).
                    shell.release(&core, seq, clock.now());
                    Event::Persisted { seq }
                }
                Err(error) => {
                    // A write that gates nothing (a risen floor, §6.10)
                    // fails alone: what waits for later writes stays.
                    if gates {
                        shell.gate.drop_all();
                    }
                    Event::PersistFailed { seq, error }
                }
            },
            Some(inbound) = inbound_rx.recv() => Event::Message { from: inbound.from, msg: inbound.msg },
            Some(report) = report_rx.recv() => {
                if report.error.is_some() {
                    shell.metrics.data_node_error();
                }
                if let Some(after) = report.fence_applied_after {
                    shell.metrics.fence_applied(after);
                }
                if report.fence_failed {
                    shell.metrics.fence_failed();
                }
                shell.metrics.stale_connects(
                    report.aborts.aborted,
                    report.aborts.released,
                    report.aborts.error.is_some(),
                );
                shell.metrics.ack_nudges(report.ack_nudges);
                shell.metrics.stale_ack_pads(report.padded_frames);
                let obs = report.obs.clone();
                shell.book.set_report(report);
                Event::DataNode(obs)
            }
            Some(request) = switch_rx.recv() => shell.start_switchover(&core, request, clock.now()),
            Some(request) = accept_rx.recv() => {
                // §6.10: the operator's explicit choice, answered once the
                // core has handled it (below).
                accept_reply = Some(request.reply);
                Event::AcceptDataLoss
            }
            _ = tokio::time::sleep(sleep_for) => Event::Tick,
        };
        let now = clock.now();
        let output = core.handle(now, event);
        shell.execute(&core, output, now);
        if let Some(reply) = accept_reply.take() {
            let _ = reply.send(accept_data_loss_answer(&core));
        }
        shell.sync_vip(&core);
        // The pulse carries the lease's end: the watchdog fences by it if
        // this process goes quiet before then (§6.4.1).
        let writable_for = core
            .writable_until()
            .map(|until| Duration::from_millis(until.saturating_sub(now)));
        loop_beat.beat(writable_for);
        let mut snapshot = shell.book.snapshot(&core, &config, &shell.metrics, now);
        snapshot.vip = shell.vip.as_ref().map(VipHandle::status);
        status_tx.send_replace(snapshot);
        let view = status_view::cluster_view(&core, &config);
        view_tx.send_if_modified(|v| {
            let changed = *v != view;
            *v = view;
            changed
        });
    }
    // A clean stop fences first (protocol §6.4.1): nobody would fence a
    // writable primary whose elector is gone.
    tracing::info!("shutting down: fencing the data node first");
    let _ = stop_tx.send(true);
    // The VIP goes before (or with) the fence (docs/vip.md).
    if let Some(vip) = &vip {
        if let Err(e) = VipHandle::remove_now(vip).await {
            tracing::warn!(error = %e, "could not remove the vip on stop");
        }
    }
    // The task that drives the data node stops first, after the command it
    // is running: a retarget it sent after our fence would undo it (a
    // replica pointed back at its primary, the mark its position proves
    // itself by stripped; a primary promoted again without an elector).
    if let Some(task) = data_node_task {
        if stop_data_node_task(task, DATA_NODE_TASK_STOP).await == TaskStop::Cut {
            tracing::warn!(
                waited_ms = DATA_NODE_TASK_STOP.as_millis() as u64,
                "the data node task did not stop after its command; cut, fencing anyway"
            );
        }
    }
    match tokio::time::timeout(Duration::from_secs(3), fence_on_stop(&config, nowhere_hold)).await {
        Ok(Ok(())) => tracing::info!("data node fenced; stopped"),
        Ok(Err(e)) => tracing::warn!(error = %e, "could not fence the data node on stop"),
        Err(_) => tracing::warn!("fencing the data node on stop timed out"),
    }
    shell.hooks.flush().await;
    Ok(())
}

/// How long a clean stop waits for the data node task to finish the
/// command it runs: the longest is a retarget that waits for its upstream's
/// promotion and then runs its pipeline (each bounded by about a second).
const DATA_NODE_TASK_STOP: Duration = Duration::from_secs(3);

/// How the data node task ended at a clean stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskStop {
    /// It finished the command it ran and returned (or had already ended).
    Finished,
    /// It was still running after the wait: it is aborted and gone before
    /// this returns, so nothing it sends can land after the stop's fence.
    Cut,
}

/// Waits up to `limit` for the data node task to stop, then aborts it and
/// waits for the abort to take: dropping the handle instead would leave it
/// running beside the fence (a retarget sent after the fence undoes it).
async fn stop_data_node_task(mut task: tokio::task::JoinHandle<()>, limit: Duration) -> TaskStop {
    if tokio::time::timeout(limit, &mut task).await.is_ok() {
        return TaskStop::Finished;
    }
    task.abort();
    // An aborted task ends at its next await point; a task that never
    // yields would hold this forever, so the wait is bounded too.
    let _ = tokio::time::timeout(limit, task).await;
    TaskStop::Cut
}

/// The blind fence of a clean stop, on a connection of its own.
/// It releases what the hold holds, or kevy's restart of its thread would
/// wait for its 5 s handshake timeout.
async fn fence_on_stop(
    config: &Config,
    nowhere_hold: Option<datanode::NowhereHold>,
) -> Result<(), datanode::DataNodeError> {
    use datanode::DataNodeAdapter;
    match AnyNode::with_hold(config, nowhere_hold) {
        Some(mut node) => node.fence_blind().await,
        None => Ok(()),
    }
}

/// What `POST /accept-data-loss` answers (§6.10): refused where the node
/// can never be primary, else whether it stands now or will at the next
/// chance (a live primary, no majority heard).
fn accept_data_loss_answer(core: &Core) -> Result<serde_json::Value, String> {
    if core.config().i_am_witness() || core.config().priority == 0 {
        return Err("this node cannot be primary (a witness, or priority 0)".into());
    }
    let standing = core.role() != crate::protocol::Role::Replica;
    Ok(serde_json::json!({
        "ok": true,
        "node": core.config().node_id,
        "standing": standing,
        "pending": !standing && core.forced_candidacy_pending(),
        "floor": core.floor().map(|f| f.pair()),
        "position": core.proven_position().map(|f| f.pair()),
        "proof": core.proof().as_str(),
        "note": "this node stands regardless of its floor; writes it lacks are lost; counted in elector_data_loss_accepted_total",
    }))
}

/// Writes persists one at a time, in order (the core relies on it), and
/// answers each with the epoch it made durable (for `/status`).
async fn persister(
    file: StateFile,
    mut rx: mpsc::UnboundedReceiver<crate::core::Persist>,
    done: mpsc::UnboundedSender<(u64, bool, Result<u64, String>)>,
) {
    while let Some(crate::core::Persist { seq, state, gates }) = rx.recv().await {
        let f = file.clone();
        let epoch = state.epoch;
        let result = tokio::task::spawn_blocking(move || f.store(&state))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map(|()| epoch);
        if done.send((seq, gates, result)).is_err() {
            return;
        }
    }
}

struct PendingSwitchover {
    to: String,
    timeout_ms: u64,
    reply: oneshot::Sender<Result<serde_json::Value, SwitchoverError>>,
    started: u64,
}

/// Everything the protocol task uses to carry out actions.
struct Shell {
    transport: Transport,
    persist_tx: mpsc::UnboundedSender<crate::core::Persist>,
    target_tx: watch::Sender<(u64, u64, DataNodeTarget)>,
    hooks: HookRunner,
    metrics: Arc<Metrics>,
    book: StatusBook,
    pending_switchover: Option<PendingSwitchover>,
    node_id: String,
    /// Actions waiting for a durable write (§5.2).
    gate: Gate,
    /// The virtual IP, when configured (docs/vip.md).
    vip: Option<VipHandle>,
}

impl Shell {
    fn start_switchover(&mut self, core: &Core, request: SwitchoverRequest, now: u64) -> Event {
        let timeout_ms = request.timeout.as_millis() as u64;
        if self.pending_switchover.is_some() {
            let _ = request.reply.send(Err(SwitchoverError::InProgress));
            return Event::Tick;
        }
        if core.role() != Role::Primary {
            let _ = request.reply.send(Err(SwitchoverError::NotPrimary {
                primary: core.primary().map(str::to_string),
            }));
            return Event::Tick;
        }
        if !core.config().is_member(&request.to) {
            let _ = request
                .reply
                .send(Err(SwitchoverError::UnknownTarget { to: request.to }));
            return Event::Tick;
        }
        self.book.switchover_started(&request.to, now, timeout_ms);
        let to = request.to.clone();
        self.pending_switchover = Some(PendingSwitchover {
            to: request.to,
            timeout_ms,
            reply: request.reply,
            started: now,
        });
        Event::SwitchoverRequested { to, timeout_ms }
    }

    /// Carries out one step's outputs in the order the persist rule gives
    /// them (§5.2): fences at once, then what may leave now, then the
    /// write; what waits for the write is held until it is durable.
    fn execute(&mut self, core: &Core, output: Output, now: u64) {
        // The VIP leaves before (or with) every fence (docs/vip.md).
        if let (Some(vip), Some(fence)) = (&self.vip, output.fences.first()) {
            let reason = match fence {
                Fence::Notify { reason, .. } => reason.as_str(),
                Fence::Apply { .. } => "fenced",
            };
            vip.want(false, reason);
        }
        for fence in output.fences {
            match fence {
                Fence::Apply { seq, target } => self.apply_target(core, seq, target.into()),
                Fence::Notify { epoch, reason } => self.fenced(core, epoch, reason, now),
            }
        }
        for action in output.now {
            self.run(core, action, now);
        }
        if let Some(p) = output.persist {
            let _ = self.persist_tx.send(p);
        }
        self.gate.hold(output.gated);
    }

    /// The VIP is held exactly while this node is the primary and the
    /// adapter has applied its writable target (after the fence is
    /// lifted, never before); failed moves run `on_fault`.
    fn sync_vip(&mut self, core: &Core) {
        let Some(vip) = &self.vip else {
            return;
        };
        let (seq, _, target) = &*self.target_tx.borrow();
        let writable = core.role() == Role::Primary
            && !core.fenced()
            && target.writable()
            && core.observation().applied_seq >= *seq;
        vip.want(
            writable,
            if writable {
                "writable_primary"
            } else {
                "not_writable"
            },
        );
        for what in vip.take_faults() {
            self.metrics.vip_failure();
            self.fault_hook(core, what);
        }
    }

    /// Runs `on_fault` with the node's current role and epoch.
    fn fault_hook(&self, core: &Core, what: String) {
        let r = core.role();
        self.hooks.fire(HookEvent {
            event: HookKind::Fault,
            node_id: self.node_id.clone(),
            epoch: core.epoch(),
            new_primary: core.primary().map(str::to_string),
            previous_role: r,
            role: r,
            reason: what,
        });
    }

    /// Write `seq` is durable: what waited for it leaves.
    fn release(&mut self, core: &Core, seq: u64, now: u64) {
        for action in self.gate.release(seq) {
            self.run(core, action, now);
        }
    }

    fn run(&mut self, core: &Core, action: Action, now: u64) {
        match action {
            Action::Send { to, msg } => self.transport.send(&to, msg),
            Action::Apply { seq, target } => self.apply_target(core, seq, target.into()),
            Action::Notify(notice) => self.notify(core, notice, now),
        }
    }

    /// Hands a target to the adapter. Targets take effect in sequence order
    /// only: a grant released after a newer fence was sent is stale and
    /// ignored (§5.2.1).
    fn apply_target(&mut self, core: &Core, seq: u64, target: DataNodeTarget) {
        let generation = core.data_generation();
        self.target_tx.send_if_modified(|current| {
            let newer = seq > current.0;
            if newer {
                *current = (seq, generation, target);
            }
            newer
        });
    }

    /// Writes stopped while this node stays primary.
    fn fenced(&mut self, core: &Core, epoch: u64, reason: Reason, now: u64) {
        tracing::info!(fenced = true, epoch, reason = %reason, "fence changed");
        self.metrics.transition(reason.as_str());
        self.book.fence(true, epoch, reason, now);
        let r = core.role();
        let event = HookEvent {
            event: HookKind::Fence,
            node_id: self.node_id.clone(),
            epoch,
            new_primary: core.primary().map(str::to_string),
            previous_role: r,
            role: r,
            reason: reason.as_str().to_string(),
        };
        self.hooks.fire(event);
    }

    fn notify(&mut self, core: &Core, notice: Notice, now: u64) {
        let hook = |event,
                    previous_role: Role,
                    role: Role,
                    epoch,
                    new_primary: Option<String>,
                    reason: Reason| HookEvent {
            event,
            node_id: self.node_id.clone(),
            epoch,
            new_primary,
            previous_role,
            role,
            reason: reason.as_str().to_string(),
        };
        match notice {
            Notice::RoleChanged {
                from,
                to,
                epoch,
                primary,
                reason,
            } => {
                // One log line per transition: the core logs it ("role
                // change", core/role.rs) with from, to, epoch and reason.
                self.metrics.transition(reason.as_str());
                self.book.transition(from, to, epoch, reason, now);
                match (from, to) {
                    (_, Role::Primary) => {
                        self.metrics.election_won();
                        self.hooks
                            .fire(hook(HookKind::Promote, from, to, epoch, primary, reason));
                    }
                    (Role::Primary, _) => {
                        self.hooks
                            .fire(hook(HookKind::Demote, from, to, epoch, primary, reason))
                    }
                    (Role::Candidate, Role::Replica) => self.metrics.election_lost(),
                    _ => {}
                }
            }
            Notice::Unfenced { epoch, reason } => {
                tracing::info!(fenced = false, epoch, reason = %reason, "fence changed");
                self.metrics.transition(reason.as_str());
                self.book.fence(false, epoch, reason, now);
            }
            Notice::Following {
                primary,
                epoch,
                reason,
            } => {
                tracing::info!(%primary, epoch, reason = %reason, "following");
                let r = core.role();
                self.book.transition(r, r, epoch, reason, now);
                self.hooks
                    .fire(hook(HookKind::Follow, r, r, epoch, Some(primary), reason));
            }
            Notice::ElectionStarted { epoch } => {
                tracing::info!(epoch, "election started");
                self.metrics.election_started();
            }
            Notice::SwitchoverFinished { to, result } => {
                match &result {
                    Ok(epoch) => tracing::info!(%to, epoch, "switchover finished"),
                    Err(why) => tracing::warn!(%to, error = %why, "switchover failed"),
                }
                let Some(p) = self.pending_switchover.take() else {
                    return;
                };
                let pause = now.saturating_sub(p.started);
                self.book.switchover_finished(
                    &result.as_ref().map_err(|e| e.to_string()).copied(),
                    pause,
                );
                let reply = match result {
                    Ok(epoch) => Ok(serde_json::json!({
                        "ok": true, "from": self.node_id, "to": p.to, "epoch": epoch,
                        "write_pause_ms": pause,
                    })),
                    Err(SwitchoverFailure::DidNotCatchUp) => Err(SwitchoverError::Timeout {
                        timeout_ms: p.timeout_ms,
                    }),
                    Err(why @ SwitchoverFailure::TargetNotEligible) => {
                        Err(SwitchoverError::TargetNotEligible {
                            to: p.to,
                            why: why.to_string(),
                        })
                    }
                    Err(why @ SwitchoverFailure::DataNodeNotServing) => {
                        Err(SwitchoverError::NotReady {
                            why: why.to_string(),
                        })
                    }
                    Err(why) => Err(SwitchoverError::Failed {
                        why: why.to_string(),
                    }),
                };
                let _ = p.reply.send(reply);
            }
            Notice::MessageDropped {
                from,
                reason,
                detail,
            } => {
                self.metrics.message_rejected(reason);
                tracing::warn!(%from, reason, %detail, "dropped a message");
            }
            Notice::Fault { what } => {
                tracing::warn!(%what, "fault");
                self.fault_hook(core, what);
            }
            Notice::DataLossAccepted {
                epoch,
                candidate,
                position,
                floor,
            } => {
                let what = format!(
                    "data loss accepted by an operator: {candidate} stands in epoch {epoch} at {position:?}, below a floor of {floor:?}; writes it lacks are lost"
                );
                tracing::warn!(
                    epoch,
                    %candidate,
                    position_epoch = position.0,
                    position_offset = position.1,
                    floor_epoch = floor.0,
                    floor_offset = floor.1,
                    "data loss accepted by an operator"
                );
                self.metrics.data_loss_accepted();
                self.fault_hook(core, what);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{stop_data_node_task, TaskStop};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn a_data_node_task_that_finishes_its_command_is_waited_for_not_cut() {
        let task = tokio::spawn(async { tokio::time::sleep(Duration::from_millis(20)).await });
        assert_eq!(
            stop_data_node_task(task, Duration::from_secs(2)).await,
            TaskStop::Finished
        );
    }

    #[tokio::test]
    async fn a_data_node_task_stuck_past_the_stop_wait_is_cut_and_sends_nothing_after_it() {
        // The command it is stuck in ends after the wait, and what it would
        // send then (a retarget) must not land after the stop's fence.
        let sent_late = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&sent_late);
        let task = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            flag.store(true, Ordering::SeqCst);
        });
        let started = Instant::now();
        assert_eq!(
            stop_data_node_task(task, Duration::from_millis(100)).await,
            TaskStop::Cut
        );
        assert!(
            started.elapsed() < Duration::from_millis(450),
            "the stop waited for the stuck command: {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            !sent_late.load(Ordering::SeqCst),
            "the cut task ran on past the stop"
        );
    }
}
