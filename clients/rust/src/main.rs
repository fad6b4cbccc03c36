//! The `redis` crate's `SentinelClient` in the loop every client in clients/
//! runs (clients/python/common.py describes the environment it reads and the
//! lines it prints). `client-redis-rs async` (the default) uses
//! `get_async_connection_with_config`, `client-redis-rs sync` `get_client` then
//! a blocking connection.
//!
//! Both ask the sentinels (`SENTINEL MASTERS`, then `ROLE` on the address
//! named) every time a connection is made; the application makes a new one
//! after any error, so the crate's own discovery follows the failover.
//!
//! The sync path connects to a sentinel with no connect timeout
//! (`sentinel::reconnect` -> `Client::get_connection`): when the host of a
//! sentinel earlier in the list has vanished (its container killed with the
//! primary: no RST, no ARP answer), discovery blocks in `connect()` for the
//! kernel's SYN retries (about two minutes). `TCP_USER_TIMEOUT` is set on both
//! paths but does not bound that connect. The async path has the crate's
//! default 1 s connection timeout. Seen against real Sentinel and the electors
//! alike (docs/clients.md).
#![forbid(unsafe_code)]

use redis::io::tcp::TcpSettings;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{AsyncConnectionConfig, ConnectionAddr};
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

fn emit(kind: &str, rest: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{kind} {} {}", now_ms(), rest.replace('\n', " "));
    let _ = out.flush();
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

struct Loop {
    prefix: String,
    stop_file: String,
    deadline: Instant,
    max_writes: u64,
    pace: Duration,
    i: u64,
}

impl Loop {
    fn from_env() -> Self {
        let secs: f64 = env_or("DEADLINE_S", "60").parse().unwrap_or(60.0);
        Self {
            prefix: env_or("PREFIX", "clients"),
            stop_file: env_or("STOP_FILE", ""),
            deadline: Instant::now() + Duration::from_secs_f64(secs),
            max_writes: env_or("MAX_WRITES", "20000").parse().unwrap_or(20_000),
            pace: Duration::from_millis(env_or("PACE_MS", "5").parse().unwrap_or(5)),
            i: 0,
        }
    }

    /// The next key, or None when the loop is over.
    fn next_key(&mut self) -> Option<String> {
        let stopped = !self.stop_file.is_empty()
            && self.i.is_multiple_of(10)
            && std::path::Path::new(&self.stop_file).exists();
        if self.i >= self.max_writes || Instant::now() >= self.deadline || stopped {
            return None;
        }
        self.i += 1;
        Some(format!("{}:{}", self.prefix, self.i - 1))
    }
}

fn client() -> SentinelClient {
    let sentinels: Vec<ConnectionAddr> = env_or("SENTINELS", "")
        .split(',')
        .filter_map(|s| s.rsplit_once(':'))
        .map(|(h, p)| ConnectionAddr::Tcp(h.to_string(), p.parse().unwrap_or(26379)))
        .collect();
    let tcp = TcpSettings::default().set_user_timeout(Duration::from_secs(1));
    SentinelClientBuilder::new(
        sentinels,
        env_or("MASTER", "mymaster"),
        SentinelServerType::Master,
    )
    .and_then(|b| {
        b.set_client_to_sentinel_tcp_settings(tcp.clone())
            .set_client_to_redis_tcp_settings(tcp)
            .build()
    })
    .expect("SENTINELS must be ip:port,ip:port")
}

fn write_pipe(key: &str) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.set(key, key).ignore().cmd("WAIT").arg(1).arg(1000);
    pipe
}

fn report(res: redis::RedisResult<(i64,)>, key: &str) -> bool {
    match res {
        Ok((n,)) => {
            emit(if n >= 1 { "ack" } else { "nack" }, key);
            true
        }
        Err(e) => {
            emit("err", &e.to_string());
            false
        }
    }
}

fn run_sync() {
    let mut client = client();
    let mut lp = Loop::from_env();
    let mut conn: Option<redis::Connection> = None;
    while let Some(key) = lp.next_key() {
        let mut c = match conn.take() {
            Some(c) => c,
            None => {
                let made = client.get_client().and_then(|node| {
                    emit("discover", &node.get_connection_info().addr().to_string());
                    let c = node.get_connection_with_timeout(Duration::from_secs(1))?;
                    c.set_read_timeout(Some(Duration::from_secs(2)))?;
                    c.set_write_timeout(Some(Duration::from_secs(2)))?;
                    Ok(c)
                });
                match made {
                    Ok(c) => c,
                    Err(e) => {
                        emit("err", &format!("connect: {e}"));
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                }
            }
        };
        if report(write_pipe(&key).query(&mut c), &key) {
            conn = Some(c);
            std::thread::sleep(lp.pace);
        } else {
            // Drop the connection: the next write asks the sentinels again.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

async fn run_async() {
    let mut client = client();
    let mut lp = Loop::from_env();
    // WAIT 1 1000 may take up to a second: above the crate's 500 ms default.
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    let mut conn = None;
    while let Some(key) = lp.next_key() {
        let mut c = match conn.take() {
            Some(c) => c,
            None => {
                // What `get_async_connection_with_config` does, in two steps so the
                // address the sentinels named can be printed.
                let made = match client.async_get_client().await {
                    Ok(node) => {
                        emit("discover", &node.get_connection_info().addr().to_string());
                        node.get_multiplexed_async_connection_with_config(&config)
                            .await
                    }
                    Err(e) => Err(e),
                };
                match made {
                    Ok(c) => c,
                    Err(e) => {
                        emit("err", &format!("connect: {e}"));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                }
            }
        };
        if report(write_pipe(&key).query_async(&mut c).await, &key) {
            conn = Some(c);
            tokio::time::sleep(lp.pace).await;
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "async".into());
    eprintln!("# redis crate 1.8.1, SentinelClient ({mode})");
    if mode == "sync" {
        run_sync();
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(run_async());
    }
}
