//! The command-line grammar. Everything a person types is described here, with the help text
//! they will read; `commands/` does the work.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::ArgValueCompleter;

use crate::completion;

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
    /// With --transport http, it serves Streamable HTTP at http://<listen>/mcp until SIGINT or
    /// SIGTERM, and prints the URL on standard error. Requests whose Host is not loopback (or
    /// an --allow-host) or whose Origin is not a loopback page (or an --allow-origin) get 403.
    /// With a token, every request needs `Authorization: Bearer <token>` (401 otherwise);
    /// listening anywhere but loopback requires one.
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
    /// The terminal dashboard: every run and its agents live, an agent's transcript as it
    /// streams and its diff, the workspaces and the sessions. An agent's question is answered
    /// in a dialog (y allow, a always, n deny); p picks an agent, x discards, s stops, r
    /// resumes, t tells it more, c starts a run; ? shows every key, q quits.
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
    /// with --json one JSON object per event. When all are done, --check runs in each
    /// worktree, and a summary says how each ended, what it changed, the check's result,
    /// tokens and time. Ctrl-C stops every agent and cuts a running check short (what
    /// streamed is kept); a second Ctrl-C ends the run at once, recorded failed.
    ///
    /// A run has no one to ask: tools that write or run are refused unless --allow names them
    /// or --allow-all is given; the agent is told, and the refusal is shown. Review and bring
    /// the work back with `berth workspace diff` and `berth workspace merge`.
    ///
    /// Every run is kept under the home: --detach returns at once and leaves the run to a
    /// supervisor process; `berth run list`, `show`, `logs -f`, `wait`, `stop` and `resume`
    /// find it by its id. A run whose supervisor dies (killed, a restart) is found failed,
    /// its workspaces and transcripts intact, and `berth run resume` continues it.
    ///
    /// The exit status is 0 when every agent finished its answer and every check passed,
    /// 1 otherwise, and 2 for a run that cannot start (an empty task, a bad --agents, no
    /// repository).
    #[command(verbatim_doc_comment)]
    Run(RunArgs),
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
    #[command(verbatim_doc_comment)]
    Doctor {
        /// Seconds each MCP server may take to start and list its tools.
        #[arg(long, default_value_t = 10, value_name = "SECONDS")]
        mcp_timeout: u64,
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

#[derive(Subcommand)]
pub enum TokenCmd {
    /// Make a token and print it (once).
    ///
    /// --device NAME: a phone's or another machine's token. Its ACP sessions land in the
    /// device's workspace (bound on first use, or to --workspace now), it lists and loads
    /// only that workspace's sessions, and it cannot name another device or reach /mcp.
    /// --admin NAME: a token that sees everything, as BERTH_SERVE_TOKEN does.
    #[command(verbatim_doc_comment)]
    Create {
        /// The device the token acts as; also the token's name.
        #[arg(
            long,
            value_name = "NAME",
            conflicts_with = "admin",
            required_unless_present = "admin"
        )]
        device: Option<String>,
        /// An admin token of this name.
        #[arg(long, value_name = "NAME")]
        admin: Option<String>,
        /// Bind the device to this workspace (id, name or prefix) now.
        #[arg(long, value_name = "WORKSPACE", requires = "device")]
        workspace: Option<String>,
        /// The token stops working after this many days.
        #[arg(long, value_name = "DAYS")]
        expires: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// The tokens: name, kind, device, made, expires (never the tokens themselves).
    List(JsonFlag),
    /// Revoke a token: refused from now on, its open connections closed.
    Revoke {
        #[arg(value_name = "NAME")]
        name: String,
    },
}

/// Who may reach a server on the network besides this machine: the names it answers to and
/// the pages that may call it (the `Host` and `Origin` rules of `berth mcp` and `berth serve`).
#[derive(Args)]
pub struct ReachArgs {
    /// Another host name (or host:port) requests may be addressed to; repeatable.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Another browser origin allowed to call the server, with scheme and port
    /// (`https://app.example.com:443`, `:*` for any port); repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
}

#[derive(Args)]
pub struct ServeArgs {
    /// The address to listen on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
    pub listen: std::net::SocketAddr,
    /// The bearer token clients must send.
    #[arg(
        long,
        env = "BERTH_SERVE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// On loopback, take requests without a token, each as the admin: any user or process
    /// of this machine can then drive the agent as you. Without it (and without a token), a
    /// token is made for this run and printed.
    #[arg(long, conflicts_with = "token")]
    pub open: bool,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// ACP connections open at once; more are answered 503.
    #[arg(long, value_name = "N", default_value_t = berth_serve::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// The largest WebSocket message and HTTP request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = berth_serve::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Prompts each token may send a minute (the admin's together), across its connections;
    /// more are answered with an error at once. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = berth_serve::DEFAULT_MAX_PROMPTS_PER_MINUTE)]
    pub max_prompts_per_minute: usize,
    /// Seconds between pings of a WebSocket peer; one silent for three is dropped.
    #[arg(long, value_name = "SECS", default_value_t = berth_serve::DEFAULT_PING_EVERY.as_secs())]
    pub ping_every: u64,
    /// Seconds a client of /acp over plain HTTP (POST and server-sent events) may be silent,
    /// no prompt of its running, before its connection ends.
    #[arg(long, value_name = "SECS", default_value_t = berth_serve::DEFAULT_ACP_HTTP_IDLE.as_secs())]
    pub acp_http_idle: u64,
    /// The repository MCP's `workspace_create` makes worktrees of (default: the one
    /// containing this folder).
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// Serve TLS (wss://, https://) with this PEM certificate chain (with --tls-key).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Pair a device: make its token (as `berth token create --device NAME`) and print a
    /// pairing link, with its QR code, for its app, and a link that signs the web page in.
    /// The links name the first --allow-host, else the address listened on: a phone needs
    /// --listen on an address it reaches (0.0.0.0:8765) and --allow-host with this machine's
    /// name. A device paired before gets a new token in place of its old one, after asking
    /// (or with --rotate).
    #[arg(long, value_name = "NAME")]
    pub pair: Option<String>,
    /// With --pair, replace the token of a device paired before without asking; the old
    /// token stops working.
    #[arg(long, requires = "pair")]
    pub rotate: bool,
    /// Also work queued runs (`berth run --queue`) from the store every node shares, woken
    /// by the database when one is queued; a node that dies has its runs taken over by
    /// another once its hold lapses (`[pool] lease_secs`). Needs a database store.
    #[arg(long)]
    pub worker: bool,
    /// This node's name in the runs it works (default: the host name); `run --queue --node`
    /// pins a run to it.
    #[arg(long, value_name = "NAME", requires = "worker")]
    pub node: Option<String>,
    /// Agents this worker runs at once, over all its runs (default: the number of cores).
    #[arg(long, value_name = "N", requires = "worker")]
    pub max_agents: Option<std::num::NonZeroUsize>,
}

#[derive(Args)]
pub struct ChatArgs {
    /// Run one turn with this prompt and exit; `-` reads it from standard input. Without it,
    /// standard input must be a terminal: the chat is interactive.
    #[arg(short = 'p', long = "print", value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// The workspace: id, name or id prefix.
    #[arg(long, short)]
    pub workspace: Option<String>,
    /// Continue this session (id or 4+ character prefix).
    #[arg(long, short, conflicts_with = "continue_latest")]
    pub session: Option<String>,
    /// Continue the workspace's latest session.
    #[arg(long = "continue", short = 'c')]
    pub continue_latest: bool,
    /// Allow these tools to write or run without asking (comma-separated, repeatable).
    #[arg(long, value_delimiter = ',', value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Allow every tool to write and run.
    #[arg(long)]
    pub allow_all: bool,
    /// Call this model in the session, and keep it as the session's choice (as `/model` and
    /// an editor's model option do): a model of the configured provider (`gpt-4.1`), a
    /// provider (`gemini`), or both (`openai/gpt-4.1`).
    #[arg(long, short = 'm', value_name = "MODEL")]
    pub model: Option<String>,
}

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
    #[arg(value_name = "TASK", required_unless_present = "task_file")]
    pub task: Vec<String>,
    /// Read the task from this file.
    #[arg(long, value_name = "PATH", conflicts_with = "task")]
    pub task_file: Option<PathBuf>,
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
    /// Run this ACP agent instead of berth's own (`--agent-cmd "gemini --experimental-acp"`,
    /// `--agent-cmd "berth acp"`), started in each worktree and driven over its stdio. Its
    /// file reads and writes and its terminals through berth stay in its worktree, and the
    /// process itself is confined ([sandbox]): it writes only there, in a private /tmp and in
    /// its own state, and connects only to its provider.
    /// Ask a person about a call --allow does not cover, instead of refusing it: the agent
    /// waits (a `needs_input` notification goes out) until `berth run answer` or the review
    /// page answers, or --ask-timeout passes ([run] ask = true sets it for every run).
    #[arg(long)]
    pub ask: bool,
    /// How long a question of --ask waits before it is refused (default: [run]
    /// ask_timeout_secs, else 1800: 30 minutes).
    #[arg(long, value_name = "SECS")]
    pub ask_timeout: Option<u64>,
    /// The same as --agent "cmd:COMMAND".
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
    /// one object naming the run).
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
    List {
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
    /// again; its other agents stay as they ended. In a run still running, the agent is told
    /// once its current turn ends (the command returns at once; `berth run logs -f` follows
    /// it), unless it has ended already or runs an ACP agent (tell it once the run is over).
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
        #[arg(long)]
        json: bool,
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
    /// Pick the winner of a run that is over: agent N's work is merged into the run's base,
    /// with a commit message naming the task and the agent, and its workspace removed; the
    /// other agents' workspaces are dropped (their commits and uncommitted files kept on
    /// refs/berth/lost/<id>), or kept with --keep-others. Each agent's outcome (merged,
    /// discarded, kept) is recorded in the run.
    ///
    /// --json prints {"run", "agent", "merge": {…as `workspace merge --json`}, "dropped":
    /// [{"agent", "workspace", "note"}], "kept": [N, …]}.
    #[command(verbatim_doc_comment)]
    Pick {
        #[arg(value_name = "RUN")]
        id: String,
        /// The agent to merge (1 is the first).
        #[arg(value_name = "N")]
        agent: berth_run::AgentNumber,
        /// One new commit with the agent's changes.
        #[arg(long, conflicts_with = "rebase")]
        squash: bool,
        /// The agent's commits replayed on the base, one by one (git 2.44 or later).
        #[arg(long)]
        rebase: bool,
        /// Keep the other agents' workspaces (recorded `kept`), to look at or tell later.
        #[arg(long)]
        keep_others: bool,
        #[arg(long)]
        json: bool,
    },
    /// Drop the work of a run that is over, on purpose: every agent's workspace, or agent N's
    /// with --agent. No --force is needed for uncommitted work: it is kept on
    /// refs/berth/lost/<id> first. A merged agent is left alone (refused when named).
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
    /// Drop the workspaces left by runs that are finished: over, with an agent picked
    /// (merged) or every agent discarded. Workspaces kept on purpose (`pick
    /// --keep-others`) stay.
    Clean {
        /// Show what would be dropped, and drop nothing.
        #[arg(long)]
        dry_run: bool,
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

#[derive(Args)]
pub struct McpArgs {
    /// The repository `workspace_create` makes worktrees of (default: the one containing
    /// this folder; outside a repository, workspaces are plain folders).
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// How clients connect: over this process's stdin/stdout, or over HTTP.
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    pub transport: Transport,
    /// The address the HTTP transport listens on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
    pub listen: std::net::SocketAddr,
    /// The bearer token HTTP clients must send.
    #[arg(
        long,
        env = "BERTH_MCP_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// HTTP request bodies larger than this get 413.
    #[arg(long, value_name = "BYTES", default_value_t = berth_mcp::DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
    /// HTTP sessions kept at once; beyond it the least recently used is closed (its client
    /// gets 404 and initializes again). Default: `[mcp] max_sessions`, else 1000.
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<std::num::NonZeroUsize>,
    /// Seconds an HTTP session may go unused (no request, no open stream) before it is
    /// closed. Default: `[mcp] session_idle_timeout_secs`, else 1800.
    #[arg(long, value_name = "SECS")]
    pub session_idle_timeout: Option<std::num::NonZeroU64>,
    /// Worktree files larger than this are refused by the files resource.
    #[arg(long, value_name = "BYTES", default_value_t = berth_mcp::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    Stdio,
    Http,
}

#[derive(Subcommand)]
pub enum ImportCmd {
    /// Import Aptove's data folder: workspaces, sessions, config and device bindings.
    ///
    /// Each workspace keeps its uuid as its berth id, its name (when it is a valid berth name
    /// that no other workspace has; else the name goes into the description), and its created
    /// and last-used times. Its session.md becomes a session of it, with the same id. Settings
    /// berth has under the same names (provider, [providers.X] api_key, model and base_url,
    /// [agent] max_tool_iterations) are added to berth's global config or the workspace's,
    /// without rewriting those files; a workspace.toml provider becomes the workspace's
    /// provider. The rest (MCP servers, transports, identity, retry, system prompt, UI state)
    /// is listed as skipped, with why. A setting berth already has with another value is
    /// reported as a conflict and berth's is kept. Bindings come in when their workspace did.
    #[command(verbatim_doc_comment)]
    Aptove {
        /// Aptove's data folder (default: ~/.local/share/Aptove on Linux, ~/Library/Application
        /// Support/Aptove on macOS, %LOCALAPPDATA%\Aptove on Windows).
        dir: Option<PathBuf>,
        /// Print what would be imported, and write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Adopt a repository's amux workspaces as berth git workspaces.
    ///
    /// Each amux workspace (REPO/.amux/workspaces/<id>/) becomes a berth workspace with amux's
    /// id, name, description and creation time, recording its worktree where it is and the
    /// branch checked out there; the files of its storage/ (context.md among them) are copied
    /// into the workspace's storage. berth did not create the branch, so it never deletes it;
    /// `berth workspace delete` removes the worktree only when that loses no work. amux's own
    /// records stay as they are.
    #[command(verbatim_doc_comment)]
    Amux {
        /// The repository amux worked in (default: the one containing this folder).
        repo: Option<PathBuf>,
        /// Print what would be adopted, and write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Subcommand)]
pub enum SkillCmd {
    /// The skills of a workspace (default: the one whose worktree holds this folder; outside
    /// every workspace, the person's own): name, source and description, by name.
    ///
    /// --json prints {"skills": [{"name", "description", "source", "dir", "files", ...}],
    /// "warnings": [{"path", "problem"}], "listed": N}; `listed` is how many fit the list the
    /// agent's instructions carry.
    #[command(verbatim_doc_comment)]
    List {
        /// Id, name or id prefix.
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A skill's instructions, as the agent's `skill` tool gives them, and its other files.
    Show {
        name: String,
        /// Id, name or id prefix (default: as for `list`).
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Args)]
pub struct JsonFlag {
    /// Print JSON for scripts instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ConfirmFlag {
    /// Do not ask for confirmation. Required when standard input is not a terminal.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Subcommand)]
pub enum WorkspaceCmd {
    /// List every workspace.
    #[command(visible_alias = "ls")]
    List {
        /// Measure each workspace's disk use (its folder and worktree; a SIZE column, or
        /// size_bytes in JSON). Walks every file, so it takes a while on big worktrees.
        #[arg(long)]
        size: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Create a workspace and print its id.
    ///
    /// Run inside a git repository (or given --repo), this makes a git workspace: a worktree of
    /// the repository on its own branch (default `berth/<name>`), in the workspace's
    /// `worktree/` folder or under `[git] worktree_dir`. Files listed in `[git] copy` are copied
    /// from the main checkout and `[git] setup` commands run in the new worktree; if anything
    /// fails, nothing is kept. Outside a repository, or with --plain, the workspace is a plain
    /// folder.
    #[command(verbatim_doc_comment)]
    Create {
        /// A unique name (letters, digits, '.', '_', '-'; up to 64).
        name: Option<String>,
        #[arg(long, short, default_value = "")]
        description: String,
        /// Use this id instead of a fresh UUID (e.g. a mobile app's persistent id).
        #[arg(long)]
        id: Option<String>,
        /// Associated agent id.
        #[arg(long)]
        agent_id: Option<String>,
        /// Make a plain workspace even inside a git repository (no --repo, --branch,
        /// --checkout or --base with it).
        #[arg(long)]
        plain: bool,
        /// The repository to make a worktree of (default: the one containing this folder); a
        /// bare repository too, whose HEAD is then the default base; or a URL, whose clone
        /// berth keeps under the home and fetches first.
        #[arg(long, value_name = "PATH|URL")]
        repo: Option<PathBuf>,
        /// Create this new branch (fails if it exists) instead of `berth/<name>`; not with
        /// --checkout.
        #[arg(long, value_name = "BRANCH")]
        branch: Option<String>,
        /// Check out an existing branch: a local one, or `origin/BRANCH` tracked locally.
        #[arg(long, value_name = "BRANCH")]
        checkout: Option<String>,
        /// Where a new branch starts and what ahead/behind is measured against (default:
        /// origin/HEAD, else main, else master, else the current HEAD).
        #[arg(long, value_name = "REV")]
        base: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Adopt an existing git worktree (made by `git worktree add`, by hand or by another
    /// tool) as a git workspace, and print its id.
    ///
    /// The worktree stays where it is, on the branch (or detached HEAD) it has; its repository
    /// is its main checkout. berth did not create the branch, so it never deletes it: `berth
    /// workspace delete` removes the worktree only when it has no uncommitted changes and no
    /// commits that only it holds, and keeps the branch. Nothing runs in the worktree (no
    /// [git] copy or setup). Refused for a repository's main checkout, a folder outside git,
    /// and a worktree another workspace already records.
    #[command(verbatim_doc_comment)]
    Adopt {
        /// The worktree's folder (or any folder inside it).
        path: PathBuf,
        /// A unique name (letters, digits, '.', '_', '-'; up to 64).
        #[arg(long)]
        name: Option<String>,
        #[arg(long, short, default_value = "")]
        description: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show one workspace: metadata, folder, bound devices and its disk use (its folder and
    /// worktree, no symbolic link followed, a file linked twice counted once).
    Show {
        /// Id, name or id prefix (default: the workspace whose worktree holds this folder).
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show what a git workspace changed against its base: its commits and its uncommitted
    /// and untracked files together, as a unified diff (or, with --stat, a line per file).
    /// The base moving on since the workspace started is not shown as a change.
    Diff {
        /// Id, name or id prefix (default: the workspace whose worktree holds this folder).
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// A line per file: what happened to it and the lines added and removed.
        #[arg(long)]
        stat: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Bring a git workspace's work into a branch (default: its base).
    ///
    /// Uncommitted changes in the worktree are committed first, with a message naming the
    /// workspace's latest session. With no option the work is merged (a fast-forward when the
    /// branch has not moved); --squash makes one commit of it, --rebase replays its commits on
    /// the branch. Everything is checked before anything changes: a conflict is refused with
    /// the conflicting files named, and so is a branch checked out (in the main checkout or
    /// another worktree) with uncommitted changes; then neither side is touched. Where the
    /// branch is checked out, its files are updated too. The workspace's own commits stay on
    /// its branch. --delete then removes the workspace (its commits kept on
    /// refs/berth/lost/<id>, as a forced delete keeps them).
    #[command(verbatim_doc_comment)]
    Merge {
        /// Id, name or id prefix (default: the workspace whose worktree holds this folder).
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// The local branch to merge into (default: the workspace's base).
        #[arg(long, value_name = "BRANCH")]
        into: Option<String>,
        /// One new commit with the work's changes.
        #[arg(long, conflicts_with = "rebase")]
        squash: bool,
        /// The work's commits replayed on the branch, one by one (git 2.44 or later).
        #[arg(long)]
        rebase: bool,
        /// Remove the workspace once its work is merged.
        #[arg(long)]
        delete: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Push a git workspace's branch: its uncommitted work is committed first, with a message
    /// naming its latest session, then the branch is pushed under its name to the remote.
    /// Credentials are git's own; berth stores none.
    ///
    /// --json prints {"workspace", "branch", "base", "remote", "commit", "compare_url"}.
    #[command(verbatim_doc_comment)]
    Push {
        /// Id, name or id prefix (default: the workspace whose worktree holds this folder).
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// The remote to push to.
        #[arg(long, value_name = "NAME", default_value = "origin")]
        remote: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Open or update the pull request of a git workspace's branch.
    ///
    /// Pushes first, as `push` does. Then, with gh (GitHub) or glab (GitLab) installed and
    /// signed in, opens a pull request of the branch into the workspace's base, or updates
    /// the one the branch has. Its title is the latest session's (or --title); its body the
    /// task (the session's first prompt), the agent's summary (its last answer) and, for an
    /// agent of a `berth run` with --check, the check's result. With neither tool, it prints
    /// the page where the pull request is opened (GitHub and GitLab remotes) and what is
    /// missing.
    ///
    /// --json prints {"pushed": {…as push…}, "pull_request": {"outcome": "opened" | "updated"
    /// | "not_opened", "tool", "url" | "why", "compare_url"}}.
    #[command(verbatim_doc_comment)]
    Pr {
        /// Id, name or id prefix (default: the workspace whose worktree holds this folder).
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// The remote to push to.
        #[arg(long, value_name = "NAME", default_value = "origin")]
        remote: String,
        /// The pull request's title (default: the latest session's title).
        #[arg(long)]
        title: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Delete a workspace with its storage and sessions, and unbind its devices.
    ///
    /// A git workspace's worktree is removed too, and its branch if berth created it. This is
    /// refused when the worktree has uncommitted changes, the branch has commits on neither
    /// its base nor its upstream, or the worktree's HEAD (detached, or another branch) holds
    /// commits no branch, tag or remote has, unless --force. A forced delete first keeps that
    /// work on the git ref refs/berth/lost/<id> (and says so), so it can be undone.
    #[command(visible_alias = "rm", verbatim_doc_comment)]
    Delete {
        /// Ids, names or id prefixes: one or more.
        #[arg(add = ArgValueCompleter::new(completion::workspaces), required = true)]
        workspace: Vec<String>,
        /// Delete even if uncommitted changes or commits would be lost from the worktree; they
        /// are kept on refs/berth/lost/<id> first.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        confirm: ConfirmFlag,
    },
    /// Delete workspaces unused for a while (never `default`), or those merged (--merged).
    ///
    /// Git workspaces whose removal would lose work (uncommitted changes, unmerged commits)
    /// are kept and listed.
    ///
    /// --merged picks git workspaces whose branch is merged into its base, however recently
    /// used: the branch's tip is in the base's history (a fast-forward or a merge commit; a
    /// squash or rebase merge is not recognised) and it has commits of its own (a branch
    /// never committed to is not "merged"; its reflog tells). One with uncommitted or
    /// untracked files, or commits only its HEAD holds, is kept and listed. Each is checked
    /// again at the moment of its removal, as for the age, and never forced.
    #[command(verbatim_doc_comment)]
    Gc {
        /// Days without use after which a workspace is removed.
        #[arg(long, default_value_t = 90, value_name = "DAYS")]
        max_age: u32,
        /// Remove git workspaces whose branch is merged into its base, instead of by age.
        #[arg(long, conflicts_with = "max_age")]
        merged: bool,
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        confirm: ConfirmFlag,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Clean up git worktrees and workspace records that lost each other, losing nothing.
    ///
    /// A worktree in berth's folders (<home>/workspaces/<id>/worktree, [git] worktree_dir)
    /// that git lists but no workspace records is removed when it holds nothing that would be
    /// lost (no uncommitted or untracked file, no commit only its HEAD holds); its branch is
    /// kept. One whose folder is gone is forgotten by git (`git worktree prune`). A git
    /// workspace whose worktree is gone loses its record (and the branch berth made, when
    /// its commits are on its base), as `workspace delete` removes it. What would lose work,
    /// and a workspace with sessions, is kept and listed with what to do.
    #[command(verbatim_doc_comment)]
    Prune {
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        confirm: ConfirmFlag,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Print the workspace's folder (a git workspace's worktree), for
    /// `cd "$(berth workspace path NAME)"`.
    Path {
        /// Id, name or id prefix (default: the workspace whose worktree holds this folder).
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
    },
    /// Print the workspace's own block of TCP ports, first-last, giving it one if it has none.
    ///
    /// A workspace holds no ports when it is made. It is given a block of `[ports] block`
    /// consecutive ports (default 10), the lowest in `[ports] first`..`last` (default
    /// 20000-29999) that no other workspace holds, when something of its own first needs
    /// them: a `berth run` agent, a `[git] setup` command, a command of berth's agent, or this
    /// command. It keeps the block until it is deleted, and no other workspace gets any of
    /// its ports meanwhile, so its dev servers never fight another's. Its processes see the
    /// block as BERTH_PORT (the first port) and BERTH_PORT_1 … BERTH_PORT_<block-1>. Refused
    /// (exit status 4) when every block of the range is held: widen the range, make the block
    /// smaller, or delete workspaces you no longer use.
    ///
    /// Example: `berth workspace ports web` prints `20000-20009`; `--json` prints
    /// {"workspace", "label", "first", "last", "count"}.
    #[command(verbatim_doc_comment)]
    Ports {
        /// Id, name or id prefix (default: the workspace whose worktree holds this folder).
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Read, write, list and remove files in a workspace's storage.
    #[command(subcommand)]
    Storage(StorageCmd),
    /// Show a workspace's memory: the dated notes its agents keep with `remember` (and
    /// remove with `forget`), which every new turn in the workspace starts with, newest
    /// first when they are many. It is a Markdown file, memory/MEMORY.md in the workspace's
    /// folder: --edit opens it in $VISUAL or $EDITOR, --clear removes every note.
    #[command(verbatim_doc_comment)]
    Memory {
        /// Id, name or id prefix (default: the workspace whose worktree holds this folder).
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// Open the file in $VISUAL or $EDITOR (default vi).
        #[arg(long, conflicts_with = "clear")]
        edit: bool,
        /// Remove every note (asks first; --yes does not).
        #[arg(long)]
        clear: bool,
        #[command(flatten)]
        confirm: ConfirmFlag,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Reattach the workspaces of a repository that was moved.
    ///
    /// Run it with the repository's new place (default: the repository containing this
    /// folder). git's `worktree repair` makes each worktree's `.git` file lead to the repository
    /// again, then each berth workspace whose recorded repository is gone and whose worktree
    /// git lists here is recorded with the new path (a worktree that lived inside the
    /// repository is found at the same place inside it). Afterwards `show` is healthy and
    /// `delete` removes worktree and branch as before. Spares left under the old path go.
    #[command(verbatim_doc_comment)]
    Repair {
        /// The repository, where it is now (default: the one containing this folder).
        #[arg(long, value_name = "PATH")]
        repo: Option<PathBuf>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show, fill or clear a repository's spare checkouts.
    ///
    /// With `[git] spare_worktrees = N` in the config, berth keeps N checkouts of each
    /// repository ready (filled in the background after each create), so creating a git
    /// workspace is a rename plus a branch switch instead of writing every file. Each spare
    /// costs one worktree's disk space.
    #[command(verbatim_doc_comment)]
    Spares {
        /// The repository (default: the one containing this folder).
        #[arg(long, value_name = "PATH")]
        repo: Option<PathBuf>,
        /// Make spares now, up to `[git] spare_worktrees` (at least one); waits for them.
        #[arg(long)]
        fill: bool,
        /// Remove every spare of the repository.
        #[arg(long, conflicts_with = "fill")]
        clear: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}

/// Storage commands, shared by `workspace storage` and `session storage`. OWNER is the workspace
/// or the session: an id, a (workspace) name, or an id prefix of 4+ characters; for a
/// workspace, `.` is the one whose worktree holds this folder.
#[derive(Subcommand)]
pub enum StorageCmd {
    /// Print a file's contents (bytes as stored).
    Read { owner: String, path: String },
    /// Write a file atomically, creating folders; content from the argument or standard input.
    Write {
        owner: String,
        path: String,
        /// The content; omit (or pass -) to read standard input.
        content: Option<String>,
    },
    /// List a folder (the storage root by default).
    #[command(visible_alias = "ls")]
    List {
        owner: String,
        path: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Remove a file or an empty folder; -r for a folder and everything in it.
    Rm {
        owner: String,
        path: String,
        #[arg(short, long)]
        recursive: bool,
    },
}

impl StorageCmd {
    pub fn owner(&self) -> &str {
        match self {
            StorageCmd::Read { owner, .. }
            | StorageCmd::Write { owner, .. }
            | StorageCmd::List { owner, .. }
            | StorageCmd::Rm { owner, .. } => owner,
        }
    }
}

#[derive(Subcommand)]
pub enum SessionCmd {
    /// Create a session in a workspace and print its id.
    New {
        /// Workspace id, name or id prefix (default: the workspace whose worktree holds this
        /// folder).
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[arg(long, short, default_value = "")]
        title: String,
        /// Provider the session calls: claude, openai or gemini. Naming it (or --model) keeps
        /// the choice with the session, as `/model` does; default: the workspace's merged
        /// config, followed as it changes.
        #[arg(long)]
        provider: Option<berth_ops::ProviderKind>,
        /// Model the session calls (default: the workspace's merged config).
        #[arg(long)]
        model: Option<String>,
        /// Use this id instead of a fresh UUID.
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// List sessions, oldest first: of one workspace (--workspace, else the one whose
    /// worktree holds this folder), or of all (--all, or outside every worktree).
    #[command(visible_alias = "ls")]
    List {
        /// Workspace id, name or id prefix.
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// Every workspace's sessions, even inside a worktree.
        #[arg(long, short, conflicts_with = "workspace")]
        all: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show a session's metadata and transcript.
    Show {
        /// Session id or id prefix.
        #[arg(add = ArgValueCompleter::new(completion::sessions))]
        session: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Fork a session: a new session whose transcript starts as a copy of this one's, calling
    /// the same model, and goes its own way from the next prompt. The first session is left
    /// as it was. Prints the new session's id.
    ///
    /// The fork is in the same workspace, working where the first one does, unless
    /// --workspace names another. A session answering a prompt is forked once the answer is in
    /// (refused until then).
    #[command(verbatim_doc_comment)]
    Fork {
        /// Session id or id prefix.
        #[arg(add = ArgValueCompleter::new(completion::sessions))]
        session: String,
        /// Workspace id, name or id prefix for the fork (default: the first session's).
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// The fork's title (default: "fork of" the first one's).
        #[arg(long, short)]
        title: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Append one message to the transcript; content from the argument or standard input.
    Append {
        session: String,
        /// user, assistant or system.
        #[arg(long, short, default_value = "user")]
        role: String,
        /// The content; omit (or pass -) to read standard input.
        content: Option<String>,
    },
    /// Empty the transcript (its frontmatter stays).
    Clear {
        session: String,
        #[command(flatten)]
        confirm: ConfirmFlag,
    },
    /// Delete a session with its transcript and storage.
    Rm {
        session: String,
        #[command(flatten)]
        confirm: ConfirmFlag,
    },
    /// Read, write, list and remove files in a session's storage.
    #[command(subcommand)]
    Storage(StorageCmd),
}

#[derive(Subcommand)]
pub enum BindingCmd {
    /// List every device binding.
    #[command(visible_alias = "ls")]
    List(JsonFlag),
    /// Bind a device to a workspace (replacing any earlier binding).
    Set { device: String, workspace: String },
    /// Remove a device's binding.
    Rm { device: String },
    /// Print the workspace bound to a device, creating and binding a new one if none is.
    Resolve {
        device: String,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Subcommand)]
pub enum ConfigCmd {
    /// Write a commented config template to <home>/config.toml.
    Init {
        /// Replace an existing config.toml.
        #[arg(long)]
        force: bool,
    },
    /// Print the merged config (global → workspace → environment), secrets redacted.
    Show {
        /// Include this workspace's overrides (default: the workspace whose worktree holds
        /// this folder).
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Subcommand)]
pub enum StoreCmd {
    /// Print the store this home uses (a database's URL without its password).
    Show {
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Copy this home's records into another store, then verify them there.
    ///
    /// Workspaces (with their config), sessions (with their transcripts), storage files of both
    /// scopes and device bindings are copied from the store in use into the one --to names: a
    /// sqlite:// or postgres:// URL, or `fs` for the files under the home (back from a
    /// database). Ids, names and times are kept. Running it again copies only what is new (a
    /// transcript's newer messages, a later last-used time); what the target holds differently
    /// is a conflict, kept and reported, and nothing in the target is deleted. Every item is
    /// then read back from the target and compared; the counts are printed. The exit status is
    /// 0 when the target holds everything the source does, 6 when conflicts kept some of it
    /// out. Then point the home at the target: set [store] url in <home>/config.toml (or remove
    /// it, after `--to fs`).
    #[command(verbatim_doc_comment)]
    Migrate {
        /// The target: sqlite:///path/berth.db, postgres://user:password@host:port/db, or fs.
        #[arg(long, value_name = "URL")]
        to: String,
        /// Print what would be copied, and write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}
