//! What this kernel can enforce, probed once per process.
//!
//! Landlock's ABI version says which rules exist (writes from 1, TCP ports from 4, signal and
//! abstract-socket scopes from 6); user namespaces are tried for real, in a child that makes
//! every kind berth uses, since a kernel (or an AppArmor policy, as on Ubuntu 24.04) may allow
//! creating one and then refuse what matters inside it.

use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A test switch: `no-landlock` or `no-namespaces` makes the probe report that part missing,
/// so the refusals of such a kernel can be tested here. It can only take confinement away,
/// never grant it: what it changes is refused, not run unconfined.
pub const PRETEND_VAR: &str = "BERTH_SANDBOX_PRETEND";

/// The Landlock ABI that has everything berth's policy uses (signal scoping came in 6).
pub(crate) const LANDLOCK_NEEDED: u8 = 6;
/// The first Landlock ABI with TCP port rules.
pub(crate) const LANDLOCK_NET: u8 = 4;

/// What the kernel offers.
#[derive(Debug, Clone)]
pub struct Support {
    /// Landlock's ABI version; 0 without Landlock.
    pub landlock_abi: u8,
    /// Whether a process can make user, mount and network namespaces and mount in them; the
    /// kernel's refusal otherwise.
    pub namespaces: Result<(), String>,
}

impl Support {
    /// Why a confined process cannot be started here, if it cannot.
    pub fn missing(&self) -> Option<String> {
        if self.landlock_abi == 0 {
            return Some("this kernel has no Landlock (Linux 5.13 or newer with `landlock` in its `lsm=` list)".into());
        }
        if self.landlock_abi < LANDLOCK_NEEDED {
            return Some(format!(
                "this kernel's Landlock is ABI {}, and confining signals needs ABI {LANDLOCK_NEEDED} (Linux 6.12 or newer)",
                self.landlock_abi
            ));
        }
        if let Err(e) = &self.namespaces {
            return Some(format!("user namespaces are refused here ({e})"));
        }
        None
    }

    /// One line on what is enforced, for `berth doctor`.
    pub fn summary(&self) -> String {
        let userns = match &self.namespaces {
            Ok(()) => "user, mount and network namespaces".to_owned(),
            Err(e) => format!("no user namespaces ({e})"),
        };
        format!("Landlock ABI {} and {userns}", self.landlock_abi)
    }
}

/// The kernel's support, probed on first use.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let pretend = std::env::var(PRETEND_VAR).unwrap_or_default();
        let landlock_abi = if pretend == "no-landlock" {
            0
        } else {
            landlock_abi()
        };
        let namespaces = if pretend == "no-namespaces" {
            Err(format!("{PRETEND_VAR}=no-namespaces"))
        } else {
            probe_namespaces()
        };
        Support {
            landlock_abi,
            namespaces,
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

/// Starts `sh -c :` in new user, mount and network namespaces that mount a tmpfs, as every
/// confined process does.
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
        Err(e) => Err(e.to_string()),
    }
}
