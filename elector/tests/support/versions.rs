//! Older elector binaries beside this build, for a rolling binary upgrade
//! (docs/protocol.md §3.8): where `scripts/build-old-electors.sh` puts them,
//! a cluster whose nodes start from different binaries, and swapping one
//! node's elector for another binary on the same config and state.

use std::path::PathBuf;
use std::time::Duration;

use super::Cluster;

/// An elector older than this tree's, named by the wire form it reads
/// (docs/protocol.md §3.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireForm {
    /// Reads neither the floor fields of `HB` nor `OFFER`'s `forced`, and
    /// drops a frame that has them (222ffcb~1, before the floors; also
    /// before the replication gate, so its config has no gate keys).
    Legacy,
    /// Reads the floors and `forced` but sends no flag `F` (2890e2e~1), so
    /// it is sent the Legacy form; drops an OFFER with `led`.
    Unflagged,
    /// `F` but not `P`: `OFFER` with `forced`, without `led` (dc9c913, the
    /// commit before f809e42).
    Floors,
}

impl WireForm {
    /// The commit whose elector this is, as the build script names its
    /// directory (`git rev-parse --short=7`).
    pub fn commit(self) -> &'static str {
        match self {
            WireForm::Legacy => "8829118",
            WireForm::Unflagged => "e9e61c6",
            WireForm::Floors => "dc9c913",
        }
    }

    /// Its electors know no replication gate (protocol §6.10): their
    /// configs must leave its keys out (`deny_unknown_fields`), and kevy
    /// listens where replicas dial it.
    pub fn before_replication_gate(self) -> bool {
        self == WireForm::Legacy
    }
}

/// Which elector binary each node of a cluster starts from, and whether
/// the configs are written for electors older than the replication gate.
pub struct ElectorBuilds<'a> {
    /// Node `i`'s binary (0-based).
    pub bin_of: &'a dyn Fn(usize) -> PathBuf,
    pub before_replication_gate: bool,
}

impl ElectorBuilds<'static> {
    /// This build everywhere ([`super::elector_bin`]).
    pub fn current() -> ElectorBuilds<'static> {
        ElectorBuilds {
            bin_of: &|_| super::elector_bin(),
            before_replication_gate: false,
        }
    }
}

/// Where the build script caches old binaries: `OLD_ELECTORS_DIR`, as for
/// the script, else `<workspace>/target/old-electors`.
fn old_electors_dir() -> PathBuf {
    std::env::var_os("OLD_ELECTORS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/old-electors"))
}

/// The elector binary of `form`. Building one takes minutes, so the tests
/// that need it are ignored by default; run with it missing, they fail
/// here naming the command that builds it (as [`super::require`] does for
/// a missing data node) rather than pass without having run.
pub fn old_elector(form: WireForm) -> PathBuf {
    let bin = old_electors_dir().join(form.commit()).join("elector");
    assert!(
        bin.is_file(),
        "SKIPPED: no {form:?} elector at {}: build it with scripts/build-old-electors.sh \
         (or run `just mixed-versions`, which builds it and runs these tests)",
        bin.display()
    );
    bin
}

impl Cluster {
    /// Like [`Cluster::start_with`], each node's elector from `builds`;
    /// again on fresh ports when a data port was taken.
    pub fn start_mixed(
        backend: super::Backend,
        n: usize,
        timings: (&str, u64),
        builds: &ElectorBuilds,
    ) -> Cluster {
        super::retry_on_taken_port(|| {
            Cluster::try_start(
                backend,
                (n, 0),
                timings,
                None,
                "",
                &|_| String::new(),
                builds,
            )
        })
    }

    /// One step of a rolling upgrade: stops node `i`'s elector as a service
    /// manager does (SIGTERM, a clean stop), keeps its log as
    /// `elector-<id>.previous.log` (printed with the others when a test
    /// fails), and starts `bin` on the same config, state directory and
    /// running data node.
    pub fn replace_elector(&mut self, i: usize, bin: PathBuf) {
        self.signal_elector(i, "TERM");
        self.wait_elector_exit(i, Duration::from_secs(10));
        self.keep_elector_log(i);
        self.nodes[i].elector_bin = bin;
        self.start_elector(i);
    }

    /// Writes `replication_gate: false` into node `i`'s config, for this
    /// build taking over from an elector older than the gate: its kevy
    /// listens where replicas dial it, and moving it behind the gate means
    /// restarting it with another config, more than a binary upgrade.
    pub fn config_keeps_the_gate_off(&self, i: usize) {
        let node = &self.nodes[i];
        let path = node.dir.join("elector.yaml");
        let yaml = std::fs::read_to_string(&path).unwrap();
        let address = format!("address: \"127.0.0.1:{}\"", node.data_port);
        assert!(yaml.contains(&address), "no data_node address in {yaml}");
        let yaml = yaml.replacen(&address, &format!("{address}, replication_gate: false"), 1);
        std::fs::write(path, yaml).unwrap();
    }

    /// Keeps node `i`'s elector log as `elector-<id>.previous.log` (printed
    /// with the others when a test fails), which the next start would
    /// otherwise begin afresh.
    pub fn keep_elector_log(&self, i: usize) {
        let node = &self.nodes[i];
        let log = node.dir.join(format!("elector-{}.log", node.id));
        let kept = node.dir.join(format!("elector-{}.previous.log", node.id));
        std::fs::rename(log, kept).unwrap();
    }
}
