//! The way out of a confined agent's network namespace: a proxy on the host side that lets
//! connections through to the hosts the user allowed **by name**.
//!
//! A confined agent lives in a network namespace of its own, with nothing in it but a loopback.
//! A tiny init in that namespace (`child.rs`) listens on TCP ports of that loopback, and passes
//! every connection it accepts to berth over a Unix socket (`SCM_RIGHTS`). A passed socket is
//! the host's to read and write like any other, even though it belongs to the namespace: berth
//! talks to the agent's connection itself, and no byte is copied through the init, which stays
//! a handful of system calls with no buffers, no DNS and no policy of its own. Names are
//! resolved and upstream connections made here, with the host's resolver and network.
//!
//! # Wire format
//!
//! The channel is a `socketpair(AF_UNIX, SOCK_SEQPACKET)`; berth keeps one end ([`Proxy::serve`]
//! takes it) and the init the other. For each accepted connection the init sends **one message**:
//!
//! - its payload is **exactly 1 byte**: the index of the listener that accepted the connection;
//! - its ancillary data is one `SCM_RIGHTS` control message with **exactly one descriptor**:
//!   the accepted TCP socket, which the init then closes on its side.
//!
//! Index 0 is the HTTP proxy listener (`HTTPS_PROXY`, `HTTP_PROXY` and `ALL_PROXY` point at it).
//! Index `i >= 1` is the fixed forward `forwards[i - 1]`. [`send_fd`] writes one message.
//!
//! The payload is never empty, so an empty read is the end of the channel: the init is gone,
//! and with it the namespace; the proxy stops taking connections (those it has go on until
//! their ends close). A message of any other shape (no descriptor, several, a longer payload)
//! is dropped with the descriptors it carried, and an index with no forward closes its
//! connection.
//!
//! # What the proxy does
//!
//! On the proxy listener it reads one HTTP/1.x request head (at most 64 KiB, and no more than
//! 30 s of silence while it comes):
//!
//! - `CONNECT host:port`: if the allow list has `host:port`, berth connects and answers
//!   `200 Connection established`, then relays bytes both ways (HTTPS, or anything over TCP);
//! - a plain-HTTP request in absolute form (`GET http://host[:port]/path`): if allowed, berth
//!   connects, sends the head in origin form (`GET /path`), and relays both ways;
//! - anything else: `400`. A host not allowed: `403`, whose body names the host and port and
//!   the `allow_hosts` entry that would allow it. A name that does not resolve, or a host
//!   that cannot be reached: `502` (`504` when connecting takes more than 30 s).
//!
//! Those answers are the record of a refusal: the proxy logs nothing.
//!
//! # Decisions
//!
//! - **Matching is by the name the client sent**, before any resolution: `api.example.com`
//!   allowed does not allow `93.184.215.14`, and `127.0.0.1:4567` allowed does not allow
//!   `localhost:4567` (nor the other way round). Names compare case-insensitively, without a
//!   trailing dot. An address literal matches only an entry of the same address
//!   (`[::ffff:127.0.0.1]` is the same address as `127.0.0.1`).
//! - **A name whose last label is a number** (`127.1`, `2130706433`, `0x7f.1`) is neither a name
//!   nor an address here: the resolver would read it as an address, so no entry can allow it.
//! - **An allowed name does not lead inside by itself.** A name (listed exactly or through a
//!   wildcard) is connected only to the addresses it resolves to that are public; one that
//!   resolves to an internal address (loopback, link-local, including cloud metadata's
//!   169.254.169.254, private and shared networks, ULAs, unspecified, multicast, and their
//!   IPv4-mapped, IPv4-compatible and NAT64 forms: [`host::is_internal`]) is refused unless
//!   the allow list names that address on that port too (`localhost`, named exactly, counts as
//!   naming the loopback). Whoever controls a name's DNS (a subdomain's, a provider's, or a
//!   rebinding attacker's) could otherwise point it at the host's own listeners or the
//!   metadata service, which the namespace exists to keep out of reach. The address checked is
//!   the address connected to: the proxy resolves once.
//! - **Cloud metadata's names** (`metadata.google.internal`, `metadata`, `instance-data`, …)
//!   are never allowed through a wildcard, only by an entry naming them exactly (and then only
//!   at an address the list names, as above).
//! - **Plain HTTP is one request per connection**: the head sent upstream carries
//!   `Connection: close` (unless the client asked for an `Upgrade`), and everything after it is
//!   relayed as is. A client that kept the connection for a second request would send it to the
//!   same server, never to another host.
//! - The fixed forwards are berth's own (a provider's URL), and are not checked against the
//!   allow list.
//! - At most [`MAX_CONNECTIONS`] connections are served at once; more are closed as they come.

mod allow;
mod answer;
mod body;
mod channel;
mod connection;
mod host;
mod http;
mod provider;
mod serve;
mod tls;

use std::time::Duration;

pub use allow::AllowList;
pub(crate) use channel::{send, send_fd};
pub(crate) use connection::{forward, relay};
pub(crate) use host::{Host, split_host_port, strip_prefix_ignore_case};
pub use serve::{Proxy, ProxyHandle};

/// The listener index of the HTTP proxy; the fixed forwards are 1 and up.
pub(crate) const PROXY_INDEX: u8 = 0;
/// The longest request head the proxy reads.
const HEAD_LIMIT: usize = 64 * 1024;
/// How long the proxy waits for more of a request head before answering `408`.
const HEAD_SILENCE: Duration = Duration::from_secs(30);
/// How long connecting upstream may take, over all of a name's addresses.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a masked provider may stay silent while it answers (a model thinking before its
/// first token, between events of a stream): a provider's client waits as long.
const PROVIDER_SILENCE: Duration = Duration::from_secs(600);
/// Connections served at once: each holds two threads.
const MAX_CONNECTIONS: usize = 512;
/// After an error answer, how long (and how much) the proxy reads what the client still sends.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::channel::{Received, receive};
    use super::host::{Host, is_internal};
    use super::http::{Kind, Request, head_end};
    use super::*;
    use crate::MaskedKeys;
    use std::io::{self, Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
    use std::sync::mpsc;
    use std::thread;

    /// How long a test waits for what must happen.
    const PATIENCE: Duration = Duration::from_secs(10);

    fn allow(entries: &[&str]) -> AllowList {
        AllowList::parse(entries).expect("entries")
    }

    fn error_of(entry: &str) -> String {
        AllowList::parse([entry]).expect_err(entry).to_string()
    }

    fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two descriptors into `fds`, which we then own.
        unsafe {
            let made = libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            );
            assert_eq!(made, 0, "{}", io::Error::last_os_error());
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        }
    }

    /// A proxy serving berth's end of a fresh channel, and the init's end.
    fn start(entries: &[&str], forwards: Vec<(String, u16)>) -> (ProxyHandle, OwnedFd) {
        let (berths_end, inits_end) = seqpacket_pair();
        let handle = Proxy::serve(berths_end, allow(entries), forwards, MaskedKeys::default())
            .expect("serve");
        (handle, inits_end)
    }

    /// What the init does for one connection: the agent's client connects to a listener on
    /// the namespace's loopback (here the host's), the accepted socket goes over the channel,
    /// and the init closes its copy. The client is returned.
    fn connect_through(inits_end: &OwnedFd, index: u8) -> TcpStream {
        let inside = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(inside.local_addr().unwrap()).unwrap();
        let (accepted, _) = inside.accept().unwrap();
        send_fd(inits_end.as_fd(), accepted.as_fd(), index).unwrap();
        client.set_read_timeout(Some(PATIENCE)).unwrap();
        client
    }

    /// A server that echoes one connection, and ends its side when the client ends its own.
    fn echo_server() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let (mut reader, mut writer) = (&stream, &stream);
            let _ = io::copy(&mut reader, &mut writer);
            let _ = stream.shutdown(Shutdown::Write);
        });
        port
    }

    /// A web server for one request: hands over the head it received, answers `hello`.
    fn web_server() -> (u16, mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (heads, received) = mpsc::channel();
        thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
                head.push(byte[0]);
            }
            heads.send(String::from_utf8(head).unwrap()).unwrap();
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                )
                .unwrap();
        });
        (port, received)
    }

    fn read_to_close(mut stream: &TcpStream) -> String {
        let mut out = Vec::new();
        stream.read_to_end(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn read_exactly(mut stream: &TcpStream, length: usize) -> String {
        let mut out = vec![0; length];
        stream.read_exact(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Sends a request through the proxy and reads its whole answer.
    fn ask(inits_end: &OwnedFd, request: &str) -> String {
        let mut client = connect_through(inits_end, PROXY_INDEX);
        client.write_all(request.as_bytes()).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        read_to_close(&client)
    }

    fn assert_no_connection_waiting(listener: &TcpListener) {
        listener.set_nonblocking(true).unwrap();
        let accepted = listener.accept().map(|_| ()).map_err(|e| e.kind());
        assert_eq!(accepted, Err(io::ErrorKind::WouldBlock));
    }

    #[test]
    fn allow_list_reads_every_form() {
        let list = allow(&[
            "api.anthropic.com:443",
            "*.example.com:8443",
            "plain.org",
            "https://secure.net/v1/messages",
            "http://web.net",
            "HTTP://Other.Net:8080/x?y#z",
            "[::1]:8080",
            "127.0.0.1:4567",
            "  spaced.io:22  ",
        ]);
        assert!(list.allows("api.anthropic.com", 443));
        assert!(list.allows("a.example.com", 8443));
        assert!(list.allows("plain.org", 443));
        assert!(list.allows("secure.net", 443));
        assert!(list.allows("web.net", 80));
        assert!(list.allows("other.net", 8080));
        assert!(list.allows("[::1]", 8080));
        assert!(list.allows("::1", 8080));
        assert!(list.allows("127.0.0.1", 4567));
        assert!(list.allows("spaced.io", 22));
        assert!(!list.allows("api.anthropic.com", 80));
        assert!(!list.allows("web.net", 443));
        assert!(!list.allows("secure.net", 80));
        assert!(!AllowList::default().allows("api.anthropic.com", 443));
        assert!(AllowList::default().is_empty());
    }

    #[test]
    fn a_wildcard_allows_subdomains_not_the_domain() {
        let list = allow(&["*.example.com:443"]);
        assert!(list.allows("a.example.com", 443));
        assert!(list.allows("a.b.example.com", 443));
        assert!(list.allows("A.Example.COM.", 443));
        assert!(!list.allows("example.com", 443));
        assert!(!list.allows("badexample.com", 443));
        assert!(!list.allows("a.example.com.evil.net", 443));
        assert!(!list.allows("a.example.com", 80));
    }

    #[test]
    fn a_bare_name_allows_443_only() {
        let list = allow(&["example.com", "*.wild.net"]);
        assert!(list.allows("example.com", 443));
        assert!(!list.allows("example.com", 80));
        assert!(list.allows("x.wild.net", 443));
        assert!(!list.allows("x.wild.net", 80));
    }

    #[test]
    fn names_match_without_case_or_trailing_dot() {
        let list = allow(&["API.Example.com.:443"]);
        assert!(list.allows("api.example.com", 443));
        assert!(list.allows("API.EXAMPLE.COM.", 443));
        assert!(!list.allows("api.example.com..", 443));
    }

    #[test]
    fn an_address_matches_only_the_same_address() {
        let list = allow(&["127.0.0.1:4567", "[::1]:8080", "localhost:9000"]);
        assert!(list.allows("127.0.0.1", 4567));
        assert!(list.allows("[::ffff:127.0.0.1]", 4567), "the same address");
        assert!(!list.allows("localhost", 4567), "a name is not an address");
        assert!(!list.allows("127.0.0.2", 4567));
        assert!(list.allows("[0:0:0:0:0:0:0:1]", 8080));
        assert!(!list.allows("127.0.0.1", 8080));
        assert!(list.allows("localhost", 9000));
        assert!(!list.allows("127.0.0.1", 9000), "an address is not a name");
    }

    #[test]
    fn a_numeric_last_label_is_neither_name_nor_address() {
        // The resolver would take these for 127.0.0.1.
        for host in ["127.1", "2130706433", "0x7f.1", "0x7f000001", "1.2.3.0X4"] {
            assert!(Host::parse(host).is_none(), "{host}");
            assert!(error_of(&format!("{host}:443")).contains(host), "{host}");
        }
        assert!(
            Host::parse("0xcafe.example").is_some(),
            "only the last label counts"
        );
        assert!(Host::parse("a.b2c").is_some());
    }

    #[test]
    fn bad_entries_are_named_with_what_is_wrong() {
        let cases = [
            ("", "is empty"),
            ("ftp://files.example.com", "only http:// and https://"),
            ("https://user:pw@example.com", "user name or password"),
            ("*", "every host"),
            ("*:443", "every host"),
            ("a.*.example.com:443", "whole first label"),
            ("*example.com:443", "whole first label"),
            ("*.:443", "not a domain name"),
            ("*.127.0.0.1:443", "not a domain name"),
            ("example.com:0", "port"),
            ("example.com:65536", "port"),
            ("example.com:+443", "port"),
            ("example.com:", "port"),
            ("::1:8080", "brackets"),
            ("[::1", "`]`"),
            ("[::1]8080", "`:port`"),
            ("[example.com]:443", "neither a host name"),
            ("exa mple.com:443", "neither a host name"),
            ("bücher.example:443", "xn--"),
            (":443", "has no host"),
        ];
        for (entry, why) in cases {
            let error = error_of(entry);
            assert!(error.contains(&format!("`{entry}`")), "{entry}: {error}");
            assert!(error.contains(why), "{entry}: {error}");
        }
    }

    #[test]
    fn internal_addresses_are_told_apart_from_public_ones() {
        for internal in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "0.0.0.0",
            "0.1.2.3",
            "::",
            "169.254.169.254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.254",
            "192.168.1.1",
            "100.64.0.1",
            "100.100.100.200",
            "fd00::1",
            "fd00:ec2::254",
            "fc00::1",
            "fec0::1",
            "224.0.0.1",
            "255.255.255.255",
            "ff02::1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in [
            "93.184.215.14",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1",
            "64:ff9b::5db8:d70e",
            "::ffff:93.184.215.14",
        ] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn a_name_reaches_an_internal_address_only_where_the_list_names_it() {
        let list = allow(&[
            "api.example.com:443",
            "127.0.0.1:443",
            "[fd00::1]:443",
            "localhost:8080",
        ]);
        let name = Host::parse("api.example.com").unwrap();
        let ip = |a: &str| a.parse().unwrap();
        assert!(list.names_address(&name, ip("127.0.0.1"), 443));
        assert!(list.names_address(&name, ip("::ffff:127.0.0.1"), 443));
        assert!(list.names_address(&name, ip("fd00::1"), 443));
        assert!(
            !list.names_address(&name, ip("127.0.0.1"), 80),
            "another port"
        );
        assert!(!list.names_address(&name, ip("10.0.0.1"), 443));
        let localhost = Host::parse("localhost").unwrap();
        assert!(list.names_address(&localhost, ip("127.0.0.1"), 8080));
        assert!(list.names_address(&localhost, ip("::1"), 8080));
        assert!(!list.names_address(&localhost, ip("10.0.0.1"), 8080));
        assert!(
            !list.names_address(&name, ip("127.0.0.1"), 8080),
            "not localhost"
        );
    }

    #[test]
    fn a_metadata_name_is_allowed_only_by_its_own_entry() {
        let list = allow(&["*.google.internal:80", "*.example.com:80"]);
        let metadata = Host::parse("metadata.google.internal").unwrap();
        assert!(list.rule_for(&metadata, 80).is_none());
        assert!(
            list.rule_for(&Host::parse("x.google.internal").unwrap(), 80)
                .is_some()
        );
        let exact = allow(&["metadata.google.internal:80"]);
        assert!(exact.rule_for(&metadata, 80).is_some());
    }

    #[test]
    fn a_plain_request_is_put_in_origin_form() {
        let request = Request::parse(
            b"GET http://Example.com:8080/a/b?c=d HTTP/1.1\r\n\
              Host: wrong.example\r\n\
              Proxy-Connection: keep-alive\r\n\
              proxy-authorization: Basic eDp5\r\n\
              Connection: keep-alive\r\n\
              Keep-Alive: timeout=5\r\n\
              X-Folded: one\r\n\
              \ttwo\r\n\
              Accept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(request.host, Host::Name("example.com".into()));
        assert_eq!(request.port, 8080);
        let Kind::Http { head } = request.kind else {
            panic!("not plain HTTP: {request:?}");
        };
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a/b?c=d HTTP/1.1\r\nHost: Example.com:8080\r\nX-Folded: one\r\n\ttwo\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );

        let head_of = |head: &[u8]| match Request::parse(head).unwrap().kind {
            Kind::Http { head } => String::from_utf8(head).unwrap(),
            Kind::Tunnel => panic!("a tunnel"),
        };
        assert_eq!(
            head_of(b"GET http://x.org HTTP/1.0\n\n"),
            "GET / HTTP/1.0\r\nHost: x.org\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            head_of(b"GET http://x.org?q HTTP/1.1\r\n\r\n"),
            "GET /?q HTTP/1.1\r\nHost: x.org\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            head_of(b"GET http://x.org/ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"),
            "GET /ws HTTP/1.1\r\nHost: x.org\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"
        );
    }

    #[test]
    fn requests_the_proxy_cannot_carry_are_refused_with_why() {
        for (head, why) in [
            (&b"GET / HTTP/1.1\r\nHost: x.org\r\n\r\n"[..], "neither"),
            (b"GET https://x.org/ HTTP/1.1\r\n\r\n", "CONNECT"),
            (b"CONNECT x.org HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT 127.1:443 HTTP/1.1\r\n\r\n", "`127.1`"),
            (b"GET http://u@x.org/ HTTP/1.1\r\n\r\n", "user name"),
            (b"GET http://x.org/ HTTP/2\r\n\r\n", "HTTP/1.1"),
            (b"hello\r\n\r\n", "METHOD"),
        ] {
            let error = Request::parse(head).expect_err(std::str::from_utf8(head).unwrap());
            assert!(error.contains(why), "{error}");
        }
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nrest", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    }

    #[test]
    fn the_channel_carries_one_descriptor_and_an_index_per_message() {
        let (berths_end, inits_end) = seqpacket_pair();
        let file = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        send_fd(inits_end.as_fd(), file.as_fd(), 7).unwrap();
        match receive(berths_end.as_fd()).unwrap() {
            Received::Connection { socket, index } => {
                assert_eq!(index, 7);
                assert_ne!(
                    socket.as_raw_fd(),
                    file.as_raw_fd(),
                    "a descriptor of its own"
                );
            }
            other => panic!("{other:?}"),
        }
        // A message without a descriptor, then one too long: both dropped, the channel goes on.
        for payload in [&[1u8][..], &[1, 2]] {
            // SAFETY: a send of a live buffer.
            let sent = unsafe {
                libc::send(
                    inits_end.as_raw_fd(),
                    payload.as_ptr().cast(),
                    payload.len(),
                    0,
                )
            };
            assert_eq!(sent, payload.len() as isize);
            assert!(matches!(
                receive(berths_end.as_fd()).unwrap(),
                Received::Malformed
            ));
        }
        drop(inits_end);
        assert!(matches!(
            receive(berths_end.as_fd()).unwrap(),
            Received::End
        ));
    }

    #[test]
    fn connect_to_an_allowed_host_relays_both_ways() {
        let port = echo_server();
        let (_proxy, inits_end) = start(&[&format!("127.0.0.1:{port}")], vec![]);
        let mut client = connect_through(&inits_end, PROXY_INDEX);
        // Bytes sent before the answer (as a TLS client may) go through too.
        write!(
            client,
            "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nearly"
        )
        .unwrap();
        let established = "HTTP/1.1 200 Connection established\r\n\r\n";
        assert_eq!(
            read_exactly(&client, established.len() + 5),
            format!("{established}early")
        );
        client.write_all(b"late").unwrap();
        assert_eq!(read_exactly(&client, 4), "late");
        // Our end closes; the echo server's end follows; the proxy passes both on.
        client.shutdown(Shutdown::Write).unwrap();
        assert_eq!(read_to_close(&client), "");
    }

    #[test]
    fn connect_to_a_port_not_allowed_gets_403_and_no_connection() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = upstream.local_addr().unwrap().port();
        let (_proxy, inits_end) = start(&["127.0.0.1:443"], vec![]);
        let answer = ask(
            &inits_end,
            &format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"),
        );
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        assert!(
            answer.contains(&format!("allow_hosts = [\"127.0.0.1:{port}\"]")),
            "{answer}"
        );
        // The proxy decides before it connects, and it has answered.
        assert_no_connection_waiting(&upstream);
    }

    #[test]
    fn localhost_is_allowed_only_by_name() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = upstream.local_addr().unwrap().port();
        let (_proxy, inits_end) = start(&[&format!("127.0.0.1:{port}")], vec![]);
        let answer = ask(
            &inits_end,
            &format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n"),
        );
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        assert!(
            answer.contains(&format!("allow_hosts = [\"localhost:{port}\"]")),
            "{answer}"
        );
        assert_no_connection_waiting(&upstream);

        let port = echo_server();
        let (_proxy, inits_end) = start(&[&format!("localhost:{port}")], vec![]);
        let answer = ask(
            &inits_end,
            &format!("CONNECT LocalHost.:{port} HTTP/1.1\r\n\r\nping"),
        );
        assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\nping");
    }

    #[test]
    fn a_plain_http_request_goes_upstream_in_origin_form() {
        let (port, heads) = web_server();
        let (_proxy, inits_end) = start(&[&format!("http://127.0.0.1:{port}")], vec![]);
        let answer = ask(
            &inits_end,
            &format!(
                "GET http://127.0.0.1:{port}/path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
                 Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\nUser-Agent: test\r\n\r\n"
            ),
        );
        assert_eq!(
            heads.recv_timeout(PATIENCE).unwrap(),
            format!(
                "GET /path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: test\r\nConnection: close\r\n\r\n"
            )
        );
        assert_eq!(
            answer,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
        );
    }

    #[test]
    fn a_name_that_does_not_resolve_gets_502() {
        // `.invalid` never resolves (RFC 6761).
        let (_proxy, inits_end) = start(&["http://nothing.invalid"], vec![]);
        let answer = ask(
            &inits_end,
            "GET http://nothing.invalid/ HTTP/1.1\r\nHost: nothing.invalid\r\n\r\n",
        );
        assert!(
            answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
            "{answer}"
        );
        assert!(
            answer.contains("could not resolve nothing.invalid"),
            "{answer}"
        );
    }

    #[test]
    fn what_is_not_a_proxy_request_gets_400() {
        let (_proxy, inits_end) = start(&["example.com"], vec![]);
        let answer = ask(
            &inits_end,
            "GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n",
        );
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );
        assert!(answer.contains("`GET /index.html HTTP/1.1`"), "{answer}");
    }

    #[test]
    fn a_head_over_64_kib_gets_431() {
        let (_proxy, inits_end) = start(&["example.com"], vec![]);
        let request = format!(
            "GET http://example.com/ HTTP/1.1\r\nX-Big: {}",
            "a".repeat(70_000)
        );
        let answer = ask(&inits_end, &request);
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    }

    #[test]
    fn a_fixed_forward_relays() {
        let port = echo_server();
        let (_proxy, inits_end) = start(&[], vec![("127.0.0.1".into(), port)]);
        let mut client = connect_through(&inits_end, 1);
        client.write_all(b"no HTTP here").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        assert_eq!(read_to_close(&client), "no HTTP here");
    }

    #[test]
    fn an_index_without_a_forward_is_closed() {
        let port = echo_server();
        let (_proxy, inits_end) = start(&[], vec![("127.0.0.1".into(), port)]);
        let client = connect_through(&inits_end, 2);
        assert_eq!(read_to_close(&client), "");
    }

    #[test]
    fn the_end_of_the_channel_ends_the_serving_thread() {
        let (proxy, inits_end) = start(&[], vec![]);
        drop(inits_end);
        assert!(proxy.wait(PATIENCE));
    }

    #[test]
    fn stop_ends_the_serving_thread_and_the_init_hears_of_it() {
        let (proxy, inits_end) = start(&[], vec![]);
        proxy.stop();
        assert!(proxy.wait(PATIENCE));
        let file = std::fs::File::open("/dev/null").unwrap();
        let sent = send_fd(inits_end.as_fd(), file.as_fd(), 0).map_err(|e| e.raw_os_error());
        assert_eq!(sent, Err(Some(libc::EPIPE)));
    }

    #[test]
    fn serve_takes_only_a_seqpacket_socket() {
        let stream = TcpListener::bind("127.0.0.1:0").unwrap();
        let refused = Proxy::serve(
            OwnedFd::from(stream),
            AllowList::default(),
            vec![],
            MaskedKeys::default(),
        );
        assert_eq!(
            refused.err().map(|e| e.kind()),
            Some(io::ErrorKind::InvalidInput)
        );
    }
}
