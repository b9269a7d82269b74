//! Lost-work refs through the binary: what `workspace delete --force` keeps on
//! `refs/berth/lost/<id>` stays through `workspace gc` until `[git] keep_lost_days` have
//! passed since berth made it, then goes, found even after the last workspace of its
//! repository is gone.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{commit, git};
use support::Home;
use support::runs::project;

fn lost_refs(root: &Path) -> String {
    git(
        root,
        &["for-each-ref", "--format=%(refname)", "refs/berth/lost/"],
    )
}

#[test]
fn gc_expires_a_forced_deletes_lost_ref_after_keep_lost_days_and_not_before() {
    let home = Home::new();
    let (_tmp, root) = project();
    let r = home.run_in(&root, &["workspace", "create", "f"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let id = r.stdout.trim().to_owned();
    let worktree = PathBuf::from(home.ok(&["workspace", "path", "f"]).trim());
    commit(&worktree, "work.txt", "unmerged work\n");
    home.ok(&["workspace", "delete", "f", "--yes", "--force"]);
    let refname = format!("refs/berth/lost/{id}");
    assert_eq!(lost_refs(&root), format!("{refname}\n"));

    // The default keeps it 30 days: gc, dry or not, leaves it.
    let plan = home.json(&["workspace", "gc", "--dry-run", "--json"]);
    assert_eq!(plan["keep_lost_days"], 30);
    assert_eq!(plan["lost_refs"], serde_json::json!([]));
    let r = home.run(&["workspace", "gc", "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("0 workspace(s) and 0 lost-work ref(s)"),
        "{}",
        r.stderr
    );
    assert_eq!(lost_refs(&root), format!("{refname}\n"));

    // Kept no days: the dry run names it and leaves it; gc deletes it, though no workspace
    // of its repository is left to name the repository.
    std::fs::write(
        home.path().join("config.toml"),
        "[git]\nkeep_lost_days = 0\n",
    )
    .unwrap();
    let r = home.run(&["workspace", "gc", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains(&format!("would remove {refname} in {}", root.display())),
        "{}",
        r.stdout
    );
    assert_eq!(lost_refs(&root), format!("{refname}\n"));
    let report = home.json(&["workspace", "gc", "--yes", "--json"]);
    assert_eq!(report["dry_run"], false);
    let gone = report["lost_refs"].as_array().unwrap();
    assert_eq!(gone.len(), 1, "{report}");
    assert_eq!(gone[0]["name"], refname.as_str());
    assert_eq!(gone[0]["repo"], root.to_str().unwrap());
    assert!(gone[0]["made_at"].is_string(), "{report}");
    assert_eq!(lost_refs(&root), "");
    // The home's note of the repository goes at the next look, with nothing left there.
    assert!(home.path().join("lost-ref-repos").exists());
    home.ok(&["workspace", "gc", "--dry-run"]);
    assert!(!home.path().join("lost-ref-repos").exists());
}
