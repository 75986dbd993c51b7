//! The feed (Q6): one partition holding the short form of the newest posts,
//! capped at [`FEED_CAPACITY`] posts. Requests only read it; the stream fan-out
//! writes it (the seeds' V3 feed container and the trigger that trims it).
//!
//! Besides its entries the partition holds the *floor*: the newest post id ever
//! trimmed out. A post at or below it can never enter again, whatever order
//! stream records arrive in, so a post that has left the feed stays out.

use aws_sdk_dynamodb::{
    operation::query::builders::QueryFluentBuilder,
    types::{ConditionCheck, Put, ReturnConsumedCapacity},
};
use serde::{Deserialize, Serialize};

use super::{
    Cancelled, ItemType, Store, StoreError, classify, condition_held, from_items, key, n,
    posts::PostItem, s, to_item,
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

/// The feed's floor, as [`Store::trim_feed`] leaves it.
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
}

impl FeedFloorItem {
    pub(super) fn at(post: PostId) -> Self {
        Self {
            pk: FEED_PK.to_owned(),
            sk: FEED_FLOOR_SK.to_owned(),
            kind: ItemType::FeedFloor,
            floor_post_id: post,
        }
    }
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
            .query_up_to(self.feed_entries(), None, limit.min(FEED_CAPACITY))
            .await?;
        from_items(items)
    }

    /// Fan-out of a new post: its entry enters the feed unless the feed holds
    /// this version or a newer one already, or the post is at or below the
    /// floor. One transaction: the entry's put and a check of the floor.
    pub async fn enter_feed(&self, post: &PostItem) -> Result<Copied, StoreError> {
        let entry = FeedEntryItem::from(post);
        let put = Put::builder()
            .table_name(self.table())
            .set_item(Some(to_item(&entry)?))
            .condition_expression(
                "attribute_not_exists(PK) OR version < :version OR userVersion < :uv",
            )
            .expression_attribute_values(":version", n(entry.version))
            .expression_attribute_values(":uv", n(entry.user_version))
            .build()?;
        let above_floor = ConditionCheck::builder()
            .table_name(self.table())
            .set_key(Some(key(FEED_PK.to_owned(), FEED_FLOOR_SK)))
            .condition_expression("attribute_not_exists(floorPostId) OR floorPostId < :post")
            .expression_attribute_values(":post", s(post.post_id.to_string()))
            .build()?;
        let mut tx = self.transaction("enter feed");
        tx.put("feed entry", put);
        tx.check("feed floor", above_floor);
        match tx.commit().await {
            Ok(()) => Ok(Copied::Written),
            // Only a failed condition means "already there, or below the
            // floor"; a throttled or conflicting attempt is an error, retried.
            Err(Cancelled::Conditions(_)) => Ok(Copied::Stale),
            Err(Cancelled::Store(err)) => Err(err),
        }
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
            .condition_expression(
                "attribute_exists(PK) AND (version < :version OR userVersion < :uv)",
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
    /// raises the floor to the newest entry beyond them, then deletes those. Returns how many writes it
    /// issued. Raising the floor first means a crash between the two steps
    /// leaves entries that the next trim removes, never a post that can return.
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
        let excess = ids.split_off(ids.len().min(self.feed_capacity));
        let Some(newest_excess) = excess.first() else {
            return Ok(0);
        };
        let raise = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(FEED_PK.to_owned(), FEED_FLOOR_SK)))
            .update_expression("SET floorPostId = :post, #type = :type")
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
            let delete = self
                .client()
                .delete_item()
                .table_name(self.table())
                .set_key(Some(key(FEED_PK.to_owned(), keys::feed_sk(post))))
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
            self.backoff()
                .send("trim feed", || delete.clone().send())
                .await
                .map_err(classify)?;
        }
        Ok(1 + excess.len())
    }
}
