//! Stream records the fan-out gave up on, kept in the table until an operator
//! replays them (`blog-admin replay`): the payload Lambda's on-failure
//! destination does not keep (it receives only the batch's shard and sequence
//! numbers, and the stream forgets records after 24 hours).
//!
//! One item per record under `PARKED`, keyed by sequence number: parking the
//! same record twice writes the same item. The partition is empty while the
//! fan-out keeps up; it carries no GSI1 keys and the fan-out ignores its
//! stream records.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde::{Deserialize, Serialize};

#[cfg(feature = "admin")]
use super::Admin;
use super::FanOut;
#[cfg(feature = "admin")]
use super::table::Deleted;
use super::{
    ItemType, StoreError,
    table::{Landed, Write},
};
use crate::keys::{self, Entity, Key, PARKED_PK};
#[cfg(feature = "admin")]
use {
    super::{Item, from_items, table::Query},
    crate::keys::PARKED_PREFIX,
};

/// A record too large for one item (400 KB) cannot be parked; none of the
/// records the fan-out applies comes near (posts without their content,
/// comments, likes, profiles).
const MAX_RECORD_BYTES: usize = 350 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkedRecordItem {
    pub shard_id: String,
    pub sequence_number: String,
    pub event_name: String,
    /// The record as Lambda delivers it to the fan-out (JSON).
    pub record: String,
    /// RFC 3339.
    pub parked_at: String,
}

impl ParkedRecordItem {
    pub fn new(
        shard_id: &str,
        record: &EventRecord,
        parked_at: String,
    ) -> Result<Self, StoreError> {
        let sequence_number = record.change.sequence_number.clone().ok_or_else(|| {
            StoreError::Internal("a stream record without a sequence number".into())
        })?;
        let json = serde_json::to_string(record)
            .map_err(|e| StoreError::Internal(format!("cannot encode a stream record: {e}")))?;
        if json.len() > MAX_RECORD_BYTES {
            return Err(StoreError::Internal(format!(
                "stream record {sequence_number} is {} bytes, too large to park",
                json.len()
            )));
        }
        Ok(Self {
            shard_id: shard_id.to_owned(),
            sequence_number,
            event_name: record.event_name.clone(),
            record: json,
            parked_at,
        })
    }

    /// The record, as the fan-out takes it.
    pub fn record(&self) -> Result<EventRecord, StoreError> {
        serde_json::from_str(&self.record).map_err(|e| {
            let at = &self.sequence_number;
            StoreError::Internal(format!("parked record {at} is unreadable: {e}"))
        })
    }
}

impl Entity for ParkedRecordItem {
    const TYPE: ItemType = ItemType::ParkedRecord;
    /// Parking the same record again writes the same item.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        let sk = keys::parked_sk(&self.sequence_number, &self.shard_id);
        Key::new(PARKED_PK.to_owned(), sk)
    }
}

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
