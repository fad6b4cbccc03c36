//! Redis clients for tests: connect with retries, poll without blocking,
//! write and wait for a replica's acknowledgement.

use std::time::{Duration, Instant};

pub fn redis_client(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    loop_connect(&client)
}

/// One quick connection attempt (200 ms) with the given read timeout; `None`
/// when nothing answers: for polling loops that must not block on a dead node.
pub fn try_connect(host: &str, port: u16, read_timeout: Duration) -> Option<redis::Connection> {
    let client = redis::Client::open(format!("redis://{host}:{port}/")).ok()?;
    let conn = client
        .get_connection_with_timeout(Duration::from_millis(200))
        .ok()?;
    conn.set_read_timeout(Some(read_timeout)).ok()?;
    Some(conn)
}

fn loop_connect(client: &redis::Client) -> redis::Connection {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match client.get_connection_with_timeout(Duration::from_millis(300)) {
            Ok(c) => {
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                return c;
            }
            Err(e) if Instant::now() > deadline => panic!("cannot connect: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

pub trait Ping {
    fn ping(&mut self) -> redis::RedisResult<String>;
}
impl Ping for redis::Connection {
    fn ping(&mut self) -> redis::RedisResult<String> {
        redis::cmd("PING").query(self)
    }
}

pub fn wait_until(within: Duration, mut ok: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// SET then `WAIT 1`: `Some(true)` when a replica acknowledged it,
/// `Some(false)` when the server answered but did not (READONLY, WAIT 0),
/// `None` when the connection failed and the caller should reconnect.
pub fn write_acked(conn: &mut redis::Connection, key: &str) -> Option<bool> {
    let set: redis::RedisResult<String> = redis::cmd("SET").arg(key).arg("v").query(conn);
    match set {
        Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() => None,
        Err(_) => Some(false),
        Ok(_) => {
            let n: redis::RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(1000).query(conn);
            Some(n.is_ok_and(|n| n >= 1))
        }
    }
}

/// SET then `WAIT 1`: true when acknowledged by a replica.
pub fn acked_write(conn: &mut redis::Connection, key: &str) -> bool {
    write_acked(conn, key) == Some(true)
}
