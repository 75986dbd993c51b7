//! The lists of posts' items: a post's entry in the feed (Q6, the `FEED`
//! partition) and the floor below which its entries are trimmed, and a
//! post's entry in a tag's list (`TAG#<tag>`), the same short form.

use serde::{Deserialize, Serialize};

use super::post::PostItem;
use crate::keys::ItemType;
use crate::store::error::StoreError;
use crate::store::table::Expr;
use crate::{
    ids::PostId,
    keys::{self, Entity, FEED_FLOOR_SK, FEED_PK, Key, TYPE},
    model::PostSummary,
    text::Tag,
};

/// A feed entry: the short form of a post (its attributes are the short
/// form's own, side by side with the versions, so Q6 reads them as it is),
/// as of the post's `version` (its own changes: edits and counts) and
/// `userVersion` (its author's renames). Both only grow, so a copy is older
/// than a post image exactly when either is lower, and a rename needs no
/// change to the post's own `version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedEntryItem {
    #[serde(flatten)]
    pub post: PostSummary,
    pub version: u64,
    /// Absent from entries written before it existed.
    #[serde(default)]
    pub user_version: u64,
    /// Where the feed holds it, when that is not its post id (a draft
    /// published after it was created: [`PostId::listed_at`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed_id: Option<PostId>,
    /// The post's `updatedAt` (its last edit), for the Atom feed's entry
    /// `updated`; absent from entries written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

impl From<&PostItem> for FeedEntryItem {
    fn from(post: &PostItem) -> Self {
        Self {
            post: PostSummary::from(post),
            version: post.version,
            user_version: post.user_version,
            listed_id: post.listed_id().filter(|listed| *listed != post.post_id),
            updated_at: Some(post.updated_at.clone()),
        }
    }
}

impl FeedEntryItem {
    /// The entry of the post listed under `listed` ([`PostItem::listed_id`]).
    pub fn key_of(listed: &PostId) -> Key {
        Key::new(FEED_PK.to_owned(), keys::feed_sk(listed))
    }

    /// Where the feed holds it: the order of the feed.
    pub fn listed(&self) -> PostId {
        self.listed_id.unwrap_or(self.post.post_id)
    }
}

impl Entity for FeedEntryItem {
    const TYPE: ItemType = ItemType::FeedEntry;
    /// A copy of the post at these versions: another delivery of the same
    /// record writes the same.
    const OWN: &'static [&'static str] = &["version", "userVersion"];

    fn key(&self) -> Key {
        Self::key_of(&self.listed())
    }
}

/// The feed's floor, as [`crate::store::FanOut::trim_feed`] leaves it, and the count of
/// entries that decides when to trim. The fan-out writes its fields with
/// UpdateItem; only a bulk load writes it whole.
#[cfg(feature = "bulk")]
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FeedFloorItem {
    pub floor_post_id: PostId,
    pub entries: u64,
}

#[cfg(feature = "bulk")]
impl FeedFloorItem {
    pub(crate) fn at(post: PostId, entries: u64) -> Self {
        Self {
            floor_post_id: post,
            entries,
        }
    }
}

#[cfg(feature = "bulk")]
impl Entity for FeedFloorItem {
    const TYPE: ItemType = ItemType::FeedFloor;
    const OWN: &'static [&'static str] = &["floorPostId", "entries"];

    fn key(&self) -> Key {
        floor_key()
    }
}

pub(crate) fn floor_key() -> Key {
    Key::new(FEED_PK.to_owned(), FEED_FLOOR_SK)
}

/// The floor's `type`, which its updates (it is never written whole but by
/// a bulk load) set too.
pub(crate) fn floor_type(expr: Expr) -> Result<Expr, StoreError> {
    Ok(expr
        .name("#type", TYPE)
        .value(":type", ItemType::FeedFloor.attribute()?))
}

/// How many entries beyond its capacity the feed may hold before a trim: a
/// fifth. Q6 shows only the newest `capacity`; the slack means a trim (which
/// reads the whole feed) runs once every so many posts, not on each.
pub fn feed_slack(capacity: usize) -> usize {
    capacity / 5
}

/// How many entries the feed keeps beyond those it shows, so that a deleted
/// post's place is taken by the next newest: a trim leaves `capacity` plus
/// this many (120 for a feed of 100). A feed shows fewer than `capacity` only
/// after more than this many of its posts are deleted with no new post in
/// between (there is no index of all posts by time to refill it from).
pub fn feed_reserve(capacity: usize) -> usize {
    capacity / 5
}

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
