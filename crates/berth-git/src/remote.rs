//! Repositories named by URL, as a pool of machines names them: each machine keeps its own
//! bare clone under berth's home, fetches it before a workspace is made from it, and gives the
//! work back by pushing the workspace's branch.
//!
//! A URL comes from outside (a person, a queued run), so git may reach it only over its plain
//! transports: never `ext::`, which runs a command, nor any other remote helper.

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::command::{command, git_output};
use crate::remove::{Embedded, stage_all};
use crate::spares::fnv1a;
use crate::{GitError, Repo, Result};

/// The transports git may use for a URL berth was given.
const ALLOWED_PROTOCOLS: &str = "file:git:http:https:ssh";

/// Whether `repo` names a repository by URL (`https://…`, `ssh://…`, `git://…`, `file://…`,
/// or scp-like `user@host:path`) rather than by a folder.
pub fn is_url(repo: &str) -> bool {
    if let Some((scheme, rest)) = repo.split_once("://") {
        return !scheme.is_empty()
            && !rest.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    }
    // scp-like: `host:path` or `user@host:path`, with no slash before the colon (a folder
    // path with a colon has one, or starts with `.` or `/`).
    match repo.split_once(':') {
        Some((host, path)) => {
            !host.is_empty()
                && !path.is_empty()
                && !host.contains('/')
                && !host.starts_with('.')
                && host.contains('@')
        }
        None => false,
    }
}

/// Whether `url` carries a password (`https://user:secret@host/…`). Its clone's config keeps
/// the URL, and a worktree's git, so an agent, reads that config.
pub fn has_password(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .is_some_and(|(user, _)| user.contains(':'))
}

/// The folder under `dir` that holds the clone of `url`: the URL's last part, readable, and a
/// hash of the whole URL, so two URLs never share one.
pub fn clone_dir(dir: &Path, url: &str) -> PathBuf {
    let tail = url
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("repo")
        .trim_end_matches(".git");
    let tail: String = tail
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    let tail = match tail.trim_start_matches('.') {
        "" => "repo",
        t => t,
    };
    dir.join(format!("{tail}-{:016x}.git", fnv1a(OsStr::new(url))))
}

impl Repo {
    /// The bare clone of `url` in `dir`, made on first use, its `origin` fetched now: the
    /// remote's branches as `origin/*`, and `origin/HEAD` as the default base. Two callers at
    /// once (two runs, two workers of one machine) take turns under `<dir>.lock`, and share
    /// a fetch: one that started after a caller asked is as fresh as its own would be, so
    /// the caller does not fetch again (`<dir>.fetched` holds when the last fetch started).
    pub fn clone_or_fetch(url: &str, dir: &Path) -> Result<Repo> {
        let asked = now_ns();
        let parent = dir.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        let lock_path = dir.with_extension("lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| io(&lock_path, e))?;
        lock.lock().map_err(|e| io(&lock_path, e))?;
        if !dir.exists() {
            // Cloned aside, then renamed: a clone cut short leaves no half repository.
            let aside = dir.with_extension("cloning");
            let _ = std::fs::remove_dir_all(&aside);
            let mut clone = command(parent);
            clone
                .env("GIT_ALLOW_PROTOCOL", ALLOWED_PROTOCOLS)
                .args(["clone", "--bare", "--quiet", "--"])
                .arg(url)
                .arg(&aside);
            checked(clone, &format!("clone {url}"))?;
            let configured = crate::command::run(
                &aside,
                [
                    "config",
                    "remote.origin.fetch",
                    "+refs/heads/*:refs/remotes/origin/*",
                ],
            );
            // The branches as cloned would go stale, and a bare repository's HEAD is its
            // default base: without them HEAD names nothing yet, and the base is the
            // remote's own default, `origin/HEAD`, as fresh as the last fetch.
            let configured = configured.and_then(|_| drop_local_branches(&aside));
            if let Err(e) = configured {
                let _ = std::fs::remove_dir_all(&aside);
                return Err(e);
            }
            std::fs::rename(&aside, dir).map_err(|e| io(dir, e))?;
        }
        let fetched = dir.with_extension("fetched");
        let last = std::fs::read_to_string(&fetched)
            .ok()
            .and_then(|t| t.trim().parse::<u128>().ok());
        if last.is_none_or(|last| last < asked) {
            let started = now_ns();
            let mut fetch = command(dir);
            fetch
                .env("GIT_ALLOW_PROTOCOL", ALLOWED_PROTOCOLS)
                .args(["fetch", "--prune", "--quiet", "origin"]);
            checked(fetch, &format!("fetch {url}"))?;
            // origin/HEAD: the remote's default branch, what a new workspace starts from. A
            // remote that does not say (an empty one) leaves the other defaults.
            let _ = git_output(dir, ["remote", "set-head", "origin", "--auto"]);
            // Only a fetch that succeeded serves the callers waiting behind it; one that
            // cannot be marked is only not shared.
            let _ = std::fs::write(&fetched, started.to_string());
        }
        drop(lock);
        Repo::open(dir)
    }
}

impl Repo {
    /// Fetches branch `branch` of `url` (where another machine pushed it) into this
    /// repository, as `refs/berth/fetched/<branch>`; its commit.
    pub fn fetch_branch(&self, url: &str, branch: &str) -> Result<String> {
        let local = format!("refs/berth/fetched/{branch}");
        let mut fetch = command(self.root());
        fetch
            .env("GIT_ALLOW_PROTOCOL", ALLOWED_PROTOCOLS)
            .args(["fetch", "--quiet", "--no-tags", "--"])
            .arg(url)
            .arg(format!("+refs/heads/{branch}:{local}"));
        checked(fetch, &format!("fetch {branch} from {url}"))?;
        Ok(
            crate::command::run(self.root(), ["rev-parse", "--verify", &local])?
                .trim()
                .to_owned(),
        )
    }
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn drop_local_branches(repo: &Path) -> Result<()> {
    let refs = crate::command::run(repo, ["for-each-ref", "--format=%(refname)", "refs/heads/"])?;
    for name in refs.lines().filter(|l| !l.is_empty()) {
        crate::command::run(repo, ["update-ref", "-d", name])?;
    }
    Ok(())
}

/// Commits everything uncommitted in `worktree` (untracked files too) on its branch, with
/// `message`; the commit, or `None` when there was nothing to commit. An embedded repository
/// (a folder with its own `.git`) is refused, naming it, before anything is staged.
pub fn commit_all(worktree: &Path, message: &str) -> Result<Option<String>> {
    stage_all(worktree, None, Embedded::Refuse)?;
    let staged = git_output(worktree, ["diff", "--cached", "--quiet"])?;
    if staged.status.success() {
        return Ok(None);
    }
    crate::command::run(
        worktree,
        ["commit", "--quiet", "--no-verify", "-m", message],
    )?;
    Ok(Some(
        crate::command::run(worktree, ["rev-parse", "HEAD"])?
            .trim()
            .to_owned(),
    ))
}

/// Pushes `branch` from `worktree` to `remote` (a remote's name), as a branch of the same
/// name.
pub fn push_branch(worktree: &Path, remote: &str, branch: &str) -> Result<()> {
    if remote.starts_with('-') || remote.is_empty() {
        return Err(GitError::Command {
            command: "push".to_owned(),
            message: format!("{remote:?} is not a remote's name"),
        });
    }
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    let mut push = command(worktree);
    push.env("GIT_ALLOW_PROTOCOL", ALLOWED_PROTOCOLS)
        .args(["push", "--quiet", remote, &refspec]);
    checked(push, &format!("push {branch} to {remote}"))
}

/// The URL of the remote `remote` of the repository at `dir`; `None` when there is no such
/// remote.
pub fn remote_url(dir: &Path, remote: &str) -> Result<Option<String>> {
    let key = format!("remote.{remote}.url");
    let out = git_output(dir, ["config", "--get", key.as_str()])?;
    Ok(out
        .status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|u| !u.is_empty()))
}

/// The page where a pull (merge) request of `branch` into `base` is opened, for a remote on
/// GitHub or GitLab (or a host of theirs whose name says so); `None` for any other host.
pub fn compare_url(remote: &str, base: &str, branch: &str) -> Option<String> {
    // `git@host:owner/repo.git`, `ssh://git@host[:port]/owner/repo.git`, `https://host/owner/repo`.
    let (host, path) = match remote.split_once("://") {
        Some((_, rest)) => {
            let (authority, path) = rest.split_once('/')?;
            let host = authority.rsplit('@').next()?;
            (host.split(':').next()?, path)
        }
        None => {
            let (authority, path) = remote.split_once(':')?;
            (authority.rsplit('@').next()?, path)
        }
    };
    let path = path.trim_end_matches('/').trim_end_matches(".git");
    if host.is_empty() || path.is_empty() {
        return None;
    }
    if host.contains("github") {
        Some(format!(
            "https://{host}/{path}/compare/{base}...{branch}?expand=1"
        ))
    } else if host.contains("gitlab") {
        Some(format!(
            "https://{host}/{path}/-/merge_requests/new?merge_request%5Bsource_branch%5D={branch}&merge_request%5Btarget_branch%5D={base}"
        ))
    } else {
        None
    }
}

/// Runs `cmd`; git's own message when it fails.
fn checked(mut cmd: std::process::Command, what: &str) -> Result<()> {
    let out = cmd.output().map_err(GitError::Spawn)?;
    if out.status.success() {
        return Ok(());
    }
    Err(GitError::Command {
        command: what.to_owned(),
        message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

fn io(path: &Path, source: std::io::Error) -> GitError {
    GitError::Io {
        context: format!("the clone at {}", path.display()),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_urls_of_github_and_gitlab_remotes() {
        let github = "https://github.com/acme/app/compare/main...berth/fix?expand=1";
        for remote in [
            "git@github.com:acme/app.git",
            "https://github.com/acme/app",
            "https://token@github.com/acme/app.git",
            "ssh://git@github.com:22/acme/app.git",
        ] {
            assert_eq!(
                compare_url(remote, "main", "berth/fix").as_deref(),
                Some(github),
                "{remote}"
            );
        }
        assert!(
            compare_url("git@gitlab.example.com:team/app.git", "main", "b")
                .unwrap()
                .starts_with("https://gitlab.example.com/team/app/-/merge_requests/new?")
        );
        assert_eq!(compare_url("/srv/git/app.git", "main", "b"), None);
        assert_eq!(
            compare_url("https://example.com/app.git", "main", "b"),
            None
        );
    }

    #[test]
    fn urls_are_told_from_folders() {
        for url in [
            "https://github.com/acme/app.git",
            "ssh://git@host/app",
            "file:///srv/app.git",
            "git@github.com:acme/app.git",
        ] {
            assert!(is_url(url), "{url}");
        }
        for folder in ["/srv/app", "./app", "app", "../x:y", "/a/b:c", "C"] {
            assert!(!is_url(folder), "{folder}");
        }
        assert!(has_password("https://me:tok@github.com/acme/app.git"));
        assert!(!has_password("https://me@github.com/acme/app.git"));
        assert!(!has_password("git@github.com:acme/app.git"));
    }

    #[test]
    fn each_url_has_its_own_readable_folder() {
        let home = Path::new("/h/repos");
        let a = clone_dir(home, "https://github.com/acme/app.git");
        let b = clone_dir(home, "https://gitlab.com/acme/app.git");
        assert_ne!(a, b);
        assert!(a.file_name().unwrap().to_str().unwrap().starts_with("app-"));
        let odd = clone_dir(home, "file:///..");
        assert!(
            odd.starts_with(home) && odd.parent() == Some(home),
            "{odd:?}"
        );
    }

    /// An `ext::` URL would run its command; git is never let use it.
    #[test]
    fn a_url_that_runs_a_command_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let marker = tmp.path().join("ran");
        let url = format!("ext::sh -c touch% {}", marker.display());
        let err = Repo::clone_or_fetch(&url, &clone_dir(&tmp.path().join("repos"), &url));
        assert!(err.is_err());
        assert!(!marker.exists(), "the command ran");
    }
}
