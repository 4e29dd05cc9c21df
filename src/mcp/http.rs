//! Streamable HTTP for `ptyd mcp --listen ADDR --token-file F`: the MCP endpoint at `/mcp`,
//! behind a guard that admits a request only with a bearer token from the token file (which
//! names the request's agent id) and an `Origin` that is absent, loopback or allowed with
//! `--allow-origin`. A refused request is HTTP 401 (with `WWW-Authenticate: Bearer`) or 403 and
//! never reaches the daemon. The token file and the admission decision are pure. Each token
//! holds a bounded number of MCP sessions (`http_sessions`), and memory a session held is
//! handed back to the system once it ends.

use super::http_sessions::SessionBook;
use super::server::{AgentId, Shared, Terminals};
use crate::server::constant_time_eq;
use crate::server::login_gate::{GatedListener, Peer};
use axum::extract::ConnectInfo;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The path of the MCP endpoint.
pub(crate) const PATH: &str = "/mcp";
/// The header that names a request's MCP session.
const SESSION_HEADER: &str = "mcp-session-id";
/// How long requests in flight may finish after a stop signal before the server stops anyway
/// (well inside the 1 s in which a stopped server must be gone).
const SHUTDOWN_GRACE: Duration = Duration::from_millis(300);

/// Who may call: bearer tokens and the agent id each maps to, and the allowed origins.
#[derive(Debug, Clone, Default)]
pub(crate) struct Guard {
    tokens: HashMap<String, String>,
    allowed_origins: Vec<String>,
    /// What connections that have not authenticated may hold.
    gate: crate::server::login_gate::LoginGate,
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token, or not one of the file's: 401.
    Unauthenticated,
    /// An `Origin` that is neither loopback nor allowed: 403.
    ForeignOrigin(String),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Unauthenticated => (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "a valid bearer token is required\n",
            )
                .into_response(),
            Refusal::ForeignOrigin(origin) => (
                StatusCode::FORBIDDEN,
                format!("origin {origin} is not allowed (see --allow-origin)\n"),
            )
                .into_response(),
        }
    }
}

impl Guard {
    /// A guard for `tokens` (token -> agent id) and `allowed_origins` beyond loopback.
    pub(crate) fn new(tokens: HashMap<String, String>, allowed_origins: Vec<String>) -> Guard {
        let allowed_origins = allowed_origins
            .into_iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        Guard {
            tokens,
            allowed_origins,
            gate: Default::default(),
        }
    }

    /// The agent id a request with `headers` acts as, or why it is refused.
    pub(crate) fn admit(&self, headers: &HeaderMap) -> Result<String, Refusal> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("(not text)");
            let normalized = origin.trim_end_matches('/').to_ascii_lowercase();
            if !is_loopback_origin(&normalized) && !self.allowed_origins.contains(&normalized) {
                return Err(Refusal::ForeignOrigin(origin.to_owned()));
            }
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .ok_or(Refusal::Unauthenticated)?;
        // Compare with every token in full, so timing does not tell how much matched.
        let mut found = None;
        for (token, agent) in &self.tokens {
            if constant_time_eq(token.as_bytes(), presented.as_bytes()) {
                found = Some(agent.clone());
            }
        }
        found.ok_or(Refusal::Unauthenticated)
    }
}

/// `http://localhost:3000`, `https://127.0.0.1`, `http://[::1]:8080` (lower-cased).
fn is_loopback_origin(origin: &str) -> bool {
    let Some((_, rest)) = origin.split_once("://") else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        rest.split(':').next().unwrap_or("")
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Parses a token file: one `TOKEN AGENT_ID` a line; blank lines and `#` comments ignored.
pub(crate) fn parse_tokens(text: &str) -> Result<HashMap<String, String>, String> {
    let mut tokens = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(token), Some(agent), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("line {}: expected `TOKEN AGENT_ID`", number + 1));
        };
        crate::validate::agent_id(agent).map_err(|e| format!("line {}: {e}", number + 1))?;
        if tokens.insert(token.to_owned(), agent.to_owned()).is_some() {
            return Err(format!("line {}: the token is listed twice", number + 1));
        }
    }
    if tokens.is_empty() {
        return Err("it names no token".to_owned());
    }
    Ok(tokens)
}

/// Reads the token file, which only its owner may read.
pub(crate) fn read_tokens(path: &Path) -> Result<HashMap<String, String>, String> {
    use std::os::unix::fs::MetadataExt;
    let context = |e: String| format!("token file {}: {e}", path.display());
    let meta = std::fs::metadata(path).map_err(|e| context(e.to_string()))?;
    if meta.mode() & 0o077 != 0 {
        return Err(context(format!(
            "readable by others (mode {:o}); chmod 600 it",
            meta.mode() & 0o777
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| context(e.to_string()))?;
    parse_tokens(&text).map_err(context)
}

/// What the HTTP layer in front of rmcp's service keeps: who may call, and which MCP sessions
/// each token holds.
struct Front {
    guard: Guard,
    book: Mutex<SessionBook>,
    manager: Arc<LocalSessionManager>,
    /// How long a session may go without a request (rmcp ends it then; the book forgets it).
    idle_timeout: Duration,
}

impl Front {
    fn book(&self) -> std::sync::MutexGuard<'_, SessionBook> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request that names MCP session `id`: only the token that made the session may use it,
    /// and the session is in use until the response's body has been sent (an event stream
    /// keeps it in use while it is open).
    async fn on_session(
        self: &Arc<Front>,
        agent: &str,
        id: String,
        request: Request,
        next: Next,
    ) -> Response {
        if !self.book().may_use(agent, &id) {
            // As rmcp answers for a session it does not know: nothing says another token has it.
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
        let deleting = request.method() == http::Method::DELETE;
        self.book().begin(&id, Instant::now());
        let in_use = InUse {
            front: self.clone(),
            id: id.clone(),
        };
        let response = next.run(request).await;
        if deleting && response.status().is_success() {
            self.book().remove(&id);
            crate::process::memory::trim_soon();
        }
        response.map(|body| {
            axum::body::Body::new(Tracked {
                body,
                _in_use: in_use,
            })
        })
    }

    /// A request without a session: an `initialize` that makes one, unless the token already
    /// holds its bound of sessions, all in use. The least recently used idle sessions beyond the
    /// bound are ended.
    async fn without_session(
        self: &Arc<Front>,
        agent: &str,
        request: Request,
        next: Next,
    ) -> Response {
        if request.method() == http::Method::POST && !self.book().has_room(agent) {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this token holds {} MCP sessions, each with a request in flight; end one \
                     (DELETE) before making another\n",
                    super::http_sessions::MAX_SESSIONS_PER_TOKEN
                ),
            )
                .into_response();
        }
        let response = next.run(request).await;
        let made = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok());
        if let Some(id) = made {
            let ended = self
                .book()
                .add(agent, id, Instant::now(), self.idle_timeout);
            if !ended.is_empty() {
                let manager = self.manager.clone();
                tokio::spawn(async move {
                    for id in ended {
                        let _ = manager.close_session(&SessionId::from(id)).await;
                    }
                    crate::process::memory::trim_soon();
                });
            }
        }
        response
    }
}

/// A request in flight on an MCP session, until it is dropped.
struct InUse {
    front: Arc<Front>,
    id: String,
}

impl Drop for InUse {
    fn drop(&mut self) {
        self.front.book().end(&self.id, Instant::now());
    }
}

/// A response body that keeps its request in flight until it is sent or dropped.
struct Tracked {
    body: axum::body::Body,
    _in_use: InUse,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

async fn guard(State(front): State<Arc<Front>>, mut request: Request, next: Next) -> Response {
    let agent = match front.guard.admit(request.headers()) {
        Ok(agent) => agent,
        Err(refusal) => return refusal.into_response(),
    };
    let peer = request.extensions().get::<ConnectInfo<Peer>>();
    front.guard.gate.authenticated(peer.map(|p| p.0.0));
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    request.extensions_mut().insert(AgentId(agent.clone()));
    let json = is_json(request.headers());
    let response = match session {
        Some(id) => front.on_session(&agent, id, request, next).await,
        None => front.without_session(&agent, request, next).await,
    };
    if json && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return parse_error(response).await;
    }
    response
}

/// Whether a request says its body is JSON.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// rmcp answers a JSON body it cannot read as a JSON-RPC message with 415, which says the
/// content type was wrong; the client needs JSON-RPC's parse error: 400 with code -32700 (and
/// rmcp's reason in the message).
async fn parse_error(response: Response) -> Response {
    let reason = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: {}", reason.trim())},
    });
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// What `serve` needs beyond the shared state.
pub(crate) struct HttpOptions {
    pub(crate) address: SocketAddr,
    pub(crate) guard: Guard,
    pub(crate) session_idle_timeout: Duration,
    pub(crate) keep_sessions: bool,
}

/// Serves MCP over streamable HTTP until `shutdown` resolves.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    options: HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(options.address)
        .await
        .map_err(|e| format!("listening on {}: {e}", options.address))?;
    let local = listener.local_addr().unwrap_or(options.address);
    let listener = GatedListener {
        gate: options.guard.gate.clone(),
        listener,
    };
    let mut sessions = LocalSessionManager::default();
    let mut session_config = SessionConfig::default();
    session_config.keep_alive = Some(options.session_idle_timeout);
    sessions.session_config = session_config;
    let manager = Arc::new(sessions);
    let mut config = StreamableHttpServerConfig::default();
    if !local.ip().is_loopback() {
        // Asked-for remote access: clients name this machine however they reach it, and the
        // bearer token (not the Host header) is what keeps others out.
        config = config.disable_allowed_hosts();
    }
    let close_on_drop = !options.keep_sessions;
    let for_sessions = shared.clone();
    let service = StreamableHttpService::new(
        move || Ok(Terminals::new(for_sessions.clone(), close_on_drop)),
        manager.clone(),
        config,
    );
    let front = Arc::new(Front {
        guard: options.guard,
        book: Default::default(),
        manager,
        idle_timeout: options.session_idle_timeout,
    });
    let router = axum::Router::new()
        .nest_service(PATH, service)
        .layer(axum::middleware::from_fn_with_state(front, guard));
    eprintln!("ptyd mcp: serving MCP on http://{local}{PATH} (bearer token required)");
    let (signalled, stopping) = tokio::sync::oneshot::channel::<()>();
    let router = router.into_make_service_with_connect_info::<Peer>();
    let serving = axum::serve(listener, router).with_graceful_shutdown(async move {
        shutdown.await;
        let _ = signalled.send(());
    });
    // A graceful shutdown waits for every connection to end, and a client's event stream (GET)
    // never does: past a short grace for the requests in flight, stop serving all the same.
    let served = tokio::select! {
        served = serving => served.map_err(|e| format!("serving HTTP: {e}")),
        _ = async {
            if stopping.await.is_ok() {
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } else {
                std::future::pending::<()>().await;
            }
        } => Ok(()),
    };
    if close_on_drop {
        shared.close_every_opened().await;
    }
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn admission() {
        let tokens = parse_tokens("# agents\nsecret-a alice\n\nsecret-b bob\n").unwrap();
        let guard = Guard::new(tokens, vec!["https://app.example.com/".into()]);
        type Case<'a> = (&'a [(&'a str, &'a str)], Result<&'a str, Refusal>);
        let cases: &[Case] = &[
            (&[], Err(Refusal::Unauthenticated)),
            (
                &[("authorization", "Bearer nope")],
                Err(Refusal::Unauthenticated),
            ),
            (
                &[("authorization", "Basic secret-a")],
                Err(Refusal::Unauthenticated),
            ),
            (&[("authorization", "Bearer secret-a")], Ok("alice")),
            (&[("authorization", "bearer secret-b")], Ok("bob")),
            (
                &[
                    ("authorization", "Bearer secret-a"),
                    ("origin", "http://localhost:5173"),
                ],
                Ok("alice"),
            ),
            (
                &[
                    ("authorization", "Bearer secret-a"),
                    ("origin", "http://[::1]:80"),
                ],
                Ok("alice"),
            ),
            (
                &[
                    ("authorization", "Bearer secret-a"),
                    ("origin", "https://app.example.com"),
                ],
                Ok("alice"),
            ),
            (
                &[
                    ("authorization", "Bearer secret-a"),
                    ("origin", "https://evil.example"),
                ],
                Err(Refusal::ForeignOrigin("https://evil.example".into())),
            ),
            (
                &[("origin", "null")],
                Err(Refusal::ForeignOrigin("null".into())),
            ),
        ];
        for (pairs, want) in cases {
            let got = guard.admit(&headers(pairs));
            assert_eq!(got.as_deref(), want.as_ref().map(|s| *s), "{pairs:?}");
        }
    }

    #[test]
    fn token_files() {
        assert!(parse_tokens("").is_err(), "no token");
        assert!(parse_tokens("lonely\n").unwrap_err().contains("line 1"));
        assert!(parse_tokens("a x\na y\n").unwrap_err().contains("twice"));
        assert!(parse_tokens("a x y\n").is_err());
        assert_eq!(parse_tokens("t1 agent\n").unwrap()["t1"], "agent");
    }
}
