//! A scheduled post's marker in the `SCHEDULED` partition.

use serde::{Deserialize, Serialize};

use crate::{
    ids::PostId,
    keys::{self, Entity, ItemType, Key, SCHEDULED_PK},
};

/// A scheduled post's marker: when, and which post.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledItem {
    pub post_id: PostId,
    pub publish_at: String,
}

impl ScheduledItem {
    pub fn new(post: PostId, at: &str) -> Self {
        Self {
            post_id: post,
            publish_at: at.to_owned(),
        }
    }
}

impl Entity for ScheduledItem {
    const TYPE: ItemType = ItemType::Scheduled;
    /// A marker for a post and a time made for this request.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Key::new(
            SCHEDULED_PK.to_owned(),
            keys::scheduled_sk(&self.publish_at, &self.post_id),
        )
    }
}
