//! The host's loopback as tests of forwarded ports see it: a block of ports nothing listens
//! on, and one plain HTTP GET of a path.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::Duration;

/// The first port of a block of 10 from `from` up that nothing on the host listens on now,
/// and that no earlier call of this test binary was given (its tests run at once).
pub fn free_port_block(from: u16) -> u16 {
    static GIVEN: Mutex<Option<u16>> = Mutex::new(None);
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let mut first = given.map_or(from, |g| g.max(from));
    while first < 60_000 {
        let next = first + 10;
        if (first..next).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            *given = Some(next);
            return first;
        }
        first = next;
    }
    panic!("no free block of 10 ports from {from}");
}

/// One `GET path` over HTTP/1.0 at the host's `127.0.0.1:port`: the whole answer, or why
/// there is none (an empty answer is an error too).
pub fn http_get(port: u16, path: &str) -> io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    if answer.is_empty() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "no answer"));
    }
    Ok(answer)
}
