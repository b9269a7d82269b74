//! The ways out a security review found after the deny list, each tried from a confined
//! command and a confined agent process, as this user and, as root, as the unprivileged user
//! too: a host Unix socket (GNU screen's types into the person's terminal), file metadata
//! outside the writable set (a setuid-root copy of a program), a setuid file left in the
//! worktree, `AF_VSOCK` and netfilter's netlink, nested user namespaces, `/etc`'s secrets, and
//! the secrets in the files a build needs (cargo's and git's config, uv's credentials).
//! What the new root shows is checked whole: `find / -type s` finds no socket but those the
//! process made or was given.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use berth_core::config::SandboxSettings;
use berth_sandbox::Subject;

mod support;

use support::{World, agent, run_confined, world};

/// Both kinds of confined process.
fn subjects(w: &World) -> [(&'static str, Subject); 2] {
    [("command", Subject::Command), ("agent", agent(w))]
}

/// Runs `script` confined for `subject` with `settings`: its success and output.
fn run_with(
    w: &World,
    settings: &SandboxSettings,
    subject: &Subject,
    script: &str,
) -> (bool, String) {
    let confinement = w.confine_with(settings, subject);
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["-c", script])
        .current_dir(&w.worktree)
        .stdin(std::process::Stdio::null());
    confinement.apply_std(&mut cmd);
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A listening Unix socket at `path` that records whether anything connected (what GNU
/// screen's socket would do with it: type it into a shell).
struct Victim {
    listener: UnixListener,
}

impl Victim {
    fn at(path: &Path) -> Victim {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        Victim { listener }
    }

    fn reached(&self) -> bool {
        self.listener.accept().is_ok()
    }
}

/// Walks the whole tree the process sees, `lstat`-ing every entry (a bind mount's folder
/// entry says what its mount point was, so `find -type s` misses a socket bound over a file),
/// and prints each socket as `SOCKET path`.
const FIND_SOCKETS: &str = r#"python3 - <<'PY'
import os, stat
def walk(d):
    try:
        names = os.listdir(d)
    except OSError:
        return
    for n in names:
        p = os.path.join(d, n)
        try:
            m = os.lstat(p).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(m):
            print("SOCKET", p)
        elif stat.S_ISDIR(m):
            walk(p)
walk("/")
PY"#;

/// A python script that connects to each Unix socket named and says which answered.
fn connect_script(paths: &[PathBuf]) -> String {
    let list = paths
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"python3 - <<'PY'
import socket
for path in [{list}]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        print("REACHED", path)
    except OSError as e:
        print("refused", path, e)
PY"#
    )
}

#[test]
fn no_socket_of_the_host_is_in_view() {
    let w = world();
    // Where screen, dbus, a database and WSL keep theirs: outside the home and /tmp.
    let run_dir = w.root.join("run/screen/S-user");
    std::fs::create_dir_all(&run_dir).unwrap();
    let screen = Victim::at(&run_dir.join("1234.work"));
    let var_tmp = PathBuf::from(format!("/var/tmp/berth-test-{}.sock", std::process::id()));
    let in_var_tmp = Victim::at(&var_tmp);
    let mut paths = vec![run_dir.join("1234.work"), var_tmp.clone()];
    let system = ["/run/dbus/system_bus_socket", "/run/systemd/private"];
    paths.extend(system.iter().map(PathBuf::from));
    for (what, subject) in subjects(&w) {
        let script = connect_script(&paths) + "\n" + FIND_SOCKETS;
        let (_, text) = run_confined(&w, &subject, &script, |_| {});
        assert!(!text.contains("REACHED"), "{what}:\n{text}");
        assert!(
            !screen.reached() && !in_var_tmp.reached(),
            "{what}:\n{text}"
        );
        // Only sockets it made could be there, in what it may write; it made none.
        assert!(!text.contains("SOCKET "), "{what}:\n{text}");
    }
    let _ = std::fs::remove_file(var_tmp);
}

#[test]
fn a_socket_named_in_sockets_is_reachable_even_in_a_hidden_folder() {
    let w = world();
    let agent_socket = w.user_home.join(".ssh/agent.sock");
    let ssh_agent = Victim::at(&agent_socket);
    let settings = SandboxSettings {
        sockets: vec![agent_socket.display().to_string()],
        env: vec!["SSH_AUTH_SOCK".into()],
        ..SandboxSettings::default()
    };
    for (what, subject) in subjects(&w) {
        let script = connect_script(std::slice::from_ref(&agent_socket))
            + "\ncat ~/.ssh/id_ed25519 && echo READ THE KEY\n"
            + FIND_SOCKETS;
        let home = w.user_home.display().to_string();
        let script = format!("export HOME={home}\n{script}");
        let (_, text) = run_with(&w, &settings, &subject, &script);
        assert!(text.contains("REACHED"), "{what}:\n{text}");
        assert!(ssh_agent.reached(), "{what}:\n{text}");
        assert!(!text.contains("READ THE KEY"), "{what}:\n{text}");
        assert!(!text.contains("SECRET-"), "{what}:\n{text}");
        let sockets: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("SOCKET "))
            .collect();
        assert_eq!(sockets, [agent_socket.to_str().unwrap()], "{what}:\n{text}");
    }
}

#[test]
fn metadata_outside_the_writable_binds_cannot_change() {
    let w = world();
    // A program outside the writable set, as root's `cp /usr/bin/id` would leave it.
    let victim = w.root.join("copy-of-id");
    std::fs::copy("/usr/bin/id", &victim).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = std::fs::metadata(&victim).unwrap();
    for (what, subject) in subjects(&w) {
        let script = format!(
            r#"python3 - <<'PY'
import os
path = {path:?}
for name, step in [
    ("chmod", lambda: os.chmod(path, 0o4755)),
    ("utime", lambda: os.utime(path, (0, 0))),
    ("setxattr", lambda: os.setxattr(path, "user.berth", b"x")),
    ("chmod /etc/passwd", lambda: os.chmod("/etc/passwd", 0o666)),
]:
    try:
        step()
        print("CHANGED", name)
    except OSError as e:
        print("refused", name, e)
PY"#,
            path = victim.display().to_string()
        );
        let (_, text) = run_confined(&w, &subject, &script, |_| {});
        assert!(!text.contains("CHANGED"), "{what}:\n{text}");
        assert_eq!(text.matches("refused").count(), 4, "{what}:\n{text}");
    }
    let after = std::fs::metadata(&victim).unwrap();
    assert_eq!(after.permissions().mode(), before.permissions().mode());
    use std::os::unix::fs::MetadataExt;
    assert_eq!(after.mtime(), before.mtime());
}

#[test]
fn nothing_in_the_worktree_is_made_setuid() {
    let w = world();
    for (what, subject) in subjects(&w) {
        let script = r#"python3 - <<'PY'
import os, stat
for name, step in [
    ("chmod 4755", lambda: os.chmod("made", 0o4755)),
    ("chmod 2755", lambda: os.chmod("made", 0o2755)),
    ("fchmod", lambda: os.fchmod(os.open("made", os.O_RDONLY), 0o4755)),
    ("open with 4755", lambda: os.open("made-suid", os.O_CREAT | os.O_WRONLY, 0o4755)),
    ("mknod", lambda: os.mknod("made-node", 0o4755 | stat.S_IFREG)),
]:
    try:
        step()
        print("SETUID", name)
    except OSError as e:
        print("refused", name, e)
os.chmod("made", 0o755)
print("plain chmod works")
PY"#;
        let (ok, text) = run_confined(&w, &subject, &format!("touch made\n{script}"), |_| {});
        assert!(ok, "{what}:\n{text}");
        assert!(!text.contains("SETUID"), "{what}:\n{text}");
        assert!(text.contains("plain chmod works"), "{what}:\n{text}");
        for entry in std::fs::read_dir(&w.worktree).unwrap() {
            let mode = entry.unwrap().metadata().unwrap().permissions().mode();
            assert_eq!(mode & 0o6000, 0, "{what}: a set-id file is left:\n{text}");
        }
        let _ = std::fs::remove_file(w.worktree.join("made"));
    }
}

#[test]
fn vsock_and_netfilter_are_refused_and_routes_are_not() {
    let w = world();
    for (what, subject) in subjects(&w) {
        let script = r#"python3 - <<'PY'
import socket
for name, family, kind, protocol in [
    ("vsock", 40, socket.SOCK_STREAM, 0),
    ("netfilter", socket.AF_NETLINK, socket.SOCK_RAW, 12),
    ("packet", 17, socket.SOCK_RAW, 0),
    ("bluetooth", 31, socket.SOCK_STREAM, 3),
]:
    try:
        socket.socket(family, kind, protocol)
        print("OPENED", name)
    except OSError as e:
        print("refused", name, e)
socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
print("route netlink works")
socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
print("unix works")
PY"#;
        let (ok, text) = run_confined(&w, &subject, script, |_| {});
        assert!(ok, "{what}:\n{text}");
        assert!(!text.contains("OPENED"), "{what}:\n{text}");
        assert!(text.contains("route netlink works"), "{what}:\n{text}");
        assert!(text.contains("unix works"), "{what}:\n{text}");
    }
}

/// Tries a user namespace two ways, maps its own id in it (as Chromium's sandbox and bwrap
/// do), then a network namespace inside it. A tree berth runs as root cannot map its id
/// (the host's root) in a namespace of its own: that needs `CAP_SETFCAP`, which no confined
/// process has.
const UNSHARE_SCRIPT: &str = r#"python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
uid = os.getuid()
if libc.unshare(0x10000000) == 0:
    print("UNSHARED")
    try:
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1\n")
        print("MAPPED")
    except OSError as e:
        print("map refused", e)
    if libc.unshare(0x40000000) == 0:
        print("NETWORK NAMESPACE")
else:
    print("refused unshare", os.strerror(ctypes.get_errno()))
PY
unshare --user true && echo "UNSHARE TOOL WORKED"
"#;

#[test]
fn no_user_namespace_is_made_inside_unless_allowed() {
    let w = world();
    for (what, subject) in subjects(&w) {
        let (_, text) = run_confined(&w, &subject, UNSHARE_SCRIPT, |_| {});
        assert!(!text.contains("UNSHARED"), "{what}:\n{text}");
        assert!(!text.contains("UNSHARE TOOL WORKED"), "{what}:\n{text}");
        assert!(text.contains("refused unshare"), "{what}:\n{text}");
    }
    let nested = SandboxSettings {
        nested_namespaces: true,
        ..SandboxSettings::default()
    };
    let (_, text) = run_with(&w, &nested, &Subject::Command, UNSHARE_SCRIPT);
    assert!(text.contains("NETWORK NAMESPACE"), "{text}");
    assert!(support::is_root() || text.contains("MAPPED"), "{text}");
    assert!(text.contains("UNSHARE TOOL WORKED"), "{text}");
}

#[test]
fn only_what_is_needed_is_in_the_root() {
    let w = world();
    for (what, subject) in subjects(&w) {
        let script = r#"
ls -A / | tr '\n' ' '; echo
for d in /srv /mnt /media /root /home /var/lib /run; do
  [ -e "$d" ] && find "$d" -mindepth 1 -maxdepth 4 2>/dev/null | sed 's/^/THERE /'
done
cat /etc/shadow >/dev/null 2>&1 && echo "READ /etc/shadow"
cat /etc/gshadow >/dev/null 2>&1 && echo "READ /etc/gshadow"
ls /usr/bin/env >/dev/null && echo "system folders are there"
echo x > /usr/berth-test 2>/dev/null && echo "WROTE /usr"
echo x > /tmp/x && echo x > /var/tmp/x && echo "private tmp works"
"#;
        let (_, text) = run_confined(&w, &subject, script, |_| {});
        assert!(!text.contains("READ /etc/"), "{what}:\n{text}");
        assert!(!text.contains("WROTE"), "{what}:\n{text}");
        assert!(text.contains("system folders are there"), "{what}:\n{text}");
        assert!(text.contains("private tmp works"), "{what}:\n{text}");
        // The world (and so $HOME and the workspace) lies beneath base(), and the toolchains
        // on PATH or named by their variables may lie in a home: only they may be found in
        // these folders, never anything else of the host's.
        let mut shown = vec![w.root.clone()];
        for name in std::iter::once("PATH").chain(berth_sandbox::TOOLCHAINS) {
            if let Some(value) = std::env::var_os(name) {
                shown.extend(std::env::split_paths(&value).filter_map(|p| p.canonicalize().ok()));
            }
        }
        for line in text.lines().filter_map(|l| l.strip_prefix("THERE ")) {
            let line = Path::new(line);
            assert!(
                shown
                    .iter()
                    .any(|s| s.starts_with(line) || line.starts_with(s)),
                "{what}: {} holds something of the host's:\n{text}",
                line.display()
            );
        }
        let first = text.lines().next().unwrap_or_default();
        for entry in first.split_whitespace() {
            assert!(
                [
                    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "nix",
                    "snap", "proc", "dev", "run", "var", "tmp"
                ]
                .contains(&entry)
                    || shown.iter().any(|s| s.starts_with(format!("/{entry}"))),
                "{what}: /{entry} is in the root:\n{text}"
            );
        }
    }
}

#[test]
fn the_files_bound_back_are_shown_without_their_secrets() {
    let w = world();
    let home = &w.user_home;
    let write = |rel: &str, text: &str| {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        ".cargo/config.toml",
        "[registry]\ntoken = \"SECRET-CARGO\"\n[build]\njobs = 2\n",
    );
    write(
        ".gitconfig",
        "[user]\n\tname = Me\n[http]\n\textraHeader = Authorization: Bearer SECRET-HEADER\n[url \"https://SECRET-URL@github.com/\"]\n\tinsteadOf = https://github.com/\n[credential]\n\thelper = \"!echo password=SECRET-HELPER\"\n",
    );
    write(
        ".local/share/uv/credentials/credentials.toml",
        "[[credential]]\npassword = \"SECRET-UV\"\n",
    );
    write(".local/share/uv/python/marker", "uv's own\n");
    // A dotfiles manager's: `~/.gitconfig` a link into a folder of its own.
    std::fs::create_dir_all(home.join("dotfiles")).unwrap();
    std::fs::rename(home.join(".gitconfig"), home.join("dotfiles/gitconfig")).unwrap();
    std::os::unix::fs::symlink(home.join("dotfiles/gitconfig"), home.join(".gitconfig")).unwrap();
    for (what, subject) in subjects(&w) {
        let script = format!(
            "cd {home}; cat .cargo/config.toml .gitconfig .local/share/uv/python/marker; cat .local/share/uv/credentials/credentials.toml",
            home = home.display()
        );
        let (_, text) = run_confined(&w, &subject, &script, |_| {});
        assert!(!text.contains("SECRET"), "{what}:\n{text}");
        assert!(text.contains("jobs = 2"), "{what}:\n{text}");
        assert!(text.contains("name = Me"), "{what}:\n{text}");
        assert!(
            text.contains("insteadOf = https://github.com/"),
            "{what}:\n{text}"
        );
        assert!(text.contains("uv's own"), "{what}:\n{text}");
    }
    // The originals are as they were.
    let git = std::fs::read_to_string(home.join("dotfiles/gitconfig")).unwrap();
    assert!(git.contains("SECRET-HEADER"));
}

#[test]
fn as_the_unprivileged_user_too() {
    if !support::is_root() {
        return; // the tests above ran as such a user already
    }
    support::as_test_user(&[
        "no_socket_of_the_host_is_in_view",
        "a_socket_named_in_sockets_is_reachable_even_in_a_hidden_folder",
        "metadata_outside_the_writable_binds_cannot_change",
        "nothing_in_the_worktree_is_made_setuid",
        "vsock_and_netfilter_are_refused_and_routes_are_not",
        "no_user_namespace_is_made_inside_unless_allowed",
        "only_what_is_needed_is_in_the_root",
        "the_files_bound_back_are_shown_without_their_secrets",
    ]);
}
