//! Handing work back to the agent that made it: a told turn in its own workspace and
//! session (the one way `berth run tell` tells a run that is over), with a text that names
//! what to mend, a conflict's files and what the base changed, or the check's last lines.

use berth_git::MergeMode;

use crate::kept::{RunId, RunRecord};
use crate::{AgentState, CheckResult, Next, Supervised};

use super::drive::Lander;

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
    let mut message = crate::merge_message(record, agent);
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
