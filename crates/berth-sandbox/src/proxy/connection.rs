//! One connection the init passed, served on a thread of its own: a fixed forward, a request
//! for a masked provider's endpoint (`provider.rs`), or an HTTP request allowed (or answered),
//! then the bytes relayed both ways.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::Instant;

use super::answer::Answer;
use super::host::{Host, is_internal};
use super::http::{HeadError, Kind, Request, read_head};
use super::provider;
use super::serve::Proxy;
use super::{AllowList, CONNECT_TIMEOUT};

/// Listener `i >= 1`: straight to its fixed host and port. No HTTP is spoken, so a failure
/// closes the connection.
pub(crate) fn forward(client: &TcpStream, host: &str, port: u16) {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(addresses) = (host, port).to_socket_addrs() else {
        return;
    };
    if let Ok(upstream) = connect_any(&addresses.collect::<Vec<_>>()) {
        relay(client, &upstream, &[]);
    }
}

/// Listener 0: one HTTP request head, then a tunnel or one plain-HTTP exchange.
pub(super) fn serve_http(proxy: &Proxy, client: &TcpStream) {
    let head = match read_head(client) {
        Ok(head) => head,
        Err(HeadError::Closed) => return,
        Err(HeadError::Silent) => return Answer::silent().send(client),
        Err(HeadError::TooLarge) => return Answer::too_large().send(client),
    };
    if client.set_read_timeout(None).is_err() {
        return;
    }
    if let Some((route, rest)) = provider::find(proxy.keys.routes(), proxy.port, &head.bytes) {
        return match route {
            Some(route) => provider::serve(client, route, &rest, head),
            None => {
                let masked: Vec<&str> = proxy
                    .keys
                    .routes()
                    .iter()
                    .map(|r| r.provider.name)
                    .collect();
                Answer::no_provider(&rest, &masked).send(client)
            }
        };
    }
    let request = match Request::parse(&head.bytes) {
        Ok(request) => request,
        Err(why) => return Answer::bad_request(&why, &head.bytes).send(client),
    };
    if proxy.allow.rule_for(&request.host, request.port).is_none() {
        return Answer::not_allowed(&request.host, request.port).send(client);
    }
    let upstream = match open_upstream(&proxy.allow, &request.host, request.port) {
        Ok(upstream) => upstream,
        Err(answer) => return answer.send(client),
    };
    let opened = match &request.kind {
        Kind::Tunnel => (&*client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n"),
        Kind::Http { head } => (&upstream).write_all(head),
    };
    if opened.is_ok() {
        relay(client, &upstream, &head.early);
    }
}

/// Resolves (a name) and connects. An address literal was named by the entry that allowed
/// it; a name is connected only to the addresses it resolves to that are not internal
/// ([`is_internal`]), or that the allow list names itself.
fn open_upstream(allow: &AllowList, host: &Host, port: u16) -> Result<TcpStream, Answer> {
    let addresses: Vec<SocketAddr> = match host {
        Host::Ip(address) => vec![SocketAddr::new(*address, port)],
        Host::Name(name) => {
            let resolved: Vec<SocketAddr> = (name.as_str(), port)
                .to_socket_addrs()
                .map_err(|error| Answer::unresolved(name, &error.to_string()))?
                .collect();
            let (refused, allowed): (Vec<_>, Vec<_>) = resolved.into_iter().partition(|address| {
                is_internal(address.ip()) && !allow.names_address(host, address.ip(), port)
            });
            if allowed.is_empty()
                && let Some(refused) = refused.first()
            {
                return Err(Answer::internal_address(host, port, refused.ip()));
            }
            allowed
        }
    };
    if addresses.is_empty() {
        return Err(Answer::unresolved(&host.to_string(), "it has no address"));
    }
    connect_any(&addresses).map_err(|error| Answer::unreachable(host, port, &error))
}

/// Tries each address in turn, all within [`CONNECT_TIMEOUT`].
pub(super) fn connect_any(addresses: &[SocketAddr]) -> io::Result<TcpStream> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
    for address in addresses {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match TcpStream::connect_timeout(address, left) {
            Ok(stream) => return Ok(stream),
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// Copies both ways until both directions have ended; `early` (what the client sent after its
/// request head) goes upstream first.
pub(crate) fn relay(client: &TcpStream, upstream: &TcpStream, early: &[u8]) {
    // Each piece goes on as it comes: a small one must not wait for the peer's delayed ACK.
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    thread::scope(|scope| {
        let back = thread::Builder::new()
            .name("berth-proxy-back".into())
            .spawn_scoped(scope, || pump(upstream, client));
        if back.is_err() || (&*upstream).write_all(early).is_err() {
            return tear_down(client, upstream);
        }
        pump(client, upstream);
    });
}

/// Copies `from` to `to` until `from` ends, then ends `to`'s sending side: a half-close, the
/// other direction goes on. An error tears both connections down, which also ends the other
/// direction's read.
fn pump(from: &TcpStream, to: &TcpStream) {
    let (mut reader, mut writer) = (from, to);
    match io::copy(&mut reader, &mut writer) {
        Ok(_) => {
            let _ = to.shutdown(Shutdown::Write);
        }
        Err(_) => tear_down(from, to),
    }
}

fn tear_down(one: &TcpStream, other: &TcpStream) {
    let _ = one.shutdown(Shutdown::Both);
    let _ = other.shutdown(Shutdown::Both);
}
