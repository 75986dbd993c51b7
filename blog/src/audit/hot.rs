//! The audit of a hot post (`store::hot`): each shard counter held to what
//! it counts (the likes and comments in its shard, and the comments of the
//! post's own partition counted in it), each shard's version to the one its
//! group counter holds of it (or the post, for one made before groups),
//! each group's to the one the post holds of it, and the
//! post's counts to what is counted on it: the likes of its own partition
//! (given while it was quiet), the comments no shard counts, and what the
//! fan-out has added of each group and ungrouped shard (`groupCounts`,
//! `shardCounts`). What a shard counted and the fan-out has not added yet is
//! in flight, not missing: a repair that set the post's counts to every item
//! would have the fan-out add it again.
//!
//! Every repair reads what it conditions on first (the counter's or the
//! post's `version`), then counts: a like, unlike or comment that commits
//! while it counts moves that version, and the repair is refused.

use std::collections::BTreeMap;

use super::{Finding, Sink};
use crate::store::Admin;
use crate::{
    ids::PostId,
    keys::{COMMENT_PREFIX, Counter, Entity, Key, LIKE_PREFIX, PostPartition, SK},
    store::{
        StoreError,
        counts::{ShardCounter, Summed},
        items::counter::{MAX_SHARDS, ShardCounterItem, ShardGroupItem},
        items::post::PostItem,
        table::{Expr, Query},
    },
};

impl Admin<'_> {
    /// For each of `post`'s shards (none for a quiet post), a finding when
    /// its counter is not what it counts: the likes in its shard and
    /// `counted_in` (the post's comments counted in each shard); one for
    /// each shard whose counts its group (or the post) holds at an older
    /// version than the counter's, and one for each group whose counts the
    /// post holds at an older version than the group's: the fan-out has not
    /// added them (yet: the repair adds them as the fan-out does, which is
    /// safe beside it).
    pub(super) async fn audit_shards(
        &self,
        post: &PostItem,
        counted_in: &BTreeMap<u8, u64>,
        sink: &Sink,
    ) -> Result<(), StoreError> {
        let shards = post.shards.unwrap_or(0);
        // The groups first: a shard added onto its group after this read
        // shows as not added yet, never as added and lost.
        let mut groups = BTreeMap::new();
        // Each in the layout of this version (apart) or of the one before
        // (in its first shard): whichever the post's counters name.
        let numbers =
            ShardGroupItem::groups_of(0..shards).chain(ShardGroupItem::apart_groups_of(0..shards));
        for group in numbers {
            let key = ShardGroupItem::key_of(post.post_id, group).item();
            let stored = self.db().get_entity::<ShardGroupItem>(key, true).await?;
            let added = post.added_group(group).map_or(0, |a| a.version);
            if stored.as_ref().is_some_and(|g| g.version > added) {
                let finding = Finding::GroupNotAdded {
                    post: post.post_id,
                    group,
                };
                sink.found(self, finding, None).await?;
            }
            groups.insert(group, stored);
        }
        for shard in 0..shards {
            // The counter first: a like counted after it is read is in the
            // count below, and the repair's condition on this version
            // refuses (read after, it would be set one short).
            let key = ShardCounterItem::key_of(post.post_id, shard).item();
            let stored = self.db().get_entity::<ShardCounterItem>(key, true).await?;
            let place = PostPartition::shard(post.post_id, shard);
            let in_shard = self.count_in(place, LIKE_PREFIX).await?;
            let comments = counted_in.get(&shard).copied().unwrap_or(0)
                + self.count_in(place, COMMENT_PREFIX).await?;
            let (stored_likes, stored_comments, version) = stored
                .as_ref()
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
            let added = match stored.as_ref().and_then(ShardCounterItem::group) {
                Some(group) => groups
                    .get(&group)
                    .and_then(Option::as_ref)
                    .and_then(|g| g.added(shard)),
                None => post.added(shard),
            };
            let added = added.map_or(0, |a| a.version);
            if stored.is_some_and(|c| c.version > added) {
                let finding = Finding::ShardNotAdded {
                    post: post.post_id,
                    shard,
                };
                sink.found(self, finding, None).await?;
            }
        }
        Ok(())
    }

    /// The comments in `post`'s own partition: how many, and how many each
    /// shard counts (a consistent Query of their `countedIn`, every page).
    pub(super) async fn comments_counted(
        &self,
        post: &PostId,
    ) -> Result<(u64, BTreeMap<u8, u64>), StoreError> {
        let query = Query::partition(PostPartition::own(*post).pk())
            .between(COMMENT_PREFIX.to_owned(), format!("{COMMENT_PREFIX}~"))
            .project(Expr::new("#sk, countedIn").name("#sk", SK))
            .consistent();
        let (mut total, mut counted_in) = (0, BTreeMap::new());
        let mut start = None;
        loop {
            let page = self
                .db()
                .query_page("count a post's comments", &query, start, None)
                .await?;
            for item in &page.items {
                total += 1;
                if let Some(shard) = super::counted_in(item) {
                    *counted_in.entry(shard).or_default() += 1;
                }
            }
            start = page.next;
            if start.is_none() {
                return Ok((total, counted_in));
            }
        }
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

    /// What `counter` of `post` (as read, before this) should be, counted
    /// now in its own partition ([`expected_count`]).
    pub(super) async fn count_of(
        &self,
        post: &PostItem,
        counter: Counter,
    ) -> Result<u64, StoreError> {
        let own = PostPartition::own(post.post_id);
        let (total, counted_in) = match counter {
            Counter::Likes => (self.count_in(own, LIKE_PREFIX).await?, BTreeMap::new()),
            Counter::Comments => self.comments_counted(&post.post_id).await?,
        };
        Ok(expected_count(post, counter, total, &counted_in))
    }

    /// Whether the shard partition `place` has lost its post: then what it
    /// holds is a deleted post's leftovers.
    pub(super) async fn shard_orphaned(&self, place: PostPartition) -> Result<bool, StoreError> {
        let post = self
            .db()
            .get("a post item", PostItem::key(&place.post), true)
            .await?;
        Ok(place.shard.is_some() && post.is_none())
    }

    /// The repair of a shard counter: its counts set to what it counts, if
    /// its `version` is still the one read (a like counted since moved it);
    /// the fan-out then adds the change onto the post.
    /// Counted again after the counter is read (what the finding saw may
    /// be stale): the counter first, then its shard's likes and the comments
    /// it counts.
    pub(super) async fn recount_shard(&self, post: &PostId, shard: u8) -> Result<bool, StoreError> {
        let key = ShardCounterItem::key_of(*post, shard).item();
        let Some(stored) = self.db().get_entity::<ShardCounterItem>(key, true).await? else {
            return Ok(false);
        };
        let place = PostPartition::shard(*post, shard);
        let likes = self.count_in(place, LIKE_PREFIX).await?;
        let (_, counted_in) = self.comments_counted(post).await?;
        let comments = counted_in.get(&shard).copied().unwrap_or(0)
            + self.count_in(place, COMMENT_PREFIX).await?;
        let actual = (likes, comments);
        if actual == (stored.like_count, stored.comment_count) {
            return Ok(true);
        }
        let write = ShardCounterItem::set(*post, shard, actual, stored.version);
        Ok(self.db().write("set shard count", &write).await?.done())
    }

    /// A group's counts added onto its post as the fan-out adds them (a
    /// record it lost, or one still in flight: adding twice adds nothing).
    pub(super) async fn add_group(&self, post: &PostId, group: u8) -> Result<bool, StoreError> {
        self.add_counter::<ShardGroupItem>(ShardGroupItem::key_of(*post, group))
            .await
    }

    /// A shard's counts added onto its group (or its post) as the fan-out
    /// adds them; the group's record then adds them onto the post.
    pub(super) async fn add_shard(&self, post: &PostId, shard: u8) -> Result<bool, StoreError> {
        self.add_counter::<ShardCounterItem>(ShardCounterItem::key_of(*post, shard))
            .await
    }

    /// The counter at `key`, read strongly, added onto its owner; `false`
    /// when it or its owner is gone.
    async fn add_counter<C: Entity + ShardCounter>(&self, key: Key) -> Result<bool, StoreError> {
        let Some(counter) = self.db().get_entity::<C>(key.item(), true).await? else {
            return Ok(false);
        };
        let summed = self.fanout().add_shard_counts(&[counter]).await?;
        Ok(summed != Summed::Gone)
    }
}

/// What `post`'s (comment, like) counts should say, from the `comments` and
/// `likes` of its own partition, `counted_in` of the comments counted in
/// shards ([`expected_count`]).
pub(super) fn expected_counts(
    post: &PostItem,
    comments: u64,
    likes: u64,
    counted_in: &BTreeMap<u8, u64>,
) -> (u64, u64) {
    (
        expected_count(post, Counter::Comments, comments, counted_in),
        expected_count(post, Counter::Likes, likes, &BTreeMap::new()),
    )
}

/// What `counter` of `post` should say, from what its own partition holds:
/// `total` items, `counted_in` of them (comments) counted in a shard. A quiet
/// post counts every one; a hot post the rest, plus what the fan-out has
/// added of its shards' counts.
pub(super) fn expected_count(
    post: &PostItem,
    counter: Counter,
    total: u64,
    counted_in: &BTreeMap<u8, u64>,
) -> u64 {
    if post.shards.is_none() {
        return total;
    }
    let in_shards: u64 = counted_in.values().sum();
    total.saturating_sub(in_shards) + post.added_from_shards(counter)
}

/// Every shard a deleted post may have had: a post that is gone no longer
/// says how many.
pub(super) const ANY_SHARDS: Option<u8> = Some(MAX_SHARDS);
