//! The provider keys an agent process never holds: what it gets instead (a stand-in for each
//! key, and a base URL on berth's proxy inside its network namespace), and what the proxy does
//! with a request there (the real base URL, and where the provider reads a key).
//!
//! An agent's provider key, once in its environment, is the agent's to copy anywhere it can
//! write or reach (its own provider included, in a prompt). So, for the agents berth knows and
//! any `[agents.NAME]` with `mask_keys = true`, the key berth would pass stays in berth: the
//! agent's key variable holds a stand-in (`berth-stand-in-ANTHROPIC_API_KEY`), its base-URL
//! variable points at `http://127.0.0.1:3128/berth/anthropic`, and berth's proxy forwards what
//! comes there to the real base URL with the stand-in replaced by the key
//! (`proxy/provider.rs`).
//!
//! # Decisions
//!
//! - **A provider is masked only when berth passes one of its keys.** Without one the agent
//!   uses its own login (an OAuth file in its state, which is its own), and its base URL is
//!   passed as it is.
//! - **The stand-in is replaced only where the provider reads a key** (Anthropic's `x-api-key`
//!   and `Authorization`, OpenAI's `Authorization` and `api-key`, Gemini's `x-goog-api-key` and
//!   its `key` query parameter), and only on the endpoint of the provider the key is for: an
//!   agent cannot have berth put a key in a header its provider might echo, nor send one
//!   provider's key to another. A value that is not a stand-in (the agent's own login) passes
//!   as it is.
//! - **A key that no HTTP header can carry, or a base URL the proxy cannot read, refuses the
//!   agent** rather than handing it the key: the error names the variable and
//!   `mask_keys = false`.

use berth_core::config::{ProviderKind, Secret};

use crate::SandboxError;
use crate::policy::AgentProfile;

/// A provider whose key berth can keep from an agent, and where its requests carry the key.
/// Its name, key variables, base URL variable and host are berth-core's `ProviderKind`'s;
/// what is here is how berth's proxy serves it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Provider {
    pub kind: ProviderKind,
    /// Its endpoint on berth's proxy is `/berth/NAME`.
    pub name: &'static str,
    /// The request headers its clients put a key in, lowercase.
    pub headers: &'static [&'static str],
    /// The query parameter its clients may put a key in.
    pub query: Option<&'static str>,
}

impl Provider {
    /// The variable its clients read their base URL from.
    pub fn base_var(&self) -> &'static str {
        self.kind.base_url_variable()
    }

    /// The variables that hold its keys.
    pub fn keys(&self) -> &'static [&'static str] {
        self.kind.agent_key_variables()
    }

    /// Its base URL where [`Provider::base_var`] is not set, as its clients read that
    /// variable.
    pub fn default_base(&self) -> &'static str {
        self.kind.default_base_url()
    }
}

/// The providers of the agents berth knows.
pub(crate) const PROVIDERS: [Provider; 3] = [
    Provider {
        kind: ProviderKind::Claude,
        name: "anthropic",
        headers: &["x-api-key", "authorization"],
        query: None,
    },
    Provider {
        kind: ProviderKind::Openai,
        name: "openai",
        headers: &["authorization", "api-key"],
        query: None,
    },
    Provider {
        kind: ProviderKind::Gemini,
        name: "gemini",
        headers: &["x-goog-api-key"],
        query: Some("key"),
    },
];

/// Where a masked provider's requests go: its real base URL, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Upstream {
    pub tls: bool,
    /// A name, or an address (an IPv6 one without brackets).
    pub host: String,
    pub port: u16,
    /// The base URL's path, without a trailing `/` (empty for none).
    pub path: String,
}

/// One key held back: the variable, the stand-in the agent gets, and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StandIn {
    pub var: &'static str,
    pub stand_in: String,
    pub real: Secret,
}

/// A masked provider, as berth's proxy serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub provider: &'static Provider,
    pub upstream: Upstream,
    pub keys: Vec<StandIn>,
}

impl Route {
    /// The path its endpoint starts with on berth's proxy.
    pub fn prefix(&self) -> String {
        format!("/berth/{}", self.provider.name)
    }

    /// The key `token` stands in for, if it is one of this provider's stand-ins.
    pub fn real_key(&self, token: &str) -> Option<&str> {
        self.keys
            .iter()
            .find(|k| k.stand_in == token)
            .map(|k| k.real.expose())
    }
}

/// The keys berth keeps from one agent process: what it gets instead ([`MaskedKeys::env`]),
/// and the routes berth's proxy serves for it. Empty: nothing is masked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MaskedKeys {
    routes: Vec<Route>,
}

impl MaskedKeys {
    /// The keys to keep from an agent of `profile` (`None`: one berth does not know, whose
    /// entry asked for `mask_keys`: every provider's), given `passed`, the provider variables
    /// berth passes it, with their values. A provider is masked when `passed` holds one of its
    /// keys; its real base URL is `passed`'s, else its default.
    pub fn for_agent(
        profile: Option<&AgentProfile>,
        passed: &[(String, String)],
    ) -> Result<MaskedKeys, SandboxError> {
        let value = |name: &str| {
            passed
                .iter()
                .rev()
                .find(|(k, v)| k == name && !v.is_empty())
                .map(|(_, v)| v.as_str())
        };
        let mut routes = Vec::new();
        for provider in PROVIDERS
            .iter()
            .filter(|p| profile.is_none_or(|profile| profile.provider == p.kind))
        {
            let mut keys = Vec::new();
            for var in provider.keys() {
                let Some(real) = value(var) else { continue };
                if !real.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(refusal(
                        var,
                        "holds a character that no HTTP header can carry (a space, a line break, or one that is not ASCII)",
                    ));
                }
                keys.push(StandIn {
                    var,
                    stand_in: format!("berth-stand-in-{var}"),
                    real: Secret::new(real),
                });
            }
            if keys.is_empty() {
                continue;
            }
            let base = value(provider.base_var()).unwrap_or(provider.default_base());
            let upstream =
                Upstream::parse(base).map_err(|why| refusal(provider.base_var(), why))?;
            routes.push(Route {
                provider,
                upstream,
                keys,
            });
        }
        Ok(MaskedKeys { routes })
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Whether berth's variable `name` is one the agent no longer gets as it is: a masked
    /// provider's key or base URL.
    pub fn hides(&self, name: &str) -> bool {
        self.routes
            .iter()
            .any(|route| route.provider.base_var() == name || route.provider.keys().contains(&name))
    }

    /// What the agent gets instead: each masked provider's base URL on berth's proxy, inside
    /// its network namespace at `port`, and a stand-in for each of its keys.
    pub fn env(&self, port: u16) -> Vec<(String, String)> {
        let mut env = Vec::new();
        for route in &self.routes {
            env.push((
                route.provider.base_var().to_owned(),
                format!("http://127.0.0.1:{port}{}", route.prefix()),
            ));
            for key in &route.keys {
                env.push((key.var.to_owned(), key.stand_in.clone()));
            }
        }
        env
    }

    pub(crate) fn routes(&self) -> &[Route] {
        &self.routes
    }
}

/// The error that refuses an agent whose key berth cannot hold back.
fn refusal(var: &str, why: &str) -> SandboxError {
    SandboxError::Invalid(format!(
        "berth keeps the agent's provider key from it, and {var} {why}. Fix {var}, or set `mask_keys = false` in the agent's `[agents.NAME]` entry to give it the key as it is"
    ))
}

impl Upstream {
    /// An `http://` or `https://` base URL: a host, a port, a path; no user name, query or
    /// fragment. The reason it is not one, to follow its variable's name.
    fn parse(url: &str) -> Result<Upstream, &'static str> {
        use crate::proxy::{Host, split_host_port, strip_prefix_ignore_case};
        let (tls, rest) = if let Some(rest) = strip_prefix_ignore_case(url, "https://") {
            (true, rest)
        } else if let Some(rest) = strip_prefix_ignore_case(url, "http://") {
            (false, rest)
        } else {
            return Err("is not an http:// or https:// URL");
        };
        if rest.contains(['?', '#']) {
            return Err("has a query or a fragment, which a base URL cannot have here");
        }
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.contains('@') {
            return Err("carries a user name or password");
        }
        let (host, port) =
            split_host_port(authority).map_err(|_| "has no host and port berth can read")?;
        let host = match Host::parse(host) {
            Some(Host::Name(name)) => name,
            Some(Host::Ip(address)) => address.to_string(),
            None => return Err("has no host berth can read"),
        };
        Ok(Upstream {
            tls,
            host,
            port: port.unwrap_or(if tls { 443 } else { 80 }),
            path: path.trim_end_matches('/').to_owned(),
        })
    }

    /// `host[:port]` for the `Host` header: the port only where it is not the scheme's.
    pub fn authority(&self) -> String {
        let host = match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        };
        match (self.tls, self.port) {
            (true, 443) | (false, 80) => host,
            (_, port) => format!("{host}:{port}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passed(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_known_agents_key_becomes_a_stand_in_and_its_base_url_berths() {
        let claude = crate::agent_profile("claude-agent-acp").unwrap();
        let keys = MaskedKeys::for_agent(
            Some(claude),
            &passed(&[
                ("ANTHROPIC_API_KEY", "sk-ant-real"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4567/"),
                ("OPENAI_API_KEY", "sk-openai"),
            ]),
        )
        .unwrap();
        assert_eq!(
            keys.env(crate::PROXY_PORT),
            [
                (
                    "ANTHROPIC_BASE_URL".to_owned(),
                    "http://127.0.0.1:3128/berth/anthropic".to_owned()
                ),
                (
                    "ANTHROPIC_API_KEY".to_owned(),
                    "berth-stand-in-ANTHROPIC_API_KEY".to_owned()
                ),
            ]
        );
        assert!(keys.hides("ANTHROPIC_API_KEY") && keys.hides("ANTHROPIC_BASE_URL"));
        assert!(keys.hides("CLAUDE_CODE_OAUTH_TOKEN"));
        assert!(!keys.hides("OPENAI_API_KEY"), "not claude's provider");
        let [route] = keys.routes() else {
            panic!("{keys:?}")
        };
        assert_eq!(
            route.upstream,
            Upstream {
                tls: false,
                host: "127.0.0.1".into(),
                port: 4567,
                path: String::new()
            }
        );
        assert_eq!(
            route.real_key("berth-stand-in-ANTHROPIC_API_KEY"),
            Some("sk-ant-real")
        );
        assert_eq!(route.real_key("sk-ant-real"), None);
        assert!(!format!("{keys:?}").contains("sk-ant-real"), "{keys:?}");
    }

    #[test]
    fn an_unknown_agent_has_every_provider_with_a_key_masked() {
        let keys = MaskedKeys::for_agent(
            None,
            &passed(&[
                ("OPENAI_API_KEY", "sk-openai"),
                ("GEMINI_API_KEY", "gemini-key"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4567"),
            ]),
        )
        .unwrap();
        let names: Vec<&str> = keys.routes().iter().map(|r| r.provider.name).collect();
        assert_eq!(names, ["openai", "gemini"]);
        assert_eq!(
            keys.routes()[0].upstream,
            Upstream {
                tls: true,
                host: "api.openai.com".into(),
                port: 443,
                path: "/v1".into()
            }
        );
        assert!(!keys.hides("ANTHROPIC_BASE_URL"), "no key: nothing to mask");
    }

    #[test]
    fn no_key_masks_nothing() {
        let codex = crate::agent_profile("codex-acp").unwrap();
        let keys = MaskedKeys::for_agent(Some(codex), &passed(&[("OPENAI_API_KEY", "")])).unwrap();
        assert!(keys.is_empty());
        assert!(keys.env(crate::PROXY_PORT).is_empty());
    }

    #[test]
    fn what_cannot_be_masked_is_refused_naming_the_variable() {
        let gemini = crate::agent_profile("gemini --experimental-acp").unwrap();
        let refused = |pairs: &[(&str, &str)]| {
            MaskedKeys::for_agent(Some(gemini), &passed(pairs))
                .unwrap_err()
                .to_string()
        };
        let e = refused(&[("GEMINI_API_KEY", "two words")]);
        assert!(
            e.contains("GEMINI_API_KEY") && e.contains("mask_keys = false"),
            "{e}"
        );
        assert!(!e.contains("two words"), "{e}");
        for (url, why) in [
            ("ftp://x.example", "http://"),
            ("https://u:p@x.example", "user name"),
            ("https://x.example/v1?k=1", "query"),
            ("https://", "host"),
        ] {
            let e = refused(&[("GEMINI_API_KEY", "k"), ("GOOGLE_GEMINI_BASE_URL", url)]);
            assert!(
                e.contains("GOOGLE_GEMINI_BASE_URL") && e.contains(why),
                "{e}"
            );
        }
    }

    #[test]
    fn an_upstream_names_its_port_only_where_it_is_not_the_schemes() {
        let read = |url| Upstream::parse(url).unwrap();
        assert_eq!(
            read("https://api.example.com").authority(),
            "api.example.com"
        );
        assert_eq!(
            read("http://api.example.com:8080/x").authority(),
            "api.example.com:8080"
        );
        assert_eq!(read("https://[::1]:8443").authority(), "[::1]:8443");
        assert_eq!(read("HTTPS://Api.Example.com/v1/").path, "/v1");
    }
}
