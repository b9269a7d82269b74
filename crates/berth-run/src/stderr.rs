//! An ACP agent's standard error, kept: appended to `agent-N.stderr` in the run's folder on
//! the machine that runs it, bounded (past [`CUT_AT`] it is cut to its last [`KEEP`] bytes,
//! by an atomic rewrite), and its end held in memory for the message that says why the agent
//! failed. `berth run logs RUN --agent N --stderr` reads the file.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

/// What is always kept of an agent's standard error: its last MiB.
pub const KEEP: u64 = 1 << 20;
/// Past this the file is cut back to its last [`KEEP`] bytes.
const CUT_AT: u64 = 2 * KEEP;
/// The end held in memory, for the failure message.
const TAIL: usize = 16 * 1024;

/// The end of what an agent wrote to its standard error so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tail(Arc<Mutex<Vec<u8>>>);

impl Tail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        tail.extend_from_slice(bytes);
        if tail.len() > TAIL {
            let cut = tail.len() - TAIL;
            tail.drain(..cut);
        }
    }

    /// Its last `n` lines that say something ([`quoted_lines`]).
    pub(crate) fn last_lines(&self, n: usize) -> Vec<String> {
        let tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        quoted_lines(&String::from_utf8_lossy(&tail), n)
    }

    /// All of the end held, as text.
    pub(crate) fn text(&self) -> String {
        let tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&tail).into_owned()
    }
}

/// The last `n` lines of `text` that say something, as a record quotes what an agent's
/// process or a check printed: each with its control characters shown as escapes (tabs kept;
/// berth-core's `shown`), so every front end may print it, and cut at 300 characters.
pub(crate) fn quoted_lines(text: &str, n: usize) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| {
            let clean =
                berth_ops::shown::visible(l.trim_end(), berth_ops::shown::Form::Lines).into_owned();
            match clean.char_indices().nth(300) {
                Some((at, _)) => format!("{}…", &clean[..at]),
                None => clean,
            }
        })
        .filter(|l| !l.trim().is_empty())
        .collect();
    let skip = lines.len().saturating_sub(n);
    lines.drain(..skip);
    lines
}

/// What a supervisor that ended at once wrote to `log`, for the error that says so: its last
/// lines as [`quoted_lines`] gives them (so a front end may print the error), and where the
/// whole of it is.
pub(crate) fn last_words(log: &Path) -> String {
    let said = std::fs::read(log).unwrap_or_default();
    let lines = quoted_lines(&String::from_utf8_lossy(&said), 20);
    match lines.is_empty() {
        true => format!("it wrote nothing (its log: {})", log.display()),
        false => format!("{} (its log: {})", lines.join("\n"), log.display()),
    }
}

/// Reads `stream` to its end on a task of its own: into `path` (when given), and into the
/// [`Tail`] it returns. The task ends when every process holding the stream has closed it.
pub(crate) fn keep(
    stream: impl AsyncRead + Unpin + Send + 'static,
    path: Option<PathBuf>,
) -> (Tail, JoinHandle<()>) {
    let tail = Tail::default();
    let held = tail.clone();
    let task = tokio::spawn(async move {
        if let Err(e) = copy(stream, path.as_deref(), &held).await {
            // Kept for the message, where the file could not be.
            held.push(format!("\n(berth could not keep this stream: {e})\n").as_bytes());
        }
    });
    (tail, task)
}

async fn copy(
    mut stream: impl AsyncRead + Unpin,
    path: Option<&Path>,
    tail: &Tail,
) -> io::Result<()> {
    let mut file = match path {
        Some(path) => {
            if let Some(dir) = path.parent() {
                tokio::fs::create_dir_all(dir).await?;
            }
            Some(open(path).await?)
        }
        None => None,
    };
    let mut size = match &file {
        Some(f) => f.metadata().await?.len(),
        None => 0,
    };
    let mut buf = vec![0u8; 8192];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        tail.push(&buf[..n]);
        let (Some(f), Some(path)) = (file.as_mut(), path) else {
            continue;
        };
        f.write_all(&buf[..n]).await?;
        size += n as u64;
        if size > CUT_AT {
            f.flush().await?;
            let path_owned = path.to_owned();
            size = tokio::task::spawn_blocking(move || cut(&path_owned))
                .await
                .map_err(io::Error::other)??;
            file = Some(open(path).await?);
        }
    }
    if let Some(f) = file.as_mut() {
        f.flush().await?;
    }
    Ok(())
}

async fn open(path: &Path) -> io::Result<tokio::fs::File> {
    tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await
}

/// Rewrites `path` (atomically) as its last [`KEEP`] bytes; the new size.
fn cut(path: &Path) -> io::Result<u64> {
    let all = std::fs::read(path)?;
    let from = all.len().saturating_sub(KEEP as usize);
    berth_confined::write_atomic(path, &all[from..])?;
    Ok((all.len() - from) as u64)
}

/// The last [`KEEP`] bytes of a kept standard error, as the agent wrote them (a front end
/// shows them through berth-core's `shown`); `None` when none was kept here.
pub fn read_kept(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(mut all) => {
            let from = all.len().saturating_sub(KEEP as usize);
            all.drain(..from);
            Ok(Some(all))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_stream_is_kept_bounded_and_its_end_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs/x/agent-1.stderr");
        // 3 MiB of numbered lines, then the last words.
        let mut text = String::new();
        let mut i = 0u64;
        while text.len() < 3 * KEEP as usize {
            text.push_str(&format!("line {i:08}\n"));
            i += 1;
        }
        text.push_str("\nfatal: the last words\n");
        let (tail, task) = keep(
            std::io::Cursor::new(text.clone().into_bytes()),
            Some(path.clone()),
        );
        task.await.unwrap();
        assert_eq!(tail.last_lines(1), ["fatal: the last words"]);
        let kept = std::fs::read(&path).unwrap();
        assert!(
            kept.len() as u64 >= KEEP && kept.len() as u64 <= CUT_AT,
            "{}",
            kept.len()
        );
        assert!(text.as_bytes().ends_with(&kept), "the end, whole");
        let read = read_kept(&path).unwrap().unwrap();
        assert_eq!(read.len() as u64, KEEP);
        assert!(read.ends_with(b"fatal: the last words\n"));
        assert_eq!(read_kept(&dir.path().join("none")).unwrap(), None);
    }

    #[test]
    fn a_supervisors_last_words_are_its_last_lines_escaped_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("run.log");
        assert!(last_words(&log).starts_with("it wrote nothing (its log: /"));
        let mut said: Vec<u8> = (0..50)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        said.extend_from_slice(b"\x1b]52;c;aGk=\x07 \xff error: the end\n");
        std::fs::write(&log, &said).unwrap();
        let words = last_words(&log);
        assert!(
            !words.contains("line 30\n") && words.starts_with("line 31\n"),
            "{words}"
        );
        assert!(
            words.contains("\\x1b]52;c;aGk=\\x07 \u{fffd} error: the end (its log: /"),
            "{words}"
        );
        assert!(
            !words.chars().any(|c| c.is_control() && c != '\n'),
            "{words}"
        );
    }

    #[test]
    fn quoted_lines_show_an_agents_controls_as_escapes() {
        let text = "ok\n\x1b[2J\x1b[1Ahidden\tcol \u{9b}31m \u{202e}txt\r\n\n  \n";
        assert_eq!(
            quoted_lines(text, 5),
            ["ok", "\\x1b[2J\\x1b[1Ahidden\tcol \\u{9b}31m \\u{202e}txt"]
        );
    }
}
