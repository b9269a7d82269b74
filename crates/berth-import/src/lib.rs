//! berth-import: import from Aptove and amux, and store migration; only the CLI calls it.
//!
//! These are one-off ways in, not operations a front end repeats, so they live beside
//! berth-ops rather than in it, and call it: an import or a migration opens the home with
//! [`berth_ops::open`] and writes through the store that [`Ops`](berth_ops::Ops) holds,
//! keeping the ids and times the records had where they came from.
//!
//! - [`import_aptove`]: Aptove's data folder (workspaces, their sessions, config, bindings).
//! - [`import_amux`]: a repository's amux workspaces, adopted as git workspaces.
//! - [`migrate_store`]: this home's records copied into another store (files, SQLite,
//!   Postgres), verified after.

#![forbid(unsafe_code)]

mod import;
mod store_migrate;

pub use import::amux::import_amux;
pub use import::aptove::default_dir as aptove_default_dir;
pub use import::aptove::import_aptove;
pub use import::{ImportItem, ImportReport, ItemKind, Outcome};
pub use store_migrate::{
    MigrateCount, MigrateItem, MigrateKind, MigrateOutcome, MigrateReport, migrate_store,
};
