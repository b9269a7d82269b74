//! Landing an agent whose worktree is on another node of a pool: its branch, as that node
//! pushed it to the run's repository URL, fetched into the repository the land was asked
//! in, combined with the base there, and checked in a checkout of its own made for the
//! check and removed after. Its agent cannot be handed a conflict or a red check from here
//! (its session and worktree are that node's): such an agent is left, saying where to
//! resolve it, and `berth land --resume` tries it again once it is mended.

use berth_git::Repo;
use berth_ops::Workspace;

use super::drive::{Halt, Lander, Place, Settled, git, refused, shown};
use super::record::{ItemState, StepKind};
use super::store::HeldLand;
use super::turn::message;
use crate::check::CheckResult;
use crate::kept::RunRecord;

impl Lander {
    pub(super) async fn land_pushed(
        &self,
        held: &mut HeldLand,
        k: usize,
        run: &RunRecord,
        ws: &Workspace,
    ) -> Result<Settled, Halt> {
        let agent = held.record.items[k].agent.unwrap_or(0);
        let node = run.agents[agent]
            .node
            .clone()
            .unwrap_or_else(|| "another node".to_owned());
        let Some(url) = run.request.pool.as_ref().map(|p| p.repo_url.clone()) else {
            return Ok(Settled::Left(format!(
                "its worktree is on {node}, and its branch was not pushed anywhere: land it there"
            )));
        };
        let gi = ws.git.clone().expect("a git workspace");
        let (repo, work, into) =
            match fetch(&held.record.dir, &url, &gi.branch, &gi.base_branch).await {
                Ok(f) => f,
                Err(e) => {
                    return Ok(Settled::Left(format!(
                        "its pushed branch cannot be fetched: {e}"
                    )));
                }
            };
        held.record.items[k].state = ItemState::Landing;
        held.record.items[k].into = Some(into.clone());
        let check_dir = self
            .lands
            .dir(&held.record.id)
            .join(format!("checkout-{}", k + 1));
        let place = Place {
            run: run.clone(),
            agent,
            ws: ws.clone(),
            wt: check_dir.clone(),
            repo: repo.clone(),
            into: into.clone(),
        };
        if self.landed_before(held, k, &place).await? {
            self.finish_landed(held, k, &place).await?;
            return Ok(Settled::Landed);
        }
        self.step(
            held,
            Some(k),
            StepKind::Chosen,
            format!(
                "agent {} (on {node}): its pushed branch {}, onto {into}",
                agent + 1,
                gi.branch
            ),
        )
        .await?;
        let msg = message(run, agent, &place.mark(&held.record.id), held.record.mode);
        let tell = format!("`berth run tell {} --agent {}` there", run.id, agent + 1);
        for _ in 0..super::drive::BASE_MOVES {
            let (r, i, w, m) = (repo.clone(), into.clone(), work.clone(), msg.clone());
            let (base, combined) = git(move || {
                let base = r.branch_tip(&i)?;
                let combined = r.combine(&base, &w, &m)?;
                Ok((base, combined))
            })
            .await?;
            let tip = match combined {
                Ok(tip) => tip,
                Err(files) => {
                    return Ok(Settled::Left(format!(
                        "conflicts with {into} in {}; its agent works on {node}: resolve it with {tell}, then `berth land --resume {}`",
                        shown(&files),
                        held.record.id
                    )));
                }
            };
            let check = match self.check_pushed(held, k, &place, &tip).await? {
                Ok(check) => check,
                Err(why) => {
                    return Ok(Settled::Left(format!(
                        "{why}; its agent works on {node}: mend it with {tell}"
                    )));
                }
            };
            if self
                .move_base(held, k, &place, base, tip, check, &msg)
                .await?
            {
                return Ok(Settled::Landed);
            }
        }
        Ok(Settled::Left(format!(
            "{into} moved {} times while it was being landed",
            super::drive::BASE_MOVES
        )))
    }

    /// The run's check on `tip`, in a checkout made for it and removed after: how it went
    /// (none for a run without a check), or why it failed.
    async fn check_pushed(
        &self,
        held: &mut HeldLand,
        k: usize,
        place: &Place,
        tip: &str,
    ) -> Result<Result<Option<CheckResult>, String>, Halt> {
        let Some(command) = place.run.request.check.clone() else {
            return Ok(Ok(None));
        };
        let (repo, dir, tip) = (place.repo.clone(), place.wt.clone(), tip.to_owned());
        // What a check cut off earlier left.
        let _ = git({
            let (r, d) = (repo.clone(), dir.clone());
            move || r.drop_checkout(&d)
        })
        .await;
        git({
            let (r, d) = (repo.clone(), dir.clone());
            move || r.checkout_detached(&d, &tip)
        })
        .await?;
        let result = self.run_check(held, k, place, &command).await;
        let _ = git(move || repo.drop_checkout(&dir)).await;
        let result = result?;
        if self.stop.is_cancelled() {
            return Err(Halt(refused("stopped during its check".to_owned())));
        }
        self.checked(held, k, &result).await?;
        Ok(match result.passed {
            true => Ok(Some(result)),
            false => Err(format!(
                "the check `{command}` {} on the combined tree",
                result.described()
            )),
        })
    }
}

/// The branch `branch` a pool's node pushed to `url`, fetched into the repository holding
/// `dir`: that repository, the branch's tip, and the branch its base `base` lands on there.
async fn fetch(
    dir: &std::path::Path,
    url: &str,
    branch: &str,
    base: &str,
) -> berth_ops::Result<(Repo, String, String)> {
    let (dir, url) = (dir.to_owned(), url.to_owned());
    let (branch, base) = (branch.to_owned(), base.to_owned());
    berth_ops::blocking(move || {
        let repo = Repo::discover(&dir)?;
        let work = repo.fetch_branch(&url, &branch)?;
        let into = berth_ops::local_base(&repo, &base)?;
        Ok((repo, work, into))
    })
    .await
}
