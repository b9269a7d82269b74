//! What a land would do (`berth land --dry-run`), moving nothing: the order, each agent
//! chosen and the branch it lands on, the conflicts to expect, and the checks to run.
//!
//! The conflicts are found as the land would meet them: on objects only, the queue is
//! played through in order (each agent's work, its uncommitted changes included, combined
//! with the base as the agents before it would leave it), so an agent that conflicts only
//! with an earlier one of the queue is named too.

use berth_git::Repo;
use serde::Serialize;

use super::drive::{LandRequest, Lander, git};
use super::record::{ItemState, LandItem};

/// One agent of a land's plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedItem {
    pub run: String,
    /// Counted from 1.
    pub agent: usize,
    pub label: String,
    /// What is done with it: `land`, or `skip` (picked already).
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    /// The files it is expected to conflict in, with the base as the queue leaves it.
    pub conflicts: Vec<String>,
    /// The check that runs on the combined tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// What could not be judged, when something could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A land's plan.
#[derive(Debug, Clone, Serialize)]
pub struct LandPlan {
    pub items: Vec<PlannedItem>,
    pub mode: berth_git::MergeMode,
    pub retries: u32,
    pub resolve: bool,
}

impl Lander {
    /// The plan of `request`: refused as [`Lander::create`] refuses it, and otherwise what
    /// it would do, moving nothing.
    pub async fn plan(&self, request: &LandRequest) -> berth_ops::Result<LandPlan> {
        let mut items = Vec::new();
        // The base each branch would be at, as the queue so far leaves it.
        let mut bases: Vec<(std::path::PathBuf, String, String)> = Vec::new();
        for target in &request.targets {
            let item = self.item(target).await?;
            items.push(self.planned(&item, &mut bases).await?);
        }
        Ok(LandPlan {
            items,
            mode: request.mode,
            retries: request.retries,
            resolve: request.resolve,
        })
    }

    async fn planned(
        &self,
        item: &LandItem,
        bases: &mut Vec<(std::path::PathBuf, String, String)>,
    ) -> berth_ops::Result<PlannedItem> {
        let kept = |e: crate::kept::KeptError| berth_ops::Error::rule(e.kind(), e.to_string());
        let run = self.runs.load(&item.run).await.map_err(kept)?;
        let agent = item.agent.unwrap_or(0);
        let a = &run.agents[agent];
        let mut planned = PlannedItem {
            run: run.id.to_string(),
            agent: agent + 1,
            label: a.label.clone(),
            action: match item.state {
                ItemState::Skipped => "skip".to_owned(),
                _ => "land".to_owned(),
            },
            into: None,
            conflicts: Vec::new(),
            check: run.request.check.clone(),
            note: item.reason.clone(),
        };
        if item.state == ItemState::Skipped {
            return Ok(planned);
        }
        let ws = match &a.workspace {
            Some(w) => self.ops.resolve_workspace(w).await?,
            None => return Ok(planned),
        };
        let Some(gi) = ws.git.clone() else {
            return Ok(planned);
        };
        if !gi.worktree.is_dir() {
            planned.note = Some(
                "its worktree is on another node: its pushed branch is fetched and combined when it lands".to_owned(),
            );
            return Ok(planned);
        }
        let repo_dir = gi.repo.clone();
        let simulated: Vec<(String, String)> = bases
            .iter()
            .filter(|(r, _, _)| *r == repo_dir)
            .map(|(_, b, t)| (b.clone(), t.clone()))
            .collect();
        let (into, conflicts, new_tip) = git(move || {
            let repo = Repo::open(&gi.repo)?;
            // A base that is no local branch is planned as its own name: the land refuses
            // it, naming it.
            let into = repo
                .local_base(&gi.base_branch)
                .unwrap_or(gi.base_branch.clone());
            let base = match simulated.iter().find(|(b, _)| *b == into) {
                Some((_, tip)) => tip.clone(),
                None => repo.branch_tip(&into)?,
            };
            let work = berth_git::work_commit(&gi.worktree)?;
            let (conflicts, tip) = match repo.combine(&base, &work, "berth land --dry-run")? {
                Ok(tip) => (Vec::new(), tip),
                Err(files) => (files, base),
            };
            Ok((into, conflicts, tip))
        })
        .await?;
        match bases
            .iter_mut()
            .find(|(r, b, _)| *r == repo_dir && *b == into)
        {
            Some(entry) => entry.2 = new_tip,
            None => bases.push((repo_dir, into.clone(), new_tip)),
        }
        planned.into = Some(into);
        planned.conflicts = conflicts;
        Ok(planned)
    }
}
