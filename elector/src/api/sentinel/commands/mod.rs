//! What each command answers. [`execute`] dispatches on the command name;
//! connection-level commands (`HELLO`, `CLIENT`) are in [`client`], Sentinel's
//! own (`SENTINEL ...`, `INFO`) in [`sentinel`]. Nothing here does I/O: a
//! command reads the shared view and changes only its own [`Session`].

mod client;
mod sentinel;

use super::pubsub::{Kind, Subscriptions};
use super::reply::{Protocol, Reply};
use super::Shared;

/// What one connection carries between commands.
pub(super) struct Session {
    pub(super) client_id: u64,
    /// `CLIENT SETNAME` / `HELLO ... SETNAME`.
    pub(super) name: Option<Vec<u8>>,
    /// RESP2 until the client says `HELLO 3` (redis-py 8 and Lettuce do).
    pub(super) proto: Protocol,
    pub(super) subs: Subscriptions,
}

impl Session {
    pub(super) fn new(client_id: u64) -> Self {
        Session {
            client_id,
            name: None,
            proto: Protocol::Resp2,
            subs: Subscriptions::default(),
        }
    }
}

/// The replies to one request (several for `SUBSCRIBE a b`) and whether to
/// close the connection after sending them.
pub(super) struct Answer {
    pub(super) replies: Vec<Reply>,
    pub(super) close: bool,
}

impl Answer {
    fn one(reply: Reply) -> Answer {
        Answer::many(vec![reply])
    }

    fn many(replies: Vec<Reply>) -> Answer {
        Answer {
            replies,
            close: false,
        }
    }
}

/// Commands a RESP2 connection may send while subscribed.
const ALLOWED_WHILE_SUBSCRIBED: &[&str] = &[
    "subscribe",
    "psubscribe",
    "unsubscribe",
    "punsubscribe",
    "ping",
    "quit",
    "reset",
];

/// Answers one request (`fields`: the command and its arguments).
pub(super) fn execute(fields: &[Vec<u8>], shared: &Shared, session: &mut Session) -> Answer {
    let Some(first) = fields.first() else {
        return Answer::one(Reply::err("ERR empty command"));
    };
    let cmd = lower(first);
    let args = &fields[1..];

    // RESP2 restricts a subscribed connection; RESP3 multiplexes replies and
    // pushes, so any command is allowed there (as in Redis 7).
    if session.proto == Protocol::Resp2
        && session.subs.active()
        && !ALLOWED_WHILE_SUBSCRIBED.contains(&cmd.as_str())
    {
        return Answer::one(Reply::err(format!(
            "ERR Can't execute '{cmd}': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        )));
    }

    match cmd.as_str() {
        "ping" => Answer::one(ping(args, session)),
        "echo" => Answer::one(match args {
            [m] => Reply::Bulk(m.clone()),
            _ => wrong_args("echo"),
        }),
        "quit" => Answer {
            replies: vec![Reply::ok()],
            close: true,
        },
        "reset" => {
            *session = Session::new(session.client_id);
            Answer::one(Reply::Simple("RESET".into()))
        }
        "hello" => Answer::one(client::hello(args, session)),
        "auth" => Answer::one(Reply::err(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        )),
        "client" => Answer::one(client::client(args, session)),
        "command" => Answer::one(Reply::Array(Vec::new())),
        "info" => Answer::one(Reply::Bulk(sentinel::info(shared).into_bytes())),
        "role" => {
            let view = shared.view.borrow();
            Answer::one(Reply::Array(vec![
                Reply::bulk("sentinel"),
                Reply::Array(vec![Reply::bulk(&view.master_name)]),
            ]))
        }
        "sentinel" => Answer::one(sentinel::sentinel(args, shared)),
        "subscribe" | "psubscribe" => {
            if args.is_empty() {
                return Answer::one(wrong_args(&cmd));
            }
            let kind = subscription_kind(&cmd);
            Answer::many(session.subs.subscribe(&cmd, kind, args, &shared.events))
        }
        "unsubscribe" | "punsubscribe" => {
            let kind = subscription_kind(&cmd);
            Answer::many(session.subs.unsubscribe(&cmd, kind, args))
        }
        _ => {
            let shown: Vec<String> = args
                .iter()
                .take(3)
                .map(|a| format!("'{}'", String::from_utf8_lossy(a)))
                .collect();
            Answer::one(Reply::err(format!(
                "ERR unknown command '{}', with args beginning with: {}",
                String::from_utf8_lossy(first),
                shown.join(" ")
            )))
        }
    }
}

/// `PING [message]`; a subscribed RESP2 connection gets `pong` as a message
/// array, as Redis sends it there.
fn ping(args: &[Vec<u8>], session: &Session) -> Reply {
    if session.subs.active() && session.proto == Protocol::Resp2 {
        let msg = args.first().cloned().unwrap_or_default();
        return Reply::Array(vec![Reply::bulk("pong"), Reply::Bulk(msg)]);
    }
    match args.first() {
        Some(m) => Reply::Bulk(m.clone()),
        None => Reply::Simple("PONG".into()),
    }
}

fn subscription_kind(cmd: &str) -> Kind {
    if cmd.starts_with('p') {
        Kind::Pattern
    } else {
        Kind::Channel
    }
}

fn lower(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_lowercase()
}

fn wrong_args(cmd: &str) -> Reply {
    Reply::err(format!("ERR wrong number of arguments for '{cmd}' command"))
}
