//! The web page of `ptyd serve --web ADDR --web-token-file F`: every agent's sessions, each
//! with its live screen drawn from the daemon's own terminal model, and a person's keyboard
//! for one of them at a time under the same rules as `Attach`.
//!
//! - `access`: the token, one-time codes, cookies, and the `Host`/`Origin` checks (pure).
//! - `screen_html`: a styled screen as escaped HTML (pure).
//! - `routes`: the HTTP routes, the screen's event stream and the keyboard.

mod access;
mod routes;
mod screen_html;

pub(crate) use access::{Access, CODE_LIFETIME};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// What `ptyd serve --web` was given: where to listen, and the token that admits.
pub(crate) struct WebServing {
    pub(crate) listener: TcpListener,
    pub(crate) token: String,
}

/// The page's address, as a URL a person opens.
pub(crate) fn page_url(address: SocketAddr) -> String {
    format!("http://{address}/")
}

/// Serves the page on `web` until `stop` is cancelled.
pub(crate) async fn serve(
    web: WebServing,
    terminals: crate::service::Terminals,
    access: Arc<Access>,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let address = web.listener.local_addr()?;
    tracing::info!(url = %page_url(address), "serving the web page (token required)");
    let router = routes::router(routes::Page::new(terminals, access));
    axum::serve(web.listener, router)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
}
