//! Connection-level commands: `HELLO` (protocol choice) and `CLIENT`.

use super::super::reply::{Protocol, Reply};
use super::{lower, wrong_args, Session};

/// Reported as `version` in `HELLO` and `redis_version` in `INFO`; clients
/// gate features on it.
pub(super) const REPORTED_VERSION: &str = "7.0.0";

/// `HELLO [protover [AUTH u p] [SETNAME n]]`: RESP2 and RESP3. The reply is
/// encoded in the protocol just chosen, as Redis does.
pub(super) fn hello(args: &[Vec<u8>], session: &mut Session) -> Reply {
    let chosen = match args.first().map(Vec::as_slice) {
        None => session.proto,
        Some(b"2") => Protocol::Resp2,
        Some(b"3") => Protocol::Resp3,
        Some(_) => return Reply::err("NOPROTO sorry, this protocol version is not supported"),
    };
    let mut i = 1;
    let mut new_name = None;
    while i < args.len() {
        match lower(&args[i]).as_str() {
            "auth" if i + 2 < args.len() => i += 3,
            "setname" if i + 1 < args.len() => {
                new_name = Some(args[i + 1].clone());
                i += 2;
            }
            _ => return Reply::err("ERR Syntax error in HELLO option"),
        }
    }
    if new_name.is_some() {
        session.name = new_name;
    }
    session.proto = chosen;
    Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(REPORTED_VERSION)),
        (Reply::bulk("proto"), Reply::Int(chosen.version())),
        (Reply::bulk("id"), Reply::Int(session.client_id as i64)),
        (Reply::bulk("mode"), Reply::bulk("sentinel")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(Vec::new())),
    ])
}

/// `CLIENT SETNAME | GETNAME | SETINFO | ID`.
pub(super) fn client(args: &[Vec<u8>], session: &mut Session) -> Reply {
    let Some(sub) = args.first() else {
        return wrong_args("client");
    };
    match lower(sub).as_str() {
        "setname" => match args.get(1) {
            Some(n) => {
                session.name = Some(n.clone());
                Reply::ok()
            }
            None => wrong_args("client|setname"),
        },
        "getname" => session.name.clone().map(Reply::Bulk).unwrap_or(Reply::Nil),
        "setinfo" => Reply::ok(),
        "id" => Reply::Int(session.client_id as i64),
        other => Reply::err(format!(
            "ERR unknown subcommand '{other}'. Try CLIENT HELP."
        )),
    }
}
