//! `elector accept-data-loss`: the operator's explicit choice that one node
//! stands although it may lack acknowledged writes (docs/protocol.md §6.10).

use std::io::Write as _;
use std::time::Duration;

use super::{url, ApiClient, CliError};
use crate::api::request_auth::sign;
use crate::net::auth::{unix_ms_now, Secret};

/// POSTs `/accept-data-loss` to `node`, naming `node_id` as the body's
/// confirmation; prints what the node will do.
pub fn accept_data_loss_command(
    client: &ApiClient,
    node: &str,
    node_id: &str,
    key: Option<&Secret>,
) -> Result<(), CliError> {
    let path = "/accept-data-loss";
    let body = serde_json::json!({ "node": node_id }).to_string();
    let url = url(node, path);
    let mut req = client
        .agent(&url, Duration::from_secs(10))?
        .post(&url)
        .set("content-type", "application/json");
    if let Some(key) = key {
        let signed = sign(key, "POST", path, unix_ms_now(), body.as_bytes());
        req = req.set("authorization", &signed);
    }
    let (code, text) = match req.send_string(&body) {
        Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
        Err(ureq::Error::Transport(t)) => return Err(client.transport_error(&url, &t)),
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text.clone()));
    if code != 200 {
        let message = value["message"].as_str().unwrap_or(&text).to_string();
        return Err(CliError::Http {
            url,
            code,
            body: message,
        });
    }
    let pretty = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    writeln!(
        std::io::stdout(),
        "{node_id} accepts losing what its data node may lack and stands:\n{pretty}"
    )?;
    Ok(())
}
