//! What a hostile agent can plant in its worktree so that a careless git run by berth on the
//! host runs a command of the agent's: a repository of its own with a filter in its config.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::git;

/// A repository at `wt/<path>` with a commit, a clean/smudge filter and a diff textconv in its
/// own config that append their names to `marker`, selected for every file by its
/// `.gitattributes`, and a file changed since (same size, a time long past), so that any git
/// that looks at its files must run the filter. Plain git looking inside runs it, which this
/// checks (then makes the file dirty again and removes `marker`).
pub fn plant_nested_repository(wt: &Path, path: &str, marker: &Path) -> PathBuf {
    let nested = wt.join(path);
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "--quiet", "-b", "main"]);
    std::fs::write(nested.join("file"), "one\n").unwrap();
    std::fs::write(nested.join(".gitattributes"), "* filter=x diff=x\n").unwrap();
    git(&nested, &["add", "."]);
    git(&nested, &["commit", "--quiet", "-m", "nested"]);
    let config = nested.join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    let m = marker.display();
    text += &format!(
        "[filter \"x\"]\n\tclean = \"echo clean >> '{m}'; cat\"\n\tsmudge = \"echo smudge >> '{m}'; cat\"\n\
         [diff \"x\"]\n\ttextconv = \"echo textconv >> '{m}'; cat\"\n"
    );
    std::fs::write(&config, text).unwrap();
    dirty(&nested.join("file"));
    git(&nested, &["status", "--porcelain"]);
    assert!(
        std::fs::read_to_string(marker).is_ok_and(|ran| ran.contains("clean")),
        "the planted filter never ran"
    );
    let _ = std::fs::remove_file(marker);
    dirty(&nested.join("file"));
    nested
}

/// Changes `file` to a text of the same size with a time long past (another on each call), so
/// that git cannot tell from its size or time whether it changed and must read it, through
/// any filter.
pub fn dirty(file: &Path) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let text = std::fs::read_to_string(file).unwrap_or_default();
    std::fs::write(file, if text == "two\n" { "six\n" } else { "two\n" }).unwrap();
    let past = SystemTime::UNIX_EPOCH
        + Duration::from_secs(1_000_000_000 + N.fetch_add(1000, Ordering::Relaxed));
    std::fs::File::options()
        .write(true)
        .open(file)
        .unwrap()
        .set_modified(past)
        .unwrap();
}
