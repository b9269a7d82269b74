//! Skills: a repository's skill (`.claude/skills/` in the worktree), a workspace's (`skills/`
//! in its folder) and the person's are offered to berth's agent by name and description;
//! the `skill` tool gives a body and a skill's other files; a malformed `SKILL.md` is a
//! warning, never a failed turn; `berth skill list/show` show what the agent sees. Against
//! the provider stand-in, on a real git repository.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::run;
use berth_testkit::{commit, git};
use support::Home;

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

/// A home with workspace `w` on a repository whose commit holds the skill `deploy`, and the
/// workspace's own skill `triage` with a second file.
fn world() -> (Home, tempfile::TempDir, std::path::PathBuf) {
    let home = Home::new();
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(repo.path().join(".claude/skills/deploy")).unwrap();
    commit(
        repo.path(),
        ".claude/skills/deploy/SKILL.md",
        &skill_md(
            "deploy",
            "Ship the service to production",
            "DEPLOY-BODY: run `make release`, then tag.",
        ),
    );
    let mut create = home.cmd(&["workspace", "create", "w", "--json"]);
    create.current_dir(repo.path());
    let r = run(create);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ws: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let id = ws["id"].as_str().unwrap();
    let triage = home.workspace_dir(id).join("skills/triage");
    std::fs::create_dir_all(&triage).unwrap();
    std::fs::write(
        triage.join("SKILL.md"),
        skill_md(
            "triage",
            "Sort incoming bug reports by severity",
            "TRIAGE-BODY: read severity.md first.",
        ),
    )
    .unwrap();
    std::fs::write(
        triage.join("severity.md"),
        "SEVERITY-TABLE: P0 is an outage",
    )
    .unwrap();
    let worktree = std::path::PathBuf::from(ws["git"]["worktree"].as_str().unwrap());
    (home, repo, worktree)
}

/// `berth chat -p PROMPT` in workspace `w` on the stand-in, with the person's config folder
/// inside the home.
fn chat(home: &Home, server: &ProviderServer, prompt: &str) -> berth_testkit::Run {
    let mut cmd = home.cmd(&["chat", "-p", prompt, "-w", "w"]);
    cmd.env("XDG_CONFIG_HOME", home.path().join("xdg"))
        .env("BERTH_PROVIDER", "claude")
        .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", server.url())
        .env("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model")
        .env("ANTHROPIC_API_KEY", "test-key");
    run(cmd)
}

fn skill_call(args: serde_json::Value) -> Turn {
    Turn::new().tool_call("s1", "skill", [args.to_string()])
}

/// Everything the `n`th request carried: instructions, messages, tools.
fn request(server: &ProviderServer, n: usize) -> String {
    server.requests()[n].body.to_string()
}

#[test]
fn skills_are_offered_by_description_and_read_with_the_skill_tool() {
    let (home, _repo, _worktree) = world();
    let server = ProviderServer::start_in_background();
    server.push(Reply::anthropic(&skill_call(
        serde_json::json!({"name": "deploy"}),
    )));
    server.push(Reply::anthropic(&skill_call(
        serde_json::json!({"name": "triage", "file": "severity.md"}),
    )));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = chat(&home, &server, "Ship it");
    assert_eq!(r.code, 0, "{}", r.stderr);

    // The first request lists both skills by description; neither body is in it.
    let first = server.requests()[0].body.clone();
    let system = first["system"].to_string();
    assert!(system.contains("## Skills"), "{system}");
    assert!(
        system.contains("- deploy: Ship the service to production"),
        "{system}"
    );
    assert!(
        system.contains("- triage: Sort incoming bug reports by severity"),
        "{system}"
    );
    let everything = first.to_string();
    assert!(!everything.contains("DEPLOY-BODY"), "{everything}");
    assert!(!everything.contains("TRIAGE-BODY"), "{everything}");
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "skill"),
        "{first:#}"
    );

    // The tool gave the body, then a file of the workspace's skill (outside the worktree).
    let second = request(&server, 1);
    assert!(
        second.contains("DEPLOY-BODY: run `make release`"),
        "{second}"
    );
    let third = request(&server, 2);
    assert!(third.contains("SEVERITY-TABLE: P0 is an outage"), "{third}");
}

#[test]
fn an_unknown_skill_or_file_is_an_error_the_model_reads() {
    let (home, _repo, _worktree) = world();
    let server = ProviderServer::start_in_background();
    server.push(Reply::anthropic(&skill_call(
        serde_json::json!({"name": "deplo"}),
    )));
    server.push(Reply::anthropic(&skill_call(
        serde_json::json!({"name": "deploy", "file": "../../../.git/config"}),
    )));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = chat(&home, &server, "Ship it");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let second = request(&server, 1);
    assert!(second.contains("no skill is named"), "{second}");
    assert!(second.contains("did you mean deploy"), "{second}");
    assert!(second.contains("is_error"), "{second}");
    let third = request(&server, 2);
    assert!(third.contains("not a file of the skill"), "{third}");
}

#[test]
fn a_malformed_skill_is_a_warning_and_a_changed_one_is_seen_next_turn() {
    let (home, _repo, worktree) = world();
    let bad = worktree.join(".agents/skills/broken");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("SKILL.md"), "no front matter here\n").unwrap();
    let server = ProviderServer::start_in_background();
    server.push(Reply::anthropic(&Turn::new().text(["Hi."])));
    let r = chat(&home, &server, "Hello");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let warned = bad.join("SKILL.md").display().to_string();
    assert!(
        r.stderr.contains(&warned) && r.stderr.contains("front matter"),
        "{}",
        r.stderr
    );
    let system = server.requests()[0].body["system"].to_string();
    assert!(system.contains("- deploy:"), "{system}");
    assert!(!system.contains("broken"), "{system}");

    // The skill is fixed and another changed: the next turn sees both as they are now.
    std::fs::write(bad.join("SKILL.md"), skill_md("broken", "Mended now", "B")).unwrap();
    std::fs::write(
        worktree.join(".claude/skills/deploy/SKILL.md"),
        skill_md("deploy", "Ship with the new pipeline", "B"),
    )
    .unwrap();
    server.push(Reply::anthropic(&Turn::new().text(["Hi."])));
    let r = chat(&home, &server, "Hello again");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    let system = server.requests()[1].body["system"].to_string();
    assert!(system.contains("- broken: Mended now"), "{system}");
    assert!(
        system.contains("- deploy: Ship with the new pipeline"),
        "{system}"
    );
}

#[test]
fn skill_list_and_show_say_what_the_agent_sees() {
    let (home, _repo, worktree) = world();
    // The person's skill of the same name as the repository's is replaced by it.
    let mine = home.path().join("xdg/berth/skills");
    std::fs::create_dir_all(mine.join("deploy")).unwrap();
    std::fs::write(
        mine.join("deploy/SKILL.md"),
        skill_md("deploy", "My own way", "MINE"),
    )
    .unwrap();
    std::fs::create_dir_all(mine.join("notes")).unwrap();
    std::fs::write(
        mine.join("notes/SKILL.md"),
        skill_md("notes", "Take notes", "N"),
    )
    .unwrap();
    let berth = |args: &[&str], dir: &std::path::Path| {
        let mut cmd = home.cmd(args);
        cmd.env("XDG_CONFIG_HOME", home.path().join("xdg"))
            .current_dir(dir);
        run(cmd)
    };
    // Inside the worktree, its workspace is meant.
    let r = berth(&["skill", "list", "--json"], &worktree);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let listed: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let names: Vec<(&str, &str)> = listed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["source"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("deploy", "worktree"),
            ("notes", "user"),
            ("triage", "workspace")
        ]
    );
    assert_eq!(listed["listed"], 3);
    let deploy = &listed["skills"][0];
    assert!(
        deploy["replaced"][0]
            .as_str()
            .unwrap()
            .ends_with("xdg/berth/skills/deploy"),
        "{deploy:#}"
    );
    let table = berth(&["skill", "list"], &worktree);
    assert!(table.stdout.contains("triage") && table.stdout.contains("workspace"));

    // Outside every workspace: the person's own, as they are.
    let r = berth(&["skill", "list", "--json"], home.path());
    let listed: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(listed["skills"].as_array().unwrap().len(), 2, "{listed:#}");
    assert_eq!(listed["skills"][0]["description"], "My own way");

    let shown = berth(&["skill", "show", "triage", "-w", "w"], home.path());
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert_eq!(shown.stdout, "TRIAGE-BODY: read severity.md first.\n");
    assert!(shown.stderr.contains("severity.md"), "{}", shown.stderr);
    let json = berth(
        &["skill", "show", "deploy", "-w", "w", "--json"],
        home.path(),
    );
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(json["body"].as_str().unwrap().starts_with("DEPLOY-BODY"));
    let missing = berth(&["skill", "show", "nope", "-w", "w"], home.path());
    assert_eq!(missing.code, 3, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("no skill is named"),
        "{}",
        missing.stderr
    );
}
