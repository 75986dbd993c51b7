//! What the fan-out reads of a stream record whatever its rule: the change
//! it is (its `eventName`) and an item image decoded.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde::de::DeserializeOwned;

use super::FanoutError;

/// What happened to the item of a stream record (its `eventName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Insert,
    Modify,
    Remove,
}

impl Change {
    /// The record's change; `None` for a name DynamoDB Streams does not use.
    pub fn of(record: &EventRecord) -> Option<Change> {
        match record.event_name.as_str() {
            "INSERT" => Some(Change::Insert),
            "MODIFY" => Some(Change::Modify),
            "REMOVE" => Some(Change::Remove),
            _ => None,
        }
    }
}

/// An image of the record (`which`: "new" or "old", for the error) as `T`.
pub(super) fn decode<T: DeserializeOwned>(
    image: &serde_dynamo::Item,
    which: &'static str,
) -> Result<T, FanoutError> {
    serde_dynamo::from_item(image.clone()).map_err(|e| FanoutError::Malformed {
        image: which,
        reason: e.to_string(),
    })
}
