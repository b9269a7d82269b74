//! berth's terminal dashboard (`berth ui`, and `berth` alone on a terminal): every run of the
//! home (or of the pool's database) with its agents live, an agent's transcript as it
//! streams, its diff, the workspaces and the sessions; a question an agent waits on answered
//! in a dialog, and an agent picked, discarded, stopped, resumed or told more from the
//! keyboard.
//!
//! The map: `model.rs` is the one in-memory picture and takes in [`Update`]s; `keys.rs`
//! turns a key into a change of it and [`Action`]s; `draw.rs` draws it; `lines.rs` folds
//! transcripts and diffs into lines once; `act.rs` does an action through berth-run and
//! berth-ops, the same functions the CLI, MCP and the web page call; `app.rs` runs it on a
//! terminal; `land.rs` is the land queue's tab (its part of the model, its keys, its drawing);
//! `step_in.rs` steps aside for the person's shell (`o`) or editor (`e`) in an agent's
//! worktree, and opens `berth run attach`'s agent. Only `app.rs`, `act.rs` and
//! `step_in::suspend` do I/O, so every tab renders on a test backend from a model built in a
//! test.

#![forbid(unsafe_code)]

mod act;
mod app;
mod draw;
mod keys;
mod land;
mod lines;
mod model;
mod step_in;

pub use act::{Context, act};
pub use app::{Options, RUNS_PAGE, run};
pub use draw::draw;
pub use keys::{KEYS, key};
pub use land::{FollowedLand, LandQueue, Queued};
pub use lines::{Kind, Line, Lines};
pub use model::{
    Action, CheckShown, Detail, Input, Model, NewRun, Overlay, Pane, PickAsked, Question, Tab,
    Update,
};
pub use step_in::{Attach, EditChoice, StepIn};
