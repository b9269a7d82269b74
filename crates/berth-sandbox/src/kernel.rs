//! What this kernel can enforce, probed once per process.
//!
//! Landlock's ABI version says which rules exist (writes from 1, TCP ports from 4, signal and
//! abstract-socket scopes from 6); user namespaces are tried for real, in a child that makes
//! every kind berth uses, since a kernel (or an AppArmor policy, as on Ubuntu 24.04) may allow
//! creating one and then refuse what matters inside it.

use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A test switch, a comma-separated list: `no-landlock`, `landlock-abi=N` (act as if the
/// kernel's Landlock were ABI N, lower than the real one only), `no-userns` (or
/// `no-namespaces`). It makes the probe report less than the kernel has, so that the
/// refusals and the walls of older kernels can be tested on a new one. It can only take
/// confinement away, never grant it; an unknown value is an error, and nothing runs.
pub const PRETEND_VAR: &str = "BERTH_SANDBOX_PRETEND";

/// The first Landlock ABI that scopes abstract Unix sockets and signals; below it a process
/// needs a network namespace of its own (which scopes abstract sockets) to be confined.
pub(crate) const LANDLOCK_SCOPES: u8 = 6;

/// What the kernel offers.
#[derive(Debug, Clone)]
pub struct Support {
    /// Landlock's ABI version; 0 without Landlock.
    pub landlock_abi: u8,
    /// Whether a process can make user, mount, PID and network namespaces and mount (a
    /// tmpfs, a `/proc`) in them; the kernel's refusal otherwise.
    pub namespaces: Result<(), String>,
    /// `BERTH_SANDBOX_PRETEND` could not be read: nothing is confined, so nothing runs.
    pub pretend_error: Option<String>,
}

impl Support {
    /// Why a confined process cannot be started here, if it cannot.
    pub fn missing(&self) -> Option<String> {
        if let Some(e) = &self.pretend_error {
            return Some(e.clone());
        }
        if self.landlock_abi == 0 {
            return Some("this kernel has no Landlock (Linux 5.13 or newer with `landlock` in its `lsm=` list)".into());
        }
        if let Err(e) = &self.namespaces {
            return Some(format!("user namespaces are refused here ({e})"));
        }
        None
    }

    /// What to do about a refusal of user namespaces, where the cause is known: the exact
    /// setting, or (Ubuntu 23.10 and newer) an AppArmor profile for berth's binary.
    pub fn userns_fix(&self) -> Option<String> {
        self.namespaces.as_ref().err()?;
        let read = |p: &str| std::fs::read_to_string(p).ok().map(|v| v.trim().to_owned());
        if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
            let exe = std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "/path/to/berth".into());
            return Some(format!(
                "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and newer): allow them to berth's binary with a profile, `printf 'abi <abi/4.0>,\ninclude <tunables/global>\nprofile berth {exe} flags=(unconfined) {{\n  userns,\n}}\n' | sudo tee /etc/apparmor.d/berth && sudo apparmor_parser -r /etc/apparmor.d/berth`"
            ));
        }
        if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
            return Some(
                "the kernel refuses unprivileged user namespaces: `sudo sysctl -w kernel.unprivileged_userns_clone=1` (and in /etc/sysctl.d to keep it)".into(),
            );
        }
        if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
            return Some(
                "user namespaces are limited to none: `sudo sysctl -w user.max_user_namespaces=15000` (and in /etc/sysctl.d to keep it)".into(),
            );
        }
        None
    }

    /// One line on what is enforced, for `berth doctor`.
    pub fn summary(&self) -> String {
        let userns = match &self.namespaces {
            Ok(()) => "user, mount, PID and network namespaces".to_owned(),
            Err(e) => format!("no user namespaces ({e})"),
        };
        format!("Landlock ABI {} and {userns}", self.landlock_abi)
    }
}

/// What `BERTH_SANDBOX_PRETEND` asks for: (Landlock ABI at most, no user namespaces).
fn pretend(value: &str, real_abi: u8) -> Result<(u8, bool), String> {
    let mut abi = real_abi;
    let mut no_userns = false;
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item {
            "no-landlock" => abi = 0,
            "no-userns" | "no-namespaces" => no_userns = true,
            _ => match item.strip_prefix("landlock-abi=").map(str::parse::<u8>) {
                Some(Ok(n)) if n <= real_abi => abi = abi.min(n),
                Some(Ok(n)) => {
                    return Err(format!(
                        "{PRETEND_VAR}=landlock-abi={n} asks for more than this kernel's Landlock ABI {real_abi}; it can only take confinement away"
                    ));
                }
                _ => {
                    return Err(format!(
                        "{PRETEND_VAR} has {item:?}, which is none of no-landlock, landlock-abi=N, no-userns"
                    ));
                }
            },
        }
    }
    Ok((abi, no_userns))
}

/// The kernel's support, probed on first use.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let real = landlock_abi();
        let (landlock_abi, no_userns, pretend_error) =
            match pretend(&std::env::var(PRETEND_VAR).unwrap_or_default(), real) {
                Ok((abi, no_userns)) => (abi, no_userns, None),
                Err(e) => (0, true, Some(e)),
            };
        let namespaces = if no_userns {
            Err(format!("{PRETEND_VAR} says so"))
        } else {
            probe_namespaces()
        };
        Support {
            landlock_abi,
            namespaces,
            pretend_error,
        }
    })
}

fn landlock_abi() -> u8 {
    // SAFETY: with a null attribute, size 0 and the VERSION flag, the call only returns the
    // ABI version (or fails); it touches no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    u8::try_from(v.max(0)).unwrap_or(u8::MAX)
}

/// Starts `sh -c :` in new user, mount, PID and network namespaces that mount a tmpfs and a
/// `/proc`, as every confined process does.
fn probe_namespaces() -> Result<(), String> {
    let maps = crate::child::IdMaps::of_this_process();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", ":"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure only makes system calls on data prepared before the fork.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || crate::child::probe(&maps));
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("the probe exited with {s}")),
        Err(e) => Err(format!(
            "making user, mount, PID and network namespaces, and a tmpfs and a /proc in them: {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::pretend;

    #[test]
    fn pretending_only_takes_away() {
        assert_eq!(pretend("", 6), Ok((6, false)));
        assert_eq!(pretend("landlock-abi=1", 6), Ok((1, false)));
        assert_eq!(pretend("landlock-abi=4, no-userns", 6), Ok((4, true)));
        assert_eq!(pretend("no-landlock", 6), Ok((0, false)));
        assert!(
            pretend("landlock-abi=7", 6)
                .unwrap_err()
                .contains("only take")
        );
        assert!(
            pretend("no-such-kernel", 6)
                .unwrap_err()
                .contains("no-such-kernel")
        );
        assert!(pretend("landlock-abi=x", 6).is_err());
    }
}
