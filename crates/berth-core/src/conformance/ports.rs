//! Port blocks: the ports a workspace is given for its servers, handed out so that no two
//! workspaces share one, even when assigned at the same moment.

use chrono::{Duration, Utc};

use super::{Backend, named, wid};
use crate::error::Error;
use crate::id::WorkspaceId;
use crate::model::{GitInfo, NewWorkspace, PortBlock, PortRange};
use crate::store::DeleteCondition;

/// A workspace holds no ports until it is given a block (`assign_ports`): the lowest block of
/// the range no other workspace holds, the same block every time after (whatever the range
/// says then), until the workspace is deleted and the block is given out again. Creates never
/// look at ports, however full the range; a full range refuses the assignment, naming the
/// config keys, and leaves the record as it was. The block survives reads, listing and
/// rewrites.
pub async fn port_blocks(b: Backend) {
    let now = Utc::now();
    let range = PortRange {
        first: 30000,
        last: 30029,
        block: 10,
    };
    let create = |id: &'static str| {
        let store = b.workspaces.clone();
        async move {
            let new = NewWorkspace {
                id: Some(wid(id)),
                ..NewWorkspace::default()
            };
            store.create(new, now).await.unwrap()
        }
    };
    let block = |first| PortBlock { first, count: 10 };
    // More workspaces than the range has blocks: creating them needs none.
    for id in ["pa", "pb", "pc", "pd", "pe"] {
        assert_eq!(create(id).await.ports, None, "{id} was made with ports");
    }
    let assign = |id: &'static str| {
        let store = b.workspaces.clone();
        async move { store.assign_ports(&wid(id), range).await }
    };
    assert_eq!(assign("pa").await.unwrap(), block(30000));
    assert_eq!(assign("pa").await.unwrap(), block(30000), "not idempotent");
    assert_eq!(assign("pb").await.unwrap(), block(30010));
    assert_eq!(assign("pc").await.unwrap(), block(30020));
    // The record holds it: read, listed and paged alike.
    let pb = b.workspaces.load(&wid("pb")).await.unwrap();
    assert_eq!(pb.ports, Some(block(30010)));
    let want = [
        ("pa".to_owned(), Some(block(30000))),
        ("pb".to_owned(), Some(block(30010))),
        ("pc".to_owned(), Some(block(30020))),
        ("pd".to_owned(), None),
        ("pe".to_owned(), None),
    ];
    listed_and_paged_with(&b, &want).await;

    // Full: refused with the keys to change, and the record is as it was.
    let err = assign("pd").await.unwrap_err();
    assert!(matches!(err, Error::Refused(_)), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("[ports] first") && msg.contains("[ports] block"),
        "{msg}"
    );
    assert_eq!(b.workspaces.load(&wid("pd")).await.unwrap().ports, None);
    // A held block is returned though the range is full, or another range asked for.
    assert_eq!(assign("pc").await.unwrap(), block(30020));
    let elsewhere = PortRange {
        first: 40000,
        last: 40100,
        block: 3,
    };
    assert_eq!(
        b.workspaces
            .assign_ports(&wid("pa"), elsewhere)
            .await
            .unwrap(),
        block(30000)
    );
    // A workspace that does not exist has none to give.
    let missing = assign("nope").await.unwrap_err();
    assert!(missing.is_not_found(), "{missing:?}");

    // The block is given out again once its workspace is gone, lowest first.
    assert!(
        b.workspaces
            .delete(&pb.id, DeleteCondition::Always)
            .await
            .unwrap()
    );
    assert_eq!(assign("pe").await.unwrap(), block(30010));
    assert!(assign("pd").await.unwrap_err().kind() == crate::ErrorKind::Refused);
    // A block of another size fits around the ones held: in a wider range it starts after
    // the highest held port, never inside a block.
    let wide = PortRange {
        first: 30005,
        last: 30100,
        block: 5,
    };
    assert_eq!(
        b.workspaces.assign_ports(&wid("pd"), wide).await.unwrap(),
        PortBlock {
            first: 30030,
            count: 5
        }
    );

    rewrites_keep_the_block(&b, "pa", block(30000), now).await;
}

/// The workspaces' ports, listed and paged alike, are `want`.
async fn listed_and_paged_with(b: &Backend, want: &[(String, Option<PortBlock>)]) {
    let listed: Vec<_> = b
        .workspaces
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|w| (w.id.to_string(), w.ports))
        .collect();
    assert_eq!(listed, want);
    let paged: Vec<_> = b
        .workspaces
        .page(None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|w| (w.id.to_string(), w.ports))
        .collect();
    assert_eq!(paged, want);
}

/// Rewrites of the record of `id`, which holds `held`, keep the block.
async fn rewrites_keep_the_block(
    b: &Backend,
    id: &str,
    held: PortBlock,
    now: chrono::DateTime<Utc>,
) {
    let later = now + Duration::hours(1);
    b.workspaces.update_accessed(&wid(id), later).await.unwrap();
    b.workspaces
        .save_config(&wid(id), "model = \"m\"\n")
        .await
        .unwrap();
    let git = GitInfo {
        repo: "/src/p".into(),
        branch: "b".into(),
        base_branch: "main".into(),
        branch_created: false,
        worktree: "/wt/p".into(),
    };
    b.workspaces.set_git(&wid(id), &git).await.unwrap();
    let reread = b.workspaces.load(&wid(id)).await.unwrap();
    assert_eq!(reread.ports, Some(held));
    assert_eq!(reread.last_accessed, later);
}

/// A record that brings a block (a store migration copying one) keeps it while no other
/// workspace holds any of its ports, and is refused, creating nothing, when one does; an
/// assignment then works around it. A taken id is a conflict whatever its ports.
pub async fn kept_port_blocks(b: Backend) {
    let now = Utc::now();
    let range = PortRange {
        first: 30000,
        last: 30029,
        block: 10,
    };
    let with_block = |id: &str, first, count| NewWorkspace {
        id: Some(wid(id)),
        ports: Some(PortBlock { first, count }),
        ..NewWorkspace::default()
    };
    let kept = b
        .workspaces
        .create(with_block("ka", 30010, 10), now)
        .await
        .unwrap();
    assert_eq!(
        kept.ports,
        Some(PortBlock {
            first: 30010,
            count: 10
        })
    );
    assert_eq!(b.workspaces.load(&kept.id).await.unwrap(), kept);
    let plain = b.workspaces.create(named("kb", "kb"), now).await.unwrap();
    assert_eq!(
        b.workspaces.assign_ports(&plain.id, range).await.unwrap(),
        PortBlock {
            first: 30000,
            count: 10
        }
    );
    // One port of it is another's: refused, and nothing is made.
    let err = b
        .workspaces
        .create(with_block("kc", 30019, 5), now)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Refused(_)), "{err:?}");
    assert!(err.to_string().contains("30019-30023"), "{err}");
    assert!(
        b.workspaces
            .load(&wid("kc"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    let dup = b
        .workspaces
        .create(with_block("ka", 31000, 10), now)
        .await
        .unwrap_err();
    assert!(matches!(dup, Error::AlreadyExists { .. }), "{dup:?}");
    // The next assignment passes over both blocks.
    b.workspaces.create(named("kd", "kd"), now).await.unwrap();
    assert_eq!(
        b.workspaces.assign_ports(&wid("kd"), range).await.unwrap(),
        PortBlock {
            first: 30020,
            count: 10
        }
    );
}

/// Many assignments at once, twice for each workspace and for more workspaces than the range
/// has blocks: each workspace gets one answer (the same block twice, or the same refusal), the
/// blocks given overlap nowhere and are the range's, and the records say what was given.
pub async fn racing_port_assignments(b: Backend) {
    const BLOCKS: u16 = 8;
    const WORKSPACES: usize = 12;
    let range = PortRange {
        first: 31000,
        last: 31000 + BLOCKS * 4 - 1,
        block: 4,
    };
    let now = Utc::now();
    let ids: Vec<WorkspaceId> = (0..WORKSPACES)
        .map(|i| wid(&format!("race-{i:02}")))
        .collect();
    for id in &ids {
        let new = NewWorkspace {
            id: Some(id.clone()),
            ..NewWorkspace::default()
        };
        b.workspaces.create(new, now).await.unwrap();
    }
    let tasks: Vec<_> = ids
        .iter()
        .chain(ids.iter())
        .map(|id| {
            let (store, id) = (b.workspaces.clone(), id.clone());
            tokio::spawn(async move { store.assign_ports(&id, range).await })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("an assignment task panicked"));
    }
    let (first, second) = answers.split_at(WORKSPACES);
    let mut given = Vec::new();
    for ((id, a), b2) in ids.iter().zip(first).zip(second) {
        match (a, b2) {
            (Ok(x), Ok(y)) => {
                assert_eq!(x, y, "{id} was given two blocks");
                given.push(*x);
            }
            (Err(x), Err(y)) => {
                assert_eq!(x.kind(), crate::ErrorKind::Refused, "{id}: {x:?}");
                assert_eq!(y.kind(), crate::ErrorKind::Refused, "{id}: {y:?}");
            }
            (x, y) => panic!("{id} was given a block once and refused once: {x:?} {y:?}"),
        }
    }
    given.sort_by_key(|p| p.first);
    let want: Vec<PortBlock> = (0..BLOCKS)
        .map(|i| PortBlock {
            first: 31000 + 4 * i,
            count: 4,
        })
        .collect();
    assert_eq!(
        given, want,
        "blocks overlap, or some of the range was left unused"
    );
    let mut recorded: Vec<PortBlock> = b
        .workspaces
        .list()
        .await
        .unwrap()
        .into_iter()
        .filter_map(|w| w.ports)
        .collect();
    recorded.sort_by_key(|p| p.first);
    assert_eq!(recorded, want, "the records do not say what was given");
}
