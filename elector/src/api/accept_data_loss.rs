//! `POST /accept-data-loss`: the operator's explicit way out when every node
//! that could be elected may lack acknowledged writes (docs/protocol.md
//! §6.10). This node stands regardless of its floor; its offer says so, and
//! every voter that waives its own floor for it logs and counts it.
//!
//! The body must name this node (`{"node": "<its id>"}`): the request acts on
//! the node that receives it, and a mistyped address must not pick another.
//! With `auth.mode: shared_key` it must be signed like `/switchover`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};

use super::http::ApiState;
use crate::net::auth::unix_ms_now;

/// Forwarded to the runtime, which hands the core its event and answers
/// with what the node will do.
#[derive(Debug)]
pub struct AcceptDataLossRequest {
    pub reply: oneshot::Sender<Result<serde_json::Value, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    node: String,
}

pub(super) async fn accept_data_loss(
    State(state): State<ApiState>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let path = "/accept-data-loss";
    if let Some(verifier) = &state.request_auth {
        let signed = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if let Err(e) = verifier.verify(signed, "POST", path, &body, unix_ms_now()) {
            state.metrics.message_rejected("api_unauthorized");
            tracing::warn!(error = %e, "unauthenticated accept-data-loss request refused");
            let body = serde_json::json!({"error": "unauthorized", "message": e.to_string()});
            return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
        }
    }
    let me = state.status.borrow().node_id.clone();
    let confirmed = serde_json::from_slice::<Body>(&body).is_ok_and(|b| b.node == me);
    if !confirmed {
        let body = serde_json::json!({
            "error": "bad_request",
            "message": format!("the body must name this node: {{\"node\": \"{me}\"}}"),
        });
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    let (reply, answer) = oneshot::channel();
    if let Err(e) = state
        .accept_data_loss
        .try_send(AcceptDataLossRequest { reply })
    {
        let message = match e {
            mpsc::error::TrySendError::Full(_) => "a request is already being handled",
            mpsc::error::TrySendError::Closed(_) => "the elector is stopping",
        };
        let body = serde_json::json!({"error": "unavailable", "message": message});
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    }
    tracing::warn!("accept-data-loss requested over the API");
    match tokio::time::timeout(std::time::Duration::from_secs(5), answer).await {
        Ok(Ok(Ok(value))) => (StatusCode::OK, axum::Json(value)).into_response(),
        Ok(Ok(Err(why))) => {
            let body = serde_json::json!({"error": "refused", "message": why});
            (StatusCode::CONFLICT, axum::Json(body)).into_response()
        }
        _ => {
            let body = serde_json::json!({"error": "unavailable", "message": "no answer from the elector"});
            (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
        }
    }
}
