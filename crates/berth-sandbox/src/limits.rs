//! How much one confined tree may take: processes, and memory where a cgroup can hold it.
//!
//! Processes are limited by whichever of three ways this machine has, since none works
//! everywhere:
//!
//! - `RLIMIT_NPROC`, set in the command: since Linux 5.14 it counts a user's processes per
//!   user namespace, and every confined tree has a namespace of its own, so it is a limit of
//!   the tree. The kernel never applies it to root (uid 0 of the host), whatever the
//!   capabilities.
//! - so, for root, the tree's PID namespace's own `pid_max`, where the kernel keeps one per
//!   namespace (Linux 6.14 and newer): the init writes it, and a fork past it fails. It is a
//!   limit of process *numbers*, and a namespace that has used them all starts again at
//!   [`RESERVED_PIDS`], not 1, so it is set `RESERVED_PIDS` above the limit: the tree may
//!   hold at least `max_processes` and at most that many more. It costs nothing.
//! - on older kernels, for root, a cgroup of the tree's own with `pids.max`, made beside
//!   berth's own cgroup, where the `pids` controller is mounted and writable.
//!
//! Memory is limited by a cgroup of the tree's own only: `memory.max` (cgroup v2) or
//! `memory.limit_in_bytes` (v1), `[sandbox] memory_mib`, or with 0, its default, half the
//! machine's memory (`MemTotal`): one agent's tree can no longer take the machine (a
//! confined agent once allocated 8 GiB). A limit at or above the machine's memory limits
//! nothing, so no cgroup is made for it: that is how a person turns it off. A tree joins one cgroup, so on cgroup v1, where
//! `pids` and `memory` are hierarchies of their own, a tree that needs a pids cgroup (root
//! before Linux 6.14) has no memory limit; nor has a tree berth starts as another user than
//! root, which makes no cgroup. `berth doctor` says when the memory limit is not in force
//! ([`enforced`], which makes and removes a cgroup to know).
//!
//! The cgroup's cost is the move into it (measured: creating the cgroup without joining it
//! costs nothing), and the memory limit puts every confined spawn of root through it: 5 ms
//! became 24 ms at the median for a confined `true` on cgroup v1 (Linux 6.18). Moving a
//! process takes the kernel's `cgroup_threadgroup_rwsem` for writing,
//! which, by our reading, waits for an RCU grace period unless another move came just before:
//! about 15 ms on a spawn that follows none within a few milliseconds (measured with
//! `cargo bench -p berth-agent --bench sandbox` on cgroup v1; it was the whole of the confined
//! `cargo test`'s 10% there, before `pid_max`). On cgroup v2, forking the init with
//! `clone3(CLONE_INTO_CGROUP)` would avoid the move; that is not done yet.
//!
//! Empty cgroups of trees that ended are removed when the next one is made: a tree's cgroup
//! cannot be removed while its processes live, and the caller does not wait for them here.
//! Only the cgroups of a berth that is gone, or this process's own that are over a minute
//! old, are tried: one just made is empty until its tree joins it, and another berth's (or
//! another thread's) must not be removed then.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::plan::Limits;

/// Prefix of the cgroups berth makes, beside its own.
const PREFIX: &str = "berth-sandbox-";

/// The PID numbers a namespace that has used them all skips when it starts again (the
/// kernel's `RESERVED_PIDS`).
const RESERVED_PIDS: u64 = 300;

/// The `pid_max` of a tree's PID namespace, where that is root's process limit: berth runs
/// as root on a kernel that keeps `pid_max` per namespace. `None` elsewhere.
pub(crate) fn tree_pid_max(limits: Limits) -> Option<u64> {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    (root && crate::kernel::support().pid_max_per_namespace)
        .then(|| limits.processes.saturating_add(RESERVED_PIDS))
}

/// The memory one tree may use, in bytes: `[sandbox] memory_mib`, or with 0 (its default)
/// half the machine's memory. `None`, no limit and so no cgroup for it, for a limit at or
/// above the machine's memory, which would limit nothing (the way to turn it off, and save
/// a spawn the cgroup's cost), or where the machine's memory is not known.
pub(crate) fn tree_memory_bytes(limits: Limits) -> Option<u64> {
    let total = machine_memory_bytes()?;
    match limits.memory_mib {
        0 => Some(total / 2),
        mib => Some(mib.saturating_mul(1 << 20)).filter(|bytes| *bytes < total),
    }
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn machine_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Where a tree's processes and memory are limited when berth runs as root: a new cgroup of
/// its own, with `pids.max` where `pid_max` does not limit its processes, and its memory
/// limit where that cgroup's hierarchy has the `memory` controller. `None` where berth is
/// not root (`RLIMIT_NPROC` limits the processes then), or where no such cgroup can be made.
pub(crate) fn tree_cgroup(limits: Limits, pid_max_limits: bool) -> Option<PathBuf> {
    let made = make_cgroup(limits, pid_max_limits)?;
    sweep_in_background(made.dir.parent()?);
    OWN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((made.dir.clone(), Instant::now()));
    Some(made.dir)
}

/// A tree's cgroup, made, and the memory limit written in it.
struct Made {
    dir: PathBuf,
    memory: Option<u64>,
}

/// Makes a tree's cgroup ([`tree_cgroup`]); `None`, and nothing left, where none is made.
fn make_cgroup(limits: Limits, pid_max_limits: bool) -> Option<Made> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let memory = tree_memory_bytes(limits);
    let memory_at = memory.and_then(|_| controller_parent("memory"));
    // One cgroup, since a tree joins one: the pids one when its processes need it (memory
    // too where that hierarchy has it: cgroup v2), else the memory one.
    let (parent, v2) = match pid_max_limits {
        false => controller_parent("pids")?,
        true => memory_at.clone()?,
    };
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = parent.join(format!(
        "{PREFIX}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).ok()?;
    let pids_written = pid_max_limits
        || std::fs::write(dir.join("pids.max"), limits.processes.to_string()).is_ok();
    let memory_file = match v2 {
        true => "memory.max",
        false => "memory.limit_in_bytes",
    };
    let memory = memory.filter(|bytes| {
        memory_at.as_ref().is_some_and(|(p, _)| *p == parent)
            && std::fs::write(dir.join(memory_file), bytes.to_string()).is_ok()
    });
    if !pids_written || (pid_max_limits && memory.is_none()) {
        let _ = std::fs::remove_dir(&dir);
        return None;
    }
    Some(Made { dir, memory })
}

/// What this machine enforces of a tree's limits, for `berth doctor`.
pub struct Enforced {
    summary: String,
    memory_missing: Option<String>,
}

impl Enforced {
    /// Why a confined tree's memory is not limited here, when it is not.
    pub fn memory_missing(&self) -> Option<&str> {
        self.memory_missing.as_deref()
    }
}

impl std::fmt::Display for Enforced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary)
    }
}

/// What this machine enforces of the limits, for `berth doctor`: the memory limit is known
/// by making a tree's cgroup as a spawn would, with the default limit, and removing it.
pub fn enforced() -> Enforced {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let pid_max = root && crate::kernel::support().pid_max_per_namespace;
    let processes = match (root, controller_parent("pids")) {
        (false, _) => "processes per tree (RLIMIT_NPROC in the tree's user namespace)",
        (true, _) if pid_max => {
            "processes per tree (its PID namespace's pid_max, up to 300 over the limit)"
        }
        (true, Some(_)) => "processes per tree (a pids cgroup of its own)",
        (true, None) => {
            "not processes: berth runs as root, which RLIMIT_NPROC never limits, the kernel is older than 6.14 (no pid_max per namespace), and no pids cgroup is writable"
        }
    };
    let probe = Limits {
        processes: 1024,
        tmp_mib: 1,
        memory_mib: 0,
    };
    let made = make_cgroup(probe, pid_max);
    let memory = made.as_ref().and_then(|m| m.memory);
    if let Some(made) = &made {
        let _ = std::fs::remove_dir(&made.dir);
    }
    let memory_missing = match memory {
        Some(_) => None,
        None if !root => Some(
            "berth does not run as root, and makes no cgroup for a tree then".to_owned(),
        ),
        None if tree_memory_bytes(probe).is_none() => {
            Some("the machine's memory is not known (no MemTotal in /proc/meminfo)".to_owned())
        }
        None if !pid_max && controller_parent("memory").is_some() => Some(
            "a tree's cgroup is its pids one (this kernel keeps no pid_max per PID namespace), whose cgroup v1 hierarchy has no memory controller".to_owned(),
        ),
        None => Some("berth cannot make a cgroup with the memory controller here".to_owned()),
    };
    let memory_said = match (&memory_missing, memory) {
        (None, Some(bytes)) => format!(
            "memory per tree ([sandbox] memory_mib, by default half the machine's: {} MiB)",
            bytes >> 20
        ),
        (Some(why), _) => format!("not memory: {why}"),
        (None, None) => "not memory".to_owned(),
    };
    Enforced {
        summary: format!("{processes}; the private /tmp's and /dev/shm's size; {memory_said}"),
        memory_missing,
    }
}

/// The folder to make a tree's cgroup in for `controller` (berth's own cgroup's, in the
/// hierarchy that has the controller), and whether it is cgroup v2.
fn controller_parent(controller: &str) -> Option<(PathBuf, bool)> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in mountinfo.lines() {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split(' ').collect();
        let theirs: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype), Some(options)) =
            (fields.get(3), fields.get(4), theirs.first(), theirs.get(2))
        else {
            continue;
        };
        if *root != "/" {
            continue;
        }
        let point = Path::new(point);
        let (v2, path) = match *fstype {
            "cgroup" if options.split(',').any(|o| o == controller) => (
                false,
                own.lines().find_map(|l| {
                    let mut parts = l.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    controllers
                        .split(',')
                        .any(|c| c == controller)
                        .then_some(path)
                }),
            ),
            "cgroup2"
                if std::fs::read_to_string(point.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == controller)) =>
            {
                (true, own.lines().find_map(|l| l.strip_prefix("0::")))
            }
            _ => continue,
        };
        let Some(path) = path else { continue };
        let parent = point.join(path.trim_start_matches('/'));
        if parent.is_dir() {
            return Some((parent, v2));
        }
    }
    None
}

/// Starts [`sweep`] on a thread of its own, unless one still runs: removing a cgroup waits
/// for the kernel's RCU grace period (tens of milliseconds on cgroup v1), which must not fall
/// on the spawn of a command.
fn sweep_in_background(parent: &Path) {
    use std::sync::atomic::AtomicBool;
    static SWEEPING: AtomicBool = AtomicBool::new(false);
    if SWEEPING.swap(true, Ordering::AcqRel) {
        return;
    }
    let parent = parent.to_owned();
    let started = std::thread::Builder::new()
        .name("berth-cgroup-sweep".into())
        .spawn(move || {
            sweep(&parent);
            SWEEPING.store(false, Ordering::Release);
        });
    if started.is_err() {
        SWEEPING.store(false, Ordering::Release);
    }
}

/// The cgroups this process made, and when.
static OWN: Mutex<Vec<(PathBuf, Instant)>> = Mutex::new(Vec::new());

/// Removes the empty cgroups of trees that ended (a cgroup with processes cannot be removed):
/// this process's own once a minute old, and those of a berth that is gone.
fn sweep(parent: &Path) {
    let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    own.retain(|(dir, made)| {
        made.elapsed() < Duration::from_secs(60) || std::fs::remove_dir(dir).is_err()
    });
    drop(own);
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: a signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(memory_mib: u64) -> Limits {
        Limits {
            processes: 64,
            tmp_mib: 1,
            memory_mib,
        }
    }

    #[test]
    fn a_trees_memory_is_half_the_machines_unless_set() {
        let total = machine_memory_bytes().unwrap();
        assert!(total > 0);
        assert_eq!(tree_memory_bytes(limits(0)), Some(total / 2));
        assert_eq!(tree_memory_bytes(limits(512)), Some(512 << 20));
        // As much as the machine has, or more: no limit.
        assert_eq!(tree_memory_bytes(limits((total >> 20) + 1)), None);
        assert_eq!(tree_memory_bytes(limits(u64::MAX)), None);
    }

    /// As root where a cgroup with the memory controller can hold a tree (cgroup v2, or v1's
    /// memory hierarchy where `pid_max` limits the processes), the tree's cgroup is made
    /// with half the machine's memory, and `berth doctor` says so; elsewhere it says why not.
    #[test]
    fn the_trees_cgroup_holds_half_the_machines_memory_by_default() {
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let pid_max = root && crate::kernel::support().pid_max_per_namespace;
        let memory = controller_parent("memory");
        let holds = match &memory {
            Some((_, true)) => true,
            Some((parent, false)) => {
                pid_max || controller_parent("pids").is_some_and(|(p, _)| p == *parent)
            }
            None => false,
        };
        let enforced = enforced();
        if !root || !holds {
            let why = enforced
                .memory_missing()
                .expect("doctor says it is not in force");
            assert!(enforced.to_string().contains(why), "{enforced}");
            return;
        }
        assert_eq!(enforced.memory_missing(), None, "{enforced}");
        let half = machine_memory_bytes().unwrap() / 2;
        assert!(
            enforced
                .to_string()
                .contains(&format!("{} MiB", half >> 20)),
            "{enforced}"
        );
        let dir = tree_cgroup(limits(0), pid_max).expect("a tree's cgroup");
        let file = match memory {
            Some((_, true)) => "memory.max",
            _ => "memory.limit_in_bytes",
        };
        let written = std::fs::read_to_string(dir.join(file));
        let _ = std::fs::remove_dir(&dir);
        let written: u64 = written.unwrap().trim().parse().unwrap();
        // The kernel keeps it in whole pages.
        assert_eq!(written, half / 4096 * 4096, "{}", dir.display());
    }
}
