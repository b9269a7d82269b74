//! `berth workspace gc` in a real terminal (tmux): work that appears in a worktree while the
//! question is on the screen is not lost when the user answers yes. The workspace is kept, and
//! the screen says so and why.
//!
//! tmux is required: without it these tests fail (test.sh installs it), they never skip.

mod support;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use berth_testkit::{commit, git, run};
use support::Home;

/// How long any one thing on the screen may take to appear.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A repository with one commit on `main`, in its own temp dir.
struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "--quiet", "-b", "main"]);
        commit(&root, "README.md", "hello\n");
        let root = root.canonicalize().unwrap();
        Repo { _tmp: tmp, root }
    }
}

/// `berth ARGS` run inside `dir`, insisting on success; returns stdout.
fn ok_in(home: &Home, dir: &Path, args: &[&str]) -> String {
    let mut cmd = home.cmd(args);
    cmd.current_dir(dir);
    let r = run(cmd);
    assert_eq!(r.code, 0, "berth {args:?} failed: {}", r.stderr);
    r.stdout
}

/// The one tmux session of a [`Terminal`].
const SESSION: &str = "berth";

/// A tmux server of its own (`-L <unique name>`, no config file) running one 200x50 window.
/// The server is killed when this is dropped, on a panic too.
struct Terminal {
    socket: String,
    /// The environment of every tmux client; the first one starts the server, whose
    /// environment the window's command inherits.
    env: Vec<(&'static str, OsString)>,
    /// Holds the server's socket (`TMUX_TMPDIR`), so none is left in /tmp, and the window's
    /// `HOME`, empty, so no user config (tmux, git, shell) leaks in.
    _dir: tempfile::TempDir,
}

impl Terminal {
    /// Runs `berth ARGS; echo EXIT=$?` in a new tmux window whose current folder is `cwd`,
    /// with `BERTH_HOME` pointing at `home`.
    fn start(home: &Home, cwd: &Path, args: &[&str]) -> Terminal {
        require_tmux();
        static SERVERS: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let socket = format!(
            "berth-test-{}-{}-{nanos}",
            std::process::id(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        );
        let dir = tempfile::tempdir().unwrap();
        let user_home = dir.path().join("home");
        std::fs::create_dir(&user_home).unwrap();
        let env = vec![
            ("PATH", std::env::var_os("PATH").unwrap_or_default()),
            ("HOME", user_home.into()),
            ("TMUX_TMPDIR", dir.path().into()),
            ("TERM", "xterm-256color".into()),
            ("BERTH_HOME", home.path().into()),
        ];
        // The guard exists before the server does, so a failure from here on still kills it.
        let term = Terminal {
            socket,
            env,
            _dir: dir,
        };
        let mut line = sh_quote(env!("CARGO_BIN_EXE_berth"));
        for arg in args {
            line.push(' ');
            line.push_str(&sh_quote(arg));
        }
        // The window stays open after the command, so its last screen can still be read.
        line.push_str("; echo EXIT=$?; sleep 600");
        let mut cmd = term.tmux();
        cmd.args([
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            "200",
            "-y",
            "50",
            "-c",
        ])
        .arg(cwd)
        .arg(&line)
        .current_dir(cwd);
        term.check(cmd, "new-session");
        term
    }

    /// A tmux client of this server, with the fixed environment.
    fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(["-L", &self.socket, "-f", "/dev/null"]);
        cmd
    }

    fn check(&self, mut cmd: Command, what: &str) -> String {
        let out = cmd.output().expect("cannot run tmux");
        assert!(
            out.status.success(),
            "tmux {what} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `keys` (tmux key names, e.g. `y`, `Enter`).
    fn send_keys(&self, keys: &[&str]) {
        let mut cmd = self.tmux();
        cmd.args(["send-keys", "-t", SESSION]).args(keys);
        self.check(cmd, "send-keys");
    }

    /// The visible screen, wrapped lines joined.
    fn screen(&self) -> String {
        let mut cmd = self.tmux();
        cmd.args(["capture-pane", "-p", "-J", "-t", SESSION]);
        self.check(cmd, "capture-pane")
    }

    /// Polls the screen until `done` holds, for at most `TIMEOUT`; returns that screen.
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                started.elapsed() < TIMEOUT,
                "waited {TIMEOUT:?} for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the command to finish; returns its exit code and the last screen.
    fn wait_exit(&self) -> (i32, String) {
        let screen = self.wait_for("the command to finish (EXIT=)", |s| {
            s.lines().any(|l| l.starts_with("EXIT="))
        });
        let code = screen
            .lines()
            .find_map(|l| l.strip_prefix("EXIT="))
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or_else(|| panic!("no exit code on the screen:\n{screen}"));
        (code, screen)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self
            .tmux()
            .arg("kill-server")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Fails, with a message that says what to do, when tmux is not installed.
fn require_tmux() {
    match Command::new("tmux").arg("-V").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "`tmux -V` failed: {}; the terminal tests need a working tmux",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "tmux is required for the terminal tests and is not on PATH ({e}); \
             install it (apt-get install tmux) or run ./test.sh, which does"
        ),
    }
}

/// `s` as one single-quoted sh word.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Whether `screen` has `word` as a whole word, ignoring case.
fn has_word(screen: &str, word: &str) -> bool {
    screen
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w == word)
}

/// A git workspace `old-one` made from `repo`, idle enough for `gc --max-age 0`; returns its
/// worktree folder.
fn old_workspace(home: &Home, repo: &Repo) -> PathBuf {
    let id = ok_in(home, &repo.root, &["workspace", "create", "old-one"]);
    assert!(!id.trim().is_empty(), "workspace create printed no id");
    let worktree = PathBuf::from(home.ok(&["workspace", "path", "old-one"]).trim());
    assert!(worktree.join("README.md").is_file(), "{worktree:?}");
    worktree
}

/// Starts `berth workspace gc --max-age 0` in a terminal in `repo` and waits for its question.
fn gc_asking(home: &Home, repo: &Repo) -> Terminal {
    let term = Terminal::start(home, &repo.root, &["workspace", "gc", "--max-age", "0"]);
    term.wait_for("the question `Delete 1 workspace(s)`", |s| {
        s.contains("Delete 1 workspace(s)")
    });
    term
}

#[test]
fn gc_keeps_a_worktree_that_got_uncommitted_work_while_asking() {
    let home = Home::new();
    let repo = Repo::new();
    let worktree = old_workspace(&home, &repo);
    let term = gc_asking(&home, &repo);

    // An agent writes into the worktree while the question is on the screen.
    std::fs::write(worktree.join("agent-work.txt"), "the agent's work\n").unwrap();
    term.send_keys(&["y", "Enter"]);
    let (code, screen) = term.wait_exit();

    assert_eq!(
        std::fs::read_to_string(worktree.join("agent-work.txt")).ok(),
        Some("the agent's work\n".to_owned()),
        "the new file was lost (exit {code}); the screen:\n{screen}"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("README.md")).unwrap(),
        "hello\n"
    );
    assert_kept(&home, &screen, code, "uncommitted changes", |s| {
        s.contains("uncommitted")
    });
}

#[test]
fn gc_keeps_a_branch_that_got_a_commit_while_asking() {
    let home = Home::new();
    let repo = Repo::new();
    let worktree = old_workspace(&home, &repo);
    let shown = home.json(&["workspace", "show", "old-one", "--json"]);
    let branch = shown["git"]["branch"]
        .as_str()
        .unwrap_or_else(|| panic!("no git branch in {shown}"))
        .to_owned();
    let term = gc_asking(&home, &repo);

    // An agent commits on the workspace's branch while the question is on the screen.
    git(
        &worktree,
        &["commit", "--quiet", "--allow-empty", "-m", "more"],
    );
    let head = git(&worktree, &["rev-parse", "HEAD"]).trim().to_owned();
    term.send_keys(&["y", "Enter"]);
    let (code, screen) = term.wait_exit();

    assert!(
        worktree.join("README.md").is_file(),
        "the worktree was removed (exit {code}); the screen:\n{screen}"
    );
    let tip = git(
        &repo.root,
        &["branch", "--list", &branch, "--format=%(objectname)"],
    );
    assert_eq!(
        tip.trim(),
        head,
        "branch {branch} lost its commit (exit {code}); the screen:\n{screen}"
    );
    // "commit", "commits" or "commit(s)"; "uncommitted" does not count.
    assert_kept(&home, &screen, code, "a commit", |s| {
        s.split(|c: char| !c.is_alphanumeric())
            .any(|w| w.starts_with("commit"))
    });
}

/// The workspace's record is still there, and the screen says it was kept and why (`why`
/// is given the screen in lower case).
fn assert_kept(home: &Home, screen: &str, code: i32, reason: &str, why: impl Fn(&str) -> bool) {
    let r = home.run(&["workspace", "show", "old-one"]);
    assert_eq!(
        r.code, 0,
        "the record is gone: {}; the screen:\n{screen}",
        r.stderr
    );
    assert!(
        has_word(screen, "kept"),
        "the screen does not say the workspace was kept (exit {code}):\n{screen}"
    );
    assert!(
        why(&screen.to_lowercase()),
        "the screen does not say why ({reason}) (exit {code}):\n{screen}"
    );
}
