//! The registry of a workspace's background processes: what berth's agent started with
//! `run_command`'s `background: true` and that still runs, kept on disk so that another berth
//! process (`berth workspace ps`) can list and end them.
//!
//! It lives in berth's home, `background/<workspace id>/`, never in a work folder: a confined
//! process cannot read it, nor forge an entry that would make a person's `--kill` signal a
//! process of theirs. `processes.json` holds the entries and the next id; each process's
//! output is `<id>.log` beside it (written by the process that started it, within a bound).
//! Every change is a read-change-write under `.lock`, written atomically; a file that does not
//! parse is corrupt, never taken as empty.
//!
//! A process is known by its pid and the time the kernel says it started (`/proc/PID/stat`),
//! so a pid used again by another process is never taken for it: an entry whose process is
//! gone (it ended, or berth was killed and its lifeline took the tree down) is dropped when
//! the registry is read. Killing one kills its process group: the keeper of a confined tree,
//! whose init dies with it and takes its PID namespace down, or the shell of an unconfined one.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_core::WorkspaceId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::Ops;
use crate::error::{Error, ErrorKind, Result, blocking};

/// The registry's file, in the workspace's folder of background processes.
const FILE: &str = "processes.json";

/// How long a kill waits for the process to be gone before saying it is not.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// The id of a background process, `bg-N`: unique in its workspace, never used twice there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BackgroundId(u64);

impl BackgroundId {
    /// The output file of this process in `dir`.
    fn log(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{self}.log"))
    }
}

impl std::fmt::Display for BackgroundId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bg-{}", self.0)
    }
}

impl std::str::FromStr for BackgroundId {
    type Err = Error;

    fn from_str(text: &str) -> Result<BackgroundId> {
        text.strip_prefix("bg-")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok())
            .map(BackgroundId)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{text:?} is not a background process's id: an id is bg- and a number, like bg-1"
                ))
            })
    }
}

impl TryFrom<String> for BackgroundId {
    type Error = Error;
    fn try_from(text: String) -> Result<BackgroundId> {
        text.parse()
    }
}

impl From<BackgroundId> for String {
    fn from(id: BackgroundId) -> String {
        id.to_string()
    }
}

/// One background process as the registry keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackgroundProcess {
    pub id: BackgroundId,
    /// The process berth started: the keeper of a confined tree, or the shell.
    pub pid: u32,
    /// When the kernel started `pid`, in clock ticks since boot: with the pid, its identity.
    pub start_ticks: u64,
    /// The command line, as the model gave it.
    pub command: String,
    pub started: DateTime<Utc>,
    /// The session whose agent started it; it ends with that session.
    pub session: String,
    /// Its output (standard output and error together), within a bound.
    pub output: PathBuf,
    /// The berth process that started it, which holds its lifeline.
    pub owner_pid: u32,
}

/// The file: the entries, and the number the next id takes.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Registry {
    next: u64,
    processes: Vec<BackgroundProcess>,
}

/// When the kernel started process `pid` (field 22 of `/proc/PID/stat`, in clock ticks since
/// boot), and whether it has ended and waits to be reaped; `None` when there is no such
/// process.
pub fn process_start_ticks(pid: u32) -> Option<(u64, bool)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command's name (field 2) is in parentheses and may hold spaces or parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // Field 3, the state: `Z`, a zombie, has ended.
    let ended = fields.next()? == "Z";
    Some((fields.nth(18)?.parse().ok()?, ended))
}

/// Whether `pid` is still the process that started at `start_ticks`, and has not ended.
pub fn is_running(pid: u32, start_ticks: u64) -> bool {
    process_start_ticks(pid) == Some((start_ticks, false))
}

/// Kills the process group `pid` leads, if `pid` is still the process that started at
/// `start_ticks`: a confined tree's keeper (its init dies with it, and the PID namespace with
/// the init) or an unconfined shell and what it started. `false` when it was gone already.
pub fn kill_tree(pid: u32, start_ticks: u64) -> bool {
    let Some(group) = i32::try_from(pid)
        .ok()
        .filter(|p| *p > 1)
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    if !is_running(pid, start_ticks) {
        return false;
    }
    // Between the check and the signal the process could end and be reaped by its owner;
    // its group id stays reserved while any member of the group lives, so at worst the
    // signal finds no group.
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    true
}

impl Ops {
    /// The folder of a workspace's background processes: the registry and their output.
    pub fn background_dir(&self, ws: &WorkspaceId) -> PathBuf {
        self.home().join("background").join(ws.as_str())
    }

    /// A new id for a process about to start in `ws`, and the file its output goes to.
    pub async fn reserve_background(&self, ws: &WorkspaceId) -> Result<(BackgroundId, PathBuf)> {
        let dir = self.background_dir(ws);
        blocking(move || {
            change(&dir, |registry| {
                registry.next = registry.next.max(1);
                let id = BackgroundId(registry.next);
                registry.next += 1;
                Ok((id.clone(), id.log(&dir)))
            })
        })
        .await
    }

    /// Records a process that started.
    pub async fn add_background(&self, ws: &WorkspaceId, process: BackgroundProcess) -> Result<()> {
        let dir = self.background_dir(ws);
        blocking(move || {
            change(&dir, |registry| {
                registry.processes.retain(|p| p.id != process.id);
                registry.processes.push(process);
                Ok(())
            })
        })
        .await
    }

    /// Forgets a process that ended (its output file stays).
    pub async fn remove_background(&self, ws: &WorkspaceId, id: &BackgroundId) -> Result<()> {
        let dir = self.background_dir(ws);
        let id = id.clone();
        blocking(move || {
            change(&dir, |registry| {
                registry.processes.retain(|p| p.id != id);
                Ok(())
            })
        })
        .await
    }

    /// The background processes running for `ws`, oldest first; entries of processes that
    /// are gone are dropped from the registry.
    pub async fn background_processes(&self, ws: &WorkspaceId) -> Result<Vec<BackgroundProcess>> {
        let dir = self.background_dir(ws);
        blocking(move || {
            // Nothing was ever started there: nothing to read, and no folder made to say so.
            if !dir.exists() {
                return Ok(Vec::new());
            }
            change(&dir, |registry| {
                registry
                    .processes
                    .retain(|p| is_running(p.pid, p.start_ticks));
                Ok(registry.processes.clone())
            })
        })
        .await
    }

    /// Ends the background process `id` of `ws`, or all of them, and waits until each is
    /// gone; what was ended. An id that runs nothing there is not found.
    pub async fn kill_background(
        &self,
        ws: &WorkspaceId,
        id: Option<&BackgroundId>,
    ) -> Result<Vec<BackgroundProcess>> {
        let running = self.background_processes(ws).await?;
        let chosen: Vec<BackgroundProcess> = match id {
            None => running,
            Some(id) => {
                let found: Vec<_> = running.into_iter().filter(|p| &p.id == id).collect();
                if found.is_empty() {
                    return Err(Error::rule(
                        ErrorKind::NotFound,
                        format!("no background process {id} runs in workspace {ws}"),
                    ));
                }
                found
            }
        };
        let dir = self.background_dir(ws);
        blocking(move || {
            for p in &chosen {
                kill_tree(p.pid, p.start_ticks);
            }
            let deadline = std::time::Instant::now() + KILL_WAIT;
            for p in &chosen {
                while is_running(p.pid, p.start_ticks) {
                    if std::time::Instant::now() > deadline {
                        return Err(Error::rule(
                            ErrorKind::Io,
                            format!(
                                "background process {} (pid {}) was sent SIGKILL but still runs after {} s",
                                p.id,
                                p.pid,
                                KILL_WAIT.as_secs()
                            ),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            change(&dir, |registry| {
                registry.processes.retain(|p| !chosen.iter().any(|c| c.id == p.id));
                Ok(())
            })?;
            Ok(chosen)
        })
        .await
    }

    /// Ends every background process of a workspace that goes away (deleted or archived); with
    /// `forget`, its folder of background processes goes too.
    pub(crate) async fn end_background(&self, ws: &WorkspaceId, forget: bool) -> Result<()> {
        self.kill_background(ws, None).await?;
        if forget {
            let dir = self.background_dir(ws);
            blocking(move || match std::fs::remove_dir_all(&dir) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io(&dir, e)),
            })
            .await?;
        }
        Ok(())
    }
}

/// Reads the registry in `dir`, changes it and writes it back atomically, under its lock.
/// Nothing is written when nothing changed.
fn change<T>(dir: &Path, edit: impl FnOnce(&mut Registry) -> Result<T>) -> Result<T> {
    let _lock = lock(dir)?;
    let path = dir.join(FILE);
    let before = match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(&path, e)),
    };
    let mut registry = match &before {
        None => Registry::default(),
        Some(bytes) => serde_json::from_slice(bytes).map_err(|e| {
            Error::from(berth_core::Error::Corrupt {
                file: path.clone(),
                line: Some(e.line()),
                reason: e.to_string(),
            })
        })?,
    };
    let out = edit(&mut registry)?;
    let mut after = serde_json::to_vec_pretty(&registry).expect("the registry serializes");
    after.push(b'\n');
    if before.as_deref() != Some(after.as_slice()) {
        berth_store_fs::durable::write_atomic(&path, &after).map_err(|e| io(&path, e))?;
    }
    Ok(out)
}

fn lock(dir: &Path) -> Result<File> {
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let lock_path = dir.join(".lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| io(&lock_path, e))?;
    file.lock().map_err(|e| io(&lock_path, e))?;
    Ok(file)
}

fn io(path: &Path, e: std::io::Error) -> Error {
    berth_core::Error::io(
        format!("the background processes' registry at {}", path.display()),
        e,
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_bg_and_a_number() {
        assert_eq!(
            "bg-12".parse::<BackgroundId>().unwrap().to_string(),
            "bg-12"
        );
        for bad in ["bg-", "bg-x", "12", "bg--1", "bg-1/../x", "BG-1", "bg-1 "] {
            let e = bad.parse::<BackgroundId>().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Invalid, "{bad}");
        }
    }

    #[test]
    fn a_corrupt_registry_is_an_error_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        let e = change(dir.path(), |_| Ok(())).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE)).unwrap(),
            "{not json"
        );
    }

    #[test]
    fn this_process_is_running_and_a_wrong_start_is_not() {
        let me = std::process::id();
        let (ticks, ended) = process_start_ticks(me).unwrap();
        assert!(!ended);
        assert!(is_running(me, ticks));
        assert!(!is_running(me, ticks + 1));
    }
}
