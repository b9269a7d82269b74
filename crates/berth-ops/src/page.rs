//! Listings a page at a time, in id order, loading only the records of the page: the stores'
//! `page` (a database's primary key; the filesystem's folder names, then the page's records),
//! so its cost does not grow with the number of records beyond reading their ids.
//!
//! Every front end that pages takes its rules from here: the page size a caller may ask for
//! ([`page_limit`]), what a cursor is (the last id a page looked at; anything else is refused),
//! the page of workspaces (`Ops::workspace_page`, archived ones left out), and the listing of
//! everything, workspaces then sessions ([`Ops::listing_page`]), whose cursors say which of
//! the two they continue.

use berth_core::{Session, Workspace, WorkspaceId};

use crate::Ops;
use crate::error::{Error, Result};

/// One page of a listing in id order, and the cursor to continue after it (`None`: the end).
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// Items a page holds unless the caller asks for another number.
pub const PAGE_DEFAULT: usize = 100;
/// The most items a page holds, whatever the caller asks: a page is one reply, and a model's
/// context is finite.
pub const PAGE_MAX: usize = 1000;

/// The size of a page asked for as `limit`: [`PAGE_DEFAULT`] without one, at most
/// [`PAGE_MAX`] (a larger number gets that many, and a cursor for the rest). 0 is refused.
pub fn page_limit(limit: Option<usize>) -> Result<usize> {
    match limit {
        None => Ok(PAGE_DEFAULT),
        Some(0) => Err(Error::invalid(format!(
            "limit must be 1 to {PAGE_MAX} (default {PAGE_DEFAULT})"
        ))),
        Some(n) => Ok(n.min(PAGE_MAX)),
    }
}

/// One item of the listing of everything.
#[derive(Debug, Clone)]
pub enum Listed {
    Workspace(Workspace),
    Session(Session),
}

/// Where the listing of everything goes on: `w/<id>` after that workspace, `s/` at the first
/// session, `s/<id>` after that session.
enum ListingCursor<'a> {
    Workspaces(Option<&'a str>),
    Sessions(Option<&'a str>),
}

impl<'a> ListingCursor<'a> {
    fn parse(cursor: Option<&'a str>) -> Result<Self> {
        let Some(c) = cursor else {
            return Ok(ListingCursor::Workspaces(None));
        };
        match (c.strip_prefix("w/"), c.strip_prefix("s/")) {
            (Some(id), _) => Ok(ListingCursor::Workspaces(Some(id))),
            (_, Some("")) => Ok(ListingCursor::Sessions(None)),
            (_, Some(id)) => Ok(ListingCursor::Sessions(Some(id))),
            _ => Err(bad_cursor(c)),
        }
    }
}

/// The id a cursor names: a cursor is the last id of a page, and anything else did not come
/// from this layer.
pub(crate) fn cursor_id<T>(cursor: &str, parse: impl FnOnce(&str) -> Option<T>) -> Result<T> {
    parse(cursor).ok_or_else(|| bad_cursor(cursor))
}

/// The page of `items`, loaded as one more than `limit`: the extra one only says that a next
/// page exists, which goes on after the last item kept.
pub(crate) fn page_of<T>(mut items: Vec<T>, limit: usize, id: impl Fn(&T) -> String) -> Page<T> {
    let next = if items.len() > limit {
        items.truncate(limit);
        items.last().map(id)
    } else {
        None
    };
    Page { items, next }
}

fn bad_cursor(cursor: &str) -> Error {
    Error::invalid(format!(
        "bad cursor {:?}: pass the next_cursor of the previous page, or none to start",
        cursor.chars().take(80).collect::<String>()
    ))
}

impl Ops {
    /// A page of workspaces after the cursor `after`, in id order: `limit` of them (see
    /// [`page_limit`]) whose id, name or description holds `query` (ignoring case), archived
    /// ones left out (each can still be shown by its id). Without a query a page is the
    /// store's page, which loads only its own records, so it costs the same however many
    /// workspaces there are (bar reading their ids from the filesystem, and the store's pages
    /// read past archived ones). With one, the records come from the store's listing (one
    /// file, or one query) instead of one read each, since a rare match may mean looking at
    /// all of them.
    pub async fn workspace_page(
        &self,
        after: Option<&str>,
        limit: Option<usize>,
        query: Option<&str>,
    ) -> Result<Page<Workspace>> {
        let limit = page_limit(limit)?;
        let query = query.map(str::to_lowercase).filter(|q| !q.is_empty());
        let Some(query) = query else {
            let mut after = after
                .map(|c| cursor_id(c, |c| WorkspaceId::new(c).ok()))
                .transpose()?;
            let mut items = Vec::new();
            loop {
                let read = self
                    .manager
                    .workspaces()
                    .page(after.as_ref(), limit + 1)
                    .await?;
                let last = read.len() <= limit;
                after = read.last().map(|ws| ws.id.clone());
                items.extend(read.into_iter().filter(|ws| !ws.is_archived()));
                if last || items.len() > limit {
                    break;
                }
            }
            items.truncate(limit + 1);
            return Ok(page_of(items, limit, |ws| ws.id.to_string()));
        };
        let all = self.manager.list().await?;
        let ids: Vec<&str> = all.iter().map(|ws| ws.id.as_str()).collect();
        let mut pager = Pager::new(&ids, after, limit)?;
        let mut items = Vec::new();
        while let Some(i) = pager.next_index(items.len()) {
            let ws = &all[i];
            let matches = !ws.is_archived()
                && (ws.id.as_str().to_lowercase().contains(&query)
                    || ws
                        .name
                        .as_ref()
                        .is_some_and(|n| n.as_str().to_lowercase().contains(&query))
                    || ws.description.to_lowercase().contains(&query));
            if matches {
                items.push(ws.clone());
            }
        }
        Ok(pager.finish(items))
    }

    /// Up to `limit` items of the listing of everything: the workspaces in id order, then the
    /// sessions in id order, each page loading only its own records. The cursor continues
    /// where the previous page stopped (`next`), and is refused if it is not one.
    pub async fn listing_page(&self, cursor: Option<&str>, limit: usize) -> Result<Page<Listed>> {
        let limit = limit.max(1);
        let mut items = Vec::new();
        let after_workspaces = match ListingCursor::parse(cursor)? {
            ListingCursor::Workspaces(after) => {
                let page = self.workspace_page(after, Some(limit), None).await?;
                items.extend(page.items.into_iter().map(Listed::Workspace));
                match page.next {
                    Some(id) => {
                        return Ok(Page {
                            items,
                            next: Some(format!("w/{id}")),
                        });
                    }
                    None => None,
                }
            }
            ListingCursor::Sessions(after) => after,
        };
        if items.len() >= limit {
            // The workspaces filled the page exactly; the sessions start the next one.
            return Ok(Page {
                items,
                next: Some("s/".to_owned()),
            });
        }
        let page = self
            .session_page(after_workspaces, Some(limit - items.len()))
            .await?;
        items.extend(page.items.into_iter().map(Listed::Session));
        Ok(Page {
            items,
            next: page.next.map(|id| format!("s/{id}")),
        })
    }
}

/// Walks the ids of one page: the sorted `ids` after the cursor, until the caller has `limit`
/// records. The caller loads each id it is given (skipping what it does not want, or what was
/// deleted since the ids were read) and hands its records to [`Pager::finish`]. The cursor is
/// the last id looked at, so a filtered page goes on where it stopped.
pub(crate) struct Pager<'a, Id> {
    rest: &'a [Id],
    /// Where `rest` starts in the ids the pager was given.
    start: usize,
    at: usize,
    limit: usize,
}

impl<'a, Id: AsRef<str> + std::fmt::Display> Pager<'a, Id> {
    pub(crate) fn new(ids: &'a [Id], after: Option<&str>, limit: usize) -> Result<Self> {
        let rest = match after {
            None => ids,
            Some(after) => {
                // Cursors are ids; anything else did not come from this layer.
                berth_core::WorkspaceId::new(after).map_err(|_| bad_cursor(after))?;
                &ids[ids.partition_point(|id| id.as_ref() <= after)..]
            }
        };
        Ok(Pager {
            rest,
            start: ids.len() - rest.len(),
            at: 0,
            limit: limit.max(1),
        })
    }

    /// The index (in the ids the pager was given, where a caller that holds the records
    /// finds the one it names) of the next id to look at, while the page (`found` records so
    /// far) is not full.
    pub(crate) fn next_index(&mut self, found: usize) -> Option<usize> {
        if found >= self.limit || self.at >= self.rest.len() {
            return None;
        }
        self.at += 1;
        Some(self.start + self.at - 1)
    }

    /// The page of `items`, with a cursor when ids are left.
    pub(crate) fn finish<T>(self, items: Vec<T>) -> Page<T> {
        let next = (self.at < self.rest.len())
            .then(|| self.at.checked_sub(1).map(|i| self.rest[i].to_string()))
            .flatten();
        Page { items, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert_eq!(page_limit(None).unwrap(), PAGE_DEFAULT);
        assert_eq!(page_limit(Some(7)).unwrap(), 7);
        assert_eq!(page_limit(Some(1_000_000)).unwrap(), PAGE_MAX);
        let e = page_limit(Some(0)).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Invalid);
        assert!(e.to_string().contains("limit"), "{e}");
    }

    #[test]
    fn a_page_loaded_one_longer_knows_whether_more_follow() {
        let page = page_of(vec![1, 2, 3], 2, |n| n.to_string());
        assert_eq!((page.items, page.next.as_deref()), (vec![1, 2], Some("2")));
        let page = page_of(vec![1, 2], 2, |n| n.to_string());
        assert_eq!((page.items, page.next), (vec![1, 2], None));
        assert!(cursor_id("../x", |c| berth_core::WorkspaceId::new(c).ok()).is_err());
    }

    #[test]
    fn cursors() {
        assert!(matches!(
            ListingCursor::parse(None).unwrap(),
            ListingCursor::Workspaces(None)
        ));
        assert!(matches!(
            ListingCursor::parse(Some("w/abc")).unwrap(),
            ListingCursor::Workspaces(Some("abc"))
        ));
        assert!(matches!(
            ListingCursor::parse(Some("s/")).unwrap(),
            ListingCursor::Sessions(None)
        ));
        assert!(matches!(
            ListingCursor::parse(Some("s/x1")).unwrap(),
            ListingCursor::Sessions(Some("x1"))
        ));
        for bad in ["", "abc", "x/1", "w"] {
            let e = ListingCursor::parse(Some(bad)).err().expect(bad);
            assert_eq!(e.kind(), crate::ErrorKind::Invalid);
            assert!(e.to_string().contains("cursor"));
        }
    }

    #[test]
    fn pager_goes_on_after_the_cursor() {
        let ids = ["a1", "b2", "c3", "d4"];
        let mut p = Pager::new(&ids, Some("b2"), 1).unwrap();
        assert_eq!(p.next_index(0), Some(2));
        assert_eq!(p.next_index(1), None);
        assert_eq!(p.finish(vec![()]).next.as_deref(), Some("c3"));
        // A filter that skips records looks further, up to the page's size in matches.
        let mut p = Pager::new(&ids, Some("a1"), 2).unwrap();
        assert_eq!(p.next_index(0), Some(1));
        assert_eq!(p.next_index(0), Some(2));
        let mut p = Pager::new(&ids, Some("c3"), 5).unwrap();
        assert_eq!(p.next_index(0), Some(3));
        assert_eq!(p.next_index(1), None);
        assert_eq!(p.finish(vec![()]).next, None);
        assert!(Pager::new(&ids, Some("../x"), 5).is_err());
    }
}
