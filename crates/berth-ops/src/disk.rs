//! Disk use of a folder: what `du` would say, in bytes. The walk never follows a symbolic link
//! (a link costs its own few bytes, not its target's), and a file with several hard links
//! inside the folder counts once. A file that vanishes during the walk counts nothing.

use std::collections::HashSet;
use std::io;
use std::path::Path;

/// The bytes `path` takes on disk (allocated blocks, so a sparse file costs what it holds),
/// everything beneath it included. A path that does not exist takes 0.
pub fn usage(path: &Path) -> io::Result<u64> {
    usage_of(&[path])
}

/// The bytes `paths` take together: a path inside another, or a file linked from both,
/// counts once. A folder that cannot be read inside them counts as its own entry only.
pub fn usage_of(paths: &[&Path]) -> io::Result<u64> {
    let mut seen = HashSet::new();
    let mut total = 0;
    let mut pending: Vec<std::path::PathBuf> = paths
        .iter()
        .filter(|p| !paths.iter().any(|q| q != *p && p.starts_with(q)))
        .map(|p| p.to_path_buf())
        .collect();
    while let Some(p) = pending.pop() {
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        total += allocated(&meta, &mut seen);
        if meta.is_dir() {
            let entries = match std::fs::read_dir(&p) {
                Ok(entries) => entries,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
                    ) =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            };
            for entry in entries {
                match entry {
                    Ok(entry) => pending.push(entry.path()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(total)
}

#[cfg(unix)]
fn allocated(meta: &std::fs::Metadata, seen: &mut HashSet<(u64, u64)>) -> u64 {
    use std::os::unix::fs::MetadataExt;
    if !meta.is_dir() && meta.nlink() > 1 && !seen.insert((meta.dev(), meta.ino())) {
        return 0;
    }
    meta.blocks() * 512
}

#[cfg(not(unix))]
fn allocated(meta: &std::fs::Metadata, _seen: &mut HashSet<(u64, u64)>) -> u64 {
    meta.len()
}

/// `1536` as `1.5 KiB`: for a person.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The folders whose disk a view's size counts: its folder, and its worktree while it has one.
pub(crate) fn measured_roots(views: &[crate::view::WorkspaceView]) -> Vec<Vec<std::path::PathBuf>> {
    views
        .iter()
        .map(|v| {
            v.path
                .iter()
                .cloned()
                .chain(
                    v.git
                        .as_ref()
                        .filter(|_| v.archived_at.is_none())
                        .map(|g| g.worktree.clone()),
                )
                .collect()
        })
        .collect()
}

/// The size of each entry of `roots`, walked on this thread.
pub(crate) fn measure_each(roots: &[Vec<std::path::PathBuf>]) -> Vec<crate::Result<u64>> {
    roots
        .iter()
        .map(|paths| {
            let refs: Vec<&Path> = paths.iter().map(std::path::PathBuf::as_path).collect();
            usage_of(&refs).map_err(|e| {
                berth_core::Error::io(format!("cannot measure {}", paths[0].display()), e).into()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_count_once_and_symlinks_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("w");
        std::fs::create_dir(&root).unwrap();
        let empty = usage(&root).unwrap();
        std::fs::write(root.join("a"), vec![7u8; 64 * 1024]).unwrap();
        let one = usage(&root).unwrap();
        assert!(one >= empty + 64 * 1024, "{one}");
        // A hard link to the same file costs nothing more.
        std::fs::hard_link(root.join("a"), root.join("b")).unwrap();
        assert_eq!(usage(&root).unwrap(), one);
        // A link to a big folder outside costs the link only.
        let outside = dir.path().join("big");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("x"), vec![1u8; 512 * 1024]).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        assert!(usage(&root).unwrap() < one + 64 * 1024);
        assert_eq!(usage(&dir.path().join("nothing")).unwrap(), 0);
        // A folder inside another counts once.
        assert_eq!(
            usage_of(&[&root, &root.join("a")]).unwrap(),
            usage(&root).unwrap()
        );
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(5 * 1024 * 1024 * 1024), "5.0 GiB");
    }
}
