//! Stream records the fan-out gave up on, kept in the table until an operator
//! replays them (`blog-admin replay`): the payload Lambda's on-failure
//! destination does not keep (it receives only the batch's shard and sequence
//! numbers, and the stream forgets records after 24 hours).
//!
//! One item per record, keyed by sequence number, in one of
//! [`PARKED_PARTITIONS`](crate::keys::PARKED_PARTITIONS) partitions
//! (`PARKED#<k>`) that its shard and sequence number hash to: parking the
//! same record twice writes the same item, and a batch of records parked at
//! once spreads over them all (one partition took 1,486 WCU a second when a
//! hot post's fan-out fell behind). The earlier version parked every record
//! under `PARKED`: the replay reads that partition too. The partitions are
//! empty while the fan-out keeps up; they carry no GSI1 keys and the
//! fan-out ignores their stream records (by their type).

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
use crate::keys::Entity;
#[cfg(feature = "admin")]
use {
    super::{Item, from_items, table::Query},
    crate::keys::{PARKED_PREFIX, ParkedPartition},
};

/// How many parked records one page (one Query) reads at most.
#[cfg(feature = "admin")]
const PARKED_PAGE: i32 = 100;

/// How many of parking's BatchWriteItem calls (25 records each) are in
/// flight at once.
const PARALLEL_PARKS: usize = 4;

impl FanOut<'_> {
    /// Keeps `item` (an unconditional put: parking a record again rewrites
    /// the same item).
    pub async fn park(&self, item: &ParkedRecordItem) -> Result<(), StoreError> {
        // Parking it again rewrites the same item: nothing to tell apart.
        let put = Write::put(item, Landed::Untold)?;
        self.db
            .write("park a stream record", &put)
            .await
            .map(|_| ())
    }

    /// Keeps `items` (the fan-out's park-failures): BatchWriteItem calls of
    /// 25, a few at a time, each spread over the partitions as the records
    /// are. Unconditional puts, so parking them again rewrites the same
    /// items; a record named twice is put once (one BatchWriteItem may not
    /// name an item twice).
    pub async fn park_all(&self, items: &[ParkedRecordItem]) -> Result<(), StoreError> {
        let mut keys = std::collections::HashSet::new();
        let items = items
            .iter()
            .filter(|item| keys.insert(item.key()))
            .map(Entity::to_item)
            .collect::<Result<Vec<_>, _>>()?;
        self.db
            .put_all("park stream records", items, PARALLEL_PARKS)
            .await
    }
}

/// Where the next page of parked records starts: a partition, and where in
/// it (`None`: its beginning).
#[cfg(feature = "admin")]
#[derive(Debug, Clone, PartialEq)]
pub struct ParkedCursor {
    pub partition: ParkedPartition,
    pub start: Option<Item>,
}

#[cfg(feature = "admin")]
impl Default for ParkedCursor {
    /// The first partition's beginning.
    fn default() -> Self {
        Self {
            partition: ParkedPartition::Legacy,
            start: None,
        }
    }
}

#[cfg(feature = "admin")]
impl Admin<'_> {
    /// One page of parked records (admin: `blog-admin replay`): one Query
    /// of up to 100 records of one partition, oldest sequence number first,
    /// and where the next page starts (the same partition's next page, else
    /// the next partition's first: the legacy `PARKED`, then `PARKED#00` to
    /// `PARKED#15`); `None` after the last partition's last page. A page
    /// may be empty (an empty partition) with more to come.
    pub async fn parked_page(
        &self,
        at: Option<ParkedCursor>,
    ) -> Result<(Vec<ParkedRecordItem>, Option<ParkedCursor>), StoreError> {
        let ParkedCursor { partition, start } = at.unwrap_or_default();
        let (items, start) = self.parked_page_of(partition, start).await?;
        let next = match start {
            Some(start) => Some(ParkedCursor {
                partition,
                start: Some(start),
            }),
            None => partition.next().map(|partition| ParkedCursor {
                partition,
                start: None,
            }),
        };
        Ok((items, next))
    }

    /// One page of the parked records of `partition` (one Query, up to 100,
    /// in key order: sequence number, then shard) from `start`, and where
    /// its next page starts (`None`: the partition's end).
    pub async fn parked_page_of(
        &self,
        partition: ParkedPartition,
        start: Option<Item>,
    ) -> Result<(Vec<ParkedRecordItem>, Option<Item>), StoreError> {
        let query = Query::partition(partition.pk())
            .begins_with(PARKED_PREFIX)
            .consistent();
        let page = self
            .db
            .query_page("read parked records", &query, start, Some(PARKED_PAGE))
            .await?;
        let mut items: Vec<ParkedRecordItem> = from_items(page.items)?;
        for item in &mut items {
            item.legacy = partition == ParkedPartition::Legacy;
        }
        Ok((items, page.next))
    }

    /// Forgets a parked record once it has been applied (admin), in the
    /// partition it was read from.
    pub async fn unpark(&self, item: &ParkedRecordItem) -> Result<(), StoreError> {
        let delete = Write::delete(item.key().item(), Deleted::IfGone);
        self.db
            .write("unpark a stream record", &delete)
            .await
            .map(|_| ())
    }
}
