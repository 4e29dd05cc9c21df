//! A password prompt handed to a person by URL-mode elicitation (MCP 2025-11-25): a client that
//! declares it is asked to send its user to the web page opened on the session, with a one-time
//! sign-in link from the daemon. The user types the secret there; the server never asks for the
//! secret itself, and the link never reaches the model.

use rmcp::RoleServer;
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ProtocolVersion,
    ServerRequest,
};
use rmcp::service::RequestContext;
use std::time::Duration;

/// How long a call waits for the client's answer: the user's consent to open the page, which
/// comes before they type (the typing itself is not waited for; an empty send waits for the
/// command). Well under the 60 s a client commonly allows a whole tool call (the npm SDK's
/// default), which the send before it has used some of; a later consent still opens the page.
const ANSWER_WAIT: Duration = Duration::from_secs(20);

/// What the model reads under the wait line, by the user's answer.
const OPENED: &str =
    "[your user was sent to the web page to type it; an empty send waits for the command]";
const DECLINED: &str = "[your user declined to type it on the web page]";
const UNANSWERED: &str = "[your user was asked to type it on the web page; no answer yet]";
const FAILED: &str = "[the MCP client could not send its user to the web page]";

/// The bytes a line of [`ask`] may add to a result, with its newline (the first line is the
/// longest; the test holds it to that).
pub(crate) const ROOM: usize = 1 + OPENED.len();

/// Whether this request's client can be sent to a URL: it declared URL-mode elicitation, on a
/// revision that still lets a server ask its client something (2026-07-28 forbids it).
pub(crate) fn supported(context: &RequestContext<RoleServer>) -> bool {
    let may_ask = context
        .protocol_version()
        .is_some_and(|v| v < ProtocolVersion::V_2026_07_28);
    let declares_url = context.peer.peer_info().is_some_and(|info| {
        info.capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.url.is_some())
    });
    may_ask && declares_url
}

/// Asks the client to send its user to `url` (the page, signed in once, on `session_id`) and
/// returns the line that tells the model what the user answered.
pub(crate) async fn ask(
    context: &RequestContext<RoleServer>,
    session_id: &str,
    url: String,
) -> &'static str {
    let message = format!(
        "A command in terminal {session_id} asks for a password. Open the page to type it \
         yourself: the agent does not see it."
    );
    let params = ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message,
        url,
        // Unique among this server's requests: the session and the moment.
        elicitation_id: format!(
            "ptyd-{session_id}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ),
    };
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    match tokio::time::timeout(ANSWER_WAIT, context.peer.send_request(request)).await {
        Ok(Ok(ClientResult::ElicitResult(answer))) => match answer.action {
            ElicitationAction::Accept => OPENED,
            // Decline, Cancel, and whatever a later revision adds.
            _ => DECLINED,
        },
        Ok(Ok(other)) => {
            tracing::warn!(answer = ?other, "the client answered the elicitation otherwise");
            FAILED
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the client could not be sent to the web page");
            FAILED
        }
        Err(_) => UNANSWERED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_fits_the_longest_line() {
        for line in [OPENED, DECLINED, UNANSWERED, FAILED] {
            assert!(line.len() < ROOM, "{line}");
        }
    }
}
