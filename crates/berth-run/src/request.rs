//! What a run is asked to do: the task, its agents, policy, check and budget, and for a
//! resumed or told run what each agent continues; checked and settled before anything is
//! made (`prepare`); and the workspace name a task gives.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use berth_ops::Repository;
use serde::{Deserialize, Serialize};

use crate::agents::AgentSpec;
use berth_agent::Policy;

/// Seconds a check may take in each worktree unless the run says otherwise.
pub const DEFAULT_CHECK_TIMEOUT_SECS: u64 = 600;

/// What to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub task: String,
    /// The repository the workspaces are worktrees of (the folder it was started in, or
    /// `--repo`).
    pub repository: Repository,
    /// Work in this existing workspace (id, name or prefix) instead of a new one: one agent,
    /// in its worktree or folder.
    pub workspace: Option<String>,
    /// One per agent.
    pub agents: Vec<AgentSpec>,
    /// The workspaces' names start with this (default: from the task); each gets its index.
    pub name: Option<String>,
    pub policy: Policy,
    /// Run in each worktree once the agents are done.
    pub check: Option<String>,
    /// How long a check may take.
    pub check_timeout: Duration,
    /// A run resumed (`berth run resume`): only these agents run, each continuing in its
    /// workspace and session. Empty for a new run.
    pub resume: BTreeMap<usize, Resume>,
    /// What an ACP agent's process may write besides its worktree (`--agent-writable`);
    /// empty: the state berth knows the agent keeps (`berth_sandbox::agent_profile`).
    pub agent_writable: Vec<PathBuf>,
    /// Give the work back by pushing: each agent that ended done has its uncommitted work
    /// committed and its branch pushed to the repository's `origin` (a repository named by
    /// URL, whose clone berth keeps).
    pub push: bool,
    /// What each agent may use before it is stopped (`--max-tokens`, `--max-cost`; else
    /// `[run]`'s).
    pub budget: Budget,
    /// Agents working at once, the others queued: a worker's `--max-agents` for a run larger
    /// than it; `None`: `[run] max_agents`.
    pub max_agents: Option<usize>,
    /// Where each ACP agent's standard error is kept (`agent-N.stderr`, the last MiB or
    /// more): the kept run's folder on this machine, set by its supervisor; `None`: not kept.
    pub stderr_dir: Option<PathBuf>,
    /// `--ask`: a call the policy does not cover waits this long for a person's answer
    /// ([`Run::answer`]) instead of being refused; `None`: refused at once.
    pub ask: Option<Duration>,
}

impl RunRequest {
    /// `task` for `agents` in `repository`, everything else as a run is by default: new
    /// workspaces named from the task, a policy that allows nothing beyond reading, no check,
    /// `[run]`'s budget, nobody asked. Front ends set what their person chose on top.
    pub fn new(task: String, repository: Repository, agents: Vec<AgentSpec>) -> RunRequest {
        RunRequest {
            task,
            repository,
            workspace: None,
            agents,
            name: None,
            policy: Policy::new(&[] as &[String], false),
            check: None,
            check_timeout: Duration::from_secs(DEFAULT_CHECK_TIMEOUT_SECS),
            resume: BTreeMap::new(),
            agent_writable: Vec::new(),
            push: false,
            budget: Budget::default(),
            max_agents: None,
            stderr_dir: None,
            ask: None,
        }
    }
}

/// How long a run's question waits for a person (`RunRequest::ask`), or `None` when it asks
/// nobody: when the run was asked to (`--ask`, the dashboard) or `[run] ask` says so, for
/// `timeout_secs`, else `[run] ask_timeout_secs`, else [`crate::ask::DEFAULT_ASK_TIMEOUT`].
pub fn ask_wait(
    asked: bool,
    timeout_secs: Option<u64>,
    config: &berth_ops::Config,
) -> Option<Duration> {
    let run = &config.run;
    (asked || run.ask == Some(true)).then(|| {
        timeout_secs
            .or(run.ask_timeout_secs)
            .map_or(crate::ask::DEFAULT_ASK_TIMEOUT, Duration::from_secs)
    })
}

/// What one agent of a run may use; past it the agent is stopped, recorded as `budget`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// US dollars, by the session's model's `[prices]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
}

impl Budget {
    /// This budget, where it is silent `[run]`'s of `loaded`.
    pub(crate) fn or(self, loaded: &berth_ops::LoadedConfig) -> Budget {
        let run = &loaded.config.run;
        Budget {
            max_tokens: self.max_tokens.or(run.max_tokens),
            max_cost: self.max_cost.or(run.max_cost),
        }
    }

    /// Why `usage` (costing `cost`, where the price is known) is over the budget.
    pub(crate) fn crossed(&self, usage: berth_agent::Usage, cost: Option<f64>) -> Option<String> {
        let tokens = usage.input_tokens + usage.output_tokens;
        if let Some(max) = self.max_tokens
            && tokens > max
        {
            return Some(format!(
                "stopped at its budget: {tokens} tokens, over the {max} allowed (--max-tokens)"
            ));
        }
        if let (Some(max), Some(cost)) = (self.max_cost, cost)
            && cost > max
        {
            return Some(format!(
                "stopped at its budget: ${cost:.2}, over the ${max:.2} allowed (--max-cost)"
            ));
        }
        None
    }
}

/// An agent continued where it stopped: its workspace and session, and an ACP agent's own
/// session id (which it loads with `session/load`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub workspace: String,
    pub session: String,
    pub acp_session: Option<String>,
    /// What the agent is told (`berth run tell`); without it, to carry on with the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Its workspace is on another node (one that died): it goes on in a new workspace here,
    /// in a new session carrying its transcript.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub moved: bool,
}

/// What a resumed agent is told: the task again, and that its work so far is in the
/// worktree (its earlier answers are in the session it continues).
pub(crate) fn resume_prompt(task: &str) -> String {
    format!(
        "Your earlier turn on this task was cut off before it ended (the process running it \
         stopped). What you changed is still in the worktree: look at its state and carry on \
         until the task is done. The task:\n\n{task}"
    )
}

/// What an agent taken over from a node that died is told: its work there is gone, its
/// history is not.
pub(crate) fn moved_prompt(task: &str) -> String {
    format!(
        "Your earlier turn on this task was cut off before it ended: the machine running it \
         stopped, and what you changed there is lost. This is a fresh worktree. Do the task \
         again here, from the start, until it is done. The task:\n\n{task}"
    )
}

/// A workspace name from a task: its first words, lowercase, joined by `-`, at most
/// [`NAME_FROM_TASK_MAX`] characters; it stops at the first word that is tool syntax
/// (`write_file`, `path=notes.txt`, `src/lib.rs`), which names nothing a person would look
/// for (a file's name, `out.txt`, is a word: `out-txt`). `run` when no word is left.
pub fn name_from_task(task: &str) -> String {
    let mut name = String::new();
    for raw in task.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if word.contains(|c: char| "_=/\\:;()[]{}<>`$@#|&*~+\"'".contains(c)) {
            break;
        }
        let word: String = word
            .chars()
            .map(|c| if c == '.' { '-' } else { c })
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect::<String>()
            .to_ascii_lowercase();
        let word = word
            .split('-')
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join("-");
        let word = word.as_str();
        if word.is_empty() {
            continue;
        }
        let joined = name.len() + usize::from(!name.is_empty()) + word.len();
        if joined > NAME_FROM_TASK_MAX {
            if name.is_empty() {
                name = word[..NAME_FROM_TASK_MAX].trim_end_matches('-').to_owned();
            }
            break;
        }
        if !name.is_empty() {
            name.push('-');
        }
        name.push_str(word);
    }
    if name.is_empty() {
        "run".to_owned()
    } else {
        name
    }
}

/// The longest name [`name_from_task`] gives (each agent's workspace adds `-N`).
pub const NAME_FROM_TASK_MAX: usize = 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_tasks_first_words() {
        assert_eq!(
            name_from_task("Fix the parser: it panics!"),
            "fix-the-parser-it-panics"
        );
        assert_eq!(
            name_from_task("Add notes tool: write_file path=notes.txt"),
            "add-notes-tool"
        );
        assert_eq!(name_from_task("Update src/lib.rs to log"), "update");
        assert_eq!(name_from_task("Write out.txt"), "write-out-txt");
        assert_eq!(name_from_task("Tidy ..hidden-- files"), "tidy-hidden-files");
        assert_eq!(name_from_task("Répare le bug"), "rpare-le-bug");
        assert_eq!(name_from_task("¿¡!"), "run");
        assert_eq!(name_from_task("write_file everything"), "run");
        let long = name_from_task(&"word ".repeat(30));
        assert!(
            long.len() <= NAME_FROM_TASK_MAX && !long.ends_with('-'),
            "{long}"
        );
        let one = name_from_task(&"x".repeat(60));
        assert_eq!(one.len(), NAME_FROM_TASK_MAX);
        assert!(berth_ops::WorkspaceName::new(format!("{long}-3")).is_ok());
    }
}
