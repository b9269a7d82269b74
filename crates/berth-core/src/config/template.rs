//! The commented file `berth config init` writes; the tests keep it in step with the keys
//! berth reads.

/// The file `berth config init` writes: every key, commented, so the file documents itself.
pub const TEMPLATE: &str = r#"# berth configuration. Layers: this file -> workspaces/<id>/config.toml -> environment.
# Tables merge key by key; a scalar or an array in a higher layer replaces the lower one.
# Environment: ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY (or GOOGLE_API_KEY), and
# BERTH_<KEY> / BERTH_<TABLE>__<KEY> for any key below (e.g. BERTH_PROVIDER=gemini).

# Which provider berth's agent calls: "claude", "openai" or "gemini".
# provider = "claude"

# Overrides the provider's own model for every provider.
# model = "claude-sonnet-4-5"

[providers.claude]
# api_key = "..."            # prefer ANTHROPIC_API_KEY in the environment
# model = "claude-sonnet-4-5"
# base_url = "https://api.anthropic.com"
# max_tokens = 8192

[providers.openai]
# model = "gpt-4.1"

[providers.gemini]
# model = "gemini-2.5-flash"

[agent]
# max_tool_iterations = 50     # tool rounds one turn may take
# context_tokens = 200000      # the model's context window; default: the provider's usual size

[mcp]
# max_sessions = 1000              # HTTP sessions kept at once; the least recently used goes first
# session_idle_timeout_secs = 1800 # an HTTP session unused this long is closed

# External MCP servers whose tools berth's agent may call, as mcp__<name>__<tool>.
# [[mcp_servers]]
# name = "berth"                 # letters, digits, - and _
# command = "berth"              # a server on stdio...
# args = ["mcp"]
# env = { SOME_TOKEN = "..." }
# timeout_secs = 60              # one tool call's limit
# [[mcp_servers]]
# name = "docs"
# url = "http://127.0.0.1:8080/mcp"   # ...or a Streamable HTTP server
# headers = { Authorization = "Bearer ..." }

# Where to tell you when an agent needs you or is done (docs/notify.md). Any number.
# [[notify]]
# url = "https://ntfy.sh/my-secret-topic"   # a POST of each event...
# format = "ntfy"                            # json (default), ntfy or slack
# events = ["needs_input", "done", "failed", "check_failed"]   # default: all
# always = false                             # true: even while a page or an editor shows it
# [[notify]]
# command = "my-notifier"                    # ...or a command, the event's JSON on its stdin
# [[notify]]
# desktop = true                             # ...or this machine's desktop (notify-send)

[git]
# worktree_dir = "/path/for/worktrees"   # default: workspaces/<id>/worktree
# copy = [".env"]                        # untracked files copied into new worktrees
# setup = ["npm ci"]                     # commands run in new worktrees
# setup_timeout_secs = 600
# spare_worktrees = 1                    # checkouts kept ready: create skips the checkout
# submodules = false                     # default true: submodules checked out in new worktrees
# keep_lost_days = 30                    # work a forced delete kept (refs/berth/lost/*) goes in gc after this

[ports]
# first = 20000                # a workspace is given the lowest free block of ports in
# last = 29999                 # first..last when it first runs something, its own alone
# block = 10                   # until it is deleted, as BERTH_PORT, BERTH_PORT_1, ...

# What models cost, in US dollars per million tokens, for the costs `session show` and
# `berth run` show; berth ships no prices (they change), a model not listed has no cost.
# [prices."claude-sonnet-4-5"]
# input = 3.0
# output = 15.0

[run]
# max_agents = 4               # agents of one `berth run` working at once; the rest queued
# check_jobs = 2               # checks of one run at once, each as its agent ends (default: half the CPUs)
# max_line_mib = 64            # the longest line an ACP agent may write; a longer one fails it

[pool]
# lease_secs = 30              # a worker's hold on a run; a dead node's runs move on after it

[sandbox]
# mode = "on"                  # "off": commands and agent processes get all of your rights
# network = "off"              # commands reach nothing, agents their provider; "proxy": commands too reach allow_hosts; "full": all
# allow_hosts = ["index.crates.io"]  # reachable by name through berth's proxy
# writable = ["~/.cache/sccache"]   # besides the workspace's folder and a private /tmp
# deny_read = ["~/private"]         # hidden inside what is shown, besides ~/.ssh, ~/.aws, ...
# readable = ["~/src/shared"]       # shown read-only, besides the system's folders and toolchains
# sockets = ["/run/user/1000/ssh-agent.sock"]   # host sockets shown (none is otherwise)
# nested_namespaces = false         # true: confined processes may make user namespaces (Chromium, bwrap)
# fallback = "none"                 # "landlock": where user namespaces are refused, confine commands by Landlock alone

[serve]
# device_mcp_servers = ["docs"]     # [[mcp_servers]] a paired device may ask for by command
# permission_timeout_secs = 300     # a permission on the web page unanswered this long is a no
# public_url = "https://berth.example.com"   # where notifications link to

[store]
# url = "sqlite:///path/berth.db"   # or "postgres://user:password@host:5432/db"; default: files in the home
"#;
