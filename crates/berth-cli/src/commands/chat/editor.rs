//! The line editor (rustyline) on a thread of its own: `readline` blocks, and the chat's async
//! loop must keep running turns and watching for Ctrl-C meanwhile. The loop asks for a line,
//! awaits the answer, and never writes to the terminal while a line is being read.
//!
//! Ctrl-C on a line with text clears it; on an empty line it is [`Read::Interrupted`], which
//! the chat counts toward quitting. Prompts (not permission answers) go into the history file,
//! appended as they are typed so that two chats at once both keep theirs.

use std::path::PathBuf;
use std::sync::mpsc;

use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{
    Cmd, ConditionalEventHandler, Editor, Event, EventContext, EventHandler, KeyEvent, Movement,
    RepeatCount,
};
use tokio::sync::oneshot;

/// Lines kept in the history file.
const HISTORY_LINES: usize = 1000;

/// What reading a line gave.
#[derive(Debug)]
pub enum Read {
    Line(String),
    /// Ctrl-C at an empty line.
    Interrupted,
    /// Ctrl-D at an empty line, or the terminal went away.
    Eof,
}

struct Request {
    prompt: String,
    /// Whether the line goes into the history.
    history: bool,
    reply: oneshot::Sender<std::io::Result<Read>>,
}

/// The editor's thread, reached through a channel. Dropping this ends the thread once it is
/// not reading.
pub struct LineEditor {
    requests: mpsc::Sender<Request>,
}

impl LineEditor {
    /// Starts the editor, loading the history file when there is one.
    pub fn start(history_file: PathBuf) -> anyhow::Result<LineEditor> {
        let config = rustyline::Config::builder()
            .auto_add_history(false)
            .history_ignore_dups(true)?
            .history_ignore_space(true)
            .max_history_size(HISTORY_LINES)?
            .build();
        let mut editor: Editor<(), DefaultHistory> = Editor::with_config(config)?;
        editor.bind_sequence(
            Event::from(KeyEvent::ctrl('C')),
            EventHandler::Conditional(Box::new(CtrlC)),
        );
        match editor.load_history(&history_file) {
            Ok(()) => {}
            Err(ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            // An unreadable history is no reason not to chat.
            Err(e) => eprintln!(
                "berth: the line history {} was not read: {e}",
                history_file.display()
            ),
        }
        let (requests, incoming) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("line-editor".into())
            .spawn(move || serve(editor, history_file, incoming))?;
        Ok(LineEditor { requests })
    }

    /// Reads one line after `prompt`; `history`: keep it in the history file.
    pub async fn read(&self, prompt: &str, history: bool) -> std::io::Result<Read> {
        let (reply, answer) = oneshot::channel();
        let request = Request {
            prompt: prompt.to_owned(),
            history,
            reply,
        };
        if self.requests.send(request).is_err() {
            return Ok(Read::Eof);
        }
        answer.await.unwrap_or(Ok(Read::Eof))
    }
}

fn serve(
    mut editor: Editor<(), DefaultHistory>,
    history_file: PathBuf,
    requests: mpsc::Receiver<Request>,
) {
    let mut warned = false;
    for request in requests {
        let read = match editor.readline(&request.prompt) {
            Ok(line) => {
                if request.history && !line.trim().is_empty() {
                    let added = editor.add_history_entry(line.as_str()).unwrap_or(false);
                    if added
                        && let Err(e) = editor.append_history(&history_file)
                        && !std::mem::replace(&mut warned, true)
                    {
                        eprintln!(
                            "berth: the line history {} cannot be written: {e}",
                            history_file.display()
                        );
                    }
                }
                Ok(Read::Line(line))
            }
            Err(ReadlineError::Interrupted) => Ok(Read::Interrupted),
            Err(ReadlineError::Eof) => Ok(Read::Eof),
            Err(ReadlineError::Io(e)) => Err(e),
            Err(e) => Err(std::io::Error::other(e)),
        };
        let _ = request.reply.send(read);
    }
}

/// Ctrl-C: clears a line with text on it; at an empty line, interrupts.
struct CtrlC;

impl ConditionalEventHandler for CtrlC {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        if ctx.line().is_empty() {
            Some(Cmd::Interrupt)
        } else {
            Some(Cmd::Kill(Movement::WholeBuffer))
        }
    }
}
