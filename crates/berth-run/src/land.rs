//! Land: the merge queue for agents' work. The winners of several runs are brought onto
//! their base one after another, in the order asked, each checked on the combined tree (the
//! base as it then stands, with the agent's work merged in) before the base moves; a
//! conflict or a red check goes back, as a turn of its own session, to the agent that made
//! it.
//!
//! - `record.rs`: what a land is ([`LandRecord`], its items and steps), kept after each step;
//! - `store.rs`: where it is kept (files or the home's database) and who drives it (a lock);
//! - `choose.rs`: which agent of a run lands (`RUN`, `RUN:N`, `RUN:best`, a batch's);
//! - `drive.rs`: the steps ([`Lander`]): commit, bring up to date, resolve, check, move;
//! - `turn.rs`: the turns that hand work back, and the texts they say;
//! - `pushed.rs`: an agent of a pool whose worktree is on another node, landed from the
//!   branch it pushed;
//! - `plan.rs`: what a land would do (`--dry-run`), moving nothing;
//! - `detach.rs`: a land handed to a supervisor process of its own (`--detach`).

mod choose;
mod detach;
mod drive;
mod plan;
mod pushed;
mod record;
mod store;
mod turn;

pub use detach::{LandSupervisor, detach};
pub use drive::{DEFAULT_RETRIES, LandRequest, Lander};
pub use plan::{LandPlan, PlannedItem};
pub use record::{
    BadLandId, BadTarget, ItemState, LandId, LandItem, LandRecord, LandState, LandStep, StepKind,
    Target, Which,
};
pub use store::{HeldLand, LandStore, SeenLand};
