//! The small RESP client both backends use: one multiplexed connection,
//! reconnected on failure, every command bounded by [`COMMAND_TIMEOUT`].
//!
//! The connection is built from typed fields (the `redis` crate's
//! [`ConnectionInfo`]), never from a URL with the password spliced in: a
//! generated secret such as `p@ss:w/rd#1` is not a valid URL userinfo, and
//! the spliced URL failed to parse on every poll while `redis-cli -a`
//! worked. Each failure says what went wrong (credentials refused, refused
//! connection, timeout), because that is what an operator acts on.

use super::info::{parse_identity, ReplicationInfo};
use super::{DataNodeError, COMMAND_TIMEOUT};
use redis::aio::MultiplexedConnection;
use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, RedisConnectionInfo};

/// How the elector authenticates to its data node (`data_node.username`,
/// `data_node.password`): `AUTH password`, or `AUTH username password` for
/// a Redis ACL user; and over what (`data_node.tls`: TLS with its trust
/// anchors and client certificate, else plain TCP). The password never
/// appears in `Debug` output.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) tls: Option<super::tls::DataNodeTls>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .finish()
    }
}

/// `host:port` or `[v6]:port` into the crate's typed address.
fn connection_addr(address: &str) -> Option<ConnectionAddr> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some(ConnectionAddr::Tcp(host.to_string(), port.parse().ok()?))
}

/// The connection parameters for `address` with `credentials` (RESP2, db 0).
pub(crate) fn connection_info(
    address: &str,
    credentials: &Credentials,
) -> Result<ConnectionInfo, DataNodeError> {
    let addr = connection_addr(address).ok_or_else(|| DataNodeError::Resolve(address.into()))?;
    Ok(ConnectionInfo {
        addr,
        redis: RedisConnectionInfo {
            db: 0,
            username: credentials.username.clone(),
            password: credentials.password.clone(),
            ..RedisConnectionInfo::default()
        },
    })
}

/// Sorts a connect failure by its cause: a refused TCP connect means no
/// server runs there (restart detection, §6.8); refused credentials and
/// everything else are reported as unreachable with the cause in words.
pub(crate) fn connect_error(e: redis::RedisError) -> DataNodeError {
    if e.is_connection_refusal() {
        DataNodeError::Gone(format!("connection refused ({e})"))
    } else if e.kind() == ErrorKind::AuthenticationFailed
        || e.code().is_some_and(|c| c == "WRONGPASS" || c == "NOAUTH")
    {
        DataNodeError::Unreachable(format!(
            "authentication failed, check data_node.username/password ({e})"
        ))
    } else if e.is_timeout() {
        DataNodeError::Unreachable(format!("connect timed out ({e})"))
    } else {
        DataNodeError::Unreachable(e.to_string())
    }
}

/// One multiplexed connection to the data node at `address`, logged in
/// with `credentials`, over TLS when `data_node.tls` is set: the one dial
/// of the adapter's client and the tether alike. Callers bound it in time.
pub(crate) async fn connect(
    address: &str,
    credentials: &Credentials,
) -> Result<MultiplexedConnection, DataNodeError> {
    let info = connection_info(address, credentials)?;
    match &credentials.tls {
        Some(tls) => super::tls::connect(address, tls, &info.redis).await,
        None => {
            let client = redis::Client::open(info).map_err(connect_error)?;
            client
                .get_multiplexed_async_connection()
                .await
                .map_err(connect_error)
        }
    }
}

/// A lazily (re)connected client.
pub(crate) struct RespClient {
    address: String,
    credentials: Credentials,
    conn: Option<MultiplexedConnection>,
}

impl RespClient {
    pub(crate) fn new(address: &str, credentials: &Credentials) -> RespClient {
        RespClient {
            address: address.to_string(),
            credentials: credentials.clone(),
            conn: None,
        }
    }

    async fn connection(&mut self) -> Result<MultiplexedConnection, DataNodeError> {
        if let Some(c) = &self.conn {
            return Ok(c.clone());
        }
        let conn = tokio::time::timeout(COMMAND_TIMEOUT, connect(&self.address, &self.credentials))
            .await
            .map_err(|_| {
                DataNodeError::Unreachable(format!(
                    "connect to {} timed out after {} ms",
                    self.address,
                    COMMAND_TIMEOUT.as_millis()
                ))
            })??;
        self.conn = Some(conn.clone());
        Ok(conn)
    }

    /// Runs one command; a transport failure drops the connection so the
    /// next call reconnects.
    pub(crate) async fn call<T: redis::FromRedisValue>(
        &mut self,
        args: &[&str],
    ) -> Result<T, DataNodeError> {
        let mut conn = self.connection().await?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let outcome = tokio::time::timeout(COMMAND_TIMEOUT, cmd.query_async::<T>(&mut conn)).await;
        self.settle(|| args.join(" "), outcome)
    }

    /// A command's outcome as our error: a timeout or a transport failure
    /// drops the connection (the next call reconnects); anything else the
    /// server said is a refusal of `command`.
    fn settle<T>(
        &mut self,
        command: impl Fn() -> String,
        outcome: Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, DataNodeError> {
        match outcome {
            Err(_) => {
                self.conn = None;
                Err(DataNodeError::Unreachable(format!(
                    "{} timed out",
                    command()
                )))
            }
            Ok(Err(e)) if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() => {
                self.conn = None;
                Err(DataNodeError::Unreachable(e.to_string()))
            }
            Ok(Err(e)) if e.code() == Some("NOPERM") => Err(DataNodeError::Refused {
                command: command(),
                message: format!(
                    "{e}: the data node's ACL denies data_node.username a command the elector needs (the rule: docs/security.md)"
                ),
            }),
            Ok(Err(e)) => Err(DataNodeError::Refused {
                command: command(),
                message: e.to_string(),
            }),
            Ok(Ok(v)) => Ok(v),
        }
    }

    /// Sends the same command `times` times in one pipeline (one round
    /// trip, [`COMMAND_TIMEOUT`] for all of them).
    pub(crate) async fn repeat(&mut self, args: &[&str], times: u64) -> Result<(), DataNodeError> {
        let mut conn = self.connection().await?;
        let mut pipe = redis::pipe();
        for _ in 0..times {
            pipe.cmd(args[0]).arg(&args[1..]).ignore();
        }
        let outcome =
            tokio::time::timeout(COMMAND_TIMEOUT, pipe.query_async::<()>(&mut conn)).await;
        self.settle(|| format!("{} (x{times})", args.join(" ")), outcome)
    }

    /// Sends `commands` in one pipeline (one round trip, back to back on
    /// the server, [`COMMAND_TIMEOUT`] for all) and returns every reply as
    /// sent, a server error included (`Value::ServerError`): the caller
    /// tells which command it concerns.
    pub(crate) async fn pipeline(
        &mut self,
        commands: &[&[&str]],
    ) -> Result<Vec<redis::Value>, DataNodeError> {
        use redis::aio::ConnectionLike;
        let mut conn = self.connection().await?;
        let mut pipe = redis::pipe();
        for args in commands {
            pipe.cmd(args[0]).arg(&args[1..]);
        }
        let outcome = tokio::time::timeout(
            COMMAND_TIMEOUT,
            conn.req_packed_commands(&pipe, 0, commands.len()),
        )
        .await;
        self.settle(
            || {
                let all: Vec<String> = commands.iter().map(|c| c.join(" ")).collect();
                all.join("; ")
            },
            outcome,
        )
    }

    /// `REPLICAOF host port`.
    pub(crate) async fn replicaof(&mut self, host: &str, port: u16) -> Result<(), DataNodeError> {
        self.call::<String>(&["REPLICAOF", host, &port.to_string()])
            .await
            .map(drop)
    }

    /// `REPLICAOF NO ONE`: become a primary.
    pub(crate) async fn promote(&mut self) -> Result<(), DataNodeError> {
        self.call::<String>(&["REPLICAOF", "NO", "ONE"])
            .await
            .map(drop)
    }

    /// `INFO server` (for the identity) then `INFO replication`: kevy
    /// answers only the first section of a multi-section INFO.
    pub(crate) async fn replication_info(&mut self) -> Result<ReplicationInfo, DataNodeError> {
        let server: String = self.call(&["INFO", "server"]).await?;
        let text: String = self.call(&["INFO", "replication"]).await?;
        let mut info = ReplicationInfo::parse(&text)?;
        info.identity = parse_identity(&server);
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_with_url_characters_is_carried_verbatim() {
        let creds = Credentials {
            username: Some("elector".into()),
            password: Some("p@ss:w/rd#1".into()),
            tls: None,
        };
        let info = connection_info("127.0.0.1:6379", &creds).unwrap();
        assert_eq!(info.redis.password.as_deref(), Some("p@ss:w/rd#1"));
        assert_eq!(info.redis.username.as_deref(), Some("elector"));
        assert!(
            matches!(&info.addr, ConnectionAddr::Tcp(h, 6379) if h == "127.0.0.1"),
            "{:?}",
            info.addr
        );
    }

    #[test]
    fn a_bracketed_ipv6_address_loses_its_brackets() {
        let info = connection_info("[::1]:7000", &Credentials::default()).unwrap();
        assert!(
            matches!(&info.addr, ConnectionAddr::Tcp(h, 7000) if h == "::1"),
            "{:?}",
            info.addr
        );
    }

    #[test]
    fn the_password_is_redacted_in_debug_output() {
        let creds = Credentials {
            username: None,
            password: Some("s3cret".into()),
            tls: None,
        };
        assert!(!format!("{creds:?}").contains("s3cret"));
    }
}
