//! The command-line grammar. Everything a person types is described here, with the help text
//! they will read; `commands/` does the work. The top level is in this file, each command
//! group's grammar in a module of `cli/`.

mod agent;
mod home;
mod land;
mod run;
mod serve;
mod session;
mod workspace;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use agent::{ChatArgs, SkillCmd};
pub use home::{ConfigCmd, ImportCmd, StoreCmd};
pub use land::{LandArgs, LandCommand, StartLandArgs};
pub use run::{AnswerArg, NewRunArgs, RunArgs, RunCommand, supervise_args};
pub use serve::{McpArgs, ServeArgs, TokenCmd, Transport};
pub use session::SessionCmd;
pub use workspace::{BindingCmd, StorageCmd, WorkspaceCmd};

/// The exit statuses, one per kind of error (`berth_ops::ErrorKind`); `main.rs` maps them.
pub const EXIT_STATUS: &str = "Exit status:
  0  success
  1  failure: a read or write failed, or git or a setup command failed
  2  usage error or invalid input (a malformed id or path, an ambiguous prefix, a folder named where a file is expected)
  3  not found (a workspace, session, file or binding)
  4  refused: it would lose work, it was not confirmed, or it is not allowed now
  5  a file berth keeps is corrupt (the message names it and the line)
  6  it already exists
  7  not configured: what the command needs is not set up (a provider's API key, an agent command that cannot start); nothing was made
  130  interrupted (Ctrl-C)";

#[derive(Parser)]
#[command(
    name = "berth",
    version,
    about = "A place for AI agents to work: workspaces, sessions, device bindings, config and storage",
    long_about = "A place for AI agents to work: isolated workspaces (optionally git worktrees), \
the sessions inside them, device bindings, layered config and file storage.\n\n\
State lives under the berth home: --home, else $BERTH_HOME, else the platform data folder \
(~/.local/share/berth on Linux).\n\n\
Workspaces can be named by id, by name, by an unambiguous id prefix of 4+ characters, or by `.` \
for the one whose worktree holds this folder; a command that takes a workspace uses that one when \
none is named.",
    after_long_help = EXIT_STATUS
)]
pub struct Cli {
    /// The berth home folder [default: $BERTH_HOME, else ~/.local/share/berth].
    // Not `env = "BERTH_HOME"`: clap would then print `--home <PATH>` in every usage line of
    // an error, as if it were required; `commands::home` reads the variable.
    #[arg(long, global = true, value_name = "PATH")]
    pub home: Option<PathBuf>,

    /// Say more of what berth does, on standard error: -v adds its debug lines, -vv its
    /// trace. RUST_LOG (`info`, `berth_run=debug`, …) chooses instead.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// None: the dashboard on a terminal, else the help (`main.rs`).
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Create, inspect and remove workspaces, and use their storage.
    #[command(subcommand)]
    Workspace(WorkspaceCmd),
    /// Sessions (conversations and agent runs) inside workspaces, and their storage.
    #[command(subcommand)]
    Session(SessionCmd),
    /// Map device or client identifiers to workspaces.
    #[command(subcommand)]
    Binding(BindingCmd),
    /// Write the config template, or show the merged config (secrets redacted).
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Bring in workspaces, sessions, settings and bindings from Aptove or amux.
    ///
    /// The source is only read, never written. Each item is reported with what became of it
    /// (imported, already there, skipped, conflict, refused, failed); one bad item never stops
    /// the rest. Running it again imports nothing twice: what came in before is reported as
    /// already there, and where berth holds something different, berth's is kept and the item
    /// is a conflict. The exit status is 0 when everything came in (or was there, or has no
    /// place in berth); otherwise the status of the problem when every item that did not come
    /// in shares one kind (4 refused, 5 corrupt, 6 conflict, 3 not found), else 1.
    #[command(subcommand, verbatim_doc_comment, after_long_help = EXIT_STATUS)]
    Import(ImportCmd),
    /// Where this home's records are kept, and moving them to another store.
    ///
    /// The store is the files under the home unless [store] url in <home>/config.toml (or
    /// BERTH_STORE_URL) names a database: sqlite:///path/berth.db (one file, created on first
    /// use) or postgres://user:password@host:port/db (any number of berth processes and
    /// machines on one database). Workspace folders and git worktrees stay under the home.
    #[command(subcommand, verbatim_doc_comment, after_long_help = EXIT_STATUS)]
    Store(StoreCmd),
    /// Serve workspaces, sessions and storage to AI agents over MCP.
    ///
    /// On stdio (the default), standard output carries the protocol only; messages go to
    /// standard error. Claude Code / Claude Desktop: {"command": "berth", "args": ["mcp"]}.
    ///
    /// With --transport http, it serves Streamable HTTP at http://<listen>/mcp (and /healthz)
    /// until SIGINT or SIGTERM, and prints the URL on standard error: `berth serve`'s server
    /// with its MCP server alone, behind the same rules. Requests whose Host is not loopback
    /// (or an --allow-host) or whose Origin is not this server's page (or an --allow-origin)
    /// get 403. With a token, every request needs `Authorization: Bearer <token>`, that one
    /// or an admin token of `berth token create` (401 otherwise); listening anywhere but
    /// loopback requires one.
    #[command(verbatim_doc_comment)]
    Mcp(McpArgs),
    /// Talk to berth's coding agent.
    ///
    /// On a terminal, without -p, it is a conversation: answers stream as they come, thoughts
    /// and tool activity are dimmed (plain with NO_COLOR or when output is not a terminal),
    /// Ctrl-C stops the running turn (what was shown is kept, marked interrupted), and Ctrl-D
    /// or Ctrl-C twice at an empty prompt quits. Writing files and running commands are asked
    /// first: y (once), a (always, this session), n (refuse). /help lists the commands
    /// (/workspace, /clear, /context, /model, /sessions, /new, /load, /mcp, /quit). The line
    /// history is kept in <home>/chat_history.
    ///
    /// With -p PROMPT (or -p - to read the prompt from standard input) it runs one turn for a
    /// script: the answer streams to standard output and nothing else goes there; tool activity,
    /// thoughts and errors go to standard error. The exit status is 0 only when the model
    /// finished its answer.
    ///
    /// Which workspace: --workspace, else the berth workspace whose worktree holds this folder,
    /// else `default`. Which session: --session, --continue (the workspace's latest), else a
    /// new one. File tools and commands work in this folder and cannot leave it. With -p,
    /// writing files and running commands are refused unless --allow names the tool
    /// (write_file, edit_file, run_command, workspace_storage_write, session_storage_write,
    /// remember, forget) or
    /// --allow-all is given; in the conversation, the tools those name run without asking.
    ///
    /// The provider and model come from berth's config for the workspace (`berth config show`);
    /// the key from ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY (or the config).
    #[command(verbatim_doc_comment)]
    Chat(ChatArgs),
    /// The terminal dashboard: every run and what it needs done (review 1✓ 1✗, picked 2),
    /// its agents live, an agent's transcript as it streams, its diff and its check (v), the
    /// workspaces and the sessions. An agent's question is answered in a dialog that quotes
    /// what it said (y allow, a always, n deny); x discards, s stops, r resumes, t tells it
    /// more, c starts a run; ? shows every key, q quits.
    ///
    /// p picks an agent: its dialog says first what stands against it, as `berth run pick`
    /// does. y picks an agent nothing stands against; F picks one whose evidence is against
    /// it (a failed check, no change, not finished) anyway, as --force; A merges one beside
    /// a winner already, as --also; Esc cancels.
    ///
    /// `berth` with no command starts it on a terminal. It follows NO_COLOR.
    #[command(verbatim_doc_comment)]
    Ui,
    /// Put agents to work on a task, each in a new git workspace of its own, side by side.
    ///
    /// Each agent gets a workspace (named after the task, or --name, with its index; spare
    /// checkouts are used when there are any) and a session titled after the task, whose
    /// transcript keeps the task and the answer. The agents run at once. On a terminal a table
    /// shows each one's state, last tool, tokens and time; otherwise one line per event, or
    /// with --json one JSON object per event. As each agent ends done having changed
    /// something, --check runs in its worktree ([run] check_jobs at once); once all are
    /// done, a summary says how each ended, what it changed, the check's result (its last
    /// lines when it failed), tokens and time. Ctrl-C stops every agent and cuts a running
    /// check short (what streamed is kept); a second Ctrl-C ends the run at once, recorded
    /// failed.
    ///
    /// Tools that write or run are refused unless --allow names them or --allow-all is
    /// given (the agent is told, and the refusal is shown), or, with --ask, a person answers
    /// (`berth run answer`). Review the agents with `berth run compare`, then pick the
    /// winner with `berth run pick RUN N` (or `best`), or drop them with `berth run
    /// discard`; nothing is lost (`berth run restore`, `berth run pick --undo`).
    ///
    /// Every run is kept under the home: --detach returns at once and leaves the run to a
    /// supervisor process; `berth run list`, `show`, `logs -f`, `wait`, `stop` and `resume`
    /// find it by its id. A run whose supervisor dies (killed, a restart) is found failed,
    /// its workspaces and transcripts intact, and `berth run resume` continues it.
    ///
    /// --tasks FILE starts one such run per task of the file, each detached (or queued), as
    /// one batch: its id is printed, and `berth run list --batch ID` lists its runs in the
    /// file's order. Every run is checked before any starts: one that cannot makes nothing.
    ///
    /// The exit status is 0 when every agent finished its answer and every check passed,
    /// 1 otherwise, and 2 for a run that cannot start (an empty task, a bad --agents, no
    /// repository; a file of tasks with none).
    #[command(verbatim_doc_comment)]
    Run(Box<RunArgs>),
    /// Land the work of several runs on their base, in order: a merge queue for agents.
    ///
    /// For each agent in turn, its uncommitted work is committed, its branch brought up to
    /// date with the base as it now stands (a merge, or --squash / --rebase), and the run's
    /// check run on that combined tree, confined, in its worktree; only when it passes does
    /// the base move (by compare-and-swap: a base that moved meanwhile is combined again).
    /// A conflict is written into the agent's worktree, markers included, and the agent gets
    /// a turn of its own session to resolve it; a check that fails on the combined tree is
    /// handed back the same way, with its last lines (--retries turns, default 2). An agent
    /// that cannot be told or does not mend it is left in the queue with the reason, and the
    /// queue goes on. Each landed agent is recorded merged, and the others of its run are
    /// dropped, as `berth run pick` does.
    ///
    /// Every step is kept in the land's record, so `berth land --resume` goes on after a crash
    /// or Ctrl-C and lands nothing twice. --dry-run prints the plan, with the conflicts the
    /// queue would meet. `berth land list` and `berth land show ID` follow lands.
    ///
    /// The exit status is 0 when every agent landed, 1 when one was left, 130 on Ctrl-C.
    #[command(verbatim_doc_comment, after_long_help = EXIT_STATUS)]
    Land(LandArgs),
    /// Serve berth's agent to editors and phone apps over the Agent Client Protocol (stdio).
    ///
    /// Standard output carries the protocol only; messages go to standard error. Zed:
    /// "agent_servers": {"berth": {"command": "berth", "args": ["acp"]}}.
    ///
    /// Each ACP session is a berth session (`berth session show ID`), kept on disk: the
    /// prompt and the answers are in its transcript, and `session/load` in a later process
    /// replays them. Which workspace: the berth workspace whose worktree holds the session's
    /// cwd, else `default`. A phone app (through a bridge) names its workspace with
    /// `_meta.sessionId` in session/new: a new id makes a workspace with that id and binds
    /// the app to it, a known one continues it; `_meta.deviceId` resolves through the
    /// bindings (`berth binding list`).
    ///
    /// Writing files and running commands are asked of the client first
    /// (session/request_permission: allow once, allow always, reject). When the client offers
    /// them, files are read and written through it (an editor's unsaved buffers) and commands
    /// run in its terminals. The model is a session option, from the workspace's config.
    #[command(verbatim_doc_comment)]
    Acp,
    /// Serve berth on the network: a web page to watch and answer agents from a browser or a
    /// phone, berth's agent over ACP on a WebSocket, and its MCP server, on one listener.
    ///
    /// Open the web page with the link it prints (it signs the browser in); `--pair NAME`
    /// prints one for a phone.
    ///
    /// ws://<listen>/acp   berth's agent, as `berth acp` serves it on stdio (one JSON-RPC
    ///                     message per text frame): streaming, permissions, cancel, load,
    ///                     list, resume, fork, images, the model option, the device flow
    /// http://<listen>/acp the same over plain HTTP: POST for the client's messages,
    ///                     server-sent events for the agent's (ACP's HTTP transport)
    /// http://<listen>/mcp the MCP server, as `berth mcp --transport http` serves it
    /// http://<listen>/    the web page: workspaces, sessions and runs, from a browser
    /// /healthz            {"status":"ok"}, with no token, for load balancers
    ///
    /// Every request but /healthz needs a token, `Authorization: Bearer <token>` (401
    /// otherwise): BERTH_SERVE_TOKEN or --token, or one of `berth token create`. With none
    /// set, berth serve makes one for this run and prints it, with a link that signs the web
    /// page in, as Jupyter does: on loopback too, any local user or process could otherwise
    /// act as you. --open serves loopback without a token. Requests whose Host is not
    /// loopback or an --allow-host, and pages whose Origin is not this server's or an
    /// --allow-origin, get 403. It serves until SIGINT or SIGTERM and prints its address on
    /// standard error.
    #[command(verbatim_doc_comment)]
    Serve(ServeArgs),
    /// The skills berth's agent is offered: what it sees, and each skill's instructions.
    ///
    /// A skill is a folder with a SKILL.md: YAML front matter with `name` (the folder's name:
    /// lowercase letters, digits and hyphens) and `description`, then the instructions. The
    /// agent's instructions list each skill's name and description (within a bound; the
    /// project's first); the agent reads a skill's instructions with its `skill` tool when a
    /// task matches. Skills come from, in order, a later one of a name replacing an earlier:
    ///
    ///   ~/.config/berth/skills/ ($XDG_CONFIG_HOME/berth/skills/)   the person's own
    ///   skills/ in the workspace's folder                          the workspace's
    ///   .agents/skills/ and .claude/skills/ in the worktree        the project's
    ///
    /// A malformed SKILL.md is skipped with a warning (on standard error here, and at the start
    /// of the agent's turn) that names the file and the problem. Skills are read afresh at
    /// every turn: an edit is seen by the next one.
    #[command(subcommand, verbatim_doc_comment)]
    Skill(SkillCmd),
    /// Tokens for `berth serve`: a device's acts as that device, an admin's sees everything.
    ///
    /// A token is printed once, when it is made; the home keeps only its SHA-256
    /// (tokens.json). `berth serve` looks each request's token up, so a revoked or expired
    /// token is refused at once, and a device's open connection ends within a second.
    #[command(subcommand, verbatim_doc_comment)]
    Token(TokenCmd),
    /// Check that berth can work here, and say what to do about what cannot.
    ///
    /// Checks, in order: git (berth needs 2.38 or newer; 2.44 for `workspace merge --rebase`);
    /// the home (readable and writable); the config (it parses); the store (reachable, its URL
    /// shown without its password, a database's schema version); the listing index; spare
    /// checkouts and their disk use; each configured provider (its key present, never shown;
    /// its base URL); each [[mcp_servers]] entry (started, its tools listed, within
    /// --mcp-timeout); and every workspace (its worktree, repository or folder still there).
    /// What needs a check that failed (the store, the config) is reported as not run.
    ///
    /// Each finding is ok, warn or error, with what to do. Nothing is changed, but a probe
    /// file written to the home and removed, and the store opened as any command opens it.
    /// The exit status is 1 when something is broken (any error), else 0.
    ///
    /// --fix does what berth can do itself: where AppArmor's policy refuses user namespaces
    /// (Ubuntu 23.10 and newer), it installs a profile that lets berth's binary make them,
    /// through sudo, printing the profile and the commands first; --dry-run only prints them.
    #[command(verbatim_doc_comment)]
    Doctor {
        /// Seconds each MCP server may take to start and list its tools.
        #[arg(long, default_value_t = 10, value_name = "SECONDS")]
        mcp_timeout: u64,
        /// Fix what berth can fix itself (berth's AppArmor profile), through sudo.
        #[arg(long)]
        fix: bool,
        /// With --fix: print the profile and the commands, and run nothing.
        #[arg(long, requires = "fix")]
        dry_run: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Print berth's manual page (roff), made from the same definitions as --help.
    ///
    /// berth's own page, or one command's; or, with --out, every page written into a folder.
    ///
    /// berth man | man -l -
    /// berth man workspace gc | man -l -
    /// berth man --out ~/.local/share/man/man1    (berth.1, berth-workspace.1, …)
    #[command(verbatim_doc_comment)]
    Man {
        /// The command whose page to print (`workspace`, `workspace gc`); default: berth.
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
        /// Write every page, one file per command (berth.1, berth-workspace.1, …), into DIR.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        out: Option<PathBuf>,
    },
    /// Print the script that makes your shell complete berth's commands, flags, workspace
    /// names and session ids (asking berth itself as you type).
    ///
    /// bash: echo 'source <(berth completions bash)' >> ~/.bashrc
    /// zsh:  echo 'source <(berth completions zsh)' >> ~/.zshrc
    /// fish: berth completions fish > ~/.config/fish/completions/berth.fish
    #[command(verbatim_doc_comment)]
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
}

/// The shells `berth completions` writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
    Elvish,
}

#[derive(Args)]
pub struct JsonFlag {
    /// Print JSON for scripts instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A duration as a person writes it: a number and a unit, `30s`, `15m`, `12h`, `7d`, `2w`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| {
        format!("{text:?} is not a duration: give a number and a unit, such as 30s, 12h, 7d")
    })?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => {
            return Err(format!(
                "{text:?} is not a duration: its unit is one of s, m, h, d, w (30s, 12h, 7d)"
            ));
        }
    };
    n.checked_mul(seconds)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long a duration"))
}

#[derive(Args)]
pub struct ConfirmFlag {
    /// Do not ask for confirmation. Required when standard input is not a terminal.
    #[arg(long, short = 'y')]
    pub yes: bool,
}
