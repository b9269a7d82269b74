//! Driving a land: each agent in the order given, its work committed, brought up to date
//! with its base as the base now stands, checked on that combined tree, and only then the
//! base moved; a conflict or a red check handed back to the agent, at most `retries` turns.
//!
//! Every step is written into the land's record before the next begins, and every git step
//! is safe to do again, so a land cut off anywhere goes on from its record: an agent whose
//! combined commit was recorded is looked for on the base first (an ancestor of the base, or
//! for a squash a commit carrying the land's mark), and the base moves only by
//! compare-and-swap from the tip the work was combined with.

use std::path::PathBuf;

use berth_agent::Agent;
use berth_git::{Brought, GitError, MergeMode, Repo};
use berth_ops::{Ops, Workspace};
use chrono::Utc;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::choose::{choose, has_work};
use super::record::{
    ItemState, LandId, LandItem, LandRecord, LandState, LandStep, Pending, StepKind, Target, Which,
    mark,
};
use super::store::{HeldLand, LandStore};
use super::turn::message;
use crate::check::CheckResult;
use crate::kept::{AgentOutcome, MergeRecord, RunRecord, RunStore};

/// How often the base may move under one agent's land before it is left for a later try.
pub(super) const BASE_MOVES: usize = 5;

/// Turns an agent gets to resolve a conflict or mend a red check, unless told otherwise:
/// the one default of every front end.
pub const DEFAULT_RETRIES: u32 = 2;

/// What to land, and how.
#[derive(Debug, Clone)]
pub struct LandRequest {
    pub targets: Vec<Target>,
    pub mode: MergeMode,
    /// Turns each agent gets to resolve a conflict or mend a red check.
    pub retries: u32,
    /// Whether conflicts and red checks go back to the agent (`--no-resolve`: no).
    pub resolve: bool,
    /// The folder the land was asked in.
    pub dir: PathBuf,
    /// The batch it lands, when it does.
    pub batch: Option<String>,
}

/// Why a land stops before its queue is through: it is resumed later.
pub(super) struct Halt(pub(super) berth_ops::Error);

impl From<berth_ops::Error> for Halt {
    fn from(e: berth_ops::Error) -> Halt {
        Halt(e)
    }
}

/// Drives lands: the one way the CLI, a detached supervisor, the dashboard, the review page
/// and MCP land agents' work.
#[derive(Clone)]
pub struct Lander {
    pub(super) ops: Ops,
    pub(super) runs: RunStore,
    pub(super) lands: LandStore,
    /// berth's own agent, for the turns of a run of berth's agents.
    pub(super) agent: Agent,
    pub(super) steps: Option<UnboundedSender<LandStep>>,
    pub(super) stop: CancellationToken,
    /// Who hosts the agents' turns: a server keeps SIGTERM for its own shutdown.
    pub(super) host: crate::supervisor::Host,
}

/// What one agent's work came to.
pub(super) enum Settled {
    Landed,
    Left(String),
}

pub(super) async fn git<T: Send + 'static>(
    job: impl FnOnce() -> berth_git::Result<T> + Send + 'static,
) -> berth_ops::Result<T> {
    berth_ops::blocking(move || Ok(job()?)).await
}

pub(super) fn refused(message: String) -> berth_ops::Error {
    berth_ops::Error::refused(message)
}

impl Lander {
    pub fn new(ops: Ops, runs: RunStore, agent: Agent) -> Lander {
        let lands = LandStore::open(&ops).with_node(runs.node());
        Lander {
            ops,
            runs,
            lands,
            agent,
            steps: None,
            stop: CancellationToken::new(),
            host: crate::supervisor::Host::Own,
        }
    }

    /// The agents' turns hosted by a server (`berth serve`, `berth mcp`), which keeps SIGTERM
    /// for its own shutdown.
    pub fn hosted(mut self) -> Lander {
        self.host = crate::supervisor::Host::Server;
        self
    }

    /// Every step, as it is recorded, on `steps` too.
    pub fn with_steps(mut self, steps: UnboundedSender<LandStep>) -> Lander {
        self.steps = Some(steps);
        self
    }

    /// Cancelling it stops the land after its current step (a turn under way is stopped).
    pub fn stopper(&self) -> CancellationToken {
        self.stop.clone()
    }

    pub fn store(&self) -> &LandStore {
        &self.lands
    }

    /// Records a land of `request` and takes it for this process. Refused before anything is
    /// recorded when a run is unknown or not over, an agent cannot be chosen, or has no work.
    pub async fn create(&self, request: LandRequest) -> berth_ops::Result<HeldLand> {
        if request.targets.is_empty() {
            return Err(berth_ops::Error::invalid(
                "name at least one run to land: `berth land RUN[:N|best] …`, or `--batch ID`",
            ));
        }
        let mut items: Vec<LandItem> = Vec::new();
        for target in &request.targets {
            let item = self.item(target).await?;
            if items.iter().any(|i| i.run == item.run) {
                return Err(berth_ops::Error::invalid(format!(
                    "run {} is named twice: its agents are alternatives, so one of them lands",
                    item.run
                )));
            }
            items.push(item);
        }
        let record = LandRecord {
            id: LandId::generate(),
            created_at: Utc::now(),
            ended_at: None,
            state: LandState::Landing,
            node: self.runs.node().to_owned(),
            pid: Some(std::process::id()),
            dir: request.dir,
            mode: request.mode,
            retries: request.retries,
            resolve: request.resolve,
            batch: request.batch,
            message: None,
            items,
            steps: Vec::new(),
        };
        self.lands.create(record).await
    }

    /// One item of a new land: its run, and the agent `target` chooses.
    pub(super) async fn item(&self, target: &Target) -> berth_ops::Result<LandItem> {
        let kept = |e: crate::kept::KeptError| berth_ops::Error::rule(e.kind(), e.to_string());
        let id = self.runs.resolve(&target.run).await.map_err(kept)?;
        let record = self.runs.load(&id).await.map_err(kept)?;
        if !record.state.is_over() {
            return Err(refused(format!(
                "run {id} is still {}: land it once it is over (`berth run wait {id}`)",
                record.state.as_str()
            )));
        }
        let asked = match target.which {
            Which::Only => id.to_string(),
            Which::Best => format!("{id}:best"),
            Which::Agent(i) => format!("{id}:{}", i + 1),
        };
        let agent = choose(&record, target.which)?;
        let a = &record.agents[agent];
        let (state, reason) = match a.outcome {
            Some(AgentOutcome::Merged) => (
                ItemState::Skipped,
                Some(format!("agent {} was picked already", agent + 1)),
            ),
            Some(AgentOutcome::Discarded) => {
                return Err(refused(format!(
                    "agent {} of run {id} was discarded: `berth run restore {id} {}` brings its work back first",
                    agent + 1,
                    agent + 1
                )));
            }
            _ => (ItemState::Waiting, None),
        };
        if state == ItemState::Waiting {
            has_work(&record, agent)?;
        }
        Ok(LandItem {
            run: id,
            asked,
            which: target.which,
            agent: Some(agent),
            state,
            reason,
            into: None,
            before: None,
            tip: None,
            after: None,
            pending: None,
            turns: 0,
            check: None,
            kept: Vec::new(),
        })
    }

    /// Takes a land that is not over and nobody drives (`--resume`).
    pub async fn take(&self, id: &LandId) -> berth_ops::Result<HeldLand> {
        let held = self.lands.take(id).await?;
        if held.record.state == LandState::Over
            && held.record.items.iter().all(|i| i.state.is_done())
        {
            return Err(refused(format!(
                "land {id} is over: every agent it names landed"
            )));
        }
        if held.record.node != self.runs.node() {
            return Err(refused(format!(
                "land {id} was driven on node {}, whose repository it moves: resume it there",
                held.record.node
            )));
        }
        Ok(held)
    }

    /// Records `step` in the land and passes it on.
    pub(super) async fn step(
        &self,
        held: &mut HeldLand,
        item: Option<usize>,
        step: StepKind,
        text: String,
    ) -> berth_ops::Result<()> {
        self.step_with(held, item, step, text, Vec::new(), None)
            .await
    }

    pub(super) async fn step_with(
        &self,
        held: &mut HeldLand,
        item: Option<usize>,
        step: StepKind,
        text: String,
        files: Vec<String>,
        check: Option<CheckResult>,
    ) -> berth_ops::Result<()> {
        let of = item.and_then(|k| held.record.items.get(k));
        let step = LandStep {
            land: held.record.id.clone(),
            at: Utc::now(),
            step,
            item,
            run: of.map(|i| i.run.clone()),
            agent: of.and_then(|i| i.agent).map(|a| a + 1),
            text,
            files,
            check,
        };
        held.record.steps.push(step.clone());
        self.lands.save(held).await?;
        if let Some(tx) = &self.steps {
            let _ = tx.send(step);
        }
        Ok(())
    }

    /// Records the check run on item `k`'s combined tree, as its step and its item's check.
    pub(super) async fn checked(
        &self,
        held: &mut HeldLand,
        k: usize,
        result: &CheckResult,
    ) -> berth_ops::Result<()> {
        held.record.items[k].check = Some(result.clone());
        let text = format!(
            "check `{}` on the combined tree: {}",
            result.command,
            result.described()
        );
        self.step_with(
            held,
            Some(k),
            StepKind::Checked,
            text,
            Vec::new(),
            Some(result.clone()),
        )
        .await
    }

    /// Drives the held land until every agent is landed or left, or it stops (Ctrl-C, a
    /// checkout in the way): then `--resume` goes on. The record as it ended.
    #[tracing::instrument(name = "land.drive", skip_all)]
    pub async fn drive(&self, mut held: HeldLand) -> berth_ops::Result<LandRecord> {
        held.record.state = LandState::Landing;
        held.record.pid = Some(std::process::id());
        held.record.message = None;
        let count = held.record.items.len();
        self.step(
            &mut held,
            None,
            StepKind::Started,
            format!("landing {count} agent(s)"),
        )
        .await?;
        for k in 0..count {
            if held.record.items[k].state.is_done() {
                continue;
            }
            if self.stop.is_cancelled() {
                return self.stopped(held, "stopped before it was through").await;
            }
            let settled = match self.land_item(&mut held, k).await {
                Ok(s) => s,
                Err(Halt(e)) => return self.stopped(held, &e.to_string()).await,
            };
            let item = &mut held.record.items[k];
            match settled {
                Settled::Landed => {}
                Settled::Left(reason) => {
                    item.state = ItemState::Left;
                    item.reason = Some(reason.clone());
                    self.step(&mut held, Some(k), StepKind::Left, reason)
                        .await?;
                }
            }
        }
        held.record.state = LandState::Over;
        held.record.ended_at = Some(Utc::now());
        held.record.pid = None;
        let (landed, left) = held.record.tally();
        let text = match left.is_empty() {
            true => format!("landed {}", landed.join(" ")),
            false => format!(
                "landed {}; left {}",
                if landed.is_empty() {
                    "nothing".to_owned()
                } else {
                    landed.join(" ")
                },
                left.join(" ")
            ),
        };
        self.step(&mut held, None, StepKind::Over, text).await?;
        self.notify(&held.record);
        Ok(held.record)
    }

    async fn stopped(&self, mut held: HeldLand, why: &str) -> berth_ops::Result<LandRecord> {
        held.record.state = LandState::Stopped;
        held.record.pid = None;
        held.record.message = Some(why.to_owned());
        let id = held.record.id.clone();
        self.step(
            &mut held,
            None,
            StepKind::Stopped,
            format!("{why}; `berth land --resume {id}` goes on"),
        )
        .await?;
        Ok(held.record)
    }

    /// Lands item `k`, or says why it is left.
    async fn land_item(&self, held: &mut HeldLand, k: usize) -> Result<Settled, Halt> {
        if held.record.items[k].state == ItemState::Left {
            // Tried again (`--resume`): with its turns afresh, since what left it may have
            // been mended by hand meanwhile.
            let it = &mut held.record.items[k];
            it.turns = 0;
            it.reason = None;
        }
        let item = held.record.items[k].clone();
        let agent = item.agent.unwrap_or(0);
        let kept = |e: crate::kept::KeptError| berth_ops::Error::rule(e.kind(), e.to_string());
        let run = self.runs.load(&item.run).await.map_err(kept)?;
        if !run.state.is_over() {
            return Ok(Settled::Left(format!(
                "run {} is running again: land it once it is over",
                item.run
            )));
        }
        let Some(a) = run.agents.get(agent) else {
            return Ok(Settled::Left(format!(
                "run {} has no agent {}",
                item.run,
                agent + 1
            )));
        };
        if a.outcome == Some(AgentOutcome::Merged) {
            return self.merged_already(held, k, a).await;
        }
        let Some(ws) = a.workspace.clone() else {
            return Ok(Settled::Left("its agent never got a workspace".to_owned()));
        };
        let ws = self.ops.resolve_workspace(&ws).await?;
        let Some(gi) = ws.git.clone() else {
            return Ok(Settled::Left(
                "its workspace is not a git workspace".to_owned(),
            ));
        };
        // A worktree on another machine (a pool's node made it there), not dropped: its
        // pushed branch. An archived one may be this land's own, cut off after it landed.
        if !gi.worktree.is_dir() && ws.archived_at.is_none() {
            return self.land_pushed(held, k, &run, &ws).await;
        }
        if !gi.repo.is_dir() {
            return Ok(Settled::Left(format!(
                "its repository {} is not on this machine",
                gi.repo.display()
            )));
        }
        let repo = git({
            let r = gi.repo.clone();
            move || Repo::open(&r)
        })
        .await?;
        let into = {
            let (r, b) = (repo.clone(), gi.base_branch.clone());
            berth_ops::blocking(move || berth_ops::local_base(&r, &b)).await?
        };
        held.record.items[k].state = ItemState::Landing;
        held.record.items[k].into = Some(into.clone());
        let place = Place {
            run,
            agent,
            ws,
            wt: gi.worktree.clone(),
            repo,
            into,
        };
        if self.landed_before(held, k, &place).await? {
            return self
                .finish_landed(held, k, &place)
                .await
                .map(|()| Settled::Landed);
        }
        if !place.wt.is_dir() {
            let run = &place.run.id;
            return Ok(Settled::Left(format!(
                "its workspace was archived meanwhile: `berth run restore {run} {}` brings it back",
                agent + 1
            )));
        }
        self.step(
            held,
            Some(k),
            StepKind::Chosen,
            format!(
                "agent {} ({}) onto {}",
                agent + 1,
                place.run.agents[agent].label,
                place.into
            ),
        )
        .await?;
        self.combine_and_land(held, k, &place).await
    }
}

impl Lander {
    /// Item `k`, whose agent `a` is merged already: by this land, cut off before it
    /// recorded so, or by a pick meanwhile (counted as landed, and skipped).
    async fn merged_already(
        &self,
        held: &mut HeldLand,
        k: usize,
        a: &crate::kept::AgentRecord,
    ) -> Result<Settled, Halt> {
        let it = &mut held.record.items[k];
        let (step, text) = match it.tip.is_some() {
            true => {
                it.state = ItemState::Landed;
                it.after = a.merge.as_ref().map(|m| m.after.clone());
                (
                    StepKind::Landed,
                    "landed before the land was cut off".to_owned(),
                )
            }
            false => {
                let why = format!("agent {} was picked meanwhile", it.agent.unwrap_or(0) + 1);
                it.state = ItemState::Skipped;
                it.reason = Some(why.clone());
                (StepKind::Skipped, why)
            }
        };
        self.step(held, Some(k), step, text).await?;
        Ok(Settled::Landed)
    }
}

/// Where one agent's work lands.
pub(super) struct Place {
    pub run: RunRecord,
    pub agent: usize,
    pub ws: Workspace,
    pub wt: PathBuf,
    pub repo: Repo,
    pub into: String,
}

impl Place {
    pub(super) fn mark(&self, land: &LandId) -> String {
        mark(land, &self.run.id, self.agent)
    }
}

/// The ref a land keeps an agent's tip on while its worktree holds a conflict, and where an
/// unfinished resolution is kept.
pub(super) fn keep_ref(land: &LandId, k: usize, what: &str) -> String {
    format!("refs/berth/land/{land}/{}/{what}", k + 1)
}

impl Lander {
    /// Whether item `k` was landed by an earlier drive that could not record it: its
    /// combined commit in the base's history, or for a squash a commit with its mark.
    pub(super) async fn landed_before(
        &self,
        held: &mut HeldLand,
        k: usize,
        place: &Place,
    ) -> Result<bool, Halt> {
        let item = &held.record.items[k];
        let (Some(before), Some(tip)) = (item.before.clone(), item.tip.clone()) else {
            return Ok(false);
        };
        let (repo, into, mode) = (place.repo.clone(), place.into.clone(), held.record.mode);
        let mark = place.mark(&held.record.id);
        let found = git(move || {
            let now = repo.branch_tip(&into)?;
            match mode {
                MergeMode::Squash => repo.find_marked(&into, &before, &mark),
                _ => Ok(repo.contains(&now, &tip)?.then_some(now)),
            }
        })
        .await?;
        match found {
            Some(after) => {
                held.record.items[k].after = Some(after);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Commits the agent's work, brings it up to date with the base, checks it there (handing
    /// conflicts and red checks back), and moves the base: again from the top when the base
    /// moved meanwhile.
    async fn combine_and_land(
        &self,
        held: &mut HeldLand,
        k: usize,
        place: &Place,
    ) -> Result<Settled, Halt> {
        let land = held.record.id.clone();
        let msg = message(
            &place.run,
            place.agent,
            &place.mark(&land),
            held.record.mode,
        );
        if let Some(pending) = held.record.items[k].pending.clone() {
            // Cut off while its agent resolved: the conflict is in its worktree still.
            if let Some(left) = self.resolve(held, k, place, &pending, &msg).await? {
                return Ok(left);
            }
        }
        // The agent's own work, as a pick commits it; the land's mark goes only on the
        // commits that land it (a merge, a resolution, a squash).
        let committed = git({
            let (wt, m) = (
                place.wt.clone(),
                crate::merged::merge_message(&place.run, place.agent),
            );
            move || berth_git::commit_all(&wt, &m)
        })
        .await;
        // Its worktree's own trouble (a repository made inside it) is this agent's, not the
        // queue's: it is left, and the queue goes on.
        let committed = match committed {
            Ok(c) => c,
            Err(e) => return Ok(Settled::Left(format!("its work cannot be committed: {e}"))),
        };
        if let Some(commit) = committed {
            self.step(
                held,
                Some(k),
                StepKind::Committed,
                format!("its uncommitted work as {}", short(&commit)),
            )
            .await?;
        }
        for _ in 0..BASE_MOVES {
            let Some((base, tip, check)) = self.combine(held, k, place, &msg).await? else {
                return Ok(self.left_reason(held, k));
            };
            let (tip, check) = match self.mend_check(held, k, place, tip, check).await? {
                Ok(done) => done,
                Err(why) => return Ok(Settled::Left(why)),
            };
            if self
                .move_base(held, k, place, base, tip, check, &msg)
                .await?
            {
                return Ok(Settled::Landed);
            }
            // Someone moved the base meanwhile: combined again with where it is now.
        }
        Ok(Settled::Left(format!(
            "{} moved {BASE_MOVES} times while it was being landed; `berth land --resume {land}` tries again",
            place.into
        )))
    }

    /// Moves the base from `base` to what lands `tip` (checked, `check`), recorded first so
    /// a resume finds it; then item `k` is landed. `false` when the base moved meanwhile:
    /// nothing changed, and the work is combined again.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn move_base(
        &self,
        held: &mut HeldLand,
        k: usize,
        place: &Place,
        base: String,
        tip: String,
        check: Option<CheckResult>,
        msg: &str,
    ) -> Result<bool, Halt> {
        let item = &mut held.record.items[k];
        item.before = Some(base.clone());
        item.tip = Some(tip.clone());
        item.check = check;
        self.lands.save(held).await?;
        let (repo, into, mode, m) = (
            place.repo.clone(),
            place.into.clone(),
            held.record.mode,
            msg.to_owned(),
        );
        let moved = berth_ops::blocking(move || {
            let after = repo.landing_commit(&base, &tip, mode, &m)?;
            match repo.move_branch(&into, &base, &after) {
                Ok(()) => Ok(Some(after)),
                Err(GitError::Moved { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
        .await?;
        let Some(after) = moved else {
            return Ok(false);
        };
        held.record.items[k].after = Some(after);
        self.finish_landed(held, k, place).await?;
        Ok(true)
    }

    fn left_reason(&self, held: &HeldLand, k: usize) -> Settled {
        Settled::Left(
            held.record.items[k]
                .reason
                .clone()
                .unwrap_or_else(|| "it could not be combined with its base".to_owned()),
        )
    }

    /// The agent's work brought up to date with the base as it stands: the base's tip, the
    /// combined tip, and the check already run on it by a resolution's turn. `None` when it
    /// was left (the reason is in the item).
    async fn combine(
        &self,
        held: &mut HeldLand,
        k: usize,
        place: &Place,
        msg: &str,
    ) -> Result<Option<(String, String, Option<CheckResult>)>, Halt> {
        let keep = keep_ref(&held.record.id, k, "work");
        let (repo, wt, into, mode, m) = (
            place.repo.clone(),
            place.wt.clone(),
            place.into.clone(),
            held.record.mode,
            msg.to_owned(),
        );
        let (base, brought) = git(move || {
            let base = repo.branch_tip(&into)?;
            let brought = repo.bring_up_to_date(&wt, &into, &base, mode, &m, &keep)?;
            Ok((base, brought))
        })
        .await?;
        match brought {
            Brought::UpToDate { tip } => {
                self.step(
                    held,
                    Some(k),
                    StepKind::UpToDate,
                    format!("{} is in its history already", place.into),
                )
                .await?;
                Ok(Some((base, tip, None)))
            }
            Brought::Moved { tip } => {
                self.step(
                    held,
                    Some(k),
                    StepKind::Merged,
                    format!("brought up to date with {} as {}", place.into, short(&tip)),
                )
                .await?;
                Ok(Some((base, tip, None)))
            }
            Brought::Conflicted { base, work, files } => {
                let pending = Pending { base, work, files };
                held.record.items[k].pending = Some(pending.clone());
                self.step_with(
                    held,
                    Some(k),
                    StepKind::Conflict,
                    format!("conflicts with {} in {}", place.into, shown(&pending.files)),
                    pending.files.clone(),
                    None,
                )
                .await?;
                match self.resolve(held, k, place, &pending, msg).await? {
                    Some(Settled::Left(why)) => {
                        held.record.items[k].reason = Some(why);
                        Ok(None)
                    }
                    Some(Settled::Landed) => Ok(None),
                    None => {
                        let item = &held.record.items[k];
                        let tip = item.tip.clone().unwrap_or_default();
                        Ok(Some((pending.base, tip, item.check.clone())))
                    }
                }
            }
        }
    }

    /// Runs the run's check in the agent's worktree, confined, as the run ran it.
    pub(super) async fn run_check(
        &self,
        held: &HeldLand,
        k: usize,
        place: &Place,
        command: &str,
    ) -> berth_ops::Result<CheckResult> {
        let ws = self.ops.with_ports(place.ws.clone()).await?;
        let env = self.ops.workspace_env(&ws);
        let sandbox = self.ops.sandbox(Some(&ws), &place.wt).await;
        let keep = self
            .lands
            .dir(&held.record.id)
            .join(format!("{}.check", k + 1));
        Ok(crate::check::run(
            place.wt.clone(),
            command.to_owned(),
            env,
            std::time::Duration::from_secs(place.run.request.check_timeout_secs),
            sandbox,
            self.stop.child_token(),
            Some(keep),
        )
        .await)
    }

    /// Records item `k` landed: its agent merged (with where, for `run pick --undo`), its
    /// workspace archived and the others of its run dropped, as a pick does.
    pub(super) async fn finish_landed(
        &self,
        held: &mut HeldLand,
        k: usize,
        place: &Place,
    ) -> Result<(), Halt> {
        let item = held.record.items[k].clone();
        let merge = MergeRecord {
            into: place.into.clone(),
            before: item.before.clone().unwrap_or_default(),
            after: item.after.clone().unwrap_or_default(),
            repo: place.repo.root().to_path_buf(),
        };
        let mut notes = Vec::new();
        if let Err(why) =
            crate::merged::record_merged(&self.runs, &place.run, place.agent, Some(merge)).await
        {
            notes.push(why);
        }
        let keep = keep_ref(&held.record.id, k, "work");
        let repo = place.repo.clone();
        let _ = git(move || repo.delete_ref(&keep)).await;
        // A workspace on another node is that node's to remove.
        let here = place.ws.git.as_ref().is_some_and(|g| g.worktree.is_dir());
        if here && let Err(e) = self.ops.archive_workspace(place.ws.id.as_str()).await {
            notes.push(format!("its workspace could not be archived: {e}"));
        }
        for (i, a) in place.run.agents.iter().enumerate() {
            if i == place.agent || a.outcome.is_some() {
                continue;
            }
            match crate::finish::drop_agent(
                &self.ops,
                &self.runs,
                &place.run.id,
                i,
                a.workspace.as_deref(),
            )
            .await
            {
                Ok(_) => {}
                Err(e) => notes.push(format!("agent {} could not be dropped: {e}", i + 1)),
            }
        }
        let it = &mut held.record.items[k];
        it.state = ItemState::Landed;
        it.pending = None;
        let after = it.after.clone().unwrap_or_default();
        let mut text = format!("{} is at {}", place.into, short(&after));
        for n in notes {
            text.push_str("; ");
            text.push_str(&n);
        }
        self.step(held, Some(k), StepKind::Landed, text).await?;
        Ok(())
    }

    /// One notification for the land's end: what landed, what is left.
    fn notify(&self, record: &LandRecord) {
        use berth_ops::notices::{Notice, NotifyEvent};
        let (landed, left) = record.tally();
        let kind = match left.is_empty() {
            true => NotifyEvent::Done,
            false => NotifyEvent::Failed,
        };
        let title = format!(
            "berth land {}: {} landed, {} left",
            record.id,
            landed.len(),
            left.len()
        );
        let mut summary = format!(
            "landed: {}",
            if landed.is_empty() {
                "nothing".to_owned()
            } else {
                landed.join(", ")
            }
        );
        for item in record.items.iter().filter(|i| !i.state.is_done()) {
            summary.push_str(&format!(
                "; left {}: {}",
                item.asked,
                item.reason.as_deref().unwrap_or("not reached")
            ));
        }
        self.ops.notify(Notice::new(kind, title, summary));
    }
}

/// File names as a person reads them.
pub(super) fn shown(files: &[String]) -> String {
    files
        .iter()
        .map(|f| berth_ops::shown::visible(f, berth_ops::shown::Form::FileName).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}
