//! Resource URIs: what each `berth://` URI names, and how to spell a child's URI.
//!
//! Parsing is strict: an identifier or path segment is percent-decoded, and whatever it decodes
//! to is still validated by the operations layer (`berth-ops`), so a
//! `%2e%2e` is refused like `..`. The seed's `amux://` scheme is an alias of `berth://`; URIs
//! this server hands out always use `berth://`.

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};

pub const SCHEME: &str = "berth://";
const ALIAS: &str = "amux://";

/// Characters escaped in a path segment of a URI this server builds.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Which storage a storage resource names.
pub use berth_ops::Owner;

/// What a resource URI names. Identifiers and paths are decoded but not yet validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Workspaces,
    Workspace(String),
    /// A file or folder of a workspace's worktree; `None` is its root.
    Files(String, Option<String>),
    Context(String),
    /// A workspace's memory: the notes its agents keep (`memory/MEMORY.md`).
    Memory(String),
    Sessions,
    Session(String),
    Transcript(String),
    /// A file or folder of a workspace's or session's storage; `None` is its root.
    Storage(Owner, String, Option<String>),
}

/// Parses `uri`; `None` when it names nothing this server serves.
pub fn parse(uri: &str) -> Option<Target> {
    let rest = uri
        .strip_prefix(SCHEME)
        .or_else(|| uri.strip_prefix(ALIAS))?;
    // Queries and fragments name nothing here; refusing them beats silently ignoring them.
    if rest.contains(['?', '#']) {
        return None;
    }
    let mut parts = rest.splitn(4, '/');
    let kind = parts.next()?;
    let id = match parts.next() {
        None => {
            return match kind {
                "workspace" => Some(Target::Workspaces),
                "session" => Some(Target::Sessions),
                _ => None,
            };
        }
        Some(id) => decode(id)?,
    };
    if id.is_empty() {
        return None;
    }
    let sub = parts.next();
    // The path after `files/` or `storage/`; an empty one (a trailing slash) is the root.
    let path = match parts.next() {
        None | Some("") => None,
        Some(p) => Some(decode_path(p)?),
    };
    match (kind, sub, path) {
        ("workspace", None, None) => Some(Target::Workspace(id)),
        ("workspace", Some("files"), path) => Some(Target::Files(id, path)),
        ("workspace", Some("context"), None) => Some(Target::Context(id)),
        ("workspace", Some("memory"), None) => Some(Target::Memory(id)),
        ("workspace", Some("storage"), path) => Some(Target::Storage(Owner::Workspace, id, path)),
        ("session", None, None) => Some(Target::Session(id)),
        ("session", Some("transcript"), None) => Some(Target::Transcript(id)),
        ("session", Some("storage"), path) => Some(Target::Storage(Owner::Session, id, path)),
        _ => None,
    }
}

fn decode(segment: &str) -> Option<String> {
    percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// Decodes each segment on its own, so an encoded `%2F` cannot merge two segments into one
/// that the path check would read differently.
fn decode_path(path: &str) -> Option<String> {
    let mut out = Vec::new();
    for segment in path.split('/') {
        let decoded = decode(segment)?;
        if decoded.contains('/') {
            return None;
        }
        out.push(decoded);
    }
    Some(out.join("/"))
}

fn encode_path(path: &str) -> String {
    path.split('/')
        .map(|s| utf8_percent_encode(s, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// The scheme of the skills extension (SEP-2640): `skill://{workspace id}/{name}/{path}`.
pub const SKILL_SCHEME: &str = "skill://";

/// What a `skill://` URI names: a skill of a workspace, and a file or folder of it (`None`:
/// the skill's folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillTarget {
    pub workspace: String,
    pub name: String,
    pub path: Option<String>,
}

/// Parses a `skill://` URI; `None` when it is not one this server could have made.
pub fn parse_skill(uri: &str) -> Option<SkillTarget> {
    let rest = uri.strip_prefix(SKILL_SCHEME)?;
    if rest.contains(['?', '#']) {
        return None;
    }
    let mut parts = rest.splitn(3, '/');
    let workspace = decode(parts.next()?)?;
    let name = decode(parts.next()?)?;
    if workspace.is_empty() || name.is_empty() || name.contains('/') {
        return None;
    }
    let path = match parts.next() {
        None | Some("") => None,
        Some(p) => Some(decode_path(p.trim_end_matches('/'))?),
    };
    Some(SkillTarget {
        workspace,
        name,
        path,
    })
}

/// The URI of a skill's folder (`path` `None`) or of a file or folder in it.
pub fn skill(workspace: &impl std::fmt::Display, name: &str, path: Option<&str>) -> String {
    let base = format!(
        "{SKILL_SCHEME}{workspace}/{}",
        utf8_percent_encode(name, SEGMENT)
    );
    match path {
        Some(p) => format!("{base}/{}", encode_path(p)),
        None => base,
    }
}

pub fn workspaces() -> String {
    format!("{SCHEME}workspace")
}

pub fn workspace(id: &impl std::fmt::Display) -> String {
    format!("{SCHEME}workspace/{id}")
}

pub fn sessions() -> String {
    format!("{SCHEME}session")
}

pub fn session(id: &impl std::fmt::Display) -> String {
    format!("{SCHEME}session/{id}")
}

/// The URI of `sub` (`files`, `context`, `storage`, `transcript`) of a workspace's or
/// session's `base` URI, with an optional path below it.
pub fn child(base: &str, sub: &str, path: Option<&str>) -> String {
    match path {
        Some(p) => format!("{base}/{sub}/{}", encode_path(p)),
        None => format!("{base}/{sub}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_uris_parse_and_round_trip() {
        let uri = skill(&"ws1", "pdf", Some("refs/a b.md"));
        assert_eq!(uri, "skill://ws1/pdf/refs/a%20b.md");
        assert_eq!(
            parse_skill(&uri),
            Some(SkillTarget {
                workspace: "ws1".into(),
                name: "pdf".into(),
                path: Some("refs/a b.md".into())
            })
        );
        assert_eq!(parse_skill("skill://ws1/pdf/").unwrap().path, None);
        assert_eq!(parse_skill("skill://ws1/pdf").unwrap().path, None);
        for bad in [
            "skill://ws1",
            "skill:///pdf",
            "skill://ws1/pdf?x",
            "skill://ws1/pdf/a%2Fb",
            "berth://ws1/pdf",
        ] {
            assert_eq!(parse_skill(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_shape_parses() {
        use Target::*;
        let cases = [
            ("berth://workspace", Some(Workspaces)),
            ("amux://workspace", Some(Workspaces)),
            ("berth://workspace/ab12", Some(Workspace("ab12".into()))),
            ("berth://workspace/x/files", Some(Files("x".into(), None))),
            ("berth://workspace/x/files/", Some(Files("x".into(), None))),
            (
                "berth://workspace/x/files/src/a%20b.rs",
                Some(Files("x".into(), Some("src/a b.rs".into()))),
            ),
            ("berth://workspace/x/context", Some(Context("x".into()))),
            ("berth://workspace/x/memory", Some(Memory("x".into()))),
            (
                "berth://workspace/x/storage/notes/a.md",
                Some(Storage(
                    Owner::Workspace,
                    "x".into(),
                    Some("notes/a.md".into()),
                )),
            ),
            ("berth://session", Some(Sessions)),
            ("berth://session/s1", Some(Session("s1".into()))),
            (
                "berth://session/s1/transcript",
                Some(Transcript("s1".into())),
            ),
            (
                "berth://session/s1/storage",
                Some(Storage(Owner::Session, "s1".into(), None)),
            ),
            ("berth://workspace/x/context/more", None),
            ("berth://workspace/x/other", None),
            ("berth://workspace//files", None),
            ("berth://workspace/x/files/a?b", None),
            ("berth://workspace/x/files/a%2Fb", None),
            ("file:///etc/passwd", None),
            ("berth://device", None),
        ];
        for (uri, want) in cases {
            assert_eq!(parse(uri), want, "{uri}");
        }
    }

    #[test]
    fn children_round_trip() {
        let uri = child(&workspace(&"w1"), "files", Some("dir with space/100%.txt"));
        assert_eq!(
            uri,
            "berth://workspace/w1/files/dir%20with%20space/100%25.txt"
        );
        assert_eq!(
            parse(&uri),
            Some(Target::Files(
                "w1".into(),
                Some("dir with space/100%.txt".into())
            ))
        );
    }

    #[test]
    fn encoded_dots_decode_for_the_path_check_to_refuse() {
        // `..` is the path validator's to refuse; the parser must not hide it.
        assert_eq!(
            parse("berth://workspace/x/files/%2e%2e/secret"),
            Some(Target::Files("x".into(), Some("../secret".into())))
        );
    }
}
