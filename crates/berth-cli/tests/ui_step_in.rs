//! Stepping into an agent's work from the dashboard, in a real terminal (tmux): `o` opens the
//! person's `$SHELL` in the selected agent's worktree (and in a workspace's folder on tab 2),
//! with the keys typed meanwhile going to it and not to the dashboard, which comes back when
//! it exits; `e` opens `$EDITOR` on the file chosen from the agent's diff; `berth run attach`
//! opens on an agent's live view, where `i` tells it more and `y`/`a`/`n` answer only a
//! question that shows. The real binary, a real repository, the provider stand-in; the shell
//! and the editor are scripts that write down where they ran and what they were given.
//!
//! tmux is required: without it these tests fail (test.sh installs it), they never skip
//! (`support/terminal.rs`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::run;
use support::Home;
use support::runs::{berth_run, project, until, write_call};
use support::terminal::Terminal;

/// An executable `sh` script at `dir/name`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The lines of `path` once it holds `n` of them.
fn lines_of(path: &Path, n: usize) -> Vec<String> {
    until(
        &format!("{n} line(s) in {}", path.display()),
        Duration::from_secs(30),
        || {
            let text = std::fs::read_to_string(path).ok()?;
            let lines: Vec<String> = text.lines().map(str::to_owned).collect();
            (lines.len() >= n).then_some(lines)
        },
    )
}

/// A finished run whose agents each write the files named, with berth's `write_file`; its
/// id and the worktree of each agent.
fn finished_run(
    home: &Home,
    root: &Path,
    task: &str,
    agents: &[&[&str]],
) -> (String, Vec<PathBuf>) {
    let server = ProviderServer::start_in_background();
    for files in agents {
        let mut turn = Turn::new();
        for (i, file) in files.iter().enumerate() {
            let args = serde_json::json!({"path": file, "content": format!("{file}\n")});
            turn = turn.tool_call(&format!("w{i}"), "write_file", [args.to_string()]);
        }
        server.push(Reply::anthropic(&turn));
    }
    for _ in agents {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let count = agents.len().to_string();
    let r = run(berth_run(
        home,
        &server,
        root,
        &[task, "--agents", &count, "--allow", "write_file"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let shown = &home.json(&["run", "list", "--json"])[0];
    let id = shown["id"].as_str().unwrap().to_owned();
    let record = home.json(&["run", "show", &id, "--json"]);
    let worktrees = record["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| PathBuf::from(a["worktree"].as_str().unwrap()))
        .collect();
    (id, worktrees)
}

/// The environment that points berth's agent at the stand-in, for what the dashboard starts.
fn stand_in_env(server: &ProviderServer) -> Vec<(&'static str, String)> {
    vec![
        ("BERTH_PROVIDER", "claude".to_owned()),
        ("BERTH_PROVIDERS__CLAUDE__BASE_URL", server.url().to_owned()),
        ("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model".to_owned()),
        ("ANTHROPIC_API_KEY", "test-key".to_owned()),
    ]
}

#[test]
fn o_opens_the_persons_shell_in_the_worktree_and_the_dashboard_comes_back() {
    let home = Home::new();
    let (tmp, root) = project();
    let (_, worktrees) = finished_run(&home, &root, "Write one.txt", &[&["one.txt"]]);
    home.ok(&["workspace", "create", "other", "--plain"]);
    let other = PathBuf::from(home.ok(&["workspace", "path", "other"]).trim());
    // The shell: where it was started, then a line read from the terminal (proof that the
    // keys typed go to it: a dashboard reading them, or raw mode left on, would keep it
    // waiting), then it exits.
    let out = tmp.path().join("shell.out");
    let shell = script(
        tmp.path(),
        "shell.sh",
        "pwd -P >> \"$OUT\"\nIFS= read -r line\nprintf '%s\\n' \"$line\" >> \"$OUT\"\n",
    );
    // SHELL is set for berth alone: tmux would start the window's own command with it.
    let term = Terminal::bash_with(&home, &root, &[("OUT", out.to_str().unwrap())]);
    term.type_text(&format!("SHELL='{}' berth ui", shell.display()));
    term.send_keys(&["Enter"]);
    term.wait_for("the run listed", |s| s.contains("Write one.txt"));

    // A run of one agent: `o` on it opens the shell in its worktree, saying what it holds.
    term.send_keys(&["o"]);
    let opened = term.wait_for("the shell's opening line", |s| {
        s.contains("holds an agent's work")
    });
    assert!(opened.contains("direnv"), "{opened}");
    assert!(
        !opened.contains("1 Runs"),
        "the dashboard stepped aside:\n{opened}"
    );
    assert_eq!(
        lines_of(&out, 1),
        [worktrees[0].canonicalize().unwrap().display().to_string()]
    );
    term.type_text("typed into the shell");
    term.send_keys(&["Enter"]);
    assert_eq!(lines_of(&out, 2)[1], "typed into the shell");
    let back = term.wait_for("the dashboard again", |s| {
        s.contains("1 Runs") && s.contains("Write one.txt") && s.contains("back from the shell")
    });
    assert!(back.contains("agent 1's worktree"), "{back}");

    // Tab 2: the workspace chosen with the filter, its folder.
    term.send_keys(&["2"]);
    term.wait_for("the workspaces", |s| s.contains("other"));
    term.send_keys(&["/"]);
    term.type_text("other");
    term.send_keys(&["Enter"]);
    term.wait_for("the filter", |s| s.contains("/other"));
    term.send_keys(&["o"]);
    term.wait_for("the opening line", |s| {
        s.contains("may hold an agent's work")
    });
    assert_eq!(
        lines_of(&out, 3)[2],
        other.canonicalize().unwrap().display().to_string()
    );
    term.type_text("again");
    term.send_keys(&["Enter"]);
    assert_eq!(lines_of(&out, 4)[3], "again");
    term.wait_for("the dashboard again", |s| {
        s.contains("Workspaces (1)") && s.contains("back from the shell in workspace")
    });

    // The dashboard still answers its keys, and quits.
    term.send_keys(&["q"]);
    term.wait_for("the dashboard gone", |s| !s.contains("1 Runs"));
    term.type_text("echo EXIT=$?");
    term.send_keys(&["Enter"]);
    let (code, _) = term.wait_exit();
    assert_eq!(code, 0);
}

#[test]
fn e_opens_the_editor_on_the_file_chosen_from_the_diff() {
    let home = Home::new();
    let (tmp, root) = project();
    let (_, worktrees) = finished_run(&home, &root, "Write two files", &[&["a.txt", "b.txt"]]);
    let out = tmp.path().join("editor.out");
    let editor = script(
        tmp.path(),
        "editor.sh",
        "printf '%s\\n' \"$@\" >> \"$OUT\"\n",
    );
    let term = Terminal::start_with(
        &home,
        &root,
        &["ui"],
        &[
            ("EDITOR", editor.to_str().unwrap()),
            ("OUT", out.to_str().unwrap()),
        ],
    );
    term.wait_for("the run listed", |s| s.contains("Write two files"));
    // `e` reads the diff when it is not shown yet, and offers its files.
    term.send_keys(&["e"]);
    let chooser = term.wait_for("the chooser", |s| {
        s.contains("Edit a file of its work") && s.contains("b.txt")
    });
    assert!(chooser.contains("▸ a.txt"), "{chooser}");
    term.send_keys(&["j"]);
    term.wait_for("b.txt chosen", |s| s.contains("▸ b.txt"));
    term.send_keys(&["Enter"]);
    let worktree = worktrees[0].canonicalize().unwrap();
    assert_eq!(
        lines_of(&out, 1),
        [worktree.join("b.txt").display().to_string()]
    );
    term.wait_for("the dashboard again, on the diff", |s| {
        s.contains("back from the editor") && s.contains("+++ b/b.txt")
    });

    // A file the agent made a link out of the worktree is not opened.
    std::fs::remove_file(worktree.join("a.txt")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("editor.sh"), worktree.join("a.txt")).unwrap();
    term.send_keys(&["e"]);
    term.wait_for("the chooser", |s| s.contains("▸ a.txt"));
    term.send_keys(&["Enter"]);
    let refused = term.wait_for("the refusal", |s| s.contains("leads out of"));
    assert!(refused.contains("berth does not open it"), "{refused}");
    assert_eq!(lines_of(&out, 1).len(), 1, "the editor did not run");

    term.send_keys(&["q"]);
    let (code, _) = term.wait_exit();
    assert_eq!(code, 0);
}

#[test]
fn run_attach_opens_the_agents_live_view_and_i_tells_it() {
    let home = Home::new();
    let (_tmp, root) = project();
    let (id, _) = finished_run(&home, &root, "Write the notes", &[&["a.txt"], &["b.txt"]]);

    // Not on a terminal, or an agent the run does not have: said, before any screen.
    let r = home.run(&["run", "attach", &id, "--agent", "3"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--agent takes 1 to 2"), "{}", r.stderr);
    let r = home.run(&["run", "attach", &id]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("needs a terminal"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("berth run logs {id} -f")),
        "{}",
        r.stderr
    );
    let help = home.ok(&["run", "attach", "--help"]);
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("on an agent's live view"), "{help}");
    assert!(
        words.contains("`i` (or `t`) opens a line told to the agent"),
        "{help}"
    );

    let server = ProviderServer::start_in_background();
    server.push(Reply::anthropic(
        &Turn::new().text(["Handled the empty case too."]),
    ));
    let env = stand_in_env(&server);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let term = Terminal::start_with(
        &home,
        &root,
        &["run", "attach", &id[..8], "--agent", "2"],
        &env,
    );
    term.wait_for("agent 2's live view", |s| {
        s.contains("Agent 2 (berth) · transcript") && s.contains("■ done")
    });

    // `i`: a line, told to agent 2 on Enter, which answers in its transcript.
    term.send_keys(&["i"]);
    term.wait_for("the line", |s| s.contains("Tell agent 2 of run"));
    term.type_text("also handle the empty case");
    term.send_keys(&["Enter"]);
    let told = term.wait_for("the told text and the answer", |s| {
        s.contains("told: also handle the empty case") && s.contains("Handled the empty case too.")
    });
    assert!(told.contains("Agent 2 (berth)"), "{told}");
    let asked = server.requests();
    assert!(
        asked
            .last()
            .is_some_and(|r| r.body.to_string().contains("also handle the empty case")),
        "the model was told"
    );
    term.send_keys(&["q"]);
    let (code, _) = term.wait_exit();
    assert_eq!(code, 0);
}

#[test]
fn run_attach_answers_a_question_only_while_it_shows() {
    let home = Home::new();
    let (_tmp, root) = project();
    // The agent asks to write, six seconds after the run starts: time to press keys first.
    let server = ProviderServer::start_in_background();
    server.push(Reply::anthropic(&write_call("asked for\n")).delay_head(Duration::from_secs(6)));
    server.push(Reply::anthropic(&Turn::new().text(["Not written, then."])));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Write asked.txt", "--ask", "--detach"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let id = r.stdout.trim().to_owned();

    let term = Terminal::start(&home, &root, &["run", "attach", &id]);
    let live = term.wait_for("its one agent's live view", |s| {
        s.contains("Agent 1 (berth) · transcript")
    });
    // No question yet: y, a and n do nothing.
    assert!(!live.contains("An agent waits for you"), "{live}");
    term.send_keys(&["y", "a", "n"]);
    term.wait_for("the question", |s| {
        s.contains("An agent waits for you") && s.contains("may it write_file?")
    });
    assert_eq!(
        home.json(&["run", "show", &id, "--json"])["state"],
        "running",
        "nothing was answered before the question showed"
    );
    term.send_keys(&["n"]);
    let record = until("the run to end", Duration::from_secs(30), || {
        let run = home.json(&["run", "show", &id, "--json"]);
        (run["state"] == "ended").then_some(run)
    });
    let worktree = PathBuf::from(record["agents"][0]["worktree"].as_str().unwrap());
    assert!(
        !worktree.join("out.txt").exists(),
        "denied: nothing written"
    );
    let logs = home.ok(&["run", "logs", &id]);
    assert!(logs.contains("[1] answered: deny"), "{logs}");
    term.send_keys(&["q"]);
    let (code, _) = term.wait_exit();
    assert_eq!(code, 0);
}
