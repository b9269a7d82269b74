//! Listings a page at a time, in id order, loading only the records of the page: its cost does
//! not grow with the number of records beyond reading their ids.

use crate::error::{Error, Result};

/// One page of a listing in id order, and the cursor to continue after it (`None`: the end).
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// Walks the ids of one page: the sorted `ids` after the cursor, until the caller has `limit`
/// records. The caller loads each id it is given (skipping what it does not want, or what was
/// deleted since the ids were read) and hands its records to [`Pager::finish`]. The cursor is
/// the last id looked at, so a filtered page goes on where it stopped.
pub(crate) struct Pager<'a, Id> {
    rest: &'a [Id],
    at: usize,
    limit: usize,
}

impl<'a, Id: AsRef<str> + std::fmt::Display> Pager<'a, Id> {
    pub(crate) fn new(ids: &'a [Id], after: Option<&str>, limit: usize) -> Result<Self> {
        let rest = match after {
            None => ids,
            Some(after) => {
                // Cursors are ids; anything else did not come from this layer.
                berth_core::WorkspaceId::new(after).map_err(|_| {
                    Error::invalid(format!(
                        "bad cursor {:?}: pass the next_cursor of the previous page, or none to start",
                        after.chars().take(80).collect::<String>()
                    ))
                })?;
                &ids[ids.partition_point(|id| id.as_ref() <= after)..]
            }
        };
        Ok(Pager {
            rest,
            at: 0,
            limit: limit.max(1),
        })
    }

    /// The next id to look at, while the page (`found` records so far) is not full.
    pub(crate) fn next(&mut self, found: usize) -> Option<&'a Id> {
        if found >= self.limit {
            return None;
        }
        let id = self.rest.get(self.at)?;
        self.at += 1;
        Some(id)
    }

    /// The page of `items`, with a cursor when ids are left.
    pub(crate) fn finish<T>(self, items: Vec<T>) -> Page<T> {
        let next = (self.at < self.rest.len())
            .then(|| self.at.checked_sub(1).map(|i| self.rest[i].to_string()))
            .flatten();
        Page { items, next }
    }
}
