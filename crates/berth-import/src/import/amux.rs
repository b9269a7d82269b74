//! `berth import amux`: a repository's amux workspaces adopted as berth git workspaces.
//!
//! amux (internal/workspace, internal/config) keeps each workspace of a project under the
//! repository's main checkout:
//!
//! ```text
//! <repo>/.amux/workspaces/<id>/      <id> = workspace-<name>-<unix time>-<8 hex>
//!   workspace.yaml                   id, name, branch, baseBranch, path, description,
//!                                    storagePath, createdAt, autoCreated (yaml.v3)
//!   worktree/                        the git worktree (`path`), on `branch`
//!   storage/                         amux's storage (`storagePath`)
//! ```
//!
//! Each becomes a berth git workspace with amux's id, name, description and creation time,
//! recording the worktree where it is and the branch checked out there, and the files of its
//! `storage/` (amux's `context.md` among them) are copied into berth's storage of the
//! workspace, where berth keeps its `context.md` too. berth did not make the branch
//! (`branch_created = false`), so deleting the workspace in berth never deletes it; the
//! worktree goes only when that loses no work, as for every git workspace. amux's own records
//! are left as they are: amux keeps working on them. amux's sessions are tmux processes, not
//! records, so there is nothing of them to import.

use std::path::{Path, PathBuf};

use berth_core::{ErrorKind, NewWorkspace, StoragePath, StorageScope, WorkspaceId, WorkspaceName};
use berth_git::Repo;
use cap_std::fs::Dir;
use chrono::{DateTime, Utc};

use super::{
    EntryCheck, ImportReport, Item, ItemKind, Outcome, check_entry, check_home_outside, clip,
    description_with_name, open_source, read_text, sorted_entries, usable_name,
};
use berth_ops::{Error, Ops, Result, blocking};

/// What berth reads of amux's `workspace.yaml`.
#[derive(Debug)]
struct AmuxWorkspace {
    id: String,
    name: String,
    branch: String,
    base_branch: String,
    path: PathBuf,
    description: String,
    created_at: DateTime<Utc>,
}

/// Adopts every amux workspace of the repository containing `repo` (its main checkout's
/// `.amux/workspaces/`) into the home `ops` opened, item by item; with `dry_run` nothing is
/// written. amux's files are only read.
pub async fn import_amux(ops: &Ops, repo: &Path, dry_run: bool) -> Result<ImportReport> {
    let start = repo.to_owned();
    let repo = blocking(move || match Repo::discover(&start) {
        Ok(r) => Ok(r),
        Err(berth_git::GitError::NotARepository(p)) => Err(Error::invalid(format!(
            "{} is not inside a git repository; pass the repository amux worked in: berth import amux REPO",
            p.display()
        ))),
        Err(e) => Err(e.into()),
    })
    .await?;
    let amux = repo.root().join(".amux");
    if !amux.is_dir() {
        return Err(Error::rule(
            ErrorKind::NotFound,
            format!(
                "{} has no .amux folder, so amux has no workspaces there; pass the repository amux worked in: berth import amux REPO",
                repo.root().display()
            ),
        ));
    }
    check_home_outside(ops.home(), &amux)?;
    let folder = amux.join("workspaces");
    let mut report = ImportReport::new("amux", folder.clone(), dry_run);
    let dir = match open_source(&folder) {
        Ok(d) => d,
        // amux makes the folder with its first workspace.
        Err(e) if e.is_not_found() => return Ok(report),
        Err(e) => return Err(e),
    };
    let mut run = Import {
        ops,
        repo,
        claimed: std::collections::HashSet::new(),
    };
    for name in sorted_entries(&dir, &folder)? {
        let shown = folder.join(&name);
        let what = clip(&name.to_string_lossy());
        let items = match check_entry(&dir, &name) {
            EntryCheck::NotAFolder => continue,
            EntryCheck::Refused(why) => {
                vec![Item::new(ItemKind::Workspace, what, &shown).fail(ErrorKind::Refused, why)]
            }
            EntryCheck::Failed(why) => {
                vec![Item::new(ItemKind::Workspace, what, &shown).fail(ErrorKind::Io, why)]
            }
            EntryCheck::Folder(id) => run.workspace(&dir, id, &shown, dry_run).await,
        };
        for item in items {
            report.push(item);
        }
    }
    Ok(report)
}

struct Import<'a> {
    ops: &'a Ops,
    repo: Repo,
    /// Names given out by this run.
    claimed: std::collections::HashSet<String>,
}

impl Import<'_> {
    async fn workspace(
        &mut self,
        parent: &Dir,
        id: WorkspaceId,
        folder: &Path,
        dry_run: bool,
    ) -> Vec<Item> {
        let file = folder.join("workspace.yaml");
        let item = Item::new(ItemKind::Workspace, id.as_str(), &file).of(&id);
        let dir = match parent.open_dir(id.as_str()) {
            Ok(dir) => dir,
            Err(e) => {
                let e = berth_core::Error::io(format!("cannot open {}", folder.display()), e);
                return vec![item.error(&e.into())];
            }
        };
        let text = read_text(&dir, "workspace.yaml", &file);
        let ws = match text.and_then(|t| match t {
            Some(t) => parse_workspace(&file, &t),
            None => Err(Error::rule(
                ErrorKind::Corrupt,
                format!(
                    "{} has no workspace.yaml (amux skips such a folder too)",
                    folder.display()
                ),
            )),
        }) {
            Ok(ws) => ws,
            Err(e) => return vec![item.error(&e)],
        };
        if ws.id != id.as_str() {
            return vec![item.fail(
                ErrorKind::Refused,
                format!(
                    "its id {:?} does not match its folder name; refused, since the id would become its berth id",
                    clip(&ws.id)
                ),
            )];
        }
        let (outcome, detail) = match self.adopt(&id, &ws, dry_run).await {
            Ok(done) => done,
            Err(e) => return vec![item.error(&e)],
        };
        let in_berth = !dry_run || outcome == Outcome::AlreadyThere;
        let mut items = vec![item.outcome(outcome, detail)];
        items.extend(self.storage(&dir, &id, folder, in_berth, dry_run).await);
        items
    }

    /// Copies the files of amux's `storage/` (beside the worktree; where amux keeps the
    /// workspace's `context.md`) into the berth workspace's storage, which is where berth keeps
    /// its `context.md` too. Read through the workspace folder's handle, so a symlink out of it
    /// is refused; amux's `storagePath` field is not followed. A file berth already holds with
    /// other bytes is a conflict, and berth's is kept.
    async fn storage(
        &self,
        dir: &Dir,
        id: &WorkspaceId,
        folder: &Path,
        in_berth: bool,
        dry_run: bool,
    ) -> Vec<Item> {
        let root = folder.join("storage");
        let mut items = Vec::new();
        let mut files = Vec::new();
        if let Err(e) = walk(dir, "storage", &root, &mut files, &mut items, id) {
            items.push(
                Item::new(ItemKind::Storage, "storage/", &root)
                    .of(id)
                    .error(&e),
            );
        }
        let scope = StorageScope::Workspace(id.clone());
        let store = self.ops.manager().storage();
        for (rel, bytes) in files {
            let source = root.join(&rel);
            let item = Item::new(ItemKind::Storage, rel.clone(), &source).of(id);
            let path = match StoragePath::new(&rel) {
                Ok(p) => p,
                Err(e) => {
                    items.push(item.error(&e.into()));
                    continue;
                }
            };
            let held = if in_berth {
                match store.read(&scope, &path).await {
                    Ok(held) => Some(held),
                    Err(e) if e.is_not_found() => None,
                    Err(e) => {
                        items.push(item.error(&e.into()));
                        continue;
                    }
                }
            } else {
                None
            };
            items.push(match held {
                Some(held) if held == bytes => item.outcome(Outcome::AlreadyThere, "copied before"),
                Some(_) => item.fail(
                    ErrorKind::Conflict,
                    format!("berth's storage already has another {rel}; it is kept"),
                ),
                None => {
                    let size = bytes.len();
                    let written = if dry_run {
                        Ok(())
                    } else {
                        store.write(&scope, &path, bytes).await
                    };
                    match written {
                        Ok(()) => item.outcome(
                            Outcome::Imported,
                            format!("{size} bytes into the workspace's storage"),
                        ),
                        Err(e) => item.error(&e.into()),
                    }
                }
            });
        }
        items
    }

    async fn adopt(
        &mut self,
        id: &WorkspaceId,
        ws: &AmuxWorkspace,
        dry_run: bool,
    ) -> Result<(Outcome, String)> {
        if let Some(before) = self.adopted_before(id, ws).await? {
            return Ok(before);
        }
        let manager = self.ops.manager();
        let store = manager.workspaces();
        if !ws.path.is_absolute() {
            return Err(Error::refused(format!(
                "its worktree path {:?} is not absolute (amux records absolute paths)",
                clip(&ws.path.display().to_string())
            )));
        }
        let git = berth_ops::adoption(manager, &ws.path, Some(ws.base_branch.clone()))
            .await
            .map_err(|e| match e.kind() {
                // A worktree that is gone is amux's state to fix, not an attack.
                ErrorKind::Invalid if !ws.path.exists() => Error::rule(
                    ErrorKind::NotFound,
                    format!(
                        "its worktree {} is gone; `amux ws remove {}` removes amux's record of it",
                        ws.path.display(),
                        id
                    ),
                ),
                _ => e,
            })?;
        let same_repo = match (git.repo.canonicalize(), self.repo.root().canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if !same_repo {
            return Err(Error::refused(format!(
                "its worktree {} belongs to the repository {}, not {}; refused",
                git.worktree.display(),
                git.repo.display(),
                self.repo.root().display()
            )));
        }
        let mut notes = Vec::new();
        if git.branch != ws.branch {
            notes.push(format!(
                "amux recorded branch {:?}, but the worktree has {} checked out, which berth records",
                clip(&ws.branch),
                git.branch
            ));
        }
        let (name, description) = self.name_of(ws, &mut notes).await;
        let mut detail = format!(
            "{} on {} (base {}), created {}",
            git.worktree.display(),
            git.branch,
            git.base_branch,
            ws.created_at.to_rfc3339()
        );
        if let Some(n) = &name {
            detail = format!("named {n}: {detail}");
        }
        for note in notes {
            detail.push_str("; ");
            detail.push_str(&note);
        }
        if dry_run {
            return Ok((Outcome::Imported, detail));
        }
        let new = NewWorkspace {
            id: Some(id.clone()),
            name,
            description,
            agent_id: None,
            git: Some(git),
            // Given on first use, as every new workspace's.
            ports: None,
        };
        // Created when amux made it; adopting it counts as a use, so garbage collection does
        // not take a workspace the moment it arrives.
        store.create(new, ws.created_at).await?;
        store.update_accessed(id, Utc::now()).await?;
        Ok((Outcome::Imported, detail))
    }

    /// The workspace berth already has under `id`: this worktree adopted before (its answer),
    /// or another folder's (a conflict); `None` when there is none.
    async fn adopted_before(
        &mut self,
        id: &WorkspaceId,
        ws: &AmuxWorkspace,
    ) -> Result<Option<(Outcome, String)>> {
        let manager = self.ops.manager();
        let store = manager.workspaces();
        match store.load(id).await {
            Ok(existing) => {
                let same = existing.git.as_ref().is_some_and(|g| {
                    g.worktree == ws.path
                        || matches!(
                            (g.worktree.canonicalize(), ws.path.canonicalize()),
                            (Ok(a), Ok(b)) if a == b
                        )
                });
                if same {
                    if let Some(n) = &existing.name {
                        self.claimed.insert(n.to_string());
                    }
                    return Ok(Some((
                        Outcome::AlreadyThere,
                        format!("workspace {} was adopted before", existing.label()),
                    )));
                }
                Err(Error::rule(
                    ErrorKind::Conflict,
                    format!(
                        "berth already has a workspace {} with this id and another folder; it is kept",
                        existing.label()
                    ),
                ))
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The name amux gave, where it is free and valid here; otherwise none, the name kept in
    /// the description, and a note saying why.
    async fn name_of(
        &mut self,
        ws: &AmuxWorkspace,
        notes: &mut Vec<String>,
    ) -> (Option<WorkspaceName>, String) {
        let store = self.ops.manager().workspaces();
        match ws.name.as_str() {
            "" => (None, ws.description.clone()),
            n => {
                let free = match WorkspaceName::new(n) {
                    Ok(valid) => {
                        matches!(store.load_by_name(&valid).await, Err(e) if e.is_not_found())
                    }
                    Err(_) => true,
                };
                match usable_name(n, &mut self.claimed, free) {
                    Ok(valid) => (Some(valid), ws.description.clone()),
                    Err(why) => {
                        notes.push(why);
                        (None, description_with_name(n, &ws.description))
                    }
                }
            }
        }
    }
}

/// Files up to this size are copied from amux's storage; bigger ones are reported, not read.
const MAX_STORAGE_FILE: u64 = 64 << 20;

/// The regular files below `rel` (a folder of `dir`), with their bytes, in name order; a
/// symlink or an oversized file becomes a refused item instead. A missing folder has none.
fn walk(
    dir: &Dir,
    rel: &str,
    shown: &Path,
    files: &mut Vec<(String, Vec<u8>)>,
    items: &mut Vec<Item>,
    id: &WorkspaceId,
) -> Result<()> {
    let io = |e: std::io::Error| -> Error {
        berth_core::Error::io(format!("cannot read {}", shown.display()), e).into()
    };
    // Folders below are checked before they are entered; this one is checked here. Either
    // way the handle keeps every read inside `dir`.
    match dir.symlink_metadata(rel) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(Error::refused(format!(
                "{} is a symlink; berth does not follow it, since it could lead anywhere",
                shown.display()
            )));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    }
    let sub = dir.open_dir(rel).map_err(io)?;
    for name in sorted_entries(&sub, shown)? {
        let path = shown.join(&name);
        let Some(name) = name.to_str().map(str::to_owned) else {
            items.push(
                Item::new(ItemKind::Storage, clip(&name.to_string_lossy()), &path)
                    .of(id)
                    .fail(ErrorKind::Refused, "its name is not valid UTF-8"),
            );
            continue;
        };
        let inner = format!("{rel}/{name}");
        let stored = inner.strip_prefix("storage/").unwrap_or(&inner).to_owned();
        let item = || Item::new(ItemKind::Storage, stored.clone(), &path).of(id);
        let meta = sub.symlink_metadata(&name).map_err(io)?;
        if meta.file_type().is_symlink() {
            items.push(item().fail(
                ErrorKind::Refused,
                "it is a symlink; berth does not follow it, since it could lead anywhere",
            ));
        } else if meta.is_dir() {
            walk(dir, &inner, &path, files, items, id)?;
        } else if meta.len() > MAX_STORAGE_FILE {
            items.push(item().fail(
                ErrorKind::Refused,
                format!(
                    "it is {} bytes, over the {MAX_STORAGE_FILE} berth copies",
                    meta.len()
                ),
            ));
        } else if meta.is_file() {
            files.push((stored, sub.read(&name).map_err(io)?));
        }
    }
    Ok(())
}

/// Reads amux's `workspace.yaml`; anything it cannot read is `Corrupt`, with the line.
fn parse_workspace(file: &Path, text: &str) -> Result<AmuxWorkspace> {
    let corrupt = |line: Option<usize>, reason: String| -> Error {
        berth_core::Error::Corrupt {
            file: file.to_owned(),
            line,
            reason,
        }
        .into()
    };
    let fields = flat_yaml(text).map_err(|(line, reason)| corrupt(Some(line), reason))?;
    let get = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let need = |key: &str| get(key).ok_or_else(|| corrupt(None, format!("it has no {key}")));
    let created = need("createdAt")?;
    let created_at = DateTime::parse_from_rfc3339(&created)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            corrupt(
                None,
                format!("createdAt {:?} is not a time ({e})", clip(&created)),
            )
        })?;
    Ok(AmuxWorkspace {
        id: need("id")?,
        name: get("name").unwrap_or_default(),
        branch: need("branch")?,
        base_branch: need("baseBranch")?,
        path: PathBuf::from(need("path")?),
        description: get("description").unwrap_or_default(),
        created_at,
    })
}

/// The top-level `key: value` pairs of a YAML mapping whose values are scalars, as yaml.v3
/// writes a Go struct of strings, times and booleans: plain, `'single'` and `"double"` quoted
/// scalars, and `|` literal blocks (multi-line text). Nested values are skipped; anything
/// else is an error with its 1-based line. berth carries no YAML library for one small file.
fn flat_yaml(text: &str) -> std::result::Result<Vec<(String, String)>, (usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let n = i + 1;
        i += 1;
        let trimmed = line.trim_end();
        if trimmed.trim_start().is_empty()
            || trimmed.trim_start().starts_with('#')
            || trimmed == "---"
        {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            continue; // inside a nested value of a key we do not read
        }
        let Some((key, rest)) = trimmed.split_once(':') else {
            return Err((n, "expected 'key: value'".to_owned()));
        };
        if !(rest.is_empty() || rest.starts_with(' ')) {
            return Err((n, "expected 'key: value'".to_owned()));
        }
        let key = key.trim().to_owned();
        let raw = rest.trim();
        let value = if let Some(header) = raw.strip_prefix('|') {
            // A literal block: the following more-indented lines, as they are.
            let keep = match header.trim_start_matches(|c: char| c.is_ascii_digit()) {
                "" => Chomp::Clip,
                "-" => Chomp::Strip,
                "+" => Chomp::Keep,
                _ => return Err((n, format!("unsupported block header {raw:?}"))),
            };
            let mut body: Vec<&str> = Vec::new();
            let mut indent = None;
            while i < lines.len() {
                let l = lines[i];
                if l.trim().is_empty() {
                    body.push("");
                    i += 1;
                    continue;
                }
                let width = l.len() - l.trim_start_matches(' ').len();
                if width == 0 {
                    break;
                }
                let indent = *indent.get_or_insert(width);
                if width < indent {
                    return Err((
                        i + 1,
                        "a line of a block is indented less than the first".to_owned(),
                    ));
                }
                body.push(&l[indent..]);
                i += 1;
            }
            let mut text = body.join("\n");
            match keep {
                Chomp::Strip => text.truncate(text.trim_end_matches('\n').len()),
                Chomp::Clip => {
                    text.truncate(text.trim_end_matches('\n').len());
                    if !text.is_empty() {
                        text.push('\n');
                    }
                }
                Chomp::Keep => text.push('\n'),
            }
            Some(text)
        } else if raw.starts_with('>') {
            return Err((n, "folded block scalars ('>') are not supported".to_owned()));
        } else if let Some(body) = raw.strip_prefix('"') {
            Some(double_quoted(body).map_err(|e| (n, e))?)
        } else if let Some(body) = raw.strip_prefix('\'') {
            let Some(end) = closing_single_quote(body) else {
                return Err((n, "unterminated 'quoted' value".to_owned()));
            };
            Some(body[..end].replace("''", "'"))
        } else if raw.is_empty() || raw == "~" || raw == "null" {
            None // a null, or a nested value on the following lines
        } else {
            // A plain scalar ends at a comment.
            let plain = raw.split(" #").next().unwrap_or(raw).trim_end();
            Some(plain.to_owned())
        };
        if let Some(v) = value {
            out.push((key, v));
        }
    }
    Ok(out)
}

enum Chomp {
    Clip,
    Strip,
    Keep,
}

/// The offset of the quote that closes a single-quoted scalar (`''` is an escaped quote).
fn closing_single_quote(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// A double-quoted scalar's text after its opening quote, unescaped, up to the closing quote.
fn double_quoted(body: &str) -> std::result::Result<String, String> {
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Ok(out),
            '\\' => {
                let e = chars.next().ok_or("an escape at the end of the line")?;
                let hex = |chars: &mut std::str::Chars<'_>,
                           n: usize|
                 -> std::result::Result<char, String> {
                    let digits: String = chars.take(n).collect();
                    u32::from_str_radix(&digits, 16)
                        .ok()
                        .and_then(char::from_u32)
                        .ok_or_else(|| format!("bad escape \\{e}{digits}"))
                };
                out.push(match e {
                    '0' => '\0',
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    't' | '\t' => '\t',
                    'n' => '\n',
                    'v' => '\u{b}',
                    'f' => '\u{c}',
                    'r' => '\r',
                    'e' => '\u{1b}',
                    ' ' => ' ',
                    '"' => '"',
                    '/' => '/',
                    '\\' => '\\',
                    'N' => '\u{85}',
                    '_' => '\u{a0}',
                    'L' => '\u{2028}',
                    'P' => '\u{2029}',
                    'x' => hex(&mut chars, 2)?,
                    'u' => hex(&mut chars, 4)?,
                    'U' => hex(&mut chars, 8)?,
                    other => return Err(format!("unknown escape \\{other}")),
                });
            }
            c => out.push(c),
        }
    }
    Err("unterminated \"quoted\" value".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_yaml_v3_writes() {
        let text = "id: workspace-fix-auth-1700000000-abcd1234\nname: fix-auth\nbranch: amux/workspace-fix-auth-1700000000-abcd1234\nbaseBranch: main\npath: /src/p/.amux/workspaces/workspace-fix-auth-1700000000-abcd1234/worktree\ndescription: |-\n    first line\n\n    third: line\nstoragePath: /x/storage\ncreatedAt: 2025-06-12T10:30:00.123456789+09:00\nautoCreated: true\n";
        let ws = parse_workspace(Path::new("w.yaml"), text).unwrap();
        assert_eq!(ws.id, "workspace-fix-auth-1700000000-abcd1234");
        assert_eq!(ws.name, "fix-auth");
        assert_eq!(ws.base_branch, "main");
        assert_eq!(ws.description, "first line\n\nthird: line");
        assert_eq!(
            ws.created_at.to_rfc3339(),
            "2025-06-12T01:30:00.123456789+00:00"
        );
        let quoted = flat_yaml("a: 'it''s: x'\nb: \"tab\\there \\u00e9\\\"\"\nc: \"\"\nd: plain # comment\nnested:\n    k: v\n").unwrap();
        assert_eq!(
            quoted,
            vec![
                ("a".to_owned(), "it's: x".to_owned()),
                ("b".to_owned(), "tab\there é\"".to_owned()),
                ("c".to_owned(), String::new()),
                ("d".to_owned(), "plain".to_owned()),
            ]
        );
    }

    #[test]
    fn what_it_cannot_read_is_corrupt_with_a_line() {
        for (text, line) in [
            ("id: x\nno colon here\n", Some(2)),
            ("id: \"open\n", Some(1)),
            ("id: x\ndescription: >\n  folded\n", Some(2)),
        ] {
            let err = parse_workspace(Path::new("w.yaml"), text).unwrap_err();
            match err {
                Error::Store(berth_core::Error::Corrupt { line: l, .. }) => {
                    assert_eq!(l, line, "{text:?}")
                }
                other => panic!("{text:?}: {other}"),
            }
        }
        let missing = parse_workspace(Path::new("w.yaml"), "id: x\n").unwrap_err();
        assert!(missing.to_string().contains("it has no"), "{missing}");
    }
}
