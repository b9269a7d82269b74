//! The hostile script (tests/sandbox/hostile.sh) under a real confinement, as a command and as
//! an agent process, as this user and, when this is root, as an unprivileged user too.
//!
//! Every file lives outside `/tmp` and `/var/tmp` (in [`base`]), so what hides the secrets
//! is the new root, the deny list and the hidden home, not a private `/tmp`.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use berth_core::config::SandboxSettings;
use berth_sandbox::{Place, Policy, Subject};

mod support;

use support::{World, agent, rerun, run_confined, world};

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
            hosts: vec![provider.local_addr().unwrap().to_string()],
            writable: vec![w.user_home.join(".agent-state")],
            env: vec![],
            program: vec![],
            settings: vec![],
            private: vec![],
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
        hosts: vec![format!("127.0.0.1:{port}")],
        writable: vec![w.user_home.join(".agent-state")],
        env: vec![],
        program: vec![],
        settings: vec![],
        private: vec![],
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

#[test]
fn contained_as_an_unprivileged_user_too() {
    if !support::is_root() {
        // This process is unprivileged already: the tests above ran as such a user.
        let w = world();
        contained(&w, Subject::Command);
        return;
    }
    support::as_test_user(&[
        "a_hostile_command_is_contained",
        "a_hostile_agent_process_is_contained",
        "nothing_is_typed_into_the_callers_terminal",
        "no_descriptor_of_the_caller_is_usable_inside",
        "the_hosts_processes_are_out_of_sight",
        "nothing_outlives_its_run",
        "secrets_of_the_environment_do_not_pass",
        "a_fork_bomb_stops_at_the_process_limit",
        "the_private_tmp_has_a_size",
        "an_unknown_pretend_refuses_everything",
        "older_kernels_hold_the_same_walls",
        "mptcp_does_not_slip_past_the_port_rules",
        "udp_finds_no_way_out",
        "an_agents_way_out_is_the_proxy_by_name",
        "home_is_hidden_but_for_toolchains",
        "an_agent_cannot_plant_a_hook_in_its_own_settings",
    ]);
}

/// A python script that pushes `echo PWNED` into a terminal with TIOCSTI, through
/// `/dev/tty` and through its standard input, and says how each attempt ended.
const TIOCSTI_SCRIPT: &str = r#"python3 - <<'PY'
import fcntl, os, termios
def push(fd, how):
    try:
        for c in b"echo PWNED\n":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
        print("INJECTED through", how)
    except OSError as e:
        print("refused through", how, e)
try:
    push(os.open("/dev/tty", os.O_RDWR), "/dev/tty")
except OSError as e:
    print("no /dev/tty:", e)
push(0, "stdin")
PY"#;

/// What a terminal's input queue holds (`None`: nothing), read without waiting.
fn pending_input(slave: i32) -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: a read into a buffer on the stack from a descriptor this test owns.
    let n = unsafe { libc::read(slave, buf.as_mut_ptr().cast(), buf.len()) };
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n as usize]).into_owned())
}

/// A new pty whose slave end is non-blocking: (master, slave).
fn pty() -> (i32, i32) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills the two descriptors; the rest may be null.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: fcntl on a descriptor this test owns.
    unsafe { libc::fcntl(slave, libc::F_SETFL, libc::O_NONBLOCK) };
    (master, slave)
}

/// Runs the TIOCSTI script with the pty as the controlling terminal and standard input, as
/// a command started from an interactive shell would be; what reached the terminal's input.
fn inject(w: &World, subject: Option<&Subject>) -> (String, Option<String>) {
    let (master, slave) = pty();
    let mut cmd = Command::new("bash");
    // SAFETY: dup of a descriptor this test owns; the child owns the copy.
    let stdin = unsafe { std::os::fd::OwnedFd::from_raw_fd(libc::dup(slave)) };
    cmd.args(["-c", TIOCSTI_SCRIPT])
        .current_dir(&w.worktree)
        .stdin(Stdio::from(stdin));
    // SAFETY: setsid and ioctl only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let confinement = subject.map(|s| w.confine(s));
    if let Some(c) = &confinement {
        c.apply_std(&mut cmd);
    }
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let pending = pending_input(slave);
    // SAFETY: closing the test's own descriptors.
    unsafe {
        libc::close(slave);
        libc::close(master);
    }
    (text, pending)
}

use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;

#[test]
fn nothing_is_typed_into_the_callers_terminal() {
    let w = world();
    // The attack works unconfined: the test can tell.
    let (text, pending) = inject(&w, None);
    assert!(text.contains("INJECTED"), "{text}");
    assert!(pending.is_some_and(|p| p.contains("PWNED")), "{text}");
    for subject in [Subject::Command, agent(&w)] {
        let (text, pending) = inject(&w, Some(&subject));
        assert!(!text.contains("INJECTED"), "{subject:?}: {text}");
        assert!(
            text.contains("refused through stdin"),
            "{subject:?}: {text}"
        );
        assert_eq!(pending, None, "{subject:?}: {text}");
    }
}

#[test]
fn no_descriptor_of_the_caller_is_usable_inside() {
    let w = world();
    let vault = w.root.join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(vault.join("key"), "SECRET-FD-6\n").unwrap();
    let log = w.root.join("host.log");
    let c = |p: &Path| std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // Opened without O_CLOEXEC, as a caller in another language may have left them.
    // SAFETY: open with NUL-terminated paths; the descriptors are closed below.
    let (file, folder) = unsafe {
        (
            libc::open(
                c(&log).as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                0o644,
            ),
            libc::open(c(&vault).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY),
        )
    };
    assert!(file >= 0 && folder >= 0);
    let script = format!(
        "echo PWNED >&{file}; echo PWNED > /proc/self/fd/{file}; cat /proc/self/fd/{folder}/key; cat <&{folder}; ls -l /proc/self/fd/"
    );
    for subject in [Subject::Command, agent(&w)] {
        let (_, text) = run_confined(&w, &subject, &script, |_| {});
        assert!(!text.contains("SECRET-FD"), "{subject:?}: {text}");
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "",
            "{subject:?}: {text}"
        );
    }
    // SAFETY: closing the test's own descriptors.
    unsafe {
        libc::close(file);
        libc::close(folder);
    }
}

#[test]
fn the_hosts_processes_are_out_of_sight() {
    let w = world();
    let mut victim = Command::new("sleep")
        .arg0("SECRET-ARGV-5")
        .arg("60")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let script = format!(
        "cat /proc/*/cmdline | tr '\\0' ' '; echo; kill -0 {} && echo SEES THE\"\"VICTIM; ps -e -o pid=,args= 2>&1 | head -20",
        victim.id()
    );
    for subject in [Subject::Command, agent(&w)] {
        let (_, text) = run_confined(&w, &subject, &script, |_| {});
        assert!(!text.contains("SECRET-ARGV"), "{subject:?}: {text}");
        assert!(!text.contains("SEES THEVICTIM"), "{subject:?}: {text}");
        // Its own processes are there: a /proc of its own, not none.
        assert!(text.contains("bash"), "{subject:?}: {text}");
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[test]
fn nothing_outlives_its_run() {
    let w = world();
    // Markers of this process's own (the same test runs at once as the unprivileged user).
    let pid = std::process::id();
    for (subject, marker) in [
        (Subject::Command, format!("987651{pid}")),
        (agent(&w), format!("987652{pid}")),
    ] {
        let script = format!(
            "setsid sleep {marker} </dev/null >/dev/null 2>&1 & (trap '' HUP; nohup sleep {marker}.5 >/dev/null 2>&1 &); sleep 0.2; echo started"
        );
        let (ok, text) = run_confined(&w, &subject, &script, |_| {});
        assert!(ok && text.contains("started"), "{text}");
        // The tree's init is reaped only once the namespace is empty: no wait is needed.
        assert_eq!(
            berth_testkit::processes_with(&marker),
            Vec::<String>::new(),
            "{text}"
        );
    }
}

#[test]
#[ignore = "run by secrets_of_the_environment_do_not_pass, with canaries set"]
fn inner_environment_canaries() {
    let w = world();
    for subject in [Subject::Command, agent(&w)] {
        let (_, text) = run_confined(&w, &subject, "env", |_| {});
        for canary in [
            "PGPASSWORD",
            "GITHUB_TOKEN",
            "MY_DB_PASSWORD",
            "BERTH_MCP_TOKEN",
        ] {
            assert!(!text.contains(canary), "{subject:?} got {canary}:\n{text}");
        }
        assert!(text.contains("PATH="), "{text}");
    }
    // `[sandbox] env` and an agent's own provider variables pass by name.
    let named = Subject::Agent {
        hosts: vec![],
        writable: vec![],
        env: vec!["MY_DB_PASSWORD".into()],
        program: vec![],
        settings: vec![],
        private: vec![],
    };
    let (_, text) = run_confined(&w, &named, "env", |_| {});
    assert!(text.contains("MY_DB_PASSWORD=canary"), "{text}");
    assert!(!text.contains("PGPASSWORD"), "{text}");
}

#[test]
fn secrets_of_the_environment_do_not_pass() {
    rerun(
        "inner_environment_canaries",
        &[
            ("PGPASSWORD", "canary"),
            ("GITHUB_TOKEN", "canary"),
            ("MY_DB_PASSWORD", "canary"),
            ("BERTH_MCP_TOKEN", "canary"),
        ],
    );
}

#[test]
fn a_fork_bomb_stops_at_the_process_limit() {
    fork_bomb_stops();
    // Again the way kernels before 6.14 limit root (a pids cgroup), or, for any other user,
    // the same way as above.
    rerun(
        "inner_fork_bomb",
        &[("BERTH_SANDBOX_PRETEND", "no-pid-max")],
    );
}

#[test]
#[ignore = "run by a_fork_bomb_stops_at_the_process_limit, with a pretended kernel"]
fn inner_fork_bomb() {
    fork_bomb_stops();
}

/// 3,000 forks from a command and from an agent process: refused before the limit, or, for
/// root on a kernel with `pid_max` per PID namespace, before the limit and the 300 process
/// numbers a namespace that has used them all skips.
fn fork_bomb_stops() {
    let root = support::is_root();
    let by_pid_max = root && berth_sandbox::support().pid_max_per_namespace;
    let limit = SandboxSettings::MAX_PROCESSES + if by_pid_max { 300 } else { 0 };
    let w = world();
    let script = r#"python3 - <<'PY'
import os, time
started = 0
for _ in range(3000):
    try:
        pid = os.fork()
    except OSError as e:
        print("refused:", e)
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    started += 1
print("started", started)
PY"#;
    for subject in [Subject::Command, agent(&w)] {
        let (_, text) = run_confined(&w, &subject, script, |_| {});
        assert!(text.contains("refused:"), "{subject:?}: {text}");
        let started: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("started "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(started < limit, "{subject:?}: {started} processes");
    }
}

#[test]
fn the_private_tmp_has_a_size() {
    let w = world();
    let script = "head -c 3221225472 /dev/zero > /tmp/big; stat -c 'size %s' /tmp/big; head -c 2147483648 /dev/zero > /dev/shm/big; stat -c 'shm %s' /dev/shm/big";
    let (_, text) = run_confined(&w, &Subject::Command, script, |_| {});
    assert!(text.contains("No space left on device"), "{text}");
    let size = |what: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(what))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{text}"))
    };
    let limit = SandboxSettings::TMP_MIB * 1024 * 1024;
    assert!(size("size ") <= limit, "{text}");
    assert!(size("shm ") <= limit, "{text}");
}

#[test]
#[ignore = "run by an_unknown_pretend_refuses_everything"]
fn inner_pretend_unknown() {
    let w = world();
    let policy = Policy::from_settings(
        &SandboxSettings::default(),
        Some(&w.user_home),
        &w.berth_home,
    )
    .unwrap();
    let place = Place {
        work: w.worktree.clone(),
        cwd: w.worktree.clone(),
        workspace_dir: None,
        ports: vec![],
        protect: vec![],
        readable: vec![],
        hidden: vec![],
    };
    let e = policy.confine(&place, &Subject::Command).unwrap_err();
    assert!(e.to_string().contains("no-such-kernel"), "{e}");
    assert!(e.to_string().contains("mode = \"off\""), "{e}");
}

#[test]
fn an_unknown_pretend_refuses_everything() {
    rerun(
        "inner_pretend_unknown",
        &[("BERTH_SANDBOX_PRETEND", "no-such-kernel")],
    );
}

#[test]
#[ignore = "run by older_kernels_hold_the_same_walls"]
fn inner_hostile_command() {
    let w = world();
    contained(&w, Subject::Command);
    contained(&w, agent(&w));
}

#[test]
fn older_kernels_hold_the_same_walls() {
    for abi in ["1", "4"] {
        rerun(
            "inner_hostile_command",
            &[("BERTH_SANDBOX_PRETEND", &format!("landlock-abi={abi}"))],
        );
    }
}

/// A python script that connects to `port` on 127.0.0.1 and ::1 with MPTCP (which Landlock's
/// TCP port rules do not see) and says how each attempt ended.
fn mptcp_script(port: u16) -> String {
    format!(
        r#"python3 - <<'PY'
import socket
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    try:
        s = socket.socket(family, socket.SOCK_STREAM, 262)
        s.settimeout(5)
        s.connect((host, {port}))
        s.sendall(b"mptcp")
        print("MPTCP REACHED", host)
    except OSError as e:
        print("refused", host, e)
PY"#
    )
}

#[test]
fn mptcp_does_not_slip_past_the_port_rules() {
    let w = world();
    let listener = std::net::TcpListener::bind("[::]:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    // Unconfined, both reach the listener (dual-stack): the test can tell.
    let out = Command::new("bash")
        .args(["-c", &mptcp_script(port)])
        .output()
        .unwrap();
    let free = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(free.matches("MPTCP REACHED").count(), 2, "{free}");
    while listener.accept().is_ok() {}
    // An agent process may connect to its provider's port by TCP; this port is not one.
    let provider = TcpListener::bind("127.0.0.1:0").unwrap();
    let subject = Subject::Agent {
        hosts: vec![provider.local_addr().unwrap().to_string()],
        writable: vec![],
        env: vec![],
        program: vec![],
        settings: vec![],
        private: vec![],
    };
    let (_, text) = run_confined(&w, &subject, &mptcp_script(port), |_| {});
    assert!(!text.contains("MPTCP REACHED"), "{text}");
    assert_eq!(text.matches("refused").count(), 2, "{text}");
    assert!(listener.accept().is_err(), "{text}");
}

#[test]
fn udp_finds_no_way_out() {
    let w = world();
    let v4 = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let v6 = std::net::UdpSocket::bind("[::1]:0").unwrap();
    let script = format!(
        r#"python3 - <<'PY'
import socket
for family, host, port in ((socket.AF_INET, "127.0.0.1", {}), (socket.AF_INET6, "::1", {})):
    try:
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.sendto(b"UDP ESCAPED", (host, port))
        print("sent", host)
    except OSError as e:
        print("refused", host, e)
PY
echo done"#,
        v4.local_addr().unwrap().port(),
        v6.local_addr().unwrap().port()
    );
    for subject in [Subject::Command, agent(&w)] {
        let (_, text) = run_confined(&w, &subject, &script, |_| {});
        assert!(text.contains("done"), "{text}");
        // The script is over: whatever it sent has arrived, if anything could.
        for socket in [&v4, &v6] {
            socket.set_nonblocking(true).unwrap();
            let mut buf = [0u8; 64];
            assert!(socket.recv(&mut buf).is_err(), "{subject:?}: {text}");
        }
    }
    // Unconfined, the same datagrams arrive: the test can tell.
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("sent ::1"));
    v4.set_nonblocking(false).unwrap();
    v4.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = v4.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"UDP ESCAPED");
}

/// A python script that asks the proxy named by `HTTPS_PROXY` to `CONNECT` to each target and
/// prints the status line it got for each.
fn connect_script(targets: &[String]) -> String {
    format!(
        r#"python3 - <<'PY'
import os, socket, urllib.parse
proxy = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
for target in {targets:?}:
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
    s.sendall(f"CONNECT {{target}} HTTP/1.1\r\nHost: {{target}}\r\n\r\n".encode())
    print(target, s.recv(200).split(b"\r\n")[0].decode())
PY"#
    )
}

#[test]
fn an_agents_way_out_is_the_proxy_by_name() {
    let w = world();
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    let (a, o) = (
        allowed.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );
    let subject = Subject::Agent {
        hosts: vec![format!("127.0.0.1:{a}")],
        writable: vec![],
        env: vec![],
        program: vec![],
        settings: vec![],
        private: vec![],
    };
    let targets = [
        format!("127.0.0.1:{a}"),
        format!("127.0.0.1:{o}"),
        format!("localhost:{a}"),
    ];
    let (_, text) = run_confined(&w, &subject, &connect_script(&targets), |_| {});
    assert!(
        text.contains(&format!("127.0.0.1:{a} HTTP/1.1 200")),
        "{text}"
    );
    assert!(
        text.contains(&format!("127.0.0.1:{o} HTTP/1.1 403")),
        "{text}"
    );
    // Allowed by address, not by a name that leads there.
    assert!(
        text.contains(&format!("localhost:{a} HTTP/1.1 403")),
        "{text}"
    );
    assert!(allowed.accept().is_ok());
    assert!(other.accept().is_err(), "{text}");
}

#[test]
fn home_is_hidden_but_for_toolchains() {
    let w = world();
    let home = &w.user_home;
    for (rel, text) in [
        (".config/gh/hosts.yml", "SECRET-GH-10\n"),
        (".npmrc", "SECRET-NPMRC-11\n"),
        (".cargo/credentials.toml", "SECRET-CARGO-12\n"),
        (".cargo/config.toml", "[build]\n# a toolchain's own file\n"),
    ] {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let _ = std::fs::remove_file(w.worktree.join("ready"));
    let _ = std::fs::remove_file(w.worktree.join("go"));
    // It reads what exists, then waits for a secret made after it started.
    let script = r#"h=$1
cat "$h/.config/gh/hosts.yml" "$h/.npmrc" "$h/.cargo/credentials.toml"
cat "$h/.cargo/config.toml" && echo TOOLCHAIN READABLE
echo > ready
for i in $(seq 100); do [ -e go ] && break; sleep 0.05; done
cat "$h/.late-secret"
ls -a "$h""#;
    for subject in [Subject::Command, agent(&w)] {
        let confinement = w.confine(&subject);
        let mut cmd = Command::new("bash");
        cmd.args(["-c", script, "bash", home.to_str().unwrap()])
            .current_dir(&w.worktree)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        confinement.apply_std(&mut cmd);
        let child = cmd.spawn().unwrap();
        let started = std::time::Instant::now();
        while !w.worktree.join("ready").exists() {
            assert!(
                started.elapsed().as_secs() < 10,
                "the script never got ready"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::write(home.join(".late-secret"), "SECRET-LATE-13\n").unwrap();
        std::fs::write(w.worktree.join("go"), "").unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!text.contains("SECRET-"), "{subject:?}: {text}");
        assert!(text.contains("TOOLCHAIN READABLE"), "{subject:?}: {text}");
        std::fs::remove_file(home.join(".late-secret")).unwrap();
        std::fs::remove_file(w.worktree.join("ready")).unwrap();
        std::fs::remove_file(w.worktree.join("go")).unwrap();
    }
}

#[test]
fn an_agent_cannot_plant_a_hook_in_its_own_settings() {
    let w = world();
    let state = w.user_home.join(".claude");
    std::fs::create_dir_all(state.join("hooks")).unwrap();
    std::fs::write(state.join("settings.json"), "{}\n").unwrap();
    std::fs::write(state.join("hooks/start.sh"), "true\n").unwrap();
    let subject = Subject::Agent {
        hosts: vec![],
        writable: vec![state.clone()],
        env: vec![],
        program: vec![],
        settings: vec![state.join("settings.json"), state.join("hooks")],
        private: vec![],
    };
    let script = r#"s=$1
printf '{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch /tmp/pwned"}]}]}}' > "$s/settings.json" && echo PLANTED settings
echo 'touch /tmp/pwned' >> "$s/hooks/start.sh" && echo PLANTED hook
echo ok > "$s/history.jsonl" && echo state written"#;
    let (_, text) = run_confined(
        &w,
        &subject,
        &format!("set -- {}; {script}", state.display()),
        |_| {},
    );
    assert!(!text.contains("PLANTED"), "{text}");
    assert!(text.contains("state written"), "{text}");
    assert_eq!(
        std::fs::read_to_string(state.join("settings.json")).unwrap(),
        "{}\n"
    );
    assert_eq!(
        std::fs::read_to_string(state.join("hooks/start.sh")).unwrap(),
        "true\n"
    );
}

/// `cargo test` of a crate with a dependency from the registry, confined with the real `$HOME`
/// hidden: the toolchain (`~/.cargo`, `~/.rustup`) and the registry's cache stay readable,
/// the crate's `target/` is written in the worktree, and nothing needs the network.
#[test]
fn cargo_test_of_a_crate_with_a_dependency_works_confined() {
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let w = world();
    let krate = w.worktree.join("small");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    // itoa is in berth's own Cargo.lock, so its registry cache has it wherever these tests build.
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"small\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"1\"\n",
    )
    .unwrap();
    std::fs::write(
        krate.join("src/lib.rs"),
        "#[test]\nfn formats() { assert_eq!(itoa::Buffer::new().format(42u8), \"42\"); }\n",
    )
    .unwrap();
    let policy =
        Policy::from_settings(&SandboxSettings::default(), Some(&home), &w.berth_home).unwrap();
    let place = Place {
        work: w.worktree.clone(),
        cwd: krate.clone(),
        workspace_dir: Some(w.workspace.clone()),
        ports: vec![],
        protect: vec![],
        readable: vec![],
        hidden: vec![],
    };
    let confinement = policy.confine(&place, &Subject::Command).unwrap().unwrap();
    let mut cmd = Command::new("cargo");
    cmd.args(["test", "--offline", "--quiet"])
        .current_dir(&krate)
        .stdin(Stdio::null());
    confinement.apply_std(&mut cmd);
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert!(krate.join("target").is_dir());
}
