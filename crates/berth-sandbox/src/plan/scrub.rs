//! Files shown to a confined process without their secrets.
//!
//! Some files a build needs hold a secret beside what it needs: cargo's config (a registry
//! `token`, a credential provider), git's config (`http.*.extraHeader`, a token in a URL or in
//! a `[url "https://TOKEN@…"]` section's name, an inline credential helper), pip's and uv's
//! config (a password in an index URL). Each is shown as a copy with those lines left out or
//! the credentials cut from the URLs, bound read-only over the original, so the file still
//! works for everything but authentication.
//!
//! The copies are written to berth's home (`.sandbox/scrubbed/`, mode 600), named by the
//! original's path and the copy's content, atomically: a concurrent spawn never binds a half
//! written file. A file with nothing to scrub is shown as it is.

use std::path::{Path, PathBuf};

use crate::SandboxError;

/// The files scrubbed, beneath `$HOME`, and how.
const HOME_FILES: [(&str, Kind); 8] = [
    (".cargo/config.toml", Kind::Cargo),
    (".cargo/config", Kind::Cargo),
    (".gitconfig", Kind::Git),
    (".config/git/config", Kind::Git),
    (".config/pip/pip.conf", Kind::Ini),
    (".pip/pip.conf", Kind::Ini),
    (".config/uv/uv.toml", Kind::Ini),
    (".pydistutils.cfg", Kind::Ini),
];

/// The system's files scrubbed.
const SYSTEM_FILES: [(&str, Kind); 3] = [
    ("/etc/gitconfig", Kind::Git),
    ("/etc/pip.conf", Kind::Ini),
    ("/etc/uv/uv.toml", Kind::Ini),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cargo,
    Git,
    /// Any `key = value` file whose URLs may carry a password.
    Ini,
}

/// `text` without its secrets (the lines that hold one left out, credentials cut from URLs);
/// `None` when nothing needed scrubbing.
fn scrub(kind: Kind, text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut section = String::new();
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            section = trimmed
                .trim_end()
                .trim_start_matches('[')
                .split([']', ' ', '.', '"'])
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
        }
        let key = trimmed
            .split(['=', ' ', '\t'])
            .next()
            .unwrap_or_default()
            .trim_matches('"')
            .to_ascii_lowercase();
        let secret = match kind {
            Kind::Cargo => {
                key == "token"
                    || key.ends_with(".token")
                    || key.contains("credential-provider")
                    || key.contains("credential_provider")
            }
            Kind::Git => {
                key == "extraheader"
                    || (section == "credential" && key == "helper")
                    || (section == "http" && key.ends_with("extraheader"))
            }
            Kind::Ini => false,
        };
        if secret && !trimmed.starts_with('[') {
            changed = true;
            continue;
        }
        let cut = cut_credentials(line);
        changed |= cut != line;
        out.push_str(&cut);
    }
    changed.then_some(out)
}

/// `line` with every `user:password@` or `token@` of an http(s) URL cut out (an ssh URL's
/// `git@` is a user name, not a secret).
fn cut_credentials(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let scheme: String = head[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || "+-.".contains(*c))
            .collect::<String>()
            .chars()
            .rev()
            .collect();
        let web = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
        let authority_end = tail
            .find(|c: char| c == '/' || c == '"' || c == '\'' || c.is_whitespace() || c == ']')
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@').filter(|_| web) {
            Some(i) => rest = &tail[i + 1..],
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// The scrubbed copies to bind over their originals, as (original, copy): the files of
/// `$HOME` and of the system's that hold a secret, each copy written once.
pub(crate) fn scrubbed_files(
    home: Option<&Path>,
    berth_home: &Path,
) -> Result<Vec<(PathBuf, PathBuf)>, SandboxError> {
    let mut files: Vec<(PathBuf, Kind)> = SYSTEM_FILES
        .iter()
        .map(|(p, k)| (PathBuf::from(p), *k))
        .collect();
    if let Some(home) = home {
        files.extend(HOME_FILES.iter().map(|(p, k)| (home.join(p), *k)));
    }
    let mut copies = Vec::new();
    for (path, kind) in files {
        // Where it is shown: at its own path, a link (a dotfiles manager's `~/.gitconfig`)
        // staying a link, as the readable paths are bound.
        let Some(original) = super::named(&path) else {
            continue;
        };
        let text = match std::fs::read(&original) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            // Unreadable to berth: unreadable inside too.
            Err(_) => continue,
        };
        if let Some(clean) = scrub(kind, &text) {
            copies.push((original.clone(), write_copy(berth_home, &original, &clean)?));
        }
    }
    Ok(copies)
}

/// Writes `text` as the copy of `original`, unless that copy exists already.
fn write_copy(berth_home: &Path, original: &Path, text: &str) -> Result<PathBuf, SandboxError> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    original.hash(&mut hasher);
    text.hash(&mut hasher);
    let dir = berth_home.join(".sandbox/scrubbed");
    let path = dir.join(format!("{:016x}", hasher.finish()));
    if std::fs::read_to_string(&path).is_ok_and(|t| t == text) {
        return Ok(path);
    }
    let fail = |e: std::io::Error| SandboxError::Setup(format!("{}: {e}", path.display()));
    std::fs::create_dir_all(&dir).map_err(fail)?;
    let mut file = tempfile::NamedTempFile::new_in(&dir).map_err(fail)?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(fail)?;
    file.as_file().sync_all().map_err(fail)?;
    file.persist(&path).map_err(|e| fail(e.error))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_tokens_and_credential_providers_go() {
        let text = "[registry]\ntoken = \"cio_SECRET\"\nglobal-credential-providers = [\"cargo:token\"]\n[registries.corp]\nindex = \"https://u:SECRET@corp.example/index\"\ntoken = \"SECRET\"\n[build]\njobs = 2\n";
        let clean = scrub(Kind::Cargo, text).unwrap();
        assert!(!clean.contains("SECRET"), "{clean}");
        assert!(clean.contains("jobs = 2"), "{clean}");
        assert!(
            clean.contains("index = \"https://corp.example/index\""),
            "{clean}"
        );
    }

    #[test]
    fn git_headers_helpers_and_urls_with_tokens_go() {
        let text = "[user]\n\tname = Me\n[http \"https://github.com/\"]\n\textraHeader = AUTHORIZATION: basic SECRET\n[credential]\n\thelper = \"!f() { echo password=SECRET; }; f\"\n[url \"https://SECRET@github.com/\"]\n\tinsteadOf = https://github.com/\n[remote \"o\"]\n\turl = https://x:SECRET@example.com/r.git\n";
        let clean = scrub(Kind::Git, text).unwrap();
        assert!(!clean.contains("SECRET"), "{clean}");
        assert!(clean.contains("name = Me"), "{clean}");
        assert!(clean.contains("[url \"https://github.com/\"]"), "{clean}");
        assert!(clean.contains("url = https://example.com/r.git"), "{clean}");
    }

    #[test]
    fn index_urls_lose_their_passwords_and_clean_files_are_left_alone() {
        let text = "[global]\nindex-url = https://me:SECRET@pypi.corp/simple\n";
        let clean = scrub(Kind::Ini, text).unwrap();
        assert_eq!(clean, "[global]\nindex-url = https://pypi.corp/simple\n");
        assert_eq!(scrub(Kind::Ini, "[global]\ntimeout = 60\n"), None);
        assert_eq!(scrub(Kind::Git, "[user]\n\tname = Me\n"), None);
        let ssh = "[url \"ssh://git@github.com/\"]\n\tinsteadOf = https://github.com/\n";
        assert_eq!(scrub(Kind::Git, ssh), None);
    }
}
