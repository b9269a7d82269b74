//! Device bindings: which workspace a device is bound to, rebinding, first-come binding, and
//! unbinding by device or by workspace.

use chrono::Utc;

use super::{Backend, named};
use crate::id::DeviceId;

pub async fn bindings(b: Backend) {
    let now = Utc::now();
    let w1 = b
        .workspaces
        .create(named("w1", "one"), now)
        .await
        .unwrap()
        .id;
    let w2 = b
        .workspaces
        .create(named("w2", "two"), now)
        .await
        .unwrap()
        .id;
    let d1 = DeviceId::new("phone 1 / ü").unwrap();
    let d2 = DeviceId::new("laptop").unwrap();
    assert_eq!(b.bindings.resolve(&d1).await.unwrap(), None);
    assert_eq!(b.bindings.bind(&d1, &w1).await.unwrap(), None);
    assert_eq!(b.bindings.bind(&d1, &w2).await.unwrap(), Some(w1.clone()));
    assert_eq!(
        b.bindings.bind_if_absent(&d1, &w1).await.unwrap(),
        w2,
        "existing binding wins"
    );
    assert_eq!(b.bindings.bind_if_absent(&d2, &w2).await.unwrap(), w2);
    let list = b.bindings.list().await.unwrap();
    let pairs: Vec<_> = list
        .iter()
        .map(|b| (b.device.as_str(), b.workspace.as_str()))
        .collect();
    assert_eq!(pairs, vec![("laptop", "w2"), ("phone 1 / ü", "w2")]);
    let mut gone = b.bindings.unbind_workspace(&w2).await.unwrap();
    gone.sort();
    assert_eq!(gone, vec![d2.clone(), d1.clone()]);
    assert!(b.bindings.list().await.unwrap().is_empty());
    b.bindings.bind(&d1, &w1).await.unwrap();
    assert_eq!(b.bindings.unbind(&d1).await.unwrap(), Some(w1));
    assert_eq!(b.bindings.unbind(&d1).await.unwrap(), None);
}
