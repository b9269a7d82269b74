//! berth-notify: tells people when an agent needs them or is done. Every part of berth that
//! knows of an event (a run's supervisor, the web page's and ACP's permission requests) hands
//! a [`Notice`] to its [`Notifier`]; the notifier delivers it to each `[[notify]]` entry that
//! wants it: a POST to a URL (berth's JSON, ntfy's form or Slack's) or a command with the JSON
//! on its standard input.
//!
//! - **Never in a turn's way.** [`Notifier::send`] puts the notice on a bounded queue and
//!   returns; a full queue drops it (and says so). Each delivery runs on a task of its own,
//!   with a timeout and a few retries with backoff, so a dead or slow sink delays nothing.
//! - **Never spam.** One `needs_input` per waiting request; the same event of the same session
//!   or run within [`DEBOUNCE`] is sent once; a notice a person already watches (a page or an
//!   editor shows the session) goes only to entries that say `always`.
//! - **Failures are kept.** Each delivery's outcome is a line of `notify.log` in berth's home,
//!   which `berth doctor` reads; a failure is also said on standard error.
//! - **Nothing secret.** A notice carries ids, names, a title and a one-line summary (a tool
//!   and its target, a state and its tokens): never a file's contents, an answer, a key or a
//!   token. A sink's URL (ntfy topics and Slack webhooks are secrets) is never logged whole.

#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use berth_core::config::{NotifyEvent, NotifyFormat, NotifySettings};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Notify, mpsc};

/// Notices waiting for delivery at most; more are dropped.
const QUEUE: usize = 256;
/// One attempt of one delivery.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts of one delivery, and the wait before the second (doubled for each next).
const ATTEMPTS: u32 = 3;
const BACKOFF: Duration = Duration::from_millis(500);
/// The same event of the same session or run is sent once within this.
pub const DEBOUNCE: Duration = Duration::from_secs(5);
/// `notify.log` is started afresh (the old one kept as `notify.log.1`) past this size.
const LOG_BYTES: u64 = 256 * 1024;

/// Something a person should hear of. The JSON body of a `url` entry in berth's format (and
/// what a `command` reads) is this, with `"version": 1`.
#[derive(Debug, Clone, Serialize)]
pub struct Notice {
    pub event: NotifyEvent,
    pub time: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The run's agent, counted from 1 as `berth run` shows them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The machine that saw it.
    pub node: String,
    pub title: String,
    pub summary: String,
    /// The run or session on the web page, when `[serve] public_url` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The waiting request a `needs_input` is about: one notice per request.
    #[serde(skip)]
    pub request: Option<String>,
    /// A person watches this already (a page or an editor shows it): only `always` entries
    /// get it.
    #[serde(skip)]
    pub watched: bool,
}

impl Notice {
    /// A notice of `event` now, on this machine; the rest is the caller's.
    pub fn new(event: NotifyEvent, title: impl Into<String>, summary: impl Into<String>) -> Notice {
        Notice {
            event,
            time: Utc::now(),
            run: None,
            agent: None,
            session: None,
            workspace: None,
            node: node_name(),
            title: one_line(&title.into(), 200),
            summary: one_line(&summary.into(), 500),
            link: None,
            request: None,
            watched: false,
        }
    }

    /// What debounces it: the event of one run's agent, or of one session.
    fn key(&self) -> String {
        format!(
            "{}/{}/{:?}/{}",
            self.event.as_str(),
            self.run.as_deref().unwrap_or(""),
            self.agent,
            self.session.as_deref().unwrap_or("")
        )
    }
}

/// The machine's name: `--node`'s default for a pool, and every notice's `node`.
pub fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

fn one_line(text: &str, chars: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// Hands notices to the `[[notify]]` entries; cheap to clone. With no entries it does
/// nothing at all.
#[derive(Clone, Default)]
pub struct Notifier {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    tx: mpsc::Sender<Notice>,
    /// Notices queued or being delivered, for [`Notifier::flush`].
    busy: Arc<AtomicUsize>,
    idle: Arc<Notify>,
}

impl Notifier {
    /// A notifier of `entries`, linking to `public_url` (the web page) when given, keeping its
    /// outcomes in `log`. Must be made within a tokio runtime when there are entries.
    pub fn new(entries: Vec<NotifySettings>, public_url: Option<String>, log: PathBuf) -> Notifier {
        let entries: Vec<NotifySettings> = entries
            .into_iter()
            .filter(|e| e.url.is_some() || e.command.is_some() || e.desktop)
            .collect();
        if entries.is_empty() {
            return Notifier::default();
        }
        // reqwest is built without a default TLS crypto provider; ring is the one berth ships.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (tx, rx) = mpsc::channel(QUEUE);
        let busy = Arc::new(AtomicUsize::new(0));
        let idle = Arc::new(Notify::new());
        let client = reqwest::Client::builder().timeout(TIMEOUT).build().ok();
        let worker = Worker {
            entries: Arc::new(entries),
            public_url: public_url.map(|u| u.trim_end_matches('/').to_owned()),
            client,
            log: Arc::new(Log { path: log }),
            busy: busy.clone(),
            idle: idle.clone(),
            asked: Mutex::new((HashSet::new(), VecDeque::new())),
            sent: Mutex::new(HashMap::new()),
        };
        tokio::spawn(worker.run(rx));
        Notifier {
            inner: Some(Arc::new(Inner { tx, busy, idle })),
        }
    }

    /// Queues `notice` and returns at once. A full queue drops it, saying so.
    pub fn send(&self, notice: Notice) {
        let Some(inner) = &self.inner else { return };
        inner.busy.fetch_add(1, Ordering::SeqCst);
        if inner.tx.try_send(notice).is_err() {
            done(&inner.busy, &inner.idle);
            tracing::warn!("a notification was dropped: {QUEUE} are waiting to be sent already");
        }
    }

    /// Waits until every notice queued so far is delivered or given up, for at most `within`:
    /// for a process about to exit (`berth run`), whose notices would otherwise die with it.
    pub async fn flush(&self, within: Duration) {
        let Some(inner) = &self.inner else { return };
        let _ = tokio::time::timeout(within, async {
            loop {
                let idle = inner.idle.notified();
                if inner.busy.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await;
    }
}

fn done(busy: &AtomicUsize, idle: &Notify) {
    if busy.fetch_sub(1, Ordering::SeqCst) == 1 {
        idle.notify_waiters();
    }
}

struct Worker {
    entries: Arc<Vec<NotifySettings>>,
    public_url: Option<String>,
    client: Option<reqwest::Client>,
    log: Arc<Log>,
    busy: Arc<AtomicUsize>,
    idle: Arc<Notify>,
    /// The requests a `needs_input` went out for (the newest 1,000).
    asked: Mutex<(HashSet<String>, VecDeque<String>)>,
    /// When each event of a session or run was last sent.
    sent: Mutex<HashMap<String, Instant>>,
}

impl Worker {
    async fn run(self, mut rx: mpsc::Receiver<Notice>) {
        let this = Arc::new(self);
        while let Some(mut notice) = rx.recv().await {
            if !this.first(&notice) {
                done(&this.busy, &this.idle);
                continue;
            }
            if notice.link.is_none() {
                notice.link = this.link(&notice);
            }
            let wanted: Vec<usize> = (0..this.entries.len())
                .filter(|&i| {
                    let e = &this.entries[i];
                    e.wants(notice.event) && (!notice.watched || e.always)
                })
                .collect();
            for (n, i) in wanted.iter().enumerate() {
                // One count per delivery, the notice's own for the first.
                if n > 0 {
                    this.busy.fetch_add(1, Ordering::SeqCst);
                }
                let (this, notice, i) = (this.clone(), notice.clone(), *i);
                tokio::spawn(async move {
                    this.deliver(i, &notice).await;
                    done(&this.busy, &this.idle);
                });
            }
            if wanted.is_empty() {
                done(&this.busy, &this.idle);
            }
        }
    }

    /// Whether `notice` is new: its request not asked of before, its event not sent for the
    /// same session or run within [`DEBOUNCE`].
    fn first(&self, notice: &Notice) -> bool {
        if let Some(request) = &notice.request {
            let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
            let (seen, order) = &mut *asked;
            if !seen.insert(request.clone()) {
                return false;
            }
            order.push_back(request.clone());
            if order.len() > 1_000
                && let Some(old) = order.pop_front()
            {
                seen.remove(&old);
            }
            return true;
        }
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        sent.retain(|_, at| now.duration_since(*at) < DEBOUNCE);
        sent.insert(notice.key(), now).is_none()
    }

    fn link(&self, notice: &Notice) -> Option<String> {
        let base = self.public_url.as_ref()?;
        match (&notice.run, &notice.session) {
            (Some(run), _) => Some(format!("{base}/runs/{run}")),
            (None, Some(session)) => Some(format!("{base}/s/{session}")),
            _ => Some(format!("{base}/")),
        }
    }

    async fn deliver(&self, entry: usize, notice: &Notice) {
        let e = &self.entries[entry];
        let sink = sink_label(e);
        let mut wait = BACKOFF;
        let mut outcome = Err(String::new());
        for attempt in 1..=ATTEMPTS {
            outcome = match (&e.url, &e.command) {
                (Some(url), _) => self.post(url.expose(), e.format, notice).await,
                (None, Some(command)) => run_command(command, notice).await,
                (None, None) if e.desktop => show_on_desktop(notice).await,
                (None, None) => return,
            };
            if outcome.is_ok() || attempt == ATTEMPTS {
                break;
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        if let Err(why) = &outcome {
            tracing::warn!(
                event = notice.event.as_str(),
                "the {} notification to {sink} failed: {why}",
                notice.event.as_str()
            );
        }
        self.log.write(&sink, notice.event, outcome.err());
    }

    async fn post(&self, url: &str, format: NotifyFormat, notice: &Notice) -> Result<(), String> {
        let client = self
            .client
            .as_ref()
            .ok_or("no HTTP client could be made here")?;
        let json = |value: serde_json::Value| {
            client
                .post(url)
                .header("Content-Type", "application/json")
                .body(value.to_string())
        };
        let request = match format {
            NotifyFormat::Json => json(body(notice)),
            NotifyFormat::Slack => json(serde_json::json!({
                "text": match &notice.link {
                    Some(link) => format!("*{}*\n{} <{link}|open>", notice.title, notice.summary),
                    None => format!("*{}*\n{}", notice.title, notice.summary),
                }
            })),
            NotifyFormat::Ntfy => {
                let mut r = client
                    .post(url)
                    .header("Title", header_text(&notice.title))
                    .header("Tags", notice.event.as_str())
                    .body(notice.summary.clone());
                if notice.event == NotifyEvent::NeedsInput {
                    r = r.header("Priority", "high");
                }
                if let Some(link) = &notice.link {
                    r = r.header("Click", header_text(link));
                }
                r
            }
        };
        let response = request.send().await.map_err(|e| {
            // reqwest's error names the URL; a topic or a webhook's path is a secret.
            if e.is_timeout() {
                return format!("no answer within {}s", TIMEOUT.as_secs());
            }
            // The error's sources say why (connection refused).
            let e = e.without_url();
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                why.push_str(": ");
                why.push_str(&cause.to_string());
                source = cause.source();
            }
            why
        })?;
        let status = response.status();
        match status.is_success() {
            true => Ok(()),
            false => Err(format!("answered {status}")),
        }
    }
}

/// The JSON body of a notice in berth's format.
pub fn body(notice: &Notice) -> serde_json::Value {
    let mut value = serde_json::to_value(notice).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("version".into(), 1.into());
    }
    value
}

/// Headers are ASCII: anything else becomes `?`.
fn header_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// `sh -c command`, the notice's JSON on its standard input, within the timeout.
async fn run_command(command: &str, notice: &Notice) -> Result<(), String> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let json = body(notice).to_string();
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(json.as_bytes()).await;
    }
    finished(child, "it").await
}

/// Waits for `child` (`what` names it in a failure) within the timeout: a success, or what
/// went wrong with what it said on standard error.
async fn finished(child: tokio::process::Child, what: &str) -> Result<(), String> {
    match tokio::time::timeout(TIMEOUT, child.wait_with_output()).await {
        Err(_) => Err(format!("{what} did not end within {}s", TIMEOUT.as_secs())),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(format!(
            "{what} ended with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// The notice on this machine's desktop: the freedesktop notification service, over the
/// session's D-Bus, through `notify-send` (libnotify's); a waiting request is critical.
async fn show_on_desktop(notice: &Notice) -> Result<(), String> {
    let bus = std::env::var_os("DBUS_SESSION_BUS_ADDRESS").filter(|a| !a.is_empty());
    let uid = uid_of_this_process();
    let user_bus = std::path::Path::new("/run/user").join(uid).join("bus");
    if bus.is_none() && !user_bus.exists() {
        return Err("there is no D-Bus session bus here (a desktop session starts one)".into());
    }
    let urgency = match notice.event {
        NotifyEvent::NeedsInput => "critical",
        _ => "normal",
    };
    let mut command = tokio::process::Command::new("notify-send");
    command
        .args(["--app-name=berth", &format!("--urgency={urgency}"), "--"])
        .arg(&notice.title)
        .arg(&notice.summary)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            "notify-send is not installed (Debian's libnotify-bin has it)".to_owned()
        }
        _ => format!("cannot start notify-send: {e}"),
    })?;
    finished(child, "notify-send").await
}

/// This process's user id, as the name of its runtime folder (`/run/user/UID`): the owner of
/// its own `/proc` entry.
fn uid_of_this_process() -> String {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or_else(|_| String::new(), |m| m.uid().to_string())
}

/// How a sink is named in the log and by the doctor: a URL's scheme and host (its path, a
/// topic or a webhook, is a secret), or a command's program.
pub fn sink_label(entry: &NotifySettings) -> String {
    match (&entry.url, &entry.command) {
        (Some(url), _) => {
            let url = url.expose();
            let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            let host = host.rsplit('@').next().unwrap_or(host);
            format!("{scheme}://{host}/…")
        }
        (None, Some(command)) => {
            let program = command.split_whitespace().next().unwrap_or(command);
            format!("command {program}")
        }
        (None, None) if entry.desktop => "desktop".to_owned(),
        (None, None) => "nothing".to_owned(),
    }
}

/// `notify.log`: one JSON line per delivery, appended.
struct Log {
    path: PathBuf,
}

/// One line of `notify.log`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Delivery {
    pub time: DateTime<Utc>,
    pub sink: String,
    pub event: String,
    /// Why it failed; `None` when it was delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Log {
    fn write(&self, sink: &str, event: NotifyEvent, error: Option<String>) {
        let line = Delivery {
            time: Utc::now(),
            sink: sink.to_owned(),
            event: event.as_str().to_owned(),
            error,
        };
        let Ok(mut text) = serde_json::to_string(&line) else {
            return;
        };
        text.push('\n');
        if std::fs::metadata(&self.path).is_ok_and(|m| m.len() > LOG_BYTES) {
            let _ = std::fs::rename(&self.path, self.path.with_extension("log.1"));
        }
        // One write of a short line with O_APPEND: lines of several processes never mix.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            tracing::warn!(
                "cannot keep a notification's outcome in {}: {e}",
                self.path.display()
            );
        }
    }
}

/// The deliveries kept in `log` (the newest last): what `berth doctor` reports.
pub fn deliveries(log: &Path) -> Vec<Delivery> {
    let Ok(text) = std::fs::read_to_string(log) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_notice_per_request_and_per_event_within_the_debounce() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("got");
        std::fs::create_dir(&out).unwrap();
        // A file each: deliveries run at once.
        let entry = NotifySettings {
            command: Some(format!("cat > \"$(mktemp -p '{}')\"", out.display())),
            ..NotifySettings::default()
        };
        let notifier = Notifier::new(vec![entry], None, dir.path().join("notify.log"));
        let asked = |request: &str| {
            let mut n = Notice::new(NotifyEvent::NeedsInput, "t", "s");
            n.session = Some("s1".into());
            n.request = Some(request.into());
            n
        };
        let ended = |run: &str| {
            let mut n = Notice::new(NotifyEvent::Done, "t", "s");
            n.run = Some(run.into());
            n
        };
        for notice in [
            asked("a"),
            asked("a"),
            asked("b"),
            ended("r1"),
            ended("r1"),
            ended("r2"),
        ] {
            notifier.send(notice);
        }
        let mut watched = asked("c");
        watched.watched = true;
        notifier.send(watched);
        notifier.flush(Duration::from_secs(10)).await;
        let bodies: Vec<serde_json::Value> = std::fs::read_dir(&out)
            .unwrap()
            .map(|f| {
                serde_json::from_str(&std::fs::read_to_string(f.unwrap().path()).unwrap()).unwrap()
            })
            .collect();
        // a, b (a twice is one), r1, r2 (r1 twice is one); c is watched.
        assert_eq!(bodies.len(), 4, "{bodies:?}");
        let mut runs: Vec<&str> = bodies.iter().filter_map(|b| b["run"].as_str()).collect();
        runs.sort();
        assert_eq!(runs, ["r1", "r2"]);
        let log = deliveries(&dir.path().join("notify.log"));
        assert_eq!(log.len(), 4);
        assert!(
            log.iter()
                .all(|d| d.error.is_none() && d.sink == "command cat")
        );
    }

    #[tokio::test]
    async fn a_failing_sink_is_logged_and_flush_gives_up_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let entries = vec![
            NotifySettings {
                command: Some("exit 3".into()),
                ..NotifySettings::default()
            },
            NotifySettings {
                command: Some("sleep 30".into()),
                ..NotifySettings::default()
            },
        ];
        let notifier = Notifier::new(entries, None, dir.path().join("notify.log"));
        let started = Instant::now();
        notifier.send(Notice::new(NotifyEvent::Failed, "t", "s"));
        assert!(started.elapsed() < Duration::from_millis(50), "send waited");
        notifier.flush(Duration::from_secs(3)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        let log = deliveries(&dir.path().join("notify.log"));
        let failed: Vec<_> = log.iter().filter(|d| d.sink == "command exit").collect();
        assert_eq!(failed.len(), 1, "{log:?}");
        assert!(
            failed[0]
                .error
                .as_deref()
                .unwrap()
                .contains("exit status: 3")
        );
    }

    #[test]
    fn a_sinks_label_keeps_its_secrets() {
        let entry = NotifySettings {
            url: Some(berth_core::config::Secret::new(
                "https://user:pw@ntfy.sh/secret-topic?x=1",
            )),
            ..NotifySettings::default()
        };
        assert_eq!(sink_label(&entry), "https://ntfy.sh/…");
        let entry = NotifySettings {
            command: Some("notify-me --loud".into()),
            ..NotifySettings::default()
        };
        assert_eq!(sink_label(&entry), "command notify-me");
    }

    #[test]
    fn a_notice_is_one_short_line_each() {
        let n = Notice::new(NotifyEvent::Done, "a\ntitle", "x".repeat(900));
        assert_eq!(n.title, "a title");
        assert_eq!(n.summary.chars().count(), 501);
        let body = body(&n);
        assert_eq!(body["version"], 1);
        assert_eq!(body["event"], "done");
        assert!(body.get("request").is_none() && body.get("watched").is_none());
    }
}
