//! TLS for `berth serve` (`--tls-cert`, `--tls-key`; rustls with ring): the listener hands the
//! server connections whose handshake is over. Handshakes run on tasks of their own, bounded in
//! time, so a client that stalls in its handshake holds up no other client's; and in number
//! ([`MAX_HANDSHAKES`]): past that, connections wait in the kernel's backlog instead of each
//! costing a task and a TLS state here.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client may take over its handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// How many handshakes may be under way at once.
pub const MAX_HANDSHAKES: usize = 128;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate chain {path}: {reason}")]
    Cert { path: String, reason: String },
    #[error("cannot read the TLS private key {path}: {reason}")]
    Key { path: String, reason: String },
    #[error("the TLS certificate and key do not go together: {0}")]
    Config(String),
}

/// The server's TLS settings from its PEM certificate chain and private key.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let shown = |p: &Path| p.display().to_string();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| TlsError::Cert {
            path: shown(cert),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Cert {
            path: shown(cert),
            reason: "it holds no certificate".to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: shown(key),
        reason: e.to_string(),
    })?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| TlsError::Config(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A listener whose connections are TLS streams, their handshakes done.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    /// The permits of handshakes, `cap` in all.
    #[cfg_attr(not(test), allow(dead_code))]
    in_flight: Arc<Semaphore>,
    #[cfg_attr(not(test), allow(dead_code))]
    cap: usize,
}

impl TlsListener {
    pub fn new(listener: TcpListener, acceptor: TlsAcceptor) -> io::Result<TlsListener> {
        TlsListener::with_cap(listener, acceptor, MAX_HANDSHAKES)
    }

    /// A listener with at most `cap` handshakes under way.
    fn with_cap(
        listener: TcpListener,
        acceptor: TlsAcceptor,
        cap: usize,
    ) -> io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let handshakes = Arc::new(Semaphore::new(cap));
        let in_flight = handshakes.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    // Out of descriptors, a connection reset before accept: try again.
                    Err(e) => {
                        tracing::warn!("a TLS connection could not be accepted: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // A full house accepts nothing more until a handshake ends: the connections
                // after this one wait in the kernel's backlog.
                let Ok(permit) = handshakes.clone().acquire_owned().await else {
                    return;
                };
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::debug!(%peer, "TCP_NODELAY could not be set: {e}");
                }
                let (acceptor, ready) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    // A failed or stalled handshake is that client's end, nobody else's.
                    let shaken = tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await;
                    drop(permit);
                    match shaken {
                        Ok(Ok(tls)) => {
                            if ready.send((tls, peer)).await.is_err() {
                                tracing::debug!(%peer, "a TLS connection came as the server stopped");
                            }
                        }
                        Ok(Err(e)) => tracing::info!(%peer, "a TLS handshake failed: {e}"),
                        Err(_) => tracing::info!(
                            %peer,
                            "a TLS handshake took longer than {}s, and was dropped",
                            HANDSHAKE.as_secs()
                        ),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(TlsListener {
            local,
            ready,
            in_flight,
            cap,
        })
    }

    /// How many handshakes are under way.
    #[cfg(test)]
    fn handshakes(&self) -> usize {
        self.cap - self.in_flight.available_permits()
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accepting task ended only with the listener: wait for shutdown.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

impl berth_ops::Kinded for TlsError {
    /// A certificate or key that cannot be used is a setting to fix.
    fn kind(&self) -> berth_ops::ErrorKind {
        berth_ops::ErrorKind::Invalid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every connection got a handshake task at once, however many stalled in it: a client
    /// opening thousands of connections and sending nothing held thousands of TLS states.
    #[tokio::test]
    async fn stalled_handshakes_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let made = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl makes the test's certificate");
        assert!(made.status.success(), "{made:?}");
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = tcp.local_addr().unwrap();
        let listener = TlsListener::with_cap(tcp, acceptor(&cert, &key).unwrap(), 4).unwrap();
        let mut stalled = Vec::new();
        for _ in 0..12 {
            stalled.push(TcpStream::connect(address).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(listener.handshakes(), 4);
        // One gone frees its place for the next in the backlog.
        drop(stalled.remove(0));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(listener.handshakes(), 4);
        drop(stalled);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(listener.handshakes(), 0);
    }
}
