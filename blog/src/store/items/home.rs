//! A home's items: a post's entry in a reader's home, and the record of a
//! post's delivery to its author's followers.

use serde::{Deserialize, Serialize};

use crate::keys::ItemType;
use crate::{
    ids::{FollowId, PostId, UserId},
    keys::{self, Entity, Key},
};

/// A post's entry in a reader's home.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HomeEntryItem {
    pub reader: UserId,
    pub post_id: PostId,
    /// The post's author.
    pub user_id: UserId,
    pub listed_id: PostId,
    /// TTL: [`HOME_DAYS`] after it was written.
    pub expires_at: u64,
}

impl HomeEntryItem {
    /// The entry of the post listed at `listed` in `reader`'s home.
    pub fn key_of(reader: &UserId, listed: &PostId) -> Key {
        Key::new(keys::home_pk(reader), keys::home_sk(listed))
    }

    pub(crate) fn new(reader: &UserId, post: PostId, author: &UserId, listed: PostId) -> Self {
        Self {
            reader: reader.clone(),
            post_id: post,
            user_id: author.clone(),
            listed_id: listed,
            expires_at: now_seconds() + HOME_DAYS * DAY_SECONDS,
        }
    }
}

impl Entity for HomeEntryItem {
    const TYPE: ItemType = ItemType::HomeEntry;
    /// The same post in the same home is the same entry.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(&self.reader, &self.listed_id)
    }
}

/// A post's delivery into the homes of its author's followers in one
/// follower shard, and how far it has got.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryItem {
    pub post_id: PostId,
    /// The author.
    pub user_id: UserId,
    pub listed_id: PostId,
    pub shard: u8,
    /// The last follow delivered to; none yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<FollowId>,
    /// How many entries it has written.
    #[serde(default)]
    pub delivered: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
    /// Set when a walk stopped for its deadline: its MODIFY goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<u64>,
    /// TTL.
    pub expires_at: u64,
}

impl Entity for DeliveryItem {
    const TYPE: ItemType = ItemType::Delivery;
    /// One per (post, shard): the post names it.
    const OWN: &'static [&'static str] = &["listedId"];

    fn key(&self) -> Key {
        keys::delivery(&self.post_id, &self.listed_id, self.shard)
    }
}

/// How long an entry stays in a home.
pub const HOME_DAYS: u64 = 30;

pub(crate) const DAY_SECONDS: u64 = 24 * 60 * 60;

pub(crate) fn now_seconds() -> u64 {
    u64::try_from(time::OffsetDateTime::now_utc().unix_timestamp()).unwrap_or(0)
}
