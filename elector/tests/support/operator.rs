//! What an operator asks of a running cluster through the API.

use super::Cluster;
use std::time::{Duration, Instant};

/// `POST /switchover {"to": to}` on the API at `api_port`, asked again
/// while the primary answers 409 `not_ready` (elected a moment ago, its
/// data node not yet promoted: protocol §8) for up to 10 s. The reply, or
/// the refusal's status and body.
pub fn post_switchover(
    api_port: u16,
    to: &str,
    timeout_ms: u64,
) -> Result<serde_json::Value, String> {
    let url = format!("http://127.0.0.1:{api_port}/switchover");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match ureq::post(&url).send_json(serde_json::json!({"to": to, "timeout_ms": timeout_ms})) {
            Ok(r) => return r.into_json().map_err(|e| e.to_string()),
            Err(ureq::Error::Status(code, r)) => {
                let body = r.into_string().unwrap_or_default();
                let not_ready = code == 409 && body.contains("\"not_ready\"");
                if !not_ready || Instant::now() >= deadline {
                    return Err(format!("{code}: {body}"));
                }
                eprintln!("switchover not yet: {body}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

impl Cluster {
    /// `POST /switchover {"to": <node to's id>}` on node `from` (docs/protocol.md
    /// §8, 10 s to catch up; asked again while `not_ready`); its JSON reply,
    /// printed. Panics on a refusal, with the status and body.
    pub fn request_switchover(&self, from: usize, to: usize) -> serde_json::Value {
        let reply = post_switchover(self.nodes[from].api_port, &self.nodes[to].id, 10_000)
            .unwrap_or_else(|e| panic!("switchover refused {e}"));
        eprintln!("switchover reply: {reply}");
        reply
    }
}
