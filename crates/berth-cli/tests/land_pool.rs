//! `berth land` on a pool: an agent whose worktree is on another node lands from the branch
//! that node pushed, checked on the combined tree in a checkout made for the check. One
//! node on the throwaway Postgres `test.sh` starts (these tests fail without it), and a
//! person's own clone elsewhere.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::time::Duration;

use support::pool::{Node, queue, script, wait_ended};

#[test]
fn a_pool_runs_pushed_branch_lands() {
    let url = berth_testkit::postgres::fresh_database_blocking();
    let tmp = tempfile::tempdir().unwrap();
    let remote_url = berth_testkit::bare_remote(tmp.path());
    let mut alpha = Node::new("alpha", &url, "30");
    script(&alpha, 1, Duration::from_millis(10));
    alpha.start_worker();
    let id = queue(
        &alpha,
        "Write out.txt",
        &remote_url,
        &["--check", "test -f out.txt && ls"],
    );
    let run = wait_ended(&alpha, &id, Duration::from_secs(120));
    assert_eq!(
        run["agents"][0]["state"],
        "done",
        "{run:#}\n{}",
        alpha.said()
    );
    // Seen from another machine: the node's worktree is not here.
    let worktree = std::path::PathBuf::from(run["agents"][0]["worktree"].as_str().unwrap());
    std::fs::rename(&worktree, tmp.path().join("moved-away")).unwrap();
    let checkout = tmp.path().join("checkout");
    berth_testkit::git(
        tmp.path(),
        &["clone", "--quiet", &remote_url, checkout.to_str().unwrap()],
    );
    // main moved on meanwhile, in another file: the land combines the two.
    berth_testkit::commit(&checkout, "later.txt", "later\n");

    let mut land = alpha.cmd(&["land", &id, "--json"]);
    land.current_dir(&checkout);
    let landed = berth_testkit::run(land);
    assert_eq!(landed.code, 0, "{}\n{}", landed.stderr, landed.stdout);
    let steps: Vec<serde_json::Value> = landed
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let checked = steps.iter().find(|s| s["step"] == "checked").unwrap();
    assert_eq!(checked["check"]["passed"], true, "{steps:#?}");
    assert!(steps.iter().any(|s| s["step"] == "landed"), "{steps:#?}");
    let content = std::fs::read_to_string(checkout.join("out.txt")).unwrap();
    assert!(content.starts_with("alpha "), "{content}");
    assert_eq!(
        std::fs::read_to_string(checkout.join("later.txt")).unwrap(),
        "later\n"
    );
    assert_eq!(
        berth_testkit::git(&checkout, &["status", "--porcelain"]),
        ""
    );
    // The check's checkout is gone again.
    let worktrees = berth_testkit::git(&checkout, &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
    let shown = alpha.json(&["run", "show", &id, "--json"]);
    assert_eq!(shown["agents"][0]["outcome"], "merged", "{shown:#}");
}
