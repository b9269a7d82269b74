//! Foresight against real git workspaces and runs kept through berth-run's own store: a pair
//! of commits is merged once however often it is asked about, a base that moves is tried
//! again, one agent against its base or against another is answered on its own, and what
//! cannot be judged (a worktree on another machine, a plain workspace) is said, not failed.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::{Path, PathBuf};

use berth_ops::{CreateWorkspace, Ops, Repository, WorkspaceView};
use berth_run::{
    Against, AgentSpec, AgentState, AgentSummary, Foresight, Reason, RunEvent, RunRecord,
    RunRequest, RunStore, StoredRequest,
};
use berth_testkit::{commit, git};

struct Home {
    _tmp: tempfile::TempDir,
    ops: Ops,
    store: RunStore,
    repo: PathBuf,
}

/// A home, and a repository on `main` whose `f.txt` has three lines.
async fn home() -> Home {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("project");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "--quiet", "-b", "main"]);
    commit(&repo, "f.txt", "one\ntwo\nthree\n");
    let ops = berth_ops::open(&tmp.path().join("home"), &[]).unwrap();
    let store = RunStore::open(&ops).await.unwrap();
    Home {
        repo: repo.canonicalize().unwrap(),
        _tmp: tmp,
        ops,
        store,
    }
}

/// A workspace of the repository (or a plain one) whose `f.txt` says `content`.
async fn workspace(h: &Home, name: &str, content: &str, plain: bool) -> WorkspaceView {
    on_base(h, name, content, plain, None).await
}

/// [`workspace`], started from `base` rather than the repository's default.
async fn on_base(
    h: &Home,
    name: &str,
    content: &str,
    plain: bool,
    base: Option<&str>,
) -> WorkspaceView {
    let ws = h
        .ops
        .create_workspace(CreateWorkspace {
            name: Some(name.to_owned()),
            plain,
            base: base.map(str::to_owned),
            ..CreateWorkspace::new(match plain {
                true => Repository::None,
                false => Repository::Named(h.repo.clone()),
            })
        })
        .await
        .unwrap();
    std::fs::write(folder(&ws).join("f.txt"), content).unwrap();
    ws
}

fn folder(ws: &WorkspaceView) -> PathBuf {
    match &ws.git {
        Some(git) => git.worktree.clone(),
        None => ws.path.clone().unwrap(),
    }
}

/// A run whose agents worked in `workspaces`, each done having changed a file.
async fn run_in(h: &Home, workspaces: &[&WorkspaceView]) -> RunRecord {
    let request = RunRequest::new(
        "Edit f.txt".to_owned(),
        Repository::None,
        vec![AgentSpec::Berth { model: None }; workspaces.len()],
    );
    let record = h.store.create(StoredRequest::of(&request)).await.unwrap();
    let mut s = h.store.supervise(&record.id).await.unwrap();
    let mut summaries = Vec::new();
    for (agent, ws) in workspaces.iter().enumerate() {
        let events = [
            RunEvent::Started {
                agent,
                label: "berth".to_owned(),
                workspace: ws.id.to_string(),
                workspace_name: ws.label.clone(),
                session: format!("session-{agent}"),
                worktree: folder(ws),
            },
            RunEvent::Ended {
                agent,
                state: AgentState::Done,
                stop: "end_turn".to_owned(),
                message: None,
                input_tokens: 1,
                output_tokens: 1,
                elapsed_ms: 1,
            },
        ];
        for event in events {
            s.take(&event).await.unwrap();
        }
        summaries.push(AgentSummary {
            agent,
            label: "berth".to_owned(),
            workspace: Some(ws.id.to_string()),
            workspace_name: None,
            session: None,
            state: AgentState::Done,
            stop: "end_turn".to_owned(),
            message: None,
            files_changed: 1,
            added: 1,
            removed: 1,
            check: None,
            input_tokens: 1,
            output_tokens: 1,
            cost_usd: None,
            elapsed_ms: 1,
        });
    }
    s.take(&RunEvent::Summary { agents: summaries })
        .await
        .unwrap();
    s.flush().await.unwrap();
    s.release().await;
    h.store.load(&record.id).await.unwrap()
}

fn tip(repo: &Path) -> String {
    git(repo, &["rev-parse", "main"]).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_pair_is_merged_once_and_a_moved_base_is_tried_again() {
    let h = home().await;
    let a = workspace(&h, "a", "A\ntwo\nthree\n", false).await;
    let b = workspace(&h, "b", "B\ntwo\nthree\n", false).await;
    let c = workspace(&h, "c", "C\ntwo\nthree\n", false).await;
    let pair = run_in(&h, &[&a, &b]).await;
    let other = run_in(&h, &[&c]).await;
    let foresight = Foresight::new();

    let first = foresight.foresee(&h.ops, &h.store, &pair).await;
    // Each of the pair against main (clean) and against the other run's agent (conflict):
    // four pairs of commits, none of the pair against each other.
    assert_eq!(foresight.pairs_kept(), 4, "{first:#?}");
    for seen in &first {
        assert_eq!(seen.compared, 1, "{seen:#?}");
        assert_eq!(seen.with.len(), 1, "{seen:#?}");
        let Against::Agent { run, agent, .. } = &seen.with[0].against else {
            panic!("{seen:#?}");
        };
        assert_eq!((run.as_str(), *agent), (other.id.as_str(), 1));
    }
    // Asked again: the same answer, not one pair more.
    assert_eq!(foresight.foresee(&h.ops, &h.store, &pair).await, first);
    assert_eq!(foresight.pairs_kept(), 4);
    // The other run asks about the same pairs from its side: one base pair more.
    foresight.foresee(&h.ops, &h.store, &other).await;
    assert_eq!(foresight.pairs_kept(), 5);

    // main moves: each agent's base pair is new, the pairs between agents are not.
    commit(&h.repo, "f.txt", "M\ntwo\nthree\n");
    let moved = foresight.foresee(&h.ops, &h.store, &pair).await;
    assert_eq!(foresight.pairs_kept(), 7);
    for seen in &moved {
        assert_eq!(
            seen.with[0].against,
            Against::Base {
                branch: "main".to_owned()
            },
            "{seen:#?}"
        );
        assert_eq!(seen.with[0].shown_files(), "f.txt");
    }

    // One agent on its own, against its base as it stands, and against another.
    let (base, trial) = foresight.against_base(&h.ops, &pair, 0).await.unwrap();
    assert_eq!(base, "main");
    assert_eq!(trial.ours, tip(&h.repo));
    assert_eq!(trial.theirs, berth_git::work_commit(&folder(&a)).unwrap());
    assert_eq!(trial.files, ["f.txt".into()]);
    // Within one run too, when a caller asks for that pair by name; and a pair already
    // tried, asked the other way round, is not tried again.
    let between = foresight
        .between(&h.ops, (&pair, 0), (&pair, 1))
        .await
        .unwrap();
    assert_eq!(between.files, ["f.txt".into()]);
    assert_eq!(foresight.pairs_kept(), 8);
    let back = foresight
        .between(&h.ops, (&other, 0), (&pair, 1))
        .await
        .unwrap();
    assert_eq!(back.files, ["f.txt".into()]);
    assert_eq!(foresight.pairs_kept(), 8);
}

#[tokio::test(flavor = "multi_thread")]
async fn what_cannot_be_judged_is_said_agent_by_agent() {
    let h = home().await;
    let here = workspace(&h, "here", "H\ntwo\nthree\n", false).await;
    let gone = workspace(&h, "gone", "G\ntwo\nthree\n", false).await;
    let plain = workspace(&h, "plain", "P\n", true).await;
    // Work that would land on another branch is no rival of work for main.
    git(&h.repo, &["branch", "dev"]);
    let on_dev = on_base(&h, "on-dev", "D\ntwo\nthree\n", false, Some("dev")).await;
    let run = run_in(&h, &[&here, &plain]).await;
    let elsewhere = run_in(&h, &[&gone]).await;
    run_in(&h, &[&on_dev]).await;
    // The other run's worktree is on another machine, as a pool's node leaves it: its
    // folder is not here.
    let moved_away = folder(&gone).with_extension("elsewhere");
    std::fs::rename(folder(&gone), &moved_away).unwrap();

    let foresight = Foresight::new();
    let seen = foresight.foresee(&h.ops, &h.store, &run).await;
    assert_eq!(seen.len(), 2);
    // The agent here is judged: clean against main, not compared with the work for dev, and
    // the other run's agent named as not compared, with why.
    assert_eq!(seen[0].unjudged, None, "{seen:#?}");
    assert_eq!((seen[0].with.len(), seen[0].compared), (0, 0), "{seen:#?}");
    assert_eq!(seen[0].unknown.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].unknown[0].run, elsewhere.id.as_str());
    assert!(
        seen[0].unknown[0].why.contains("not on this machine"),
        "{seen:#?}"
    );
    // The plain workspace has no branch to merge into.
    let why = seen[1].unjudged.as_ref().unwrap();
    assert_eq!(why.reason, Reason::NoBranch, "{seen:#?}");
    assert!(why.reason.worth_saying());
    // The agent elsewhere, asked about itself, says where it is.
    let there = foresight.foresee(&h.ops, &h.store, &elsewhere).await;
    assert_eq!(
        there[0].unjudged.as_ref().unwrap().reason,
        Reason::Elsewhere,
        "{there:#?}"
    );
    let e = foresight
        .against_base(&h.ops, &elsewhere, 0)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), berth_ops::ErrorKind::Invalid);
    assert!(e.to_string().contains("not on this machine"), "{e}");
}
