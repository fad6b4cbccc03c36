//! What an operator asks of a running cluster through the API.

use super::Cluster;

impl Cluster {
    /// `POST /switchover {"to": <node to's id>}` on node `from` (docs/protocol.md
    /// §8, 10 s to catch up); its JSON reply, printed. Panics on a refusal,
    /// with the status and body.
    pub fn request_switchover(&self, from: usize, to: usize) -> serde_json::Value {
        let url = format!("http://127.0.0.1:{}/switchover", self.nodes[from].api_port);
        let reply: serde_json::Value = ureq::post(&url)
            .send_json(serde_json::json!({"to": self.nodes[to].id, "timeout_ms": 10_000}))
            .unwrap_or_else(|e| match e {
                ureq::Error::Status(code, r) => panic!(
                    "switchover refused {code}: {}",
                    r.into_string().unwrap_or_default()
                ),
                e => panic!("{e}"),
            })
            .into_json()
            .unwrap();
        eprintln!("switchover reply: {reply}");
        reply
    }
}
