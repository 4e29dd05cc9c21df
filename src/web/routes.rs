//! The page's routes. `GET /` is the page itself (no session data, so no token); everything
//! else answers 401 without the token or a signed-in browser's cookie and 403 from another
//! `Host` or `Origin`:
//!
//! - `POST /api/sign-in` `{"code"}` or `{"token"}`: sets the browser's cookie.
//! - `GET /api/sessions`: every agent's sessions, each with its last commands.
//! - `GET /api/sessions/{agent}/{id}/events`: the screen as server-sent events (`hello` names
//!   the viewer, then a `screen` event each time it changes, at most every `FRAME_INTERVAL`).
//! - `POST /api/sessions/{agent}/{id}/keyboard` `{"viewer", "take"}`: take or release the
//!   keyboard; a viewer's hold ends with its event stream, so a closed tab never keeps it.
//! - `POST /api/sessions/{agent}/{id}/keys` `{"viewer", "keys"}`: what the person typed.
//!
//! POSTs must also carry `Content-Type: application/json`, which a page of another origin cannot
//! send without a preflight this server never grants.

use super::access::{Access, Refusal};
use super::screen_html;
use crate::service::{Held, Terminals};
use crate::session::{CommandsQuery, SessionHandle, status_text};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

/// The commands the page lists for each session, newest last.
const RECENT_COMMANDS: u64 = 5;
/// The cap on those commands' rendered lines, together.
const RECENT_COMMANDS_BYTES: usize = 8 * 1024;
/// The page: HTML, its style and script in one file, no outside resources.
const PAGE: &str = include_str!("page.html");
/// The shortest time between two screens sent to a viewer: a flood is shown at 20 frames a
/// second, not re-rendered for every chunk.
const FRAME_INTERVAL: Duration = Duration::from_millis(50);
/// The longest body a POST may have (keys typed at once, a pasted block).
const MAX_BODY: usize = 64 * 1024;
/// The holder name the page gives the session.
const HOLDER: &str = "a person (web page)";

/// One viewer's event stream and, while it holds it, the session's keyboard.
struct Viewer {
    agent: String,
    id: String,
    hold: Option<Arc<Held>>,
}

/// What the routes share.
pub(crate) struct Page {
    terminals: Terminals,
    access: Arc<Access>,
    viewers: Mutex<HashMap<u64, Viewer>>,
    next_viewer: AtomicU64,
}

type Shared = Arc<Page>;

impl Page {
    pub(crate) fn new(terminals: Terminals, access: Arc<Access>) -> Shared {
        Arc::new(Page {
            terminals,
            access,
            viewers: Mutex::default(),
            next_viewer: AtomicU64::new(1),
        })
    }

    fn viewers(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Viewer>> {
        self.viewers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn admit(&self, headers: &HeaderMap) -> Result<(), Problem> {
        Ok(self.access.admit(headers, Instant::now())?)
    }
}

pub(crate) fn router(page: Shared) -> axum::Router {
    axum::Router::new()
        .route("/", get(index))
        .route("/api/sign-in", post(sign_in))
        .route("/api/sessions", get(sessions))
        .route("/api/sessions/{agent}/{id}/events", get(events))
        .route("/api/sessions/{agent}/{id}/keyboard", post(keyboard))
        .route("/api/sessions/{agent}/{id}/keys", post(keys))
        .with_state(page)
}

/// A request the page does not answer with data: its status and words.
pub(crate) struct Problem {
    status: StatusCode,
    words: String,
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.words).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

impl From<Refusal> for Problem {
    fn from(refusal: Refusal) -> Problem {
        let (status, words) = refusal.status_and_words();
        Problem { status, words }
    }
}

impl From<crate::error::Error> for Problem {
    fn from(e: crate::error::Error) -> Problem {
        use crate::error::Error;
        let status = match &e {
            Error::InvalidArgument(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::FailedPrecondition(_) | Error::ResourceExhausted(_) => StatusCode::CONFLICT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Problem {
            status,
            words: format!("{e}\n"),
        }
    }
}

/// What a route answers.
type Answer = Result<Response, Problem>;

fn bad_request(words: impl Into<String>) -> Problem {
    Problem {
        status: StatusCode::BAD_REQUEST,
        words: words.into() + "\n",
    }
}

/// A POST's JSON body: only with the JSON content type, at most `MAX_BODY` bytes.
fn json_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, Problem> {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim() == "application/json");
    if !json_type {
        return Err(bad_request("the body must be application/json"));
    }
    if body.len() > MAX_BODY {
        return Err(bad_request(format!(
            "the body must be at most {MAX_BODY} bytes"
        )));
    }
    serde_json::from_slice(body).map_err(|e| bad_request(format!("the body is not JSON: {e}")))
}

async fn index(State(page): State<Shared>, headers: HeaderMap) -> Answer {
    page.access.same_place(&headers)?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; frame-ancestors 'none'",
            ),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE,
    )
        .into_response())
}

async fn sign_in(State(page): State<Shared>, headers: HeaderMap, body: Bytes) -> Answer {
    page.access.same_place(&headers)?;
    let body = json_body(&headers, &body)?;
    let presented = body
        .get("code")
        .or_else(|| body.get("token"))
        .and_then(Value::as_str)
        .unwrap_or("");
    match page.access.sign_in(presented, Instant::now()) {
        Some(browser) => Ok((
            StatusCode::NO_CONTENT,
            [(header::SET_COOKIE, Access::cookie(&browser))],
        )
            .into_response()),
        None => Err(Refusal::Unauthenticated.into()),
    }
}

/// A session as the page lists it.
fn session_json(handle: &SessionHandle) -> Value {
    let state = handle.state();
    json!({
        "agent": handle.spec.owner,
        "id": handle.spec.id,
        "name": handle.spec.name,
        "type": handle.spec.type_name,
        "status": status_text(state.status),
        "busy": state.busy,
        "attached": state.attached,
        "cols": state.cols,
        "rows": state.rows,
    })
}

async fn sessions(State(page): State<Shared>, headers: HeaderMap) -> Answer {
    page.admit(&headers)?;
    let mut all = page.terminals.all_sessions();
    all.sort_by(|a, b| {
        (&a.spec.owner, a.spec.id.len(), &a.spec.id).cmp(&(
            &b.spec.owner,
            b.spec.id.len(),
            &b.spec.id,
        ))
    });
    let mut list: Vec<Value> = Vec::with_capacity(all.len());
    for handle in &all {
        let mut session = session_json(handle);
        session["commands"] = recent_commands(handle).await;
        list.push(session);
    }
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        json!({ "sessions": list }).to_string(),
    )
        .into_response())
}

/// The session's last commands as its records give them (none for a session without them,
/// or one that ended meanwhile).
async fn recent_commands(handle: &SessionHandle) -> Value {
    let query = CommandsQuery {
        offset: 0,
        count: RECENT_COMMANDS,
        max_result_bytes: RECENT_COMMANDS_BYTES,
    };
    let commands = handle
        .commands(query)
        .await
        .map(|page| page.commands)
        .unwrap_or_default();
    commands
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "command": c.command,
                "exit_code": c.exit_code,
                "running": c.ended_unix_ms.is_none() && !c.refused,
                "typed_by": c.typed_by,
                "rendered": c.rendered,
            })
        })
        .collect()
}

/// Removes a viewer (and with it any hold on the keyboard) when its stream ends.
struct ViewerGone {
    page: Shared,
    viewer: u64,
}

impl Drop for ViewerGone {
    fn drop(&mut self) {
        self.page.viewers().remove(&self.viewer);
    }
}

async fn events(
    State(page): State<Shared>,
    Path((agent, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Answer {
    page.admit(&headers)?;
    let handle = page.terminals.session(&agent, &id)?;
    let live = handle.watch(0).await?.live;
    let viewer = page.next_viewer.fetch_add(1, Ordering::Relaxed);
    page.viewers().insert(
        viewer,
        Viewer {
            agent,
            id,
            hold: None,
        },
    );
    let gone = ViewerGone {
        page: page.clone(),
        viewer,
    };
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(4);
    tokio::spawn(follow(handle, live, tx, gone));
    Ok(Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// Sends the viewer the session's screen each time it changes, until the viewer goes or the
/// session ends (its last screen sent).
async fn follow(
    handle: SessionHandle,
    mut live: Option<broadcast::Receiver<Arc<[u8]>>>,
    tx: mpsc::Sender<Result<Event, Infallible>>,
    gone: ViewerGone,
) {
    let hello = json!({ "viewer": gone.viewer }).to_string();
    if tx
        .send(Ok(Event::default().event("hello").data(hello)))
        .await
        .is_err()
    {
        return;
    }
    let mut state = handle.state_changes();
    let mut last = String::new();
    loop {
        let Ok(page_screen) = handle.page_screen().await else {
            return;
        };
        let screen = &page_screen.screen;
        let holds = gone
            .page
            .viewers()
            .get(&gone.viewer)
            .is_some_and(|v| v.hold.is_some());
        let frame = json!({
            "html": screen_html::render(screen),
            "cols": screen.cols,
            "rows": screen.rows.len(),
            "alternate": screen.alternate,
            "password_prompt": page_screen.password_prompt,
            "session": session_json(&handle),
            "keyboard": holds,
        })
        .to_string();
        if frame != last {
            if tx
                .send(Ok(Event::default().event("screen").data(frame.clone())))
                .await
                .is_err()
            {
                return;
            }
            last = frame;
        }
        let ended = live.is_none();
        tokio::select! {
            output = next_change(&mut live) => if !output && ended { return; },
            changed = state.changed() => if changed.is_err() { return; },
            () = tx.closed() => return,
        }
        tokio::time::sleep(FRAME_INTERVAL).await;
    }
}

/// Waits for new output; `false` once the session's program ended (and every time after).
async fn next_change(live: &mut Option<broadcast::Receiver<Arc<[u8]>>>) -> bool {
    let Some(receiver) = live else {
        return std::future::pending().await;
    };
    match receiver.recv().await {
        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => true,
        Err(broadcast::error::RecvError::Closed) => {
            *live = None;
            false
        }
    }
}

/// The viewer a POST names, which must be following this session.
fn viewer_of(body: &Value, agent: &str, id: &str, page: &Page) -> Result<u64, Problem> {
    let viewer = body
        .get("viewer")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad_request("viewer must be the number the event stream's hello gave"))?;
    match page.viewers().get(&viewer) {
        Some(v) if v.agent == agent && v.id == id => Ok(viewer),
        _ => Err(bad_request(format!(
            "viewer {viewer} is not following {id}; open its event stream first"
        ))),
    }
}

async fn keyboard(
    State(page): State<Shared>,
    Path((agent, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    page.admit(&headers)?;
    let body = json_body(&headers, &body)?;
    let viewer = viewer_of(&body, &agent, &id, &page)?;
    let Some(take) = body.get("take").and_then(Value::as_bool) else {
        return Err(bad_request(
            "take must be true (take the keyboard) or false (release it)",
        ));
    };
    if !take {
        let hold = page.viewers().get_mut(&viewer).and_then(|v| v.hold.take());
        drop(hold);
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    if page
        .viewers()
        .get(&viewer)
        .is_some_and(|v| v.hold.is_some())
    {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let hold = page.terminals.take_keyboard(&agent, &id, HOLDER).await?;
    match page.viewers().get_mut(&viewer) {
        // The stream may have ended meanwhile: then the hold is dropped here, and detaches.
        Some(v) => v.hold = Some(Arc::new(hold)),
        None => return Err(bad_request(format!("viewer {viewer} went away"))),
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn keys(
    State(page): State<Shared>,
    Path((agent, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    page.admit(&headers)?;
    let body = json_body(&headers, &body)?;
    let viewer = viewer_of(&body, &agent, &id, &page)?;
    let Some(keys) = body.get("keys").and_then(Value::as_str) else {
        return Err(bad_request("keys must be the text typed"));
    };
    // A clone of the hold, so that the viewers' lock is not held while the keys are queued.
    let hold = page.viewers().get(&viewer).and_then(|v| v.hold.clone());
    let Some(hold) = hold else {
        return Err(Problem {
            status: StatusCode::CONFLICT,
            words: "take the keyboard first (Take keyboard)\n".into(),
        });
    };
    let written = hold.keys(keys.as_bytes().to_vec()).await;
    written?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
