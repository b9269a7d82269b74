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
/// `no-namespaces`), `apparmor-userns` (as `no-userns`, with AppArmor's policy the cause),
/// `no-pid-max` (act as if the kernel kept one `pid_max` for all PID
/// namespaces, as before Linux 6.14). It makes the probe report less than the kernel has, so that the
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
    /// Whether each PID namespace has a `pid_max` of its own (Linux 6.14 and newer), which
    /// then limits a tree's processes when berth runs as root.
    pub pid_max_per_namespace: bool,
    /// `BERTH_SANDBOX_PRETEND` could not be read: nothing is confined, so nothing runs.
    pub pretend_error: Option<String>,
    /// Whether AppArmor's policy restricts unprivileged user namespaces (Ubuntu 23.10 and
    /// newer), which a profile for berth's binary lifts.
    pub apparmor_restricts_userns: bool,
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
        if let Some(fix) = self.apparmor_fix() {
            return Some(format!(
                "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and newer): allow them to berth's binary with a profile: `berth doctor --fix` runs {}",
                fix.commands.join(" and ")
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

    /// berth's AppArmor profile and the commands that install it, where AppArmor is what
    /// refuses user namespaces.
    pub fn apparmor_fix(&self) -> Option<AppArmorFix> {
        if self.namespaces.is_ok() || !self.apparmor_restricts_userns {
            return None;
        }
        let exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "/path/to/berth".into());
        Some(AppArmorFix {
            profile: format!(
                "abi <abi/4.0>,\ninclude <tunables/global>\n\nprofile berth {exe} flags=(unconfined) {{\n  userns,\n}}\n"
            ),
            path: APPARMOR_PROFILE.into(),
            commands: vec![
                format!("sudo tee {APPARMOR_PROFILE} (the profile on its input)"),
                format!("sudo apparmor_parser -r {APPARMOR_PROFILE}"),
            ],
        })
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

/// Where berth's AppArmor profile goes.
const APPARMOR_PROFILE: &str = "/etc/apparmor.d/berth";

/// berth's AppArmor profile (it may make user namespaces), where it goes, and the commands
/// that install it, as `berth doctor --fix` shows and runs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppArmorFix {
    pub profile: String,
    pub path: String,
    pub commands: Vec<String>,
}

/// What `BERTH_SANDBOX_PRETEND` asks for.
#[derive(Debug, PartialEq, Eq)]
struct Pretend {
    /// Landlock's ABI at most.
    abi: u8,
    no_userns: bool,
    no_pid_max: bool,
    /// As if AppArmor's policy refused user namespaces (Ubuntu 23.10 and newer).
    apparmor: bool,
}

fn pretend(value: &str, real_abi: u8) -> Result<Pretend, String> {
    let mut asked = Pretend {
        abi: real_abi,
        no_userns: false,
        no_pid_max: false,
        apparmor: false,
    };
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item {
            "no-landlock" => asked.abi = 0,
            "no-userns" | "no-namespaces" => asked.no_userns = true,
            "apparmor-userns" => {
                asked.no_userns = true;
                asked.apparmor = true;
            }
            "no-pid-max" => asked.no_pid_max = true,
            _ => match item.strip_prefix("landlock-abi=").map(str::parse::<u8>) {
                Some(Ok(n)) if n <= real_abi => asked.abi = asked.abi.min(n),
                Some(Ok(n)) => {
                    return Err(format!(
                        "{PRETEND_VAR}=landlock-abi={n} asks for more than this kernel's Landlock ABI {real_abi}; it can only take confinement away"
                    ));
                }
                _ => {
                    return Err(format!(
                        "{PRETEND_VAR} has {item:?}, which is none of no-landlock, landlock-abi=N, no-userns, apparmor-userns, no-pid-max"
                    ));
                }
            },
        }
    }
    Ok(asked)
}

/// The kernel's support, probed on first use.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let real = landlock_abi();
        let (asked, pretend_error) =
            match pretend(&std::env::var(PRETEND_VAR).unwrap_or_default(), real) {
                Ok(asked) => (asked, None),
                Err(e) => {
                    let nothing = Pretend {
                        abi: 0,
                        no_userns: true,
                        no_pid_max: true,
                        apparmor: false,
                    };
                    (nothing, Some(e))
                }
            };
        let namespaces = if asked.no_userns {
            Err(format!("{PRETEND_VAR} says so"))
        } else {
            probe_namespaces()
        };
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        Support {
            landlock_abi: asked.abi,
            namespaces,
            pid_max_per_namespace: !asked.no_pid_max && release_at_least(&release, (6, 14)),
            apparmor_restricts_userns: asked.apparmor
                || std::fs::read_to_string(
                    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                )
                .is_ok_and(|v| v.trim() == "1"),
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

/// Whether a kernel release (`6.18.4-arch1`) is `at_least` (major, minor).
fn release_at_least(release: &str, at_least: (u32, u32)) -> bool {
    let mut parts = release.trim().split(['.', '-', '+']);
    let number = |p: Option<&str>| p.and_then(|p| p.parse::<u32>().ok());
    match (number(parts.next()), number(parts.next())) {
        (Some(major), Some(minor)) => (major, minor) >= at_least,
        _ => false,
    }
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
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            crate::child::probe(&maps).map(|never| match never {})
        });
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
    use super::{Pretend, pretend, release_at_least};

    #[test]
    fn pretending_only_takes_away() {
        let asked = |abi, no_userns, no_pid_max| {
            Ok(Pretend {
                abi,
                no_userns,
                no_pid_max,
                apparmor: false,
            })
        };
        assert_eq!(pretend("", 6), asked(6, false, false));
        assert_eq!(pretend("landlock-abi=1", 6), asked(1, false, false));
        assert_eq!(
            pretend("landlock-abi=4, no-userns", 6),
            asked(4, true, false)
        );
        assert_eq!(pretend("no-landlock", 6), asked(0, false, false));
        assert_eq!(pretend("no-pid-max", 6), asked(6, false, true));
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

    #[test]
    fn kernel_releases_are_compared_by_major_and_minor() {
        assert!(release_at_least("6.14.0", (6, 14)));
        assert!(release_at_least("6.18.44-fc-v669\n", (6, 14)));
        assert!(release_at_least("7.0-rc1", (6, 14)));
        assert!(!release_at_least("6.8.0-45-generic", (6, 14)));
        assert!(!release_at_least("5.15.0+", (6, 14)));
        assert!(!release_at_least("", (6, 14)));
        assert!(!release_at_least("six.fourteen", (6, 14)));
    }
}
