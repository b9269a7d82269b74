//! Ports when needed: a workspace takes no ports when it is made, so a home can hold more
//! workspaces than `[ports]` has blocks; a block is given when something of the workspace first
//! needs one (`workspace ports`, a run, a setup command), held until the workspace is deleted,
//! and never shared with another workspace's processes.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::process::Stdio;
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::wait_ok;
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, events, project, write_call};

/// A home whose `[ports]` holds two blocks of 10.
fn home_with_two_blocks() -> Home {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[ports]\nfirst = 45000\nlast = 45019\nblock = 10\n",
    )
    .unwrap();
    home
}

fn shown_ports(home: &Home, workspace: &str) -> Value {
    home.json(&["workspace", "show", workspace, "--json"])["ports"].clone()
}

#[test]
fn more_workspaces_than_blocks_each_given_ports_on_first_use() {
    let home = home_with_two_blocks();
    // Five workspaces where the range has room for two blocks: creating needs none.
    for i in 0..5 {
        home.ok(&["workspace", "create", &format!("w{i}"), "--plain"]);
    }
    assert_eq!(shown_ports(&home, "w0"), Value::Null);
    let text = home.ok(&["workspace", "show", "w0"]);
    assert!(
        text.contains("ports:") && text.contains("none yet"),
        "{text}"
    );

    // `workspace ports` gives the lowest free block, and the same one every time after.
    assert_eq!(home.ok(&["workspace", "ports", "w0"]), "45000-45009\n");
    assert_eq!(home.ok(&["workspace", "ports", "w0"]), "45000-45009\n");
    let w0 = shown_ports(&home, "w0");
    assert_eq!(
        (w0["first"].as_u64(), w0["last"].as_u64()),
        (Some(45000), Some(45009))
    );
    let text = home.ok(&["workspace", "show", "w0"]);
    assert!(text.contains("45000-45009 (BERTH_PORT = 45000)"), "{text}");
    let w1 = home.json(&["workspace", "ports", "w1", "--json"]);
    assert_eq!(w1["first"], 45010, "{w1}");
    assert_eq!(w1["last"], 45019, "{w1}");
    assert_eq!(w1["count"], 10, "{w1}");
    assert_eq!(
        w1["label"],
        home.json(&["workspace", "show", "w1", "--json"])["label"]
    );

    // A third is refused (exit status 4), naming the settings to change; nothing is given.
    let third = home.run(&["workspace", "ports", "w2"]);
    assert_eq!(third.code, 4, "{}", third.stderr);
    for key in [
        "no block of 10 free ports",
        "45000-45019",
        "[ports] first",
        "[ports] block",
    ] {
        assert!(third.stderr.contains(key), "{key}: {}", third.stderr);
    }
    assert_eq!(shown_ports(&home, "w2"), Value::Null);

    // Deleting a workspace frees its block for another.
    home.ok(&["workspace", "delete", "w0", "--yes"]);
    assert_eq!(home.ok(&["workspace", "ports", "w2"]), "45000-45009\n");
    assert_eq!(shown_ports(&home, "w2")["first"], 45000);
    // And creating goes on regardless.
    home.ok(&["workspace", "create", "w5", "--plain"]);
    assert_eq!(shown_ports(&home, "w5"), Value::Null);
    let missing = home.run(&["workspace", "ports", "nope"]);
    assert_eq!(missing.code, 3, "{}", missing.stderr);
}

/// A git workspace whose `[git] setup` runs nothing takes no ports either; one whose setup
/// runs something is given its block before the setup starts, and the setup sees it.
#[test]
fn a_git_workspace_takes_ports_only_for_its_setup() {
    let home = home_with_two_blocks();
    let (_tmp, root) = project();
    let repo = root.to_str().unwrap();
    home.ok(&["workspace", "create", "quiet", "--repo", repo]);
    assert_eq!(shown_ports(&home, "quiet"), Value::Null);
    std::fs::write(
        home.path().join("config.toml"),
        "[ports]\nfirst = 45000\nlast = 45019\nblock = 10\n\
         [git]\nsetup = [\"printf '%s' \\\"$BERTH_PORT\\\" > port\"]\n",
    )
    .unwrap();
    let id = home.ok(&["workspace", "create", "busy", "--repo", repo]);
    let shown = home.json(&["workspace", "show", id.trim(), "--json"]);
    assert_eq!(shown["ports"]["first"], 45000, "{shown}");
    let worktree = shown["git"]["worktree"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(worktree).join("port")).unwrap(),
        "45000"
    );
}

/// Two `berth run`s at once, two agents each: every agent's workspace is given its own block
/// as the run starts it, so the four checks (standing in for dev servers), running at the same
/// time in four workspaces, see four blocks that share no port; the range holds exactly four.
#[test]
fn two_runs_at_once_give_every_agent_a_block_of_its_own() {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[ports]\nfirst = 46000\nlast = 46019\nblock = 5\n",
    )
    .unwrap();
    // Workspaces that never ran anything hold none, so they leave the four blocks free.
    for i in 0..3 {
        home.ok(&["workspace", "create", &format!("idle-{i}"), "--plain"]);
    }
    let server = ProviderServer::start_in_background();
    // Each agent writes a file, so its check runs; held back so that every agent's first
    // request gets a write.
    for _ in 0..4 {
        server
            .push(Reply::anthropic(&write_call("work\n")).delay_head(Duration::from_millis(2000)));
    }
    for _ in 0..4 {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let (_tmp, root) = project();
    let runs: Vec<_> = ["first task", "second task"]
        .into_iter()
        .map(|task| {
            let mut cmd = berth_run(
                &home,
                &server,
                &root,
                &[
                    task,
                    "--agents",
                    "2",
                    "--allow",
                    "write_file",
                    "--check",
                    "printf '%s %s' \"$BERTH_PORT\" \"$BERTH_PORT_4\" > .ports",
                    "--json",
                ],
            );
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let mut blocks = Vec::new();
    for run in runs {
        let out = wait_ok(run);
        for started in events(&out).iter().filter(|e| e["event"] == "started") {
            let worktree = std::path::Path::new(started["worktree"].as_str().unwrap());
            let seen = std::fs::read_to_string(worktree.join(".ports")).unwrap();
            let (first, last) = seen.split_once(' ').unwrap();
            let (first, last): (u64, u64) = (first.parse().unwrap(), last.parse().unwrap());
            assert_eq!(last, first + 4, "{seen}");
            // What the check saw is what the workspace holds.
            let held = shown_ports(&home, started["workspace"].as_str().unwrap());
            assert_eq!(held["first"], first, "{held}");
            blocks.push(first);
        }
    }
    blocks.sort();
    assert_eq!(
        blocks,
        [46000, 46005, 46010, 46015],
        "blocks shared or missing"
    );
    assert_eq!(shown_ports(&home, "idle-0"), Value::Null);
}
