//! The allow list: `[sandbox] allow_hosts` (and an agent's provider) read into rules, the rule
//! that lets a host and port through, and whether it names an internal address itself.

use std::net::IpAddr;

use super::host::{
    Host, is_metadata_name, split_host_port, strip_prefix_ignore_case, url_authority,
};
use crate::SandboxError;

/// The hosts a confined agent may reach through the proxy: `[sandbox] allow_hosts`.
///
/// Entries are read as:
///
/// - `api.example.com:443`: that name, on that port;
/// - `*.example.com:443`: every subdomain of example.com (`a.example.com`,
///   `a.b.example.com`), but not `example.com` itself: list both for both;
/// - `example.com`, `*.example.com`: a bare name allows port 443 only (HTTPS, which is what a
///   name without a scheme most likely means); write `example.com:80` for plain HTTP;
/// - `https://host[:port][/path]`, `http://host[:port][/path]`: the URL's host and port (443 and
///   80 by default); the path is ignored;
/// - `127.0.0.1:4567`, `[::1]:8080` (an IPv6 address in brackets): that address, on that port.
///
/// The empty list allows nothing.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    rules: Vec<Rule>,
}

/// One entry of the allow list.
#[derive(Debug, Clone)]
pub(super) struct Rule {
    hosts: Pattern,
    port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(Host),
    /// `*.example.com`, kept as `.example.com`: any name that ends with it.
    Subdomains(String),
}

impl AllowList {
    /// Reads `[sandbox] allow_hosts`. An entry that cannot be read is an error naming it.
    pub fn parse<I>(entries: I) -> Result<AllowList, SandboxError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let rules = entries
            .into_iter()
            .map(|entry| parse_rule(entry.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(AllowList { rules })
    }

    /// Whether the list allows `host:port`, `host` as a client names it: a host name (any case,
    /// a trailing dot or not), an IPv4 address, or an IPv6 address (with or without brackets).
    pub fn allows(&self, host: &str, port: u16) -> bool {
        Host::parse(host).is_some_and(|host| self.rule_for(&host, port).is_some())
    }

    /// Whether an entry names `address` itself on `port`: what lets a name that resolves to
    /// an internal address ([`super::host::is_internal`]) be connected to it. `localhost`
    /// named exactly counts as naming the loopback addresses it stands for (RFC 6761: no DNS
    /// of anyone's can point it elsewhere).
    pub(super) fn names_address(&self, name: &Host, address: IpAddr, port: u16) -> bool {
        let address = address.to_canonical();
        self.rules
            .iter()
            .filter(|rule| rule.port == port)
            .any(|rule| match &rule.hosts {
                Pattern::Exact(Host::Ip(named)) => *named == address,
                Pattern::Exact(exact @ Host::Name(n)) => {
                    n == "localhost" && exact == name && address.is_loopback()
                }
                Pattern::Subdomains(_) => false,
            })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The entry that allows `host:port`, one naming the host exactly first. A cloud metadata
    /// service's name is allowed only by an entry naming it exactly.
    pub(super) fn rule_for(&self, host: &Host, port: u16) -> Option<&Rule> {
        let mut wildcard = None;
        for rule in self.rules.iter().filter(|rule| rule.port == port) {
            match (&rule.hosts, host) {
                (Pattern::Exact(exact), _) if exact == host => return Some(rule),
                (Pattern::Subdomains(suffix), Host::Name(name))
                    if wildcard.is_none()
                        && !is_metadata_name(name)
                        && name.len() > suffix.len()
                        && name.ends_with(suffix) =>
                {
                    wildcard = Some(rule)
                }
                _ => {}
            }
        }
        wildcard
    }
}

fn parse_rule(entry: &str) -> Result<Rule, SandboxError> {
    let invalid = |why: &str| {
        SandboxError::Invalid(format!(
            "`[sandbox] allow_hosts`: the entry `{entry}` {why}; entries look like `api.example.com:443`, `*.example.com:443`, `https://api.example.com` or `127.0.0.1:8080`"
        ))
    };
    let text = entry.trim();
    if text.is_empty() {
        return Err(invalid("is empty"));
    }
    let (authority, default_port) = if let Some(rest) = strip_prefix_ignore_case(text, "https://") {
        (url_authority(rest).map_err(invalid)?, 443)
    } else if let Some(rest) = strip_prefix_ignore_case(text, "http://") {
        (url_authority(rest).map_err(invalid)?, 80)
    } else if text.contains("://") {
        return Err(invalid(
            "is a URL of a scheme berth's proxy does not carry (only http:// and https://)",
        ));
    } else {
        (text, 443)
    };
    let (host_text, port) = split_host_port(authority).map_err(invalid)?;
    let hosts = if let Some(domain) = host_text.strip_prefix("*.") {
        match Host::parse(domain) {
            Some(Host::Name(name)) => Pattern::Subdomains(format!(".{name}")),
            _ => {
                return Err(invalid(
                    "has `*.` before something that is not a domain name",
                ));
            }
        }
    } else if host_text == "*" {
        return Err(invalid(
            "would allow every host: `[sandbox] network = \"full\"` is the setting for that",
        ));
    } else if host_text.contains('*') {
        return Err(invalid(
            "has a `*` that is not the whole first label (`*.example.com` allows every subdomain of example.com)",
        ));
    } else {
        Pattern::Exact(Host::parse(host_text).ok_or_else(|| invalid(why_not_a_host(host_text)))?)
    };
    Ok(Rule {
        hosts,
        port: port.unwrap_or(default_port),
    })
}

fn why_not_a_host(text: &str) -> &'static str {
    if text.is_empty() {
        "has no host"
    } else if !text.is_ascii() {
        "has a host name that is not ASCII: write it in its ASCII form (`xn--…`)"
    } else {
        "has a host that is neither a host name, an IPv4 address nor an IPv6 address in brackets"
    }
}
