//! What the data node is known to hold, and the floor below which this node
//! neither stands nor votes (docs/protocol.md §6.10).
//!
//! A data node's reading (`offset`) describes its content only while the
//! adapter has watched the same process since the reading's stream was
//! claimed. After the data node restarts (empty, from older files, or whole)
//! or the elector restarts (its memory of the process gone), the reading
//! proves nothing until it is tied to the durable record again: a reading
//! in the recorded stream (the backend names it: Redis `master_replid`,
//! kevy's feed generation), or a new claim (the data node joined a primary's
//! stream, or was promoted, in an epoch this node knows).
//!
//! The **floor** is the highest position the data node held while following
//! a primary with its link up or data arriving: the most it may have
//! acknowledged. It is durable (written with every vote and on its own,
//! §5.2), so it survives the elector, and it only rises. A node whose
//! position is unproven, or proven below its floor, does not stand (it may
//! lack writes it acknowledged, and a peer or a witness might vote for it)
//! and votes as if it held its floor (a holder of acknowledged writes must
//! never help elect a candidate without them). When only such nodes can
//! vote, nothing is elected until a node that holds the floor returns, or an
//! operator accepts the loss (`elector accept-data-loss`, §6.10).

use super::types::{Floor, Notice, Observation, StreamId, StreamRecord};
use super::Core;
use crate::core::types::Millis;
use crate::protocol::Heartbeat;

/// Whether the data node's reading describes its content (§6.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proof {
    /// Read from the same process since its stream was claimed, or in the
    /// recorded stream: the position is real.
    Proven,
    /// Nothing ties the reading to the durable record yet.
    Unproven(Unproven),
}

/// Why a position is not proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unproven {
    /// This elector started with a durable record and has not yet read its
    /// data node in the recorded stream.
    ElectorStarted,
    /// The data node came back as another process (or went backwards).
    DataNodeRestarted,
    /// On a backend whose promotions restart the stream (kevy), the data
    /// node reads in a stream other than the one its data epoch names,
    /// with no claim to tie it to: promoted by someone else, or its runner
    /// re-synced by itself from another process. Its offset counts in that
    /// other stream, not in the data epoch's.
    LeftStream,
    /// The elector's state was lost and reset (`--reset-state`): what its
    /// data node may have acknowledged is unknown until it joins a
    /// primary's stream (§5.2).
    StateReset,
}

impl Proof {
    pub fn as_str(self) -> &'static str {
        match self {
            Proof::Proven => "proven",
            Proof::Unproven(Unproven::ElectorStarted) => "unproven_after_elector_start",
            Proof::Unproven(Unproven::DataNodeRestarted) => "unproven_after_data_node_restart",
            Proof::Unproven(Unproven::LeftStream) => "unproven_left_its_stream",
            Proof::Unproven(Unproven::StateReset) => "unproven_after_state_reset",
        }
    }
}

/// The floor's durable write is held back at most this long while it rises
/// (it rides along with any earlier write, and goes at once when the node
/// stops following): a write per heartbeat at most, never per acknowledgement.
pub(crate) fn floor_sync_ms(hb_interval_ms: u64) -> u64 {
    hb_interval_ms.max(100)
}

impl Core {
    /// Proof state at start-up: a node with nothing durable has nothing to
    /// prove; one with a record must read its data node in that stream first.
    /// An unclaimed join is durable too (§6.10, "A join outlives its
    /// elector"): the join may have been the first data the node ever got,
    /// so it has no record, while its files hold what it acknowledged and a
    /// new process reads 0; it is proven once a reading finds the process
    /// the join was set out from ([`Core::prove_by_joining_process`]).
    pub(super) fn initial_proof(&self) -> Proof {
        let fresh = self.nothing_durable();
        let joined =
            self.unclaimed_join().is_some() && !self.cfg.faults.trust_a_fresh_start_during_a_join;
        if self.state.floor_unknown {
            Proof::Unproven(Unproven::StateReset)
        } else if fresh && !joined {
            Proof::Proven
        } else {
            Proof::Unproven(Unproven::ElectorStarted)
        }
    }

    /// No stream record and nothing to hold: a node whose data node got
    /// nothing it recorded (an unclaimed join aside).
    fn nothing_durable(&self) -> bool {
        self.state.floor.is_none()
            && self.state.held.is_none()
            && self.unplaced_hint().is_none()
            && self.state.stream.is_none()
    }

    /// A node that started with an unclaimed join and nothing else durable
    /// (no record, no floor) is proven by a reading that finds the data-node
    /// process the join was set out from (§6.10, "A join outlives its
    /// elector"): that process has run since, so its readings say what it
    /// received in the join (an unplaced reading, a watchdog's hint), as for
    /// a node whose elector never stopped. Another process may be reading
    /// 0 over files that hold what the join brought: no proof then (seed
    /// 5700). A first-epoch cluster whose electors restarted while their
    /// data nodes ran on is the case this frees (`new_address` on kevy).
    pub(super) fn prove_by_joining_process(&mut self, obs: &Observation) {
        if self.data.proof != Proof::Unproven(Unproven::ElectorStarted)
            || !obs.reachable
            || !self.data_settled()
            || !self.nothing_durable()
            || self.unclaimed_join().is_none()
        {
            return;
        }
        let Some(process) = self.state.joining_process.as_deref() else {
            return;
        };
        if Self::names_process(obs, process) {
            tracing::info!(
                process,
                joining = self.state.joining,
                "data node read as the process the join was set out from: position proven"
            );
            self.data.proof = Proof::Proven;
            self.note_below_floor_change();
        }
    }

    /// The position this node's data node provably holds, `(data_epoch,
    /// offset)`, or `None` while unproven or unread.
    pub(crate) fn proven_position(&self) -> Option<Floor> {
        if self.data.proof != Proof::Proven {
            return None;
        }
        let offset = self.data.obs.offset?;
        Some(Floor::new(self.state.data_epoch, offset))
    }

    /// The durable floor (§6.10).
    pub fn floor(&self) -> Option<Floor> {
        self.state.floor
    }

    /// What this node must not stand or vote below: its floor, what its
    /// data node held as primary, and what the watchdog saw it hold in a
    /// stream it was joining (§6.10).
    pub(crate) fn must_hold(&self) -> Option<Floor> {
        [
            self.state.floor,
            self.state.held,
            self.unclaimed_join_floor(),
        ]
        .into_iter()
        .flatten()
        .max()
    }

    /// What this node must not vote below (§6.10): as [`Core::must_hold`],
    /// but its held position only where the data promise needs an old
    /// primary's tail ([`super::CoreConfig::held_guards_the_promise`]), and
    /// what an unclaimed join holds it to only `with_unplaced` (not against the
    /// joined epoch's primary that disowned the join, `Core::join_disowned_by`).
    /// Elsewhere that tail is unacknowledged by construction, and counting
    /// it let an old primary whose data node came back unproven refuse its
    /// successor for ever (2 nodes, conformance `n2-primary-kill` on kevy).
    pub(crate) fn must_hold_when_voting(&self, with_unplaced: bool) -> Option<Floor> {
        let held = self
            .state
            .held
            .filter(|_| self.cfg.held_guards_the_promise());
        let unplaced = self.unclaimed_join_floor().filter(|_| with_unplaced);
        [self.state.floor, held, unplaced]
            .into_iter()
            .flatten()
            .max()
    }

    pub fn proof(&self) -> Proof {
        self.data.proof
    }

    /// This node must not stand: its data node may lack what it
    /// acknowledged (unproven, or proven below its floor).
    pub fn below_floor(&self) -> bool {
        if self.cfg.faults.ignore_floor {
            return false;
        }
        match (self.must_hold(), self.proven_position()) {
            (None, _) => self.data.proof != Proof::Proven,
            (Some(_), None) => true,
            (Some(floor), Some(at)) => at < floor,
        }
    }

    /// A settled observation may prove the position again: the reading is in
    /// the stream the durable record names (§6.10). Called after the claim
    /// (a claim proves by itself).
    pub(super) fn prove_from_reading(&mut self, obs: &Observation) {
        if self.data.proof == Proof::Proven || !obs.reachable || !self.data_settled() {
            return;
        }
        let Some(record) = self.state.stream.as_ref() else {
            return;
        };
        if record.data_epoch == self.state.data_epoch && obs.in_stream(&record.id) {
            tracing::info!(
                stream = %record.id, data_epoch = record.data_epoch, offset = ?obs.offset,
                "data node read in its recorded stream: position proven"
            );
            self.data.proof = Proof::Proven;
            self.note_below_floor_change();
        }
    }

    /// A proven position whose reading now names another stream than the
    /// one its data epoch records, on a backend whose every promotion
    /// starts a stream (kevy), is a position in that other stream: its
    /// offset says nothing of what the node holds of the data epoch's. It
    /// stands and votes again once a claim or a reading in the recorded
    /// stream ties it back (§6.10). The simulator found it (kevy seed 919,
    /// 5 nodes, with a hand promotion modelled as keeping the generation):
    /// a replica promoted by hand, fenced again, offered another stream's
    /// 367 frames as its data epoch's, outranked the holders of write 408
    /// and was elected without it. Redis continues its stream across a
    /// promotion (`master_replid2`), so this is kevy's only.
    pub(super) fn disprove_on_another_stream(&mut self, obs: &Observation) {
        if !self.cfg.backend.promotion_restarts_stream
            || self.cfg.faults.trust_another_stream
            || self.data.proof != Proof::Proven
            || !obs.reachable
            || obs.stream.is_none()
        {
            return;
        }
        let Some(record) = self.state.stream.as_ref() else {
            return;
        };
        if record.data_epoch != self.state.data_epoch || obs.in_stream(&record.id) {
            return;
        }
        tracing::warn!(
            recorded = %record.id, data_epoch = record.data_epoch, stream = ?obs.stream,
            offset = ?obs.offset,
            "data node reads in another stream than its data epoch's: position unproven"
        );
        self.data.proof = Proof::Unproven(Unproven::LeftStream);
        self.note_below_floor_change();
    }

    /// The data node joined (or started, as primary) the stream of
    /// `epoch`: its content is that stream's, whatever came before.
    pub(super) fn prove_by_claim(&mut self, epoch: u64, obs: &Observation) {
        if let Some(id) = obs.stream.clone() {
            let record = StreamRecord {
                data_epoch: epoch,
                id,
            };
            if self.state.stream.as_ref() != Some(&record) {
                self.state.stream = Some(record);
                self.outbox.persist();
            }
        }
        if self.state.floor_unknown {
            // Its data node now holds this stream's content: what it held
            // before the state was lost no longer counts (§5.2).
            tracing::info!(
                epoch,
                "data node joined a stream after the state reset: standing and voting again"
            );
            self.state.floor_unknown = false;
            self.outbox.persist();
        }
        if self.data.proof != Proof::Proven {
            tracing::info!(epoch, "data node joined a stream: position proven");
            self.data.proof = Proof::Proven;
            self.note_below_floor_change();
        }
    }

    /// Raises the floor to what the data node may have acknowledged while
    /// following: the conservative position (the stream it may have data
    /// from, §4.3) once data can have arrived. Primaries do not raise it:
    /// what they wrote is acknowledged by replicas, whose floors count
    /// (the data promise, §4.5), and a primary's own unacknowledged tail
    /// must not stop a legitimate successor.
    pub(super) fn raise_floor(&mut self, obs: &Observation) {
        if self.data.proof != Proof::Proven || !obs.reachable {
            return;
        }
        let epoch = self.state.epoch;
        let serving = self.data.serving.as_ref().is_some_and(|(e, _)| *e == epoch);
        if serving && obs.master && self.role.leadership().is_some() {
            let Some(offset) = obs.offset else { return };
            let at = Floor::new(self.state.data_epoch, offset);
            if self.state.held.is_none_or(|h| at > h) {
                self.state.held = Some(at);
                self.data.floor_dirty = true;
            }
            return;
        }
        // A replica holds only what it received, and acknowledged what it
        // received: in the stream we claimed, every reading is a floor,
        // whatever we asked of the node meanwhile (the simulator found it,
        // kevy seed 1553: a paused host resumed, caught up and acknowledged
        // 105 bytes during a slow detach that no reading saw under way).
        // Not in a stream this node served as primary: there its data is
        // its own tail, acknowledged or not (`held` covers it). In a stream
        // not yet recorded, only once data can have arrived.
        if obs.master {
            return;
        }
        let Some(offset) = obs.offset else { return };
        let in_record = self.state.stream.as_ref().is_some_and(|r| {
            r.data_epoch == self.state.data_epoch
                && obs.in_stream(&r.id)
                && self.state.held.is_none_or(|h| h.data_epoch < r.data_epoch)
        });
        let following = matches!(self.target.current, super::DataNodeTarget::Follow { .. })
            && self.data_settled();
        let moved = obs.offset_at_apply.is_some_and(|at| at != offset);
        if !in_record && !(following && (obs.link_up || moved)) {
            return;
        }
        let epoch = self.state.data_epoch.max(self.state.data_epoch_seen);
        let at = Floor::new(epoch, offset);
        if self.state.floor.is_none_or(|f| at > f) {
            self.state.floor = Some(at);
            self.data.floor_dirty = true;
        }
    }

    /// The watchdog's floor hints (§6.10): what the data node held when the
    /// watchdog detached it while this elector was silent. The entry of the
    /// stream the durable record names is a floor (what it may have
    /// acknowledged meanwhile), whatever the data node holds now; unless
    /// this node served that stream as its primary, where a reading after
    /// the clamp (a Redis primary demoted by it) is its own tail, which
    /// nobody acknowledged and which must not reach a witness as a floor
    /// (the simulator found it, 2+1 seed 2942: a successor holding every
    /// acknowledged write could never be elected).
    pub(super) fn absorb_floor_hint(&mut self, obs: &Observation) {
        if self.cfg.faults.ignore_floor {
            return;
        }
        let Some(record) = &self.state.stream else {
            return;
        };
        if self
            .state
            .held
            .is_some_and(|h| h.data_epoch >= record.data_epoch)
        {
            return;
        }
        let Some(offset) = obs
            .floor_hint
            .iter()
            .filter(|h| h.stream == record.id)
            .map(|h| h.offset)
            .max()
        else {
            return;
        };
        let at = Floor::new(record.data_epoch, offset);
        if self.state.floor.is_none_or(|f| at > f) {
            tracing::info!(floor = ?at, "floor raised by the watchdog's hint (what the data node held when it detached it)");
            self.state.floor = Some(at);
            self.data.floor_dirty = true;
        }
    }

    /// The epoch this node set out to join and has not claimed (§6.10): its
    /// data node may hold that stream's writes under a name no record of
    /// ours carries.
    pub(super) fn unclaimed_join(&self) -> Option<u64> {
        let claimed = self
            .state
            .data_epoch
            .max(self.state.stream.as_ref().map_or(0, |r| r.data_epoch));
        (self.state.joining > claimed).then_some(self.state.joining)
    }

    /// An unclaimed join this process did not make itself (§6.10): one it
    /// makes, it watches, and its readings claim the stream as data
    /// arrives; counting its readings as positions in the joined epoch
    /// would only deadlock a cluster whose new primary died before any
    /// replica linked up (the simulator found it: every voter judged by an
    /// epoch no candidate could offer).
    pub(super) fn inherited_unclaimed_join(&self) -> Option<u64> {
        self.unclaimed_join()
            .filter(|_| self.data.inherited_join)
            .filter(|&joined| self.data.void_join != Some(joined))
    }

    /// The joined epoch's primary says, in a heartbeat of that epoch sent
    /// as a replica, that it never told its data node to take writes there
    /// (flag `u`, §6.10): no write of that epoch was ever taken, so what
    /// this node's data node read during the join is an older stream's, for
    /// every candidate (simulator seed 7951: the new primary's disk failed
    /// before it promoted, and the four nodes that had set out to follow it
    /// refused each other for ever). Only as a replica: a primary of that
    /// epoch still waiting for its lease may promote a moment later (seed
    /// 23 on kevy with loading, when this heeded a fenced primary's word:
    /// an acknowledged write lost), while a node that is a replica in an
    /// epoch never leads it again (a new primary needs a new epoch), and
    /// `led` is durable before any promotion: the word then holds for good.
    pub(super) fn note_void_join(&mut self, from: &str, hb: &Heartbeat) {
        let Some(joined) = self.unclaimed_join() else {
            return;
        };
        if hb.unled
            && hb.role != crate::protocol::Role::Primary
            && hb.epoch == joined
            && self.state.joining_primary.as_deref() == Some(from)
            && self.data.void_join != Some(joined)
        {
            tracing::info!(
                joined, primary = %from,
                "the joined epoch's primary never led it: the unclaimed join places nothing"
            );
            self.data.void_join = Some(joined);
        }
    }

    /// Keeps track of whether the data node is the process the unclaimed
    /// join was set out from: a reading that names it says so, one that
    /// names only other processes says not (a restart says not too,
    /// `Core::on_data_node_restarted`, and so does this elector's start
    /// until a reading names it). A reading that names nobody (a kevy whose
    /// mark is not loaded yet) changes nothing.
    pub(super) fn note_joining_process(&mut self, obs: &Observation) {
        let Some(process) = self.state.joining_process.as_deref() else {
            return;
        };
        if !obs.reachable || obs.process_names.is_empty() || self.unclaimed_join().is_none() {
            // A claimed join's process says nothing any more (and logging
            // each of its restarts would only be noise).
            return;
        }
        let gone = !Self::names_process(obs, process);
        if gone != self.data.joining_process_gone {
            tracing::info!(
                process,
                gone,
                joining = self.state.joining,
                "data node read as the process the join was set out from, or as another"
            );
            self.data.joining_process_gone = gone;
        }
    }

    /// An inherited unclaimed join whose process is gone: `(joined, 0)`,
    /// a floor (§6.10, "A join whose process is gone"). The process the
    /// join was set out from may have received, and acknowledged, the
    /// joined stream's writes; another process (a host crash, a restart
    /// under a running elector) may read an *older* stream from older
    /// files, which the record names, so the reading proves a position
    /// that lacks them. Seed 1588's shape (kevy with loading): n3
    /// acknowledged write 133 of epoch 3 while loading n1's snapshot, its
    /// host crashed, its kevy came back reading the recorded epoch 1 at 28,
    /// and n3 voted for n2 at `(1, 106)`, made writable without the write.
    /// Until the joined stream is claimed, the joined primary frees the
    /// join (`led`, `u`) or an operator accepts the loss, the node neither
    /// stands nor votes below `(joined, 0)`; in the joined epoch it votes
    /// only for the joined primary ([`Core::unproven_join_refuses`]).
    pub(super) fn join_of_a_gone_process(&self) -> Option<Floor> {
        if self.cfg.faults.trust_a_recorded_reading_during_a_join || !self.data.joining_process_gone
        {
            return None;
        }
        let joined = self.inherited_unclaimed_join()?;
        Some(Floor::new(joined, 0))
    }

    /// What an inherited unclaimed join holds the node to (§6.10): the
    /// watchdog's unplaced hint, or `(joined, 0)` when the join's process
    /// is gone, the higher. The joined epoch's own primary can waive it
    /// (`Core::join_disowned_by`, `Core::joined_source_offers`).
    fn unclaimed_join_floor(&self) -> Option<Floor> {
        self.unplaced_hint().max(self.join_of_a_gone_process())
    }

    /// Whether `stream` is the one the durable record names (a reading of
    /// an unnamed stream is not).
    fn is_recorded_stream(&self, stream: Option<&StreamId>) -> bool {
        match (stream, &self.state.stream) {
            (Some(s), Some(r)) => *s == r.id,
            _ => false,
        }
    }

    /// During an unclaimed join, the watchdog's hints written under that
    /// same join in a stream no record names: positions in the joined
    /// epoch's stream, for all we know (§6.10).
    fn unplaced_hint(&self) -> Option<Floor> {
        let epoch = self.inherited_unclaimed_join()?;
        self.data
            .obs
            .floor_hint
            .iter()
            .filter(|h| h.joining == epoch && !self.is_recorded_stream(Some(&h.stream)))
            .map(|h| h.offset)
            .max()
            .map(|offset| Floor::new(epoch, offset))
    }

    /// During an unclaimed join, the data node's reading in a stream other
    /// than the recorded one (including one that continues it: a Redis
    /// replica that joined the new primary carries the new primary's
    /// `master_replid`, the recorded one as `master_replid2`): a position
    /// in the joined epoch's stream, for all we know (§6.10). Used when
    /// voting only; standing needs a claim anyway. An empty data node
    /// (offset 0) holds nothing of any stream, so places nothing: counted
    /// as `(joined epoch, 0)` it refused every candidate of an older data
    /// epoch on behalf of writes it does not hold, and two nodes could
    /// then elect nobody (simulator, kevy, two nodes, seed 159: the joined
    /// epoch's primary was never made writable). What it held before is
    /// the floor's and the watchdog hint's to say. Only a *proven* 0 is
    /// empty: after its data node or this elector restarted, a kevy's
    /// `INFO` offset starts again at 0 with the process while its files
    /// may hold the joined stream's writes, so an unproven reading places
    /// `(joined epoch, 0)` (simulator, kevy with snapshot loading, seed 111:
    /// a replica acknowledged write 828 of epoch 2 while loading n2's
    /// snapshot, its host crashed, and back with its files it read 0 and
    /// voted for the old primary of epoch 1, which lacked the write; the
    /// model had hidden it by trusting a position file across restarts).
    pub(super) fn unplaced_reading(&self) -> Option<(u64, u64)> {
        let epoch = self.inherited_unclaimed_join()?;
        let obs = &self.data.obs;
        if !obs.reachable || self.is_recorded_stream(obs.stream.as_ref()) {
            return None;
        }
        let offset = obs.offset.unwrap_or(0);
        if offset == 0 && self.reading_vouched_for() {
            return None;
        }
        Some((epoch, offset))
    }

    /// Whether the data node's reading says what it holds as a running
    /// elector's would (§6.10, "A join outlives its elector"): the position
    /// is proven, or the reading names the very process the unclaimed join
    /// was set out from. That process has run since the join, so its
    /// offset did not start again with a new process (what "An unproven
    /// join" guards against): it reads what it holds of the joined stream
    /// exactly as it would under an elector that never stopped, whose
    /// reading is already counted so (a proven 0 is empty, a proven offset
    /// is compared plainly). Only the elector's memory was lost, and the
    /// durable record, floor and process mark carry what of it matters.
    /// The chaos run found the difference (kevy, five nodes, seed 7): n1's
    /// elector restarted during a join while its kevy ran on and read 0 in
    /// the joined stream; counted unproven, it refused n4 at `(7, 47)` for
    /// ever and the operator was called.
    fn reading_vouched_for(&self) -> bool {
        if self.data.proof == Proof::Proven {
            return true;
        }
        if self.cfg.faults.doubt_the_joining_process || self.data.joining_process_gone {
            return false;
        }
        self.state
            .joining_process
            .as_deref()
            .is_some_and(|process| Self::names_process(&self.data.obs, process))
    }

    /// Whether `obs` was read from the data-node process named `process`
    /// (§6.10's process names: Redis's `run_id`, kevy's process mark).
    fn names_process(obs: &Observation, process: &str) -> bool {
        obs.process_names.iter().any(|n| n == process)
    }

    /// An inherited unclaimed join read unproven refuses `candidate` at
    /// `position` when the candidate is of the joined epoch and is not the
    /// joined primary (§6.10, "An unproven join"). The unproven reading
    /// places `(joined, 0)`: the *least* this node holds in the joined
    /// stream, not the most it may have acknowledged there, which nothing
    /// tells any more (a kevy's offset starts again at 0 with its process
    /// while its files may hold the stream). Another replica that claimed
    /// the joined stream at some offset may lack a write this node
    /// acknowledged further on (simulator, kevy with loading, five nodes,
    /// seed 1937: n4, which claimed epoch 8 at offset 78, was elected
    /// without write 944 that n5 had acknowledged before its host died
    /// while loading). The joined primary, the stream's source, holds all
    /// of it; a candidate of a later epoch was elected past the floors of
    /// its own voters; one of an older epoch is already below `(joined, 0)`.
    pub(super) fn unproven_join_refuses(&self, candidate: &str, position: (u64, u64)) -> bool {
        if self.cfg.faults.count_an_unproven_join_from_zero {
            return false;
        }
        let unproven = self
            .unplaced_reading()
            .filter(|_| !self.reading_vouched_for())
            .map(|(joined, _)| joined);
        let Some(joined) = unproven.or(self.join_of_a_gone_process().map(|f| f.data_epoch)) else {
            return false;
        };
        position.0 == joined && self.state.joining_primary.as_deref() != Some(candidate)
    }

    /// Writes a risen floor once a heartbeat at most, or at once when
    /// `now_too` (the node stops following: its floor is final there).
    pub(super) fn sync_floor(&mut self, now_too: bool) {
        if !self.data.floor_dirty {
            return;
        }
        let due = self.data.floor_written_at.is_none_or(|at: Millis| {
            self.now >= at + floor_sync_ms(self.cfg.timings.hb_interval_ms)
        });
        if now_too || due || self.outbox.writing() {
            self.data.floor_dirty = false;
            self.data.floor_written_at = Some(self.now);
            self.outbox.persist_background();
        }
    }

    /// Logs and reports a change of the node's standing against its floor.
    pub(super) fn note_below_floor_change(&mut self) {
        let below = self.below_floor();
        if below == self.data.below_floor_reported {
            return;
        }
        self.data.below_floor_reported = below;
        if below {
            tracing::warn!(
                floor = ?self.state.floor, must_hold = ?self.must_hold(),
                join_of_a_gone_process = ?self.join_of_a_gone_process(),
                proof = self.data.proof.as_str(), position = ?self.proven_position(),
                "data node below its floor: not standing, voting with the floor"
            );
            self.notify(Notice::Fault {
                what: format!(
                    "data node below its floor ({}): this node does not stand until it holds the floor again or an operator accepts the loss",
                    self.data.proof.as_str()
                ),
            });
        } else {
            tracing::info!(floor = ?self.state.floor, position = ?self.proven_position(), "data node holds its floor again");
        }
    }
}
