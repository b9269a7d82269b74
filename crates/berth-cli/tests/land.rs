//! `berth land`, the merge queue: runs' winners brought onto `main` in order, each checked on
//! the combined tree, a conflict handed back to the agent that made it in a turn of its own
//! session, an agent that cannot mend its work left with the reason while the queue goes on.
//! The real binary, a real repository and the provider stand-in.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{commit, git, run};
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, transcript};

/// A model turn that writes `content` to `path` with berth's `write_file`.
fn write(path: &str, content: &str) -> Turn {
    let args = serde_json::json!({"path": path, "content": content}).to_string();
    Turn::new().tool_call("w1", "write_file", [args])
}

/// A repository whose `main` holds `f.txt` of two lines.
fn project() -> (tempfile::TempDir, PathBuf) {
    let (tmp, root) = support::runs::project();
    commit(&root, "f.txt", "line one\nline two\n");
    (tmp, root)
}

/// A one-agent run whose agent writes `content` to `path`, checked by `check`; its id.
fn one_run(
    home: &Home,
    server: &ProviderServer,
    root: &Path,
    task: &str,
    path: &str,
    content: &str,
    check: &str,
) -> String {
    server.push(Reply::anthropic(&write(path, content)));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = run(berth_run(
        home,
        server,
        root,
        &[task, "--allow", "write_file", "--check", check, "--json"],
    ));
    assert!(r.code == 0 || r.code == 1, "{}\n{}", r.stderr, r.stdout);
    home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `berth land ARGS` in `root`, with berth's agent on the stand-in.
fn land(home: &Home, server: &ProviderServer, root: &Path, args: &[&str]) -> berth_testkit::Run {
    run(land_cmd(home, server, root, args))
}

fn land_cmd(
    home: &Home,
    server: &ProviderServer,
    root: &Path,
    args: &[&str],
) -> std::process::Command {
    let mut all = vec!["land"];
    all.extend_from_slice(args);
    support::runs::on_stand_in(home, server, root, &all)
}

fn show(home: &Home, id: &str) -> Value {
    home.json(&["run", "show", id, "--json"])
}

fn steps(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn three_runs_land_in_order_and_the_conflict_goes_back_to_its_agent() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // Every check lists what it sees: run on the combined tree, it sees what landed before.
    let check = "ls; grep -c . f.txt";
    let r1 = one_run(
        &home,
        &server,
        &root,
        "Add a file",
        "new.txt",
        "new\n",
        check,
    );
    let r2 = one_run(
        &home,
        &server,
        &root,
        "Change line one",
        "f.txt",
        "line ONE\nline two\n",
        check,
    );
    let r3 = one_run(
        &home,
        &server,
        &root,
        "Change line one again",
        "f.txt",
        "line 1\nline two\n",
        check,
    );
    // A fourth, on the same line, not landed: before the land it conflicts only with the
    // others (no run has landed), after it with main.
    let r4 = one_run(
        &home,
        &server,
        &root,
        "Change line one once more",
        "f.txt",
        "line I\nline two\n",
        check,
    );
    let said = |id: &str| -> Vec<String> {
        home.ok(&["run", "compare", id])
            .lines()
            .filter(|l| l.contains("conflicts with"))
            .map(|l| l.trim().to_owned())
            .collect()
    };
    assert!(
        !said(&r4).iter().any(|l| l.contains("with main")),
        "{:?}",
        said(&r4)
    );
    let main_before = git(&root, &["rev-parse", "main"]).trim().to_owned();

    // Run 3's agent resolves its conflict in a turn of its own.
    server.push(Reply::anthropic(&write("f.txt", "line ONE 1\nline two\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Resolved."])));
    let landed = land(&home, &server, &root, &[&r1, &r2, &r3, "--json"]);
    assert_eq!(landed.code, 0, "{}\n{}", landed.stderr, landed.stdout);
    let steps = steps(&landed.stdout);
    let kinds: Vec<(Option<u64>, String)> = steps
        .iter()
        .map(|s| (s["item"].as_u64(), s["step"].as_str().unwrap().to_owned()))
        .collect();
    // The first lands as it is; the second is merged with the first; the third conflicts,
    // is told, resolves, is checked, and lands.
    for (item, kind) in [
        (0, "up_to_date"),
        (0, "landed"),
        (1, "merged"),
        (1, "landed"),
        (2, "conflict"),
        (2, "told"),
        (2, "resolved"),
        (2, "landed"),
    ] {
        assert!(
            kinds.contains(&(Some(item), kind.to_owned())),
            "no {kind} for item {item}: {kinds:?}"
        );
    }
    let conflict = steps.iter().find(|s| s["step"] == "conflict").unwrap();
    assert_eq!(
        conflict["files"],
        serde_json::json!(["f.txt"]),
        "{conflict:#}"
    );
    // Each check ran on the combined tree: the third's (its told turn's, on its resolution)
    // and the second's saw the first's file.
    let checks: Vec<&Value> = steps.iter().filter(|s| s["step"] == "checked").collect();
    assert_eq!(checks.len(), 3, "{steps:#?}");
    assert!(
        checks.iter().all(|c| c["check"]["passed"] == true),
        "{checks:#?}"
    );
    let land_id = steps[0]["land"].as_str().unwrap();
    let second =
        std::fs::read_to_string(home.path().join(format!("lands/{land_id}/2.check"))).unwrap();
    assert!(second.contains("new.txt"), "{second}");
    let run3_check =
        std::fs::read_to_string(home.path().join(format!("runs/{r3}/agent-1.check"))).unwrap();
    assert!(run3_check.contains("new.txt"), "{run3_check}");

    // All three on main, the resolution as the agent wrote it; the person's checkout clean.
    assert_eq!(git(&root, &["show", "main:new.txt"]), "new\n");
    assert_eq!(
        git(&root, &["show", "main:f.txt"]),
        "line ONE 1\nline two\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("f.txt")).unwrap(),
        "line ONE 1\nline two\n"
    );
    assert_eq!(git(&root, &["status", "--porcelain"]), "");
    let log = git(
        &root,
        &["log", "--format=%B", &format!("{main_before}..main")],
    );
    // The first fast-forwarded (its own commit); the others' merges carry the land's mark,
    // each once.
    for (r, marks) in [(&r1, 0), (&r2, 1), (&r3, 1)] {
        assert_eq!(
            log.matches(&format!("berth land {land_id}: run {r}, agent 1"))
                .count(),
            marks,
            "{log}"
        );
    }
    // Each run shows merged, its review state picked.
    for r in [&r1, &r2, &r3] {
        let run = show(&home, r);
        assert_eq!(run["agents"][0]["outcome"], "merged", "{run:#}");
        assert_eq!(run["review"]["stage"], "picked", "{run:#}");
    }
    // The fourth now conflicts with main, in f.txt, before anyone lands it.
    assert!(
        said(&r4).contains(&"[1] conflicts with main: f.txt".to_owned()),
        "{:?}",
        said(&r4)
    );
    let compared = home.json(&["run", "compare", &r4, "--json"]);
    let with = &compared["agents"][0]["conflicts"]["with"];
    assert!(
        with.as_array()
            .unwrap()
            .iter()
            .any(|c| c["kind"] == "base" && c["files"] == serde_json::json!(["f.txt"])),
        "{compared:#}"
    );
    // The third agent was told in its own session, naming the file.
    let session = show(&home, &r3)["agents"][0]["session"]
        .as_str()
        .unwrap()
        .to_owned();
    let said = transcript(&home, &session).join("\n");
    assert!(said.contains("conflict in f.txt"), "{said}");
    assert!(said.contains("Resolved."), "{said}");
    // `land show` and `land list` follow it.
    let listed = home.json(&["land", "list", "--json"]);
    assert_eq!(listed[0]["id"], land_id);
    assert_eq!(listed[0]["state"], "over");
    assert_eq!(listed[0]["landed"].as_array().unwrap().len(), 3);
}

#[test]
fn an_agent_that_cannot_resolve_is_left_and_the_queue_goes_on() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let check = "true";
    let a = one_run(
        &home,
        &server,
        &root,
        "Make it A",
        "f.txt",
        "A\nline two\n",
        check,
    );
    let b = one_run(
        &home,
        &server,
        &root,
        "Make it B",
        "f.txt",
        "B\nline two\n",
        check,
    );
    let c = one_run(
        &home,
        &server,
        &root,
        "Add another",
        "other.txt",
        "other\n",
        check,
    );
    let b_show = show(&home, &b);
    let b_tree = PathBuf::from(b_show["agents"][0]["worktree"].as_str().unwrap());

    // The land's end is one notification, naming what landed and what is left.
    let told = root.parent().unwrap().join("notified.json");
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[[notify]]\ncommand = \"cat > '{}'\"\nevents = [\"failed\"]\n",
            told.display()
        ),
    )
    .unwrap();
    // B's agent writes a note and leaves the markers where they are.
    server.push(Reply::anthropic(&write("note.txt", "undecided\n")));
    server.push(Reply::anthropic(&Turn::new().text(["I cannot decide."])));
    let landed = land(
        &home,
        &server,
        &root,
        &[&a, &b, &c, "--retries", "1", "--json"],
    );
    assert_eq!(landed.code, 1, "{}\n{}", landed.stderr, landed.stdout);
    let steps = steps(&landed.stdout);
    let left = steps.iter().find(|s| s["step"] == "left").unwrap();
    assert_eq!(left["item"], 1, "{left:#}");
    let why = left["text"].as_str().unwrap();
    assert!(why.contains("conflict markers left in f.txt"), "{why}");
    // The queue went on: A and C are on main, B is not.
    assert_eq!(git(&root, &["show", "main:f.txt"]), "A\nline two\n");
    assert_eq!(git(&root, &["show", "main:other.txt"]), "other\n");
    assert_eq!(show(&home, &b)["agents"][0]["outcome"], Value::Null);
    assert_eq!(show(&home, &c)["agents"][0]["outcome"], "merged");
    // B's worktree is as it was before the land (its work committed, nothing else), and
    // its attempt is kept.
    assert_eq!(
        std::fs::read_to_string(b_tree.join("f.txt")).unwrap(),
        "B\nline two\n"
    );
    assert_eq!(git(&b_tree, &["status", "--porcelain"]), "");
    let land_id = steps[0]["land"].as_str().unwrap();
    let kept = git(
        &root,
        &[
            "for-each-ref",
            "--format=%(refname)",
            &format!("refs/berth/land/{land_id}"),
        ],
    );
    assert!(kept.contains("/2/attempt-1"), "{kept}");
    let attempt = format!("refs/berth/land/{land_id}/2/attempt-1");
    assert_eq!(
        git(&root, &["show", &format!("{attempt}:note.txt")]),
        "undecided\n"
    );
    assert!(git(&root, &["show", &format!("{attempt}:f.txt")]).contains("<<<<<<<"));
    assert!(!b_tree.join("note.txt").exists());
    let notice: Value = serde_json::from_str(&std::fs::read_to_string(&told).unwrap()).unwrap();
    assert!(
        notice["title"]
            .as_str()
            .unwrap()
            .ends_with("2 landed, 1 left"),
        "{notice:#}"
    );
    let summary = notice["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("left {b}: conflict markers left in f.txt")),
        "{summary}"
    );
    // `land show` names why.
    let shown = home.ok(&["land", "show", land_id]);
    assert!(
        shown.contains("left (conflict markers left in f.txt"),
        "{shown}"
    );
}

/// A land SIGKILLed in the middle of its second agent's check, resumed: it lands the rest,
/// and nothing twice. `url`: the store's database, or the home's files.
fn killed_and_resumed(url: Option<&str>) {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let on = |mut cmd: std::process::Command| {
        if let Some(url) = url {
            cmd.env("BERTH_STORE_URL", url);
        }
        cmd
    };
    // The check waits while `hold` is in the worktree (ignored, so never part of the work).
    let check = "touch waiting; while [ -e hold ]; do sleep 0.1; done; ls";
    let mut ids = Vec::new();
    for (task, path, content) in [
        ("Add a file", "new.txt", "new\n"),
        ("Change line one", "f.txt", "line ONE\nline two\n"),
        ("Add another", "other.txt", "other\n"),
    ] {
        server.push(Reply::anthropic(&write(path, content)));
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
        let r = run(on(berth_run(
            &home,
            &server,
            &root,
            &[task, "--allow", "write_file", "--check", check],
        )));
        assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
        let listed = run(on(home.cmd(&["run", "list", "--json"])));
        let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
        ids.push(listed[0]["id"].as_str().unwrap().to_owned());
    }
    let shown = run(on(home.cmd(&["run", "show", &ids[1], "--json"])));
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    let second = PathBuf::from(shown["agents"][0]["worktree"].as_str().unwrap());
    std::fs::write(root.join(".git/info/exclude"), "hold\nwaiting\n").unwrap();
    std::fs::remove_file(second.join("waiting")).unwrap();
    std::fs::write(second.join("hold"), "").unwrap();
    let main_before = git(&root, &["rev-parse", "main"]).trim().to_owned();

    let mut landing = on(land_cmd(
        &home,
        &server,
        &root,
        &[&ids[0], &ids[1], &ids[2], "--json"],
    ))
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    support::runs::until(
        "the second check to start",
        std::time::Duration::from_secs(60),
        || second.join("waiting").exists().then_some(()),
    );
    support::runs::kill9(landing.id());
    landing.wait().unwrap();
    std::fs::remove_file(second.join("hold")).unwrap();
    // The first landed before the kill; the land is found cut off, not landing forever.
    assert_eq!(git(&root, &["show", "main:new.txt"]), "new\n");
    let listed = run(on(home.cmd(&["land", "list", "--json"])));
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(listed[0]["state"], "cut off", "{listed:#}");
    let land_id = listed[0]["id"].as_str().unwrap().to_owned();

    let resumed = run(on(land_cmd(&home, &server, &root, &["--resume", "--json"])));
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stderr, resumed.stdout);
    let steps = steps(&resumed.stdout);
    // The first is not landed again; the second and third are.
    assert!(steps.iter().all(|s| s["item"] != 0), "{steps:#?}");
    let landed: Vec<u64> = steps
        .iter()
        .filter(|s| s["step"] == "landed")
        .map(|s| s["item"].as_u64().unwrap())
        .collect();
    assert_eq!(landed, [1, 2], "{steps:#?}");
    assert_eq!(git(&root, &["show", "main:f.txt"]), "line ONE\nline two\n");
    assert_eq!(git(&root, &["show", "main:other.txt"]), "other\n");
    // Nothing twice: each run's work is in main's history once.
    let log = git(
        &root,
        &["log", "--format=%s", &format!("{main_before}..main")],
    );
    for task in ["Add a file", "Change line one", "Add another"] {
        let merges = log.lines().filter(|l| *l == task).count();
        assert!(merges >= 1, "{task}: {log}");
    }
    let marks = git(
        &root,
        &["log", "--format=%B", &format!("{main_before}..main")],
    );
    for id in &ids[1..] {
        assert_eq!(
            marks
                .matches(&format!("berth land {land_id}: run {id}, agent 1"))
                .count(),
            1,
            "{marks}"
        );
    }
    for id in &ids {
        let shown = run(on(home.cmd(&["run", "show", id, "--json"])));
        let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
        assert_eq!(shown["agents"][0]["outcome"], "merged", "{shown:#}");
    }
    assert_eq!(git(&root, &["status", "--porcelain"]), "");
    // Over: a resume has nothing to do.
    let again = run(on(land_cmd(&home, &server, &root, &["--resume", &land_id])));
    assert_eq!(again.code, 4, "{}", again.stderr);
}

#[test]
fn a_land_killed_midway_resumes_and_lands_nothing_twice() {
    killed_and_resumed(None);
}

#[test]
fn a_land_killed_midway_resumes_and_lands_nothing_twice_on_postgres() {
    let url = berth_testkit::postgres::fresh_database_blocking();
    killed_and_resumed(Some(&url));
}

#[test]
fn a_land_cut_off_after_moving_the_base_does_not_move_it_again() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let a = one_run(
        &home,
        &server,
        &root,
        "Add a file",
        "new.txt",
        "new\n",
        "true",
    );
    let b = one_run(
        &home,
        &server,
        &root,
        "Change line one",
        "f.txt",
        "ONE\nline two\n",
        "true",
    );
    for squash in [false, true] {
        let (a, b) = match squash {
            false => (a.clone(), b.clone()),
            true => (
                one_run(
                    &home,
                    &server,
                    &root,
                    "Add a third",
                    "third.txt",
                    "3\n",
                    "true",
                ),
                one_run(
                    &home,
                    &server,
                    &root,
                    "Change line two",
                    "f.txt",
                    "ONE\nTWO\n",
                    "true",
                ),
            ),
        };
        let mut args = vec![a.as_str(), b.as_str(), "--json"];
        if squash {
            args.push("--squash");
        }
        let landed = land(&home, &server, &root, &args);
        assert_eq!(landed.code, 0, "{}\n{}", landed.stderr, landed.stdout);
        let land_id = steps(&landed.stdout)[0]["land"]
            .as_str()
            .unwrap()
            .to_owned();
        let tip = git(&root, &["rev-parse", "main"]);
        // As if it was killed after moving main and before recording it: its second agent
        // recorded landing, with where it was combined.
        let path = home.path().join(format!("lands/{land_id}/land.json"));
        let mut record: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        record["items"][1]["state"] = "landing".into();
        record["items"][1]["after"] = Value::Null;
        std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
        let path = home.path().join(format!("runs/{b}/run.json"));
        let mut run: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        run["agents"][0]["outcome"] = Value::Null;
        std::fs::write(&path, serde_json::to_string(&run).unwrap()).unwrap();

        let resumed = land(&home, &server, &root, &["--resume", &land_id, "--json"]);
        assert_eq!(resumed.code, 0, "{}\n{}", resumed.stderr, resumed.stdout);
        assert_eq!(git(&root, &["rev-parse", "main"]), tip, "squash: {squash}");
        let steps = steps(&resumed.stdout);
        let landed = steps.iter().find(|s| s["step"] == "landed").unwrap();
        assert_eq!(landed["item"], 1, "{steps:#?}");
        assert!(
            steps
                .iter()
                .all(|s| s["step"] != "merged" && s["step"] != "checked"),
            "{steps:#?}"
        );
    }
}

#[test]
fn a_dry_run_names_the_conflicts_the_queue_would_meet_and_changes_nothing() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let a = one_run(
        &home,
        &server,
        &root,
        "Add a file",
        "new.txt",
        "new\n",
        "true",
    );
    let b = one_run(
        &home,
        &server,
        &root,
        "Change line one",
        "f.txt",
        "ONE\nline two\n",
        "true",
    );
    let c = one_run(
        &home,
        &server,
        &root,
        "Change line one again",
        "f.txt",
        "1\nline two\n",
        "true",
    );
    let main = git(&root, &["rev-parse", "main"]);
    let planned = land(&home, &server, &root, &[&a, &b, &c, "--dry-run", "--json"]);
    assert_eq!(planned.code, 0, "{}", planned.stderr);
    let plan: Value = serde_json::from_str(&planned.stdout).unwrap();
    let conflicts: Vec<&Value> = plan["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["conflicts"])
        .collect();
    // Only the third conflicts: with the second, once the queue has landed it.
    assert_eq!(
        conflicts,
        [
            &serde_json::json!([]),
            &serde_json::json!([]),
            &serde_json::json!(["f.txt"])
        ],
        "{plan:#}"
    );
    assert_eq!(plan["items"][2]["check"], "true");
    let text = land(&home, &server, &root, &[&a, &b, &c, "--dry-run"]);
    assert!(
        text.stdout.contains("conflicts expected in f.txt"),
        "{}",
        text.stdout
    );
    // Nothing moved, nothing was recorded.
    assert_eq!(git(&root, &["rev-parse", "main"]), main);
    assert_eq!(
        home.json(&["land", "list", "--json"]),
        serde_json::json!([])
    );
    assert!(show(&home, &c)["agents"][0]["outcome"].is_null());
    // Bad targets are refused before anything is recorded, naming what to give.
    let bad = land(&home, &server, &root, &[&a, "zz:1"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("RUN:N"), "{}", bad.stderr);
    let twice = land(&home, &server, &root, &[&a, &format!("{a}:1")]);
    assert_eq!(twice.code, 2, "{}", twice.stderr);
    let none = land(&home, &server, &root, &[&format!("{a}:2")]);
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert_eq!(
        home.json(&["land", "list", "--json"]),
        serde_json::json!([])
    );
}

#[test]
fn a_detached_land_is_driven_by_its_own_process() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let a = one_run(
        &home,
        &server,
        &root,
        "Add a file",
        "new.txt",
        "new\n",
        "true",
    );
    let b = one_run(
        &home,
        &server,
        &root,
        "Change line one",
        "f.txt",
        "ONE\nline two\n",
        "true",
    );
    let started = land(&home, &server, &root, &[&a, &b, "--detach", "--json"]);
    assert_eq!(started.code, 0, "{}", started.stderr);
    let started: Value = serde_json::from_str(&started.stdout).unwrap();
    let id = started["land"].as_str().unwrap().to_owned();
    assert!(started["supervisor"].as_u64().unwrap() > 0);
    let over = support::runs::until(
        "the land to end",
        std::time::Duration::from_secs(60),
        || {
            let shown = home.json(&["land", "show", &id, "--json"]);
            (shown["state"] == "over").then_some(shown)
        },
    );
    let states: Vec<&Value> = over["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["state"])
        .collect();
    assert_eq!(states, ["landed", "landed"], "{over:#}");
    assert_eq!(git(&root, &["show", "main:f.txt"]), "ONE\nline two\n");
    assert_eq!(git(&root, &["show", "main:new.txt"]), "new\n");
    // A land another node drives is as its record says here (its lock is there, not here),
    // and is resumed only there.
    let path = home.path().join(format!("lands/{id}/land.json"));
    let mut record: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    record["state"] = "landing".into();
    record["node"] = "elsewhere".into();
    record["items"][1]["state"] = "landing".into();
    std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
    assert_eq!(
        home.json(&["land", "list", "--json"])[0]["state"],
        "landing"
    );
    let resumed = land(&home, &server, &root, &["--resume", &id]);
    assert_eq!(resumed.code, 4, "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains("node elsewhere"),
        "{}",
        resumed.stderr
    );
}

#[test]
fn a_check_that_fails_on_the_combined_tree_goes_back_to_its_agent() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // Passes alone; fails once a.txt is there, until the agent mends it.
    let check = "! test -f a.txt || test -f mended.txt";
    let a = one_run(&home, &server, &root, "Add a", "a.txt", "a\n", "true");
    let b = one_run(&home, &server, &root, "Add b", "b.txt", "b\n", check);
    server.push(Reply::anthropic(&write("mended.txt", "yes\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Mended."])));
    let landed = land(&home, &server, &root, &[&a, &b, "--json"]);
    assert_eq!(landed.code, 0, "{}\n{}", landed.stderr, landed.stdout);
    let steps = steps(&landed.stdout);
    let checks: Vec<&Value> = steps
        .iter()
        .filter(|s| s["step"] == "checked" && s["item"] == 1)
        .collect();
    assert_eq!(checks.len(), 2, "{steps:#?}");
    assert_eq!(checks[0]["check"]["passed"], false);
    assert_eq!(checks[1]["check"]["passed"], true);
    let told = steps.iter().find(|s| s["step"] == "told").unwrap();
    assert!(told["text"].as_str().unwrap().contains(check), "{told:#}");
    assert_eq!(git(&root, &["show", "main:mended.txt"]), "yes\n");
    assert_eq!(git(&root, &["show", "main:a.txt"]), "a\n");
    let session = show(&home, &b)["agents"][0]["session"]
        .as_str()
        .unwrap()
        .to_owned();
    let said = transcript(&home, &session).join("\n");
    assert!(
        said.contains(&format!("the check `{check}` failed (exit 1)")),
        "{said}"
    );
}

#[test]
fn an_acp_agent_resolves_its_conflict_in_its_loaded_session() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let a = one_run(
        &home,
        &server,
        &root,
        "Change line one",
        "f.txt",
        "ONE\nline two\n",
        "true",
    );
    // An ACP agent (berth's own, over ACP as any other would be) changes the same line.
    server.push(Reply::anthropic(&write("f.txt", "1\nline two\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let agent = format!("{} acp", env!("CARGO_BIN_EXE_berth"));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Number line one",
            "--agent-cmd",
            &agent,
            "--allow",
            "write_file",
            "--check",
            "true",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let b = home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    server.push(Reply::anthropic(&write("f.txt", "ONE (1)\nline two\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Resolved."])));
    let landed = land(&home, &server, &root, &[&a, &b, "--json"]);
    assert_eq!(landed.code, 0, "{}\n{}", landed.stderr, landed.stdout);
    let steps = steps(&landed.stdout);
    assert!(
        steps
            .iter()
            .any(|s| s["step"] == "resolved" && s["item"] == 1),
        "{steps:#?}"
    );
    assert_eq!(git(&root, &["show", "main:f.txt"]), "ONE (1)\nline two\n");
    assert_eq!(show(&home, &b)["agents"][0]["outcome"], "merged");
}

#[test]
fn a_batch_of_tasks_lands_in_the_files_order() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    // Three runs at once: each agent's first request gets a write (held back, so all three
    // ask before any asks again), then each ends.
    for file in ["one.txt", "two.txt", "three.txt"] {
        server.push(
            Reply::anthropic(&write(file, "x\n"))
                .delay_head(std::time::Duration::from_millis(1500)),
        );
    }
    for _ in 0..3 {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let tasks = tmp.path().join("tasks.md");
    std::fs::write(
        &tasks,
        "- Write one file\n- Write another\n  with care\n- Write a third\n",
    )
    .unwrap();
    let started = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "--tasks",
            tasks.to_str().unwrap(),
            "--allow",
            "write_file",
            "--check",
            "true",
            "--json",
        ],
    ));
    assert_eq!(started.code, 0, "{}\n{}", started.stderr, started.stdout);
    let started: Value = serde_json::from_str(&started.stdout).unwrap();
    let batch = started["batch"].as_str().unwrap().to_owned();
    let runs: Vec<String> = started["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(runs.len(), 3);
    for id in &runs {
        let waited = home.run(&["run", "wait", id]);
        assert_eq!(waited.code, 0, "{}", waited.stderr);
    }

    let landed = land(&home, &server, &root, &["--batch", &batch[..6], "--json"]);
    assert_eq!(landed.code, 0, "{}\n{}", landed.stderr, landed.stdout);
    let steps = steps(&landed.stdout);
    let order: Vec<&str> = steps
        .iter()
        .filter(|s| s["step"] == "landed")
        .map(|s| s["run"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        runs.iter().map(String::as_str).collect::<Vec<_>>(),
        "{steps:#?}"
    );
    for file in ["one.txt", "two.txt", "three.txt"] {
        assert_eq!(git(&root, &["show", &format!("main:{file}")]), "x\n");
    }
    let record = home.json(&["land", "show", steps[0]["land"].as_str().unwrap(), "--json"]);
    assert_eq!(record["batch"], batch.as_str());
    // A batch that is not there is said so.
    let missing = land(&home, &server, &root, &["--batch", "0000000000ff"]);
    assert_eq!(missing.code, 3, "{}", missing.stderr);
}

#[test]
fn ctrl_c_stops_a_land_after_its_step_and_resume_goes_on() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // The check waits while `hold` is in the worktree (ignored, so never part of the work).
    let check = "touch waiting; while [ -e hold ]; do sleep 0.1; done";
    let a = one_run(
        &home,
        &server,
        &root,
        "Add a file",
        "new.txt",
        "new\n",
        check,
    );
    let b = one_run(
        &home,
        &server,
        &root,
        "Add another",
        "other.txt",
        "other\n",
        check,
    );
    let first = PathBuf::from(show(&home, &a)["agents"][0]["worktree"].as_str().unwrap());
    std::fs::write(root.join(".git/info/exclude"), "hold\nwaiting\n").unwrap();
    std::fs::remove_file(first.join("waiting")).unwrap();
    std::fs::write(first.join("hold"), "").unwrap();
    let landing = land_cmd(&home, &server, &root, &[&a, &b])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    support::runs::until(
        "the first check to start",
        std::time::Duration::from_secs(60),
        || first.join("waiting").exists().then_some(()),
    );
    let status = std::process::Command::new("kill")
        .args(["-INT", &landing.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The check under way is cut short; the land stops, resumable, and says so.
    let out = landing.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    let listed = home.json(&["land", "list", "--json"]);
    assert_eq!(listed[0]["state"], "stopped", "{listed:#}");
    assert!(
        git(&root, &["ls-tree", "main", "new.txt"]).is_empty(),
        "nothing landed"
    );
    std::fs::remove_file(first.join("hold")).unwrap();
    let resumed = land(&home, &server, &root, &["--resume"]);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stderr, resumed.stdout);
    assert_eq!(git(&root, &["show", "main:new.txt"]), "new\n");
    assert_eq!(git(&root, &["show", "main:other.txt"]), "other\n");
}

#[test]
fn an_agent_whose_work_cannot_be_committed_is_left_and_the_queue_goes_on() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let a = one_run(
        &home,
        &server,
        &root,
        "Add a file",
        "new.txt",
        "new\n",
        "true",
    );
    let b = one_run(
        &home,
        &server,
        &root,
        "Add another",
        "other.txt",
        "other\n",
        "true",
    );
    // A repository made inside the first agent's worktree: git would record it as a link.
    let first = PathBuf::from(show(&home, &a)["agents"][0]["worktree"].as_str().unwrap());
    git(&first, &["init", "--quiet", "inner"]);
    let landed = land(&home, &server, &root, &[&a, &b, "--json"]);
    assert_eq!(landed.code, 1, "{}\n{}", landed.stderr, landed.stdout);
    let steps = steps(&landed.stdout);
    let left = steps.iter().find(|s| s["step"] == "left").unwrap();
    assert_eq!(left["item"], 0, "{left:#}");
    assert!(left["text"].as_str().unwrap().contains("inner"), "{left:#}");
    assert_eq!(git(&root, &["show", "main:other.txt"]), "other\n");
    assert!(git(&root, &["ls-tree", "main", "new.txt"]).is_empty());
}
