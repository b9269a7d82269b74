//! The proxy's own answers (`400`, `403`, `404`, `408`, `431`, `502`, `504`). They are the only record
//! of a refusal (the proxy logs nothing), so each body says why, and a `403` what would allow
//! it; the close that follows lets the client read it before the connection ends.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::time::Instant;

use super::host::Host;
use super::{CONNECT_TIMEOUT, HEAD_LIMIT, HEAD_SILENCE, LINGER, LINGER_BYTES};

/// An answer of the proxy's own, which ends the connection.
#[derive(Debug)]
pub(super) struct Answer {
    status: u16,
    reason: &'static str,
    body: String,
}

impl Answer {
    pub(super) fn not_allowed(host: &Host, port: u16) -> Answer {
        Answer {
            status: 403,
            reason: "Forbidden",
            body: format!(
                "berth's sandbox refused a connection to {host}:{port}: it is not on the allow list.\n\
                 To allow it, add it to berth's config:\n\n\
                 [sandbox]\n\
                 allow_hosts = [\"{host}:{port}\"]\n"
            ),
        }
    }

    pub(super) fn internal_address(host: &Host, port: u16, address: IpAddr) -> Answer {
        let named = Host::Ip(address);
        Answer {
            status: 403,
            reason: "Forbidden",
            body: format!(
                "berth's sandbox refused a connection to {host}:{port}: it resolves to {address}, an address of \
                 this machine, its link or a private network, which a name reaches only where the allow list names the address.\n\
                 To allow it, name the address too in berth's config:\n\n\
                 [sandbox]\n\
                 allow_hosts = [\"{host}:{port}\", \"{named}:{port}\"]\n"
            ),
        }
    }

    pub(super) fn unresolved(name: &str, why: &str) -> Answer {
        Answer {
            status: 502,
            reason: "Bad Gateway",
            body: format!("berth's proxy could not resolve {name}: {why}.\n"),
        }
    }

    pub(super) fn unreachable(host: &Host, port: u16, error: &io::Error) -> Answer {
        if error.kind() == io::ErrorKind::TimedOut {
            return Answer {
                status: 504,
                reason: "Gateway Timeout",
                body: format!(
                    "berth's proxy could not connect to {host}:{port} within {} s.\n",
                    CONNECT_TIMEOUT.as_secs()
                ),
            };
        }
        Answer {
            status: 502,
            reason: "Bad Gateway",
            body: format!("berth's proxy could not connect to {host}:{port}: {error}.\n"),
        }
    }

    /// A request for a masked provider's endpoint that could not be carried out.
    pub(super) fn provider_failed(authority: &str, doing: &str, error: &io::Error) -> Answer {
        Answer {
            status: 502,
            reason: "Bad Gateway",
            body: format!(
                "berth's proxy failed at {doing} with the agent's provider at {authority}: {error}.\n"
            ),
        }
    }

    /// A request for `/berth/…` that is no masked provider's endpoint.
    pub(super) fn no_provider(path: &str, masked: &[&str]) -> Answer {
        let path: String = path
            .chars()
            .take(200)
            .map(|c| if c.is_ascii_graphic() { c } else { '?' })
            .collect();
        let masked = match masked {
            [] => "none".to_owned(),
            names => names
                .iter()
                .map(|name| format!("/berth/{name}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        Answer {
            status: 404,
            reason: "Not Found",
            body: format!(
                "berth's proxy has no provider at {path}: the endpoints of this agent's providers are {masked}.\n"
            ),
        }
    }

    pub(super) fn bad_request(why: &str, head: &[u8]) -> Answer {
        // The request line, shown as printable ASCII only and cut short.
        let line: String = head
            .iter()
            .take_while(|&&b| b != b'\r' && b != b'\n')
            .take(200)
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    char::from(b)
                } else {
                    '?'
                }
            })
            .collect();
        Answer {
            status: 400,
            reason: "Bad Request",
            body: format!(
                "berth's proxy cannot carry the request `{line}`: {why}.\n\
                 It carries `CONNECT host:port` (HTTPS_PROXY) and plain-HTTP requests for absolute URLs (HTTP_PROXY).\n"
            ),
        }
    }

    pub(super) fn silent() -> Answer {
        Answer {
            status: 408,
            reason: "Request Timeout",
            body: format!(
                "berth's proxy received no complete request within {} s.\n",
                HEAD_SILENCE.as_secs()
            ),
        }
    }

    pub(super) fn too_large() -> Answer {
        Answer {
            status: 431,
            reason: "Request Header Fields Too Large",
            body: format!(
                "berth's proxy reads request heads of up to {} KiB.\n",
                HEAD_LIMIT / 1024
            ),
        }
    }

    pub(super) fn send(self, client: &TcpStream) {
        let Answer {
            status,
            reason,
            body,
        } = self;
        let response = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        if (&*client).write_all(response.as_bytes()).is_ok() {
            close_gracefully(client);
        }
    }
}

/// Ends a connection answered before all the client sent was read (a request body, a TLS
/// hello sent along with CONNECT): closing a socket with unread bytes resets the connection,
/// and the reset can reach the client before it reads the answer. So: end our side, and read
/// what still comes, for a little while.
fn close_gracefully(client: &TcpStream) {
    let _ = client.shutdown(Shutdown::Write);
    let _ = client.set_read_timeout(Some(LINGER));
    let deadline = Instant::now() + LINGER;
    let mut drained = 0;
    let mut sink = [0u8; 4096];
    while drained < LINGER_BYTES && Instant::now() < deadline {
        match (&*client).read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(read) => drained += read,
        }
    }
}
