//! Ports for loopback clusters: each node takes a data port and the few
//! after it, below the ephemeral range, reserved by a lock file against the
//! other tests of this process and of parallel test binaries.

use std::path::PathBuf;
use std::time::Duration;

/// Whether `p` can be bound the way a data node binds it: without
/// `SO_REUSEADDR`, so a port still holding `TIME_WAIT` sockets from a node a
/// previous test killed counts as taken (std's `TcpListener` sets
/// `SO_REUSEADDR` and would call it free, and kevy's bind would then fail).
pub(super) fn port_free(p: u16) -> bool {
    use socket2::{Domain, Socket, Type};
    let Ok(socket) = Socket::new(Domain::IPV4, Type::STREAM, None) else {
        return false;
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], p));
    socket.set_reuse_address(false).is_ok() && socket.bind(&addr.into()).is_ok()
}

/// The lock file that reserves a data port for this test process.
pub(super) fn port_lock(port: u16) -> PathBuf {
    std::env::temp_dir().join(format!("elector-test-port-{port}"))
}

/// Gives a port taken with [`data_port`] back.
pub(super) fn release_data_port(port: u16) {
    let _ = std::fs::remove_file(port_lock(port));
}

/// Data ports handed out so far by this process: each test gets a port no
/// earlier test of the process used, so a released port's lingering sockets
/// never meet the next node.
pub(super) static DATA_PORTS_TAKEN: std::sync::atomic::AtomicU16 =
    std::sync::atomic::AtomicU16::new(0);

/// How many ports after a data port [`data_port`] also finds free, for the
/// node's other listeners ([`companion_port`]).
pub(super) const COMPANION_PORTS: u16 = 3;

/// A data port whose companions (the next [`COMPANION_PORTS`] ports) and kevy
/// replication port (+10000) are free too, all below the ephemeral range so
/// the kernel never hands one out as a client's source port meanwhile.
pub(super) fn data_port() -> u16 {
    let seed = std::process::id() as u64 * 7919;
    let taken = DATA_PORTS_TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut candidate = 12_000 + ((seed + u64::from(taken)) % 1000) as u16 * 10;
    loop {
        let block_free = (0..=COMPANION_PORTS).all(|k| port_free(candidate + k));
        // +10000: the replication gate (kevy's listener with the gate off);
        // +10005: kevy's own listener behind the gate (a port ending in 5
        // is nobody's data, companion or gate port).
        let behind = candidate + super::KEVY_LOCAL_REPLICATION_OFFSET;
        if block_free && port_free(candidate + 10_000) && port_free(behind) {
            // Reserve it briefly against our own other tests by a lock file.
            let lock = port_lock(candidate);
            if std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock)
                .is_ok()
            {
                return candidate;
            }
            if lock
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(600))
            {
                let _ = std::fs::remove_file(&lock);
            }
        }
        candidate = if candidate >= 21_990 {
            12_000
        } else {
            candidate + 10
        };
    }
}

/// The `k`-th (1-based) port after a data port, reserved along with it by
/// [`data_port`]: electors' API, election and Sentinel listeners.
pub(super) fn companion_port(data_port: u16, k: u16) -> u16 {
    assert!(
        (1..=COMPANION_PORTS).contains(&k),
        "only {COMPANION_PORTS} companion ports are reserved"
    );
    data_port + k
}

/// A data node could not bind its port: someone else took it after it was
/// chosen.
#[derive(Debug)]
pub(super) struct PortTaken(pub(super) u16);
