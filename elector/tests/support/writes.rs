//! Writes a test makes the data safety promise about: acknowledged by a
//! replica (`WAIT 1`), and later looked for on another node.

use std::time::{Duration, Instant};

use super::{wait_until, Cluster};

/// `SET key v` then `WAIT replicas 1000`: true when that many replicas
/// acknowledged it (`replicas` 1 is [`super::acked_write`]).
pub fn acked_by(conn: &mut redis::Connection, key: &str, replicas: u64) -> bool {
    acked_value_by(conn, key, "v", replicas)
}

/// `SET key value` then `WAIT replicas 1000`, as [`acked_by`].
pub fn acked_value_by(conn: &mut redis::Connection, key: &str, value: &str, replicas: u64) -> bool {
    let set: redis::RedisResult<String> = redis::cmd("SET").arg(key).arg(value).query(conn);
    set.is_ok()
        && redis::cmd("WAIT")
            .arg(replicas)
            .arg(1000)
            .query::<i64>(conn)
            .is_ok_and(|n| n >= replicas as i64)
}

impl Cluster {
    /// `n` writes `<prefix>:<k>` on `primary` acknowledged by `WAIT 1`, after
    /// a first one (after an election kevy's replicas load a full snapshot
    /// first). kevy 7.0.0's `WAIT 1` often runs into its timeout although
    /// the replica is in sync (README "Known limits"), so it keeps writing
    /// (bounded) until `n` are acknowledged; at least half must be.
    pub fn acked_keys(&self, primary: usize, prefix: &str, n: usize) -> Vec<String> {
        self.acked_keys_by(primary, prefix, n, 1)
    }

    /// As [`Cluster::acked_keys`], each write acknowledged by `replicas`
    /// replicas (`WAIT <replicas> 1000`).
    pub fn acked_keys_by(
        &self,
        primary: usize,
        prefix: &str,
        n: usize,
        replicas: u64,
    ) -> Vec<String> {
        let mut conn = self.client(primary);
        wait_until(
            Duration::from_secs(15),
            || acked_by(&mut conn, &format!("{prefix}:warm-up"), replicas),
            "a first acknowledged write",
        );
        let deadline = Instant::now() + Duration::from_secs(40);
        let mut keys = Vec::new();
        for k in 0..10 * n {
            if keys.len() == n || Instant::now() > deadline {
                break;
            }
            let key = format!("{prefix}:{k}");
            if acked_by(&mut conn, &key, replicas) {
                keys.push(key);
            }
        }
        assert!(
            keys.len() >= n / 2,
            "{prefix}: only {} writes acknowledged",
            keys.len()
        );
        keys
    }

    /// The `keys` node `i`'s data node does not hold.
    pub fn missing_keys<'k>(&self, i: usize, keys: &'k [String]) -> Vec<&'k String> {
        let mut conn = self.client(i);
        keys.iter()
            .filter(|k| {
                redis::cmd("EXISTS")
                    .arg(k.as_str())
                    .query::<i64>(&mut conn)
                    .unwrap()
                    == 0
            })
            .collect()
    }
}
