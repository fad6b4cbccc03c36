//! Older elector binaries beside this build, for a rolling binary upgrade
//! (docs/protocol.md §3.8): where `scripts/build-old-electors.sh` puts them,
//! a cluster whose nodes start from different binaries, and swapping one
//! node's elector for another binary on the same config and state.

use std::path::PathBuf;
use std::time::Duration;

use super::ports::PortTaken;
use super::Cluster;

/// A wire form older than this tree's (docs/protocol.md §3.8), named by
/// what its electors read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireForm {
    /// No heartbeat flag `F`: reads neither the floor fields of `HB` nor
    /// `OFFER`'s `forced` (the commit before 2890e2e).
    Legacy,
    /// `F` but not `P`: `OFFER` with `forced`, without `led` (the commit
    /// before f809e42).
    Floors,
}

impl WireForm {
    /// The commit whose elector speaks this form, as the build script names
    /// its directory (`git rev-parse --short=7`).
    pub fn commit(self) -> &'static str {
        match self {
            WireForm::Legacy => "e9e61c6",
            WireForm::Floors => "dc9c913",
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
    /// Like [`Cluster::start_with`], node `i`'s elector (0-based) run from
    /// `bin_of(i)`; again on fresh ports when a data port was taken.
    pub fn start_mixed(
        backend: super::Backend,
        n: usize,
        timings: (&str, u64),
        bin_of: &dyn Fn(usize) -> PathBuf,
    ) -> Cluster {
        let mut tries = 0;
        loop {
            tries += 1;
            match Cluster::try_start(
                backend,
                (n, 0),
                timings,
                None,
                "",
                &|_| String::new(),
                bin_of,
            ) {
                Ok(cluster) => return cluster,
                Err(PortTaken(port)) if tries < 3 => {
                    eprintln!("data port {port} was taken before the node bound it; starting again on fresh ports");
                }
                Err(PortTaken(port)) => panic!("data port {port} taken on {tries} tries"),
            }
        }
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
