//! berth-core: the domain of berth, with no I/O of its own.
//!
//! - [`id`] and [`storage_path`]: validated identifiers and paths; a value of these types has
//!   already been checked, so nothing downstream re-validates or forgets to.
//! - [`store`]: the traits every backend implements (filesystem, SQLite, Postgres).
//! - [`manager`]: `WorkspaceManager`, the record-level operations built from those traits;
//!   `berth-ops` builds every front end's operations on it.
//! - [`config`]: the three configuration layers and their merge.
//! - [`error`]: the one error type and its [`ErrorKind`], which front ends map once.
//! - [`transcript`]: the `session.md` format.
//! - [`conformance`]: the behaviour every store must show, as tests any backend can run.

#![forbid(unsafe_code)]

pub mod config;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod error;
pub mod id;
pub mod manager;
pub mod model;
pub mod shown;
pub mod storage_path;
pub mod store;
pub mod transcript;

pub use error::{Error, ErrorKind, Found, Kinded, Result, kind_as};
pub use id::{DeviceId, InvalidInput, SessionId, WorkspaceId, WorkspaceName};
pub use manager::{GcPlan, WorkspaceManager};
pub use model::{
    EntryKind, GitInfo, NewSession, NewWorkspace, PortBlock, PortRange, Session, SessionStatus,
    StorageEntry, StorageScope, TokenUsage, Workspace,
};
pub use storage_path::StoragePath;
pub use store::{
    Binding, BindingStore, DeleteCondition, SessionStore, StorageStore, Syncing, TranscriptStamp,
    TurnHold, WorkspaceStore, WorkspacesJson, turn_held,
};
pub use transcript::{Message, Role, Transcript, tool_record};
