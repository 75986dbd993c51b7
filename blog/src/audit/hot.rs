//! The audit of a hot post (`store::hot`): its likes in its shards counted
//! with those of its own partition, and each shard counter held to what it
//! counts (the likes in its shard, the comments counted in it).

use std::collections::BTreeMap;

use super::{Finding, Sink};
use crate::store::Admin;
use crate::{
    ids::PostId,
    keys::{COMMENT_PREFIX, Counter, LIKE_PREFIX, PostPartition},
    store::{
        StoreError,
        hot::{HOT_SHARDS, ShardCounterItem},
        posts::PostItem,
        table::Query,
    },
};

impl Admin<'_> {
    /// The likes in `post`'s shards (none for a quiet post); a finding for
    /// each shard counter that is not what it counts: the likes in its shard
    /// and `counted_in` (the post's comments counted in each shard).
    pub(super) async fn audit_shards(
        &self,
        post: &PostItem,
        counted_in: &BTreeMap<u8, u64>,
        sink: &Sink,
    ) -> Result<u64, StoreError> {
        let mut likes = 0;
        for shard in 0..post.shards.unwrap_or(0) {
            let place = PostPartition::shard(post.post_id, shard);
            let in_shard = self.count_in(place, LIKE_PREFIX).await?;
            likes += in_shard;
            let comments = counted_in.get(&shard).copied().unwrap_or(0);
            let key = ShardCounterItem::key_of(post.post_id, shard).item();
            let stored = self.db().get_entity::<ShardCounterItem>(key, true).await?;
            let (stored_likes, stored_comments, version) = stored
                .map(|c| (c.like_count, c.comment_count, c.version))
                .unwrap_or_default();
            if (stored_likes, stored_comments) != (in_shard, comments) {
                let finding = Finding::ShardCount {
                    post: post.post_id,
                    shard,
                    stored: (stored_likes, stored_comments),
                    actual: (in_shard, comments),
                    version,
                };
                sink.found(self, finding, None).await?;
            }
        }
        Ok(likes)
    }

    /// How many of the items of the partition `place` are `prefix`'s (likes
    /// or comments: the hot post's pointer among the likes is not one): a
    /// consistent Query with `Select: COUNT`, every page.
    pub(super) async fn count_in(
        &self,
        place: PostPartition,
        prefix: &str,
    ) -> Result<u64, StoreError> {
        let mut count = 0;
        let mut start = None;
        // Ids are ULIDs (`0-9A-Z`): `~` sorts after all of them and before
        // the pointer's `~SHARDED`.
        let query = Query::partition(place.pk())
            .between(prefix.to_owned(), format!("{prefix}~"))
            .count()
            .consistent();
        loop {
            let page = self
                .db()
                .query_page("count a post's items", &query, start, None);
            let page = page.await?;
            count += page.count;
            start = page.next;
            if start.is_none() {
                return Ok(count);
            }
        }
    }

    /// What `counter` of `post` should be: its items in the post's partition
    /// and, for likes, in its shards.
    pub(super) async fn count_of(
        &self,
        post: &PostItem,
        counter: Counter,
    ) -> Result<u64, StoreError> {
        let own = PostPartition::own(post.post_id);
        let prefix = match counter {
            Counter::Comments => COMMENT_PREFIX,
            Counter::Likes => LIKE_PREFIX,
        };
        let mut count = self.count_in(own, prefix).await?;
        if counter == Counter::Likes {
            for shard in 0..post.shards.unwrap_or(0) {
                let place = PostPartition::shard(post.post_id, shard);
                count += self.count_in(place, prefix).await?;
            }
        }
        Ok(count)
    }

    /// Whether the shard partition `place` has lost its post: then what it
    /// holds is a deleted post's leftovers.
    pub(super) async fn shard_orphaned(&self, place: PostPartition) -> Result<bool, StoreError> {
        let post = self.db().get(PostItem::key(&place.post), true).await?;
        Ok(place.shard.is_some() && post.is_none())
    }

    /// The repair of a shard counter: its counts set to what it counts, if
    /// its `version` is still the one read (a like counted since moved it);
    /// the fan-out then adds the change onto the post.
    pub(super) async fn recount_shard(
        &self,
        post: &PostId,
        shard: u8,
        actual: (u64, u64),
        version: u64,
    ) -> Result<bool, StoreError> {
        let write = ShardCounterItem::set(*post, shard, actual, version);
        Ok(self.db().write("set shard count", &write).await?.done())
    }
}

/// Every shard a deleted post may have had: a post that is gone no longer
/// says how many.
pub(super) const ANY_SHARDS: Option<u8> = Some(HOT_SHARDS);
