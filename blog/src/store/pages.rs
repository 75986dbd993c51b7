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
