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
use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use serde::{Deserialize, Serialize};

use super::{Item, ItemType, Store, StoreError, classify, from_items, key, s, to_item};
use crate::keys::{self, PARKED_PK, PARKED_PREFIX};

/// A record too large for one item (400 KB) cannot be parked; none of the
/// records the fan-out applies comes near (posts without their content,
/// comments, likes, profiles).
const MAX_RECORD_BYTES: usize = 350 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkedRecordItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: ItemType,
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
            pk: PARKED_PK.to_owned(),
            sk: keys::parked_sk(&sequence_number, shard_id),
            kind: ItemType::ParkedRecord,
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
            StoreError::Internal(format!("parked record {} is unreadable: {e}", self.sk))
        })
    }
}

impl Store {
    /// Keeps `item` (an unconditional put: parking a record again rewrites the
    /// same item).
    pub async fn park(&self, item: &ParkedRecordItem) -> Result<(), StoreError> {
        let put = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(to_item(item)?))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        self.backoff()
            .send("park a stream record", || put.clone().send())
            .await
            .map(|_| ())
            .map_err(classify)
    }

    /// One page of parked records, oldest sequence number first, and where the
    /// next page starts.
    pub async fn parked_page(
        &self,
        start: Option<Item>,
    ) -> Result<(Vec<ParkedRecordItem>, Option<Item>), StoreError> {
        let query = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
            .expression_attribute_values(":pk", s(PARKED_PK))
            .expression_attribute_values(":prefix", s(PARKED_PREFIX))
            .consistent_read(true)
            .limit(100)
            .set_exclusive_start_key(start)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let page = self
            .backoff()
            .send("read parked records", || query.clone().send())
            .await
            .map_err(classify)?;
        Ok((
            from_items(page.items.unwrap_or_default())?,
            page.last_evaluated_key,
        ))
    }

    /// Forgets a parked record once it has been applied.
    pub async fn unpark(&self, item: &ParkedRecordItem) -> Result<(), StoreError> {
        let delete = self
            .client()
            .delete_item()
            .table_name(self.table())
            .set_key(Some(key(item.pk.clone(), item.sk.clone())))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        self.backoff()
            .send("unpark a stream record", || delete.clone().send())
            .await
            .map(|_| ())
            .map_err(classify)
    }
}
