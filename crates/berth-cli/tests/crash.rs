//! Crash safety: a child process creating workspaces, binding devices and writing storage is
//! SIGKILLed at random moments. Afterwards every file berth owns parses, and every operation
//! the child reported as done is there.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::collections::BTreeMap;
use std::io::Write;

use berth_core::{
    BindingStore, DeviceId, NewWorkspace, StoragePath, StorageScope, StorageStore, WorkspaceId,
    WorkspaceStore,
};
use berth_store_fs::FsStore;
use berth_testkit::{Jitter, child, child_role, kill_after_first_ack};
use support::Home;

const ROUNDS: usize = 200;

/// Child role: loop forever over create / bind / write, printing `DONE …` after each
/// acknowledged operation. Runs until killed.
#[test]
#[ignore = "a child role: run by its parent test"]
fn crash_child() {
    let role = child_role();
    let store = FsStore::open(std::env::var("BERTH_HOME").unwrap()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut out = std::io::stdout().lock();
    rt.block_on(async {
        for i in 0.. {
            let ws = store
                .create(
                    NewWorkspace {
                        id: Some(WorkspaceId::new(format!("{role}-ws{i}")).unwrap()),
                        ..NewWorkspace::default()
                    },
                    chrono::Utc::now(),
                )
                .await
                .unwrap();
            writeln!(out, "DONE ws {}", ws.id).unwrap();
            out.flush().unwrap();
            let device = DeviceId::new(format!("{role}-dev{i}")).unwrap();
            store.bind(&device, &ws.id).await.unwrap();
            writeln!(out, "DONE bind {device} {}", ws.id).unwrap();
            out.flush().unwrap();
            // Overwrite a shared file (tests replacement) and add a new one (tests creation).
            let scope = StorageScope::Workspace(WorkspaceId::new("shared").unwrap());
            let content = format!("{role} write {i} ").repeat(200);
            store
                .write(
                    &scope,
                    &StoragePath::new("latest.txt").unwrap(),
                    content.clone().into_bytes(),
                )
                .await
                .unwrap();
            writeln!(out, "DONE write latest.txt {role}-{i}").unwrap();
            let path = format!("deep/{role}/{i}.txt");
            store
                .write(
                    &scope,
                    &StoragePath::new(&path).unwrap(),
                    content.into_bytes(),
                )
                .await
                .unwrap();
            writeln!(out, "DONE write {path} {role}-{i}").unwrap();
            out.flush().unwrap();
        }
    });
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_write() {
    let home = Home::new();
    home.ok(&["workspace", "create", "--id", "shared"]);
    let mut jitter = Jitter::from_clock();
    let mut workspaces = Vec::new();
    let mut bindings = BTreeMap::new();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut interrupted = 0;
    for round in 0..ROUNDS {
        let role = format!("r{round}");
        let mut cmd = child("crash_child", &role);
        cmd.env("BERTH_HOME", home.path());
        let acked = kill_after_first_ack(cmd, &mut jitter, 40_000);
        for done in &acked {
            let parts: Vec<&str> = done.split(' ').collect();
            match parts.as_slice() {
                ["ws", id] => workspaces.push(id.to_string()),
                ["bind", dev, id] => {
                    bindings.insert(dev.to_string(), id.to_string());
                }
                ["write", path, tag] => {
                    let (role, i) = tag.rsplit_once('-').unwrap();
                    files.insert(path.to_string(), format!("{role} write {i} ").repeat(200));
                }
                other => panic!("unexpected line {other:?}"),
            }
        }
        if !acked.len().is_multiple_of(4) {
            interrupted += 1;
        }
    }
    eprintln!(
        "{ROUNDS} rounds, {interrupted} killed mid-sequence, {} workspaces acknowledged",
        workspaces.len()
    );
    assert!(
        interrupted > ROUNDS / 4,
        "kills should land mid-sequence often ({interrupted})"
    );

    // Everything berth owns still parses, through the library and through the CLI.
    let store = FsStore::open(home.path()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let listed = WorkspaceStore::list(&store)
            .await
            .expect("every workspace.toml parses");
        for id in &workspaces {
            assert!(
                listed.iter().any(|w| w.id.as_str() == id),
                "acknowledged workspace {id} lost"
            );
        }
        let bound = BindingStore::list(&store)
            .await
            .expect("bindings.toml parses");
        for (dev, id) in &bindings {
            assert!(
                bound
                    .iter()
                    .any(|b| b.device.as_str() == dev && b.workspace.as_str() == id),
                "binding {dev} lost"
            );
        }
        let scope = StorageScope::Workspace(WorkspaceId::new("shared").unwrap());
        for (path, _) in files.iter().filter(|(p, _)| p.starts_with("deep/")) {
            let got = store
                .read(&scope, &StoragePath::new(path).unwrap())
                .await
                .expect(path);
            assert_eq!(
                String::from_utf8(got).unwrap(),
                files[path],
                "{path} differs"
            );
        }
        // latest.txt holds some complete write: the last acknowledged one, or the one in
        // flight when the last child died.
        let latest = String::from_utf8(
            store
                .read(&scope, &StoragePath::new("latest.txt").unwrap())
                .await
                .unwrap(),
        )
        .unwrap();
        let unit = latest.split_inclusive(' ').take(3).collect::<String>();
        assert_eq!(latest, unit.repeat(200), "latest.txt is torn");
    });
    home.ok(&["workspace", "list", "--json"]);
    home.ok(&["binding", "list", "--json"]);
}
