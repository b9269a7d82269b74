//! The ACP agent a session records stays with what goes on in it: a session carried to another
//! node's workspace (a pool worker taking over a dead node's run) keeps its agent, with its
//! transcript; a fork, which berth's own agent answers in, has none. A real filesystem store.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use berth_ops::{CreateSession, CreateWorkspace, Message, Ops, Repository, Role};

async fn workspace(ops: &Ops, name: &str) -> String {
    ops.create_workspace(CreateWorkspace {
        name: Some(name.into()),
        ..CreateWorkspace::new(Repository::None)
    })
    .await
    .unwrap()
    .id
    .to_string()
}

#[tokio::test]
async fn a_carried_session_keeps_its_agent_and_a_fork_has_none() {
    let home = tempfile::tempdir().unwrap();
    let ops = berth_ops::open(home.path(), &[]).unwrap();
    let first = workspace(&ops, "first").await;
    let second = workspace(&ops, "second").await;
    let session = ops
        .create_session(CreateSession {
            workspace: first,
            title: "the task".into(),
            agent: Some("python3 agent.py".into()),
            ..CreateSession::default()
        })
        .await
        .unwrap();
    assert_eq!(session.agent.as_deref(), Some("python3 agent.py"));
    ops.append_message(&session, &Message::new(Role::User, "the task"))
        .await
        .unwrap();

    let cwd = home.path().join("elsewhere");
    let carried = ops.carry_session(&session, &second, cwd).await.unwrap();
    let carried = ops.resolve_session(carried.id.as_str()).await.unwrap();
    assert_eq!(carried.agent.as_deref(), Some("python3 agent.py"));
    assert_eq!(carried.title, "the task");
    assert_eq!(ops.transcript(&carried).await.unwrap().messages.len(), 1);

    let forked = ops.fork_session(&session, None, None, None).await.unwrap();
    let forked = ops.resolve_session(forked.id.as_str()).await.unwrap();
    assert_eq!(forked.agent, None);
}
