//! The tether: one connection to the data node that cannot outlive the
//! process that accepted it (docs/protocol.md §6.8, §6.10).
//!
//! A data node's process id is no identity: a kevy in its own PID namespace
//! is process 1 before and after a restart, and PIDs are reused; kevy has no
//! run id. A TCP connection is bound to the process that accepted it: when
//! that process dies, the kernel closes it, and no later process can answer
//! on it. So the adapter keeps this connection open, idle but for a `PING`
//! with each poll: answered, the same process still runs; refused or closed,
//! it died, whatever came back in its place (at any gap, with any PID); no
//! answer in time (a stalled node) proves nothing either way.
//!
//! Each connection is an *incarnation*, numbered from 1 in this elector. The
//! replication gate (`gate.rs`) forwards a replica only to the incarnation
//! the adapter validated, and checks with a `PING` on this very connection,
//! after its own connect to the data node, that it is still alive: a data
//! node that restarted between the two is caught by the dead tether.

use super::client::{connect, Credentials};
use super::{DataNodeError, COMMAND_TIMEOUT};
use redis::aio::MultiplexedConnection;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How long a `PING` on the tether may take before it proves nothing.
const PING_TIMEOUT: Duration = Duration::from_millis(500);

/// What one check of the tether found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TetherCheck {
    /// The first connection of this elector: the baseline incarnation.
    First(u64),
    /// The same process answered on the same connection.
    Same(u64),
    /// The connection had died (the process that held it is gone) and a new
    /// one was made: another process answers now.
    Replaced(u64),
    /// No answer in time: the process may be stalled; nothing is concluded.
    Unanswered,
    /// No connection could be made.
    Down,
}

impl TetherCheck {
    /// The incarnation now answering, if one was reached.
    pub fn incarnation(self) -> Option<u64> {
        match self {
            TetherCheck::First(n) | TetherCheck::Same(n) | TetherCheck::Replaced(n) => Some(n),
            TetherCheck::Unanswered | TetherCheck::Down => None,
        }
    }
}

/// The adapter's tether to its data node, shared with the gate.
pub struct Tether {
    address: String,
    credentials: Credentials,
    conn: Mutex<Option<(MultiplexedConnection, u64)>>,
    /// Incarnations handed out so far.
    made: AtomicU64,
}

/// What a `PING` on a live tether said.
enum Ping {
    Answered,
    Dead,
    Silent,
}

async fn ping(conn: &mut MultiplexedConnection) -> Ping {
    let cmd = redis::cmd("PING");
    match tokio::time::timeout(PING_TIMEOUT, cmd.query_async::<String>(conn)).await {
        Err(_) => Ping::Silent,
        // An error reply (`-LOADING`, `-NOAUTH`) comes from a live process.
        Ok(Err(e)) if e.kind() == redis::ErrorKind::ResponseError || e.code().is_some() => {
            Ping::Answered
        }
        Ok(Err(e)) if e.is_timeout() => Ping::Silent,
        Ok(Err(_)) => Ping::Dead,
        Ok(Ok(_)) => Ping::Answered,
    }
}

impl Tether {
    pub(crate) fn new(address: &str, credentials: &Credentials) -> Tether {
        Tether {
            address: address.to_string(),
            credentials: credentials.clone(),
            conn: Mutex::new(None),
            made: AtomicU64::new(0),
        }
    }

    fn current(&self) -> Option<(MultiplexedConnection, u64)> {
        self.conn.lock().ok()?.clone()
    }

    /// Drops the connection of `incarnation` (it is dead).
    fn bury(&self, incarnation: u64) {
        if let Ok(mut guard) = self.conn.lock() {
            if guard.as_ref().is_some_and(|(_, n)| *n == incarnation) {
                *guard = None;
            }
        }
    }

    async fn connect(&self) -> Result<MultiplexedConnection, DataNodeError> {
        tokio::time::timeout(COMMAND_TIMEOUT, connect(&self.address, &self.credentials))
            .await
            .map_err(|_| DataNodeError::Unreachable("tether connect timed out".into()))?
    }

    /// The adapter's check, once per poll: is the process that held the
    /// tether still the one answering?
    pub async fn check(&self) -> TetherCheck {
        if let Some((mut conn, incarnation)) = self.current() {
            match ping(&mut conn).await {
                Ping::Answered => return TetherCheck::Same(incarnation),
                Ping::Silent => return TetherCheck::Unanswered,
                Ping::Dead => self.bury(incarnation),
            }
        }
        let replaced = self.made.load(Ordering::SeqCst) > 0;
        match self.connect().await {
            Ok(conn) => {
                let incarnation = self.made.fetch_add(1, Ordering::SeqCst) + 1;
                if let Ok(mut guard) = self.conn.lock() {
                    *guard = Some((conn, incarnation));
                }
                if replaced {
                    tracing::warn!(incarnation, address = %self.address,
                        "tether: the data node's process changed (the connection it held died)");
                    TetherCheck::Replaced(incarnation)
                } else {
                    TetherCheck::First(incarnation)
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "tether: cannot connect to the data node");
                TetherCheck::Down
            }
        }
    }

    /// The gate's check: `incarnation` still answers on its own connection.
    /// Anything else (dead, replaced, silent) is a no.
    pub async fn verify(&self, incarnation: u64) -> bool {
        let Some((mut conn, current)) = self.current() else {
            return false;
        };
        if current != incarnation {
            return false;
        }
        match ping(&mut conn).await {
            Ping::Answered => true,
            Ping::Silent => false,
            Ping::Dead => {
                self.bury(incarnation);
                false
            }
        }
    }

    /// The incarnation the tether holds now, if any.
    pub fn incarnation(&self) -> Option<u64> {
        self.current().map(|(_, n)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_reached_process_has_an_incarnation() {
        assert_eq!(TetherCheck::Replaced(3).incarnation(), Some(3));
        assert_eq!(TetherCheck::Unanswered.incarnation(), None);
        assert_eq!(TetherCheck::Down.incarnation(), None);
    }

    #[tokio::test]
    async fn a_tether_to_nothing_is_down_and_verifies_nothing() {
        let t = Tether::new("127.0.0.1:1", &Credentials::default());
        assert_eq!(t.check().await, TetherCheck::Down);
        assert!(!t.verify(1).await);
        assert_eq!(t.incarnation(), None);
    }
}
