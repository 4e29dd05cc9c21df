//! Who may use the web page: the token of `--web-token-file` (sent as `Authorization: Bearer`),
//! or a browser's cookie, which a one-time code from `ptyd web-link` (valid once, for five
//! minutes) or the token itself buys. Requests must name a loopback `Host` when the page is
//! bound to loopback (DNS rebinding), and an `Origin`, when sent, must be the page's own. Pure
//! apart from the random codes: time is passed in.

use crate::server::constant_time_eq;
use http::{HeaderMap, StatusCode, header};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a one-time code from `ptyd web-link` may be exchanged.
pub(crate) const CODE_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// How long a browser's cookie lasts: a working day, then the person links again.
pub(crate) const BROWSER_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// The cookie's name.
pub(crate) const COOKIE: &str = "ptyd_web";
/// Codes waiting to be exchanged, at most (the oldest goes first).
const MAX_CODES: usize = 64;
/// Browsers signed in at once, at most (the oldest goes first).
const MAX_BROWSERS: usize = 256;

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token or cookie, or a wrong one: 401.
    Unauthenticated,
    /// A `Host` or `Origin` that is not the page's: 403.
    Foreign(String),
}

impl Refusal {
    pub(crate) fn status_and_words(&self) -> (StatusCode, String) {
        match self {
            Refusal::Unauthenticated => (
                StatusCode::UNAUTHORIZED,
                "sign in first: open the link `ptyd web-link` prints, or send the web token\n"
                    .to_owned(),
            ),
            Refusal::Foreign(what) => (StatusCode::FORBIDDEN, format!("{what} is not allowed\n")),
        }
    }
}

/// The page's keys: its token, the codes not yet exchanged, the browsers signed in.
pub(crate) struct Access {
    token: String,
    /// Whether the page listens on loopback only, where `Host` must be a loopback name.
    loopback: bool,
    codes: Mutex<HashMap<String, Instant>>,
    browsers: Mutex<HashMap<String, Instant>>,
}

/// 32 random bytes as hex.
fn secret() -> String {
    let mut bytes = [0u8; 32];
    // The kernel's generator does not fail once the system has booted; a zero key would only
    // be a worse key, never a way in without one, since every use compares in full.
    if getrandom::fill(&mut bytes).is_err() {
        tracing::error!("no random bytes for a web code");
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Drops what expired, then the oldest entries beyond `max`.
fn prune(book: &mut HashMap<String, Instant>, now: Instant, max: usize) {
    book.retain(|_, expires| *expires > now);
    while book.len() >= max {
        let Some(oldest) = book.iter().min_by_key(|(_, e)| **e).map(|(k, _)| k.clone()) else {
            break;
        };
        book.remove(&oldest);
    }
}

/// Takes `presented` out of `book` if it is there and not expired (compared in constant time).
fn take(book: &mut HashMap<String, Instant>, presented: &str, now: Instant) -> bool {
    let found = book
        .keys()
        .find(|k| constant_time_eq(k.as_bytes(), presented.as_bytes()))
        .cloned();
    match found {
        Some(key) => book.remove(&key).is_some_and(|expires| expires > now),
        None => false,
    }
}

impl Access {
    pub(crate) fn new(token: String, loopback: bool) -> Access {
        Access {
            token,
            loopback,
            codes: Mutex::default(),
            browsers: Mutex::default(),
        }
    }

    fn book<'a>(
        m: &'a Mutex<HashMap<String, Instant>>,
    ) -> std::sync::MutexGuard<'a, HashMap<String, Instant>> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new one-time code (`ptyd web-link`).
    pub(crate) fn mint_code(&self, now: Instant) -> String {
        let code = secret();
        let mut codes = Self::book(&self.codes);
        prune(&mut codes, now, MAX_CODES);
        codes.insert(code.clone(), now + CODE_LIFETIME);
        code
    }

    /// Exchanges a one-time code or the token for a new browser cookie value.
    pub(crate) fn sign_in(&self, presented: &str, now: Instant) -> Option<String> {
        let by_code = take(&mut Self::book(&self.codes), presented, now);
        if !by_code && !constant_time_eq(presented.as_bytes(), self.token.as_bytes()) {
            return None;
        }
        let browser = secret();
        let mut browsers = Self::book(&self.browsers);
        prune(&mut browsers, now, MAX_BROWSERS);
        browsers.insert(browser.clone(), now + BROWSER_LIFETIME);
        Some(browser)
    }

    /// The `Set-Cookie` value for a browser that signed in.
    pub(crate) fn cookie(browser: &str) -> String {
        format!(
            "{COOKIE}={browser}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
            BROWSER_LIFETIME.as_secs()
        )
    }

    /// Whether the request comes from this page's place: a loopback `Host` when bound to
    /// loopback, and no `Origin` but the page's own.
    pub(crate) fn same_place(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if self.loopback && !is_loopback_host(host) {
            return Err(Refusal::Foreign(format!("host {host:?}")));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("(not text)");
            if !origin.eq_ignore_ascii_case(&format!("http://{host}")) {
                return Err(Refusal::Foreign(format!("origin {origin}")));
            }
        }
        Ok(())
    }

    /// Admits a request that reads session data or types: from this page's place, with the
    /// token or a signed-in browser's cookie.
    pub(crate) fn admit(&self, headers: &HeaderMap, now: Instant) -> Result<(), Refusal> {
        self.same_place(headers)?;
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            });
        if let Some(token) = bearer {
            return constant_time_eq(token.as_bytes(), self.token.as_bytes())
                .then_some(())
                .ok_or(Refusal::Unauthenticated);
        }
        let browser = cookie_value(headers).ok_or(Refusal::Unauthenticated)?;
        let browsers = Self::book(&self.browsers);
        let known = browsers.iter().any(|(k, expires)| {
            constant_time_eq(k.as_bytes(), browser.as_bytes()) && *expires > now
        });
        known.then_some(()).ok_or(Refusal::Unauthenticated)
    }
}

/// The value of the page's cookie among the request's cookies.
fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// `localhost:7879`, `127.0.0.1`, `[::1]:80`.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, value.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_code_buys_one_cookie_once_and_not_after_five_minutes() {
        let access = Access::new("tok".into(), true);
        let now = Instant::now();
        let code = access.mint_code(now);
        assert!(access.sign_in(&code, now).is_some());
        assert!(access.sign_in(&code, now).is_none(), "used once");
        let late = access.mint_code(now);
        assert!(
            access.sign_in(&late, now + CODE_LIFETIME).is_none(),
            "expired"
        );
        assert!(
            access.sign_in("tok", now).is_some(),
            "the token signs in too"
        );
        assert!(access.sign_in("wrong", now).is_none());
        assert!(access.sign_in("", now).is_none());
    }

    #[test]
    fn data_needs_the_token_or_a_live_cookie_from_this_place() {
        let access = Access::new("tok".into(), true);
        let now = Instant::now();
        let browser = access.sign_in("tok", now).unwrap();
        let cookie = format!("other=1; {COOKIE}={browser}");
        let host = ("host", "127.0.0.1:7879");
        for (given, when, want) in [
            (vec![host], now, Err(Refusal::Unauthenticated)),
            (vec![host, ("authorization", "Bearer tok")], now, Ok(())),
            (vec![host, ("authorization", "bearer tok")], now, Ok(())),
            (
                vec![host, ("authorization", "Bearer nope")],
                now,
                Err(Refusal::Unauthenticated),
            ),
            (vec![host, ("cookie", cookie.as_str())], now, Ok(())),
            (
                vec![host, ("cookie", cookie.as_str())],
                now + BROWSER_LIFETIME,
                Err(Refusal::Unauthenticated),
            ),
            (
                vec![host, ("cookie", "ptyd_web=forged")],
                now,
                Err(Refusal::Unauthenticated),
            ),
            (
                vec![
                    host,
                    ("origin", "http://127.0.0.1:7879"),
                    ("authorization", "Bearer tok"),
                ],
                now,
                Ok(()),
            ),
            (
                vec![
                    host,
                    ("origin", "http://localhost:3000"),
                    ("authorization", "Bearer tok"),
                ],
                now,
                Err(Refusal::Foreign("origin http://localhost:3000".into())),
            ),
            (
                vec![
                    ("host", "evil.example:7879"),
                    ("authorization", "Bearer tok"),
                ],
                now,
                Err(Refusal::Foreign("host \"evil.example:7879\"".into())),
            ),
        ] {
            assert_eq!(access.admit(&headers(&given), when), want, "{given:?}");
        }
    }

    #[test]
    fn a_page_bound_elsewhere_takes_any_host_but_still_only_its_own_origin() {
        let access = Access::new("tok".into(), false);
        let ok = headers(&[("host", "box.lan:7879"), ("authorization", "Bearer tok")]);
        assert_eq!(access.admit(&ok, Instant::now()), Ok(()));
        let foreign = headers(&[("host", "box.lan:7879"), ("origin", "http://evil.example")]);
        assert!(matches!(
            access.same_place(&foreign),
            Err(Refusal::Foreign(_))
        ));
    }

    #[test]
    fn the_cookie_is_http_only_and_strict() {
        let cookie = Access::cookie("abc");
        for part in ["ptyd_web=abc", "HttpOnly", "SameSite=Strict", "Path=/"] {
            assert!(cookie.contains(part), "{cookie}");
        }
    }
}
