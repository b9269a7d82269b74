//! berth's lost-work refs (`refs/berth/lost/<id>`): made by a forced removal
//! ([`Repo::keep_lost_work`]) with a reflog whose first entry says when, listed with that
//! time, and expired once they are older than the person keeps them.
//!
//! A lost ref often points at an old commit, so its commit's date says nothing of when berth
//! made the ref; the reflog does. A ref with no reflog (made by a berth from before reflogs,
//! or whose entries git's own gc expired after `gc.reflogExpire`, 90 days by default) counts
//! as made when berth first sees it without one: that time is kept in
//! `<git common dir>/berth-lost-seen`, one `<unix seconds> <refname>` a line, since git
//! writes no reflog entry for a ref set to the value it already has. Such a ref therefore
//! lives longer than its time, never shorter.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::{GitError, Repo, Result};

/// Where berth's lost-work refs live.
pub const LOST_PREFIX: &str = "refs/berth/lost/";

/// The file, in the repository's common git folder, of when berth first saw each lost ref
/// that has no reflog.
const SEEN_FILE: &str = "berth-lost-seen";

/// One of berth's lost-work refs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LostRef {
    /// The full ref name, `refs/berth/lost/<id>`.
    pub name: String,
    /// The commit it holds.
    pub target: String,
    /// When berth made it, in seconds since the Unix epoch (its reflog's oldest entry), or
    /// first saw it without a reflog.
    pub made_at: u64,
}

impl LostRef {
    /// Whether it was made `keep` or longer before `now`.
    pub fn expired(&self, keep: Duration, now: SystemTime) -> bool {
        self.made_at.saturating_add(keep.as_secs()) <= unix_seconds(now)
    }
}

impl Repo {
    /// Creates `name` (or `name-2`, `-3`…, the first that does not exist) at `target`, with
    /// a reflog whose entry records when.
    pub(crate) fn create_lost_ref(&self, name: &str, target: &str) -> Result<String> {
        let mut last = None;
        for n in 1..=100 {
            let candidate = match n {
                1 => name.to_owned(),
                n => format!("{name}-{n}"),
            };
            // The empty old value: only if the ref does not exist yet. Git keeps no reflog for
            // refs outside refs/heads and refs/remotes unless told to.
            match self.git([
                "update-ref",
                "--create-reflog",
                "-m",
                "berth: kept by a forced removal",
                &candidate,
                target,
                "",
            ]) {
                Ok(_) => return Ok(candidate),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("tried at least once"))
    }

    /// berth's lost-work refs, each with when it was made. One with no reflog is timed by
    /// when berth first saw it (now, the first time), which is recorded for next time.
    pub fn lost_refs(&self) -> Result<Vec<LostRef>> {
        let listed = self.git([
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            LOST_PREFIX,
        ])?;
        let seen_path = self.common_dir().join(SEEN_FILE);
        let seen = read_seen(&seen_path)?;
        let now = unix_seconds(SystemTime::now());
        let mut still_seen = BTreeMap::new();
        let mut refs = Vec::new();
        for line in listed.lines() {
            let Some((name, target)) = line.split_once(' ') else {
                continue;
            };
            let made_at = match self.reflog_start(name)? {
                Some(at) => at,
                None => {
                    let at = seen.get(name).copied().unwrap_or(now);
                    still_seen.insert(name.to_owned(), at);
                    at
                }
            };
            refs.push(LostRef {
                name: name.to_owned(),
                target: target.to_owned(),
                made_at,
            });
        }
        // Entries of refs gone (or that now have a reflog) go; new ones are kept.
        if still_seen != seen {
            write_seen(&seen_path, &still_seen)?;
        }
        Ok(refs)
    }

    /// Deletes the lost refs made `older_than` ago or longer; the ones deleted.
    pub fn expire_lost(&self, older_than: Duration) -> Result<Vec<LostRef>> {
        let now = SystemTime::now();
        let expired: Vec<LostRef> = self
            .lost_refs()?
            .into_iter()
            .filter(|r| r.expired(older_than, now))
            .collect();
        for lost in &expired {
            self.delete_lost(lost)?;
        }
        Ok(expired)
    }

    /// Deletes a lost ref, only if it still holds the commit it held when listed.
    pub fn delete_lost(&self, lost: &LostRef) -> Result<()> {
        if !lost.name.starts_with(LOST_PREFIX) {
            return Err(GitError::Command {
                command: format!("update-ref -d {}", lost.name),
                message: format!("berth deletes only refs under {LOST_PREFIX}"),
            });
        }
        self.git(["update-ref", "-d", &lost.name, &lost.target])?;
        // Its first sight goes with it, so a ref made later under the name starts afresh.
        let seen_path = self.common_dir().join(SEEN_FILE);
        let mut seen = read_seen(&seen_path)?;
        if seen.remove(&lost.name).is_some() {
            write_seen(&seen_path, &seen)?;
        }
        Ok(())
    }

    /// When the ref's reflog starts (its oldest entry), if it has one.
    fn reflog_start(&self, name: &str) -> Result<Option<u64>> {
        // `%gD` with `--date=unix` names each entry `<ref>@{<seconds>}`, newest first.
        let out = self.git([
            "log",
            "--walk-reflogs",
            "--date=unix",
            "--format=%gD",
            name,
            "--",
        ])?;
        Ok(out.lines().last().and_then(|line| {
            let (_, at) = line.rsplit_once("@{")?;
            at.strip_suffix('}')?.parse().ok()
        }))
    }
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The seen file: missing is empty; a line that does not read is an error, never a guess.
fn read_seen(path: &Path) -> Result<BTreeMap<String, u64>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => {
            return Err(GitError::Io {
                context: format!("cannot read {}", path.display()),
                source,
            });
        }
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            line.split_once(' ')
                .and_then(|(at, name)| Some((name.to_owned(), at.parse().ok()?)))
                .filter(|(name, _)| name.starts_with(LOST_PREFIX))
                .ok_or_else(|| GitError::Corrupt {
                    path: path.to_owned(),
                    reason: format!("the line {line:?} is not `<unix seconds> <refname>`"),
                })
        })
        .collect()
}

/// Writes the seen file whole, through a temporary file renamed over it.
fn write_seen(path: &Path, seen: &BTreeMap<String, u64>) -> Result<()> {
    let io = |context: String| move |source| GitError::Io { context, source };
    if seen.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io(format!("cannot remove {}", path.display()))(e))
            }
            _ => Ok(()),
        };
    }
    let text: String = seen
        .iter()
        .map(|(name, at)| format!("{at} {name}\n"))
        .collect();
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(io(format!("cannot write {}", path.display())))
}
