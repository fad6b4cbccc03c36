//! `elector switchover`: a signed POST, redirected once to the primary.

use std::io::Write as _;
use std::time::Duration;

use super::{inherit_scheme, url, ApiClient, CliError};
use crate::api::request_auth::sign;
use crate::net::auth::{unix_ms_now, Secret};

/// POSTs a switchover; on 409 `not_primary` with the primary's API known,
/// asks that node instead (once), with `node`'s scheme ([`inherit_scheme`]).
pub fn switchover(
    client: &ApiClient,
    node: &str,
    to: &str,
    timeout: Duration,
    key: Option<&Secret>,
) -> Result<serde_json::Value, CliError> {
    let body = serde_json::json!({"to": to, "timeout_ms": timeout.as_millis() as u64}).to_string();
    let mut target = node.to_string();
    // A primary elected a moment ago answers `not_ready` until its data
    // node is promoted (protocol §8): asked again, for as long as the
    // switchover itself may take.
    let not_ready_until = std::time::Instant::now() + timeout;
    let mut attempt = 0;
    while attempt < 2 {
        let url = url(&target, "/switchover");
        let mut req = client
            .agent(&url, timeout + Duration::from_secs(10))?
            .post(&url)
            .set("content-type", "application/json");
        if let Some(key) = key {
            // A fresh timestamp per attempt: the API refuses a reused one.
            let signed = sign(key, "POST", "/switchover", unix_ms_now(), body.as_bytes());
            req = req.set("authorization", &signed);
        }
        let res = req.send_string(&body);
        let (code, text) = match res {
            Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
            Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
            Err(ureq::Error::Transport(t)) => return Err(client.transport_error(&url, &t)),
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text.clone()));
        if code == 200 {
            return Ok(value);
        }
        if code == 409
            && value["error"] == "not_ready"
            && std::time::Instant::now() < not_ready_until
        {
            tracing::info!(at = %target, why = %value["message"], "not now; asking again");
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        if code == 409 && value["error"] == "not_primary" && attempt == 0 {
            if let Some(api) = value["primary_api"].as_str() {
                tracing::info!(from = %target, to = api, "not the primary; asking the primary");
                target = inherit_scheme(node, api);
                attempt += 1;
                continue;
            }
        }
        let message = value["message"]
            .as_str()
            .map(|m| format!("HTTP {code}: {m}"))
            .unwrap_or_else(|| format!("HTTP {code}: {text}"));
        return Err(CliError::Switchover {
            to: to.to_string(),
            message,
        });
    }
    Err(CliError::Switchover {
        to: to.to_string(),
        message: "the node named as primary is not the primary either".into(),
    })
}

/// The peer a switchover should go to when the operator names none (a
/// Kubernetes preStop, a maintenance script): one the asked node hears
/// alive and judges eligible (§6.5: a data member with priority, its data
/// node up, not too far behind), the furthest ahead, ties to the lowest id.
/// `None` when no peer qualifies: then a switchover would only be refused.
pub fn pick_eligible(status: &crate::api::status::StatusSnapshot) -> Option<String> {
    status
        .peers
        .iter()
        .filter(|p| p.alive && p.eligible == Some(true))
        .max_by(|a, b| {
            a.offset
                .unwrap_or(0)
                .cmp(&b.offset.unwrap_or(0))
                .then_with(|| b.id.cmp(&a.id))
        })
        .map(|p| p.id.clone())
}

/// `elector switchover --node HOST:PORT --to ID [--timeout-ms N]`: prints the
/// outcome document (new epoch, measured write pause, ...).
pub fn switchover_command(
    client: &ApiClient,
    node: &str,
    to: &str,
    timeout: Duration,
    key: Option<&Secret>,
) -> Result<(), CliError> {
    let outcome = switchover(client, node, to, timeout, key)?;
    let pretty = serde_json::to_string_pretty(&outcome).unwrap_or_else(|_| outcome.to_string());
    let mut stdout = std::io::stdout();
    writeln!(stdout, "switchover to {to} completed:\n{pretty}")?;
    Ok(())
}
