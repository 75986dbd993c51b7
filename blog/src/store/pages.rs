//! Lists: a page of `limit` items from a Query, resumable by cursor.
//!
//! DynamoDB stops a Query page at 1 MB whatever `Limit` says, so a page of 100
//! large comments can take several calls: every list follows
//! `LastEvaluatedKey` until it holds `limit` items or the list ends, and reads
//! one item more than the page so that `nextCursor` is `null` exactly on the
//! last page.

use serde::de::DeserializeOwned;

use super::Requests;
use super::{Item, StoreError, cursor, from_items, table::Query};
use crate::model::Page;

impl Requests<'_> {
    /// One page of the list `list` (the cursor's namespace): `limit` items of
    /// type `T` after `start`, and a cursor naming the last one when more follow.
    pub(crate) async fn list_page<T: DeserializeOwned>(
        &self,
        list: &str,
        query: &Query,
        start: Option<Item>,
        limit: usize,
        id_of: impl Fn(&T) -> String,
    ) -> Result<Page<T>, StoreError> {
        let items = self
            .db
            .query_up_to("list", query, start, limit.saturating_add(1))
            .await?;
        let mut items: Vec<T> = from_items(items)?;
        let more = items.len() > limit;
        items.truncate(limit);
        let next_cursor = match items.last() {
            Some(last) if more => Some(cursor::encode(list, &id_of(last))),
            _ => None,
        };
        Ok(Page { items, next_cursor })
    }
}

/// Where a page of `list` starts: after the item the cursor names, if any.
/// The id inside the cursor is validated like any other client id.
pub(crate) fn resume_after<I>(
    list: &str,
    cursor: Option<&str>,
    parse: fn(&str) -> Result<I, crate::ids::IdError>,
) -> Result<Option<I>, StoreError> {
    cursor
        .map(|c| {
            let raw = cursor::decode(c, list)?;
            parse(&raw).map_err(|_| StoreError::BadCursor(cursor::CursorError::Malformed))
        })
        .transpose()
}

/// How many of a first-page copy's `entries` a first page of `limit` reads
/// ([`super::first_pages`]): one more than the page, so that an entry taken
/// back since leaves the page full, and no more than one BatchGetItem
/// takes.
pub(crate) fn copy_read(entries: usize, limit: usize) -> usize {
    entries
        .min(limit.saturating_add(1))
        .min(super::table::BATCH_GET)
}

/// A first page from a copy: of the entries `read` (ids, in the list's
/// order), `present` are still there and shown (in the same order);
/// `beyond`: the copy, or the list it copies, has more after `read`. The
/// page's items, and the id its cursor goes on after: the last shown when
/// the page is full, else the last read (shown or not), so that every entry
/// after it is listed once by the merge; none at the list's end.
pub(crate) fn from_copy<T, I: Copy>(
    read: &[I],
    mut present: Vec<T>,
    limit: usize,
    beyond: bool,
    id_of: impl Fn(&T) -> I,
) -> (Vec<T>, Option<I>) {
    if present.len() > limit {
        present.truncate(limit);
        let last = present.last().map(&id_of);
        return (present, last);
    }
    let after = if beyond { read.last().copied() } else { None };
    (present, after)
}

#[cfg(test)]
mod tests {
    use super::{copy_read, from_copy};

    #[test]
    fn a_page_from_a_copy_goes_on_after_its_last_shown_or_read_entry() {
        // 3 of a 10-entry copy: the fourth read, all there: full, after 3.
        assert_eq!(copy_read(10, 3), 4);
        let read = [1, 2, 3, 4];
        assert_eq!(
            from_copy(&read, vec![1, 2, 3, 4], 3, true, |x| *x),
            (vec![1, 2, 3], Some(3))
        );
        // One taken back: still full.
        assert_eq!(
            from_copy(&read, vec![1, 3, 4], 3, true, |x| *x),
            (vec![1, 3, 4], Some(4))
        );
        // Two taken back: short, and on after the last read.
        assert_eq!(
            from_copy(&read, vec![1, 4], 3, true, |x| *x),
            (vec![1, 4], Some(4))
        );
        // The whole list, nothing beyond: no cursor.
        assert_eq!(
            from_copy(&[1, 2], vec![1, 2], 3, false, |x| *x),
            (vec![1, 2], None)
        );
        // A page of 100 reads 100 entries, one BatchGetItem.
        assert_eq!(copy_read(100, 100), 100);
        assert_eq!(copy_read(0, 20), 0);
    }
}
