//! The grammar of `berth run`: the flags of a new run, and the subcommands that read and steer
//! the runs kept under the home.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::ConfirmFlag;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct RunArgs {
    #[command(subcommand)]
    pub command: Option<RunCommand>,
    #[command(flatten)]
    pub new: NewRunArgs,
}

#[derive(Args)]
pub struct NewRunArgs {
    /// What the agents are to do, quoted or as several words; `-` reads it from standard
    /// input. A task of one word that is, or is close to, a subcommand's name (`list`,
    /// `lsit`) is refused, since it is most likely a typo: give it with --task-file or `-`.
    #[arg(value_name = "TASK", required_unless_present_any = ["task_file", "tasks"])]
    pub task: Vec<String>,
    /// Read the task from this file.
    #[arg(long, value_name = "PATH", conflicts_with = "task")]
    pub task_file: Option<PathBuf>,
    /// Several tasks at once: one run per task of this file (`-`: standard input), each
    /// with the agents and options given here, all started at once (detached, or queued
    /// with --queue) as one batch, whose id is printed (`berth run list --batch ID`). A
    /// task per line, or, in a Markdown list, per top-level item with the more-indented
    /// lines under it; at most 100.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["task", "task_file"])]
    pub tasks: Option<PathBuf>,
    /// An agent of the run; repeat it for a mix: `berth` (berth's own), `berth:MODEL`
    /// (`berth:openai/gpt-4.1`), `cmd:COMMAND` (any ACP agent by its command line), or a
    /// name: `claude-code`, `codex`, `gemini`, or an [agents.NAME] entry of the config.
    #[arg(long, value_name = "SPEC")]
    pub agent: Vec<String>,
    /// How many agents (`3`: of the default agent, [run] agent, else berth's own; or of the
    /// one --agent names), or a mix of berth's own by model (`claude:2,openai:1`; each name
    /// a provider, provider/model, or a model berth knows). Default: 1.
    #[arg(long, short = 'n', value_name = "N|MIX")]
    pub agents: Option<String>,
    /// The model of berth's own agents given by count (default: each workspace's configured
    /// one).
    #[arg(long, short = 'm', value_name = "MODEL")]
    pub model: Option<String>,
    /// Ask a person about a call --allow does not cover, instead of refusing it: the agent
    /// waits (a `needs_input` notification goes out) until `berth run answer` or the review
    /// page answers, or --ask-timeout passes ([run] ask = true sets it for every run).
    #[arg(long)]
    pub ask: bool,
    /// How long a question of --ask waits before it is refused (default: [run]
    /// ask_timeout_secs, else 1800: 30 minutes).
    #[arg(long, value_name = "SECS")]
    pub ask_timeout: Option<u64>,
    /// Run this ACP agent instead of berth's own (`--agent-cmd "gemini --experimental-acp"`,
    /// `--agent-cmd "berth acp"`), started in each worktree and driven over its stdio. Its
    /// file reads and writes and its terminals through berth stay in its worktree, and the
    /// process itself is confined ([sandbox]): it writes only there, in a private /tmp and in
    /// its own state, and connects only to its provider. The same as --agent "cmd:COMMAND".
    #[arg(long, value_name = "COMMAND", conflicts_with = "agent")]
    pub agent_cmd: Option<String>,
    /// A folder or file the ACP agents' processes may write besides their worktrees (their
    /// own state; repeatable). Default: what berth knows the agent keeps (~/.claude for
    /// claude-agent-acp, with CLAUDE_CONFIG_DIR set there unless set, ~/.codex for codex,
    /// ~/.gemini for gemini), or an [agents.NAME] entry's `writable`.
    #[arg(long, value_name = "PATH")]
    pub agent_writable: Vec<PathBuf>,
    /// Workspace names start with this (default: from the task); each gets its index.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The repository to make the workspaces in (default: the one containing this folder):
    /// a folder, or a URL (https://, ssh://, git://, file://, user@host:path). A URL's
    /// repository is cloned under the home (once; fetched before each run), and each agent
    /// that ends done has its work committed and its branch pushed back to the URL.
    #[arg(long, value_name = "PATH|URL")]
    pub repo: Option<PathBuf>,
    /// Let these tools write or run (comma-separated, repeatable).
    #[arg(long, value_delimiter = ',', value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Let every tool write and run.
    #[arg(long)]
    pub allow_all: bool,
    /// A command to run in each worktree once the agents are done (`cargo test`).
    #[arg(long, value_name = "CMD")]
    pub check: Option<String>,
    /// Seconds the check may take in each worktree.
    #[arg(long, default_value_t = berth_run::DEFAULT_CHECK_TIMEOUT_SECS, value_name = "SECS")]
    pub check_timeout: u64,
    /// Tokens each agent may use (read and written, every turn); past them it is stopped at
    /// once, recorded as `budget` (default: `[run] max_tokens`, else no limit). An ACP
    /// agent says its tokens when its turn ends, and is held to the limit then.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// US dollars each agent may spend, by `[prices]` of its model; past them it is stopped,
    /// recorded as `budget` (default: `[run] max_cost`, else no limit).
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,
    /// Print the run's id and return at once; the run goes on under a supervisor process of
    /// its own (`berth run show ID`, `logs ID -f`, `wait ID`, `stop ID`).
    #[arg(long)]
    pub detach: bool,
    /// Put the run in the store's queue and print its id at once: a worker of the pool
    /// (`berth serve --worker`, on any node on the same database) takes it. Its repository
    /// is a URL every node can fetch (--repo, default: this repository's `origin`), and each
    /// agent's work comes back as a branch pushed there. Needs a database store.
    #[arg(long, conflicts_with = "detach")]
    pub queue: bool,
    /// With --queue: only the worker of this node takes the run.
    #[arg(long, value_name = "NAME", requires = "queue")]
    pub node: Option<String>,
    /// One JSON object per event on standard output, for scripts (with --detach or --queue,
    /// one object naming the run; with --tasks, {"batch", "runs": [{"run", "task",
    /// "supervisor"}]}).
    #[arg(long)]
    pub json: bool,
}

/// Runs kept under the home: each has an id (`berth run list`; 4 or more of its first
/// digits will do), a record of each agent's workspace, session and state, and a log of its
/// events.
#[derive(Subcommand)]
pub enum RunCommand {
    /// The runs of this home (or its database), newest first: state, agents, when, task. A
    /// page at a time: when there are more, standard error gives the --cursor of the next.
    ///
    /// The STATE column is where the run's review stands: `running`, `waiting` (an agent
    /// asks a person), `review` (over, nothing picked or discarded), `picked N`,
    /// `discarded`; then its checks, `2✓ 1✗`. --json adds it to each run as "review".
    List {
        /// Only the runs waiting for review: over, nothing picked or discarded.
        #[arg(long)]
        review: bool,
        /// Only the runs of this batch (`berth run --tasks`; 4 or more of its first digits
        /// will do), all of them, in the order of its file's tasks.
        #[arg(long, value_name = "ID", conflicts_with_all = ["review", "cursor"])]
        batch: Option<String>,
        /// Runs on this page (1 to 1000).
        #[arg(long, value_name = "N", default_value_t = berth_ops::PAGE_DEFAULT)]
        limit: usize,
        /// Where a page before ended, as standard error gave it.
        #[arg(long, value_name = "CURSOR")]
        cursor: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// A run: its task, and each agent's state, workspace, session, last tool, tokens, time,
    /// and how it ended.
    Show {
        #[arg(value_name = "RUN")]
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// What a run's agents did, as it streamed: their answers line by line, their tools,
    /// refusals and ends.
    Logs {
        #[arg(value_name = "RUN")]
        id: String,
        /// Keep following until the run is over.
        #[arg(long, short)]
        follow: bool,
        /// Only this agent (1 is the first).
        #[arg(long, value_name = "N")]
        agent: Option<berth_run::AgentNumber>,
        /// The agent's process's own standard error instead (an ACP agent's, its last MiB),
        /// as kept on the machine that ran it.
        #[arg(long, conflicts_with_all = ["follow", "json"])]
        stderr: bool,
        /// The agent's check's output instead (standard output and error as one, in the
        /// order written: its first 64 KiB and its last MiB), as kept on the machine that
        /// ran it.
        #[arg(long, conflicts_with_all = ["follow", "json", "stderr"])]
        check: bool,
        /// The events as JSON objects, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Stop a running run, or one of its agents: their turns are cancelled (an ACP agent
    /// gets session/cancel, then its process is killed), what streamed is kept, and the run
    /// checks and sums up as usual.
    Stop {
        #[arg(value_name = "RUN")]
        id: String,
        /// Only this agent (1 is the first).
        #[arg(long, value_name = "N")]
        agent: Option<berth_run::AgentNumber>,
        #[arg(long)]
        json: bool,
    },
    /// A run's agents side by side, to pick the best: how each ended, its check, tokens, cost
    /// and time, and the files each changed (+added -removed lines). `berth workspace diff`
    /// shows one agent's diff; `berth run pick` merges the winner and drops the others.
    ///
    /// --json prints {"run", "task", "state", "check", "agents": [{"agent", "label",
    /// "workspace", "workspace_name", "session", "state", "outcome", "message", "check_passed",
    /// "check_verdict", "check_outcome", "input_tokens", "output_tokens", "cost_usd",
    /// "elapsed_ms", "files", "added", "removed"}]}; each file is {"path", "status", "added",
    /// "removed"}.
    #[command(verbatim_doc_comment)]
    Compare {
        #[arg(value_name = "RUN")]
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Wait until a run is over, then print its summary. Exits 0 when every agent finished
    /// its answer and every check passed, 1 otherwise.
    Wait {
        #[arg(value_name = "RUN")]
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Tell an agent of a run something more, in its own workspace and session, with the
    /// same agent and policy: a follow-up ("also add a test"), a fix after review.
    ///
    /// A run that is over goes back to running for that agent, then checks and sums it up
    /// again; its other agents stay as they ended. In a run still running (the command
    /// returns at once; `berth run logs -f` follows it), berth's own agent takes it at its
    /// next step, beside that step's tool results, in the same turn; an ACP agent takes it as
    /// its next prompt once its current turn ends, in the same process (--now cuts that turn
    /// short first). An agent that has ended already is told once the run is over.
    Tell {
        #[arg(value_name = "RUN")]
        id: String,
        /// The agent to tell (1 is the first); needed when the run has several.
        #[arg(long, value_name = "N")]
        agent: Option<berth_run::AgentNumber>,
        /// What to tell it; `-` reads it from standard input.
        #[arg(value_name = "TEXT", required_unless_present = "task_file")]
        text: Option<String>,
        /// Read what to tell it from this file.
        #[arg(long, value_name = "PATH", conflicts_with = "text")]
        task_file: Option<PathBuf>,
        /// Tools the told turn may also use, besides the run's --allow (comma-separated or
        /// repeated): what it was refused before, now allowed. For a run that is over.
        #[arg(long, value_name = "TOOLS", value_delimiter = ',')]
        allow: Vec<String>,
        /// For a run that is over: the told turn goes on in a process of its own, and its id
        /// is printed at once, as `berth run --detach` does.
        #[arg(long, conflicts_with = "allow")]
        detach: bool,
        /// For a run still running: cancel the agent's current turn (only that turn: the
        /// agent goes on, and what it was told before is kept), then tell it this first.
        #[arg(long, conflicts_with_all = ["allow", "detach"])]
        now: bool,
        #[arg(long)]
        json: bool,
    },
    /// Open the dashboard (`berth ui`) on an agent's live view: its transcript as it streams.
    ///
    /// There `i` (or `t`) opens a line told to the agent on Enter, as `berth run tell`; while
    /// it waits on a question, `y` allows the call, `a` allows its tool from then on, `n`
    /// denies it; `d` shows its diff, `e` opens a file of it in $EDITOR, `o` your $SHELL in
    /// its worktree (the dashboard comes back when it exits); Esc goes back to the run's
    /// agents and the runs, `q` quits. Without --agent, a run of several agents opens on its
    /// agents, to choose one with Enter.
    Attach {
        #[arg(value_name = "RUN")]
        id: String,
        /// The agent to open on (1 is the first).
        #[arg(long, value_name = "N")]
        agent: Option<berth_run::AgentNumber>,
    },
    /// Answer the question an agent of a running run waits on (a run started with --ask):
    /// allow the call, allow its tool for the rest of the agent's session (--always), or deny
    /// it. `berth run show` shows what it waits on.
    Answer {
        #[arg(value_name = "RUN")]
        id: String,
        /// The agent (1 is the first); needed when the run has several.
        #[arg(long, value_name = "N")]
        agent: Option<berth_run::AgentNumber>,
        #[arg(value_enum)]
        answer: AnswerArg,
        /// With allow: its tool for the rest of the agent's session, without asking again.
        #[arg(long)]
        always: bool,
        #[arg(long)]
        json: bool,
    },
    /// Continue the agents of a run that failed or was stopped (its supervisor killed, the
    /// machine restarted), each in its workspace and session: berth's own agent always; an
    /// ACP agent when it can load its session. Agents that were done stay done.
    Resume {
        #[arg(value_name = "RUN")]
        id: String,
        /// Return at once; the run goes on under a supervisor process.
        #[arg(long)]
        detach: bool,
        #[arg(long)]
        json: bool,
    },
    /// Pick the winner of a run that is over, on evidence: agent N's work (or the best's) is
    /// merged into the run's base, with a commit naming the task, the run, the agent and its
    /// check; the other agents' work is dropped (kept on refs/berth/lost/<id>, and `berth run
    /// restore` brings it back), or kept with --keep-others. No workspace's sessions are
    /// deleted: a dropped or merged agent's workspace is archived (only its worktree goes).
    ///
    /// An agent that did not finish (failed, stopped, over budget), changed nothing, or
    /// whose check failed is refused, saying why, unless --force. `best` picks the agent
    /// whose check passed with the fewest changed lines, then the lowest cost, and says
    /// why; a run without --check has no evidence, so `best` refuses. A run has one
    /// winner: a second agent needs --also. --undo puts the base back where it was before
    /// the pick, when nothing was committed on top since (otherwise it names the `git
    /// revert` that would do it).
    ///
    /// --json prints {"run", "agent", "why", "forced", "merge": {…as `workspace merge
    /// --json`}, "dropped": [{"agent", "workspace", "lost_ref", "note"}], "kept": [N, …]};
    /// with --undo {"run", "agent", "branch", "from", "to", "lost_ref"}.
    #[command(verbatim_doc_comment)]
    Pick {
        #[arg(value_name = "RUN")]
        id: String,
        /// The agent to merge (1 is the first), or `best`.
        #[arg(value_name = "N|best", required_unless_present = "undo")]
        agent: Option<berth_run::Choice>,
        /// One new commit with the agent's changes.
        #[arg(long, conflicts_with = "rebase")]
        squash: bool,
        /// The agent's commits replayed on the base, one by one (git 2.44 or later).
        #[arg(long)]
        rebase: bool,
        /// Keep the other agents' workspaces (recorded `kept`), to look at or tell later.
        #[arg(long)]
        keep_others: bool,
        /// Merge it though it did not finish, changed nothing, or failed its check.
        #[arg(long)]
        force: bool,
        /// Merge it though another agent of the run was merged already: their work
        /// combined, on purpose.
        #[arg(long)]
        also: bool,
        /// Undo the run's pick: its base put back where it was before it.
        #[arg(long, conflicts_with_all = ["agent", "squash", "rebase", "keep_others", "force", "also"])]
        undo: bool,
        #[arg(long)]
        json: bool,
    },
    /// Drop the work of a run that is over, on purpose: every agent's workspace, or agent N's
    /// with --agent. No --force is needed for uncommitted work: it is kept on
    /// refs/berth/lost/<id> first (`berth run restore` brings it back), and the workspace is
    /// archived, its sessions kept. A merged agent is left alone (refused when named).
    Discard {
        #[arg(value_name = "RUN")]
        id: String,
        /// Only this agent (1 is the first).
        #[arg(long, value_name = "N")]
        agent: Option<berth_run::AgentNumber>,
        #[command(flatten)]
        confirm: ConfirmFlag,
        #[arg(long)]
        json: bool,
    },
    /// Bring back a dropped agent's work: its workspace made again, the same id, from the
    /// ref its work was kept on, against its original base, with what was uncommitted
    /// uncommitted again; recorded `kept`, so `workspace diff`, `run tell` and `run pick`
    /// work on it.
    Restore {
        #[arg(value_name = "RUN")]
        id: String,
        /// The agent to bring back (1 is the first).
        #[arg(value_name = "N")]
        agent: berth_run::AgentNumber,
        #[arg(long)]
        json: bool,
    },
    /// Drop the workspaces left by runs that are finished: over, with an agent picked
    /// (merged) or every agent discarded; with --older-than, also those of runs nobody
    /// reviewed that ended that long ago. Their work is kept on refs/berth/lost/<id> and
    /// their sessions stay (the workspaces are archived). Workspaces kept on purpose (`pick
    /// --keep-others`, `restore`) stay.
    Clean {
        /// Also runs never reviewed that ended this long ago: `30s`, `12h`, `7d`, `2w`.
        #[arg(long, value_name = "DURATION", value_parser = crate::cli::parse_duration)]
        older_than: Option<std::time::Duration>,
        /// Show what would be dropped, and drop nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        confirm: ConfirmFlag,
        #[arg(long)]
        json: bool,
    },
    /// Delete a run's record once it is over: its events and kept output go. Its agents'
    /// sessions stay, unless --with-sessions (then an agent's archived workspace goes with
    /// them); a workspace still in use stays as it is.
    Delete {
        #[arg(value_name = "RUN")]
        id: String,
        /// Delete its agents' sessions too.
        #[arg(long)]
        with_sessions: bool,
        #[command(flatten)]
        confirm: ConfirmFlag,
        #[arg(long)]
        json: bool,
    },
    /// The supervisor of a detached run (started by `berth run --detach`).
    #[command(hide = true)]
    Supervise {
        id: String,
        #[arg(long)]
        resume: bool,
        /// Tells this agent (1 is the first) what standard input holds.
        #[arg(long, value_name = "N", conflicts_with = "resume")]
        tell: Option<berth_run::AgentNumber>,
    },
}

/// `berth run answer`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AnswerArg {
    Allow,
    Deny,
}

/// The arguments of the hidden `berth run supervise ID [--resume | --tell N]`, read back into
/// the type berth-run wrote them from ([`berth_run::SuperviseArgs::command_line`]), under
/// the home `--home` named.
pub fn supervise_args(
    home: &std::path::Path,
    id: &str,
    resume: bool,
    tell: Option<berth_run::AgentNumber>,
) -> Result<berth_run::SuperviseArgs, berth_run::KeptError> {
    Ok(berth_run::SuperviseArgs {
        home: home.to_path_buf(),
        run: berth_run::RunId::try_from(id.to_owned())?,
        what: match (resume, tell) {
            (_, Some(agent)) => berth_run::Supervise::Tell { agent },
            (true, None) => berth_run::Supervise::Resume,
            (false, None) => berth_run::Supervise::Start,
        },
    })
}

#[cfg(test)]
mod tests {
    use berth_run::{AgentNumber, RunId, Supervise, SuperviseArgs};
    use clap::Parser;

    use crate::cli::{Cli, Command, RunArgs, RunCommand};

    /// What berth-run starts a detached supervisor with is what this grammar reads back,
    /// for each thing a supervisor does.
    #[test]
    fn a_run_supervisors_arguments_parse_back() {
        for what in [
            Supervise::Start,
            Supervise::Resume,
            Supervise::Tell {
                agent: AgentNumber::of_index(2),
            },
        ] {
            let written = SuperviseArgs {
                home: "/some/home with spaces".into(),
                run: RunId::try_from("0123456789ab".to_owned()).unwrap(),
                what,
            };
            let mut argv = vec![std::ffi::OsString::from("berth")];
            argv.extend(written.command_line());
            let cli = Cli::try_parse_from(argv).unwrap();
            let home = cli.home.expect("--home is written");
            let read = match cli.command {
                Some(Command::Run(run)) => match *run {
                    RunArgs {
                        command: Some(RunCommand::Supervise { id, resume, tell }),
                        ..
                    } => super::supervise_args(&home, &id, resume, tell).unwrap(),
                    _ => panic!("not `run supervise`"),
                },
                _ => panic!("not `run`"),
            };
            assert_eq!(read, written);
        }
    }
}
