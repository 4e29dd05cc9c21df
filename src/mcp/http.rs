//! Streamable HTTP for `ptyd mcp --listen ADDR --token-file F`: the MCP endpoint at `/mcp`,
//! behind a guard that admits a request only with a bearer token from the token file (which
//! names the request's agent id) and an `Origin` that is absent, loopback or allowed with
//! `--allow-origin`. A refused request is HTTP 401 (with `WWW-Authenticate: Bearer`) or 403 and
//! never reaches the daemon. The token file and the admission decision are pure.

use super::server::{AgentId, Shared, Terminals};
use crate::server::constant_time_eq;
use crate::server::login_gate::{GatedListener, Peer};
use axum::extract::ConnectInfo;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The path of the MCP endpoint.
pub(crate) const PATH: &str = "/mcp";
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

async fn guard(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    match guard.admit(request.headers()) {
        Ok(agent) => {
            let peer = request.extensions().get::<ConnectInfo<Peer>>();
            guard.gate.authenticated(peer.map(|p| p.0.0));
            request.extensions_mut().insert(AgentId(agent));
            let json = is_json(request.headers());
            let response = next.run(request).await;
            if json && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
                return parse_error(response).await;
            }
            response
        }
        Err(refusal) => refusal.into_response(),
    }
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
        Arc::new(sessions),
        config,
    );
    let router = axum::Router::new().nest_service(PATH, service).layer(
        axum::middleware::from_fn_with_state(Arc::new(options.guard), guard),
    );
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
