//! Finishing a run from the command line: `run pick` merges the winner and drops the others,
//! `run discard` drops work on purpose, `run clean` drops what finished runs left, and
//! `workspace merge` and `delete` (of several names) record what happened to an agent. The
//! run's record keeps each agent's outcome; `tell` to a merged or discarded agent is refused,
//! and nothing done to one agent changes another. The real binary, a real repository and the
//! provider stand-in.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{git, run};
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, project, write_call};

/// A run of `contents.len()` agents, each writing one of `contents` to out.txt (which gets
/// which is the race's), with a passing check; its id.
fn finished_run(home: &Home, server: &ProviderServer, root: &Path, contents: &[&str]) -> String {
    for content in contents {
        // Held back so that every agent's first request gets a write.
        server.push(Reply::anthropic(&write_call(content)).delay_head(Duration::from_millis(1500)));
    }
    for _ in contents {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let n = contents.len().to_string();
    let r = run(berth_run(
        home,
        server,
        root,
        &[
            "Write out.txt",
            "--agents",
            &n,
            "--allow",
            "write_file",
            "--check",
            "test -f out.txt",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn show(home: &Home, id: &str) -> Value {
    home.json(&["run", "show", id, "--json"])
}

fn agents(run: &Value) -> &Vec<Value> {
    run["agents"].as_array().unwrap()
}

fn outcomes(run: &Value) -> Vec<Value> {
    agents(run).iter().map(|a| a["outcome"].clone()).collect()
}

fn states(run: &Value) -> Vec<String> {
    agents(run)
        .iter()
        .map(|a| a["state"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn worktree(run: &Value, i: usize) -> PathBuf {
    PathBuf::from(run["agents"][i]["worktree"].as_str().unwrap())
}

fn workspace_ids(home: &Home) -> Vec<String> {
    home.json(&["workspace", "list", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_owned())
        .collect()
}

fn lost_refs(root: &Path) -> usize {
    git(root, &["for-each-ref", "refs/berth/lost"])
        .lines()
        .count()
}

#[test]
fn pick_merges_the_winner_names_the_task_and_leaves_nothing_behind() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let id = finished_run(&home, &server, &root, &["one\n", "two\n", "three\n"]);
    let before = show(&home, &id);
    let states_before = states(&before);
    assert_eq!(states_before, ["done", "done", "done"], "{before:#}");
    let winner = std::fs::read_to_string(worktree(&before, 1).join("out.txt")).unwrap();
    let workspaces: Vec<String> = agents(&before)
        .iter()
        .map(|a| a["workspace"].as_str().unwrap().to_owned())
        .collect();

    let picked = home.json(&["run", "pick", &id, "2", "--json"]);
    assert_eq!(picked["agent"], 2, "{picked:#}");
    assert_eq!(picked["dropped"].as_array().unwrap().len(), 2, "{picked:#}");
    // The winner's work is on main, with a message naming the task, the run and the agent.
    assert_eq!(git(&root, &["show", "main:out.txt"]), winner);
    let message = git(&root, &["log", "-1", "--format=%B", "main"]);
    assert!(message.starts_with("Write out.txt"), "{message}");
    assert!(
        message.contains(&format!("berth run {id}, agent 2")),
        "{message}"
    );
    // Nothing is left for gc: no workspace of the run is listed (each is archived, its
    // session kept), and none of the agents' worktrees is there.
    let left = workspace_ids(&home);
    for ws in &workspaces {
        assert!(!left.contains(ws), "{ws} is left: {left:?}");
    }
    for i in 0..3 {
        assert!(!worktree(&before, i).exists());
    }
    // Every agent's worktree is kept on a lost-work ref, so each can be restored: the
    // losers' uncommitted work, and the winner's HEAD (its work is on main too).
    assert_eq!(lost_refs(&root), 3);

    // The record says how each ended, and their states are as they were.
    let after = show(&home, &id);
    assert_eq!(
        outcomes(&after),
        [
            Value::from("discarded"),
            Value::from("merged"),
            Value::from("discarded")
        ]
    );
    assert_eq!(states(&after), states_before);
    let shown = home.ok(&["run", "show", &id]);
    assert!(shown.contains(", merged"), "{shown}");
    let listed = home.ok(&["run", "list"]);
    assert!(listed.contains("3: 2 discarded, 1 merged"), "{listed}");
    let compared = home.json(&["run", "compare", &id, "--json"]);
    let winner_compared = &compared["agents"][1];
    assert_eq!(winner_compared["outcome"], "merged", "{compared:#}");
    assert!(winner_compared.get("unreadable").is_none(), "{compared:#}");
    assert!(
        winner_compared["added"].as_u64().unwrap() >= 1,
        "{compared:#}"
    );

    // Its part is over: nothing more to tell it, nor the discarded ones.
    let told = home.run(&["run", "tell", &id, "--agent", "2", "more"]);
    assert_eq!(told.code, 4, "{}", told.stderr);
    assert!(told.stderr.contains("was merged"), "{}", told.stderr);
    let told = home.run(&["run", "tell", &id, "--agent", "1", "more"]);
    assert_eq!(told.code, 4, "{}", told.stderr);
    assert!(told.stderr.contains("was discarded"), "{}", told.stderr);
    // Picked twice: refused, by name.
    let again = home.run(&["run", "pick", &id, "2"]);
    assert_eq!(again.code, 4, "{}", again.stderr);
    let zero = home.run(&["run", "pick", &id, "0"]);
    assert_eq!(zero.code, 2, "{}", zero.stderr);
    // Nothing for clean either.
    let clean = home.run(&["run", "clean", "--dry-run"]);
    assert_eq!(clean.code, 0, "{}", clean.stderr);
    assert!(
        clean.stderr.contains("nothing to clean"),
        "{}",
        clean.stderr
    );
}

#[test]
fn a_kept_agent_told_more_leaves_the_winner_merged() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let id = finished_run(&home, &server, &root, &["one\n", "two\n"]);
    let before = show(&home, &id);
    let picked = home.json(&["run", "pick", &id, "1", "--keep-others", "--json"]);
    assert_eq!(picked["kept"], serde_json::json!([2]), "{picked:#}");
    assert!(worktree(&before, 1).exists(), "kept");
    assert!(!worktree(&before, 0).exists(), "the winner's is removed");

    // The kept agent is told more, in a supervisor of its own (`--detach`, what the
    // dashboard's `t` does): it runs again, and the merged one stays as it was.
    server.push(Reply::anthropic(&write_call("second\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Changed it."])));
    let mut tell = berth_run(&home, &server, &root, &[]);
    tell.args([
        "tell",
        &id,
        "--agent",
        "2",
        "--detach",
        "Make it say second",
    ]);
    let told = run(tell);
    assert_eq!(told.code, 0, "{}\n{}", told.stderr, told.stdout);
    assert_eq!(told.stdout.trim(), id, "{}", told.stderr);
    let waited = home.run(&["run", "wait", &id]);
    assert_eq!(waited.code, 0, "{}\n{}", waited.stderr, waited.stdout);
    assert!(
        server.requests()[4]
            .body
            .to_string()
            .contains("Make it say second"),
        "the detached supervisor read what to tell from its standard input"
    );
    let after = show(&home, &id);
    assert_eq!(states(&after), ["done", "done"], "{after:#}");
    assert_eq!(
        outcomes(&after),
        [Value::from("merged"), Value::from("kept")]
    );
    let compared = home.json(&["run", "compare", &id, "--json"]);
    assert_eq!(compared["agents"][0]["outcome"], "merged");
    assert!(compared["agents"][0].get("unreadable").is_none());
    let waited = home.run(&["run", "wait", &id]);
    assert_eq!(waited.code, 0, "{}\n{}", waited.stderr, waited.stdout);

    // Kept on purpose: clean leaves it; discard drops it without --force.
    let clean = home.run(&["run", "clean", "--dry-run"]);
    assert!(
        clean.stderr.contains("nothing to clean"),
        "{}",
        clean.stderr
    );
    let merged_named = home.run(&["run", "discard", &id, "--agent", "1", "-y"]);
    assert_eq!(merged_named.code, 4, "{}", merged_named.stderr);
    assert!(
        merged_named.stderr.contains("was merged"),
        "{}",
        merged_named.stderr
    );
    let dropped = home.json(&["run", "discard", &id, "--agent", "2", "-y", "--json"]);
    assert_eq!(dropped[0]["agent"], 2, "{dropped:#}");
    assert!(!worktree(&before, 1).exists());
    assert_eq!(
        outcomes(&show(&home, &id)),
        [Value::from("merged"), Value::from("discarded")]
    );
}

#[test]
fn discard_clean_and_the_workspace_commands_record_what_happened() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();

    // A run dropped whole, uncommitted work and all, without --force; asked first.
    let first = finished_run(&home, &server, &root, &["one\n", "two\n"]);
    let unasked = home.run(&["run", "discard", &first]);
    assert_eq!(unasked.code, 4, "{}", unasked.stderr);
    assert!(unasked.stderr.contains("--yes"), "{}", unasked.stderr);
    let ran = show(&home, &first);
    home.ok(&["run", "discard", &first, "-y"]);
    for i in 0..2 {
        assert!(!worktree(&ran, i).exists());
    }
    assert_eq!(
        outcomes(&show(&home, &first)),
        [Value::from("discarded"), Value::from("discarded")]
    );
    assert_eq!(lost_refs(&root), 2);

    // `workspace merge --squash --delete` of an agent: merged, with the task's message, and
    // no warning of a forced delete (nothing was lost).
    let second = finished_run(&home, &server, &root, &["three\n", "four\n"]);
    let ran = show(&home, &second);
    let ws1 = ran["agents"][0]["workspace"].as_str().unwrap().to_owned();
    let merged = home.run(&["workspace", "merge", &ws1, "--squash", "--delete"]);
    assert_eq!(merged.code, 0, "{}\n{}", merged.stderr, merged.stdout);
    assert!(!merged.stderr.contains("warning"), "{}", merged.stderr);
    let message = git(&root, &["log", "-1", "--format=%B", "main"]);
    assert!(message.starts_with("Write out.txt"), "{message}");
    assert!(
        message.contains(&format!("berth run {second}, agent 1")),
        "{message}"
    );
    assert_eq!(outcomes(&show(&home, &second))[0], "merged");

    // Picked by hand, so clean drops the rest.
    let planned = home.json(&["run", "clean", "--dry-run", "--json"]);
    assert_eq!(
        planned,
        serde_json::json!([{"run": second, "agents": [2]}]),
        "{planned:#}"
    );
    home.ok(&["run", "clean", "-y"]);
    assert!(!worktree(&ran, 1).exists());
    assert_eq!(
        outcomes(&show(&home, &second)),
        [Value::from("merged"), Value::from("discarded")]
    );

    // `workspace delete` takes several names, and records each agent discarded.
    let third = finished_run(&home, &server, &root, &["five\n", "six\n"]);
    let ran = show(&home, &third);
    let names: Vec<String> = agents(&ran)
        .iter()
        .map(|a| a["workspace_name"].as_str().unwrap().to_owned())
        .collect();
    let unforced = home.run(&["workspace", "delete", &names[0], &names[1], "-y"]);
    assert_ne!(
        unforced.code, 0,
        "uncommitted work refuses: {}",
        unforced.stderr
    );
    assert!(worktree(&ran, 0).exists() && worktree(&ran, 1).exists());
    home.ok(&["workspace", "delete", &names[0], &names[1], "--force", "-y"]);
    assert!(!worktree(&ran, 0).exists() && !worktree(&ran, 1).exists());
    assert_eq!(
        outcomes(&show(&home, &third)),
        [Value::from("discarded"), Value::from("discarded")]
    );
    // A run that is over and all discarded has nothing left to clean.
    let clean = home.run(&["run", "clean", "--dry-run"]);
    assert!(
        clean.stderr.contains("nothing to clean"),
        "{}",
        clean.stderr
    );
}
