//! `berth workspace list --json` written from the records' JSON text
//! ([`WorkspaceStore::list_json`](berth_core::WorkspaceStore::list_json)): each record's
//! strings and times copied into the view's shape as they are, escapes and all, instead of
//! building a `Workspace` and a `WorkspaceView` of each of 10,000 records and formatting them
//! again (docs/benchmarks.md, "workspaces"). The bytes are those `serde_json::to_writer_pretty`
//! makes of the [`WorkspaceView`](crate::WorkspaceView)s and a newline; a test holds the two to
//! that for every field. A record this reader does not take (a field of another type) sends the
//! whole listing the usual way, through `Workspace` and `WorkspaceView`.

use std::io::Write;

use berth_core::{GitInfo, PortBlock, WorkspaceId};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::{Ops, Result, git_workspace};

/// A record read for the listing: each string as its JSON text (quotes and escapes kept).
#[derive(Deserialize)]
struct RecordJson<'a> {
    id: &'a str,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    description: Option<&'a RawValue>,
    #[serde(borrow)]
    created_at: &'a RawValue,
    #[serde(borrow)]
    last_accessed: &'a RawValue,
    #[serde(borrow, default)]
    agent_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    archived_at: Option<&'a RawValue>,
    #[serde(borrow, default)]
    git: Option<GitJson<'a>>,
    #[serde(default)]
    ports: Option<PortBlock>,
}

/// A record's `git`, as its text, for the view's order of its fields.
#[derive(Deserialize)]
struct GitJson<'a> {
    #[serde(borrow)]
    repo: &'a RawValue,
    #[serde(borrow)]
    branch: &'a RawValue,
    #[serde(borrow)]
    base_branch: &'a RawValue,
    branch_created: bool,
    #[serde(borrow)]
    worktree: &'a RawValue,
}

impl RecordJson<'_> {
    /// Whether every field the view copies as a string is one (the rest serde checked).
    fn is_well_formed(&self) -> bool {
        let text = |raw: &RawValue| raw.get().starts_with('"');
        let git = self.git.as_ref().is_none_or(|g| {
            [g.repo, g.branch, g.base_branch, g.worktree]
                .into_iter()
                .all(text)
        });
        [self.created_at, self.last_accessed]
            .into_iter()
            .chain(self.name)
            .chain(self.description)
            .chain(self.agent_id)
            .chain(self.archived_at)
            .all(text)
            && git
    }

    fn in_use_git(&self) -> bool {
        self.git.is_some() && self.archived_at.is_none()
    }
}

impl Ops {
    /// Writes `berth workspace list --json`'s output to `out`: every workspace not archived
    /// (every one with `archived`), in id order, as the pretty JSON array of their
    /// [`crate::WorkspaceView`]s (a git workspace in use with its worktree's state) and a
    /// newline.
    pub async fn write_workspaces_json(
        &self,
        archived: bool,
        out: &mut (dyn Write + Send),
    ) -> Result<()> {
        let records = self.manager.workspaces().list_json().await?;
        let mut parsed = Vec::with_capacity(records.len());
        for text in records.iter() {
            match serde_json::from_str::<RecordJson>(text) {
                Ok(r) if r.is_well_formed() => {
                    if archived || r.archived_at.is_none() {
                        parsed.push(r);
                    }
                }
                _ => return self.write_workspaces_json_by_view(archived, out).await,
            }
        }
        let statuses = self.statuses_of(&parsed).await?;
        let folder = parsed
            .first()
            .map(|r| self.folder_prefix(r.id))
            .transpose()?
            .flatten();
        write_list(out, &parsed, folder.as_deref(), statuses).map_err(written)
    }

    /// The worktrees' states of the git workspaces in use among `records`, in their order.
    async fn statuses_of(&self, records: &[RecordJson<'_>]) -> Result<Vec<Vec<u8>>> {
        let gits = records
            .iter()
            .filter(|r| r.in_use_git())
            .filter_map(|r| r.git.as_ref())
            .map(|git| GitInfo {
                repo: text(git.repo).into(),
                branch: text(git.branch),
                base_branch: text(git.base_branch),
                branch_created: git.branch_created,
                worktree: text(git.worktree).into(),
            })
            .collect();
        let found = git_workspace::statuses(gits).await?;
        // Each at the depth of a view's field: serde's own pretty form, indented twice.
        Ok(found
            .iter()
            .map(|s| {
                let pretty = serde_json::to_vec_pretty(s).expect("a worktree's state serializes");
                let mut indented = Vec::with_capacity(pretty.len() * 2);
                for line in pretty.split_inclusive(|&b| b == b'\n') {
                    indented.extend_from_slice(line);
                    if line.ends_with(b"\n") {
                        indented.extend_from_slice(b"    ");
                    }
                }
                indented
            })
            .collect())
    }

    /// The JSON text of the folder that holds the workspaces' folders, `<folder>/` with its
    /// opening quote, for a record's id to follow: every store keeps `<folder>/<id>`
    /// ([`berth_core::WorkspaceStore::workspace_dir`]). `None` for a store that keeps none.
    fn folder_prefix(&self, id: &str) -> Result<Option<String>> {
        let id = WorkspaceId::new(id)?;
        let Some(dir) = self.manager.workspaces().workspace_dir(&id) else {
            return Ok(None);
        };
        let text = serde_json::to_string(&dir).map_err(unwritable)?;
        let prefix = text
            .strip_suffix(&format!("{id}\""))
            .expect("a workspace's folder is named by its id");
        Ok(Some(prefix.to_owned()))
    }

    /// The same bytes the usual way: each record parsed into a `Workspace`, its view built and
    /// formatted by serde.
    async fn write_workspaces_json_by_view(
        &self,
        archived: bool,
        out: &mut (dyn Write + Send),
    ) -> Result<()> {
        let views = self.list_workspaces_including(archived).await?;
        serde_json::to_writer_pretty(&mut *out, &views)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
            .map_err(written)
    }
}

/// The listing: `records` (their folders in `folder`), each git one in use with the next of
/// `statuses`.
fn write_list(
    out: &mut (dyn Write + Send),
    records: &[RecordJson],
    folder: Option<&str>,
    statuses: Vec<Vec<u8>>,
) -> std::io::Result<()> {
    let mut statuses = statuses.into_iter();
    let mut item = Vec::with_capacity(1024);
    out.write_all(b"[")?;
    for (i, r) in records.iter().enumerate() {
        item.clear();
        item.extend_from_slice(if i == 0 { b"\n  {\n" } else { b",\n  {\n" });
        let status = r.in_use_git().then(|| statuses.next()).flatten();
        write_record(&mut item, r, folder, status.as_deref());
        item.extend_from_slice(b"\n  }");
        out.write_all(&item)?;
    }
    let end: &[u8] = if records.is_empty() { b"]\n" } else { b"\n]\n" };
    out.write_all(end)?;
    out.flush()
}

/// The string a JSON string's text holds (checked to be one by `is_well_formed`).
fn text(raw: &RawValue) -> String {
    serde_json::from_str(raw.get()).expect("a JSON string")
}

/// A write of the listing that failed (a reader gone: `berth workspace list --json | head`),
/// kept an I/O error so that a front end can tell.
fn written(e: std::io::Error) -> crate::Error {
    berth_core::Error::io("cannot write the workspace list", e).into()
}

/// A listing that JSON cannot hold: a folder's path that is not UTF-8.
fn unwritable(e: serde_json::Error) -> crate::Error {
    crate::Error::invalid(format!("the workspace list cannot be written as JSON: {e}"))
}

/// One view's fields, at the depth of an item of the listing, without its braces.
fn write_record(
    out: &mut Vec<u8>,
    r: &RecordJson,
    folder: Option<&str>,
    git_status: Option<&[u8]>,
) {
    let null = || RawValue::NULL;
    let raw = |out: &mut Vec<u8>, key: &str, value: &RawValue| {
        out.extend_from_slice(b"    \"");
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\": ");
        out.extend_from_slice(value.get().as_bytes());
        out.extend_from_slice(b",\n");
    };
    // An id needs no escape (`WorkspaceId`); a name's text sits inside the label's quotes.
    out.extend_from_slice(b"    \"id\": \"");
    out.extend_from_slice(r.id.as_bytes());
    out.extend_from_slice(b"\",\n");
    raw(out, "name", r.name.unwrap_or_else(null));
    out.extend_from_slice(b"    \"label\": \"");
    if let Some(name) = r.name {
        let inner = name.get();
        out.extend_from_slice(&inner.as_bytes()[1..inner.len() - 1]);
        out.extend_from_slice(b" (");
        out.extend_from_slice(r.id.as_bytes());
        out.extend_from_slice(b")");
    } else {
        out.extend_from_slice(r.id.as_bytes());
    }
    out.extend_from_slice(b"\",\n");
    match r.description {
        Some(d) => raw(out, "description", d),
        None => out.extend_from_slice(b"    \"description\": \"\",\n"),
    }
    raw(out, "created_at", r.created_at);
    raw(out, "last_accessed", r.last_accessed);
    raw(out, "agent_id", r.agent_id.unwrap_or_else(null));
    raw(out, "archived_at", r.archived_at.unwrap_or_else(null));
    out.extend_from_slice(b"    \"path\": ");
    match folder {
        Some(folder) => {
            out.extend_from_slice(folder.as_bytes());
            out.extend_from_slice(r.id.as_bytes());
            out.extend_from_slice(b"\"");
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\n    \"git\": ");
    match &r.git {
        Some(g) => out.extend_from_slice(
            format!(
                "{{\n      \"repo\": {},\n      \"worktree\": {},\n      \"branch\": {},\n      \"base_branch\": {},\n      \"branch_created\": {}\n    }}",
                g.repo.get(),
                g.worktree.get(),
                g.branch.get(),
                g.base_branch.get(),
                g.branch_created
            )
            .as_bytes(),
        ),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\n    \"ports\": ");
    match r.ports {
        Some(p) => out.extend_from_slice(
            format!(
                "{{\n      \"first\": {},\n      \"last\": {},\n      \"count\": {}\n    }}",
                p.first,
                p.last(),
                p.count
            )
            .as_bytes(),
        ),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\n    \"git_status\": ");
    out.extend_from_slice(git_status.unwrap_or(b"null"));
    out.extend_from_slice(b",\n    \"size_bytes\": null");
}
