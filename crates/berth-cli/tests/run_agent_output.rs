//! What berth reads from an ACP agent is bounded: a line past `[run] max_line_mib` fails the
//! agent, naming the limit, a line of too many JSON values too, and berth's own memory stays
//! small whatever the agent writes, a line at the limit included. The agent is a real process
//! (a Python script speaking ACP over stdio); berth's memory is what the kernel counts: its
//! resident set before the line (`VmHWM`), and its peak over its whole life (`wait4`'s
//! `ru_maxrss`, which also counts its children: the agent and git, far smaller).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use berth_testkit::provider_server::ProviderServer;
use support::Home;
use support::runs::{berth_run, project, until};

/// An ACP agent that, prompted, touches `ready`, waits for `go`, then writes one line of
/// `SIZE` bytes (its newline not counted) and ends its turn. `text`: an answer's chunk of
/// `a`s; `values`: a tool call whose input is an array of zeros. It writes the line a MiB at
/// a time, so it never holds it.
const BIG_LINE_AGENT: &str = r#"
import json, os, sys, time
size, kind = int(sys.argv[1]), sys.argv[2]
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "big-1"}})
    elif method == "session/prompt":
        open("ready", "w").close()
        while not os.path.exists("go"):
            time.sleep(0.01)
        update = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"big-1","update":'
        if kind == "text":
            head = update + '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
            tail, unit = '"}}}}', "a"
        else:
            head = update + '{"sessionUpdate":"tool_call","toolCallId":"t1","title":"x","rawInput":['
            tail, unit = '0]}}}', "0,"
        fill = size - len(head) - len(tail)
        block = unit * ((1 << 20) // len(unit))
        sys.stdout.write(head)
        while fill >= len(block):
            sys.stdout.write(block)
            fill -= len(block)
        sys.stdout.write(unit * (fill // len(unit)) + " " * (fill % len(unit)) + tail + "\n")
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
"#;

/// The bytes of the line's text before its `a`s: what [`BIG_LINE_AGENT`] writes as `head`.
const TEXT_HEAD: usize = 154;

/// How one `berth run` of [`BIG_LINE_AGENT`] went.
struct Ran {
    code: i32,
    /// berth's resident set just before the agent wrote its line, in KiB.
    before_kib: u64,
    /// berth's peak resident set over its life, in KiB.
    peak_kib: u64,
    /// The run's record (`run show --json`).
    shown: serde_json::Value,
}

/// Runs [`BIG_LINE_AGENT`] writing one line of `size` bytes of `kind`, with `config` as
/// berth's config.
fn run_big_line(config: &str, size: usize, kind: &str) -> (Home, Ran) {
    let home = Home::new();
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // In the repository, so in the agent's worktree: the sandbox hides the rest of /tmp.
    berth_testkit::commit(&root, "big_line_agent.py", BIG_LINE_AGENT);
    let agent = format!("python3 big_line_agent.py {size} {kind}");
    let mut cmd = berth_run(&home, &server, &root, &["Say it", "--agent-cmd", &agent]);
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let worktree = until("the agent to be ready", Duration::from_secs(60), || {
        ready_worktree(home.path())
    });
    let before_kib = high_water_kib(pid);
    std::fs::write(worktree.join("go"), "").unwrap();
    let (code, peak_kib) = wait_with_peak(pid);
    drop(child);
    let id = home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = home.json(&["run", "show", &id, "--json"]);
    let ran = Ran {
        code,
        before_kib,
        peak_kib,
        shown,
    };
    (home, ran)
}

/// The worktree whose agent touched `ready`, once one did.
fn ready_worktree(home: &Path) -> Option<PathBuf> {
    std::fs::read_dir(home.join("workspaces"))
        .ok()?
        .flatten()
        .map(|e| e.path().join("worktree"))
        .find(|worktree| worktree.join("ready").exists())
}

/// The process's `VmHWM` (the peak of its resident set so far), in KiB.
fn high_water_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits for the child `pid`; its exit code, and its peak resident set over its life in KiB
/// (its children's included, which are smaller here).
fn wait_with_peak(pid: u32) -> (i32, u64) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct wait4 fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is this process's own unreaped child; both pointers are to locals that
    // outlive the call.
    let waited = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(
        waited,
        pid as libc::pid_t,
        "{}",
        std::io::Error::last_os_error()
    );
    assert!(libc::WIFEXITED(status), "berth did not exit: {status}");
    (libc::WEXITSTATUS(status), usage.ru_maxrss as u64)
}

/// The failure of the run's only agent.
fn failure(ran: &Ran) -> String {
    ran.shown["agents"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The bytes of the answer's text (runs of `a`, as the transcript keeps it in pieces).
fn answer_bytes(transcript: &[u8]) -> usize {
    transcript
        .split(|b| *b != b'a')
        .filter(|run| run.len() >= 64)
        .map(<[u8]>::len)
        .sum()
}

/// The line's text: [`BIG_LINE_AGENT`]'s `a`s in a line of `line` bytes.
fn text_of(line: usize) -> usize {
    line - TEXT_HEAD - r#""}}}}"#.len()
}

/// The session transcript of the run's only agent.
fn transcript(home: &Home, ran: &Ran) -> Vec<u8> {
    let session = ran.shown["agents"][0]["session"].as_str().unwrap();
    let workspace = ran.shown["agents"][0]["workspace"].as_str().unwrap();
    let file = home
        .workspace_dir(workspace)
        .join("sessions")
        .join(session)
        .join("session.md");
    std::fs::read(&file).unwrap()
}

const MIB: usize = 1 << 20;

#[test]
fn a_line_past_max_line_mib_fails_the_agent_and_berth_does_not_hold_it() {
    let config = "[run]\nmax_line_mib = 8\n";
    // Just under the limit: read, parsed and kept, berth growing by a few times the line.
    let line = 8 * MIB - 100;
    let (home, ran) = run_big_line(config, line, "text");
    assert_eq!(ran.code, 0, "{:#}", ran.shown);
    assert_eq!(
        answer_bytes(&transcript(&home, &ran)),
        text_of(line),
        "the answer, whole"
    );
    let grew = ran.peak_kib.saturating_sub(ran.before_kib);
    assert!(
        grew < 4 * 8 * 1024,
        "berth grew {grew} KiB for a line of 8 MiB"
    );

    // Twenty-five times the limit: nothing of it past the limit is read.
    let (_home, ran) = run_big_line(config, 200 * MIB, "text");
    assert_eq!(ran.code, 1, "{:#}", ran.shown);
    let why = failure(&ran);
    assert!(
        why.contains("a line longer than 8 MiB, the limit of [run] max_line_mib"),
        "{why}"
    );
    let grew = ran.peak_kib.saturating_sub(ran.before_kib);
    assert!(
        grew < 2 * 8 * 1024,
        "berth grew {grew} KiB for a line it refused"
    );
}

#[test]
fn a_line_of_too_many_values_fails_the_agent_before_it_is_parsed() {
    // Under the limit in bytes, but three million values, each far bigger parsed than read.
    let (_home, ran) = run_big_line("[run]\nmax_line_mib = 8\n", 6 * MIB, "values");
    assert_eq!(ran.code, 1, "{:#}", ran.shown);
    let why = failure(&ran);
    assert!(why.contains("more than 65536 JSON values"), "{why}");
    let grew = ran.peak_kib.saturating_sub(ran.before_kib);
    assert!(
        grew < 2 * 8 * 1024,
        "berth grew {grew} KiB for a line it refused"
    );
}

#[test]
fn a_line_at_the_default_limit_keeps_berth_under_300_mb() {
    // The default max_line_mib, 64, and a line just under it.
    let line = 64 * MIB - 1024;
    let (home, ran) = run_big_line("", line, "text");
    assert_eq!(ran.code, 0, "{:#}", ran.shown);
    assert_eq!(
        answer_bytes(&transcript(&home, &ran)),
        text_of(line),
        "the answer, whole"
    );
    let peak_mb = ran.peak_kib * 1024 / 1_000_000;
    assert!(peak_mb < 300, "berth's peak was {peak_mb} MB");
}
