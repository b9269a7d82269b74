//! The connection: read one request, record it, write its scripted reply, close.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::reply::{Reply, write_reply};
use super::server::{RecordedRequest, Shared};

/// Requests larger than this are refused: a test that sends more has a bug.
const MAX_REQUEST: usize = 64 * 1024 * 1024;

pub(super) async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let request = match read_request(&mut stream).await {
        Ok(Some(r)) => r,
        // The client went away before sending a request (a probe, a cancelled connect).
        Ok(None) => return,
        Err(message) => {
            let reply = Reply::json(400, &json!({"error": {"message": message}}));
            let _ = write_reply(&mut stream, &reply).await;
            return;
        }
    };
    let reply = {
        let mut state = shared.lock();
        let n = state.requests.len() + 1;
        let reply = state.replies.pop_front().unwrap_or_else(|| {
            Reply::json(
                400,
                &json!({"error": {"message": format!(
                    "berth-testkit provider server: no reply scripted for request {n} ({} {})",
                    request.method, request.path
                )}}),
            )
        });
        state.requests.push(request);
        reply
    };
    let _ = write_reply(&mut stream, &reply).await;
}

/// Reads one request. `Ok(None)`: the connection closed before any byte.
async fn read_request(stream: &mut TcpStream) -> Result<Option<RecordedRequest>, String> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 64 * 1024 {
            return Err("request head too large".into());
        }
        let mut chunk = [0u8; 8192];
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the request: {e}"))?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err("the connection closed inside the request head".into())
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head =
        std::str::from_utf8(&buf[..head_end]).map_err(|_| "the request head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut words = request_line.split(' ');
    let (Some(method), Some(path), Some(_version)) = (words.next(), words.next(), words.next())
    else {
        return Err(format!("bad request line {request_line:?}"));
    };
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("bad header line {line:?}"));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let (method, path) = (method.to_owned(), path.to_owned());
    let mut rest = buf[head_end + 4..].to_vec();
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let raw_body = if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(stream, rest).await?
    } else {
        let length: usize = match get("content-length") {
            Some(v) => v.parse().map_err(|_| format!("bad content-length {v:?}"))?,
            None => 0,
        };
        if length > MAX_REQUEST {
            return Err("request body too large".into());
        }
        while rest.len() < length {
            let mut chunk = vec![0u8; (length - rest.len()).min(64 * 1024)];
            let n = stream
                .read(&mut chunk)
                .await
                .map_err(|e| format!("reading the request body: {e}"))?;
            if n == 0 {
                return Err("the connection closed inside the request body".into());
            }
            rest.extend_from_slice(&chunk[..n]);
        }
        rest.truncate(length);
        rest
    };
    let body = serde_json::from_slice(&raw_body).unwrap_or(Value::Null);
    Ok(Some(RecordedRequest {
        method,
        path,
        headers,
        body,
        raw_body,
        received_at: std::time::Instant::now(),
    }))
}

async fn read_chunked(stream: &mut TcpStream, mut buf: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(&buf, b"\r\n") {
                break i;
            }
            fill(stream, &mut buf).await?;
        };
        let size_text = std::str::from_utf8(&buf[..line_end]).map_err(|_| "bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        if body.len() + size > MAX_REQUEST {
            return Err("request body too large".into());
        }
        buf.drain(..line_end + 2);
        if size == 0 {
            // Trailers are not used by any client the tests run; the body is complete.
            return Ok(body);
        }
        while buf.len() < size + 2 {
            fill(stream, &mut buf).await?;
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
    let mut chunk = [0u8; 8192];
    let n = stream
        .read(&mut chunk)
        .await
        .map_err(|e| format!("reading the request body: {e}"))?;
    if n == 0 {
        return Err("the connection closed inside the request body".into());
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
