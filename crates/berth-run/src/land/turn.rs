//! Handing work back to the agent that made it: a told turn in its own workspace and
//! session (the one way `berth run tell` tells a run that is over), with a text that names
//! what to mend, a conflict's files and what the base changed, or the check's last lines.

use berth_git::MergeMode;

use crate::check::CheckResult;
use crate::event::AgentState;
use crate::kept::{RunId, RunRecord};
use crate::supervisor::Next;
use crate::supervisor::Supervised;

use super::drive::{
    Halt, Lander, Place, Settled, first_line, git, keep_ref, refused, short, shown,
};
use super::record::{LandItem, Pending, StepKind};
use super::store::HeldLand;

/// How a told turn went.
pub(super) struct TurnEnd {
    /// Why it cannot count (the agent could not be told, or did not finish its turn).
    pub failed: Option<String>,
    /// The run's check as it ran on the worktree once the turn ended, when the run has one.
    pub check: Option<CheckResult>,
}

/// What a conflict's turn says.
pub(super) fn conflict_text(into: &str, files: &[String], changes: &str) -> String {
    let names = files.join(", ");
    let changes = match changes.trim() {
        "" => String::new(),
        c => format!("\n\nWhat `{into}` gained meanwhile in those files:\n{c}"),
    };
    format!(
        "berth is landing your work on `{into}`, which has changed since you began: the two conflict in {names}.\n\n\
         Your worktree now holds `{into}` as it stands, with your work merged into it as uncommitted changes. Each conflict is marked in its file: the lines between `<<<<<<<` and `=======` are `{into}`'s, those between `=======` and `>>>>>>>` are yours.{changes}\n\n\
         Resolve every conflict so that both changes hold where they can, remove every marker, and make sure your task is still done. Do not commit: berth commits what you leave, then checks it."
    )
}

/// What a turn says when markers are left after a resolution.
pub(super) fn markers_text(into: &str, files: &[String]) -> String {
    format!(
        "Conflict markers are still in {}: resolve what is between `<<<<<<<` and `>>>>>>>` there (`{into}`'s lines above `=======`, yours below), and remove every marker. Do not commit: berth commits what you leave.",
        files.join(", ")
    )
}

/// What a turn says when the check fails on the combined tree.
pub(super) fn check_text(into: &str, check: &CheckResult) -> String {
    let lines = check
        .output
        .as_deref()
        .map(|o| format!(" Its last lines:\n\n```\n{}\n```", o.trim_end()))
        .unwrap_or_default();
    format!(
        "berth is landing your work on `{into}`. Combined with `{into}` as it stands now, the check `{}` {}.{lines}\n\n\
         Your worktree holds the combined work. Mend it so that the check passes. Do not commit: berth commits what you leave, then checks it again.",
        check.command,
        check.described()
    )
}

/// The message of a commit a land makes: the pick's message, then the land's mark.
pub(super) fn message(record: &RunRecord, agent: usize, mark: &str, mode: MergeMode) -> String {
    let mut message = crate::merged::merge_message(record, agent);
    let how = match mode {
        MergeMode::Merge => "",
        MergeMode::Squash => " (squashed)",
        MergeMode::Rebase => " (rebased)",
    };
    message.push_str(&format!("{mark}{how}.\n"));
    message
}

impl Lander {
    /// Tells agent `agent` of run `run` `text` in its own session and waits for its turn
    /// (and the run's check after it) to end. A stop of the land stops the turn.
    pub(super) async fn turn(&self, run: &RunId, agent: usize, text: &str) -> TurnEnd {
        let told = Supervised::tell(
            self.ops.clone(),
            self.agent.clone(),
            &self.runs,
            run,
            Some(agent),
            text,
            &[],
            self.host,
        )
        .await;
        let mut supervised = match told {
            Ok(s) => s,
            Err(e) => {
                return TurnEnd {
                    failed: Some(format!("its agent cannot be told: {e}")),
                    check: None,
                };
            }
        };
        let mut stopped = false;
        loop {
            tokio::select! {
                next = supervised.next() => match next {
                    Some(Next::Event(_)) | Some(Next::Unkept(_)) => {}
                    None => break,
                },
                _ = self.stop.cancelled(), if !stopped => {
                    stopped = true;
                    supervised.stop();
                }
            }
        }
        let record = match supervised.finish().await {
            Ok(r) => r,
            Err(e) => {
                return TurnEnd {
                    failed: Some(format!("its told turn could not be kept: {e}")),
                    check: None,
                };
            }
        };
        let Some(a) = record.agents.get(agent) else {
            return TurnEnd {
                failed: Some("its run's record lost the agent".to_owned()),
                check: None,
            };
        };
        let failed = (a.status.state != AgentState::Done).then(|| {
            let why = a
                .status
                .message
                .clone()
                .unwrap_or_else(|| a.status.state.as_str().to_owned());
            format!("its agent's turn did not finish: {why}")
        });
        TurnEnd {
            failed,
            check: a.check().cloned(),
        }
    }
}

/// Handing back: a conflict until it is resolved, a red check until it passes.
impl Lander {
    /// Hands a conflict back to its agent until it is resolved (`None`: committed, the item's
    /// `tip` and `check` say where and how it checked) or left (the conflict taken back out of
    /// the worktree, kept on a ref).
    pub(super) async fn resolve(
        &self,
        held: &mut HeldLand,
        k: usize,
        place: &Place,
        pending: &Pending,
        msg: &str,
    ) -> Result<Option<Settled>, Halt> {
        let item = held.record.items[k].clone();
        let changes = {
            let (repo, work, base, files) = (
                place.repo.clone(),
                pending.work.clone(),
                pending.base.clone(),
                pending.files.clone(),
            );
            git(move || repo.base_changes(&work, &base, &files, 20))
                .await
                .unwrap_or_default()
        };
        let mut text = conflict_text(&place.into, &pending.files, &changes);
        let mut why = format!("conflicts with {} in {}", place.into, shown(&pending.files));
        loop {
            if !held.record.resolve || held.record.items[k].turns >= held.record.retries {
                let tail = match held.record.resolve {
                    true => format!(
                        "; its agent did not resolve them in {} turn(s)",
                        held.record.retries
                    ),
                    false => " (--no-resolve: nothing was handed back)".to_owned(),
                };
                self.abandon(held, k, place, pending).await?;
                return Ok(Some(Settled::Left(format!("{why}{tail}"))));
            }
            let end = self.told(held, k, &item, &text).await?;
            if let Some(failed) = end.failed {
                self.abandon(held, k, place, pending).await?;
                return Ok(Some(Settled::Left(format!("{why}; {failed}"))));
            }
            let left: Vec<String> = pending
                .files
                .iter()
                .filter(|f| berth_git::has_conflict_markers(&place.wt, f))
                .cloned()
                .collect();
            if !left.is_empty() {
                why = format!("conflict markers left in {}", shown(&left));
                text = markers_text(&place.into, &left);
                continue;
            }
            let tip = {
                let (repo, wt, p, m) = (
                    place.repo.clone(),
                    place.wt.clone(),
                    pending.clone(),
                    msg.to_owned(),
                );
                git(move || repo.commit_resolution(&wt, &p.base, &p.work, &m)).await?
            };
            let it = &mut held.record.items[k];
            it.pending = None;
            it.tip = Some(tip.clone());
            it.check = end.check.clone();
            self.step_with(
                held,
                Some(k),
                StepKind::Resolved,
                format!("its agent resolved the conflict: {}", short(&tip)),
                pending.files.clone(),
                None,
            )
            .await?;
            return Ok(None);
        }
    }

    /// Takes an unresolved conflict back out of the agent's worktree: what it holds kept on
    /// a ref, its branch and files as they were before the land.
    async fn abandon(
        &self,
        held: &mut HeldLand,
        k: usize,
        place: &Place,
        pending: &Pending,
    ) -> Result<(), Halt> {
        let turns = held.record.items[k].turns;
        let attempt = keep_ref(&held.record.id, k, &format!("attempt-{}", turns.max(1)));
        let (repo, wt, p, a) = (
            place.repo.clone(),
            place.wt.clone(),
            pending.clone(),
            attempt.clone(),
        );
        git(move || repo.abandon_resolution(&wt, &p.base, &p.work, &a)).await?;
        let it = &mut held.record.items[k];
        it.pending = None;
        it.kept.push(attempt);
        self.lands.save(held).await?;
        Ok(())
    }

    /// One told turn of item `k`'s agent, recorded.
    async fn told(
        &self,
        held: &mut HeldLand,
        k: usize,
        item: &LandItem,
        text: &str,
    ) -> Result<TurnEnd, Halt> {
        if self.stop.is_cancelled() {
            return Err(Halt(refused("stopped before its agent's turn".to_owned())));
        }
        held.record.items[k].turns += 1;
        let turn = held.record.items[k].turns;
        let agent = item.agent.unwrap_or(0);
        self.step(
            held,
            Some(k),
            StepKind::Told,
            format!("turn {turn}: {}", first_line(text)),
        )
        .await?;
        let end = self.turn(&item.run, agent, text).await;
        if self.stop.is_cancelled() {
            return Err(Halt(refused("stopped during its agent's turn".to_owned())));
        }
        Ok(end)
    }

    /// The check on the combined tip, handed back to the agent while it fails: the tip and
    /// check it passed with (or no check, for a run without one), or why it is left.
    pub(super) async fn mend_check(
        &self,
        held: &mut HeldLand,
        k: usize,
        place: &Place,
        mut tip: String,
        mut check: Option<CheckResult>,
    ) -> Result<Result<(String, Option<CheckResult>), String>, Halt> {
        let Some(command) = place.run.request.check.clone() else {
            return Ok(Ok((tip, None)));
        };
        loop {
            let result = match check.take() {
                Some(c) => c,
                None => self.run_check(held, k, place, &command).await?,
            };
            if self.stop.is_cancelled() {
                // Cut short by the stop: no evidence either way, and nothing is handed back.
                return Err(Halt(refused("stopped during its check".to_owned())));
            }
            let passed = result.passed;
            self.checked(held, k, &result).await?;
            if passed {
                return Ok(Ok((tip, Some(result))));
            }
            let why = format!(
                "the check `{command}` {} on the combined tree",
                result.described()
            );
            if !held.record.resolve || held.record.items[k].turns >= held.record.retries {
                return Ok(Err(why));
            }
            let item = held.record.items[k].clone();
            let end = self
                .told(held, k, &item, &check_text(&place.into, &result))
                .await?;
            if let Some(failed) = end.failed {
                return Ok(Err(format!("{why}; {failed}")));
            }
            let committed = git({
                let (wt, m) = (
                    place.wt.clone(),
                    crate::merged::merge_message(&place.run, place.agent),
                );
                move || berth_git::commit_all(&wt, &m)
            })
            .await?;
            if let Some(c) = committed {
                tip = c;
            }
            check = end.check;
        }
    }
}
