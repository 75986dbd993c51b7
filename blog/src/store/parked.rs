//! Stream records the fan-out gave up on, kept in the table until an operator
//! replays them (`blog-admin replay`): the payload Lambda's on-failure
//! destination does not keep (it receives only the batch's shard and sequence
//! numbers, and the stream forgets records after 24 hours).
//!
//! One item per record under `PARKED`, keyed by sequence number: parking the
//! same record twice writes the same item. The partition is empty while the
//! fan-out keeps up; it carries no GSI1 keys and the fan-out ignores its
//! stream records.

use crate::store::items::parked::ParkedRecordItem;

#[cfg(feature = "admin")]
use super::Admin;
use super::FanOut;
#[cfg(feature = "admin")]
use super::table::Deleted;
use super::{
    StoreError,
    table::{Landed, Write},
};
#[cfg(feature = "admin")]
use {
    super::{Item, from_items, table::Query},
    crate::keys::{Entity, PARKED_PK, PARKED_PREFIX},
};

impl FanOut<'_> {
    /// Keeps `item` (the fan-out's park-failures; an unconditional put:
    /// parking a record again rewrites the same item).
    pub async fn park(&self, item: &ParkedRecordItem) -> Result<(), StoreError> {
        // Parking it again rewrites the same item: nothing to tell apart.
        let put = Write::put(item, Landed::Untold)?;
        self.db
            .write("park a stream record", &put)
            .await
            .map(|_| ())
    }
}

#[cfg(feature = "admin")]
impl Admin<'_> {
    /// One page of parked records (admin: `blog-admin replay`), oldest
    /// sequence number first, and where the next page starts.
    pub async fn parked_page(
        &self,
        start: Option<Item>,
    ) -> Result<(Vec<ParkedRecordItem>, Option<Item>), StoreError> {
        let query = Query::partition(PARKED_PK.to_owned())
            .begins_with(PARKED_PREFIX)
            .consistent();
        let page = self
            .db
            .query_page("read parked records", &query, start, Some(100))
            .await?;
        Ok((from_items(page.items)?, page.next))
    }

    /// Forgets a parked record once it has been applied (admin).
    pub async fn unpark(&self, item: &ParkedRecordItem) -> Result<(), StoreError> {
        let delete = Write::delete(item.key().item(), Deleted::IfGone);
        self.db
            .write("unpark a stream record", &delete)
            .await
            .map(|_| ())
    }
}
