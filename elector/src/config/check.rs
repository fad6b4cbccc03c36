//! Validation: every problem of one node's config (fatal) and every warning,
//! each a complete sentence, and the problems of a whole cluster's configs
//! taken together.

use super::*;

impl Config {
    /// The replication gate (protocol §6.10): its port and kevy's own must
    /// exist and differ; off, it is a warning.
    fn check_replication_gate(
        &self,
        dn: &DataNodeConfig,
        errors: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) {
        let Some(port) = self.data_port() else {
            return;
        };
        if port.checked_add(dn.replication_port_offset).is_none() {
            errors.push(format!(
                "data_node.replication_port_offset {} puts the replication port of data port {port} above 65535",
                dn.replication_port_offset
            ));
        }
        if !dn.replication_gate {
            warnings.push(
                "data_node.replication_gate is off: replicas dial the data node directly, and one that restarts (empty, or from older files) before this elector notices can be full-synced by every replica (protocol §6.10)"
                    .into(),
            );
            return;
        }
        if dn.kind == DataNodeKind::Kevy {
            if port.checked_add(dn.local_replication_port_offset).is_none() {
                errors.push(format!(
                    "data_node.local_replication_port_offset {} puts kevy's replication port above 65535",
                    dn.local_replication_port_offset
                ));
            }
            if dn.local_replication_port_offset == dn.replication_port_offset {
                errors.push(
                    "data_node.local_replication_port_offset must differ from replication_port_offset: the gate listens on the one, kevy on the other (kevy's [replication] listen_port_base)"
                        .into(),
                );
            }
        }
    }

    /// Every problem (fatal) and warning, each a complete sentence.
    pub fn check(&self) -> (Vec<String>, Vec<String>) {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        if let Err(e) = self.vip() {
            errors.push(e.to_string());
        }
        if !valid_node_id(&self.node_id) {
            errors.push(format!(
                "node_id {:?} must be 1 to 32 printable ASCII bytes without spaces",
                self.node_id
            ));
        }
        let mut seen = BTreeSet::new();
        for p in &self.peers {
            if !valid_node_id(&p.id) {
                errors.push(format!(
                    "peer id {:?} must be 1 to 32 printable ASCII bytes without spaces",
                    p.id
                ));
            }
            if !seen.insert(p.id.as_str()) {
                errors.push(format!("peer id {:?} appears more than once", p.id));
            }
            if !valid_address(&p.election) {
                errors.push(format!(
                    "peer {}: election address {:?} is not host:port",
                    p.id, p.election
                ));
            }
            match (&p.data, p.witness) {
                (Some(data), false) if !valid_address(data) => errors.push(format!(
                    "peer {}: data address {data:?} is not host:port",
                    p.id
                )),
                (None, false) => errors.push(format!(
                    "peer {}: data is missing (only a witness has no data node)",
                    p.id
                )),
                (Some(_), true) => errors.push(format!(
                    "peer {}: a witness has no data node; remove its data address",
                    p.id
                )),
                _ => {}
            }
            if let Some(api) = &p.api {
                if !valid_address(api) {
                    errors.push(format!(
                        "peer {}: api address {api:?} is not host:port",
                        p.id
                    ));
                }
            }
        }
        let mut elections = BTreeSet::new();
        for p in &self.peers {
            if !elections.insert(p.election.as_str()) {
                errors.push(format!(
                    "election address {} is used by more than one peer",
                    p.election
                ));
            }
        }
        if !self.peers.iter().any(|p| p.id == self.node_id) {
            errors.push(format!(
                "node_id {:?} is missing from peers (list every node, this one included)",
                self.node_id
            ));
        }
        match self.peers.len() {
            0 => errors.push("peers is empty".into()),
            1 => warnings.push("a single node cluster fails over to nobody".into()),
            2 => warnings.push(
                "N=2 has no fault tolerance: quorum is 2, so losing either node stops failover (by design: better than split brain)"
                    .into(),
            ),
            n if n % 2 == 0 => warnings.push(format!(
                "N={n} is even: it tolerates as many failures as N={} does",
                n - 1
            )),
            _ => {}
        }
        if let Some(dn) = &self.data_node {
            if !(100..=60_000).contains(&dn.kevy_reconnect_window_ms) {
                errors.push(format!(
                    "data_node.kevy_reconnect_window_ms {} is outside 100..=60000 (kevy's [replication] reconnect_window_ms; 1000 in our configurations)",
                    dn.kevy_reconnect_window_ms
                ));
            }
            let limits = crate::datanode::KEVY_QUIESCE_FENCE_LIMIT_RANGE;
            if !limits.contains(&dn.kevy_quiesce_fence_limit_ms) {
                errors.push(format!(
                    "data_node.kevy_quiesce_fence_limit_ms {} is outside {}..={} (how long a lapsed lease's quiesce fences a kevy primary before it is demoted; 60000 by default)",
                    dn.kevy_quiesce_fence_limit_ms,
                    limits.start(),
                    limits.end()
                ));
            }
            self.check_replication_gate(dn, &mut errors, &mut warnings);
            check_password_source(dn, &mut errors, &mut warnings);
            super::data_node_tls::check(dn, &mut errors, &mut warnings);
        }
        super::ports_tls::check(self, &mut errors, &mut warnings);
        if !valid_listen(&self.listen.election) {
            errors.push(format!(
                "listen.election {:?} is not host:port or :port",
                self.listen.election
            ));
        }
        if !valid_listen(&self.listen.api) {
            errors.push(format!(
                "listen.api {:?} is not host:port or :port",
                self.listen.api
            ));
        }
        if let Some(s) = &self.listen.sentinel {
            if !valid_listen(s) {
                errors.push(format!("listen.sentinel {s:?} is not host:port or :port"));
            }
        }
        self.check_witnesses(&mut errors);
        let t = &self.timings;
        if t.hb_interval_ms == 0 {
            errors.push("timings.hb_interval_ms must be above 0".into());
        }
        if t.down_after_ms <= t.hb_interval_ms {
            errors.push(format!(
                "timings.down_after_ms ({}) must be greater than hb_interval_ms ({})",
                t.down_after_ms, t.hb_interval_ms
            ));
        } else if t.down_after_ms < 4 * t.hb_interval_ms {
            errors.push(format!(
                "timings.down_after_ms ({}) must be at least 4 × hb_interval_ms ({}): the primary's lease is down_after − 3 heartbeats",
                t.down_after_ms, t.hb_interval_ms
            ));
        } else if t.down_after_ms < 10 * t.hb_interval_ms {
            warnings.push(format!(
                "timings.down_after_ms is only {}× hb_interval_ms: a few lost heartbeats will start an election",
                t.down_after_ms / t.hb_interval_ms.max(1)
            ));
        }
        if t.down_after_ms > t.hb_interval_ms {
            let core = self.timings();
            let lease = core.lease_ms();
            if lease < 3 * t.hb_interval_ms {
                errors.push(format!(
                    "timings: the lease left by down_after_ms ({}) − 2 × hb_interval_ms − hb_interval_ms − fence_margin_ms ({}) is {lease} ms, under 3 heartbeats ({} ms): raise down_after_ms or lower fence_margin_ms (protocol §6.2.1)",
                    t.down_after_ms,
                    core.fence_margin_ms,
                    3 * t.hb_interval_ms
                ));
            } else if core.fence_budget_ms() < crate::datanode::COMMAND_TIMEOUT.as_millis() as u64 {
                warnings.push(format!(
                    "timings.fence_margin_ms {} covers fences that apply within {} ms (clock-rate error ±1 % paid); a fence command that runs into the data node's {} ms timeout can overlap a successor's writes. Compare with elector_fence_apply_seconds in /metrics (protocol §6.2.1)",
                    core.fence_margin_ms,
                    core.fence_budget_ms(),
                    crate::datanode::COMMAND_TIMEOUT.as_millis()
                ));
            }
        }
        if t.election_timeout_ms == 0 {
            errors.push("timings.election_timeout_ms must be above 0".into());
        }
        if t.backoff_min_ms > t.backoff_max_ms {
            errors.push(format!(
                "timings.backoff_min_ms ({}) is above backoff_max_ms ({})",
                t.backoff_min_ms, t.backoff_max_ms
            ));
        }
        if t.data_poll_ms == 0 || t.data_poll_ms >= t.down_after_ms {
            errors.push(format!(
                "timings.data_poll_ms ({}) must be above 0 and below down_after_ms",
                t.data_poll_ms
            ));
        }
        if self.priority == 0 && self.peers.len() <= 2 {
            warnings.push("priority 0 in a cluster of two leaves a single possible primary".into());
        }
        errors.extend(self.hooks.validate());
        match self.auth.load_key() {
            Ok(None) if !listens_on_loopback_only(&self.listen.api) => {
                warnings.extend(self.auth.warnings());
                warnings.push(format!(
                    "listen.api {:?} is reachable from the network and auth.mode is none: anyone who reaches it can POST /switchover",
                    self.listen.api
                ));
            }
            Ok(_) => warnings.extend(self.auth.warnings()),
            Err(e) => errors.push(format!("auth: {e}")),
        }
        for f in &self.unsafe_test_faults {
            if !cfg!(feature = "test-faults") {
                errors.push(format!(
                    "unsafe_test_faults ({f}) is only honoured by elector-faulty (built with the test-faults feature)"
                ));
            } else if ![
                "accept_twice_per_epoch",
                "promote_without_quorum",
                "no_lease_fencing",
                "ignore_floor",
                "repromote_in_epoch",
            ]
            .contains(&f.as_str())
            {
                errors.push(format!("unknown unsafe_test_faults entry {f:?}"));
            }
        }
        (errors, warnings)
    }

    /// The data node and the witnesses (protocol §4.5): a witness has no
    /// data node, every other member needs one, and a cluster with
    /// witnesses needs two data members at least (one would have nobody to
    /// fail over to).
    fn check_witnesses(&self, errors: &mut Vec<String>) {
        match (&self.data_node, self.is_witness()) {
            (Some(dn), false) if !valid_address(&dn.address) => errors.push(format!(
                "data_node.address {:?} is not host:port",
                dn.address
            )),
            (None, false) => errors.push(
                "data_node is missing (only a witness, `witness: true` on its peer entry, runs without one)"
                    .into(),
            ),
            (Some(_), true) => errors.push(
                "this node is a witness (witness: true on its peer entry): remove data_node".into(),
            ),
            _ => {}
        }
        if let Some(dn) = &self.data_node {
            let has_password = dn.password.is_some() || dn.password_file.is_some();
            if dn.kind == DataNodeKind::Kevy && (has_password || dn.username.is_some()) {
                errors.push(
                    "data_node: kevy 7.0.0 has no AUTH; remove data_node.username, password and password_file (protect it by binding loopback or a private network)"
                        .into(),
                );
            }
            if dn.username.is_some() && !has_password {
                errors.push(
                    "data_node.username is set without data_node.password_file or password (an ACL user authenticates with both)"
                        .into(),
                );
            }
        }
        let core = self.core_config(0);
        let (data, witnesses) = (core.data_members(), core.witnesses());
        if witnesses == 0 {
            return;
        }
        if data < 2 {
            errors.push(format!(
                "{data} data node(s) and {witnesses} witness(es): a cluster with witnesses needs at least two data nodes, or there is nobody to fail over to (protocol §4.5)"
            ));
        }
    }
}

/// `data_node.password` or `password_file`, not both; the file must be the
/// elector's alone; inline is for labs.
fn check_password_source(
    dn: &DataNodeConfig,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    match (&dn.password, &dn.password_file) {
        (Some(_), Some(_)) => errors.push(
            "data_node.password and data_node.password_file are both set; use one (password_file for production)"
                .into(),
        ),
        (None, Some(path)) if dn.kind == DataNodeKind::Redis => {
            if let Err(e) = read_secret_file("data_node.password_file", path) {
                errors.push(e.to_string());
            }
        }
        (Some(_), None) if dn.kind == DataNodeKind::Redis => warnings.push(
            "data_node.password is inline in the config file (lab use only): put it in data_node.password_file, mode 0600, owned by the elector's user"
                .into(),
        ),
        _ => {}
    }
}

/// The problems and warnings of several nodes' configs taken together
/// (`check-config` on a whole cluster): one node per file, and the same
/// fingerprint everywhere, else the odd nodes refuse each other's HELLO at
/// run time; and TLS on our ports alike on every member, which the
/// fingerprint does not carry ([`super::ports_tls::check_cluster`]).
pub fn check_cluster(configs: &[(PathBuf, Config)]) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    super::ports_tls::check_cluster(configs, &mut problems, &mut warnings);
    let mut ids = BTreeSet::new();
    for (path, c) in configs {
        if !ids.insert(c.node_id.as_str()) {
            problems.push(format!(
                "{}: node_id {:?} is also the node of an earlier file",
                path.display(),
                c.node_id
            ));
        }
    }
    if let Some((first_path, first)) = configs.first() {
        let theirs = first.fingerprint();
        for (path, c) in &configs[1..] {
            let ours = c.fingerprint();
            if ours != theirs {
                problems.push(format!(
                    "{}: fingerprint {ours} differs from {}'s {theirs} ({}): these nodes would refuse each other (protocol §3.7)",
                    path.display(),
                    first_path.display(),
                    ours.differences(&theirs).join(", ")
                ));
            }
        }
    }
    (problems, warnings)
}
