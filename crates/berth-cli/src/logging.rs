//! The one `tracing` subscriber: what the libraries log (a notification that failed, a run a
//! worker took over, an index rebuilt) reaches standard error here and only here. A person's
//! command says it as `berth: …`; a server (`berth serve`, a run's supervisor, whose output
//! is a log file) writes structured lines: time, level, where, message and fields.
//!
//! How much: berth's warnings (a server: information too) and a library's errors; `-v` adds
//! berth's debug lines and a library's information, `-vv` their trace and debug; `RUST_LOG`
//! (`info`, `berth_run=debug,warn`, …) overrides both. A library's line names the library and
//! carries its fields.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// berth's own crates, which `-v` makes more talkative (a dependency's debug lines stay
/// off): a target matches by its start, so this is every `berth_*` crate, and the binary.
const BERTH: &str = "berth";

/// Installs the subscriber; `server` for a long-running process whose output is a log.
pub fn init(verbose: u8, server: bool) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => match spec.parse::<Targets>() {
            Ok(targets) => targets,
            Err(e) => {
                eprintln!("berth: RUST_LOG={spec:?} is not a filter ({e}); logging warnings");
                Targets::new().with_default(LevelFilter::WARN)
            }
        },
        _ => {
            // A library's own warnings are its internals (the ACP SDK's "Handler errored"
            // for a notification berth declined): at debug, with `-v`, not a person's concern.
            let (berth, others) = match (verbose, server) {
                (0, false) => (LevelFilter::WARN, LevelFilter::ERROR),
                (0, true) => (LevelFilter::INFO, LevelFilter::ERROR),
                (1, _) => (LevelFilter::DEBUG, LevelFilter::INFO),
                _ => (LevelFilter::TRACE, LevelFilter::DEBUG),
            };
            Targets::new()
                .with_default(others)
                .with_target(BERTH, berth)
        }
    };
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    // A second subscriber (a test that calls this twice) is refused; the first stays.
    let _ = match server {
        true => tracing_subscriber::registry()
            .with(lines.with_ansi(false).with_filter(filter))
            .try_init(),
        false => tracing_subscriber::registry()
            .with(lines.event_format(Plain).with_filter(filter))
            .try_init(),
    };
}

use tracing_subscriber::Layer;

/// `berth: message` (an error: `berth: error: message`; a debug line names where it is
/// from), as the CLI's own messages read; the fields are for the server's lines.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _cx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut message = Message(String::new(), String::new());
        event.record(&mut message);
        let meta = event.metadata();
        // A library's line names the library and carries its fields: it is not berth's own
        // words, and says nothing alone ("Handler errored").
        if !meta.target().starts_with(BERTH) {
            return writeln!(
                writer,
                "berth: {} ({}): {}{}",
                meta.target().split("::").next().unwrap_or_default(),
                meta.level().as_str().to_lowercase(),
                message.0,
                message.1
            );
        }
        match *meta.level() {
            Level::ERROR => writeln!(writer, "berth: error: {}", message.0),
            Level::WARN | Level::INFO => writeln!(writer, "berth: {}", message.0),
            level => writeln!(
                writer,
                "berth: {}: {}: {}",
                level.as_str().to_lowercase(),
                meta.target(),
                message.0
            ),
        }
    }
}

/// An event's message, and its other fields as ` name=value` (shown for a library's lines).
struct Message(String, String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.0 = value.to_owned(),
            name => self.1.push_str(&format!(" {name}={value:?}")),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.0 = format!("{value:?}"),
            name => self.1.push_str(&format!(" {name}={value:?}")),
        }
    }
}
