//! A workspace holds no ports until something of its own needs them, however it was made
//! (including those berth makes by itself: the `default` workspace and a new device's, which
//! the store makes beneath the operations); then it is given a block of its own, which it
//! keeps until it is deleted.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use berth_ops::{CreateWorkspace, Ops, Repository};

fn ops_with_ports(home: &std::path::Path) -> Ops {
    std::fs::write(
        home.join("config.toml"),
        "[ports]\nfirst = 41000\nlast = 41099\nblock = 4\n",
    )
    .unwrap();
    berth_ops::open(home, &[]).unwrap()
}

#[tokio::test]
async fn the_default_and_a_devices_workspace_get_blocks_of_their_own_when_they_need_them() {
    let home = tempfile::tempdir().unwrap();
    let ops = ops_with_ports(home.path());
    let default = ops.default_workspace().await.unwrap();
    assert_eq!(default.ports, None, "made with ports");
    let (_, phone) = ops.resolve_device("phone").await.unwrap();
    assert_eq!(phone.ports, None, "made with ports");
    assert!(ops.workspace_env(&phone).is_empty());

    let phone = ops.with_ports(phone).await.unwrap();
    let block = phone.ports.expect("given a block");
    assert_eq!((block.first, block.count), (41000, 4));
    let env = ops.workspace_env(&phone);
    assert!(
        env.contains(&("BERTH_PORT".to_owned(), "41000".to_owned())),
        "{env:?}"
    );
    assert!(
        env.contains(&("BERTH_PORT_3".to_owned(), "41003".to_owned())),
        "{env:?}"
    );
    let default = ops.with_ports(default).await.unwrap();
    assert_eq!(default.ports.unwrap().first, 41004);
    // Kept: asked again, the same blocks, and the records hold them.
    assert_eq!(ops.default_workspace().await.unwrap().ports, default.ports);
    let (_, again) = ops.resolve_device("phone").await.unwrap();
    assert_eq!(again.ports, phone.ports);
    let shown = ops.workspace_ports("default").await.unwrap();
    assert_eq!((shown.ports.first, shown.ports.last), (41004, 41007));
}

/// More workspaces than the range has blocks: every create succeeds; the blocks run out only
/// where they are given, with the `[ports]` keys named, and a deleted workspace's block is
/// given to the next that asks.
#[tokio::test]
async fn creating_never_runs_out_of_ports_and_giving_them_can() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[ports]\nfirst = 42000\nlast = 42019\nblock = 10\n",
    )
    .unwrap();
    let ops = berth_ops::open(home.path(), &[]).unwrap();
    for i in 0..5 {
        let mut request = CreateWorkspace::new(Repository::None);
        request.name = Some(format!("w{i}"));
        let made = ops.create_workspace(request).await.unwrap();
        assert!(made.ports.is_none(), "{made:?}");
    }
    assert_eq!(ops.workspace_ports("w0").await.unwrap().ports.first, 42000);
    assert_eq!(ops.workspace_ports("w1").await.unwrap().ports.first, 42010);
    let err = ops.workspace_ports("w2").await.unwrap_err();
    assert_eq!(err.kind(), berth_core::ErrorKind::Refused);
    assert!(err.to_string().contains("[ports] first"), "{err}");
    let plan = ops.plan_delete("w0", false).await.unwrap();
    ops.delete_workspace(plan).await.unwrap();
    assert_eq!(ops.workspace_ports("w2").await.unwrap().ports.first, 42000);
}
