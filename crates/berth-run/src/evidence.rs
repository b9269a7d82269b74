//! Picking on evidence: the one rule of which agent of a run may be merged, which the CLI's
//! `run pick`, the dashboard and the review page all apply, before anything moves.
//!
//! - An agent that did not finish (failed, stopped, over its budget), changed nothing, or
//!   whose check failed is refused unless the person forces it, and the refusal says why.
//! - A run has one winner: a second agent of the same run is merged only when the person
//!   says so (`--also`), combining work on purpose.
//! - `best` is the passing agent with the fewest changed lines, then the lowest cost, then
//!   the first; a run without a check has no evidence, so `best` refuses.

use serde::Serialize;

use crate::kept::{AgentOutcome, RunRecord};
use crate::{AgentRecord, AgentState};

/// Which agent to pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// This one, 0-based.
    Agent(usize),
    /// The best by [`best`].
    Best,
}

impl std::str::FromStr for Choice {
    type Err = String;

    /// `best`, or an agent's number counted from 1.
    fn from_str(text: &str) -> Result<Choice, String> {
        if text.eq_ignore_ascii_case("best") {
            return Ok(Choice::Best);
        }
        match text.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Choice::Agent(n - 1)),
            _ => Err(format!(
                "{text:?} is not an agent: give its number (1 is the first) or `best`"
            )),
        }
    }
}

/// Why agent `i` (0-based) of `record` is not to be merged without being forced, when it is
/// not: the person reads this, in the CLI's refusal, the dashboard's confirmation and the
/// review page's disabled button.
pub fn pick_refusal(record: &RunRecord, i: usize) -> Option<String> {
    let a = record.agents.get(i)?;
    let n = i + 1;
    let why = match a.status.state {
        AgentState::Done => None,
        AgentState::Failed => Some(match first_line(a.status.message.as_deref()) {
            Some(m) => format!("agent {n} failed: {m}"),
            None => format!("agent {n} failed"),
        }),
        AgentState::Stopped => Some(format!("agent {n} was stopped before it finished")),
        AgentState::Budget => Some(format!("agent {n} was stopped at its budget")),
        AgentState::Queued | AgentState::Starting | AgentState::Working => {
            Some(format!("agent {n} has not finished"))
        }
    };
    if why.is_some() {
        return why;
    }
    if a.summary.as_ref().is_some_and(|s| s.files_changed == 0) {
        return Some(format!("agent {n} changed nothing"));
    }
    match a.check() {
        Some(c) if !c.passed && !c.not_run => Some(format!("agent {n}'s check {}", c.described())),
        _ => None,
    }
}

/// The first line of a message that says something, cut at 200 characters.
fn first_line(message: Option<&str>) -> Option<String> {
    // A line that leads into the next ones ("its standard error ended:") ends here.
    let line = message?
        .lines()
        .find(|l| !l.trim().is_empty())?
        .trim()
        .trim_end_matches([':', ';', ',']);
    Some(match line.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    })
}

/// The agents of `record` merged already, 0-based.
pub fn merged(record: &RunRecord) -> Vec<usize> {
    record
        .agents
        .iter()
        .enumerate()
        .filter(|(_, a)| a.outcome == Some(AgentOutcome::Merged))
        .map(|(i, _)| i)
        .collect()
}

/// The best agent of `record` and why, or why there is none: among the agents not merged or
/// discarded whose check passed and who [`pick_refusal`] lets through, the one that changed
/// the fewest lines, then cost the least, then came first.
pub fn best(record: &RunRecord) -> Result<(usize, String), String> {
    let id = &record.id;
    if record.request.check.is_none() {
        return Err(format!(
            "run {id} has no check, so there is no evidence to pick the best by: look at the agents (`berth run compare {id}`) and pick one by its number"
        ));
    }
    let passing: Vec<(usize, &AgentRecord)> = record
        .agents
        .iter()
        .enumerate()
        .filter(|(_, a)| !a.outcome.is_some_and(AgentOutcome::is_closed))
        .filter(|(i, a)| pick_refusal(record, *i).is_none() && a.check().is_some_and(|c| c.passed))
        .collect();
    let lines = |a: &AgentRecord| a.summary.as_ref().map_or(0, |s| s.added + s.removed);
    let cost = |a: &AgentRecord| a.summary.as_ref().and_then(|s| s.cost_usd);
    let Some(&(winner, w)) = passing.iter().min_by(|(i, a), (j, b)| {
        lines(a)
            .cmp(&lines(b))
            .then_with(|| {
                // An agent whose cost is unknown comes after one whose cost is known.
                let (x, y) = (
                    cost(a).unwrap_or(f64::INFINITY),
                    cost(b).unwrap_or(f64::INFINITY),
                );
                x.total_cmp(&y)
            })
            .then(i.cmp(j))
    }) else {
        let why: Vec<String> = record
            .agents
            .iter()
            .enumerate()
            .map(|(i, a)| match (a.outcome, pick_refusal(record, i)) {
                (Some(o), _) if o.is_closed() => format!("agent {} was {}", i + 1, o.as_str()),
                (_, Some(why)) => why,
                _ => format!("agent {}'s check did not pass", i + 1),
            })
            .collect();
        return Err(format!(
            "no agent of run {id} passed its check to be picked: {}",
            why.join("; ")
        ));
    };
    let mut why = format!(
        "agent {} passed its check and changed {} line(s)",
        winner + 1,
        lines(w)
    );
    let tied: Vec<&(usize, &AgentRecord)> = passing
        .iter()
        .filter(|(i, a)| *i != winner && lines(a) == lines(w))
        .collect();
    match (passing.len(), tied.is_empty()) {
        (1, _) => why.push_str(", the only agent that did"),
        (n, true) => why.push_str(&format!(", the fewest of the {n} that passed")),
        (n, false) => why.push_str(&format!(
            ", the fewest of the {n} that passed, as few as {}; it {}",
            tied.iter()
                .map(|(i, _)| format!("agent {}", i + 1))
                .collect::<Vec<_>>()
                .join(" and "),
            match cost(w) {
                Some(c) => format!("cost the least (${c:.4})"),
                None => "came first".to_owned(),
            }
        )),
    }
    Ok((winner, why))
}

/// What a front end shows of whether an agent can be picked, before anyone asks.
#[derive(Debug, Clone, Serialize)]
pub struct Pickable {
    /// Counted from 1.
    pub agent: usize,
    /// Why it is not picked without being forced, when it is not.
    pub refusal: Option<String>,
    /// Why it cannot be picked at all (merged or discarded already, no workspace, the run
    /// still running), when it cannot.
    pub closed: Option<String>,
}

/// Whether agent `i` of `record` can be picked now, and on what terms.
pub fn pickable(record: &RunRecord, i: usize) -> Pickable {
    let a = &record.agents[i];
    let closed = if !record.state.is_over() {
        Some(format!(
            "run {} is still {}",
            record.id,
            record.state.as_str()
        ))
    } else if let Some(o) = a.outcome.filter(|o| o.is_closed()) {
        Some(format!("its work was {}", o.as_str()))
    } else if a.workspace.is_none() {
        Some("it never got a workspace".to_owned())
    } else {
        None
    };
    Pickable {
        agent: i + 1,
        refusal: pick_refusal(record, i),
        closed,
    }
}
