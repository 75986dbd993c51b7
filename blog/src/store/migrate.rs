//! `blog-admin migrate`: rewrites posts stored in the shape before the content
//! had an item of its own (content on the post item) into the current shape.
//!
//! Idempotent and resumable: it scans only for post items that still carry
//! `content`, and each move ([`crate::store::Admin::migrate_post`]) is one conditional
//! transaction, so a run stopped anywhere is finished by running it again,
//! and a post an edit moved meanwhile is left alone. A post whose move
//! DynamoDB keeps refusing (throttling, conflicts with the traffic on the
//! post) until the retry budget runs out is counted as `busy` and skipped: the
//! run goes on with the others instead of stopping at the first hot post, and
//! the next run moves it. Until a table is migrated, every read and write
//! serves both shapes.
//!
//! It also finishes what the fan-out does for a post made hot by this
//! version ([`crate::store::FanOut::move_likers`]) for posts made hot by a
//! version before liked marks: their likes get marks in their likers'
//! partitions, and their likes stop reading the post's partition.

use serde::Deserialize;

use super::Admin;
use super::{
    ItemType, StoreError,
    deadline::Deadline,
    from_items,
    hot::{Marked, Moving},
    items::follow::FollowerItem,
    items::post::{COMMENTS_SHARDED_ATTRIBUTE, LIKERS_MOVED_ATTRIBUTE, SHARDS_ATTRIBUTE},
    table::{Expr, Scan},
};
use crate::{ids::PostId, keys::TYPE};

/// What a migration run did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// Post items found in the old shape.
    pub found: usize,
    /// Moved by this run.
    pub moved: usize,
    /// Left in the old shape because DynamoDB stayed busy on them: run again.
    pub busy: usize,
    /// Hot posts whose likers this run marked in their own partitions.
    pub likers_moved: usize,
    /// Follower entries copied into their followed user's list by time
    /// (written before that list existed; each copy is idempotent).
    pub followers_copied: usize,
}

impl Admin<'_> {
    /// Admin: moves every post of the old shape into the new one.
    pub async fn migrate(&self) -> Result<Migrated, StoreError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Old {
            post_id: PostId,
        }
        let mut done = Migrated::default();
        let mut start = None;
        loop {
            let old_posts = Expr::new("#type = :post AND attribute_exists(content)")
                .name("#type", TYPE)
                .value(":post", ItemType::Post.attribute()?);
            let scan = Scan::default()
                .filter(old_posts)
                .project(Expr::new("postId"));
            let page = self.db.scan_page("migration scan", &scan, start).await?;
            let old: Vec<Old> = from_items(page.items)?;
            for post in old {
                done.found += 1;
                match self.migrate_post(&post.post_id).await {
                    Ok(true) => done.moved += 1,
                    Ok(false) => {}
                    Err(StoreError::Busy { cause, detail }) => {
                        tracing::warn!(post = %post.post_id, cause = cause.as_str(), %detail, "post left for the next run");
                        done.busy += 1;
                    }
                    Err(other) => return Err(other),
                }
            }
            tracing::info!(
                found = done.found,
                moved = done.moved,
                busy = done.busy,
                "migration progress"
            );
            start = page.next;
            if start.is_none() {
                break;
            }
        }
        done.likers_moved = self.move_hot_likers().await?;
        done.followers_copied = self.copy_follower_entries().await?;
        Ok(done)
    }

    /// Every follower entry copied into its window of its followed user's
    /// list ([`crate::store::followers`]); how many were still there.
    async fn copy_follower_entries(&self) -> Result<usize, StoreError> {
        let mut copied = 0;
        let mut start = None;
        loop {
            let entries = Expr::new("#type = :follower")
                .name("#type", TYPE)
                .value(":follower", ItemType::Follower.attribute()?);
            let scan = Scan::default().filter(entries);
            let page = self
                .db
                .scan_page("follower entries scan", &scan, start)
                .await?;
            for entry in from_items::<FollowerItem>(page.items)? {
                copied += usize::from(self.copy_follower_entry(&entry).await?);
            }
            start = page.next;
            if start.is_none() {
                return Ok(copied);
            }
        }
    }

    /// Every hot post whose likers are not yet marked in their own
    /// partitions, marked (and its comments sharded); how many posts.
    async fn move_hot_likers(&self) -> Result<usize, StoreError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Unmoved {
            post_id: PostId,
            shards: u8,
        }
        let mut moved = 0;
        let mut start = None;
        loop {
            let unmoved = Expr::new(
                "#type = :post AND attribute_exists(#shards) \
                 AND (attribute_not_exists(#moved) OR attribute_not_exists(#comments))",
            )
            .name("#type", TYPE)
            .name("#shards", SHARDS_ATTRIBUTE)
            .name("#moved", LIKERS_MOVED_ATTRIBUTE)
            .name("#comments", COMMENTS_SHARDED_ATTRIBUTE)
            .value(":post", ItemType::Post.attribute()?);
            let scan = Scan::default()
                .filter(unmoved)
                .project(Expr::new("postId, #shards").name("#shards", SHARDS_ATTRIBUTE));
            let page = self
                .db
                .scan_page("unmoved likers scan", &scan, start)
                .await?;
            for post in from_items::<Unmoved>(page.items)? {
                self.shard_comments(&post.post_id, post.shards).await?;
                let fanout = self.fanout();
                if let Moving::Done { .. } = fanout
                    .move_likers(&post.post_id, Marked::AndShards, &Deadline::NONE)
                    .await?
                {
                    moved += 1;
                }
            }
            start = page.next;
            if start.is_none() {
                return Ok(moved);
            }
        }
    }
}
