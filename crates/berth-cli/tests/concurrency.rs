//! Several berth processes on one home never lose an update and never split a device across
//! two workspaces.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::process::Stdio;

use berth_core::{DeviceId, WorkspaceId};
use berth_store_fs::FsStore;
use berth_testkit::{child, child_role, wait_ok};
use support::Home;

const RACERS: usize = 8;

#[test]
fn racing_resolves_of_a_new_device_make_one_workspace() {
    let home = Home::new();
    for round in 0..5 {
        let device = format!("phone-{round}");
        let children: Vec<_> = (0..RACERS)
            .map(|_| {
                let mut cmd = home.cmd(&["binding", "resolve", &device]);
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                cmd.spawn().unwrap()
            })
            .collect();
        let mut ids = Vec::new();
        for c in children {
            let out = wait_ok(c);
            ids.push(out.trim().to_owned());
        }
        ids.dedup();
        assert_eq!(ids.len(), 1, "round {round}: processes disagree: {ids:?}");
        let workspaces = home.json(&["workspace", "list", "--json"]);
        assert_eq!(
            workspaces.as_array().unwrap().len(),
            round + 1,
            "round {round}: extra workspaces left behind"
        );
        let bindings = home.json(&["binding", "list", "--json"]);
        assert_eq!(bindings.as_array().unwrap().len(), round + 1);
        let bound = bindings
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["device"] == device.as_str())
            .unwrap();
        assert_eq!(bound["workspace"], ids[0].as_str());
    }
}

const DEVICES_PER_PROCESS: usize = 100;

/// Child role: bind 100 distinct devices to the workspace named in the environment.
#[test]
#[ignore = "a child role: run by its parent test"]
fn bind_child() {
    let role = child_role();
    let home = std::env::var("BERTH_HOME").unwrap();
    let ws = WorkspaceId::new(std::env::var("BIND_WORKSPACE").unwrap()).unwrap();
    let store = FsStore::open(home).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        use berth_core::BindingStore;
        for i in 0..DEVICES_PER_PROCESS {
            let device = DeviceId::new(format!("{role}-device-{i}")).unwrap();
            store.bind(&device, &ws).await.unwrap();
        }
    });
}

#[test]
fn parallel_binds_lose_nothing() {
    let home = Home::new();
    let ws = home
        .ok(&["workspace", "create", "shared"])
        .trim()
        .to_owned();
    let children: Vec<_> = (0..RACERS)
        .map(|p| {
            let mut cmd = child("bind_child", &format!("proc{p}"));
            cmd.env("BERTH_HOME", home.path())
                .env("BIND_WORKSPACE", &ws);
            cmd.stdout(Stdio::null()).stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    for c in children {
        wait_ok(c);
    }
    let bindings = home.json(&["binding", "list", "--json"]);
    let all = bindings.as_array().unwrap();
    assert_eq!(
        all.len(),
        RACERS * DEVICES_PER_PROCESS,
        "bindings were lost"
    );
    for p in 0..RACERS {
        for i in 0..DEVICES_PER_PROCESS {
            let device = format!("proc{p}-device-{i}");
            assert!(
                all.iter()
                    .any(|b| b["device"] == device.as_str() && b["workspace"] == ws.as_str()),
                "{device} missing"
            );
        }
    }
}

/// Processes giving workspaces their ports at once on one home, twice for each workspace,
/// while others create workspaces: each workspace gets one block, the same in both of its
/// answers, that no other workspace holds, and together the lowest blocks of the range;
/// `workspace show` shows the block. Creating takes none, however many race.
#[test]
fn racing_assignments_take_disjoint_port_blocks() {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[ports]\nfirst = 40000\nlast = 40099\nblock = 5\n",
    )
    .unwrap();
    let racers = RACERS * 2;
    let spawn = |args: &[&str]| {
        let mut cmd = home.cmd(args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    let created: Vec<_> = (0..racers)
        .map(|i| spawn(&["workspace", "create", &format!("racer-{i}")]))
        .collect();
    let ids: Vec<String> = created
        .into_iter()
        .map(|c| wait_ok(c).trim().to_owned())
        .collect();
    for id in &ids {
        let ws = home.json(&["workspace", "show", id, "--json"]);
        assert!(ws["ports"].is_null(), "created with ports: {ws}");
    }
    // Every workspace asked twice at once, with creates of other workspaces among them.
    let asked: Vec<_> = ids
        .iter()
        .chain(ids.iter())
        .enumerate()
        .map(|(i, id)| {
            let asking = spawn(&["workspace", "ports", id, "--json"]);
            let creating = spawn(&["workspace", "create", &format!("bystander-{i}")]);
            (id, asking, creating)
        })
        .collect();
    let mut given = std::collections::BTreeMap::new();
    for (id, asking, creating) in asked {
        let ports: serde_json::Value = serde_json::from_str(&wait_ok(asking)).unwrap();
        wait_ok(creating);
        assert_eq!(ports["count"], 5, "{ports}");
        let first = ports["first"].as_u64().unwrap_or_else(|| panic!("{ports}"));
        assert_eq!(ports["last"].as_u64().unwrap(), first + 4, "{ports}");
        if let Some(before) = given.insert(id.clone(), first) {
            assert_eq!(before, first, "{id} was given two blocks");
        }
    }
    let mut firsts: Vec<u64> = given.values().copied().collect();
    firsts.sort();
    let want: Vec<u64> = (0..racers as u64).map(|i| 40000 + 5 * i).collect();
    assert_eq!(firsts, want, "blocks overlap, or are not the lowest free");
    for (id, first) in &given {
        let ws = home.json(&["workspace", "show", id, "--json"]);
        assert_eq!(ws["ports"]["first"], *first, "{ws}");
    }

    // A workspace berth makes by itself, a new device's, is given the next block too.
    let device_ws = home.ok(&["binding", "resolve", "phone"]).trim().to_owned();
    let ws = home.json(&["workspace", "show", &device_ws, "--json"]);
    assert!(ws["ports"].is_null(), "{ws}");
    let ports = home.json(&["workspace", "ports", &device_ws, "--json"]);
    assert_eq!(ports["first"], want.last().unwrap() + 5, "{ports}");
    let text = home.ok(&["workspace", "show", &ids[0]]);
    assert!(
        text.contains("ports") && text.contains("BERTH_PORT"),
        "{text}"
    );
}
