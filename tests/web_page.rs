//! The web page of `ptyd serve --web`, in a real headless Chromium (tests/web/browser.py,
//! Selenium with Debian's chromedriver): the token and the `Host`/`Origin` checks over plain
//! HTTP, then the page opened with a one-time link (`WebLink`) showing the session's screen as Read gives it,
//! a screenshot whose red cells are where the session printed them, and the keyboard taken,
//! typed on (a command runs; the agent is refused meanwhile; the last commands say who typed
//! it) and released; then a password
//! prompt whose wait line names the page, answered there.

mod support;

use ptyd::pb::{WaitReason, WebLinkRequest};
use serde_json::Value;
use std::process::Stdio;
use support::plain_http::http;
use support::spawned::*;
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tonic::Code;

const A: &str = "web-agent";
const TOKEN: &str = "web-token-for-the-test";

/// The browser script, driven a step at a time.
struct Browser {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Browser {
    /// Opens `url`; `token`, when given, signs in if the page asks.
    async fn open(
        url: &str,
        token: Option<&str>,
        shot: &std::path::Path,
    ) -> (Browser, serde_json::Value) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/web/browser.py");
        let mut child = tokio::process::Command::new("python3")
            .arg(script)
            .arg(url)
            .arg(token.unwrap_or("-"))
            .arg(shot)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run tests/web/browser.py");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut browser = Browser {
            child,
            stdin,
            stdout,
        };
        let first = browser.answer().await;
        (browser, first)
    }

    async fn answer(&mut self) -> serde_json::Value {
        let line = self
            .stdout
            .next_line()
            .await
            .expect("read the browser script")
            .expect("the browser script answers (see its stderr)");
        serde_json::from_str(&line).expect("one JSON line")
    }

    async fn step(&mut self, step: &str) -> serde_json::Value {
        self.stdin
            .write_all(format!("{step}\n").as_bytes())
            .await
            .unwrap();
        self.answer().await
    }

    /// The page's screen text once a row reads `line` (the browser waits for it, 20 s at
    /// most); fails naming `what` when none does.
    async fn wait_line(&mut self, what: &str, line: &str) -> String {
        let text = self.step(&format!("wait_line {line}")).await["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(text.lines().any(|l| l == line), "{what}: {text}");
        text
    }

    async fn quit(mut self) {
        let _ = self.stdin.write_all(b"quit\n").await;
        let _ = tokio::time::timeout(PROCESS_DEADLINE, self.child.wait()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_shows_the_screen_and_lets_a_person_type() {
    needs("chromedriver");
    needs("python3");
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-web-")
            .tempdir()
            .unwrap();
        let (daemon, socket, address) = spawn_daemon_with_page(dir.path(), TOKEN).await;
        let mut c = Client::new(unix_channel(&socket).await);
        let sid = open(&mut c, A).await;
        send(
            &mut c,
            A,
            &sid,
            "clear; printf 'top\\n\\e[41m    \\e[0m marked <b>&amp;\\n'",
        )
        .await;

        // Plain HTTP: no data without the token, none for another host or origin.
        let host = format!("Host: {address}");
        let sessions = format!("GET /api/sessions HTTP/1.1\r\n{host}");
        let bearer = format!("Authorization: Bearer {TOKEN}");
        let (status, _) = http(&address, &sessions, "").await;
        assert_eq!(status, 401, "no token");
        let (status, _) = http(&address, &format!("{sessions}\r\nAuthorization: Bearer nope"), "").await;
        assert_eq!(status, 401, "a wrong token");
        let (status, body) = http(&address, &format!("{sessions}\r\n{bearer}"), "").await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(&format!("\"id\":\"{sid}\"")) && body.contains(A), "{body}");
        let foreign = [
            format!("GET /api/sessions HTTP/1.1\r\nHost: evil.example\r\n{bearer}"),
            format!("{sessions}\r\n{bearer}\r\nOrigin: http://localhost:1"),
        ];
        for request in foreign {
            let (status, body) = http(&address, &request, "").await;
            assert_eq!(status, 403, "{request}: {body}");
        }
        let sign_in = format!("POST /api/sign-in HTTP/1.1\r\n{host}");
        let token_json = format!("{{\"token\":\"{TOKEN}\"}}");
        let (status, _) = http(&address, &format!("{sign_in}\r\nContent-Type: text/plain"), &token_json).await;
        assert_eq!(status, 400, "a sign-in that is not JSON (a form post from elsewhere)");
        let (status, _) = http(
            &address,
            &format!("POST /api/sessions/{A}/{sid}/keys HTTP/1.1\r\n{host}\r\nContent-Type: application/json"),
            "{\"viewer\":1,\"keys\":\"rm -rf ~\\r\"}",
        )
        .await;
        assert_eq!(status, 401, "typing without the token");

        // The page in a browser, opened with a one-time link on the session.
        let link = c
            .web_link(WebLinkRequest {
                agent_id: A.into(),
                session_id: sid.clone(),
            })
            .await
            .expect("WebLink")
            .into_inner();
        assert!(link.url.starts_with(&format!("http://{address}/#code=")), "{link:?}");
        assert!(link.url.ends_with(&format!("&s={A}%2F{sid}")), "{link:?}");
        assert_eq!(link.expires_in_s, 300);
        let others = c
            .web_link(WebLinkRequest {
                agent_id: "someone-else".into(),
                session_id: sid.clone(),
            })
            .await
            .expect_err("not that agent's session");
        assert_eq!(others.code(), Code::NotFound, "{others:?}");
        // The screenshots stay where a person finds the last one (docs/web-page.png is one).
        let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-page.png");
        let (mut browser, first) = Browser::open(&link.url, None, &shot).await;
        assert_eq!(first["cookie_visible_to_script"], false, "the cookie is HttpOnly");
        assert!(!first["url"].as_str().unwrap().contains("code="), "the code left the address bar: {first}");
        let code = link.url.split("code=").nth(1).unwrap().split('&').next().unwrap();
        let (status, _) = http(
            &address,
            &format!("{sign_in}\r\nContent-Type: application/json"),
            &format!("{{\"code\":\"{code}\"}}"),
        )
        .await;
        assert_eq!(status, 401, "a one-time code works once");
        let read = read_screen(&mut c, A, &sid).await.text;
        let shown = browser
            .wait_line("the page shows the screen", "     marked <b>&amp;")
            .await;
        assert_eq!(shown, read.trim_end(), "the page's screen is Read's");
        let marked_row = shown
            .lines()
            .position(|l| l.starts_with("     marked"))
            .expect("the marked row");
        let red = browser.step(&format!("shot {marked_row} 1")).await;
        let rgb: Vec<u64> = red["rgb"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert!(rgb[0] > 150 && rgb[1] < 60 && rgb[2] < 60, "a red cell: {red}");
        let plain = browser.step(&format!("shot {marked_row} 20")).await;
        assert_ne!(plain["rgb"], red["rgb"], "past the red cells: {plain}");

        // The person takes the keyboard: the agent is refused, the person's command runs.
        browser.step("take").await;
        wait_for_info(&mut c, A, &sid, "attached", |i| !i.attached.is_empty()).await;
        let refused = c.send(send_request(A, &sid, "echo agent")).await;
        assert_eq!(refused.expect_err("refused").code(), Code::FailedPrecondition);
        browser.step("type echo typed-in-browser\\n").await;
        browser
            .wait_line("the person's command ran", "typed-in-browser")
            .await;
        // The page lists the session's last commands, saying who typed each.
        let recent = browser.step("commands echo typed-in-browser").await;
        let lines: Vec<&str> = recent["commands"]
            .as_array()
            .expect("the command lines")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let line_of = |text: &str| lines.iter().find(|l| l.contains(text)).copied();
        let person = line_of("echo typed-in-browser").unwrap_or_else(|| panic!("{recent}"));
        assert!(person.ends_with("(typed by a person)"), "{person}");
        let agent = line_of("clear; printf").unwrap_or_else(|| panic!("{recent}"));
        assert!(!agent.contains("(typed by a person)"), "{agent}");
        // The page as a person holding the keyboard sees it, for docs/web-page.png.
        browser.step("shot 0 0").await;
        browser.step("release").await;
        wait_for_info(&mut c, A, &sid, "released", |i| i.attached.is_empty()).await;
        let mut wait = send_request(A, &sid, "");
        wait.submit = Some(false);
        let (fr, rendered) = send_with(&mut c, wait).await;
        assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{rendered}");
        assert!(rendered.contains("[a person typed in this session"), "{rendered}");

        // A password prompt: the agent's wait line names the page on this session (no sign-in
        // code: the line goes to the model), and the person answers the prompt there.
        let (fr, rendered) = send_with(
            &mut c,
            send_request(A, &sid, "read -rs secret && echo \"got ${#secret} bytes\""),
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::StdinRead, "{rendered}");
        assert!(fr.input_hidden, "{rendered}");
        let page_on_session = format!(", or on the web page http://{address}/#s={A}%2F{sid})]");
        assert!(rendered.contains(&page_on_session), "{rendered}");
        assert!(!rendered.contains("code="), "{rendered}");
        let asks = browser.step("status asks for a password").await;
        assert!(asks["status"].as_str().unwrap().contains("asks for a password"), "{asks}");
        browser.step("take").await;
        wait_for_info(&mut c, A, &sid, "attached", |i| !i.attached.is_empty()).await;
        browser.step("type hunter2\\n").await;
        let answered = browser.wait_line("the prompt took the password", "got 7 bytes").await;
        let status = browser.step("status running").await;
        assert!(
            !status["status"].as_str().unwrap().contains("password"),
            "the prompt is answered: {status} {answered}"
        );
        let recent = browser.step("commands read -rs secret").await;
        assert!(!recent.to_string().contains("hunter2"), "the secret is not listed: {recent}");
        browser.step("release").await;
        wait_for_info(&mut c, A, &sid, "released", |i| i.attached.is_empty()).await;
        browser.quit().await;
        drop(c);
        terminate(daemon).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_link_needs_a_served_page() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let refused = c
            .web_link(WebLinkRequest {
                agent_id: A.into(),
                session_id: String::new(),
            })
            .await
            .expect_err("no page");
        assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
        assert!(refused.message().contains("--web"), "{refused:?}");
        d.stop().await;
    })
    .await;
}
