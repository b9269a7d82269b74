//! Paging through workspaces and sessions: how a front end lists more of them than fit on
//! one screen or in one response.

use chrono::Utc;

use super::{Backend, named, new_session, wid};
use crate::SessionId;
use crate::store::DeleteCondition;

/// Pages of workspaces and sessions: id order, only what sorts after the cursor (which need
/// not be an id that exists), at most the limit, nothing past the end.
pub async fn paging(b: Backend) {
    let now = Utc::now();
    for id in ["p-3", "p-1", "p-5", "p-2", "p-4"] {
        b.workspaces
            .create(named(id, &format!("n{id}")), now)
            .await
            .unwrap();
    }
    let ids = |page: Vec<crate::Workspace>| {
        page.into_iter()
            .map(|w| w.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(b.workspaces.page(None, 2).await.unwrap()),
        ["p-1", "p-2"]
    );
    let after = wid("p-2");
    assert_eq!(
        ids(b.workspaces.page(Some(&after), 2).await.unwrap()),
        ["p-3", "p-4"]
    );
    // A cursor between ids, and one past the end.
    let between = wid("p-4a");
    assert_eq!(
        ids(b.workspaces.page(Some(&between), 9).await.unwrap()),
        ["p-5"]
    );
    assert!(
        b.workspaces
            .page(Some(&wid("q")), 9)
            .await
            .unwrap()
            .is_empty()
    );
    // A deleted workspace is not on a page.
    b.workspaces
        .delete(&wid("p-3"), DeleteCondition::Always)
        .await
        .unwrap();
    assert_eq!(
        ids(b.workspaces.page(Some(&wid("p-1")), 2).await.unwrap()),
        ["p-2", "p-4"]
    );

    for (ws, sid) in [("p-1", "s-b"), ("p-2", "s-a"), ("p-1", "s-c")] {
        b.sessions
            .create(new_session(ws, Some(sid)), now)
            .await
            .unwrap();
    }
    let sids = |page: Vec<crate::Session>| {
        page.into_iter()
            .map(|s| s.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        sids(b.sessions.page(None, 2).await.unwrap()),
        ["s-a", "s-b"]
    );
    let after = SessionId::new("s-b").unwrap();
    let rest = b.sessions.page(Some(&after), 2).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].workspace_id.as_str(), "p-1");
    assert_eq!(sids(rest), ["s-c"]);
}
