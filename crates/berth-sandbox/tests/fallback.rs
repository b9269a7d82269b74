//! The Landlock-only fallback (`[sandbox] fallback = "landlock"`), where user namespaces are
//! refused (`BERTH_SANDBOX_PRETEND=no-userns` makes berth see such a host): a command writes
//! in its tree and its `TMPDIR`, but cannot write outside, read `~/.ssh`, reach a host port
//! or open a Unix socket; an agent process is refused; without the setting, everything is.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::net::TcpListener;
use std::os::unix::net::UnixListener;

use berth_core::config::{SandboxFallback, SandboxSettings};
use berth_sandbox::{Place, Policy, Subject};

mod support;

use support::{agent, rerun, world};

fn landlock_fallback() -> SandboxSettings {
    SandboxSettings {
        fallback: SandboxFallback::Landlock,
        ..SandboxSettings::default()
    }
}

#[test]
fn without_user_namespaces_a_command_is_confined_by_landlock_alone() {
    rerun(
        "inner_fallback_command",
        &[("BERTH_SANDBOX_PRETEND", "no-userns")],
    );
}

#[test]
#[ignore = "run by without_user_namespaces_a_command_is_confined_by_landlock_alone, with no user namespaces"]
fn inner_fallback_command() {
    let w = world();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let socket_path = w.root.join("host.sock");
    let unix = UnixListener::bind(&socket_path).unwrap();
    unix.set_nonblocking(true).unwrap();
    let outside = w.root.join("outside.txt");
    let script = format!(
        r#"echo inside > inside.txt && echo "wrote inside"
echo x > "$TMPDIR/t" && echo "wrote TMPDIR"
echo pwned > {outside} && echo "WROTE OUTSIDE"
echo pwned > /tmp/berth-fallback-$$ && echo "WROTE /tmp"
cat {home}/.ssh/id_ed25519 && echo "READ SSH"
cat {berth}/config.toml && echo "READ BERTH CONFIG"
cat /usr/bin/env > /dev/null && echo "system readable"
exec 3<>/dev/tcp/127.0.0.1/{port} && echo "CONNECTED"
python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('{sock}'); print('UNIX REACHED')"
python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print('UDP OPENED')"
python3 -c "import socket; a, b = socket.socketpair(); print('socketpair works')"
"#,
        outside = outside.display(),
        home = w.user_home.display(),
        berth = w.berth_home.display(),
        sock = socket_path.display(),
    );
    let confinement = w.confine_with(&landlock_fallback(), &Subject::Command);
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["-c", &script])
        .current_dir(&w.worktree)
        .stdin(std::process::Stdio::null());
    confinement.apply_std(&mut cmd);
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("wrote inside"), "{text}");
    assert!(text.contains("wrote TMPDIR"), "{text}");
    assert!(text.contains("system readable"), "{text}");
    assert!(text.contains("socketpair works"), "{text}");
    for refused in [
        "WROTE OUTSIDE",
        "WROTE /tmp",
        "READ SSH",
        "READ BERTH CONFIG",
        "CONNECTED",
        "UNIX REACHED",
        "UDP OPENED",
        "SECRET-",
    ] {
        assert!(!text.contains(refused), "{refused}:\n{text}");
    }
    assert!(!outside.exists());
    assert!(
        listener.accept().is_err(),
        "a connection reached the host:\n{text}"
    );
    assert!(
        unix.accept().is_err(),
        "a Unix connection reached the host:\n{text}"
    );
    // The TMPDIR is the workspace's own, in berth's home.
    assert!(w.workspace.join("tmp/t").is_file(), "{text}");

    // An agent process is refused, naming why.
    let policy =
        Policy::from_settings(&landlock_fallback(), Some(&w.user_home), &w.berth_home).unwrap();
    let place = Place {
        work: w.worktree.clone(),
        cwd: w.worktree.clone(),
        workspace_dir: Some(w.workspace.clone()),
        ports: vec![],
        protect: vec![],
        readable: vec![],
        hidden: vec![],
    };
    let e = policy.confine(&place, &agent(&w)).unwrap_err().to_string();
    assert!(e.contains("fallback confines commands only"), "{e}");
    assert!(
        policy.level().contains("Landlock-only fallback"),
        "{}",
        policy.level()
    );
    // Without the setting, nothing runs.
    let strict = Policy::from_settings(
        &SandboxSettings::default(),
        Some(&w.user_home),
        &w.berth_home,
    )
    .unwrap();
    let e = strict
        .confine(&place, &Subject::Command)
        .unwrap_err()
        .to_string();
    assert!(e.contains("user namespaces are refused"), "{e}");
}

#[test]
fn as_the_unprivileged_user_too() {
    if !support::is_root() {
        return; // the test above ran as such a user already
    }
    support::as_test_user(&["without_user_namespaces_a_command_is_confined_by_landlock_alone"]);
}
