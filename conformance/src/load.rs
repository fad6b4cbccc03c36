//! A data set loaded into the primary before a fault (issue 35): failover
//! figures measured on an empty data set say nothing about a user's.
//!
//! Bounded in count (the keys the size needs) and in time (a deadline);
//! pipelined `SET`s over one connection, then `WAIT` until every replica
//! has acknowledged the whole set, so the fault
//! strikes a cluster in sync.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// `load_data: { mb: 100 }`: megabytes of values (keys `load:<i>`) of
/// `value_bytes` each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    pub mb: u64,
    #[serde(default = "default_value_bytes")]
    pub value_bytes: u64,
}

fn default_value_bytes() -> u64 {
    512
}

impl LoadSpec {
    /// The bound on one load, acknowledgements included: a minute plus a
    /// second per megabyte (the lab loads ~20 MB/s on 2 cores).
    pub fn budget(&self) -> Duration {
        Duration::from_millis(60_000 + self.mb * 1000)
    }

    /// Keys the size needs.
    pub fn keys(&self) -> u64 {
        (self.mb * 1024 * 1024).div_ceil(self.value_bytes.max(1))
    }
}

/// SETs per pipeline: large enough to keep the link busy, small enough that
/// one reply batch stays well under a megabyte.
const BATCH: u64 = 1000;

/// What a load did, for the step log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    pub keys: u64,
    pub load_ms: u64,
    /// From the last `SET` to the `WAIT` that counted every replica.
    pub ack_ms: u64,
}

fn err(message: String) -> Error {
    Error::Step {
        step: "load_data".into(),
        message,
    }
}

/// Loads `spec` into the data node at `addr` and waits for `replicas`
/// acknowledgements, all within `budget`.
pub async fn load(
    addr: &str,
    spec: &LoadSpec,
    replicas: usize,
    budget: Duration,
) -> Result<Loaded> {
    let started = tokio::time::Instant::now();
    let deadline = started + budget;
    let client = redis::Client::open(format!("redis://{addr}/")).map_err(|e| err(e.to_string()))?;
    let mut conn = tokio::time::timeout(
        Duration::from_secs(10),
        client.get_multiplexed_async_connection(),
    )
    .await
    .map_err(|_| err(format!("connect {addr}: timed out")))?
    .map_err(|e| err(format!("connect {addr}: {e}")))?;
    let value = "v".repeat(usize::try_from(spec.value_bytes).unwrap_or(512));
    let keys = spec.keys();
    let mut i = 0;
    while i < keys {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(err(format!("{i} of {keys} keys loaded within {budget:?}")));
        }
        let mut pipe = redis::pipe();
        for k in i..(i + BATCH).min(keys) {
            pipe.cmd("SET")
                .arg(format!("load:{k}"))
                .arg(&value)
                .ignore();
        }
        tokio::time::timeout(left, pipe.query_async::<()>(&mut conn))
            .await
            .map_err(|_| err(format!("{i} of {keys} keys loaded within {budget:?}")))?
            .map_err(|e| err(format!("SET load:{i}..: {e}")))?;
        i = (i + BATCH).min(keys);
    }
    let load_ms = started.elapsed().as_millis() as u64;
    let acked_from = tokio::time::Instant::now();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(err(format!(
                "{keys} keys loaded, not acknowledged by {replicas} replicas within {budget:?}"
            )));
        }
        let wait_ms = left.as_millis().min(5000) as u64;
        let n: i64 = tokio::time::timeout(
            left + Duration::from_secs(1),
            redis::cmd("WAIT")
                .arg(replicas)
                .arg(wait_ms)
                .query_async(&mut conn),
        )
        .await
        .map_err(|_| err("WAIT timed out".into()))?
        .map_err(|e| err(format!("WAIT: {e}")))?;
        if n >= replicas as i64 {
            break;
        }
        // A write per round keeps kevy's replicas acknowledging (they
        // acknowledge on frames, not on a clock).
        redis::cmd("SET")
            .arg("load:acked")
            .arg(keys)
            .query_async::<()>(&mut conn)
            .await
            .map_err(|e| err(format!("SET load:acked: {e}")))?;
    }
    Ok(Loaded {
        keys,
        load_ms,
        ack_ms: acked_from.elapsed().as_millis() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_in_megabytes_becomes_the_keys_of_its_value_size() {
        let s: LoadSpec = serde_yaml::from_str("mb: 100").unwrap();
        assert_eq!(s.value_bytes, 512);
        assert_eq!(s.keys(), 204_800);
        assert_eq!(
            LoadSpec {
                mb: 0,
                value_bytes: 512
            }
            .keys(),
            0
        );
    }
}
