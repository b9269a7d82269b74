//! Who may call the server, checked on every request but `/healthz` before it reaches a
//! route: `Host` (a name this server answers to: loopback, the address it listens on, or one
//! allowed), a browser's `Origin` (the server's own, or one allowed: 403 otherwise, so
//! neither another site through DNS rebinding nor another page on this machine, a dev server
//! on `localhost:3000`, can drive the agent), and the token (401 without a
//! live one). The token decides who the request acts for ([`Principal`]): the admin token
//! (`BERTH_SERVE_TOKEN`, or an admin token of `berth token create`) for everything, a
//! device's token for that device's sessions over `/acp` and its own workspace on the web
//! page. On loopback with no admin token, a request without a token is the machine's own, and
//! acts as the admin.
//!
//! A browser carries the token in the `berth_token` cookie that `/login` sets (`HttpOnly`,
//! `SameSite=Strict`, `Secure` under TLS). A page's own origin (the `Host` it was served from)
//! may call the server; a page asking without a token is shown the sign-in page (401).

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use berth_web::{Reach, Viewer};
use sha2::{Digest, Sha256};

use crate::ServeOptions;
use crate::tokens::{Role, TokenError, TokenRecord, TokenStore};

/// The cookie a signed-in browser carries its token in.
const COOKIE: &str = "berth_token";

/// Whom a request acts for, put in its extensions for the routes.
#[derive(Debug, Clone)]
pub enum Principal {
    /// The admin: the server's own token (or an open loopback server), or an admin token of
    /// the store, which open connections check is still live.
    Admin(Option<TokenRecord>),
    /// A device's token: what `/acp` lets it reach, and what it checks is still live.
    Device(TokenRecord),
}

impl Principal {
    /// Whose prompts a request's are, for the rate: the server's own admin token, or a token
    /// of the store by its name (so no token's name can share the admin's count).
    pub fn counted_as(&self) -> String {
        match self {
            Principal::Admin(None) => "admin".to_owned(),
            Principal::Admin(Some(record)) | Principal::Device(record) => {
                format!("token {}", record.name)
            }
        }
    }
}

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The rules, settled once from the options.
#[derive(Debug)]
pub struct Access {
    token: Option<String>,
    tokens: TokenStore,
    /// A request without a token acts as the admin: loopback, and no admin token set.
    open: bool,
    /// Host names, or `host:port`, requests may be addressed to.
    hosts: Vec<String>,
    /// Origins (`scheme://host` or `scheme://host:port`, port `*` for any) pages may call from.
    origins: Vec<String>,
    /// Served over TLS: the cookie is `Secure`.
    tls: bool,
    /// No web page is mounted (`berth mcp --transport http`): every path answers a missing
    /// token in the protocols' terms, not with the sign-in page.
    protocols_only: bool,
    /// What a page's CSRF token is derived from with the viewer's token: this process's own,
    /// so a token seen by a page of another server says nothing here.
    csrf_secret: [u8; 32],
}

impl Access {
    pub fn new(options: &ServeOptions, tokens: TokenStore) -> Access {
        let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
        if !options.listen.ip().is_unspecified() {
            hosts.push(options.listen.ip().to_string());
        }
        hosts.extend(options.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
        let origins = options
            .allowed_origins
            .iter()
            .map(|o| without_default_port(&o.trim_end_matches('/').to_ascii_lowercase()))
            .collect();
        Access {
            token: options.token.clone(),
            tokens,
            open: options.open && options.listen.ip().is_loopback() && options.token.is_none(),
            hosts,
            origins,
            tls: options.tls.is_some(),
            protocols_only: false,
            csrf_secret: random_secret(),
        }
    }

    /// The rules for a server of the protocols alone, with no web page to sign in to.
    pub fn protocols_only(self) -> Access {
        Access {
            protocols_only: true,
            ..self
        }
    }

    /// Whether a request addressed to `host` (the `Host` header: `name`, `name:port`,
    /// `[v6]:port`) may be served.
    fn host_allowed(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let name = match host.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(""),
            None => host.rsplit_once(':').map_or(host.as_str(), |(n, _)| n),
        };
        self.hosts.iter().any(|h| *h == host || h == name)
    }

    /// Whether a page of `origin` may call the server: one this server served (its scheme,
    /// and its host and port those of the request's `Host`, already checked), or an origin
    /// allowed (exactly, or with `:*` for any port). A loopback page of another port is not
    /// this server's: an open loopback server (no token) would otherwise act as the admin for
    /// any web page served on this machine.
    fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let origin = origin.to_ascii_lowercase();
        if self.origins.contains(&without_default_port(&origin)) {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        let own_scheme = if self.tls { "https" } else { "http" };
        if scheme == own_scheme && !host.is_empty() && rest == host.to_ascii_lowercase() {
            return true;
        }
        let name = match rest.rsplit_once(':') {
            Some((n, p)) if !p.contains(']') => n,
            _ => rest,
        };
        self.origins.iter().any(|allowed| {
            *allowed == origin
                || allowed
                    .strip_suffix(":*")
                    .is_some_and(|prefix| prefix == format!("{scheme}://{name}"))
        })
    }

    /// Whom the request acts for, and the token it presented (`Authorization: Bearer`, else
    /// the cookie); `None` when its token is missing, wrong, revoked or expired.
    fn principal<'r>(
        &self,
        request: &'r Request,
    ) -> Result<Option<(Principal, Option<&'r str>)>, TokenError> {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(header_text)
            .and_then(|v| v.strip_prefix("Bearer "))
            .or_else(|| cookie(request));
        let Some(presented) = presented else {
            return Ok(self.open.then_some((Principal::Admin(None), None)));
        };
        Ok(self
            .principal_of(presented)?
            .map(|principal| (principal, Some(presented))))
    }

    /// Whom a token acts for; `None` when it is wrong, revoked or expired.
    fn principal_of(&self, presented: &str) -> Result<Option<Principal>, TokenError> {
        if self
            .token
            .as_ref()
            .is_some_and(|t| same(presented.as_bytes(), t.as_bytes()))
        {
            return Ok(Some(Principal::Admin(None)));
        }
        match self.tokens.find(presented) {
            Ok(Some(record)) => Ok(Some(match record.role {
                Role::Admin => Principal::Admin(Some(record)),
                Role::Device { .. } => Principal::Device(record),
            })),
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The web page's CSRF token for a viewer who presented `token` (none: the machine's own).
    fn csrf(&self, token: Option<&str>) -> String {
        let mut hash = Sha256::new();
        hash.update(self.csrf_secret);
        hash.update(token.unwrap_or("").as_bytes());
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// An origin's scheme with its default port (`https://`, `:443`), when it names one.
fn scheme_and_default_port(origin: &str) -> Option<(&'static str, &'static str)> {
    [("https://", ":443"), ("http://", ":80")]
        .into_iter()
        .find(|(scheme, _)| origin.starts_with(scheme))
}

/// `https://app.example.com:443` as a browser sends it, `https://app.example.com`: an origin
/// allowed with its scheme's port written out is the same origin.
fn without_default_port(origin: &str) -> String {
    match scheme_and_default_port(origin) {
        Some((_, port)) => origin.strip_suffix(port).unwrap_or(origin).to_owned(),
        None => origin.to_owned(),
    }
}

/// 32 random bytes (two version-4 UUIDs' worth, from the system's generator).
fn random_secret() -> [u8; 32] {
    let mut secret = [0u8; 32];
    secret[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    secret[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    secret
}

/// The token in the request's `berth_token` cookie.
fn cookie(request: &Request) -> Option<&str> {
    request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(header_text)
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .filter(|t| !t.is_empty())
}

/// A header's value as text: one that is not visible ASCII is read as absent (no token,
/// cookie or host of berth's is anything else), and said at debug.
pub(crate) fn header_text(value: &axum::http::HeaderValue) -> Option<&str> {
    match value.to_str() {
        Ok(text) => Some(text),
        Err(e) => {
            tracing::debug!("a header that is not text was read as absent: {e}");
            None
        }
    }
}

/// Paths that are not the web page's: the protocols, which answer a missing token in their
/// own terms.
fn is_protocol(path: &str) -> bool {
    path == "/acp" || path == "/mcp" || path.starts_with("/mcp/")
}

/// The middleware: refuses what [`Access`] does not allow, before any route runs.
pub async fn check(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(header_text)
        .unwrap_or("");
    if !access.host_allowed(host) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this berth server does not answer to that Host; start it with --allow-host NAME",
        );
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let allowed = origin
            .to_str()
            .is_ok_and(|o| access.origin_allowed(o, host));
        if !allowed {
            return refuse(
                StatusCode::FORBIDDEN,
                "pages of this Origin may not call this berth server; start it with --allow-origin ORIGIN",
            );
        }
    }
    let path = request.uri().path();
    if berth_web::is_public(path) && !access.protocols_only {
        return next.run(request).await;
    }
    let (principal, presented) = match access.principal(&request) {
        Ok(Some(p)) => p,
        Ok(None) if !is_protocol(path) && !access.protocols_only => {
            return berth_web::login_page(
                StatusCode::UNAUTHORIZED,
                cookie(&request)
                    .map(|_| "The token this browser signed in with is not valid any more."),
            );
        }
        Ok(None) => {
            let mut response = refuse(
                StatusCode::UNAUTHORIZED,
                "this berth server needs `Authorization: Bearer <token>` with a live token (`berth token create`)",
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                "Bearer".parse().expect("a header value"),
            );
            return response;
        }
        // The token file cannot be read: nobody is let in until it can.
        Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    if matches!(principal, Principal::Device(_)) && is_protocol(path) && path != "/acp" {
        return refuse(
            StatusCode::FORBIDDEN,
            "a device's token reaches /acp and the web page only; /mcp needs the admin token",
        );
    }
    let viewer = Viewer {
        reach: match &principal {
            Principal::Admin(_) => Reach::All,
            Principal::Device(record) => match &record.role {
                Role::Device { device } => Reach::Device(device.clone()),
                Role::Admin => Reach::All,
            },
        },
        csrf: access.csrf(presented),
    };
    let mut request = request;
    request.extensions_mut().insert(principal);
    request.extensions_mut().insert(viewer);
    next.run(request).await
}

/// `GET /login`: the sign-in page.
pub async fn login_form() -> Response {
    berth_web::login_page(StatusCode::OK, None)
}

/// `POST /login` (`token=…`): a live token is kept in the browser's cookie, and the browser
/// goes to the workspaces; anything else is the sign-in page again, saying why.
pub async fn login(
    State(access): State<Arc<Access>>,
    axum::Form(form): axum::Form<Login>,
) -> Response {
    let token = form.token.trim();
    // A cookie holds only these; berth's own tokens always do.
    let cookie_safe = !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b',' | b';' | b'\\'));
    let principal = if cookie_safe {
        access.principal_of(token)
    } else {
        Ok(None)
    };
    match principal {
        Ok(Some(_)) => {
            let secure = if access.tls { "; Secure" } else { "" };
            let cookie = format!(
                "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000{secure}"
            );
            let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
            if let Ok(value) = cookie.parse() {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Ok(None) => berth_web::login_page(
            StatusCode::UNAUTHORIZED,
            Some("That token is not valid: it is wrong, revoked or expired."),
        ),
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// The sign-in form's fields.
#[derive(serde::Deserialize)]
pub struct Login {
    token: String,
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, format!("{why}\n")).into_response()
}

/// Equality whose time does not depend on where the inputs differ, so a token cannot be
/// guessed a byte at a time from response times.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token named "admin" had the admin's count of prompts.
    #[test]
    fn no_token_shares_the_admins_count() {
        let home = tempfile::tempdir().unwrap();
        let tokens = TokenStore::new(home.path());
        let (device, _) = tokens
            .create(
                "admin",
                Role::Device {
                    device: berth_ops::DeviceId::new("admin").unwrap(),
                },
                None,
            )
            .unwrap();
        let admin = Principal::Admin(None).counted_as();
        assert_ne!(Principal::Device(device).counted_as(), admin);
    }

    fn access(listen: &str, hosts: &[&str], origins: &[&str]) -> Access {
        let home = std::env::temp_dir();
        Access::new(
            &ServeOptions {
                listen: listen.parse().unwrap(),
                token: None,
                open: true,
                allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
                allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
                max_connections: 1,
                max_message_bytes: 1,
                ping_every: std::time::Duration::from_secs(1),
                max_prompts_per_minute: 0,
                tls: None,
                max_mcp_sessions: 1,
                mcp_session_idle: std::time::Duration::from_secs(1),
                acp_http_idle: std::time::Duration::from_secs(1),
            },
            TokenStore::new(&home),
        )
    }

    #[test]
    fn hosts() {
        let a = access("0.0.0.0:8765", &["berth.example.com"], &[]);
        assert!(a.host_allowed("localhost:8765"));
        assert!(a.host_allowed("127.0.0.1"));
        assert!(a.host_allowed("[::1]:8765"));
        assert!(a.host_allowed("Berth.Example.com:443"));
        assert!(!a.host_allowed("evil.example.com:8765"));
        assert!(!a.host_allowed(""));
        let b = access("192.168.1.5:8765", &[], &[]);
        assert!(b.host_allowed("192.168.1.5:8765"));
    }

    #[test]
    fn origins() {
        let a = access(
            "127.0.0.1:1",
            &[],
            &["https://app.example.com", "http://dev.example.com:*"],
        );
        // Another page on this machine is not this server's (it acted as the admin).
        assert!(!a.origin_allowed("http://localhost:3000", "127.0.0.1:1"));
        assert!(!a.origin_allowed("http://127.0.0.1:2", "127.0.0.1:1"));
        assert!(!a.origin_allowed("http://[::1]:3000", "127.0.0.1:1"));
        assert!(a.origin_allowed("http://127.0.0.1:1", "127.0.0.1:1"));
        // Its own host and port, but not its scheme.
        assert!(!a.origin_allowed("https://127.0.0.1:1", "127.0.0.1:1"));
        assert!(a.origin_allowed("http://192.168.1.5:8765", "192.168.1.5:8765"));
        assert!(!a.origin_allowed("http://192.168.1.6:8765", "192.168.1.5:8765"));
        assert!(a.origin_allowed("https://app.example.com", ""));
        assert!(a.origin_allowed("http://dev.example.com:8080", ""));
        assert!(!a.origin_allowed("https://app.example.com:8443", ""));
        assert!(!a.origin_allowed("https://evil.example.com", ""));
        assert!(!a.origin_allowed("null", ""));
        assert!(!a.origin_allowed("http://localhost.evil.com", ""));
        // The scheme's own port written out is the same origin, either side.
        let b = access("127.0.0.1:1", &[], &["https://app.example.com:443"]);
        assert!(b.origin_allowed("https://app.example.com", ""));
        assert!(b.origin_allowed("https://app.example.com:443", ""));
        assert!(!b.origin_allowed("https://app.example.com:8443", ""));
        assert!(!b.origin_allowed("http://app.example.com", ""));
        assert!(a.origin_allowed("https://app.example.com:443", ""));
    }

    #[test]
    fn token_comparison() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secre"));
    }
}
