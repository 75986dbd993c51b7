//! Items as the SDK sees them, and the entity types' own encoding.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use super::StoreError;

/// A DynamoDB item as the SDK sees it.
pub type Item = std::collections::HashMap<String, AttributeValue>;

/// Which kind of entity an item is; stored as `type` so that stream records and
/// offline tools can tell items apart without parsing keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ItemType {
    User,
    Username,
    Post,
    PostContent,
    Comment,
    Like,
    Liker,
    FeedEntry,
    FeedFloor,
    /// Where a rename's fan-out walk is (`USER#u / RENAME`).
    RenameProgress,
    /// A stream record the fan-out gave up on, kept until replayed
    /// (`PARKED / RECORD#…`, [`crate::store::parked`]).
    ParkedRecord,
    /// A type this version does not know (written by a newer one).
    #[serde(other)]
    Other,
}

impl ItemType {
    /// The `type` attribute's value.
    pub fn attribute(self) -> Result<AttributeValue, StoreError> {
        serde_dynamo::to_attribute_value(self)
            .map_err(|e| StoreError::Internal(format!("cannot encode type: {e}")))
    }
}

pub(crate) fn to_item<T: Serialize>(value: &T) -> Result<Item, StoreError> {
    serde_dynamo::to_item(value)
        .map_err(|e| StoreError::Internal(format!("cannot encode item: {e}")))
}

pub(crate) fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Internal(format!("cannot decode item: {e}")))
}

pub(crate) fn from_items<T: DeserializeOwned>(items: Vec<Item>) -> Result<Vec<T>, StoreError> {
    items.into_iter().map(from_item).collect()
}

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn key(pk: String, sk: impl Into<String>) -> Item {
    Item::from([
        (crate::keys::PK.to_owned(), s(pk)),
        (crate::keys::SK.to_owned(), s(sk)),
    ])
}
