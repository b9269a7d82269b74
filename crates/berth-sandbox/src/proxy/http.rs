//! The HTTP the proxy speaks: one request head read within its limits, and the request it
//! asks for (a tunnel, or a plain-HTTP request put in origin form for the upstream server).

use std::io::{self, Read};
use std::net::TcpStream;

use super::host::{Host, split_host_port, strip_prefix_ignore_case, url_authority};
use super::{HEAD_LIMIT, HEAD_SILENCE};

/// A request head, and what the client sent after it before the proxy answered (a request
/// body, or the TLS hello of a client that does not wait for `200`).
pub(super) struct Head {
    pub(super) bytes: Vec<u8>,
    pub(super) early: Vec<u8>,
}

pub(super) enum HeadError {
    /// The client left, or its socket failed: nobody to answer.
    Closed,
    Silent,
    TooLarge,
}

pub(super) fn read_head(client: &TcpStream) -> Result<Head, HeadError> {
    // A read timeout is a limit on silence, not on the whole head: each read restarts it.
    client
        .set_read_timeout(Some(HEAD_SILENCE))
        .map_err(|_| HeadError::Closed)?;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = match (&*client).read(&mut chunk) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::Silent);
            }
            Err(_) => return Err(HeadError::Closed),
        };
        // The blank line may straddle two reads.
        let searched = bytes.len().saturating_sub(2);
        bytes.extend_from_slice(&chunk[..read]);
        if let Some(end) = head_end(&bytes, searched) {
            if end > HEAD_LIMIT {
                return Err(HeadError::TooLarge);
            }
            let early = bytes.split_off(end);
            return Ok(Head { bytes, early });
        }
        if bytes.len() >= HEAD_LIMIT {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Where the head ends: just past its blank line (`\r\n\r\n`, or bare `\n`s), looked for from
/// `from` on.
pub(super) fn head_end(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len()).find_map(|i| {
        let blank = bytes[i] == b'\n'
            && (i >= 1 && bytes[i - 1] == b'\n'
                || i >= 2 && bytes[i - 1] == b'\r' && bytes[i - 2] == b'\n');
        blank.then_some(i + 1)
    })
}

/// A request head's request line, checked (ASCII, `METHOD target HTTP/1.0` or `1.1`), as its
/// method, target and version, and the head's other lines (each without its `\r`).
pub(super) fn request_line(
    head: &[u8],
) -> Result<(&str, &str, &str, impl Iterator<Item = &[u8]>), String> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let line = lines
        .next()
        .and_then(|line| std::str::from_utf8(line).ok())
        .filter(|line| line.is_ascii())
        .ok_or("its request line is not ASCII")?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("its request line is not `METHOD target HTTP/1.1`".into());
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err("it is not HTTP/1.0 or HTTP/1.1".into());
    }
    Ok((method, target, version, lines))
}

/// A request the proxy can carry.
#[derive(Debug)]
pub(super) struct Request {
    pub(super) host: Host,
    pub(super) port: u16,
    pub(super) kind: Kind,
}

#[derive(Debug)]
pub(super) enum Kind {
    /// `CONNECT host:port`.
    Tunnel,
    /// A plain-HTTP request; `head` is what goes upstream.
    Http { head: Vec<u8> },
}

impl Request {
    pub(super) fn parse(head: &[u8]) -> Result<Request, String> {
        let (method, target, version, lines) = request_line(head)?;
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("its method is not a word".into());
        }
        let authority_of =
            |authority: &str, default_port: Option<u16>| -> Result<(Host, u16), String> {
                let (host_text, port) =
                    split_host_port(authority).map_err(|why| format!("its host {why}"))?;
                let host = Host::parse(host_text).ok_or_else(|| {
                    format!("its host `{host_text}` is not a host name or an address")
                })?;
                let port = port.or(default_port).ok_or("CONNECT needs `host:port`")?;
                Ok((host, port))
            };
        if method == "CONNECT" {
            let (host, port) = authority_of(target, None)?;
            return Ok(Request {
                host,
                port,
                kind: Kind::Tunnel,
            });
        }
        if let Some(rest) = strip_prefix_ignore_case(target, "http://") {
            let authority = url_authority(rest).map_err(|why| format!("its URL {why}"))?;
            let (host, port) = authority_of(authority, Some(80))?;
            let path = &rest[authority.len()..];
            let headers: Vec<&[u8]> = lines.take_while(|line| !line.is_empty()).collect();
            let head = origin_form(method, authority, path, version, &headers);
            return Ok(Request {
                host,
                port,
                kind: Kind::Http { head },
            });
        }
        if strip_prefix_ignore_case(target, "https://").is_some() {
            return Err("it asks for an https:// URL: berth's proxy carries HTTPS through CONNECT (point HTTPS_PROXY at it)".into());
        }
        Err("it is neither `CONNECT host:port` nor a plain-HTTP request for an absolute URL (`GET http://host/path`)".into())
    }
}

/// Headers that speak to the proxy, or of this one connection: not passed upstream.
const HOP_BY_HOP: [&str; 5] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
];

/// The head as the upstream server should see it: the request line in origin form, `Host`
/// from the URL (RFC 9112 §3.2.2: a proxy replaces it), the client's headers but those in
/// [`HOP_BY_HOP`], and `Connection: close` (one request per connection; see the module's
/// decisions), or `Connection: upgrade` if the client asked for one.
fn origin_form(
    method: &str,
    authority: &str,
    path: &str,
    version: &str,
    headers: &[&[u8]],
) -> Vec<u8> {
    let slash = if path.starts_with('/') { "" } else { "/" };
    let mut out = format!("{method} {slash}{path} {version}\r\nHost: {authority}\r\n").into_bytes();
    let (mut upgrade_asked, mut upgrade_named) = (false, false);
    let mut keep = true;
    for line in headers {
        // A line starting with blanks continues the previous header (obsolete folding).
        if !line.starts_with(b" ") && !line.starts_with(b"\t") {
            let (name, value) = match line.iter().position(|&b| b == b':') {
                Some(colon) => (line[..colon].trim_ascii(), &line[colon + 1..]),
                None => (line.trim_ascii(), &[][..]),
            };
            keep = !HOP_BY_HOP
                .iter()
                .any(|hop| name.eq_ignore_ascii_case(hop.as_bytes()));
            if name.eq_ignore_ascii_case(b"connection") {
                upgrade_asked |= value
                    .split(|&b| b == b',')
                    .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"upgrade"));
            }
            upgrade_named |= name.eq_ignore_ascii_case(b"upgrade");
        }
        if keep {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(if upgrade_asked && upgrade_named {
        b"Connection: upgrade\r\n\r\n"
    } else {
        b"Connection: close\r\n\r\n"
    });
    out
}
