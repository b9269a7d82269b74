//! The Landlock-only fallback (`[sandbox] fallback = "landlock"`), for where user namespaces
//! are refused (Docker's default seccomp profile, dev containers, hosts that restrict them):
//! a command confined by Landlock and seccomp alone, in the host's own tree.
//!
//! The same allow list as the new root ([`super::view`]) becomes Landlock's rules: it reads
//! only the system's folders, the toolchains, its workspace and `[sandbox] readable`, and
//! writes only the work folder, `[sandbox] writable` and a private `TMPDIR` (the workspace's
//! own `tmp/` in berth's home). A deny-listed path inside a readable folder is left out by
//! granting the folder's other entries one by one (Landlock rules only allow), and so is a
//! file shown scrubbed in the new root. TCP is refused (ABI 4), seccomp refuses Unix sockets
//! (`socketpair` stays: Landlock does not mediate a Unix socket's connect) and UDP.
//!
//! What it cannot do, which `berth doctor` says: TCP rules are by port, not address (a
//! command has none, so this matters only with `network = "full"`); nothing inside the work
//! folder is read-only, the worktree's `.git` pointer included (Landlock's rules only grant,
//! and a grant covers everything beneath it); chmod, chown and utime are
//! not mediated; the host's processes are visible in `/proc`; there is no private `/tmp`
//! (`TMPDIR` is set instead); no process limit but the cgroup's. Agents are not confined this
//! way: their only way out is berth's proxy, which lives in a network namespace.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

use super::view::Item;
use super::{
    Confinement, Holder, Net, Request, Resolved, cstring, landlock_abi, lifeline, mount_items,
    report_pipe, setup,
};
use crate::SandboxError;
use crate::child::{ChildPlan, IdMaps};

/// The first Landlock ABI with TCP rules: below it a command could reach any host.
pub(crate) const FALLBACK_ABI: u8 = 4;

/// What the fallback grants, from the new root's items: (path, writable).
fn grants(items: &[(PathBuf, Item)]) -> Vec<(PathBuf, bool)> {
    // Hidden inside what is granted: the deny list, and what the new root shows scrubbed.
    let hidden: Vec<&Path> = items
        .iter()
        .filter(|(_, i)| matches!(i, Item::Deny { .. } | Item::Scrubbed(_)))
        .map(|(p, _)| p.as_path())
        .collect();
    let mut out = Vec::new();
    for (path, item) in items {
        if let Item::Bind { writable, .. } = item {
            grant_around(path, *writable, &hidden, &mut out);
        }
    }
    out
}

/// Grants `root`, or, where something hidden lies beneath it, each of its entries but what
/// is hidden, the same way down.
fn grant_around(root: &Path, writable: bool, hidden: &[&Path], out: &mut Vec<(PathBuf, bool)>) {
    if hidden.contains(&root) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(root)) {
        out.push((root.to_owned(), writable));
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        grant_around(&entry.path(), writable, hidden, out);
    }
}

/// The ruleset: reads and writes as granted, the devices, the host's `/proc` to read, no TCP
/// (but with `network = "full"`), and the scopes where the kernel has them.
fn ruleset(
    level: u8,
    grants: &[(PathBuf, bool)],
    tmp: &Path,
    net: &Net,
) -> Result<OwnedFd, SandboxError> {
    let abi = landlock_abi(level);
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(setup)?;
    if *net != Net::Full {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(setup)?;
    }
    if level >= crate::kernel::LANDLOCK_SCOPES {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(setup)?;
    }
    let mut created = ruleset.create().map_err(setup)?;
    let devices = super::DEVICES.iter().map(|d| {
        (
            Path::new("/dev").join(d),
            super::WRITABLE_DEVICES.contains(d),
        )
    });
    let rules = grants
        .iter()
        .cloned()
        .chain(std::iter::once((tmp.to_owned(), true)))
        .chain(devices)
        .chain(std::iter::once((PathBuf::from("/proc"), false)));
    for (path, writable) in rules {
        let Ok(fd) = PathFd::new(&path) else {
            continue; // not there: nothing to grant
        };
        let mut access = if writable { all } else { read };
        if !path.is_dir() {
            access &= AccessFs::from_file(abi);
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(setup)?;
    }
    Option::<OwnedFd>::from(created).ok_or_else(|| setup("the kernel made no Landlock ruleset"))
}

/// The private `TMPDIR`: the workspace's own `tmp/` in berth's home (it goes with the
/// workspace), else one for the work folder in berth's.
fn private_tmp(paths: &Resolved) -> Result<PathBuf, SandboxError> {
    use std::hash::{Hash, Hasher};
    let dir = match &paths.keep {
        Some(keep) => keep.join("tmp"),
        None => {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            paths.work.hash(&mut hasher);
            paths
                .berth_home
                .join(".sandbox/tmp")
                .join(format!("{:016x}", hasher.finish()))
        }
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| SandboxError::Setup(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

/// One command's confinement by Landlock and seccomp alone.
pub(super) fn prepare(req: Request<'_>) -> Result<Confinement, SandboxError> {
    // The policy chose the fallback only with ABI 4 or newer.
    let level = crate::support().landlock_abi;
    if let Net::Proxied { .. } = req.net {
        return Err(SandboxError::Unsupported(
            "the Landlock fallback confines commands with no network or the full network: berth's proxy (an agent's way out, and `network = \"proxy\"`'s) lives in a network namespace, which this host refuses".into(),
        ));
    }
    let paths = Resolved::from_request(&req)?;
    let items = mount_items(&req, &paths)?;
    let tmp = private_tmp(&paths)?;
    let ruleset = ruleset(level, &grants(&items), &tmp, &req.net)?;
    let (report, report_tx) = report_pipe()?;
    let mut env = req.env;
    let tmp_text = tmp.display().to_string();
    env.set(vec![
        ("TMPDIR".to_owned(), tmp_text.clone()),
        ("TMP".to_owned(), tmp_text.clone()),
        ("TEMP".to_owned(), tmp_text),
    ]);
    let cgroup = crate::limits::tree_cgroup(req.limits, false);
    let plan = ChildPlan {
        fallback: true,
        lifeline: lifeline(),
        arguments: None,
        // RLIMIT_NPROC counts every process of the user without a user namespace of the
        // tree's own: the cgroup's limit is the only one.
        max_processes: None,
        pid_max: None,
        cgroup_procs: cgroup
            .as_ref()
            .map(|c| cstring(&c.join("cgroup.procs")))
            .transpose()?,
        maps: IdMaps::of_this_process(),
        join: None,
        proxy: None,
        steps: Vec::new(),
        ruleset: ruleset.as_raw_fd(),
        child_writable: Vec::new(),
        proc_writable: false,
        write_access: 0,
        cwd: cstring(&paths.cwd)?,
        report: report_tx.as_raw_fd(),
        sources: Vec::new(),
        seccomp: crate::seccomp::programs(crate::seccomp::Refuse {
            truncate: false,
            user_namespaces: !req.nested_namespaces,
            unix_and_udp: true,
        }),
    };
    Ok(Confinement {
        child: Arc::new(Holder {
            _network: None,
            plan,
            _fds: vec![report_tx],
            _ruleset: ruleset,
            report,
        }),
        rules: paths.into_rules(req.net),
        env,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_hidden_inside_a_grant_is_left_out_entry_by_entry() {
        let dir = tempfile::tempdir().unwrap();
        let cargo = dir.path().join(".cargo");
        std::fs::create_dir_all(cargo.join("bin")).unwrap();
        std::fs::write(cargo.join("credentials.toml"), "token").unwrap();
        std::fs::write(cargo.join("config.toml"), "x").unwrap();
        let items = vec![
            (
                cargo.clone(),
                Item::Bind {
                    dir: true,
                    writable: false,
                },
            ),
            (cargo.join("credentials.toml"), Item::Deny { dir: false }),
            (
                cargo.join("config.toml"),
                Item::Scrubbed(dir.path().join("copy")),
            ),
        ];
        let mut granted = grants(&items);
        granted.sort();
        assert_eq!(granted, [(cargo.join("bin"), false)]);
    }
}
