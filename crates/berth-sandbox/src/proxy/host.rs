//! Hosts and ports as a client's request or an allow list entry writes them. Both are read the
//! same way, so that a name is matched as the client sent it, before any resolution, and a
//! name the resolver would take for an address (`127.1`) is neither.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The authority of a URL, after its `scheme://`.
pub(super) fn url_authority(rest: &str) -> Result<&str, &'static str> {
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.contains('@') {
        return Err("carries a user name or password: write the host and port only");
    }
    Ok(authority)
}

/// `host[:port]`, with an IPv6 address in brackets; the host is returned as written, brackets
/// included.
pub(crate) fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), &'static str> {
    let (host, port) = if authority.starts_with('[') {
        let Some(close) = authority.find(']') else {
            return Err("has a `[` without its `]`");
        };
        let (host, rest) = authority.split_at(close + 1);
        match rest {
            "" => (host, None),
            _ => match rest.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err("has something other than `:port` after its `]`"),
            },
        }
    } else {
        match authority.matches(':').count() {
            0 => (authority, None),
            1 => authority
                .split_once(':')
                .map(|(host, port)| (host, Some(port)))
                .unwrap_or((authority, None)),
            _ => {
                return Err(
                    "has several `:`: write an IPv6 address in brackets, as in `[::1]:443`",
                );
            }
        }
    };
    let port = match port {
        None => None,
        Some(digits) => {
            Some(parse_port(digits).ok_or("has a port that is not a number from 1 to 65535")?)
        }
    };
    Ok((host, port))
}

fn parse_port(digits: &str) -> Option<u16> {
    // `u16::from_str` would take `+443`.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|port| *port != 0)
}

pub(crate) fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// A host as a client or an allow list entry names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    /// A DNS name: lowercase, without a trailing dot.
    Name(String),
    /// An address literal, in its canonical form (an IPv4-mapped IPv6 address is the IPv4
    /// address).
    Ip(IpAddr),
}

impl Host {
    /// `example.com`, `127.0.0.1`, `[::1]` or `::1`; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Host> {
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            let address = inner.parse::<Ipv6Addr>().ok()?;
            return Some(Host::Ip(IpAddr::V6(address).to_canonical()));
        }
        if let Ok(address) = text.parse::<IpAddr>() {
            return Some(Host::Ip(address.to_canonical()));
        }
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        is_host_name(&name).then_some(Host::Name(name))
    }
}

impl fmt::Display for Host {
    /// As an allow list entry writes it (so that a `403` can say what to add).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V6(address)) => write!(f, "[{address}]"),
            Host::Ip(address) => write!(f, "{address}"),
        }
    }
}

/// Letters, digits, `-` and `_` in labels of 1 to 63 characters, 253 in all, and a last label
/// that is not a number: the resolver reads `127.1`, `2130706433` or `0x7f.1` as an address,
/// which a name entry must not let through.
fn is_host_name(name: &str) -> bool {
    let labels_ok = name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    let last = name.rsplit('.').next().unwrap_or_default();
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || strip_prefix_ignore_case(last, "0x")
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()));
    labels_ok && !numeric
}

/// Whether `address` is this machine's, its link's or a private network's: loopback,
/// link-local (cloud metadata's 169.254.169.254 among them), private (10/8, 172.16/12,
/// 192.168/16, fc00::/7), shared (100.64/10, Alibaba's metadata among them), unspecified,
/// multicast or reserved, and the IPv6 forms that carry such an IPv4 address (IPv4-mapped,
/// IPv4-compatible, NAT64's `64:ff9b::/96`). A name is not connected to one of these unless
/// the allow list names the address (see the module's decisions).
pub(super) fn is_internal(address: IpAddr) -> bool {
    match address.to_canonical() {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => {
            let segments = v6.segments();
            let embedded = Ipv4Addr::from_bits(v6.to_bits() as u32);
            let compatible = segments[..6] == [0; 6];
            let nat64 = segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_unicast_link_local()
                || v6.is_unique_local()
                || v6.is_multicast()
                // Site-local (deprecated, still routed on some networks) and NAT64's
                // local-use prefix 64:ff9b:1::/48.
                || segments[0] & 0xffc0 == 0xfec0
                || segments[..3] == [0x64, 0xff9b, 1]
                || ((compatible || nat64) && is_internal_v4(embedded))
        }
    }
}

fn is_internal_v4(v4: Ipv4Addr) -> bool {
    let [first, second, ..] = v4.octets();
    v4.is_loopback()
        || v4.is_link_local()
        || v4.is_private()
        || v4.is_multicast()
        || first == 0
        || first >= 240
        || (first == 100 && (64..128).contains(&second))
}

/// Names of cloud metadata services, which hand out a machine's credentials: never reached
/// through a wildcard, only by an entry naming them exactly (and then only at an address the
/// allow list names, as every name leading to a link-local address).
const METADATA_NAMES: [&str; 6] = [
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.tencentyun.com",
];

/// Whether `name` (lowercase, without a trailing dot) is a cloud metadata service's.
pub(super) fn is_metadata_name(name: &str) -> bool {
    METADATA_NAMES.contains(&name)
}
