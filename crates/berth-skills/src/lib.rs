//! Agent Skills for berth: folders holding a `SKILL.md` whose YAML front matter has a `name`
//! and a `description`, then the instructions (the body). berth's agent is offered each
//! skill's name and description, within a bound, and reads a body only when it asks for it.
//!
//! A workspace's skills come from its [`Root`]s, read in order, a later skill of a name
//! replacing an earlier one: the person's own (`~/.config/berth/skills/`), the workspace's
//! `skills/` folder, then the worktree's `.agents/skills/` and `.claude/skills/`. Each direct
//! folder of a root that holds a `SKILL.md` is a skill (as Claude Code and Codex read them);
//! hidden entries are neither skills nor files of one.
//!
//! Every read happens beneath an open handle on the skill's folder, so a symlink or `..`
//! cannot lead a skill to a file outside it (`~/.ssh` linked as a "reference"). A skill that
//! cannot be read or whose `SKILL.md` is malformed is skipped with a [`Warning`] naming the
//! file and the problem: a bad skill never fails a turn. Every gather reads the folders again,
//! so a changed skill is seen by the next turn without a restart; only the parsed front matter
//! of a `SKILL.md` unchanged since (`parsed`) is kept.

#![forbid(unsafe_code)]

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use berth_confined::{Dir, ReadError};
use rmcp::model::{Skill as ManifestEntry, SkillFrontmatter, SkillResources};
use serde::Serialize;

/// The file that makes a folder a skill.
pub const SKILL_MD: &str = "SKILL.md";

/// A `SKILL.md` longer than this is skipped: a skill's instructions are meant to be read whole.
pub const MAX_SKILL_MD_BYTES: u64 = 256 * 1024;

/// The most files listed for one skill (as rmcp's own skill catalog bounds them).
pub const MAX_FILES: usize = 512;

/// The most bytes one file of a skill may have to be read through berth.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// How deep the files of a skill are listed.
const MAX_DEPTH: usize = 8;

/// A description longer than this is cut in a listing (the Agent Skills format allows 1,024
/// characters; a listing of many skills needs the gist).
pub const LISTED_DESCRIPTION_CHARS: usize = 200;

/// How much of a turn's instructions the section of skills may take, in characters (about
/// 1,700 tokens): however many skills are installed, a turn costs no more.
pub const LISTING_CHARS: usize = 6_000;

/// Where a root of skills is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The person's own, for every workspace.
    User,
    /// The workspace's `skills/` folder, in berth's home.
    Workspace,
    /// The project's, in the worktree (`.agents/skills/`, `.claude/skills/`).
    Worktree,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::User => "user",
            Source::Workspace => "workspace",
            Source::Worktree => "worktree",
        })
    }
}

/// A folder of skills.
#[derive(Debug, Clone)]
pub struct Root {
    pub source: Source,
    pub path: PathBuf,
}

/// One skill, as found.
#[derive(Debug, Clone, Serialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub source: Source,
    /// The skill's folder.
    pub dir: PathBuf,
    /// The skill's files other than `SKILL.md`: relative, `/`-separated, sorted.
    pub files: Vec<String>,
    /// The front matter's other fields (`license`, `allowed-tools`, …), as written.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// The folders of skills of the same name this one replaced, earliest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<PathBuf>,
}

/// A skill left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// The file or folder at fault.
    pub path: PathBuf,
    pub problem: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "skipped {}: {}",
            self.path.display(),
            self.problem.trim_end()
        )
    }
}

/// What went wrong reading a skill's body or files.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("no skill is named {name:?}{}", suggest(.near))]
    NotFound { name: String, near: Vec<String> },
    #[error("{}: {problem}", .path.display())]
    Malformed { path: PathBuf, problem: String },
    #[error("'{path}' is not a file of the skill {skill:?}: {why}")]
    NoSuchFile {
        skill: String,
        path: String,
        why: String,
    },
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn suggest(near: &[String]) -> String {
    match near {
        [] => "; `berth skill list` shows the skills".to_owned(),
        names => format!("; did you mean {}?", names.join(", ")),
    }
}

/// The skills of a set of roots.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Skills {
    /// By name.
    pub skills: Vec<Skill>,
    pub warnings: Vec<Warning>,
}

/// Finds the skills of `roots`, a later one of a name replacing an earlier. A root that does
/// not exist has none; one that cannot be read is a warning.
pub fn gather(roots: &[Root]) -> Skills {
    let mut found = Skills::default();
    for root in roots {
        for skill in read_root(root, &mut found.warnings) {
            match found.skills.iter_mut().find(|s| s.name == skill.name) {
                Some(earlier) => {
                    let mut replaced = std::mem::take(&mut earlier.replaced);
                    replaced.push(earlier.dir.clone());
                    *earlier = Skill { replaced, ..skill };
                }
                None => found.skills.push(skill),
            }
        }
    }
    found.skills.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// The skills a listing shows within a bound, and how many it leaves out.
#[derive(Debug)]
pub struct Listing<'a> {
    /// By name.
    pub shown: Vec<&'a Skill>,
    pub left_out: usize,
}

impl Skills {
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// The skill named `name`, or an error naming the skills whose name or description
    /// holds it.
    pub fn find(&self, name: &str) -> Result<&Skill, SkillError> {
        self.get(name).ok_or_else(|| SkillError::NotFound {
            name: name.to_owned(),
            near: self
                .matching(name)
                .iter()
                .take(10)
                .map(|s| s.name.clone())
                .collect(),
        })
    }

    /// The skills whose name or description holds `text`, ignoring case.
    pub fn matching(&self, text: &str) -> Vec<&Skill> {
        let text = text.to_lowercase();
        self.skills
            .iter()
            .filter(|s| {
                s.name.contains(&text) || s.description.to_lowercase().contains(text.as_str())
            })
            .collect()
    }

    /// The skills whose [`Skill::line`]s fit in `bound` characters. The project's skills come
    /// first, then the workspace's, then the person's; within a source, by name. So the list
    /// an agent reads costs at most `bound`, however many skills are installed.
    pub fn listing(&self, bound: usize) -> Listing<'_> {
        let mut ranked: Vec<&Skill> = self.skills.iter().collect();
        ranked.sort_by_key(|s| {
            let rank = match s.source {
                Source::Worktree => 0,
                Source::Workspace => 1,
                Source::User => 2,
            };
            (rank, s.name.as_str())
        });
        let mut used = 0;
        let mut shown = Vec::new();
        for skill in ranked {
            let cost = skill.line().chars().count() + 1;
            if used + cost > bound {
                break;
            }
            used += cost;
            shown.push(skill);
        }
        shown.sort_by(|a, b| a.name.cmp(&b.name));
        Listing {
            left_out: self.skills.len() - shown.len(),
            shown,
        }
    }
}

/// The head of the instructions' section of skills.
const SECTION_HEAD: &str = "\n\n## Skills\n\nInstructions for kinds of tasks. When a task matches a \
     skill's description, call the `skill` tool with its name first and follow what it says.\n\n";

/// Room kept in the section for the note on the skills left out.
const LEFT_OUT_NOTE: usize = 140;

impl Skills {
    /// The skills an agent's instructions list (the rest are found by name with the `skill`
    /// tool): what [`Skills::instructions`] shows, and `berth skill list` counts.
    pub fn offered(&self) -> Listing<'_> {
        self.listing(LISTING_CHARS - SECTION_HEAD.chars().count() - LEFT_OUT_NOTE)
    }

    /// The skills' names and descriptions for an agent's instructions, within
    /// [`LISTING_CHARS`] as a whole (its head, its lines, the note on those left out); empty
    /// with no skills. The agent reads a body with its `skill` tool, when a task needs one.
    pub fn instructions(&self) -> String {
        if self.skills.is_empty() {
            return String::new();
        }
        let mut out = String::from(SECTION_HEAD);
        let listing = self.offered();
        for skill in &listing.shown {
            out.push_str(&skill.line());
            out.push('\n');
        }
        if listing.left_out > 0 {
            out.push_str(&format!(
                "({} more skills are installed but not listed; the `skill` tool finds one by \
                 its name or a word of it.)\n",
                listing.left_out
            ));
        }
        out
    }
}

impl Skill {
    /// `- name: description`, the description cut to [`LISTED_DESCRIPTION_CHARS`].
    pub fn line(&self) -> String {
        let description = self.description.split_whitespace().collect::<Vec<_>>();
        let description = description.join(" ");
        let cut = match description.char_indices().nth(LISTED_DESCRIPTION_CHARS) {
            Some((at, _)) => format!("{}…", &description[..at]),
            None => description,
        };
        format!("- {}: {}", self.name, cut)
    }

    /// The instructions: `SKILL.md` after its front matter, read now.
    pub fn body(&self) -> Result<String, SkillError> {
        let dir = open(&self.dir)?;
        let path = self.dir.join(SKILL_MD);
        let text = read_skill_md(&dir, &path)?;
        let (_, body) = split_front_matter(&text).map_err(|problem| SkillError::Malformed {
            path: path.clone(),
            problem,
        })?;
        Ok(body.trim_start_matches(['\r', '\n']).to_owned())
    }

    /// One of the skill's files (`path` relative to its folder), read beneath the folder.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, SkillError> {
        let missing = |why: &str| SkillError::NoSuchFile {
            skill: self.name.clone(),
            path: path.to_owned(),
            why: why.to_owned(),
        };
        let relative = Path::new(path);
        if path.is_empty() || relative.is_absolute() {
            return Err(missing("name it relative to the skill's folder"));
        }
        if relative
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
        {
            return Err(missing(
                "hidden files and `..` are not part of a skill; its files are listed with it",
            ));
        }
        let dir = open(&self.dir)?;
        berth_confined::read(&dir, relative, MAX_FILE_BYTES).map_err(|e| match e {
            ReadError::Io(e) if e.kind() == io::ErrorKind::NotFound => {
                missing("there is no such file; its files are listed with it")
            }
            ReadError::Io(e) if berth_confined::is_escape(&e) => {
                missing("it leads outside the skill's folder (through a symlink)")
            }
            ReadError::Io(e) if e.kind() == io::ErrorKind::IsADirectory => {
                missing("it is a folder; its files are listed with the skill")
            }
            ReadError::Io(source) => SkillError::Io {
                path: self.dir.join(path),
                source,
            },
            ReadError::TooLarge { size, limit, .. } => missing(&format!(
                "it is {size} bytes, over the limit of {limit} for one read"
            )),
        })
    }
}

fn open(dir: &Path) -> Result<Dir, SkillError> {
    berth_confined::open(dir).map_err(|source| SkillError::Io {
        path: dir.to_path_buf(),
        source,
    })
}

fn read_skill_md(dir: &Dir, shown: &Path) -> Result<String, SkillError> {
    let bytes = berth_confined::read(dir, Path::new(SKILL_MD), MAX_SKILL_MD_BYTES).map_err(
        |e| match e {
            ReadError::Io(source) => SkillError::Io {
                path: shown.to_path_buf(),
                source,
            },
            ReadError::TooLarge { size, limit, .. } => SkillError::Malformed {
                path: shown.to_path_buf(),
                problem: format!("it is {size} bytes, over the limit of {limit}"),
            },
        },
    )?;
    String::from_utf8(bytes).map_err(|_| SkillError::Malformed {
        path: shown.to_path_buf(),
        problem: "it is not UTF-8 text".into(),
    })
}

/// The YAML between a `SKILL.md`'s leading `---` lines, and the rest.
fn split_front_matter(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("it does not start with a `---` line opening its front matter".into());
    }
    let start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut end = start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok((&text[start..end], &text[end + line.len()..]));
        }
        end += line.len();
    }
    Err("its front matter has no closing `---` line".into())
}

/// The front matter of a `SKILL.md` in the folder `folder`, checked by the Agent Skills rules
/// (rmcp's): a name of lowercase letters, digits and single hyphens, at most 64 characters,
/// equal to the folder's name; a description that says something.
fn front_matter(text: &str, folder: &str) -> Result<SkillFrontmatter, String> {
    let (yaml, _) = split_front_matter(text)?;
    let front: SkillFrontmatter = yaml_serde::from_str(yaml).map_err(|e| {
        format!("its front matter is not valid YAML with `name` and `description`: {e}")
    })?;
    if front.description.trim().is_empty() {
        return Err(
            "its `description` is empty; it is what tells an agent when to use the skill".into(),
        );
    }
    let entry = ManifestEntry::new(
        format!("skill://berth/{}/{SKILL_MD}", percent_encode(folder)),
        front.clone(),
        SkillResources::Dynamic,
    );
    entry.validate().map_err(|e| {
        if front.name != folder {
            format!(
                "its name {:?} is not its folder's name {folder:?}; rename one to match",
                front.name
            )
        } else {
            format!(
                "{e}: a name is lowercase letters, digits and single hyphens, at most 64 characters"
            )
        }
    })?;
    Ok(front)
}

/// A folder name as one segment of a URI, for rmcp's check of a skill entry.
fn percent_encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn read_root(root: &Root, warnings: &mut Vec<Warning>) -> Vec<Skill> {
    let mut warn = |path: PathBuf, problem: String| warnings.push(Warning { path, problem });
    let dir = match berth_confined::open(&root.path) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            warn(
                root.path.clone(),
                format!("cannot open the folder of skills: {e}"),
            );
            return Vec::new();
        }
    };
    let entries = match dir.entries() {
        Ok(entries) => entries,
        Err(e) => {
            warn(
                root.path.clone(),
                format!("cannot list the folder of skills: {e}"),
            );
            return Vec::new();
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    let mut skills = Vec::new();
    for name in names {
        let path = root.path.join(&name);
        let folder = match dir.open_dir(&name) {
            Ok(folder) => folder,
            // A file beside the skills (a README) is no skill.
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => continue,
            Err(e) if berth_confined::is_escape(&e) => {
                warn(
                    path,
                    "it is a symlink that leads outside the folder of skills".into(),
                );
                continue;
            }
            Err(e) => {
                warn(path, format!("cannot open it: {e}"));
                continue;
            }
        };
        let manifest = path.join(SKILL_MD);
        // Unchanged since it was last read (same size, same modification time): its front
        // matter as it was parsed then; a turn reads every skill, and most never change.
        let stamp = folder
            .metadata(SKILL_MD)
            .ok()
            .and_then(|m| Some((m.len(), m.modified().ok()?.into_std())));
        let cached = stamp.and_then(|stamp| parsed::get(&manifest, stamp));
        let front = match cached {
            Some(front) => front,
            None => match parse_manifest(&folder, &manifest, &name, stamp, &mut warn) {
                Some(front) => front,
                None => continue,
            },
        };
        let mut files = Vec::new();
        list_files(&folder, "", 0, &mut files);
        files.retain(|f| f != SKILL_MD);
        skills.push(Skill {
            name: front.name,
            description: front.description.trim().to_owned(),
            source: root.source,
            dir: path,
            files,
            extra: front.extra,
            replaced: Vec::new(),
        });
    }
    skills
}

/// A skill's `SKILL.md` read and its front matter parsed, and kept for the next read when its
/// `stamp` is known; none when it is no skill (a warning says why, when there is a why).
fn parse_manifest(
    folder: &Dir,
    manifest: &Path,
    name: &str,
    stamp: Option<parsed::Stamp>,
    warn: &mut impl FnMut(PathBuf, String),
) -> Option<SkillFrontmatter> {
    let text = match read_skill_md(folder, manifest) {
        Ok(text) => text,
        Err(SkillError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return None;
        }
        Err(SkillError::Io { source, .. }) if berth_confined::is_escape(&source) => {
            warn(
                manifest.to_path_buf(),
                "it is a symlink that leads outside its skill's folder".into(),
            );
            return None;
        }
        Err(SkillError::Malformed { path, problem }) => {
            warn(path, problem);
            return None;
        }
        Err(e) => {
            warn(manifest.to_path_buf(), e.to_string());
            return None;
        }
    };
    let front = match front_matter(&text, name) {
        Ok(front) => front,
        Err(problem) => {
            warn(manifest.to_path_buf(), problem);
            return None;
        }
    };
    if let Some(stamp) = stamp {
        parsed::keep(manifest, stamp, &front);
    }
    Some(front)
}

/// The front matter of each `SKILL.md` this process parsed, with the size and modification
/// time it had then: read again only when one of them changed. As git does for its index, an
/// entry whose file was modified less than a second before it was read is not trusted (a
/// file's time is coarse: an edit in the same tick would keep it), so such a file is read
/// again until it has been left alone that long.
mod parsed {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, OnceLock};
    use std::time::{Duration, SystemTime};

    use rmcp::model::SkillFrontmatter;

    /// A file's size and modification time.
    pub(super) type Stamp = (u64, SystemTime);

    /// Bounded: a process that met more skills than this starts its cache afresh.
    const MAX: usize = 20_000;
    const RACY: Duration = Duration::from_secs(1);

    struct Kept {
        stamp: Stamp,
        front: SkillFrontmatter,
        read_at: SystemTime,
    }

    fn cache() -> &'static Mutex<HashMap<PathBuf, Kept>> {
        static CACHE: OnceLock<Mutex<HashMap<PathBuf, Kept>>> = OnceLock::new();
        CACHE.get_or_init(Mutex::default)
    }

    pub(super) fn get(path: &Path, stamp: Stamp) -> Option<SkillFrontmatter> {
        let cache = cache().lock().unwrap_or_else(|e| e.into_inner());
        let kept = cache.get(path)?;
        let settled = kept
            .read_at
            .duration_since(stamp.1)
            .is_ok_and(|age| age >= RACY);
        (kept.stamp == stamp && settled).then(|| kept.front.clone())
    }

    pub(super) fn keep(path: &Path, stamp: Stamp, front: &SkillFrontmatter) {
        let mut cache = cache().lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX {
            cache.clear();
        }
        let kept = Kept {
            stamp,
            front: front.clone(),
            read_at: SystemTime::now(),
        };
        cache.insert(path.to_path_buf(), kept);
    }
}

/// The files beneath `dir` (at `prefix`), hidden ones and symlinks left out, at most
/// [`MAX_FILES`] and [`MAX_DEPTH`] deep.
fn list_files(dir: &Dir, prefix: &str, depth: usize, out: &mut Vec<String>) {
    let Ok(entries) = dir.entries() else { return };
    let mut entries: Vec<_> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.file_type().ok()?)))
        .filter(|(name, _)| !name.starts_with('.'))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, kind) in entries {
        if out.len() >= MAX_FILES {
            return;
        }
        let path = format!("{prefix}{name}");
        if kind.is_file() {
            out.push(path);
        } else if kind.is_dir()
            && depth + 1 < MAX_DEPTH
            && let Ok(sub) = dir.open_dir(&name)
        {
            list_files(&sub, &format!("{path}/"), depth + 1, out);
        }
    }
}

impl berth_core::Kinded for SkillError {
    fn kind(&self) -> berth_core::ErrorKind {
        match self {
            SkillError::NotFound { .. } | SkillError::NoSuchFile { .. } => {
                berth_core::ErrorKind::NotFound
            }
            SkillError::Malformed { .. } => berth_core::ErrorKind::Invalid,
            SkillError::Io { .. } => berth_core::ErrorKind::Io,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(root: &Path, folder: &str, text: &str) {
        std::fs::create_dir_all(root.join(folder)).unwrap();
        std::fs::write(root.join(folder).join(SKILL_MD), text).unwrap();
    }

    fn md(name: &str, description: &str, body: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\n{body}")
    }

    #[test]
    fn later_roots_replace_earlier_skills_of_a_name() {
        let user = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        skill(
            user.path(),
            "review",
            &md("review", "the person's review", "U"),
        );
        skill(user.path(), "deploy", &md("deploy", "ship it", "D"));
        skill(
            project.path(),
            "review",
            &md("review", "the project's review", "P"),
        );
        let found = gather(&[
            Root {
                source: Source::User,
                path: user.path().into(),
            },
            Root {
                source: Source::Worktree,
                path: project.path().into(),
            },
        ]);
        assert!(found.warnings.is_empty(), "{:?}", found.warnings);
        let names: Vec<_> = found.skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["deploy", "review"]);
        let review = found.get("review").unwrap();
        assert_eq!(review.description, "the project's review");
        assert_eq!(review.source, Source::Worktree);
        assert_eq!(review.replaced, [user.path().join("review")]);
        assert_eq!(review.body().unwrap(), "P");
    }

    #[test]
    fn malformed_skills_are_warnings_that_name_the_file() {
        let root = tempfile::tempdir().unwrap();
        skill(root.path(), "no-front", "# just markdown\n");
        skill(root.path(), "unclosed", "---\nname: unclosed\n");
        skill(root.path(), "wrong", &md("other", "d", ""));
        skill(root.path(), "Caps", &md("Caps", "d", ""));
        skill(root.path(), "empty", &md("empty", "''", ""));
        skill(root.path(), "yaml", "---\nname: [yaml\n---\n");
        skill(root.path(), "good", &md("good", "fine", "body"));
        std::fs::create_dir(root.path().join("not-a-skill")).unwrap();
        std::fs::write(root.path().join("README.md"), "hello").unwrap();
        let found = gather(&[Root {
            source: Source::Workspace,
            path: root.path().into(),
        }]);
        assert_eq!(found.skills.len(), 1);
        assert_eq!(found.skills[0].name, "good");
        let said: Vec<String> = found.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(said.len(), 6, "{said:#?}");
        for (folder, problem) in [
            ("no-front", "does not start with a `---` line"),
            ("unclosed", "no closing `---`"),
            ("wrong", "is not its folder's name"),
            ("Caps", "lowercase letters"),
            ("empty", "`description` is empty"),
            ("yaml", "not valid YAML"),
        ] {
            let path = root.path().join(folder).join(SKILL_MD);
            assert!(
                said.iter()
                    .any(|w| w.contains(&path.display().to_string()) && w.contains(problem)),
                "{folder}: {said:#?}"
            );
        }
    }

    #[test]
    fn files_are_listed_and_read_beneath_the_skill_only() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("id_rsa"), "SECRET").unwrap();
        skill(
            root.path(),
            "pdf",
            &md("pdf", "fill forms", "Read forms.md"),
        );
        let dir = root.path().join("pdf");
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("forms.md"), "how to fill").unwrap();
        std::fs::write(dir.join("scripts/fill.py"), "print()").unwrap();
        std::fs::write(dir.join(".hidden"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path().join("id_rsa"), dir.join("key")).unwrap();
        // A skill folder that is itself a symlink out of the root is refused.
        skill(outside.path(), "evil", &md("evil", "d", "b"));
        std::os::unix::fs::symlink(outside.path().join("evil"), root.path().join("evil")).unwrap();
        let found = gather(&[Root {
            source: Source::Worktree,
            path: root.path().into(),
        }]);
        assert_eq!(found.skills.len(), 1, "{:?}", found.skills);
        assert!(
            found.warnings[0].to_string().contains("leads outside"),
            "{:?}",
            found.warnings
        );
        let pdf = found.get("pdf").unwrap();
        assert_eq!(pdf.files, ["forms.md", "scripts/fill.py"]);
        assert_eq!(pdf.read("scripts/fill.py").unwrap(), b"print()");
        let escape = pdf.read("key").unwrap_err().to_string();
        assert!(escape.contains("leads outside"), "{escape}");
        for bad in ["../pdf/forms.md", "/etc/passwd", ".hidden", ""] {
            assert!(pdf.read(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_edited_skill_is_read_again_even_at_the_same_size() {
        let root = tempfile::tempdir().unwrap();
        let roots = [Root {
            source: Source::Workspace,
            path: root.path().into(),
        }];
        skill(root.path(), "edit", &md("edit", "first", ""));
        assert_eq!(gather(&roots).skills[0].description, "first");
        // Same length, written at once: the file's time may not have moved.
        skill(root.path(), "edit", &md("edit", "again", ""));
        assert_eq!(gather(&roots).skills[0].description, "again");
        // Left alone, then changed with its time set back as it was: a settled entry is kept
        // (what the cache is for), and a change of size is always seen.
        let manifest = root.path().join("edit").join(SKILL_MD);
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&manifest)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(gather(&roots).skills[0].description, "again");
        skill(root.path(), "edit", &md("edit", "a longer one", ""));
        assert_eq!(gather(&roots).skills[0].description, "a longer one");
    }

    #[test]
    fn the_instructions_stay_within_the_bound_however_many_skills() {
        let root = tempfile::tempdir().unwrap();
        for i in 0..300 {
            let name = format!("s-{i:03}");
            skill(root.path(), &name, &md(&name, &"d".repeat(150), ""));
        }
        let found = gather(&[Root {
            source: Source::Workspace,
            path: root.path().into(),
        }]);
        let text = found.instructions();
        assert!(text.chars().count() <= LISTING_CHARS, "{}", text.len());
        assert!(text.contains("more skills are installed but not listed"));
        assert!(Skills::default().instructions().is_empty());
    }

    #[test]
    fn a_listing_is_bounded_and_prefers_the_project() {
        let user = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        for i in 0..50 {
            let name = format!("user-{i:02}");
            skill(user.path(), &name, &md(&name, &"x".repeat(300), ""));
        }
        skill(
            project.path(),
            "zz-project",
            &md("zz-project", "the project's", ""),
        );
        let found = gather(&[
            Root {
                source: Source::User,
                path: user.path().into(),
            },
            Root {
                source: Source::Worktree,
                path: project.path().into(),
            },
        ]);
        let listing = found.listing(1_000);
        let cost: usize = listing
            .shown
            .iter()
            .map(|s| s.line().chars().count() + 1)
            .sum();
        assert!(cost <= 1_000);
        assert!(listing.shown.iter().any(|s| s.name == "zz-project"));
        assert_eq!(listing.shown.len() + listing.left_out, 51);
        // A description is cut in a line.
        assert!(found.skills[0].line().chars().count() < 230);
        let missing = found.find("zz").unwrap_err().to_string();
        assert!(missing.contains("did you mean zz-project"), "{missing}");
    }
}
