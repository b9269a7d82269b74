//! What several of these tests set up alike.

use berth_ops::{CreateSession, CreateWorkspace, Ops, Repository, Session, WorkspaceView};

/// A plain workspace named `name`, and a session in it.
pub async fn plain_workspace_with_session(ops: &Ops, name: &str) -> (WorkspaceView, Session) {
    let ws = ops
        .create_workspace(CreateWorkspace {
            name: Some(name.into()),
            ..CreateWorkspace::new(Repository::None)
        })
        .await
        .unwrap();
    let session = ops
        .create_session(CreateSession {
            workspace: ws.id.to_string(),
            ..CreateSession::default()
        })
        .await
        .unwrap();
    (ws, session)
}
