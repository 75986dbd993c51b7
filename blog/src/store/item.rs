//! Items that know their keys: every entity of the table implements
//! [`Entity`], from which its `PK`/`SK`, its GSI1 keys and its `type`
//! attribute follow. Entity structs hold only their own fields; the keys are
//! added when an item is written ([`Entity::to_item`]) and ignored when one
//! is read ([`Entity::from_item`]).

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use super::StoreError;
use crate::keys::{GSI1PK, GSI1SK, PK, SK};

/// A DynamoDB item as the SDK sees it.
pub type Item = std::collections::HashMap<String, AttributeValue>;

/// The name of the attribute that holds an item's [`ItemType`].
pub const TYPE: &str = "type";

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

    /// The type `item` says it is; `None` without a `type` attribute.
    pub fn of(item: &Item) -> Option<ItemType> {
        item.get(TYPE)
            .and_then(|v| serde_dynamo::from_attribute_value(v.clone()).ok())
    }
}

/// A primary key (of the table, or of GSI1 when [`Entity::gsi1`] gives it).
/// The one place the key attributes' names meet serde.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Key {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
}

impl Key {
    pub fn new(pk: String, sk: impl Into<String>) -> Self {
        Self { pk, sk: sk.into() }
    }

    /// The key as the SDK takes it.
    pub fn item(&self) -> Item {
        Item::from([
            (PK.to_owned(), AttributeValue::S(self.pk.clone())),
            (SK.to_owned(), AttributeValue::S(self.sk.clone())),
        ])
    }

    /// The table key of `item` (any item of the table has one).
    pub fn of(item: &Item) -> Result<Self, StoreError> {
        let part = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .ok_or_else(|| StoreError::Internal(format!("an item without {name}")))
        };
        Ok(Self::new(part(PK)?, part(SK)?))
    }
}

/// An item of the table.
pub trait Entity: Serialize + DeserializeOwned {
    /// Its `type` attribute.
    const TYPE: ItemType;
    /// The attributes that make a stored item under this key the very write
    /// that made it (read back after a lost answer, see
    /// `store::table::Write::create`); empty when the key alone does, because
    /// it holds an id made for this write.
    const OWN: &'static [&'static str];

    /// Its `PK`/`SK`.
    fn key(&self) -> Key;

    /// Its `GSI1PK`/`GSI1SK`, if GSI1 lists it.
    fn gsi1(&self) -> Option<Key> {
        None
    }

    /// The item to write: its fields, its keys and its type.
    fn to_item(&self) -> Result<Item, StoreError> {
        let mut item: Item = serde_dynamo::to_item(self)
            .map_err(|e| StoreError::Internal(format!("cannot encode item: {e}")))?;
        let Key { pk, sk } = self.key();
        item.insert(PK.to_owned(), AttributeValue::S(pk));
        item.insert(SK.to_owned(), AttributeValue::S(sk));
        if let Some(Key { pk, sk }) = self.gsi1() {
            item.insert(GSI1PK.to_owned(), AttributeValue::S(pk));
            item.insert(GSI1SK.to_owned(), AttributeValue::S(sk));
        }
        item.insert(TYPE.to_owned(), Self::TYPE.attribute()?);
        Ok(item)
    }

    /// The entity an item holds (its keys and type are not fields).
    fn from_item(item: Item) -> Result<Self, StoreError> {
        from_item(item)
    }
}

/// Any shape read from an item (an entity, or a projection of one).
pub fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Internal(format!("cannot decode item: {e}")))
}

pub fn from_items<T: DeserializeOwned>(items: Vec<Item>) -> Result<Vec<T>, StoreError> {
    items.into_iter().map(from_item).collect()
}
