//! The grammar of `berth workspace`, of the storage commands workspaces and sessions share,
//! and of `berth binding` (devices bound to workspaces).

use std::path::PathBuf;

use clap::Subcommand;
use clap_complete::ArgValueCompleter;

use super::{ConfirmFlag, JsonFlag};
use crate::completion;

#[derive(Subcommand)]
pub enum WorkspaceCmd {
    /// List every workspace (archived ones only with --archived).
    #[command(visible_alias = "ls")]
    List {
        /// Measure each workspace's disk use (its folder and worktree; a SIZE column, or
        /// size_bytes in JSON). Walks every file, so it takes a while on big worktrees.
        #[arg(long)]
        size: bool,
        /// Archived workspaces too (an ARCHIVED column; archived_at in JSON).
        #[arg(long)]
        archived: bool,
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
    /// another worktree) with changes to tracked files, or with an untracked or ignored file
    /// where the merge adds one (named); then neither side is touched. Where the
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
    /// Archive a workspace: put its work away, keeping its record, sessions and storage.
    ///
    /// A git workspace's work is kept on the git ref refs/berth/lost/<id> (what was
    /// uncommitted as one commit on top of its HEAD; the ref is named), then its worktree is
    /// removed, and its branch if berth created it; nothing is refused, since nothing is lost.
    /// A plain workspace keeps its folder. An archived workspace is left out of `workspace
    /// list` and `session list` (unless --archived), takes no new session, and is passed over
    /// by gc and prune; `workspace show` and `session show` still show it, and `workspace
    /// delete` removes its record. `berth run restore` brings a run's dropped agent back.
    /// Archiving an archived workspace changes nothing; `default` cannot be archived.
    #[command(verbatim_doc_comment)]
    Archive {
        /// Id, name or id prefix.
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: String,
        #[command(flatten)]
        json: JsonFlag,
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
    ///
    /// Either way, the work forced removals kept (refs/berth/lost/<id>, a forced delete's or
    /// a run's) goes once berth made it [git] keep_lost_days ago (default 30), in every
    /// repository berth knows: those its git workspaces name and its clones of URLs.
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
    /// List what runs for a workspace: the processes berth's agent started with
    /// `run_command`'s `background: true` (dev servers, watchers), or end them with --kill.
    ///
    /// Each lives until its session ends (a run's agent is done, `berth chat` exits, an
    /// editor closes the session), the workspace is deleted or archived, the agent stops
    /// it, or this command kills it. Its output (the last 1 MiB) is the file the OUTPUT
    /// column names. Killing one kills everything it started.
    ///
    /// Example: `berth workspace ps web` lists them; `berth workspace ps web --kill bg-2`
    /// ends one, `--kill` alone all. `--json` prints a list of {"id", "pid", "command",
    /// "started", "session", "output", "owner_pid", "start_ticks"}: what runs, or what was
    /// killed.
    #[command(verbatim_doc_comment)]
    Ps {
        /// Id, name or id prefix (default: the workspace whose worktree holds this folder).
        #[arg(add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// End the process with this id (bg-N), or every one without an id.
        #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
        kill: Option<String>,
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
