//! A land's record: what was asked (each run, and which of its agents), how, and where each
//! agent's work stands, step by step. Written only by whoever drives the land, after every
//! step, so a land cut off anywhere is resumed from what it says.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use berth_git::MergeMode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::check::CheckResult;
use crate::kept::RunId;

/// A land's id: 12 lowercase hex digits, made by berth.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LandId(String);

impl LandId {
    pub(crate) fn generate() -> LandId {
        LandId(uuid::Uuid::new_v4().simple().to_string()[..12].to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a text is not a land's id.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid land id {0:?}: a land id is the hex digits `berth land list` shows")]
pub struct BadLandId(pub String);

impl TryFrom<String> for LandId {
    type Error = BadLandId;
    fn try_from(value: String) -> Result<LandId, BadLandId> {
        let ok = !value.is_empty()
            && value.len() <= 64
            && value
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        match ok {
            true => Ok(LandId(value)),
            false => Err(BadLandId(value.chars().take(80).collect())),
        }
    }
}

impl From<LandId> for String {
    fn from(id: LandId) -> String {
        id.0
    }
}

impl fmt::Display for LandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which agent of a run a land takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Which {
    /// `RUN`: its one agent that finished.
    Only,
    /// `RUN:best`: the pick rule's choice.
    Best,
    /// `RUN:N`: agent N (0-based here).
    Agent(usize),
}

/// One `RUN[:N|best]` of a land's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The run as given: an id or a prefix of one.
    pub run: String,
    pub which: Which,
}

/// Why a `RUN[:N|best]` cannot be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "{0:?} is not a run to land: give RUN (its one finished agent), RUN:N (agent N, 1 is the first) or RUN:best"
)]
pub struct BadTarget(pub String);

impl FromStr for Target {
    type Err = BadTarget;
    fn from_str(s: &str) -> Result<Target, BadTarget> {
        let bad = || BadTarget(s.chars().take(80).collect());
        let (run, which) = match s.split_once(':') {
            None => (s, Which::Only),
            Some((run, "best")) => (run, Which::Best),
            Some((run, n)) => match n.parse::<usize>() {
                Ok(n) if n >= 1 => (run, Which::Agent(n - 1)),
                _ => return Err(bad()),
            },
        };
        if run.is_empty() || !run.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        Ok(Target {
            run: run.to_owned(),
            which,
        })
    }
}

/// Where a land is as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandState {
    /// Being driven, or cut off (a crash, a kill) while it was: its lock says which.
    Landing,
    /// Stopped before every agent was decided (Ctrl-C, a checkout in the way): `--resume`
    /// goes on.
    Stopped,
    /// Every agent landed or left.
    Over,
}

impl LandState {
    pub fn as_str(self) -> &'static str {
        match self {
            LandState::Landing => "landing",
            LandState::Stopped => "stopped",
            LandState::Over => "over",
        }
    }
}

/// Where one agent's work stands in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemState {
    /// Not reached yet.
    Waiting,
    /// Under way: brought up to date, resolved, checked.
    Landing,
    /// On its base: the agent is recorded merged.
    Landed,
    /// Picked already before this land: counted as landed, nothing done.
    Skipped,
    /// Not landed, with why (a conflict or a check its agent did not mend, an agent that
    /// cannot be told); the queue went on. `--resume` tries it again.
    Left,
}

impl ItemState {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::Waiting => "waiting",
            ItemState::Landing => "landing",
            ItemState::Landed => "landed",
            ItemState::Skipped => "skipped",
            ItemState::Left => "left",
        }
    }

    /// Decided for good: nothing more to do for it, resumed or not.
    pub fn is_done(self) -> bool {
        matches!(self, ItemState::Landed | ItemState::Skipped)
    }
}

/// A conflict written into an agent's worktree, awaiting its resolution: its HEAD at
/// `base`, its files the merge with `work` (its tip before, kept on the land's ref).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub base: String,
    pub work: String,
    pub files: Vec<String>,
}

/// One agent's work in a land.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LandItem {
    pub run: RunId,
    /// As asked: `3f2a`, `3f2a:2`, `3f2a:best`.
    pub asked: String,
    pub which: Which,
    /// The agent (0-based), once chosen.
    pub agent: Option<usize>,
    pub state: ItemState,
    /// Why it was left, or skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The branch it lands on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    /// The base's tip it was brought up to date with, and the commit checked on top of it:
    /// what a resume looks for on the base before doing anything again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tip: Option<String>,
    /// The base's tip once it landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
    /// Turns its agent was given to resolve a conflict or mend the check.
    #[serde(default)]
    pub turns: u32,
    /// The check on the combined tree, last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckResult>,
    /// Where an unfinished resolution was kept, when one was abandoned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
}

/// What a step of a land was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Started,
    Chosen,
    Committed,
    UpToDate,
    Merged,
    Conflict,
    Told,
    Resolved,
    Checked,
    Landed,
    Skipped,
    Left,
    Stopped,
    Over,
}

/// One step of a land, as `--json` prints it and `land show` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LandStep {
    pub land: LandId,
    pub at: DateTime<Utc>,
    pub step: StepKind,
    /// The item (0-based) it is about; none for the land's own start and end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunId>,
    /// Counted from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<usize>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckResult>,
}

/// A land as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LandRecord {
    pub id: LandId,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    pub state: LandState,
    /// The node that drives it, and its process while it does.
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The folder it was asked in: a pushed branch is merged into the repository holding it.
    pub dir: PathBuf,
    pub mode: MergeMode,
    /// Turns an agent is given to resolve or mend, each.
    pub retries: u32,
    /// Whether conflicts and red checks go back to their agents.
    pub resolve: bool,
    /// The batch it lands (`--batch`), when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// Why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub items: Vec<LandItem>,
    /// Every step so far, in order.
    #[serde(default)]
    pub steps: Vec<LandStep>,
}

impl LandRecord {
    /// The items landed (or picked before), and those left, as `run:N`.
    pub fn tally(&self) -> (Vec<String>, Vec<String>) {
        let name = |i: &LandItem| match i.agent {
            Some(a) => format!("{}:{}", i.run, a + 1),
            None => i.asked.clone(),
        };
        let landed = self
            .items
            .iter()
            .filter(|i| i.state.is_done())
            .map(name)
            .collect();
        let left = self
            .items
            .iter()
            .filter(|i| !i.state.is_done())
            .map(name)
            .collect();
        (landed, left)
    }
}

/// The mark every commit a land makes carries in its message, by which a resumed land finds
/// what it landed before it could record it.
pub(crate) fn mark(land: &LandId, run: &RunId, agent: usize) -> String {
    format!("berth land {land}: run {run}, agent {}", agent + 1)
}

impl berth_ops::Kinded for BadLandId {
    fn kind(&self) -> berth_ops::ErrorKind {
        berth_ops::ErrorKind::Invalid
    }
}

impl berth_ops::Kinded for BadTarget {
    fn kind(&self) -> berth_ops::ErrorKind {
        berth_ops::ErrorKind::Invalid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_as_documented() {
        let t: Target = "3f2a".parse().unwrap();
        assert_eq!(t.which, Which::Only);
        assert_eq!("3f2a:best".parse::<Target>().unwrap().which, Which::Best);
        assert_eq!("3f2a:2".parse::<Target>().unwrap().which, Which::Agent(1));
        for bad in ["", ":2", "3f2a:0", "3f2a:x", "../x", "3f2a:-1", "zz"] {
            assert!(bad.parse::<Target>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_land_id_holds_hex_only() {
        assert!(LandId::try_from("0a1b2c3d4e5f".to_owned()).is_ok());
        assert!(LandId::try_from("../x".to_owned()).is_err());
        assert!(LandId::try_from(String::new()).is_err());
    }
}
