//! A masked provider's endpoint on berth's proxy ([`crate::MaskedKeys`]): a request for
//! `/berth/NAME/…` (in origin form, as a client sends to its base URL; or in absolute form to
//! the proxy's own address, from a client that ignores `NO_PROXY`) goes to the provider's real
//! base URL, over TLS for an `https://` one, with each stand-in key replaced by the real key
//! where that provider reads one; the answer is streamed back as it comes.
//!
//! One request per connection, as the proxy's plain HTTP: the head sent upstream and the one
//! sent back both carry `Connection: close`, so a client never sends a second request on a
//! connection the proxy is about to close. `Expect: 100-continue` is answered here, since the
//! body is read before anything comes back. A client that goes away is noticed at the next
//! piece of the answer written to it, which ends the request upstream too.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

use super::answer::Answer;
use super::body::{self, Framing, Message};
use super::connection::connect_any;
use super::host::{Host, split_host_port, strip_prefix_ignore_case};
use super::http::Head;
use super::tls::{self, TlsStream};
use super::{HEAD_SILENCE, PROVIDER_SILENCE};
use crate::keys::{Route, Upstream};

/// Headers that speak of one connection or to the proxy, never passed on (RFC 9110 §7.6.1);
/// `expect` is answered here.
const HOP_BY_HOP: [&str; 9] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

/// Where a request head asks to go, when it is for a masked provider's endpoint: the route
/// (`None` for a `/berth/` path no route has), and the rest of the target after its prefix.
pub(super) fn find<'a>(
    routes: &'a [Route],
    port: u16,
    head: &[u8],
) -> Option<(Option<&'a Route>, String)> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let target = line.split(' ').nth(1)?;
    let path = match strip_prefix_ignore_case(target, "http://") {
        Some(rest) => {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            is_the_proxy(&rest[..end], port).then(|| &rest[end..])?
        }
        None => target,
    };
    let rest = path.strip_prefix("/berth/")?;
    for route in routes {
        let name = route.provider.name;
        if let Some(after) = rest.strip_prefix(name)
            && (after.is_empty() || after.starts_with(['/', '?']))
        {
            return Some((Some(route), after.to_owned()));
        }
    }
    Some((None, path.to_owned()))
}

/// Whether `authority` is the proxy's own listener (at `port`), as a client inside names it.
fn is_the_proxy(authority: &str, port: u16) -> bool {
    let Ok((host, Some(named))) = split_host_port(authority) else {
        return false;
    };
    named == port
        && match Host::parse(host) {
            Some(Host::Ip(address)) => address.is_loopback(),
            Some(Host::Name(name)) => name == "localhost",
            None => false,
        }
}

/// Serves one request for `route`'s endpoint; `rest` is its target after the route's prefix.
pub(super) fn serve(client: &TcpStream, route: &Route, rest: &str, head: Head) {
    let request = match Forwarded::of(route, rest, &head.bytes) {
        Ok(request) => request,
        Err(why) => return Answer::bad_request(&why, &head.bytes).send(client),
    };
    let mut upstream = match connect(&route.upstream) {
        Ok(upstream) => upstream,
        Err(answer) => return answer.send(client),
    };
    let _ = client.set_nodelay(true);
    if request.continues
        && (&*client)
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .is_err()
    {
        return;
    }
    // The body's reads wait for the client no longer than a head's.
    let _ = client.set_read_timeout(Some(HEAD_SILENCE));
    let sent = upstream
        .write_all(&request.head)
        .and_then(|()| body::relay(&head.early, &mut &*client, &mut upstream, request.body))
        .and_then(|()| upstream.flush());
    if let Err(error) = sent {
        return Answer::provider_failed(&route.upstream.authority(), "sending the request", &error)
            .send(client);
    }
    let mut client_out = client;
    match relay_answer(&mut upstream, &mut client_out, request.head_only) {
        Ok(()) => {}
        Err(Failure::BeforeAnswer(error)) => {
            return Answer::provider_failed(
                &route.upstream.authority(),
                "reading its answer",
                &error,
            )
            .send(client);
        }
        Err(Failure::During) => {}
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
}

/// A request as it goes upstream.
struct Forwarded {
    head: Vec<u8>,
    body: Framing,
    /// The client waits for `100 Continue` before its body.
    continues: bool,
    /// A `HEAD` request: its answer has no body, whatever its head says.
    head_only: bool,
}

impl Forwarded {
    /// The head for the provider: the request line on its base URL's path, its own `Host`,
    /// the client's headers but the hop-by-hop ones, each stand-in where the provider reads a
    /// key replaced by the key, and `Connection: close`. Why not, when the request cannot go.
    fn of(route: &Route, rest: &str, head: &[u8]) -> Result<Forwarded, String> {
        let (method, _, _, lines) = super::http::request_line(head)?;
        if method.is_empty() || !method.bytes().all(is_token) {
            return Err("its method is not a word".into());
        }
        let headers = Headers::read(lines.take_while(|line| !line.is_empty()))?;
        let target = target(route, rest);
        let mut out = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\n",
            route.upstream.authority()
        )
        .into_bytes();
        for (name, value) in &headers.kept {
            let value = match route
                .provider
                .headers
                .contains(&name.to_ascii_lowercase().as_str())
            {
                true => replace_stand_ins(route, value),
                false => value.clone(),
            };
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        Ok(Forwarded {
            head: out,
            body: headers.framing()?,
            continues: headers.continues,
            head_only: method == "HEAD",
        })
    }
}

/// A request's headers, read.
#[derive(Default)]
struct Headers {
    /// Those passed on, as (name, value), the value trimmed.
    kept: Vec<(String, String)>,
    lengths: Vec<String>,
    encodings: Vec<String>,
    continues: bool,
}

impl Headers {
    fn read<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Result<Headers, String> {
        let mut headers = Headers::default();
        let mut dropped: Vec<String> = HOP_BY_HOP.iter().map(|h| (*h).to_owned()).collect();
        for line in lines {
            if line.starts_with(b" ") || line.starts_with(b"\t") {
                return Err("it folds a header over two lines".into());
            }
            let line = std::str::from_utf8(line).map_err(|_| "a header is not UTF-8")?;
            let (name, value) = line
                .split_once(':')
                .filter(|(name, _)| !name.is_empty() && name.bytes().all(is_token))
                .ok_or("a header line has no name")?;
            let (lower, value) = (name.to_ascii_lowercase(), value.trim());
            match lower.as_str() {
                "content-length" => headers.lengths.push(value.to_owned()),
                "transfer-encoding" => headers.encodings.push(value.to_owned()),
                "expect" => headers.continues |= value.eq_ignore_ascii_case("100-continue"),
                "connection" => dropped.extend(
                    value
                        .split(',')
                        .map(|token| token.trim().to_ascii_lowercase()),
                ),
                _ => {}
            }
            headers.kept.push((name.to_owned(), value.to_owned()));
        }
        headers
            .kept
            .retain(|(name, _)| !dropped.contains(&name.to_ascii_lowercase()));
        Ok(headers)
    }

    /// The body's framing (RFC 9112 §6.3), refusing what two readers could read apart.
    fn framing(&self) -> Result<Framing, String> {
        if !self.encodings.is_empty() {
            if !self.lengths.is_empty() {
                return Err("it has both Content-Length and Transfer-Encoding".into());
            }
            let last = self.encodings.join(",");
            let last = last.rsplit(',').next().unwrap_or_default().trim();
            if !last.eq_ignore_ascii_case("chunked") {
                return Err("its Transfer-Encoding does not end in chunked".into());
            }
            return Ok(Framing::Chunked);
        }
        let mut lengths = self
            .lengths
            .iter()
            .flat_map(|l| l.split(','))
            .map(str::trim);
        let Some(first) = lengths.next() else {
            return Ok(Framing::Empty);
        };
        let length = first
            .parse::<u64>()
            .ok()
            .filter(|_| first.bytes().all(|b| b.is_ascii_digit()))
            .ok_or("its Content-Length is not a number")?;
        if lengths.any(|other| other != first) {
            return Err("it has two different Content-Lengths".into());
        }
        Ok(Framing::Length(length))
    }
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The target on the provider: its base URL's path, then `rest`, with a stand-in in the
/// provider's key parameter replaced by the key.
fn target(route: &Route, rest: &str) -> String {
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let mut target = format!("{}{path}", route.upstream.path);
    if target.is_empty() {
        target.push('/');
    }
    if let Some(query) = query {
        target.push('?');
        let parameters: Vec<String> = query
            .split('&')
            .map(|parameter| match parameter.split_once('=') {
                Some((name, value)) if Some(name) == route.provider.query => {
                    match route.real_key(value) {
                        Some(real) => format!("{name}={}", percent_encoded(real)),
                        None => parameter.to_owned(),
                    }
                }
                _ => parameter.to_owned(),
            })
            .collect();
        target.push_str(&parameters.join("&"));
    }
    target
}

/// `value` with each word that is one of `route`'s stand-ins replaced by its key
/// (`Bearer STAND-IN`, or the stand-in alone).
fn replace_stand_ins(route: &Route, value: &str) -> String {
    value
        .split(' ')
        .map(|word| route.real_key(word).unwrap_or(word))
        .collect::<Vec<_>>()
        .join(" ")
}

fn percent_encoded(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A connection to a provider, plain or over TLS.
enum Connection {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Read for Connection {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Connection::Plain(stream) => stream.read(buf),
            Connection::Tls(stream) => stream.read(buf),
        }
    }
}

impl Write for Connection {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Connection::Plain(stream) => stream.write(buf),
            Connection::Tls(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Connection::Plain(stream) => stream.flush(),
            Connection::Tls(stream) => stream.flush(),
        }
    }
}

/// Connects to the provider: berth's own setting, so the allow list is not asked.
fn connect(upstream: &Upstream) -> Result<Connection, Answer> {
    let authority = upstream.authority();
    let addresses: Vec<_> = (upstream.host.as_str(), upstream.port)
        .to_socket_addrs()
        .map_err(|e| Answer::unresolved(&upstream.host, &e.to_string()))?
        .collect();
    let tcp = connect_any(&addresses)
        .map_err(|e| Answer::provider_failed(&authority, "connecting", &e))?;
    let _ = tcp.set_nodelay(true);
    let _ = tcp.set_read_timeout(Some(PROVIDER_SILENCE));
    if !upstream.tls {
        return Ok(Connection::Plain(tcp));
    }
    let _ = tcp.set_write_timeout(Some(HEAD_SILENCE));
    tls::connect(tcp, &upstream.host)
        .map(|stream| Connection::Tls(Box::new(stream)))
        .map_err(|e| Answer::provider_failed(&authority, "its TLS handshake", &e))
}

/// How relaying an answer failed.
enum Failure {
    /// Nothing was sent to the client yet: it can be told.
    BeforeAnswer(io::Error),
    /// Part of the answer went: the connection just ends.
    During,
}

/// Copies the provider's answer to the client: any `1xx` heads as they are, then the final
/// head with `Connection: close`, then its body, each piece as it comes.
fn relay_answer(
    upstream: &mut Connection,
    client: &mut &TcpStream,
    head_only: bool,
) -> Result<(), Failure> {
    let mut already = Vec::new();
    let mut started = false;
    loop {
        let failed = |error: io::Error| match started {
            false => Failure::BeforeAnswer(error),
            true => Failure::During,
        };
        let Message { head, rest } = body::read_head(upstream, already)
            .map_err(failed)?
            .ok_or_else(|| {
                failed(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "it closed the connection without an answer",
                ))
            })?;
        let status = status_of(&head).ok_or_else(|| {
            failed(io::Error::new(
                io::ErrorKind::InvalidData,
                "its answer is not HTTP/1.x",
            ))
        })?;
        if (100..200).contains(&status) && status != 101 {
            client.write_all(&head).map_err(|_| Failure::During)?;
            started = true;
            already = rest;
            continue;
        }
        if status == 101 {
            return Err(failed(io::Error::new(
                io::ErrorKind::InvalidData,
                "it switched protocols, which berth never asked of it",
            )));
        }
        let (head, framing) = final_head(&head, status, head_only);
        client.write_all(&head).map_err(|_| Failure::During)?;
        return body::relay(&rest, upstream, client, framing).map_err(|_| Failure::During);
    }
}

/// The status code of a response head.
fn status_of(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b' ').nth(1)?;
    let status = std::str::from_utf8(line).ok()?.trim().parse().ok()?;
    head.starts_with(b"HTTP/1.").then_some(status)
}

/// The final head as the client gets it (its own `Connection` headers, and those they name,
/// replaced by `Connection: close`), and its body's framing.
fn final_head(head: &[u8], status: u16, head_only: bool) -> (Vec<u8>, Framing) {
    let mut lines: Vec<&[u8]> = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .take_while(|line| !line.is_empty())
        .collect();
    let header = |line: &[u8]| -> Option<(String, String)> {
        let line = std::str::from_utf8(line).ok()?;
        let (name, value) = line.split_once(':')?;
        Some((name.trim().to_ascii_lowercase(), value.trim().to_owned()))
    };
    let mut dropped: Vec<String> = ["connection", "keep-alive", "proxy-connection"]
        .map(str::to_owned)
        .to_vec();
    let (mut chunked, mut length) = (false, None);
    for (name, value) in lines.iter().skip(1).filter_map(|line| header(line)) {
        match name.as_str() {
            "connection" => dropped.extend(value.split(',').map(|t| t.trim().to_ascii_lowercase())),
            "transfer-encoding" => {
                chunked = value
                    .rsplit(',')
                    .next()
                    .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
            }
            "content-length" => length = value.parse::<u64>().ok(),
            _ => {}
        }
    }
    let status_line = lines.remove(0);
    let mut out = status_line.to_vec();
    out.extend_from_slice(b"\r\n");
    for line in lines {
        if header(line).is_some_and(|(name, _)| dropped.contains(&name)) {
            continue;
        }
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    let framing = if head_only || status == 204 || status == 304 {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else {
        length.map_or(Framing::UntilClose, Framing::Length)
    };
    (out, framing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MaskedKeys;
    use std::io::BufRead;
    use std::net::{Shutdown, TcpListener};
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    fn keys(pairs: &[(&str, &str)], agent: Option<&str>) -> MaskedKeys {
        let passed: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        MaskedKeys::for_agent(agent.and_then(crate::agent_profile), &passed).unwrap()
    }

    fn claude(base: &str) -> MaskedKeys {
        keys(
            &[
                ("ANTHROPIC_API_KEY", "sk-ant-REAL"),
                ("ANTHROPIC_AUTH_TOKEN", "REAL-TOKEN"),
                ("ANTHROPIC_BASE_URL", base),
            ],
            Some("claude-agent-acp"),
        )
    }

    fn forwarded(keys: &MaskedKeys, head: &str) -> Result<String, String> {
        let (route, rest) =
            find(keys.routes(), crate::PROXY_PORT, head.as_bytes()).expect("a provider's");
        Forwarded::of(route.expect("a route"), &rest, head.as_bytes())
            .map(|f| String::from_utf8(f.head).unwrap())
    }

    #[test]
    fn requests_for_a_providers_endpoint_are_found_by_path() {
        let keys = claude("https://api.anthropic.com");
        let routes = keys.routes();
        let found = |head: &str| {
            find(routes, crate::PROXY_PORT, head.as_bytes())
                .map(|(route, rest)| (route.is_some(), rest))
        };
        let hit = |rest: &str| Some((true, rest.to_owned()));
        assert_eq!(
            found("POST /berth/anthropic/v1/messages HTTP/1.1\r\n\r\n"),
            hit("/v1/messages")
        );
        assert_eq!(
            found("GET /berth/anthropic?x=1 HTTP/1.1\r\n\r\n"),
            hit("?x=1")
        );
        assert_eq!(found("GET /berth/anthropic HTTP/1.1\r\n\r\n"), hit(""));
        assert_eq!(
            found("POST http://127.0.0.1:3128/berth/anthropic/v1/messages HTTP/1.1\r\n\r\n"),
            hit("/v1/messages"),
            "a client that ignores NO_PROXY"
        );
        assert_eq!(
            found("POST http://localhost:3128/berth/anthropic/v1 HTTP/1.1\r\n\r\n"),
            hit("/v1")
        );
        assert_eq!(
            found("GET /berth/anthropicx/v1 HTTP/1.1\r\n\r\n"),
            Some((false, "/berth/anthropicx/v1".to_owned()))
        );
        assert_eq!(
            found("GET /berth/openai/v1 HTTP/1.1\r\n\r\n"),
            Some((false, "/berth/openai/v1".to_owned())),
            "not this agent's provider"
        );
        for other in [
            "GET /index.html HTTP/1.1\r\n\r\n",
            "CONNECT api.anthropic.com:443 HTTP/1.1\r\n\r\n",
            "GET http://example.com/berth/anthropic HTTP/1.1\r\n\r\n",
            "GET http://127.0.0.1:3129/berth/anthropic HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(found(other), None, "{other}");
        }
    }

    #[test]
    fn the_stand_in_becomes_the_key_only_where_the_provider_reads_one() {
        let keys = claude("https://gateway.example:8443/anthropic/");
        let head = forwarded(
            &keys,
            "POST /berth/anthropic/v1/messages?beta=true HTTP/1.1\r\n\
             Host: 127.0.0.1:3128\r\n\
             X-Api-Key: berth-stand-in-ANTHROPIC_API_KEY\r\n\
             Authorization: Bearer berth-stand-in-ANTHROPIC_AUTH_TOKEN\r\n\
             X-Echo: berth-stand-in-ANTHROPIC_API_KEY\r\n\
             Connection: keep-alive, X-Hop\r\n\
             X-Hop: 1\r\n\
             Keep-Alive: timeout=5\r\n\
             Proxy-Authorization: Basic eDp5\r\n\
             Content-Length: 2\r\n\
             Accept: text/event-stream\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            head,
            "POST /anthropic/v1/messages?beta=true HTTP/1.1\r\n\
             Host: gateway.example:8443\r\n\
             X-Api-Key: sk-ant-REAL\r\n\
             Authorization: Bearer REAL-TOKEN\r\n\
             X-Echo: berth-stand-in-ANTHROPIC_API_KEY\r\n\
             Content-Length: 2\r\n\
             Accept: text/event-stream\r\n\
             Connection: close\r\n\r\n"
        );
        // The agent's own login passes as it is; another provider's stand-in is not replaced.
        let head = forwarded(
            &keys,
            "GET /berth/anthropic/v1/models HTTP/1.1\r\n\
             Authorization: Bearer its-own-oauth-token\r\n\
             X-Api-Key: berth-stand-in-OPENAI_API_KEY\r\n\r\n",
        )
        .unwrap();
        assert!(
            head.contains("Authorization: Bearer its-own-oauth-token\r\n"),
            "{head}"
        );
        assert!(
            head.contains("X-Api-Key: berth-stand-in-OPENAI_API_KEY\r\n"),
            "{head}"
        );
        assert!(
            head.starts_with("GET /anthropic/v1/models HTTP/1.1\r\n"),
            "{head}"
        );
    }

    #[test]
    fn geminis_key_parameter_is_replaced_too() {
        let keys = keys(
            &[("GEMINI_API_KEY", "AIza/REAL+key")],
            Some("gemini --experimental-acp"),
        );
        let head = forwarded(
            &keys,
            "POST /berth/gemini/v1beta/models/m:streamGenerateContent?alt=sse&key=berth-stand-in-GEMINI_API_KEY HTTP/1.1\r\n\
             x-goog-api-key: berth-stand-in-GEMINI_API_KEY\r\n\r\n",
        )
        .unwrap();
        assert!(
            head.starts_with(
                "POST /v1beta/models/m:streamGenerateContent?alt=sse&key=AIza%2FREAL%2Bkey HTTP/1.1\r\nHost: generativelanguage.googleapis.com\r\n"
            ),
            "{head}"
        );
        assert!(head.contains("x-goog-api-key: AIza/REAL+key\r\n"), "{head}");
    }

    #[test]
    fn a_body_read_two_ways_is_refused() {
        let keys = claude("http://127.0.0.1:1");
        for (extra, why) in [
            (
                "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
                "both",
            ),
            ("Transfer-Encoding: gzip\r\n", "chunked"),
            (
                "Content-Length: 2\r\nContent-Length: 3\r\n",
                "two different",
            ),
            ("Content-Length: +2\r\n", "not a number"),
            (" folded\r\n", "folds"),
            ("no colon\r\n", "no name"),
        ] {
            let head = format!("POST /berth/anthropic/v1 HTTP/1.1\r\nA: b\r\n{extra}\r\n");
            let error = forwarded(&keys, &head).unwrap_err();
            assert!(error.contains(why), "{extra}: {error}");
        }
    }

    #[test]
    fn the_answers_head_says_close_and_gives_its_framing() {
        let (head, framing) = final_head(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive, X-Private\r\nX-Private: 1\r\nKeep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\n\r\n",
            200,
            false,
        );
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(framing, Framing::Chunked);
        let framing_of = |head: &[u8], status, head_only| final_head(head, status, head_only).1;
        assert_eq!(
            framing_of(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 200, false),
            Framing::Length(5)
        );
        assert_eq!(
            framing_of(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 200, true),
            Framing::Empty
        );
        assert_eq!(
            framing_of(b"HTTP/1.1 204 No Content\r\n\r\n", 204, false),
            Framing::Empty
        );
        assert_eq!(
            framing_of(b"HTTP/1.0 200 OK\r\n\r\n", 200, false),
            Framing::UntilClose
        );
        assert_eq!(status_of(b"HTTP/1.1 401 Unauthorized\r\n\r\n"), Some(401));
        assert_eq!(status_of(b"SSH-2.0-OpenSSH\r\n\r\n"), None);
    }

    /// A provider stand-in for one request: hands over the head and body it received, answers
    /// `100 Continue`'s interim head where the request says nothing of it, then two events of
    /// a stream, the second only once `go` says so.
    fn provider_stand_in() -> (u16, mpsc::Receiver<String>, mpsc::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (received, heads) = mpsc::channel();
        let (go, wait) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = std::io::BufReader::new(&stream);
            let mut head = String::new();
            while !head.ends_with("\r\n\r\n") {
                reader.read_line(&mut head).unwrap();
            }
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |l| l.parse().unwrap());
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            received
                .send(head + &String::from_utf8(body).unwrap())
                .unwrap();
            let mut out = &stream;
            out.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n15\r\nevent: one\ndata: {}\n\n\r\n",
            )
            .unwrap();
            let _ = wait.recv_timeout(Duration::from_secs(10));
            out.write_all(b"15\r\nevent: two\ndata: {}\n\n\r\n0\r\n\r\n")
                .unwrap();
            // A server that keeps the connection: the client still sees the answer's end.
            std::thread::sleep(Duration::from_secs(5));
        });
        (port, heads, go)
    }

    #[test]
    fn a_masked_request_reaches_the_provider_with_the_key_and_streams_back() {
        let (port, heads, go) = provider_stand_in();
        let keys = claude(&format!("http://127.0.0.1:{port}/base"));
        let mut fds = [0; 2];
        // SAFETY: socketpair fills `fds` with two new descriptors, which we then own.
        let (berths_end, inits_end) = unsafe {
            assert_eq!(
                libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, fds.as_mut_ptr()),
                0
            );
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        };
        let _proxy =
            super::super::Proxy::serve(berths_end, Default::default(), vec![], keys).unwrap();
        let inside = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(inside.local_addr().unwrap()).unwrap();
        let (accepted, _) = inside.accept().unwrap();
        super::super::send_fd(inits_end.as_fd(), accepted.as_fd(), 0).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client
            .write_all(
                b"POST /berth/anthropic/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\
                  x-api-key: berth-stand-in-ANTHROPIC_API_KEY\r\nExpect: 100-continue\r\n\
                  Content-Length: 7\r\n\r\n",
            )
            .unwrap();
        let mut interim = [0u8; 25];
        client.read_exact(&mut interim).unwrap();
        assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        client.write_all(b"{\"a\":1}").unwrap();
        let received = heads.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            received.starts_with(&format!(
                "POST /base/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nx-api-key: sk-ant-REAL\r\n"
            )),
            "{received}"
        );
        assert!(
            received.ends_with("Connection: close\r\n\r\n{\"a\":1}"),
            "{received}"
        );
        assert!(!received.contains("stand-in"), "{received}");
        // The first event comes before the provider sends the second: nothing is held back.
        let mut first = Vec::new();
        let mut byte = [0u8; 1];
        while !first.ends_with(b"event: one\ndata: {}\n\n\r\n") {
            client.read_exact(&mut byte).unwrap();
            first.push(byte[0]);
        }
        let first = String::from_utf8(first).unwrap();
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.contains("Connection: close\r\n"), "{first}");
        go.send(()).unwrap();
        let started = Instant::now();
        let mut rest = String::new();
        client.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "15\r\nevent: two\ndata: {}\n\n\r\n0\r\n\r\n");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "the answer ended when its last chunk did, not when the provider closed"
        );
        let _ = client.shutdown(Shutdown::Both);
    }
}
