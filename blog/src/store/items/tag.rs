//! A post's entry in a tag's list.

use serde::{Deserialize, Serialize};

use super::post::PostItem;
use crate::keys::ItemType;
use crate::{
    ids::PostId,
    keys::{self, Entity, Key},
    model::PostSummary,
    text::Tag,
};

/// A post's entry in one of its tags' lists: its short form (the
/// attributes side by side, as the list reads them), as of the post's
/// `version` and `userVersion` (both only grow: a copy is older than a post
/// image exactly when either is lower), and the tag it is listed under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagEntryItem {
    #[serde(flatten)]
    pub post: PostSummary,
    pub tag: Tag,
    pub version: u64,
    pub user_version: u64,
    /// Where the list holds it, when that is not its post id (a draft
    /// published after it was created: [`PostId::listed_at`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed_id: Option<PostId>,
    /// The post's `updatedAt` (its last edit), for the Atom feed's entry
    /// `updated`; absent from entries written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

impl TagEntryItem {
    pub fn of(post: &PostItem, tag: &Tag) -> Self {
        Self {
            post: PostSummary::from(post),
            tag: tag.clone(),
            version: post.version,
            user_version: post.user_version,
            listed_id: post.listed_id().filter(|listed| *listed != post.post_id),
            updated_at: Some(post.updated_at.clone()),
        }
    }

    /// The entry under `tag` of the post listed under `listed`.
    pub fn key_of(tag: &Tag, listed: &PostId) -> Key {
        Key::new(keys::tag_pk(tag), keys::tag_sk(listed))
    }

    /// Where the list holds it.
    pub fn listed(&self) -> PostId {
        self.listed_id.unwrap_or(self.post.post_id)
    }
}

impl Entity for TagEntryItem {
    const TYPE: ItemType = ItemType::TagEntry;
    /// A copy of the post at these versions: another delivery of the same
    /// record writes the same.
    const OWN: &'static [&'static str] = &["version", "userVersion"];

    fn key(&self) -> Key {
        Self::key_of(&self.tag, &self.listed())
    }
}
