//! `WorkspaceManager` over a store: resolving a workspace by id, name or prefix, a device's
//! workspace, the default workspace, and garbage collection.

use chrono::{Duration, Utc};

use super::{Backend, named, wid};
use crate::error::Error;
use crate::id::DeviceId;
use crate::store::DeleteCondition;

pub async fn manager_resolution(b: Backend) {
    let m = b.manager();
    let now = Utc::now();
    b.workspaces
        .create(named("abcd1111", "alpha"), now)
        .await
        .unwrap();
    b.workspaces
        .create(named("abcd2222", "abcd1"), now)
        .await
        .unwrap();
    b.workspaces
        .create(named("zzzz9999", "abcd"), now)
        .await
        .unwrap();
    assert_eq!(m.resolve("abcd1111").await.unwrap().id.as_str(), "abcd1111");
    assert_eq!(m.resolve("alpha").await.unwrap().id.as_str(), "abcd1111");
    // An exact name beats a prefix match.
    assert_eq!(m.resolve("abcd1").await.unwrap().id.as_str(), "abcd2222");
    assert_eq!(m.resolve("abcd").await.unwrap().id.as_str(), "zzzz9999");
    assert_eq!(m.resolve("abcd2").await.unwrap().id.as_str(), "abcd2222");
    assert_eq!(m.resolve("zzzz").await.unwrap().id.as_str(), "zzzz9999");
    match m.resolve("abc").await {
        Err(Error::NotFound { .. }) => {}
        other => panic!("a 3-character prefix must not resolve: {other:?}"),
    }
    b.workspaces
        .create(named("zzzz8888", "other"), now)
        .await
        .unwrap();
    match m.resolve("zzzz").await {
        Err(Error::Ambiguous { candidates, .. }) => {
            assert_eq!(candidates, vec!["zzzz8888 (other)", "zzzz9999 (abcd)"]);
        }
        other => panic!("expected ambiguity: {other:?}"),
    }
    for hostile in ["../abcd1111", "", "..", "/etc/passwd", "abcd1111/.."] {
        assert!(m.resolve(hostile).await.is_err(), "{hostile:?}");
    }
}

pub async fn manager_device_and_delete(b: Backend) {
    let m = b.manager();
    let device = DeviceId::new("device-1").unwrap();
    let ws = m.resolve_device(&device).await.unwrap();
    assert_eq!(m.resolve_device(&device).await.unwrap().id, ws.id);
    assert_eq!(m.list().await.unwrap().len(), 1);
    let other = DeviceId::new("device-2").unwrap();
    m.bind(&other, &ws).await.unwrap();
    let mut unbound = m.delete_record(&ws.id).await.unwrap();
    unbound.sort();
    assert_eq!(unbound, vec![device.clone(), other]);
    assert!(m.list_bindings().await.unwrap().is_empty());
    // The device gets a fresh workspace after its old one is gone.
    let again = m.resolve_device(&device).await.unwrap();
    assert_ne!(again.id, ws.id);
    // A binding left dangling (its workspace removed behind the manager's back) is replaced.
    b.workspaces
        .delete(&again.id, DeleteCondition::Always)
        .await
        .unwrap();
    let third = m.resolve_device(&device).await.unwrap();
    assert_ne!(third.id, again.id);
    assert_eq!(m.list_bindings().await.unwrap().len(), 1);
}

pub async fn manager_gc_and_default(b: Backend) {
    let m = b.manager();
    let old = Utc::now() - Duration::days(200);
    b.workspaces.create(named("old", "old"), old).await.unwrap();
    let d = m.default_workspace().await.unwrap();
    assert!(d.id.is_default());
    assert_eq!(m.default_workspace().await.unwrap().id, d.id);
    b.workspaces.update_accessed(&d.id, old).await.unwrap();
    let dev = DeviceId::new("d").unwrap();
    m.bind(&dev, &b.workspaces.load(&wid("old")).await.unwrap())
        .await
        .unwrap();
    let plan = m.gc_plan(Duration::days(90)).await.unwrap();
    assert_eq!(
        plan.stale.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        vec!["old"]
    );
    assert!(
        b.workspaces.load(&wid("old")).await.is_ok(),
        "a plan removes nothing"
    );
    // A workspace used since the plan is not removed.
    let fresh = b.workspaces.load(&wid("old")).await.unwrap();
    m.touch(&fresh).await.unwrap();
    assert!(
        !m.delete_record_if_idle(&fresh.id, plan.cutoff)
            .await
            .unwrap()
    );
    // Planned again from now, it is stale once more and goes.
    let plan = m.gc_plan(Duration::zero()).await.unwrap();
    assert_eq!(plan.stale.len(), 1, "default is never planned");
    for ws in &plan.stale {
        assert!(m.delete_record_if_idle(&ws.id, plan.cutoff).await.unwrap());
    }
    assert!(
        m.list_bindings().await.unwrap().is_empty(),
        "gc unbinds what it removes"
    );
    assert_eq!(
        m.list().await.unwrap().len(),
        1,
        "default is never collected"
    );
}
