//! One plain HTTP/1.1 request and its answer, for the tests of the web page.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `request_head` (request line and headers, without the blank line) with `body` to
/// `address`; returns the status and the body.
pub async fn http(address: &str, request_head: &str, body: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect to the page");
    let request = format!(
        "{request_head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("an HTTP answer: {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_owned())
}
