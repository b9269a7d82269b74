//! The TLS client of a masked provider's endpoint: rustls on ring, with the system's roots
//! (rustls-platform-verifier, as berth's own provider client has through reqwest), HTTP/1.1
//! only. Made once per process.

use std::io;
use std::net::TcpStream;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use rustls_platform_verifier::BuilderVerifierExt;

/// A TLS connection to a provider.
pub(super) type TlsStream = StreamOwned<ClientConnection, TcpStream>;

fn config() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .and_then(|builder| builder.with_platform_verifier())
                .map_err(|e| format!("cannot set up TLS: {e}"))?
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Ok(Arc::new(config))
        })
        .clone()
}

/// TLS over `tcp` to `host` (a name, or an address), the handshake done: a certificate the
/// system's roots do not vouch for for `host` is an error here, not at the first read.
pub(super) fn connect(tcp: TcpStream, host: &str) -> io::Result<TlsStream> {
    let config = config().map_err(io::Error::other)?;
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let connection = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut stream = StreamOwned::new(connection, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}
