//! The hostile script (tests/sandbox/hostile.sh) under a real confinement, as a command and as
//! an agent process, as this user and, when this is root, as an unprivileged user too.
//!
//! Every file lives outside `/tmp` (in `/var/tmp`, which any user can reach wherever the
//! checkout is), so what hides the secrets is the deny list and the hidden home, not the
//! private `/tmp`.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use berth_core::config::SandboxSettings;
use berth_sandbox::{Place, Policy, Subject};

const SCRIPT: &str = include_str!("../../../tests/sandbox/hostile.sh");
/// The unprivileged user `test.sh` makes for these tests.
const TEST_USER: &str = "berth-sandbox-test";
/// Set when this binary is run again as the unprivileged user: the folder to work in.
const DIR_VAR: &str = "BERTH_SANDBOX_TEST_DIR";
/// Where the tests' folders go: outside `/tmp`, and reachable by the unprivileged user even
/// when the checkout is not (a clone in a folder of mode 700).
const BASE: &str = "/var/tmp";

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    user_home: PathBuf,
    berth_home: PathBuf,
    workspace: PathBuf,
    worktree: PathBuf,
}

fn world() -> World {
    let parent = std::env::var_os(DIR_VAR)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(BASE));
    let dir = tempfile::Builder::new()
        .prefix("berth-sandbox-test-")
        .tempdir_in(parent)
        .unwrap();
    let root = dir.path().to_owned();
    let user_home = root.join("home");
    std::fs::create_dir_all(user_home.join(".ssh")).unwrap();
    std::fs::write(user_home.join(".ssh/id_ed25519"), "SECRET-SSH-KEY-1\n").unwrap();
    std::fs::write(user_home.join(".netrc"), "SECRET-NETRC-2\n").unwrap();
    let berth_home = root.join("berth");
    let workspace = berth_home.join("workspaces/w1");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(berth_home.join("config.toml"), "# SECRET-CONFIG-3\n").unwrap();
    std::fs::write(workspace.join("config.toml"), "# SECRET-WS-CONFIG-4\n").unwrap();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README"), "hi\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "init"]);
    let worktree = workspace.join("worktree");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "w1",
            worktree.to_str().unwrap(),
        ],
    );
    std::fs::write(worktree.join("hostile.sh"), SCRIPT).unwrap();
    World {
        _dir: dir,
        root,
        user_home,
        berth_home,
        workspace,
        worktree,
    }
}

impl World {
    /// One process's confinement for `subject` in the worktree, with berth's default policy.
    fn confine(&self, subject: &Subject) -> berth_sandbox::Confinement {
        let policy = Policy::from_settings(
            &SandboxSettings::default(),
            Some(&self.user_home),
            &self.berth_home,
        )
        .unwrap();
        let place = Place {
            work: self.worktree.clone(),
            cwd: self.worktree.clone(),
            workspace_dir: Some(self.workspace.clone()),
            ports: vec![],
            protect: vec![],
            readable: vec![],
        };
        policy
            .confine(&place, subject)
            .unwrap()
            .expect("the sandbox is on")
    }
}

/// Runs the script confined for `subject`; checks every bar; returns its output.
fn contained(w: &World, subject: Subject) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut victim = Command::new("sleep").arg("60").spawn().unwrap();
    let outside = w.root.join("outside.txt");
    let pointer = std::fs::read_to_string(w.worktree.join(".git")).unwrap();
    let _ = std::fs::remove_file(w.worktree.join("inside.txt"));

    let confinement = w.confine(&subject);
    let mut cmd = Command::new("bash");
    cmd.arg("hostile.sh")
        .arg(&outside)
        .arg(port.to_string())
        .arg(victim.id().to_string())
        .args([
            w.user_home.join(".ssh/id_ed25519"),
            w.user_home.join(".netrc"),
            w.berth_home.join("config.toml"),
            w.workspace.join("config.toml"),
        ])
        .current_dir(&w.worktree)
        .stdin(Stdio::null());
    confinement.apply_std(&mut cmd);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{}", confinement.spawn_error("bash", &e)));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    assert!(!outside.exists(), "wrote outside:\n{text}");
    assert!(!text.contains("WROTE OUTSIDE"), "{text}");
    assert!(!text.contains("SECRET-"), "read a secret:\n{text}");
    assert!(!text.contains("READ SECRET"), "{text}");
    assert!(!text.contains("CONNECTED"), "{text}");
    let mut accepted = listener.accept();
    if let Ok((s, _)) = &mut accepted {
        let mut got = String::new();
        let _ = s.read_to_string(&mut got);
        panic!("a connection reached the listener ({got:?}):\n{text}");
    }
    assert!(!text.contains("SIGNALLED"), "{text}");
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the victim died:\n{text}"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert!(!text.contains("REWROTE .git"), "{text}");
    assert_eq!(
        std::fs::read_to_string(w.worktree.join(".git")).unwrap(),
        pointer,
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(w.worktree.join("inside.txt")).unwrap(),
        "inside\n",
        "{text}"
    );
    assert!(out.status.success(), "{text}");

    let note = berth_sandbox::explain(&text, &confinement).expect("a note");
    assert!(note.contains("outside.txt"), "{note}");
    assert!(
        note.contains("deny list") || note.contains("hidden"),
        "{note}"
    );
    text
}

#[test]
fn a_hostile_command_is_contained() {
    let w = world();
    let text = contained(&w, Subject::Command);
    // Commands have a network namespace of their own: the host's loopback is not there.
    assert!(
        text.contains("Connection refused") || text.contains("unreachable"),
        "{text}"
    );
}

#[test]
fn a_hostile_agent_process_is_contained() {
    let w = world();
    // The agent may reach its provider's port (not the listener's).
    let provider = TcpListener::bind("127.0.0.1:0").unwrap();
    let text = contained(
        &w,
        Subject::Agent {
            ports: vec![provider.local_addr().unwrap().port()],
            writable: vec![w.user_home.join(".agent-state")],
        },
    );
    assert!(text.contains("Permission denied"), "{text}");
}

#[test]
fn an_agent_reaches_its_provider_and_its_state() {
    let w = world();
    let provider = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = provider.local_addr().unwrap().port();
    std::fs::create_dir_all(w.user_home.join(".agent-state")).unwrap();
    let confinement = w.confine(&Subject::Agent {
        ports: vec![port],
        writable: vec![w.user_home.join(".agent-state")],
    });
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        &format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port} && echo hi >&3 && echo state > \"$1/.agent-state/s\" && echo tmp > /tmp/t && cat /tmp/t && ls /dev/null >/dev/null && echo ok"
        ),
        "bash",
        w.user_home.to_str().unwrap(),
    ])
    .current_dir(&w.worktree);
    confinement.apply_std(&mut cmd);
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(text, "tmp\nok\n");
    assert!(provider.accept().is_ok());
    assert_eq!(
        std::fs::read_to_string(w.user_home.join(".agent-state/s")).unwrap(),
        "state\n"
    );
    // The private /tmp is the process's own: nothing of it reached the host's.
    assert!(!Path::new("/tmp/t").exists() || std::fs::read_to_string("/tmp/t").unwrap() != "tmp\n");
}

/// `keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)` from Python, confined or not:
/// the session keyring is where a login keeps credentials, and the seccomp filter refuses it.
#[test]
fn the_kernel_keyrings_are_out_of_reach() {
    let nr = match std::env::consts::ARCH {
        "x86_64" => 250,
        "aarch64" | "riscv64" => 219,
        other => panic!("no keyctl number known for {other}"),
    };
    let script = format!(
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall({nr}, 0, -3, 0); print(r, ctypes.get_errno())"
    );
    let w = world();
    let run = |confined: bool| {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", &script]).current_dir(&w.worktree);
        let confinement = w.confine(&Subject::Command);
        if confined {
            confinement.apply_std(&mut cmd);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let free = run(false);
    assert!(
        !free.starts_with("-1 "),
        "keyctl fails even unconfined: {free}"
    );
    assert_eq!(run(true), "-1 1\n", "EPERM expected");
}

/// The user `test.sh` makes, as (uid, gid).
fn test_user() -> (u32, u32) {
    let out = Command::new("id").args(["-u", TEST_USER]).output().unwrap();
    assert!(
        out.status.success(),
        "the user {TEST_USER} is missing: ./test.sh makes it (useradd --system {TEST_USER})"
    );
    let uid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let out = Command::new("id").args(["-g", TEST_USER]).output().unwrap();
    let gid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    (uid, gid)
}

#[test]
fn contained_as_an_unprivileged_user_too() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc_geteuid() } != 0 {
        // This process is unprivileged already: the tests above ran as such a user.
        let w = world();
        contained(&w, Subject::Command);
        return;
    }
    let (uid, gid) = test_user();
    let dir = tempfile::Builder::new()
        .prefix("berth-sandbox-test-")
        .tempdir_in(BASE)
        .unwrap();
    // This binary, where the user can run it (the checkout may be out of its reach).
    let exe = dir.path().join("hostile-tests");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    let ok = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(dir.path())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    use std::os::unix::process::CommandExt;
    let out = Command::new(&exe)
        .args([
            "--exact",
            "a_hostile_command_is_contained",
            "a_hostile_agent_process_is_contained",
            "--test-threads=1",
        ])
        .env(DIR_VAR, dir.path())
        .env("HOME", dir.path())
        .uid(uid)
        .gid(gid)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "as {TEST_USER}:\n{text}");
    assert!(text.contains("2 passed"), "as {TEST_USER}:\n{text}");
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}
