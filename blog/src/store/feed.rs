//! The feed (Q6): one partition holding the short form of the newest posts,
//! capped at [`FEED_CAPACITY`] posts. Requests only read it; the stream fan-out
//! writes it (the seeds' V3 feed container and the trigger that trims it).
//!
//! Besides its entries the partition holds the *floor*: the newest post id ever
//! trimmed out. A post at or below it can never enter again, whatever order
//! stream records arrive in, so a post that has left the feed stays out.

use aws_sdk_dynamodb::{
    operation::query::builders::QueryFluentBuilder,
    types::{ReturnConsumedCapacity, ReturnValue},
};
use serde::{Deserialize, Serialize};

use super::{
    ItemType, Store, StoreError, classify, condition_held, from_items, key, n, posts::PostItem, s,
    to_item,
};
use crate::{
    ids::{PostId, UserId},
    keys::{self, FEED_FLOOR_SK, FEED_PK, PK, POST_PREFIX, SK},
    model::PostSummary,
};

/// How many posts the feed partition keeps.
pub const FEED_CAPACITY: usize = 100;

/// A feed entry: the short form of a post, as of the post's `version` (its own
/// changes: edits and counts) and `userVersion` (its author's renames). Both
/// only grow, so a copy is older than a post image exactly when either is
/// lower, and a rename needs no change to the post's own `version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedEntryItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: ItemType,
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: String,
    pub title: String,
    pub summary: String,
    pub comment_count: u64,
    pub like_count: u64,
    pub created_at: String,
    pub version: u64,
    /// Absent from entries written before it existed.
    #[serde(default)]
    pub user_version: u64,
}

impl From<&PostItem> for FeedEntryItem {
    fn from(post: &PostItem) -> Self {
        Self {
            pk: FEED_PK.to_owned(),
            sk: keys::feed_sk(&post.post_id),
            kind: ItemType::FeedEntry,
            post_id: post.post_id,
            user_id: post.user_id.clone(),
            username: post.username.clone(),
            title: post.title.clone(),
            summary: post.summary.clone(),
            comment_count: post.comment_count,
            like_count: post.like_count,
            created_at: post.created_at.clone(),
            version: post.version,
            user_version: post.user_version,
        }
    }
}

/// The feed's floor, as [`Store::trim_feed`] leaves it, and the count of
/// entries that decides when to trim. The fan-out writes its fields with
/// UpdateItem; only a bulk load writes it whole.
#[cfg(feature = "bulk")]
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FeedFloorItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: ItemType,
    pub floor_post_id: PostId,
    pub entries: u64,
}

#[cfg(feature = "bulk")]
impl FeedFloorItem {
    pub(super) fn at(post: PostId, entries: u64) -> Self {
        Self {
            pk: FEED_PK.to_owned(),
            sk: FEED_FLOOR_SK.to_owned(),
            kind: ItemType::FeedFloor,
            floor_post_id: post,
            entries,
        }
    }
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

/// What a conditional copy did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copied {
    /// The copy was written.
    Written,
    /// The copy already held this version or a newer one, or (for the feed) the
    /// post is not, or no longer, in it: nothing changed.
    Stale,
}

impl Store {
    /// A Query of the feed's entries (not its floor), newest first.
    fn feed_entries(&self) -> QueryFluentBuilder {
        self.client()
            .query()
            .table_name(self.table())
            .key_condition_expression("#pk = :feed AND begins_with(#sk, :post)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":feed", s(FEED_PK))
            .expression_attribute_values(":post", s(POST_PREFIX))
            .scan_index_forward(false)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
    }

    /// Q6: one Query of the feed partition, newest first (entries are small
    /// enough, see `text`'s byte bounds, that 100 never reach a 1 MB page; a
    /// second call would follow if they did).
    pub async fn feed(&self, limit: usize) -> Result<Vec<PostSummary>, StoreError> {
        let items = self
            .query_up_to(self.feed_entries(), None, limit.min(self.feed_capacity()))
            .await?;
        from_items(items)
    }

    /// Fan-out of a new post: its entry enters the feed unless it is there
    /// already or the post is at or below the floor (a post that left the
    /// feed never comes back); then the feed's count of entries grows by one,
    /// and a trim follows when it passes the slack. Plain writes, not a
    /// transaction: a post read as above the floor just before a trim raised
    /// the floor past it sits below the newest `capacity`, where Q6 never
    /// reads and the next trim removes it; a count that drifts (a delivery
    /// that died between the two writes) only moves the next trim, which
    /// counts again.
    ///
    /// Returns what it did and how many entries the feed holds, as counted.
    pub async fn enter_feed(&self, post: &PostItem) -> Result<(Copied, u64), StoreError> {
        let (floor, entries) = self.feed_head().await?;
        if floor.is_some_and(|floor| post.post_id <= floor) {
            return Ok((Copied::Stale, entries));
        }
        let entry = FeedEntryItem::from(post);
        let put = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(to_item(&entry)?))
            .condition_expression("attribute_not_exists(PK)")
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let entered = condition_held(
            self.backoff()
                .send("enter feed", || put.clone().send())
                .await,
        )?;
        if !entered {
            // Delivered before: a newer name the INSERT rule found still
            // reaches the entry.
            self.refresh_feed_entry(post).await?;
            return Ok((Copied::Stale, entries));
        }
        let count = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(FEED_PK.to_owned(), FEED_FLOOR_SK)))
            .update_expression("SET entries = if_not_exists(entries, :zero) + :one, #type = :type")
            .expression_attribute_names("#type", "type")
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":type", ItemType::FeedFloor.attribute()?)
            .return_values(ReturnValue::UpdatedNew)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let counted = self
            .backoff()
            .send("count feed entry", || count.clone().send())
            .await
            .map_err(classify)?;
        let entries = counted
            .attributes
            .and_then(|a| a.get("entries").and_then(|v| v.as_n().ok()).cloned())
            .and_then(|n| n.parse().ok())
            .unwrap_or(entries + 1);
        // A record that arrives after the post was deleted (a redelivery, a
        // replay) must not bring it back: the post's REMOVE, which takes the
        // entry out, may have come and gone already. Checked once the entry
        // is in and counted, so that taking it out again counts it out.
        if self
            .get(PostItem::key(&post.post_id), true)
            .await?
            .is_none()
        {
            self.leave_feed(&post.post_id).await?;
            return Ok((Copied::Stale, entries.saturating_sub(1)));
        }
        Ok((Copied::Written, entries))
    }

    /// Whether a feed holding `entries` (as counted) is due a trim: past its
    /// capacity and slack.
    pub fn feed_due_trim(&self, entries: u64) -> bool {
        let capacity = self.feed_capacity();
        let limit = capacity + feed_reserve(capacity) + feed_slack(capacity);
        usize::try_from(entries).unwrap_or(usize::MAX) > limit
    }

    /// The feed's floor and count of entries, strongly consistent.
    async fn feed_head(&self) -> Result<(Option<PostId>, u64), StoreError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Head {
            floor_post_id: Option<PostId>,
            entries: Option<u64>,
        }
        let head = self
            .get(key(FEED_PK.to_owned(), FEED_FLOOR_SK), true)
            .await?;
        let Some(item) = head else {
            return Ok((None, 0));
        };
        let head: Head = super::from_item(item)?;
        Ok((head.floor_post_id, head.entries.unwrap_or(0)))
    }

    /// Fan-out of a changed post: refreshes its feed entry if the feed holds an
    /// older version of it. Never creates one: a post that left the feed (or
    /// never entered it) stays out.
    pub async fn refresh_feed_entry(&self, post: &PostItem) -> Result<Copied, StoreError> {
        let entry = FeedEntryItem::from(post);
        let update = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(entry.pk, entry.sk)))
            .update_expression(
                "SET username = :username, title = :title, summary = :summary, \
                 commentCount = :comments, likeCount = :likes, version = :version, \
                 userVersion = :uv",
            )
            // An entry written before entries carried `userVersion` takes
            // the first image at its version or later, and has it from then on.
            .condition_expression(
                "attribute_exists(PK) AND (version < :version OR userVersion < :uv \
                 OR (attribute_not_exists(userVersion) AND version <= :version))",
            )
            .expression_attribute_values(":uv", n(entry.user_version))
            .expression_attribute_values(":username", s(entry.username))
            .expression_attribute_values(":title", s(entry.title))
            .expression_attribute_values(":summary", s(entry.summary))
            .expression_attribute_values(":comments", n(entry.comment_count))
            .expression_attribute_values(":likes", n(entry.like_count))
            .expression_attribute_values(":version", n(entry.version))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let result = self
            .backoff()
            .send("refresh feed entry", || update.clone().send())
            .await;
        Ok(if condition_held(result)? {
            Copied::Written
        } else {
            Copied::Stale
        })
    }

    /// Keeps the newest [`FEED_CAPACITY`] entries (or the store's capacity):
    /// raises the floor to the newest entry beyond them, deletes those, and
    /// sets the count to what is left. Returns how many writes it issued.
    /// Raising the floor first means a crash between the steps leaves entries
    /// that the next trim removes, never a post that can return. It reads the
    /// whole feed (its keys), so it runs only when the count has passed the
    /// slack: once every fifth of the capacity's posts.
    pub async fn trim_feed(&self) -> Result<usize, StoreError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Id {
            post_id: PostId,
        }
        let everything = self
            .feed_entries()
            .projection_expression("postId")
            .consistent_read(true);
        let ids: Vec<Id> = from_items(self.query_up_to(everything, None, usize::MAX).await?)?;
        let mut ids: Vec<PostId> = ids.into_iter().map(|id| id.post_id).collect();
        let kept = self.feed_capacity + feed_reserve(self.feed_capacity);
        let excess = ids.split_off(ids.len().min(kept));
        let Some(newest_excess) = excess.first() else {
            return Ok(0);
        };
        let remaining = ids.len();
        let raise = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(FEED_PK.to_owned(), FEED_FLOOR_SK)))
            .update_expression("SET floorPostId = :post, #type = :type, entries = :left")
            .expression_attribute_values(":left", n(remaining as u64))
            .condition_expression("attribute_not_exists(floorPostId) OR floorPostId < :post")
            .expression_attribute_names("#type", "type")
            .expression_attribute_values(":post", s(newest_excess.to_string()))
            .expression_attribute_values(":type", ItemType::FeedFloor.attribute()?)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let raised = self
            .backoff()
            .send("raise feed floor", || raise.clone().send())
            .await;
        // False when another trim raised it as far or further: fine too.
        condition_held(raised)?;
        for post in &excess {
            self.remove_feed_entry(post).await?;
        }
        Ok(1 + excess.len())
    }

    /// Fan-out of a deleted post: its entry leaves the feed, and the feed's
    /// count goes one down if the entry was there (a redelivery finds none).
    /// The next newest entry, kept in reserve, shows in its place.
    pub async fn leave_feed(&self, post: &PostId) -> Result<bool, StoreError> {
        let delete = self
            .client()
            .delete_item()
            .table_name(self.table())
            .set_key(Some(key(FEED_PK.to_owned(), keys::feed_sk(post))))
            .return_values(ReturnValue::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let deleted = self
            .backoff()
            .send("leave feed", || delete.clone().send())
            .await
            .map_err(classify)?;
        if deleted.attributes.is_none_or(|old| old.is_empty()) {
            return Ok(false);
        }
        let uncount = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(FEED_PK.to_owned(), FEED_FLOOR_SK)))
            .update_expression("SET entries = entries - :one")
            .condition_expression("entries > :zero")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":zero", n(0))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        // A count already at 0 (it drifted) stays there; the next trim recounts.
        condition_held(
            self.backoff()
                .send("uncount feed entry", || uncount.clone().send())
                .await,
        )?;
        Ok(true)
    }

    /// Deletes a post's feed entry, if there is one: the trim's and the
    /// audit's.
    pub(crate) async fn remove_feed_entry(&self, post: &PostId) -> Result<(), StoreError> {
        let delete = self
            .client()
            .delete_item()
            .table_name(self.table())
            .set_key(Some(key(FEED_PK.to_owned(), keys::feed_sk(post))))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        self.backoff()
            .send("remove feed entry", || delete.clone().send())
            .await
            .map(|_| ())
            .map_err(classify)
    }

    /// The audit's repair of a feed entry: puts `entry` unless the feed holds
    /// a newer copy of the post (the fan-out wrote one meanwhile).
    pub(crate) async fn repair_feed_entry(
        &self,
        entry: &FeedEntryItem,
    ) -> Result<bool, StoreError> {
        let put = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(to_item(entry)?))
            .condition_expression(
                "attribute_not_exists(PK) OR (version <= :version AND userVersion <= :uv)",
            )
            .expression_attribute_values(":version", n(entry.version))
            .expression_attribute_values(":uv", n(entry.user_version))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        condition_held(
            self.backoff()
                .send("repair feed entry", || put.clone().send())
                .await,
        )
    }

    /// The audit's repair of the floor: sets it to `post`, lower than a trim
    /// would ever set it, so that no post the feed shows is kept out.
    pub(crate) async fn set_feed_floor(&self, post: &PostId) -> Result<bool, StoreError> {
        let update = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(FEED_PK.to_owned(), FEED_FLOOR_SK)))
            .update_expression("SET floorPostId = :floor, #type = :type")
            .expression_attribute_names("#type", "type")
            .expression_attribute_values(":floor", s(post.to_string()))
            .expression_attribute_values(":type", ItemType::FeedFloor.attribute()?)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        condition_held(
            self.backoff()
                .send("set feed floor", || update.clone().send())
                .await,
        )
    }
}
