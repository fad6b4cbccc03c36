//! The simulator's data nodes as a target of the contract: the Redis-like
//! model and the kevy 7.0.0 model (`sim/datalayer.rs`, `sim/kevy.rs`),
//! each node behind the adapter code the simulator's electors run
//! (`sim/alone.rs`), on the simulator's clock.

use super::Target;
use crate::sim::datalayer::Entry;
use crate::sim::Sim;
use elector::core::DataNodeTarget;
use elector::datanode::ReplicationInfo;

pub struct SimTarget {
    pub sim: Sim,
    /// A reading as an adapter that trusts kevy's `INFO` would give it
    /// (the stream unnamed by the feed, the offset a lifetime maximum):
    /// the control that shows the contract can fail.
    pub reads_info_as_redis: bool,
    /// Per node, the highest offset it ever reported (for that control).
    lifetime_max: Vec<u64>,
}

impl SimTarget {
    pub fn new(seed: u64, kevy: bool) -> SimTarget {
        SimTarget {
            sim: Sim::data_nodes_alone(seed, 2, kevy),
            reads_info_as_redis: false,
            lifetime_max: vec![0; 2],
        }
    }
}

impl Target for SimTarget {
    type Write = (usize, Entry);

    fn name(&self) -> String {
        let kevy = self.sim.nodes[0].data.kevy.is_some();
        let model = if kevy { "kevy" } else { "Redis-like" };
        format!("the simulator's {model} model (seed {})", self.sim.seed)
    }

    fn fence_gives_way_to_demotion(&self) -> bool {
        self.sim.nodes[0].data.kevy.is_some()
    }

    fn address(&self, i: usize) -> String {
        format!("n{}:6379", i + 1)
    }

    fn apply(&mut self, i: usize, target: &DataNodeTarget) -> Result<(), String> {
        self.sim.adapter_apply(i, target).map_err(|e| e.to_string())
    }

    fn observe(&mut self, i: usize) -> Result<ReplicationInfo, String> {
        let mut info = self.sim.adapter_observe(i).map_err(|e| e.to_string())?;
        if self.reads_info_as_redis {
            self.lifetime_max[i] = self.lifetime_max[i].max(info.offset);
            info.offset = self.lifetime_max[i];
            info.stream = Some("the-one-stream".into());
            info.stream_prev = None;
        }
        Ok(info)
    }

    fn satisfies(&self, i: usize, info: &ReplicationInfo, target: &DataNodeTarget) -> bool {
        self.sim.adapter_satisfies(i, info, target)
    }

    fn write(&mut self, i: usize) -> Result<Self::Write, String> {
        self.sim
            .client_write(i)
            .ok_or_else(|| format!("n{} refused the write", i + 1))
    }

    fn write_acknowledged(&mut self, i: usize, replicas: u64) -> Result<Self::Write, String> {
        let (index, entry) = self.write(i)?;
        for _ in 0..200 {
            if self.sim.replicas_holding(i, index, &entry) as u64 >= replicas {
                return Ok((index, entry));
            }
            self.pass(10)?;
        }
        Err(format!("WAIT {replicas}: not acknowledged within 2 s"))
    }

    fn holds(&mut self, i: usize, (index, entry): &Self::Write) -> Option<bool> {
        let answers = !self.sim.data_frozen(i);
        let d = &self.sim.nodes[i].data;
        (d.up && answers).then(|| d.holds(*index, entry.chain))
    }

    fn pass(&mut self, ms: u64) -> Result<(), String> {
        let until = self.sim.now + ms;
        self.sim.run_until(until)
    }

    fn restart(&mut self, i: usize, keep_data: bool) {
        self.sim.restart_data(i, !keep_data);
    }

    fn pause(&mut self, i: usize, paused: bool) {
        if paused {
            self.sim.stall_data(i, 3_600_000);
        } else {
            self.sim.nodes[i].data.stalled_until = self.sim.now;
        }
    }
}
