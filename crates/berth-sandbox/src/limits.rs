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
//! - on older kernels, for root, a cgroup of the tree's own with `pids.max` (and, on cgroup v2,
//!   `memory.max`, for which a cgroup is needed whatever the kernel), made beside berth's own
//!   cgroup, where the `pids` controller is mounted and writable.
//!
//! The cgroup's cost is the move into it (measured: creating the cgroup without joining it
//! costs nothing). Moving a process takes the kernel's `cgroup_threadgroup_rwsem` for writing,
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

/// Where a tree's processes are limited when berth runs as root: a new cgroup of its own,
/// with `pids.max` (and `memory.max` on v2) written. `None` where berth is not root
/// (`RLIMIT_NPROC` does the job then), where there is no writable `pids` controller, or where
/// `pid_max` already limits the processes and no memory limit needs one.
pub(crate) fn tree_cgroup(limits: Limits, pid_max_limits: bool) -> Option<PathBuf> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let (parent, v2) = pids_parent()?;
    if pid_max_limits && !(v2 && limits.memory_mib > 0) {
        return None;
    }
    sweep_in_background(&parent);
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = parent.join(format!(
        "{PREFIX}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).ok()?;
    let written = std::fs::write(dir.join("pids.max"), limits.processes.to_string()).is_ok();
    if v2 && limits.memory_mib > 0 {
        let _ = std::fs::write(
            dir.join("memory.max"),
            (limits.memory_mib * 1024 * 1024).to_string(),
        );
    }
    if !written {
        let _ = std::fs::remove_dir(&dir);
        return None;
    }
    OWN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((dir.clone(), Instant::now()));
    Some(dir)
}

/// What this machine enforces of the limits, for `berth doctor`.
pub fn enforced() -> String {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let processes = match (root, pids_parent()) {
        (false, _) => "processes per tree (RLIMIT_NPROC in the tree's user namespace)",
        (true, _) if crate::kernel::support().pid_max_per_namespace => {
            "processes per tree (its PID namespace's pid_max, up to 300 over the limit)"
        }
        (true, Some(_)) => "processes per tree (a pids cgroup of its own)",
        (true, None) => {
            "not processes: berth runs as root, which RLIMIT_NPROC never limits, the kernel is older than 6.14 (no pid_max per namespace), and no pids cgroup is writable"
        }
    };
    let memory = match pids_parent() {
        Some((_, true)) if root => "memory per tree where [sandbox] memory_mib is set (cgroup v2)",
        _ => "not memory (it needs a cgroup v2 berth can write)",
    };
    format!("{processes}; the private /tmp's and /dev/shm's size; {memory}")
}

/// The folder to make a tree's cgroup in (berth's own cgroup's, in the hierarchy that has the
/// `pids` controller), and whether it is cgroup v2.
fn pids_parent() -> Option<(PathBuf, bool)> {
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
            "cgroup" if options.split(',').any(|o| o == "pids") => (
                false,
                own.lines().find_map(|l| {
                    let mut parts = l.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    controllers.split(',').any(|c| c == "pids").then_some(path)
                }),
            ),
            "cgroup2"
                if std::fs::read_to_string(point.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids")) =>
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
