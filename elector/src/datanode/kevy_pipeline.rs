//! The two pipelines a kevy adapter sends, as data: what each asks, in
//! which order and why, and how its replies become the policy's readings.
//! Pure, so the order (the token between two readings of the role; the
//! process mark on the same connection) is tested without a server; the
//! executor (`kevy.rs`) only sends them.

use super::info::parse_identity;
use super::kevy_mark::{exists_flags, MarkStep};
use super::kevy_policy::{KevyReading, PipelineRead};
use super::{DataNodeError, ReplicationInfo};

/// A pipeline as owned commands.
pub(crate) type Commands = Vec<Vec<String>>;

fn command(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_string()).collect()
}

/// The poll (`DataNodeAdapter::observe`): one round trip, the token between
/// two readings of the role (a role changed by another client in between
/// is then seen, not read as a stream: `KevyReading::info_after`), and
/// `SCRIPT EXISTS` about the marks the policy asks after (`kevy_mark`), or
/// a `PING` in its place so the replies keep their places.
pub(crate) fn observe(marks_asked: &[String]) -> Commands {
    let mut exists = command(&["SCRIPT", "EXISTS"]);
    exists.extend(marks_asked.iter().cloned());
    vec![
        command(&["INFO", "server"]),
        command(&["INFO", "replication"]),
        command(&["REPL.TOKEN"]),
        command(&["INFO", "replication"]),
        if marks_asked.is_empty() {
            command(&["PING"])
        } else {
            exists
        },
    ]
}

/// The poll's replies as the policy's reading. Raw replies, so that a
/// `-LOADING` token (a full resync) is a reading, not a failure; the role
/// and the identity must parse.
pub(crate) fn observed(
    replies: &[redis::Value],
    position_file: Option<String>,
    watchdog_clamps: Option<u64>,
    marks_asked: Vec<String>,
) -> Result<KevyReading, DataNodeError> {
    let mut info = ReplicationInfo::parse(&reply_text(replies, 1, "INFO replication")?)?;
    info.identity = parse_identity(&reply_text(replies, 0, "INFO server")?);
    let info_after = reply_text(replies, 3, "INFO replication")
        .ok()
        .and_then(|t| ReplicationInfo::parse(&t).ok());
    Ok(KevyReading {
        info,
        token: replies.get(2).cloned(),
        info_after,
        watchdog_clamps,
        position_file,
        marks_answer: (!marks_asked.is_empty())
            .then(|| replies.get(4).and_then(exists_flags))
            .flatten(),
        marks_asked,
    })
}

/// The `REPLICAOF` pipeline: our process mark checked or loaded on the same
/// connection (`kevy_mark`), then the runner's position read just before
/// the command ends it, the token between two readings of the role as in a
/// poll. `to` `None` is `REPLICAOF NO ONE`.
pub(crate) fn replicaof(to: Option<&(String, u16)>, mark: Option<&MarkStep>) -> Commands {
    let marking = match mark {
        Some(MarkStep::Check(sha)) => command(&["SCRIPT", "EXISTS", sha]),
        Some(MarkStep::Load(source)) => command(&["SCRIPT", "LOAD", source]),
        None => command(&["PING"]),
    };
    let replicaof = match to {
        Some((host, port)) => command(&["REPLICAOF", host, &port.to_string()]),
        None => command(&["REPLICAOF", "NO", "ONE"]),
    };
    vec![
        marking,
        command(&["INFO", "server"]),
        command(&["INFO", "replication"]),
        command(&["REPL.TOKEN"]),
        command(&["INFO", "replication"]),
        replicaof,
    ]
}

/// The `REPLICAOF` pipeline's replies (`commands` as sent): the server's
/// refusal of the `REPLICAOF` itself is an error; the readings before it
/// are the policy's to judge, each `None` when unreadable.
pub(crate) fn replicated(
    commands: &Commands,
    replies: &[redis::Value],
    mark: Option<&MarkStep>,
) -> Result<PipelineRead, DataNodeError> {
    let sent = commands.last().map(|c| c.join(" ")).unwrap_or_default();
    if let Some(e) = replies.get(5).and_then(|r| refused(&sent, r)) {
        return Err(e);
    }
    let (mark_present, mark_loaded) = match mark {
        Some(MarkStep::Check(_)) => (
            replies
                .first()
                .and_then(exists_flags)
                .and_then(|flags| flags.first().copied()),
            None,
        ),
        Some(MarkStep::Load(_)) => (None, reply_text(replies, 0, "SCRIPT LOAD").ok()),
        None => (None, None),
    };
    tracing::debug!(
        ?mark_present,
        ?mark_loaded,
        "kevy: the process mark in the REPLICAOF pipeline"
    );
    Ok(PipelineRead {
        server: reply_text(replies, 1, "INFO server").ok(),
        replication: reply_text(replies, 2, "INFO replication").ok(),
        token: replies.get(3).cloned(),
        replication_after: reply_text(replies, 4, "INFO replication").ok(),
        mark_present,
        mark_loaded,
    })
}

/// Reply `i` of a pipeline as text: a bulk string, else the server's
/// refusal of `command` or an unexpected reply.
fn reply_text(replies: &[redis::Value], i: usize, command: &str) -> Result<String, DataNodeError> {
    match replies.get(i) {
        Some(redis::Value::BulkString(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
        reply => Err(reply
            .and_then(|r| refused(command, r))
            .unwrap_or_else(|| DataNodeError::BadInfo(format!("{reply:?}")))),
    }
}

/// `reply`, when it is the server's error reply to `command`, as ours.
fn refused(command: &str, reply: &redis::Value) -> Option<DataNodeError> {
    let redis::Value::ServerError(e) = reply else {
        return None;
    };
    Some(DataNodeError::Refused {
        command: command.to_string(),
        message: format!("{}: {}", e.code(), e.details().unwrap_or_default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> redis::Value {
        redis::Value::BulkString(text.as_bytes().to_vec())
    }

    fn server_error(code: &str, details: &str) -> redis::Value {
        redis::parse_redis_value(format!("-{code} {details}\r\n").as_bytes())
            .expect("an error reply parses")
    }

    #[test]
    fn the_token_sits_between_two_readings_of_the_role_in_both_pipelines() {
        let poll = observe(&[]);
        assert_eq!(poll[2], ["REPL.TOKEN"]);
        assert_eq!(poll[1], ["INFO", "replication"]);
        assert_eq!(poll[3], ["INFO", "replication"]);
        assert_eq!(poll[4], ["PING"], "no mark asked: a PING keeps the places");
        let asked = observe(&["abc".to_string()]);
        assert_eq!(asked[4], ["SCRIPT", "EXISTS", "abc"]);
        let join = replicaof(Some(&("10.0.0.2".to_string(), 16379)), None);
        assert_eq!(join[3], ["REPL.TOKEN"]);
        assert_eq!(join[2], join[4]);
        assert_eq!(join[5], ["REPLICAOF", "10.0.0.2", "16379"]);
        assert_eq!(replicaof(None, None)[5], ["REPLICAOF", "NO", "ONE"]);
    }

    #[test]
    fn a_poll_reads_a_loading_token_as_a_reading_and_a_refused_role_as_an_error() {
        let mut replies = vec![
            bulk("run_id:x\r\nprocess_id:1\r\n"),
            bulk("role:slave\r\nslave_repl_offset:7\r\n"),
            server_error("LOADING", "kevy is loading the dataset in memory"),
            bulk("role:slave\r\nslave_repl_offset:7\r\n"),
            redis::Value::Array(vec![redis::Value::Int(1)]),
        ];
        let reading = observed(&replies, None, Some(2), vec!["abc".into()]).expect("a reading");
        assert_eq!(reading.info.offset, 7);
        assert!(matches!(reading.token, Some(redis::Value::ServerError(_))));
        assert_eq!(reading.marks_answer, Some(vec![true]));
        assert_eq!(reading.watchdog_clamps, Some(2));
        replies[1] = server_error("ERR", "no");
        assert!(matches!(
            observed(&replies, None, None, vec![]),
            Err(DataNodeError::Refused { .. })
        ));
    }

    #[test]
    fn a_refused_replicaof_is_an_error_and_a_loaded_mark_is_read_back() {
        let load = MarkStep::Load("return 1".into());
        let commands = replicaof(None, Some(&load));
        let mut replies = vec![
            bulk("sha1"),
            bulk("run_id:x\r\n"),
            bulk("role:master\r\nmaster_repl_offset:3\r\n"),
            redis::Value::Array(vec![redis::Value::Int(4), redis::Value::Int(3)]),
            bulk("role:master\r\nmaster_repl_offset:3\r\n"),
            redis::Value::Okay,
        ];
        let read = replicated(&commands, &replies, Some(&load)).expect("done");
        assert_eq!(read.mark_loaded.as_deref(), Some("sha1"));
        assert!(read.replication.is_some() && read.replication_after.is_some());
        replies[5] = server_error("ERR", "not now");
        match replicated(&commands, &replies, Some(&load)) {
            Err(DataNodeError::Refused { command, .. }) => assert_eq!(command, "REPLICAOF NO ONE"),
            other => panic!("{other:?}"),
        }
    }
}
