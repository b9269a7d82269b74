//! A newcomer's first fifteen minutes, on a fresh home and without an API key: the README's
//! tour line by line, then each thing a person coming from claude-squad or Conductor tries
//! next. What is asserted is what they read: the right workspace chosen from the folder, names
//! rather than UUIDs, messages that name the real problem and the next step, and nothing made
//! by a command that cannot run.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use berth_testkit::{commit, git, run};
use support::Home;
use support::runs::{project, until};
use support::terminal::Terminal;

/// The README's tour, as written there, each line with what it must do here: on a fresh home,
/// in a repository, with no key. A line changed in the README fails this test until it is
/// checked again here.
const TOUR: &[(&str, Expect)] = &[
    (
        r#"berth workspace create feature-auth -d "JWT auth""#,
        Expect::Ok,
    ),
    (r#"cd "$(berth workspace path feature-auth)""#, Expect::Ok),
    ("berth workspace ports feature-auth", Expect::Ok),
    // Nothing runs in the background yet: an empty list.
    ("berth workspace ps feature-auth", Expect::Ok),
    ("berth workspace list", Expect::Ok),
    (
        r##"echo "# Notes" | berth workspace storage write feature-auth context.md"##,
        Expect::Ok,
    ),
    (
        r#"berth session new -w feature-auth --title "plan""#,
        Expect::Ok,
    ),
    ("berth session show SESSION", Expect::Ok),
    // Interactive: run in a real terminal by `chat_without_a_key_says_so_at_a_terminal`.
    ("berth chat", Expect::Elsewhere),
    (
        r#"berth run "Fix the parser" --agents 3 --check "cargo test""#,
        Expect::Status(7),
    ),
    ("berth run list", Expect::Ok),
    // RUN stands for a run's id: refused as no id, saying what one is.
    (
        r#"berth run tell RUN "Also handle the empty case""#,
        Expect::Status(2),
    ),
    // Interactive: run in a real terminal by `ui_step_in.rs`.
    ("berth run attach RUN --agent 2", Expect::Elsewhere),
    // A fresh home keeps its records in files: a queue needs a database, and says how.
    (
        r#"berth run --queue "Fix the parser" --repo URL"#,
        Expect::Status(7),
    ),
    // RUN stands for a run's id, which is hex: refused as no id, saying what one is.
    ("berth run compare RUN", Expect::Status(2)),
    ("berth run pick RUN best", Expect::Status(2)),
    ("berth run restore RUN 3", Expect::Status(2)),
    // Run ids as placeholders, as above: refused as no run, naming what to give.
    ("berth land R1 R2:best R3", Expect::Status(2)),
    // No finished run has anything left: nothing to do, said so.
    ("berth run clean --older-than 7d", Expect::Ok),
    // Interactive: run in a real terminal by `ui_terminal.rs`.
    ("berth ui", Expect::Elsewhere),
    // Servers that wait for a client: tests/mcp and tests/acp drive them with the official
    // SDKs; `serve_pair_*` below starts this one.
    ("berth mcp", Expect::Elsewhere),
    ("berth acp", Expect::Elsewhere),
    ("berth serve --pair phone", Expect::Elsewhere),
    ("berth config show", Expect::Ok),
    // No terminal to confirm on: refused, with the flag that confirms.
    ("berth workspace delete feature-auth", Expect::Status(4)),
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Ok,
    Status(i32),
    Elsewhere,
}

/// The commands of the README's "A short tour" block, comments dropped.
fn readme_tour() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let tour = readme
        .split("## A short tour")
        .nth(1)
        .expect("README has a short tour");
    let block = tour
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the tour is a sh block");
    block
        .lines()
        .map(|l| match l.find("  #") {
            Some(at) => l[..at].trim_end(),
            None => l.trim_end(),
        })
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What one line of the tour did.
struct Step {
    line: String,
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `lines` one after the other in one bash, as a person types them (a `cd` holds for
/// the next line), each one's output kept apart; `berth` on the PATH, on `home`.
fn run_lines(home: &Home, dir: &Path, lines: &[String]) -> Vec<Step> {
    let out = tempfile::tempdir().unwrap();
    let mut script = String::from("set +e\n");
    for (i, line) in lines.iter().enumerate() {
        let at = out.path().join(i.to_string());
        script.push_str(&format!(
            "{{ {line}\n}} >'{o}.out' 2>'{o}.err' </dev/null; echo $? >'{o}.code'\n",
            o = at.display()
        ));
        // The session id, as the person copies it from the screen.
        if line.starts_with("berth session new") {
            script.push_str(&format!("SESSION=$(cat '{}.out')\n", at.display()));
        }
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_berth")).parent().unwrap();
    let mut bash = Command::new("bash");
    bash.arg("-c").arg(script).current_dir(dir).env(
        "PATH",
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    // The environment `Home` gives berth: its home, and no key or config of the machine's.
    for (k, v) in home.cmd(&[]).get_envs() {
        match v {
            Some(v) => bash.env(k, v),
            None => bash.env_remove(k),
        };
    }
    let r = run(bash);
    assert_eq!(r.code, 0, "the tour's shell failed: {}", r.stderr);
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let at = out.path().join(i.to_string());
            let read = |ext: &str| {
                std::fs::read_to_string(format!("{}.{ext}", at.display())).unwrap_or_default()
            };
            Step {
                line: line.clone(),
                code: read("code").trim().parse().unwrap(),
                stdout: read("out"),
                stderr: read("err"),
            }
        })
        .collect()
}

#[test]
fn the_readme_tour_on_a_fresh_home_without_a_key() {
    let readme = readme_tour();
    let listed: Vec<&str> = TOUR.iter().map(|(line, _)| *line).collect();
    assert_eq!(
        readme, listed,
        "the README's tour changed: check each line here again"
    );
    let home = Home::new();
    let (_tmp, repo) = project();
    let runnable: Vec<String> = TOUR
        .iter()
        .filter(|(_, e)| *e != Expect::Elsewhere)
        .map(|(line, _)| line.replace("SESSION", "\"$SESSION\""))
        .collect();
    let steps = run_lines(&home, &repo, &runnable);
    let expected = TOUR.iter().filter(|(_, e)| *e != Expect::Elsewhere);
    for (step, (_, expect)) in steps.iter().zip(expected) {
        let want = match expect {
            Expect::Ok => 0,
            Expect::Status(code) => *code,
            Expect::Elsewhere => unreachable!(),
        };
        assert_eq!(
            step.code, want,
            "`{}`:\nstdout: {}\nstderr: {}",
            step.line, step.stdout, step.stderr
        );
    }
    let step = |prefix: &str| {
        steps
            .iter()
            .find(|s| s.line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no step {prefix}"))
    };

    let ports = step("berth workspace ports");
    assert_eq!(ports.stdout.trim(), "20000-20009");

    // Names first, a short id, and a legend for the GIT column's symbols.
    let list = step("berth workspace list");
    let header = list.stdout.lines().next().unwrap();
    assert!(
        header.starts_with("NAME") && header.contains("GIT"),
        "{}",
        list.stdout
    );
    let row = list.stdout.lines().nth(1).unwrap();
    assert!(row.starts_with("feature-auth"), "{}", list.stdout);
    assert!(row.contains("berth/feature-auth +0 -0 ~0"), "{row}");
    assert!(
        list.stderr
            .contains("GIT: branch  +commits ahead of its base  -commits behind it  ~files with uncommitted changes"),
        "{}",
        list.stderr
    );

    let show = step("berth session show");
    assert!(
        show.stdout.contains("workspace: feature-auth ("),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("title:     plan"), "{}", show.stdout);

    // No key: the run says which variable, and made nothing.
    let ran = step("berth run \"Fix the parser\"");
    assert!(ran.stderr.contains("ANTHROPIC_API_KEY"), "{}", ran.stderr);
    let listed = step("berth run list");
    assert!(listed.stderr.contains("no runs yet"), "{}", listed.stderr);
    let queued = step("berth run --queue");
    assert!(
        queued.stderr.contains("[store] url") && queued.stderr.contains("postgres://"),
        "{}",
        queued.stderr
    );
    let branches = git(&repo, &["branch", "--list"]);
    assert!(!branches.contains("fix-the-parser"), "{branches}");
    let pick = step("berth run pick");
    assert!(
        pick.stderr.contains("invalid run id \"RUN\"") && pick.stderr.contains("`berth run list`"),
        "{}",
        pick.stderr
    );
    let restore = step("berth run restore");
    assert!(
        restore.stderr.contains("invalid run id \"RUN\""),
        "{}",
        restore.stderr
    );
    let clean = step("berth run clean");
    assert!(
        clean.stderr.contains("nothing to clean"),
        "{}",
        clean.stderr
    );

    // Every value the config has, with where it came from.
    let config = step("berth config show");
    for line in [
        "first = 20000  # default",
        "max_tool_iterations = 50  # default",
    ] {
        let squeezed = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            config.stdout.lines().any(|l| squeezed(l) == squeezed(line)),
            "{line} in {}",
            config.stdout
        );
    }

    let delete = step("berth workspace delete");
    assert!(delete.stderr.contains("pass --yes"), "{}", delete.stderr);
    assert!(
        home.json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["name"] == "feature-auth"),
        "a delete not confirmed deletes nothing"
    );
}

#[test]
fn a_fresh_home_lists_nothing_without_a_word_of_its_insides() {
    let home = Home::new();
    for (args, note) in [
        (
            &["workspace", "list"][..],
            "no workspaces yet: `berth workspace create NAME`",
        ),
        (
            &["session", "list"][..],
            "no sessions yet: `berth session new`",
        ),
        (&["run", "list"][..], "no runs yet: `berth run TASK`"),
    ] {
        let r = home.run(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert_eq!(r.stdout, "", "{args:?}: no header without rows");
        // What to do next, and nothing about the index a fresh home has not made yet.
        assert_eq!(
            r.stderr.lines().collect::<Vec<_>>().len(),
            1,
            "{args:?}: {}",
            r.stderr
        );
        assert!(r.stderr.starts_with(note), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn chat_without_a_key_says_so_at_a_terminal_and_makes_nothing() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let term = Terminal::start(&home, dir.path(), &["chat"]);
    let (code, screen) = term.wait_exit();
    assert_eq!(code, 7, "{screen}");
    assert!(screen.contains("ANTHROPIC_API_KEY"), "{screen}");
    assert_eq!(
        home.json(&["workspace", "list", "--json"]),
        serde_json::json!([])
    );
    assert_eq!(
        home.json(&["session", "list", "--json"]),
        serde_json::json!([])
    );
}

/// `berth ARGS` on `home`, run in `dir`.
fn in_dir(home: &Home, dir: &Path, args: &[&str]) -> berth_testkit::Run {
    let mut cmd = home.cmd(args);
    cmd.current_dir(dir);
    run(cmd)
}

#[test]
fn the_folder_chooses_the_workspace_and_dot_names_it() {
    let home = Home::new();
    let (_tmp, repo) = project();
    let in_repo = |args: &[&str]| in_dir(&home, &repo, args);
    assert_eq!(in_repo(&["workspace", "create", "auth"]).code, 0);
    assert_eq!(in_repo(&["workspace", "create", "other"]).code, 0);
    let worktree = PathBuf::from(home.ok(&["workspace", "path", "auth"]).trim());
    let nested = worktree.join("src");
    std::fs::create_dir(&nested).unwrap();
    let here = |args: &[&str]| in_dir(&home, &nested, args);

    // Sessions: made in, and listed from, the workspace this folder is in.
    let made = here(&["session", "new", "--title", "from inside", "--json"]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let made: serde_json::Value = serde_json::from_str(&made.stdout).unwrap();
    assert_eq!(made["workspace_name"], "auth");
    home.ok(&["session", "new", "-w", "other", "--title", "elsewhere"]);
    let listed = here(&["session", "list"]);
    assert!(
        listed.stdout.contains("from inside") && !listed.stdout.contains("elsewhere"),
        "{}",
        listed.stdout
    );
    // Its id short, and enough to name it.
    let short = listed
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert_eq!(short.len(), 8, "{}", listed.stdout);
    let shown = home.json(&["session", "show", short, "--json"]);
    assert_eq!(shown["session"]["id"], made["id"]);
    let everything = here(&["session", "list", "--all"]);
    assert!(
        everything.stdout.contains("elsewhere"),
        "{}",
        everything.stdout
    );
    // The WORKSPACE column names it; no workspace UUID in the list.
    let auth_id = home.json(&["workspace", "show", "auth", "--json"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        everything.stdout.contains("auth ") && !everything.stdout.contains(&auth_id),
        "{}",
        everything.stdout
    );

    // Storage with `.`, show, ports, diff and merge with nothing named.
    let wrote = here(&["workspace", "storage", "write", ".", "notes.md", "hi"]);
    assert_eq!(wrote.code, 0, "{}", wrote.stderr);
    assert_eq!(
        home.ok(&["workspace", "storage", "read", "auth", "notes.md"]),
        "hi"
    );
    let shown = here(&["workspace", "show", "--json"]);
    let shown: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(shown["name"], "auth");
    commit(&worktree, "feature.txt", "new\n");
    let diff = here(&["workspace", "diff", "--stat"]);
    assert!(diff.stdout.contains("feature.txt"), "{}", diff.stdout);
    let merged = here(&["workspace", "merge"]);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert!(merged.stdout.starts_with("auth ("), "{}", merged.stdout);
    assert!(repo.join("feature.txt").exists());
    // Merging again: nothing to merge, and no claim that the checkout was updated.
    let again = here(&["workspace", "merge"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("nothing to merge"),
        "{}",
        again.stdout
    );
    assert!(
        !again.stdout.contains("updated the checkout"),
        "{}",
        again.stdout
    );

    // Delete is never taken from the folder.
    let delete = here(&["workspace", "delete", "--yes"]);
    assert_eq!(delete.code, 2, "{}", delete.stderr);

    // Outside every worktree: nothing is guessed, and nothing is made.
    let outside = home.run(&["session", "new"]);
    assert_eq!(outside.code, 2, "{}", outside.stderr);
    assert!(
        outside.stderr.contains("in no workspace's worktree")
            && outside.stderr.contains("berth workspace list"),
        "{}",
        outside.stderr
    );
    let dot = home.run(&["workspace", "show", "."]);
    assert_eq!(dot.code, 2, "{}", dot.stderr);
    assert!(
        dot.stderr
            .contains("`.` names the workspace this folder is in"),
        "{}",
        dot.stderr
    );
    assert_eq!(
        home.json(&["session", "list", "--all", "--json"])
            .as_array()
            .unwrap()
            .len(),
        2,
        "no session was made by the refused `session new`"
    );
}

#[test]
fn messages_name_the_real_problem_and_the_next_step() {
    let home = Home::new();
    let (_tmp, repo) = project();
    let in_repo = |args: &[&str]| in_dir(&home, &repo, args);
    assert_eq!(in_repo(&["workspace", "create", "feature-auth"]).code, 0);
    let before = (
        git(&repo, &["branch", "--list"]),
        git(&repo, &["worktree", "list"]),
        home.ok(&["workspace", "list", "--json"]),
    );
    // A taken name is said as a taken name, and makes nothing.
    let taken = in_repo(&["workspace", "create", "feature-auth"]);
    assert_eq!(taken.code, 6, "{}", taken.stderr);
    assert!(
        taken.stderr.contains("a workspace named 'feature-auth'")
            && !taken.stderr.contains("--checkout"),
        "{}",
        taken.stderr
    );
    let after = (
        git(&repo, &["branch", "--list"]),
        git(&repo, &["worktree", "list"]),
        home.ok(&["workspace", "list", "--json"]),
    );
    assert_eq!(before, after);

    // A prefix too short says prefixes need 4 characters.
    let short = home.run(&["session", "show", "e17"]);
    assert_eq!(short.code, 3, "{}", short.stderr);
    assert!(
        short.stderr.contains("4 or more characters"),
        "{}",
        short.stderr
    );

    // Usage lines do not show --home as required when BERTH_HOME is set.
    let usage = home.run(&["session", "show"]);
    assert_eq!(usage.code, 2, "{}", usage.stderr);
    let line = usage
        .stderr
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .unwrap();
    assert!(!line.contains("--home"), "{line}");

    // A folder in storage: the message names -r.
    home.ok(&[
        "workspace",
        "storage",
        "write",
        "feature-auth",
        "dir/a.txt",
        "x",
    ]);
    let rm = home.run(&["workspace", "storage", "rm", "feature-auth", "dir"]);
    assert_eq!(rm.code, 4, "{}", rm.stderr);
    assert!(rm.stderr.contains("`-r`"), "{}", rm.stderr);
    home.ok(&["workspace", "storage", "rm", "feature-auth", "dir", "-r"]);
    // Not for a refusal that is not of a folder: a parent that is a file.
    home.ok(&[
        "workspace",
        "storage",
        "write",
        "feature-auth",
        "file.txt",
        "x",
    ]);
    let under_a_file = home.run(&["workspace", "storage", "rm", "feature-auth", "file.txt/x"]);
    assert_ne!(under_a_file.code, 0);
    assert!(
        !under_a_file.stderr.contains("`-r`"),
        "{}",
        under_a_file.stderr
    );
}

#[test]
fn doctor_on_a_fresh_home_without_a_key_warns_and_passes() {
    let home = Home::new();
    let r = home.run(&["doctor"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let provider = r
        .stdout
        .lines()
        .find(|l| l.contains("provider claude"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(provider.starts_with("warn"), "{provider}");
    assert!(
        provider.contains("`berth chat`") && provider.contains("everything else works"),
        "{provider}"
    );
}

#[test]
fn session_append_moves_updated_at() {
    let home = Home::new();
    home.ok(&["workspace", "create", "w"]);
    let id = home.ok(&["session", "new", "-w", "w"]).trim().to_owned();
    let before = home.json(&["session", "show", &id, "--json"])["session"]["updated_at"].clone();
    std::thread::sleep(Duration::from_millis(20));
    let r = home.run_stdin(&["session", "append", &id], b"hello");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let after = home.json(&["session", "show", &id, "--json"])["session"]["updated_at"].clone();
    let time =
        |v: &serde_json::Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    assert!(time(&after) > time(&before), "{before} then {after}");
}

/// `berth serve --pair NAME ARGS` on a free loopback port until it prints its pairing link
/// (returned with all it printed), then stopped.
fn serve_pair(home: &Home, name: &str, args: &[&str]) -> (i32, String) {
    let mut all = vec!["serve", "--listen", "127.0.0.1:0", "--pair", name];
    all.extend_from_slice(args);
    let mut cmd = home.cmd(&all);
    let log = home
        .path()
        .join(format!("serve-{}.log", std::process::id()));
    let file = std::fs::File::create(&log).unwrap();
    cmd.stdout(Stdio::null()).stderr(file);
    let mut child = cmd.spawn().unwrap();
    let code = until(
        "berth serve to pair or stop",
        Duration::from_secs(30),
        || {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status.code().unwrap_or(-1));
            }
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            said.contains("or open the web page").then_some(0)
        },
    );
    let _ = child.kill();
    let _ = child.wait();
    (code, std::fs::read_to_string(&log).unwrap())
}

#[test]
fn serve_pair_on_loopback_warns_and_pairing_again_rotates_only_when_asked() {
    let home = Home::new();
    let (code, first) = serve_pair(&home, "phone", &[]);
    assert_eq!(code, 0, "{first}");
    assert!(
        first.contains("only this machine reaches") && first.contains("--allow-host"),
        "{first}"
    );
    let tokens = || std::fs::read_to_string(home.path().join("tokens.json")).unwrap();
    let kept = tokens();
    // Again, with no terminal to ask on: refused, the token kept, --rotate named.
    let (code, again) = serve_pair(&home, "phone", &[]);
    assert_eq!(code, 4, "{again}");
    assert!(
        again.contains("paired before") && again.contains("--rotate"),
        "{again}"
    );
    assert_eq!(tokens(), kept);
    // With --rotate: a new token, the old one gone.
    let (code, rotated) = serve_pair(&home, "phone", &["--rotate"]);
    assert_eq!(code, 0, "{rotated}");
    assert_ne!(tokens(), kept);
    let listed = home.json(&["token", "list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
}

#[test]
fn help_leads_to_the_web_page() {
    let home = Home::new();
    let top = home.ok(&["--help"]);
    let serve_line = top
        .lines()
        .find(|l| l.trim_start().starts_with("serve"))
        .unwrap();
    assert!(serve_line.contains("web page"), "{serve_line}");
    let serve = home.ok(&["serve", "--help"]);
    assert!(
        serve.contains("web page") && serve.contains("--pair") && serve.contains("--rotate"),
        "{serve}"
    );
}
