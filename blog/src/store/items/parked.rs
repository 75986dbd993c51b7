//! A stream record the fan-out gave up on, parked for the replay.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde::{Deserialize, Serialize};

use crate::keys::ItemType;
use crate::keys::{self, Entity, Key, PARKED_PK};
use crate::store::error::StoreError;

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
