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

use crate::event::AgentState;
use crate::kept::AgentRecord;
use crate::kept::{AgentOutcome, RunRecord};

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

/// The first line of a message that says something, cut at 200 characters, what would drive
/// a terminal in it shown as escapes.
fn first_line(message: Option<&str>) -> Option<String> {
    // A line that leads into the next ones ("its standard error ended:") ends here.
    let line = message?
        .lines()
        .find(|l| !l.trim().is_empty())?
        .trim()
        .trim_end_matches([':', ';', ',']);
    // An agent's words, quoted in a refusal every front end prints: nothing in them drives
    // a terminal.
    let line = berth_ops::shown::visible(line, berth_ops::shown::Form::Line).into_owned();
    Some(match line.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
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
    /// Whether forcing it could merge anything: it is refused, and has work (it changed
    /// something, or what it changed is not known). An agent that changed nothing has
    /// nothing to force.
    pub forceable: bool,
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
    let refusal = pick_refusal(record, i);
    let has_work = a.summary.as_ref().is_none_or(|s| s.files_changed > 0);
    Pickable {
        agent: i + 1,
        forceable: refusal.is_some() && has_work,
        refusal,
        closed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::CheckResult;
    use crate::event::AgentSummary;
    use crate::kept::{RunId, StoredRequest};

    /// A run over of `agents.len()` agents, each `(state, lines changed, cost, check passed)`.
    fn run(check: bool, agents: &[(AgentState, u64, Option<f64>, Option<bool>)]) -> RunRecord {
        let mut request = StoredRequest::one_agent("Fix it");
        request.check = check.then(|| "cargo test".to_owned());
        request.agents = vec![request.agents[0].clone(); agents.len()];
        let mut record = RunRecord::new(RunId::generate(), request);
        record.state = crate::kept::RunState::Ended;
        for (i, (state, lines, cost, passed)) in agents.iter().enumerate() {
            let a = &mut record.agents[i];
            a.workspace = Some(format!("w{i}"));
            a.status.state = *state;
            a.summary = Some(AgentSummary {
                agent: i,
                label: "berth".into(),
                workspace: a.workspace.clone(),
                workspace_name: None,
                session: None,
                state: *state,
                stop: "end_turn".into(),
                message: None,
                files_changed: usize::from(*lines > 0),
                added: *lines,
                removed: 0,
                check: passed.map(|p| CheckResult {
                    command: "cargo test".into(),
                    passed: p,
                    not_run: false,
                    outcome: (!p).then(|| "exit 1".into()),
                    output: None,
                    elapsed_ms: 0,
                }),
                input_tokens: 0,
                output_tokens: 0,
                cost_usd: *cost,
                elapsed_ms: 0,
            });
        }
        record
    }

    use AgentState::{Done, Failed};

    #[test]
    fn best_is_the_passing_agent_with_the_fewest_lines_then_the_lowest_cost() {
        let record = run(
            true,
            &[
                (Done, 3, Some(0.02), Some(false)),
                (Done, 9, Some(0.01), Some(true)),
                (Done, 5, Some(0.03), Some(true)),
                (Done, 5, Some(0.02), Some(true)),
                (Failed, 1, Some(0.00), None),
            ],
        );
        let (winner, why) = best(&record).unwrap();
        assert_eq!(winner, 3, "{why}");
        assert!(why.contains("changed 5 line(s)"), "{why}");
        assert!(why.contains("as few as agent 3"), "{why}");
        assert!(why.contains("cost the least"), "{why}");
        // A cost not known comes after one known.
        let record = run(
            true,
            &[
                (Done, 5, None, Some(true)),
                (Done, 5, Some(0.5), Some(true)),
            ],
        );
        assert_eq!(best(&record).unwrap().0, 1);
    }

    #[test]
    fn best_refuses_without_a_check_or_a_passing_agent_and_says_why() {
        let no_check = run(false, &[(Done, 3, None, None)]);
        assert!(best(&no_check).unwrap_err().contains("has no check"));
        let none = run(
            true,
            &[
                (Failed, 0, None, None),
                (Done, 0, None, None),
                (Done, 2, None, Some(false)),
            ],
        );
        let why = best(&none).unwrap_err();
        assert!(why.contains("agent 1 failed"), "{why}");
        assert!(why.contains("agent 2 changed nothing"), "{why}");
        assert!(why.contains("agent 3's check failed (exit 1)"), "{why}");
        // Forcing is for work there is: not for an agent that changed nothing.
        assert!(!pickable(&none, 1).forceable);
        assert!(pickable(&none, 2).forceable);
        assert!(!pickable(&no_check, 0).forceable, "nothing refuses it");
    }

    #[test]
    fn a_refusal_quotes_an_agents_words_with_what_drives_a_terminal_shown_as_escapes() {
        let mut record = run(true, &[(Failed, 0, None, None)]);
        record.agents[0].status.message =
            Some("\n  died:\x1b]52;c;ZXZpbA==\x07 \u{202e}gnp.exe:\nmore".to_owned());
        let why = pick_refusal(&record, 0).unwrap();
        assert_eq!(
            why,
            "agent 1 failed: died:\\x1b]52;c;ZXZpbA==\\x07 \\u{202e}gnp.exe"
        );
    }

    #[test]
    fn a_winner_closes_the_others_picks_but_not_its_own_record() {
        let mut record = run(
            true,
            &[(Done, 1, None, Some(true)), (Done, 1, None, Some(true))],
        );
        record.agents[0].outcome = Some(AgentOutcome::Merged);
        assert_eq!(merged(&record), vec![0]);
        assert_eq!(best(&record).unwrap().0, 1);
        assert!(pickable(&record, 0).closed.unwrap().contains("merged"));
        assert!(pickable(&record, 1).closed.is_none());
        record.state = crate::kept::RunState::Running;
        assert!(
            pickable(&record, 1)
                .closed
                .unwrap()
                .contains("still running")
        );
    }
}
