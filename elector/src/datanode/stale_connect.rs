//! Aborting kevy's hanging connects to a primary that is gone
//! (docs/architecture.md §kevy, "REPLICAOF waits for a hanging connect").
//!
//! kevy 7.0.0's `REPLICAOF` (and `REPLICAOF NO ONE`) stops the replication
//! thread and joins it. When the old primary's host is gone, that thread
//! spends its life in a blocking 5 s connect whose SYNs nobody answers, and
//! the join waits it out: the promotion of the successor, and every
//! replica's move to it, stall the whole server (PING too) for up to 5 s.
//! With a 1.5 s detection that stall is most of the failover.
//!
//! The thread cannot be told to give up, but its socket can: the kernel's
//! `SOCK_DESTROY` (`ss -K`) aborts a connect in `SYN-SENT` at once, and
//! the thread, already told to stop by our `REPLICAOF`, exits instead of
//! dialling again. We abort only connects to the replication address the
//! node is leaving, only while our command is outstanding, and only in the
//! elector's own network namespace (the data node's, by the sidecar
//! model). `SOCK_DESTROY` needs `CAP_NET_ADMIN` and a kernel built with
//! `CONFIG_INET_DIAG_DESTROY`; without them the failover is only slower,
//! and the first failure is logged with what to grant.

use std::net::IpAddr;
use std::time::Duration;
use thiserror::Error;
use tokio::process::Command;
use tokio::sync::watch;

/// How long after our command the first abort goes out: long enough for
/// kevy to have read the command and told the thread to stop (an abort
/// before that only makes the thread sleep its 250 ms backoff and dial
/// again), short enough to be lost in the failover's noise.
pub(crate) const FIRST_ABORT_AFTER: Duration = Duration::from_millis(20);
/// Further aborts while the command is still outstanding: just over kevy's
/// 250 ms reconnect backoff, so a thread that dialled again is caught.
pub(crate) const ABORT_AGAIN_EVERY: Duration = Duration::from_millis(300);
/// Aborts per command at most (the command's own timeout ends it sooner).
pub(crate) const MAX_ABORTS: u32 = 4;
/// `ss` itself answers in milliseconds; one stuck must not hold the adapter.
const SS_TIMEOUT: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub(crate) enum AbortError {
    #[error("`{0}` is not an IP address (the replication address kevy follows)")]
    NotAnAddress(String),
    #[error("cannot run `ss` (iproute2): {0}")]
    NoSs(String),
    #[error("`ss -K` did not finish within {0:?}")]
    Timeout(Duration),
    #[error(
        "the kernel refused SOCK_DESTROY ({0}): grant the elector CAP_NET_ADMIN \
         (a kernel with CONFIG_INET_DIAG_DESTROY) or set data_node.abort_stale_connects: false"
    )]
    Refused(String),
}

/// The `ss` arguments that abort this host's TCP connects, still in
/// `SYN-SENT`, to `host:port`. IPv6 addresses are bracketed, as `ss`'s
/// filter grammar wants.
pub(crate) fn ss_abort_args(host: &str, port: u16) -> Result<Vec<String>, AbortError> {
    let ip: IpAddr = host
        .parse()
        .map_err(|_| AbortError::NotAnAddress(host.to_string()))?;
    let dst = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    Ok([
        "-K", "-t", "-n", "-H", "state", "syn-sent", "dst", &dst, "dport", "=",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!(":{port}")])
    .collect())
}

/// Reads what `ss -K` printed: one line per aborted socket on stdout; the
/// kernel's refusal (`SOCK_DESTROY answers: ...`) on stderr, with exit 0.
pub(crate) fn parse_ss_output(stdout: &str, stderr: &str) -> Result<usize, AbortError> {
    if let Some(line) = stderr.lines().find(|l| l.contains("SOCK_DESTROY")) {
        let why = line.split_once(':').map_or(line, |(_, w)| w).trim();
        return Err(AbortError::Refused(why.to_string()));
    }
    Ok(stdout.lines().filter(|l| !l.trim().is_empty()).count())
}

/// Aborts connects in `SYN-SENT` to `host:port`; returns how many.
pub(crate) async fn abort_connects_to(host: &str, port: u16) -> Result<usize, AbortError> {
    let args = ss_abort_args(host, port)?;
    let run = Command::new("ss").args(&args).kill_on_drop(true).output();
    let out = tokio::time::timeout(SS_TIMEOUT, run)
        .await
        .map_err(|_| AbortError::Timeout(SS_TIMEOUT))?
        .map_err(|e| AbortError::NoSs(e.to_string()))?;
    if !out.status.success() {
        return Err(AbortError::NoSs(format!(
            "exit {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse_ss_output(
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
    )
}

/// What the aborts did over the life of one command.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct AbortTally {
    pub(crate) aborted: usize,
    pub(crate) error: Option<AbortError>,
    /// Connects held at NOWHERE and released so the thread could stop
    /// ([`super::nowhere_hold`]).
    pub(crate) released: usize,
}

/// Aborts connects to `host:port` after [`FIRST_ABORT_AFTER`] and again
/// every [`ABORT_AGAIN_EVERY`], [`MAX_ABORTS`] times at most, until `done`
/// turns true: the kevy command it unblocks has answered. An abort already
/// running when that happens is finished and counted (it is usually what
/// made the command answer).
pub(crate) async fn abort_until_done(
    host: String,
    port: u16,
    mut done: watch::Receiver<bool>,
) -> AbortTally {
    let mut tally = AbortTally::default();
    let mut wait = FIRST_ABORT_AFTER;
    for _ in 0..MAX_ABORTS {
        // `Err` from `wait_for`: the command's side is gone, so done too.
        if tokio::time::timeout(wait, done.wait_for(|d| *d))
            .await
            .is_ok()
        {
            break;
        }
        match abort_connects_to(&host, port).await {
            Ok(n) => tally.aborted += n,
            Err(e) => {
                // Retrying cannot fix a missing `ss` or privilege.
                tally.error = Some(e);
                break;
            }
        }
        wait = ABORT_AGAIN_EVERY;
    }
    tally
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_names_only_syn_sent_connects_to_the_old_replication_address() {
        let args = ss_abort_args("172.18.0.2", 16379).unwrap();
        assert_eq!(
            args.join(" "),
            "-K -t -n -H state syn-sent dst 172.18.0.2 dport = :16379"
        );
    }

    #[test]
    fn an_ipv6_address_is_bracketed_and_a_name_is_refused() {
        let args = ss_abort_args("fd00::2", 16379).unwrap();
        assert!(args.contains(&"[fd00::2]".to_string()));
        assert_eq!(
            ss_abort_args("kevy-1", 16379),
            Err(AbortError::NotAnAddress("kevy-1".into()))
        );
    }

    #[test]
    fn each_line_on_stdout_is_one_aborted_connect() {
        let stdout = "0 1 172.18.0.3:41002 172.18.0.2:16379\n\n";
        assert_eq!(parse_ss_output(stdout, ""), Ok(1));
        assert_eq!(parse_ss_output("", ""), Ok(0));
    }

    #[test]
    fn the_kernels_refusal_on_stderr_is_an_error_even_with_exit_zero() {
        let err = parse_ss_output("", "SOCK_DESTROY answers: Operation not permitted\n");
        assert_eq!(
            err,
            Err(AbortError::Refused("Operation not permitted".into()))
        );
        assert!(err.unwrap_err().to_string().contains("CAP_NET_ADMIN"));
    }
}
