//! Every workspace gets its own block of ports, including those berth makes by itself: the
//! `default` workspace and a new device's, which the store makes beneath the operations.

use berth_ops::Ops;

fn ops_with_ports(home: &std::path::Path) -> Ops {
    std::fs::write(
        home.join("config.toml"),
        "[ports]\nfirst = 41000\nlast = 41099\nblock = 4\n",
    )
    .unwrap();
    berth_ops::open(home, &[]).unwrap()
}

#[tokio::test]
async fn the_default_and_a_devices_workspace_get_blocks_of_their_own() {
    let home = tempfile::tempdir().unwrap();
    let ops = ops_with_ports(home.path());
    let default = ops.default_workspace().await.unwrap();
    let block = default.ports.expect("default has a block");
    assert_eq!((block.first, block.count), (41000, 4));
    let (_, phone) = ops.resolve_device("phone").await.unwrap();
    assert_eq!(phone.ports.expect("a device's has a block").first, 41004);
    let env = ops.workspace_env(&phone);
    assert!(
        env.contains(&("BERTH_PORT".to_owned(), "41004".to_owned())),
        "{env:?}"
    );
    assert!(
        env.contains(&("BERTH_PORT_3".to_owned(), "41007".to_owned())),
        "{env:?}"
    );
    // Made once: asked again, the same blocks.
    assert_eq!(ops.default_workspace().await.unwrap().ports, default.ports);
}
