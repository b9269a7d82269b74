//! An answer cut off with the process that streamed it (a SIGKILL, a crash, a server killed
//! mid-turn): the text streamed so far is kept aside in the session's own storage
//! (`.berth/answer.partial`) while it streams, and whoever opens the session next (a turn,
//! an ACP `session/load`) writes it into the transcript, marked interrupted, as a turn
//! that was cancelled would have. The text a person saw is not lost with the process.
//!
//! The file starts with a line `berth-partial N`: the answer follows the transcript's first
//! N messages. It is written into the transcript only while the transcript still has N
//! messages; otherwise the answer got there whole before the process died, and the file is
//! only removed.

use berth_core::{Found, Message, Role, Session, StoragePath, TurnHold};

use crate::{Ops, Result};

/// Marks a transcript message whose turn was cut off after the person saw part of it.
pub const INTERRUPTED: &str = "\n\n[interrupted]";

fn partial_path() -> StoragePath {
    StoragePath::new(".berth/answer.partial").expect("a valid storage path")
}

use crate::models::session_scope as scope;

impl Ops {
    /// Keeps `text` aside: the answer streaming after the transcript's first `written`
    /// messages. Written in place, without waiting for the disk, as what follows is appended
    /// ([`Ops::extend_partial_answer`]): it is kept for a process killed mid-answer, and a
    /// new file with its syncs at every turn was a tenth of a busy server's work while
    /// prompts came in (`serve_load`). A lost machine may leave it empty (only removed, as
    /// one without its first line is) or cut short (what is there is recovered).
    pub async fn keep_partial_answer(
        &self,
        session: &Session,
        written: usize,
        text: &str,
    ) -> Result<()> {
        let bytes = format!("berth-partial {written}\n{text}").into_bytes();
        Ok(self
            .manager
            .write_storage_unsynced(&scope(session), &partial_path(), bytes)
            .await?)
    }

    /// Adds `more` to the answer kept aside by [`Ops::keep_partial_answer`]: appended, without
    /// waiting for the disk (the text is kept for a process killed mid-answer, which loses
    /// nothing the kernel holds; a lost machine may lose the last of it).
    pub async fn extend_partial_answer(&self, session: &Session, more: &str) -> Result<()> {
        Ok(self
            .manager
            .append_storage_unsynced(&scope(session), &partial_path(), more.as_bytes().to_vec())
            .await?)
    }

    /// Forgets the answer kept aside (it is in the transcript now, or never will be).
    pub async fn forget_partial_answer(&self, session: &Session) -> Result<()> {
        match self
            .manager
            .remove_storage(&scope(session), &partial_path(), false)
            .await
        {
            Err(e) if e.is_not_found() => Ok(()),
            other => Ok(other?),
        }
    }

    /// Writes an answer a dead process kept aside into the transcript, marked interrupted;
    /// whether there was one. Only under the session's turn hold: while a turn runs, the
    /// answer kept aside is its live one, which its own turn writes.
    pub async fn recover_partial_answer(
        &self,
        session: &Session,
        _held: &TurnHold,
    ) -> Result<bool> {
        let Some(bytes) = self
            .manager
            .read_storage(&scope(session), &partial_path())
            .await
            .found()?
        else {
            return Ok(false);
        };
        let text = String::from_utf8_lossy(&bytes);
        let kept = text.split_once('\n').and_then(|(head, answer)| {
            let written: usize = head.strip_prefix("berth-partial ")?.parse().ok()?;
            Some((written, answer.to_owned()))
        });
        let mut recovered = false;
        if let Some((written, answer)) = kept
            && !answer.is_empty()
            && self.transcript(session).await?.messages.len() == written
        {
            let message = Message::new(Role::Assistant, format!("{answer}{INTERRUPTED}"));
            self.append_message(session, &message).await?;
            recovered = true;
        }
        self.forget_partial_answer(session).await?;
        Ok(recovered)
    }
}
