//! Conflicts seen before landing: for each agent of a run that finished with work, whether
//! that work still merges into its base as the base now stands, and whether it clashes with
//! the work of a finished agent of another run over the same repository, naming the files.
//!
//! The agents of one run are alternatives (one of them is picked), so they are never compared
//! with each other. The other side of a comparison is an agent of another run that is done,
//! whose work was neither merged nor discarded, and whose worktree is on this machine, with
//! the same local base: what could land beside it. Each answer is a trial merge
//! (`git merge-tree --write-tree`, berth-git's `trial.rs`) of the two pieces of work, not a
//! guess from the files each touched: two agents editing different lines of one file merge.
//!
//! A worktree's work is one commit made the same way each time (berth-git's `work_commit`),
//! so the ids of the two commits merged name what was merged, trees and history; a
//! [`Foresight`] keeps what each pair gave, and the dashboard and the web page, which ask
//! again and again, pay one `merge-tree` per new pair. Reading each worktree's work is paid on
//! every ask (a `git add` into a copy of its index): it is how a change made meanwhile is
//! seen.
//!
//! What cannot be judged (a worktree on another machine, a plain workspace, a base that is no
//! local branch) is said in the answer, agent by agent, and never fails the rest.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use berth_git::{FileName, GitError, Repo};
use berth_ops::{ErrorKind, Ops};
use serde::Serialize;

use crate::event::AgentState;
use crate::kept::{RunRecord, RunStore};

/// How many pairs a [`Foresight`] keeps before it starts again: far more than a screen of
/// runs holds, and a bound however long a dashboard stays open.
const PAIRS_KEPT: usize = 4096;

/// What trial merges found, kept by the pair of commits merged, for as long as its owner
/// keeps it (the dashboard and the web page for their lifetime, a command for itself).
/// Cloning shares what is kept.
#[derive(Debug, Clone, Default)]
pub struct Foresight {
    known: Arc<Mutex<Known>>,
}

/// The files each trial found, by the commits merged (into, from).
type Known = HashMap<(String, String), Vec<FileName>>;

/// One agent's work against what it could land beside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentForesight {
    /// Counted from 1, as `berth run` shows agents.
    pub agent: usize,
    /// The branch its work would merge into, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Why its work was not looked at; `with` is empty then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unjudged: Option<Unjudged>,
    /// What its work conflicts with: its base as it stands first, then other runs' agents.
    /// Empty when it merges cleanly with each.
    pub with: Vec<Conflict>,
    /// How many finished agents of other runs it was compared with.
    pub compared: usize,
    /// Finished agents of other runs over the same repository that it could not be compared
    /// with, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<Unknown>,
}

/// A conflict: with what, and the files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    #[serde(flatten)]
    pub against: Against,
    /// The files, as git names them (shown through [`FileName::shown`]).
    pub files: Vec<FileName>,
}

/// What a piece of work was merged with in a trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Against {
    /// The local branch a pick would merge into, as it now stands.
    Base { branch: String },
    /// A finished agent of another run.
    Agent {
        run: String,
        /// Counted from 1.
        agent: usize,
        label: String,
    },
}

/// Another run's agent the work could not be compared with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unknown {
    pub run: String,
    /// Counted from 1.
    pub agent: usize,
    pub why: String,
}

/// Why an agent's work was not judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unjudged {
    pub reason: Reason,
    pub why: String,
}

/// The kind of [`Unjudged`]: whether there was no work to judge, or it could not be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// It has not finished, or did not finish well (failed, stopped).
    Unfinished,
    /// Its work was merged or discarded.
    Closed,
    /// It changed nothing, or never got a workspace.
    NoWork,
    /// Its worktree is on another machine (a pool's node).
    Elsewhere,
    /// Its workspace is a plain folder, or its base no local branch: nothing to merge into.
    NoBranch,
    /// Reading its work or merging it failed.
    Failed,
}

impl Reason {
    /// Whether there was work that could not be judged, which a person should hear about
    /// (rather than no work to judge).
    pub fn worth_saying(self) -> bool {
        matches!(self, Reason::Elsewhere | Reason::NoBranch | Reason::Failed)
    }
}

/// Why a piece of work cannot be judged.
#[derive(Debug, thiserror::Error)]
pub enum ForesightError {
    #[error("the run has no agent {0}")]
    NoSuchAgent(usize),
    #[error("it did not finish (it is {0})")]
    Unfinished(&'static str),
    #[error("its work was {0}")]
    Closed(&'static str),
    #[error("it changed nothing")]
    NothingChanged,
    #[error("it never got a workspace")]
    NoWorkspace,
    #[error("its workspace {0} is a plain folder, with no branch to merge")]
    Plain(String),
    #[error("its worktree {} is not on this machine{}: look from there", .worktree.display(), .node.as_ref().map(|n| format!(" (it ran on {n})")).unwrap_or_default())]
    Elsewhere {
        worktree: PathBuf,
        node: Option<String>,
    },
    #[error("its base {0:?} is not a local branch to merge into")]
    NoLocalBase(String),
    #[error("its repository {} cannot be opened: {why}", .repo.display())]
    Repository { repo: PathBuf, why: String },
    #[error("the trial merge stopped: {0}")]
    Stopped(String),
    #[error(transparent)]
    Ops(#[from] berth_ops::Error),
}

impl ForesightError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            ForesightError::NoSuchAgent(_) => ErrorKind::NotFound,
            ForesightError::Unfinished(_)
            | ForesightError::Closed(_)
            | ForesightError::NothingChanged
            | ForesightError::NoWorkspace
            | ForesightError::Plain(_)
            | ForesightError::Elsewhere { .. }
            | ForesightError::NoLocalBase(_) => ErrorKind::Invalid,
            ForesightError::Repository { .. } => ErrorKind::NotFound,
            ForesightError::Stopped(_) => ErrorKind::Io,
            ForesightError::Ops(e) => e.kind(),
        }
    }

    pub fn reason(&self) -> Reason {
        match self {
            ForesightError::Unfinished(_) => Reason::Unfinished,
            ForesightError::Closed(_) => Reason::Closed,
            ForesightError::NothingChanged
            | ForesightError::NoWorkspace
            | ForesightError::NoSuchAgent(_) => Reason::NoWork,
            ForesightError::Elsewhere { .. } => Reason::Elsewhere,
            ForesightError::Plain(_) | ForesightError::NoLocalBase(_) => Reason::NoBranch,
            ForesightError::Repository { .. }
            | ForesightError::Stopped(_)
            | ForesightError::Ops(_) => Reason::Failed,
        }
    }
}

impl From<GitError> for ForesightError {
    fn from(e: GitError) -> ForesightError {
        ForesightError::Ops(e.into())
    }
}

/// A trial of one piece of work against one other: what was merged, and the files that
/// conflict (empty: it merges cleanly).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trial {
    /// The commit merged into (a branch's tip, or the other work's commit).
    pub ours: String,
    /// The commit of the work (its HEAD and its uncommitted changes).
    pub theirs: String,
    pub files: Vec<FileName>,
}

impl std::fmt::Display for Against {
    /// `main`, `run 3f2a9c0d1e2b agent 1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Against::Base { branch } => write!(f, "{branch}"),
            Against::Agent { run, agent, .. } => write!(f, "run {run} agent {agent}"),
        }
    }
}

impl Conflict {
    /// The files as a person may see them: each quoted as git quotes a name, comma-separated.
    pub fn shown_files(&self) -> String {
        let shown: Vec<String> = self.files.iter().map(FileName::shown).collect();
        shown.join(", ")
    }
}

/// Where an agent's work is on this machine.
#[derive(Debug, Clone)]
struct Place {
    run: String,
    /// Counted from 0.
    index: usize,
    label: String,
    repo: PathBuf,
    worktree: PathBuf,
    /// The base as recorded (a local branch, or `origin/<b>`).
    base: String,
}

/// An agent's work as read for a judgement (by its index), or why it could not be.
type Read = Result<(Repo, Work), ForesightError>;

/// A place's work read: the branch it would merge into, and its commit.
#[derive(Debug, Clone)]
struct Work {
    place: Place,
    base: String,
    commit: String,
}

impl Foresight {
    pub fn new() -> Foresight {
        Foresight::default()
    }

    /// Each agent of `record`, in order, against its base as it now stands and against every
    /// finished agent of other runs over the same repository and base.
    pub async fn foresee(
        &self,
        ops: &Ops,
        store: &RunStore,
        record: &RunRecord,
    ) -> Vec<AgentForesight> {
        let indexes: Vec<usize> = (0..record.agents.len()).collect();
        self.foresee_some(ops, store, record, &indexes).await
    }

    /// Agent `index` (counted from 0) of `record`, as [`Foresight::foresee`] judges each.
    pub async fn foresee_agent(
        &self,
        ops: &Ops,
        store: &RunStore,
        record: &RunRecord,
        index: usize,
    ) -> AgentForesight {
        let mut one = self.foresee_some(ops, store, record, &[index]).await;
        one.pop()
            .unwrap_or_else(|| unjudged(index, ForesightError::NoSuchAgent(index + 1)))
    }

    /// Agent `index` (counted from 0) of `record` against the branch it would merge into, as
    /// that branch now stands: one trial, whatever the agent's state or outcome (a land asks
    /// this of the agent it is about to land).
    pub async fn against_base(
        &self,
        ops: &Ops,
        record: &RunRecord,
        index: usize,
    ) -> Result<(String, Trial), ForesightError> {
        let place = place_of(ops, record, index).await?;
        let this = self.clone();
        blocking(move || {
            let repo = Repo::open(&place.repo)?;
            let base = local_base_of(&repo, &place)?;
            let work = read_work(place, base)?;
            let tip = repo.branch_tip(&work.base)?;
            let files = this.trial(&repo, &tip, &work.commit)?;
            Ok((
                work.base,
                Trial {
                    ours: tip,
                    theirs: work.commit,
                    files,
                },
            ))
        })
        .await
    }

    /// Agent `a` of `first` against agent `b` of `second` (each counted from 0): the files a
    /// merge of the two pieces of work would conflict on, whatever their states.
    pub async fn between(
        &self,
        ops: &Ops,
        (first, a): (&RunRecord, usize),
        (second, b): (&RunRecord, usize),
    ) -> Result<Trial, ForesightError> {
        let one = place_of(ops, first, a).await?;
        let other = place_of(ops, second, b).await?;
        let this = self.clone();
        blocking(move || {
            let repo = Repo::open(&one.repo)?;
            let ours = berth_git::work_commit(&one.worktree)?;
            let theirs = berth_git::work_commit(&other.worktree)?;
            let files = this.trial_either_way(&repo, &ours, &theirs)?;
            Ok(Trial {
                ours,
                theirs,
                files,
            })
        })
        .await
    }

    async fn foresee_some(
        &self,
        ops: &Ops,
        store: &RunStore,
        record: &RunRecord,
        indexes: &[usize],
    ) -> Vec<AgentForesight> {
        let mut places = Vec::new();
        let mut answers: Vec<AgentForesight> = Vec::new();
        for &i in indexes {
            let place = match eligible(record, i) {
                Ok(()) => place_of(ops, record, i).await,
                Err(e) => Err(e),
            };
            match place {
                Ok(p) => places.push(p),
                Err(e) => answers.push(unjudged(i, e)),
            }
        }
        if !places.is_empty() {
            let (others, unknown) = others(ops, store, record, &places).await;
            let judged_ones: Vec<usize> = places.iter().map(|p| p.index).collect();
            let this = self.clone();
            match blocking(move || Ok(this.judge(places, others, unknown))).await {
                Ok(judged) => answers.extend(judged),
                Err(e) => answers.extend(
                    judged_ones
                        .into_iter()
                        .map(|i| unjudged(i, ForesightError::Stopped(e.to_string()))),
                ),
            }
        }
        answers.sort_by_key(|a| a.agent);
        answers
    }

    /// Each of `ours` against its base and against each of `others` on its repository and
    /// base; `unknown` holds the others that could not be read before (by repository).
    fn judge(
        &self,
        ours: Vec<Place>,
        others: Vec<Place>,
        mut unknown: Vec<(PathBuf, Unknown)>,
    ) -> Vec<AgentForesight> {
        let mut repos: HashMap<PathBuf, Result<Repo, String>> = HashMap::new();
        let mut repo_of = |path: &PathBuf| {
            repos
                .entry(path.clone())
                .or_insert_with(|| Repo::open(path).map_err(|e| e.to_string()))
                .clone()
                .map_err(|why| ForesightError::Repository {
                    repo: path.clone(),
                    why,
                })
        };
        // Ours first: which repositories and bases the others' work is wanted on.
        let ours: Vec<(usize, Read)> = ours
            .into_iter()
            .map(|place| {
                let index = place.index;
                let read = repo_of(&place.repo).and_then(|repo| {
                    let base = local_base_of(&repo, &place)?;
                    let work = read_work(place, base)?;
                    Ok((repo, work))
                });
                (index, read)
            })
            .collect();
        let wanted: Vec<(&PathBuf, &str)> = ours
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|(_, w)| (&w.place.repo, w.base.as_str()))
            .collect();
        // The other runs' work on those, read once for all of ours.
        let mut read: Vec<Work> = Vec::new();
        for place in others {
            let (run, agent, repo_path) = (place.run.clone(), place.index + 1, place.repo.clone());
            let work = repo_of(&repo_path).and_then(|repo| {
                let base = local_base_of(&repo, &place)?;
                match wanted.contains(&(&place.repo, base.as_str())) {
                    true => read_work(place, base).map(Some),
                    false => Ok(None),
                }
            });
            match work {
                Ok(Some(w)) => read.push(w),
                // Not one a pick of ours could land beside: nothing to say.
                Ok(None) | Err(ForesightError::NoLocalBase(_)) => {}
                Err(e) => unknown.push((
                    repo_path,
                    Unknown {
                        run,
                        agent,
                        why: e.to_string(),
                    },
                )),
            }
        }
        ours.into_iter()
            .map(|(index, mine)| {
                mine.and_then(|(repo, work)| {
                    let mut answer = self.judge_one(&repo, &work, &read)?;
                    answer.unknown.extend(
                        unknown
                            .iter()
                            .filter(|(r, _)| *r == work.place.repo)
                            .map(|(_, u)| u.clone()),
                    );
                    Ok(answer)
                })
                .unwrap_or_else(|e| unjudged(index, e))
            })
            .collect()
    }

    /// One agent's work against its base and against each of `others` on its base.
    fn judge_one(
        &self,
        repo: &Repo,
        work: &Work,
        others: &[Work],
    ) -> Result<AgentForesight, ForesightError> {
        let tip = repo.branch_tip(&work.base)?;
        let mut with = Vec::new();
        let files = self.trial(repo, &tip, &work.commit)?;
        if !files.is_empty() {
            with.push(Conflict {
                against: Against::Base {
                    branch: work.base.clone(),
                },
                files,
            });
        }
        let mut compared = 0;
        let mut unknown = Vec::new();
        for other in others
            .iter()
            .filter(|o| o.place.repo == work.place.repo && o.base == work.base)
        {
            compared += 1;
            match self.trial_either_way(repo, &work.commit, &other.commit) {
                Ok(files) if files.is_empty() => {}
                Ok(files) => with.push(Conflict {
                    against: Against::Agent {
                        run: other.place.run.clone(),
                        agent: other.place.index + 1,
                        label: other.place.label.clone(),
                    },
                    files,
                }),
                Err(e) => unknown.push(Unknown {
                    run: other.place.run.clone(),
                    agent: other.place.index + 1,
                    why: e.to_string(),
                }),
            }
        }
        Ok(AgentForesight {
            agent: work.place.index + 1,
            base: Some(work.base.clone()),
            unjudged: None,
            with,
            compared,
            unknown,
        })
    }

    /// The files two pieces of work conflict on, whichever is merged into which: one trial,
    /// kept by the pair in one order, for both.
    fn trial_either_way(&self, repo: &Repo, a: &str, b: &str) -> Result<Vec<FileName>, GitError> {
        match a <= b {
            true => self.trial(repo, a, b),
            false => self.trial(repo, b, a),
        }
    }

    /// The files a merge of `theirs` into `ours` conflicts on, kept by the pair.
    fn trial(&self, repo: &Repo, ours: &str, theirs: &str) -> Result<Vec<FileName>, GitError> {
        let key = (ours.to_owned(), theirs.to_owned());
        if let Some(files) = self.lock().get(&key) {
            return Ok(files.clone());
        }
        let files = repo.trial_merge(ours, theirs)?;
        let mut known = self.lock();
        if known.len() >= PAIRS_KEPT {
            known.clear();
        }
        known.insert(key, files.clone());
        Ok(files)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        // What is kept is whole after any panic (one insert at a time): keep using it.
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many pairs are kept (for tests of the cache).
    pub fn pairs_kept(&self) -> usize {
        self.lock().len()
    }
}

fn unjudged(index: usize, e: ForesightError) -> AgentForesight {
    AgentForesight {
        agent: index + 1,
        base: None,
        unjudged: Some(Unjudged {
            reason: e.reason(),
            why: e.to_string(),
        }),
        with: Vec::new(),
        compared: 0,
        unknown: Vec::new(),
    }
}

/// Whether agent `i` of `record` finished with work that could still land: done, neither
/// merged nor discarded, having changed something.
fn eligible(record: &RunRecord, i: usize) -> Result<(), ForesightError> {
    let a = record
        .agents
        .get(i)
        .ok_or(ForesightError::NoSuchAgent(i + 1))?;
    if a.status.state != AgentState::Done {
        return Err(ForesightError::Unfinished(a.status.state.as_str()));
    }
    if let Some(o) = a.outcome.filter(|o| o.is_closed()) {
        return Err(ForesightError::Closed(o.as_str()));
    }
    if a.workspace.is_none() {
        return Err(ForesightError::NoWorkspace);
    }
    if a.summary.as_ref().is_some_and(|s| s.files_changed == 0) {
        return Err(ForesightError::NothingChanged);
    }
    Ok(())
}

/// Where agent `i` of `record`'s work is, when it is a worktree on this machine.
async fn place_of(ops: &Ops, record: &RunRecord, i: usize) -> Result<Place, ForesightError> {
    let a = record
        .agents
        .get(i)
        .ok_or(ForesightError::NoSuchAgent(i + 1))?;
    let id = a.workspace.as_deref().ok_or(ForesightError::NoWorkspace)?;
    let ws = ops.resolve_workspace(id).await?;
    let git = ws
        .git
        .as_ref()
        .ok_or_else(|| ForesightError::Plain(ws.label()))?;
    if !git.worktree.is_dir() {
        return Err(ForesightError::Elsewhere {
            worktree: git.worktree.clone(),
            node: a.node.clone(),
        });
    }
    Ok(Place {
        run: record.id.to_string(),
        index: i,
        label: a.label.clone(),
        repo: git.repo.clone(),
        worktree: git.worktree.clone(),
        base: git.base_branch.clone(),
    })
}

/// The finished agents of runs other than `record` whose work is on one of `ours`'
/// repositories: those whose worktree is here, and, by repository, why each other one cannot
/// be read.
async fn others(
    ops: &Ops,
    store: &RunStore,
    record: &RunRecord,
    ours: &[Place],
) -> (Vec<Place>, Vec<(PathBuf, Unknown)>) {
    let (mut places, mut unknown) = (Vec::new(), Vec::new());
    // A run that cannot be read is said where runs are listed; here it is only not compared.
    let Ok(runs) = store.list().await else {
        return (places, unknown);
    };
    for run in runs.into_iter().flatten() {
        if run.id == record.id {
            continue;
        }
        for i in 0..run.agents.len() {
            if eligible(&run, i).is_err() {
                continue;
            }
            match place_of(ops, &run, i).await {
                Ok(p) if ours.iter().any(|o| o.repo == p.repo) => places.push(p),
                Ok(_) => {}
                // A worktree on another machine: said when its recorded repository is ours.
                Err(e @ ForesightError::Elsewhere { .. }) => {
                    if let Some(repo) = recorded_repo(ops, &run, i).await
                        && ours.iter().any(|o| o.repo == repo)
                    {
                        unknown.push((
                            repo,
                            Unknown {
                                run: run.id.to_string(),
                                agent: i + 1,
                                why: e.to_string(),
                            },
                        ));
                    }
                }
                // A plain workspace, or one deleted: nothing it could land beside.
                Err(_) => {}
            }
        }
    }
    (places, unknown)
}

/// The repository agent `i` of `run`'s workspace records, wherever its worktree is.
async fn recorded_repo(ops: &Ops, run: &RunRecord, i: usize) -> Option<PathBuf> {
    let id = run.agents.get(i)?.workspace.as_deref()?;
    Some(ops.resolve_workspace(id).await.ok()?.git?.repo)
}

/// The local branch a pick of the work at `place` would merge into.
fn local_base_of(repo: &Repo, place: &Place) -> Result<String, ForesightError> {
    repo.local_base(&place.base)
        .ok_or_else(|| ForesightError::NoLocalBase(place.base.clone()))
}

/// The work at `place` read as one commit, to merge into `base`.
fn read_work(place: Place, base: String) -> Result<Work, ForesightError> {
    let commit = berth_git::work_commit(&place.worktree)?;
    Ok(Work {
        place,
        base,
        commit,
    })
}

/// Runs git's blocking work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ForesightError> + Send + 'static,
) -> Result<T, ForesightError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(ForesightError::Stopped(e.to_string())))
}

impl berth_ops::Kinded for ForesightError {
    fn kind(&self) -> berth_ops::ErrorKind {
        ForesightError::kind(self)
    }
}
