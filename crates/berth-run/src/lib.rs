//! berth-run: agents put to work in workspaces, several side by side, watched, checked, and
//! summed up, for every front end that starts runs (`berth run` today; `berth serve` and its
//! web page next).
//!
//! A run is one task given to one or more agents: berth's own, or any ACP agent by its
//! command (`acp_agent`). Each agent gets a git workspace of its own
//! (made with the usual create rules: spares, `[git] copy` and `setup`), and a berth session
//! in it titled after the task, whose transcript keeps the task and the answer as they stream.
//! The agents run at once; their events come through one channel as [`RunEvent`]s, tagged
//! with the agent's index, in the order each agent produced them. As each agent ends, the
//! run's check command (`--check`) runs in its worktree when it finished having changed
//! something (at most `[run] check_jobs` at once); once every agent has ended and been
//! checked, a [`RunEvent::Summary`] closes the channel: per agent, how it stopped, what it
//! changed against its base, the check's result, tokens and time.
//!
//! Permissions are a policy: tools the policy allows run; every other call that writes or runs
//! is refused, the agent is told it was the policy (an error result), and the refusal is an
//! event; unless the run asks a person (`--ask`, [`ask`]), and then the call waits for an
//! answer ([`Run::answer`]) or the run's wait. Stopping a run ([`Run::stop`]) cancels every turn at once; the
//! text already streamed stays in the transcripts, marked interrupted.

mod acp_agent;
mod agents;
mod ask;
mod batch;
mod check;
mod compare;
mod detach;
mod error;
mod event;
mod evidence;
mod finish;
mod follow;
mod foresight;
mod kept;
mod land;
mod lifecycle;
mod merged;
mod notices;
mod preflight;
mod pull_request;
mod pushed;
mod request;
mod running;
mod stderr;
mod supervisor;
mod tasks;
mod tellings;
mod terminals;
mod worker;

pub use agents::{
    AgentChoice, AgentNumber, AgentSpec, builtin_agents, check_model_name, choose_agents,
    parse_agent, parse_agents,
};
pub use ask::{Answer, DEFAULT_ASK_TIMEOUT};
pub use batch::{BatchRun, StartedBatch};
pub use berth_agent::Policy;
pub use berth_git::FileName;
pub use check::{CheckResult, KEPT_HEAD, KEPT_TAIL, QUOTED_LINES, read_kept as read_kept_check};
pub use compare::{Compared, Comparison, compare, compare_foreseen};
pub use detach::{Supervise, SuperviseArgs};
pub use error::RunError;
pub use event::{AgentState, AgentStatus, AgentSummary, RunEvent, Waiting};
pub use evidence::{Choice, Pickable, best, merged, pick_refusal, pickable};
pub use finish::{
    Cleaned, DeletedRun, Dropped, Pick, Picked, Restored, Undone, clean, cleanable, delete_run,
    delete_workspace, discard, pick, restore, undo_pick,
};
pub use follow::{Changes, Follow, Questions};
pub use foresight::{
    Against, AgentForesight, Conflict, Foresight, ForesightError, Reason, Trial, Unjudged, Unknown,
};
pub use kept::{
    AgentOutcome, AgentRecord, BatchId, BatchPlace, KeptError, MergeRecord, PoolPlace, Review,
    ReviewStage, RunId, RunPage, RunRecord, RunState, RunStore, StopRequest, StoredRequest,
    Supervision, Tell, batch_runs, resolve_batch,
};
pub use land::DEFAULT_RETRIES as DEFAULT_LAND_RETRIES;
pub use land::detach as detach_land;
pub use land::{
    BadLandId, BadTarget, HeldLand, ItemState, LandId, LandItem, LandPlan, LandRecord, LandRequest,
    LandState, LandStep, LandStore, LandSupervisor, Lander, PlannedItem, SeenLand, StepKind,
    Target, Which,
};
pub use lifecycle::{How, Queue, Runs, Started, Telling, Told};
pub use merged::merge_message;
pub use pull_request::pull_request_text;
pub use pushed::{merge_workspace, pushed_url, workspace_diff};
pub use request::{
    Budget, DEFAULT_CHECK_TIMEOUT_SECS, NAME_FROM_TASK_MAX, Resume, RunRequest, ask_wait,
    name_from_task,
};
pub use stderr::read_kept as read_kept_stderr;
pub use supervisor::{Next, Supervised};
pub use tasks::{FileTask, TASKS_MAX, TasksError, parse_tasks};
pub use worker::WorkerOptions;
