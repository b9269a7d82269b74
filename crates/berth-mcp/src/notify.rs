//! Who to tell when something changes: every connected client for `list_changed`, and the
//! clients that subscribed to a storage file for `resources/updated`.
//!
//! Over stdio there is one connection; over HTTP each MCP session is one. The [`Hub`] is
//! shared by all of a server's connections and holds them weakly, so a closed session simply
//! drops out. A subscription is keyed by what it names (a storage scope and path, with
//! `context` being `context.md` of the workspace's storage), not by its spelling, so a client
//! subscribed by name hears of a write made by id; the notification carries the URI the client
//! subscribed with.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use berth_core::{StoragePath, StorageScope};
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::{Peer, RoleServer};

/// What a subscription watches.
pub type Key = (StorageScope, StoragePath);

/// One client connection.
#[derive(Default)]
pub struct Connection {
    peer: OnceLock<Peer<RoleServer>>,
    /// Each watched key with the URIs the client subscribed to it by.
    subscriptions: Mutex<HashMap<Key, HashSet<String>>>,
}

impl Connection {
    /// Records the client's peer, once, when it has finished initializing.
    pub fn attach(&self, peer: Peer<RoleServer>) {
        let _ = self.peer.set(peer);
    }

    pub fn subscribe(&self, key: Key, uri: String) {
        lock(&self.subscriptions)
            .entry(key)
            .or_default()
            .insert(uri);
    }

    pub fn unsubscribe(&self, uri: &str) {
        let mut subs = lock(&self.subscriptions);
        subs.retain(|_, uris| {
            uris.remove(uri);
            !uris.is_empty()
        });
    }
}

/// The connections of one server.
#[derive(Default)]
pub struct Hub {
    connections: Mutex<Vec<Weak<Connection>>>,
}

impl Hub {
    /// Adds `connection`, once however often it is called.
    pub fn register(&self, connection: &Arc<Connection>) {
        let mut all = lock(&self.connections);
        all.retain(|c| c.strong_count() > 0);
        let weak = Arc::downgrade(connection);
        if !all.iter().any(|c| c.ptr_eq(&weak)) {
            all.push(weak);
        }
    }

    /// The live connections whose client has initialized.
    fn peers(&self) -> Vec<(Arc<Connection>, Peer<RoleServer>)> {
        lock(&self.connections)
            .iter()
            .filter_map(Weak::upgrade)
            .filter_map(|c| {
                let peer = c.peer.get()?.clone();
                Some((c, peer))
            })
            .collect()
    }

    /// Tells every client the resource list changed (a workspace came or went). A client that
    /// has gone away is skipped: a notification is best effort by nature.
    pub async fn list_changed(&self) {
        for (_, peer) in self.peers() {
            let _ = peer.notify_resource_list_changed().await;
        }
    }

    /// Tells the clients subscribed to `key` that it was written.
    pub async fn updated(&self, key: &Key) {
        for (connection, peer) in self.peers() {
            let uris: Vec<String> = lock(&connection.subscriptions)
                .get(key)
                .map(|u| u.iter().cloned().collect())
                .unwrap_or_default();
            for uri in uris {
                let _ = peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await;
            }
        }
    }
}

/// A poisoned lock here only means another request panicked mid-update of a set of URIs; the
/// set itself is still whole, so carry on with it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_registers_once_and_leaves_when_dropped() {
        let hub = Hub::default();
        let c = Arc::new(Connection::default());
        hub.register(&c);
        hub.register(&c);
        assert_eq!(lock(&hub.connections).len(), 1);
        let other = Arc::new(Connection::default());
        hub.register(&other);
        drop(c);
        hub.register(&other);
        assert_eq!(lock(&hub.connections).len(), 1);
    }
}
