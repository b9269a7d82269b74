//! What an agent wrote never drives a person's terminal: an agent's process (a script run as
//! `--agent cmd:…`, in a real repository, confined as any agent) names a file with escape
//! sequences in it (OSC 52, a screen clear, cursor moves, a C1 CSI, a bidi override), writes
//! them in the file and in its standard error. Every command that shows them (`run compare`,
//! `run show`, `run logs --stderr`, `workspace diff`) is run into a pipe and on a real
//! pseudo-terminal (python3's `pty`): on the terminal each is shown as an escape and no raw
//! byte of them is written; into a pipe the agent's bytes come out as it wrote them.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;
use std::process::Command;

use berth_testkit::provider_server::ProviderServer;
use berth_testkit::{git, run};
use support::Home;
use support::runs::{berth_run, project};

/// Every way to drive a terminal the agent tries: an OSC 52 clipboard write, a screen clear,
/// a cursor move up and a line erase (which hide the line above), a C1 CSI and a bidi
/// override.
const EVIL: &str = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1A\x1b[2K\u{9b}2J\u{202e}";

/// [`EVIL`] as berth shows it in a text.
const EVIL_SHOWN: &str = "\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\x1b[1A\\x1b[2K\\u{9b}2J\\u{202e}";

/// The agent: writes a file whose name and lines carry [`EVIL`], says it on its standard
/// error, and fails (it speaks no ACP). Bytes throughout, whatever the locale.
const AGENT: &str = r#"import sys
EVIL = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1A\x1b[2K\u009b2J\u202e".encode()
with open(b"evil" + EVIL + b"name.txt", "wb") as f:
    f.write(b"hidden line\nshown" + EVIL + b"\n")
sys.stderr.buffer.write(b"oops" + EVIL + b"\n")
sys.stderr.flush()
sys.exit(1)
"#;

/// Copies everything `berth` writes on the pseudo-terminal to this script's standard output.
const ON_A_PTY: &str = r#"import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = bytearray()
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

/// `cmd` (a `berth` command) with its standard output and error on a pseudo-terminal of
/// its own; every byte it wrote there.
fn on_a_terminal(cmd: &Command) -> Vec<u8> {
    let mut pty = Command::new("python3");
    pty.arg("-c")
        .arg(ON_A_PTY)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        pty.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => pty.env(k, v),
            None => pty.env_remove(k),
        };
    }
    let out = pty.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} on a terminal: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out.stdout
}

/// `cmd` into pipes: its standard output, as bytes, and its standard error.
fn into_a_pipe(mut cmd: Command) -> (Vec<u8>, String) {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{cmd:?}: {stderr}");
    (out.stdout, stderr)
}

/// Fails when `out` holds a byte of the agent's that drives a terminal: an ESC (berth's own
/// colours, `ESC[Nm`, taken out first), a BEL, a C1 control or a bidi control.
fn assert_nothing_drives(what: &str, out: &[u8]) {
    let text = String::from_utf8_lossy(out);
    let mut left = text.to_string();
    for sgr in ["\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[36m"] {
        left = left.replace(sgr, "");
    }
    // The terminal's own line ends (its `onlcr`) are `\r\n`.
    let left = left.replace("\r\n", "\n");
    let driving: Vec<char> = left
        .chars()
        .filter(|c| *c != '\n' && *c != '\t')
        .filter(|c| berth_core::shown::drives_the_terminal(*c))
        .collect();
    assert!(
        driving.is_empty(),
        "{what} wrote {driving:?} to the terminal:\n{text}"
    );
}

/// A run whose one agent was [`AGENT`], in a repository holding it; the run's id, its
/// workspace's name and its worktree.
struct Ran {
    home: Home,
    /// Holds the repository.
    _tmp: tempfile::TempDir,
    id: String,
    workspace: String,
    worktree: std::path::PathBuf,
}

fn ran() -> Ran {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    // In the repository, so in the agent's worktree: the sandbox hides the rest of /tmp.
    berth_testkit::commit(&root, "evil_agent.py", AGENT);
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Do it", "--agent", "cmd:python3 evil_agent.py"],
    ));
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.stdout);
    let shown = home.json(&["run", "list", "--json"]);
    let id = shown[0]["id"].as_str().unwrap().to_owned();
    let record = home.json(&["run", "show", &id, "--json"]);
    let agent = &record["agents"][0];
    let workspace = agent["workspace_name"].as_str().unwrap().to_owned();
    let worktree = Path::new(agent["worktree"].as_str().unwrap()).to_owned();
    Ran {
        home,
        _tmp: tmp,
        id,
        workspace,
        worktree,
    }
}

/// The agent's file's name as git itself quotes it (`git status --porcelain`).
fn git_quoted_name(worktree: &Path) -> String {
    let status = git(
        worktree,
        &["status", "--porcelain", "--untracked-files=all"],
    );
    status
        .lines()
        .find_map(|l| l.strip_prefix("?? ").filter(|name| name.contains("evil")))
        .unwrap_or_else(|| panic!("the agent's file in git's status:\n{status}"))
        .to_owned()
}

#[test]
fn compare_and_show_quote_an_agents_file_name_as_git_does_and_show_its_words_escaped() {
    let ran = ran();
    let (home, id) = (&ran.home, &ran.id);
    let quoted = git_quoted_name(&ran.worktree);
    assert!(
        quoted.starts_with("\"evil\\033]52;c;ZXZpbA==\\a\\033[2J"),
        "{quoted}"
    );

    // compare names the file as git does, into a pipe and on a terminal.
    let (compared, stderr) = into_a_pipe(home.cmd(&["run", "compare", id]));
    let compared_text = String::from_utf8_lossy(&compared);
    assert!(compared_text.contains(&quoted), "{compared_text}");
    assert_nothing_drives("run compare", &compared);
    assert_nothing_drives("run compare's notes", stderr.as_bytes());
    let compared = on_a_terminal(&home.cmd(&["run", "compare", id]));
    assert!(String::from_utf8_lossy(&compared).contains(&quoted));
    assert_nothing_drives("run compare", &compared);

    // show quotes the agent's standard error, its escapes shown.
    let (shown, _) = into_a_pipe(home.cmd(&["run", "show", id]));
    let shown_text = String::from_utf8_lossy(&shown);
    assert!(
        shown_text.contains(&format!("oops{EVIL_SHOWN}")),
        "{shown_text}"
    );
    assert_nothing_drives("run show", &shown);
    assert_nothing_drives("run show", &on_a_terminal(&home.cmd(&["run", "show", id])));
}

#[test]
fn run_logs_stderr_gives_a_pipe_the_agents_bytes_and_a_terminal_their_escapes() {
    let ran = ran();
    let (home, id) = (&ran.home, &ran.id);
    // logs --stderr: the exact bytes into a pipe; shown on a terminal.
    let (logs, _) = into_a_pipe(home.cmd(&["run", "logs", id, "--stderr"]));
    assert_eq!(logs, format!("oops{EVIL}\n").as_bytes());
    let logs = on_a_terminal(&home.cmd(&["run", "logs", id, "--stderr"]));
    assert_eq!(
        String::from_utf8_lossy(&logs),
        format!("oops{EVIL_SHOWN}\r\n")
    );
}

#[test]
fn workspace_diff_gives_a_pipe_the_patch_and_a_terminal_every_line_with_escapes_shown() {
    let ran = ran();
    let (home, workspace) = (&ran.home, &ran.workspace);
    let quoted = git_quoted_name(&ran.worktree);
    // diff --stat names the file as git does.
    let (stat, _) = into_a_pipe(home.cmd(&["workspace", "diff", workspace, "--stat"]));
    let stat = String::from_utf8_lossy(&stat).into_owned();
    assert!(stat.contains(&quoted), "{stat}");
    assert_nothing_drives("workspace diff --stat", stat.as_bytes());

    // diff: the exact lines into a pipe (a patch for `git apply`).
    let (patch, _) = into_a_pipe(home.cmd(&["workspace", "diff", workspace]));
    let patch_text = String::from_utf8(patch).unwrap();
    assert!(
        patch_text.contains(&format!("+hidden line\n+shown{EVIL}\n")),
        "{patch_text:?}"
    );
    // On a terminal: every line there to read, the escapes shown, berth's colours kept
    // (none with NO_COLOR).
    let diff = on_a_terminal(&home.cmd(&["workspace", "diff", workspace]));
    let diff_text = String::from_utf8_lossy(&diff);
    assert!(
        diff_text.contains(&format!("\x1b[32m+shown{EVIL_SHOWN}\x1b[0m")),
        "{diff_text:?}"
    );
    assert!(diff_text.contains("\x1b[32m+hidden line\x1b[0m"));
    assert_nothing_drives("workspace diff", &diff);
    let mut plain = home.cmd(&["workspace", "diff", workspace]);
    plain.env("NO_COLOR", "1");
    let plain = on_a_terminal(&plain);
    let plain_text = String::from_utf8_lossy(&plain);
    assert!(!plain.contains(&0x1b), "{plain_text:?}");
    assert!(
        plain_text.contains(&format!("+hidden line\r\n+shown{EVIL_SHOWN}\r\n")),
        "{plain_text:?}"
    );
}

/// A workspace's storage is an agent's to write too (berth's agent keeps its notes there): a
/// name is listed as git quotes it, and a file read on a terminal shows its escapes, into a
/// pipe its bytes.
#[test]
fn storage_lists_names_quoted_and_reads_bytes_into_a_pipe_and_escapes_on_a_terminal() {
    let home = Home::new();
    home.ok(&["workspace", "create", "alpha"]);
    // A bidi override is no control character, so a storage path may hold one.
    let name = "notes\u{202e}txt.md";
    let written = home.run_stdin(
        &["workspace", "storage", "write", "alpha", name],
        format!("kept{EVIL}\n").as_bytes(),
    );
    assert_eq!(written.code, 0, "{}", written.stderr);

    let (listed, _) = into_a_pipe(home.cmd(&["workspace", "storage", "list", "alpha"]));
    let listed_text = String::from_utf8_lossy(&listed);
    assert!(
        listed_text.contains("\"notes\\342\\200\\256txt.md\""),
        "{listed_text}"
    );
    assert_nothing_drives("storage list", &listed);

    let read = ["workspace", "storage", "read", "alpha", name];
    let (bytes, _) = into_a_pipe(home.cmd(&read));
    assert_eq!(bytes, format!("kept{EVIL}\n").as_bytes());
    let shown = on_a_terminal(&home.cmd(&read));
    assert_eq!(
        String::from_utf8_lossy(&shown),
        format!("kept{EVIL_SHOWN}\r\n")
    );
}
