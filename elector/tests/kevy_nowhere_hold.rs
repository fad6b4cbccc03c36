//! docs/architecture.md §kevy, "leaving NOWHERE waits out a backoff": a
//! kevy replica of NOWHERE (`127.0.0.1:1`) has its connect refused, sleeps
//! 250 ms and dials again, so a `REPLICAOF` that moves it on (here the
//! promotion, `REPLICAOF NO ONE`) joins a sleeping thread and waits out the
//! rest of the sleep. With the elector's hold listening on NOWHERE, the
//! thread waits in its handshake instead, and the release ends it at once.
//!
//! A real kevy 7.0.0 on loopback, inside a private network namespace (port
//! 1 is free there and nothing else of the host's is touched; needs root, as
//! binding port 1 does). Each round demotes kevy to NOWHERE, waits until its
//! thread has dialled, then times `REPLICAOF NO ONE`: with the hold
//! (released as the elector's adapter releases it) and, side by side, with
//! nothing listening.

mod support;

use elector::datanode::{NowhereHold, NOWHERE};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::netns::inside_private_netns;
use tokio::sync::watch;

const ROUNDS: usize = 10;

struct Kevy(Child);

impl Drop for Kevy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_kevy(dir: &std::path::Path, port: u16) -> Kevy {
    support::require("kevy");
    let toml = format!(
        "[server]\nbind = \"127.0.0.1\"\nport = {port}\nthreads = 1\ndata_dir = \"{}\"\n\
         [replication]\nrole = \"replica\"\nupstream = \"{}:{}\"\n",
        dir.join("data").display(),
        NOWHERE.0,
        NOWHERE.1
    );
    let path = dir.join("kevy.toml");
    std::fs::write(&path, toml).unwrap();
    let log = std::fs::File::create(dir.join("kevy.log")).unwrap();
    let kevy = Kevy(
        Command::new("kevy")
            .arg("--config")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start kevy"),
    );
    support::wait_until(
        Duration::from_secs(10),
        || support::try_connect("127.0.0.1", port, Duration::from_secs(1)).is_some(),
        "kevy to answer",
    );
    kevy
}

async fn connection(port: u16) -> redis::aio::MultiplexedConnection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Demotes kevy to NOWHERE and waits until its thread has dialled there
/// (held, with the hold; else an extra 0-250 ms into its refused cycle,
/// drawn by the round so the control samples the whole backoff).
async fn demote(
    c: &mut redis::aio::MultiplexedConnection,
    hold: Option<&NowhereHold>,
    round: usize,
) {
    let _: () = redis::cmd("REPLICAOF")
        .arg(NOWHERE.0)
        .arg(NOWHERE.1)
        .query_async(c)
        .await
        .unwrap();
    match hold {
        Some(hold) => {
            let deadline = Instant::now() + Duration::from_secs(5);
            while hold.held() == 0 {
                assert!(Instant::now() < deadline, "kevy's thread was never held");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        None => tokio::time::sleep(Duration::from_millis(300 + 25 * round as u64)).await,
    }
}

/// Times `REPLICAOF NO ONE`, releasing the hold meanwhile as the adapter does.
async fn promote(
    c: &mut redis::aio::MultiplexedConnection,
    hold: Option<&NowhereHold>,
) -> Duration {
    let (done_tx, done_rx) = watch::channel(false);
    let started = Instant::now();
    let command = async {
        let r: redis::RedisResult<()> = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(c)
            .await;
        let _ = done_tx.send(true);
        r.expect("REPLICAOF NO ONE");
        started.elapsed()
    };
    match hold {
        Some(hold) => tokio::join!(command, hold.release_until_done(done_rx)).0,
        None => command.await,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn a_promotion_from_nowhere_does_not_wait_out_kevys_reconnect_backoff_when_the_link_is_held() {
    const NAME: &str =
        "a_promotion_from_nowhere_does_not_wait_out_kevys_reconnect_backoff_when_the_link_is_held";
    if !inside_private_netns(NAME) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = 6379;
    let _kevy = start_kevy(dir.path(), port);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (held, refused) = rt.block_on(async {
        let mut c = connection(port).await;
        let hold = NowhereHold::start(port)
            .await
            .expect("listen on NOWHERE (root)");
        let mut held = Vec::new();
        for round in 0..ROUNDS {
            demote(&mut c, Some(&hold), round).await;
            held.push(promote(&mut c, Some(&hold)).await);
        }
        drop(hold);
        let mut refused = Vec::new();
        for round in 0..ROUNDS {
            demote(&mut c, None, round).await;
            refused.push(promote(&mut c, None).await);
        }
        (held, refused)
    });
    eprintln!("REPLICAOF NO ONE from NOWHERE, {ROUNDS} rounds each (ms):");
    eprintln!(
        "  held:    {:?}",
        held.iter().map(Duration::as_millis).collect::<Vec<_>>()
    );
    eprintln!(
        "  refused: {:?}",
        refused.iter().map(Duration::as_millis).collect::<Vec<_>>()
    );
    let (held, refused) = (median(held), median(refused));
    eprintln!("  medians: held {held:?}, refused {refused:?}");
    // Held: the first release, 20 ms after the command, ends the join. With
    // nothing listening the join waits out what is left of a 250 ms sleep,
    // 125 ms on average.
    assert!(
        held < Duration::from_millis(80),
        "the held link was not released promptly: median {held:?}"
    );
    assert!(
        held * 2 < refused,
        "the hold made no difference: held {held:?}, refused {refused:?}"
    );
}
