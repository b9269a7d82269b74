//! `berth` in a real terminal: a tmux server of its own, driven with send-keys and read with
//! capture-pane, for the tests of what a person at a terminal sees (`gc_terminal.rs`,
//! `chat_terminal.rs`).
//!
//! tmux is required: without it these tests fail (test.sh installs it), they never skip. Every
//! wait polls the screen up to a generous deadline, never a fixed sleep, so a loaded machine
//! makes them slower, not flaky.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::Home;

/// How long any one thing on the screen may take to appear.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The one tmux session of a [`Terminal`].
const SESSION: &str = "berth";

/// Lines of scrollback read with the visible screen.
const SCROLLBACK: &str = "-2000";

/// A tmux server of its own (`-L <unique name>`, no config file) running one 200x50 window.
/// The server is killed when this is dropped, on a panic too.
pub struct Terminal {
    socket: String,
    /// The environment of every tmux client; the first one starts the server, whose
    /// environment the window's command inherits.
    env: Vec<(String, OsString)>,
    /// Holds the server's socket (`TMUX_TMPDIR`), so none is left in /tmp, and the window's
    /// `HOME`, empty, so no user config (tmux, git, shell) leaks in.
    _dir: tempfile::TempDir,
}

impl Terminal {
    /// Runs `berth ARGS; echo EXIT=$?` in a new tmux window whose current folder is `cwd`,
    /// with `BERTH_HOME` pointing at `home`.
    pub fn start(home: &Home, cwd: &Path, args: &[&str]) -> Terminal {
        Terminal::start_with(home, cwd, args, &[])
    }

    /// [`Terminal::start`] with more environment variables for berth.
    pub fn start_with(
        home: &Home,
        cwd: &Path,
        args: &[&str],
        extra_env: &[(&str, &str)],
    ) -> Terminal {
        // berth shares its process group with this sh (sh -c runs no job control), so Ctrl-C
        // reaches both: the trap keeps the shell alive to print berth's exit status, and, being
        // a trap rather than an ignore, leaves berth's own SIGINT at its default.
        let mut line = "trap true INT; ".to_owned();
        line.push_str(&sh_quote(env!("CARGO_BIN_EXE_berth")));
        for arg in args {
            line.push(' ');
            line.push_str(&sh_quote(arg));
        }
        // The window stays open after the command, so its last screen can still be read.
        line.push_str("; echo EXIT=$?; sleep 600");
        Terminal::start_line(home, cwd, &line, extra_env)
    }

    /// An interactive bash (no rc files) with `berth` on its `PATH`, for what a person types.
    pub fn bash(home: &Home, cwd: &Path) -> Terminal {
        Terminal::bash_with(home, cwd, &[])
    }

    /// [`Terminal::bash`] with more environment variables.
    pub fn bash_with(home: &Home, cwd: &Path, extra_env: &[(&str, &str)]) -> Terminal {
        let bin = Path::new(env!("CARGO_BIN_EXE_berth")).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Terminal::start_line(
            home,
            cwd,
            "exec bash --norc --noprofile -i",
            &[&[("PATH", path.as_str()), ("PS1", "$ ")], extra_env].concat(),
        )
    }

    /// Copies everything the window shows from now on, every byte as written (a progress bar
    /// redrawn and cleared too), to the end of `log`.
    pub fn log_output(&self, log: &Path) {
        let mut cmd = self.tmux();
        cmd.args(["pipe-pane", "-o", "-t", SESSION])
            .arg(format!("cat >> {}", sh_quote(log.to_str().unwrap())));
        self.check(cmd, "pipe-pane");
    }

    fn start_line(home: &Home, cwd: &Path, line: &str, extra_env: &[(&str, &str)]) -> Terminal {
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
        let mut env: Vec<(String, OsString)> = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            ("HOME".into(), user_home.into()),
            ("TMUX_TMPDIR".into(), dir.path().into()),
            ("TERM".into(), "xterm-256color".into()),
            ("BERTH_HOME".into(), home.path().into()),
        ];
        env.extend(extra_env.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        // The guard exists before the server does, so a failure from here on still kills it.
        let term = Terminal {
            socket,
            env,
            _dir: dir,
        };
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
        .arg(line)
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

    /// Types `keys` (tmux key names, e.g. `y`, `Enter`, `C-c`).
    pub fn send_keys(&self, keys: &[&str]) {
        let mut cmd = self.tmux();
        cmd.args(["send-keys", "-t", SESSION]).args(keys);
        self.check(cmd, "send-keys");
    }

    /// Types `text` as it is (no key names), without Enter.
    pub fn type_text(&self, text: &str) {
        let mut cmd = self.tmux();
        cmd.args(["send-keys", "-t", SESSION, "-l", text]);
        self.check(cmd, "send-keys -l");
    }

    /// The screen with its scrollback, wrapped lines joined.
    pub fn screen(&self) -> String {
        let mut cmd = self.tmux();
        cmd.args(["capture-pane", "-p", "-J", "-S", SCROLLBACK, "-t", SESSION]);
        self.check(cmd, "capture-pane")
    }

    /// Polls the screen until `done` holds, for at most `TIMEOUT`; returns that screen.
    pub fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
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
    pub fn wait_exit(&self) -> (i32, String) {
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

/// The last line of `screen` that is not blank, without trailing blanks.
pub fn last_line(screen: &str) -> &str {
    screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_end()
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
