//! A hot post: one whose own partition DynamoDB throttled on a like or a
//! comment. A partition takes about 1,000 WCU a second; a like writes 4 of
//! them into its post's partition (like and count, transactional; its mark
//! goes to its liker's), so a quiet post takes about 250 likes a second. A
//! hot post changes shape once, for good, and from then on no single
//! partition bounds it:
//!
//! - its new likes go to one of [`HOT_SHARDS`] shard partitions `POST#p#k`,
//!   `k` a stable hash of the liker, each marked in its liker's own
//!   partition (`USER#u / ~LIKED#p`: a second like by the same user meets
//!   the first one's mark, wherever the post keeps it), and each like and
//!   each new comment counts in a shard counter (`POST#p#k / COUNTS`) in the
//!   same transaction, never on the post item;
//! - the fan-out adds the shard counters' changes onto their group counter
//!   (16 shards a group, `POST#p#k / GROUP`), once a batch per group, and
//!   the groups' onto the post item, once a batch per post
//!   ([`crate::store::FanOut::add_shard_counts`]), so that Q2 stays one read
//!   of one item, the post item stays small (8 groups' entries, not 128
//!   shards'), and the post's copies (its GSI1 entry, its feed entry) are
//!   written once a batch, not once a like;
//! - Q5 merges the post's partition (likes given before the post was hot)
//!   with the shards, one Query each;
//! - its new comments go to its shards too (the id names the shard), after a
//!   comments pointer that sorts after the post's own comments: Q4 reads the
//!   post's partition, then the shards, merged;
//! - when its shards are written near their limit (the rate one process
//!   writes them at) or one is throttled, the post widens, from 16 shards
//!   to 128 at once ([`Requests::widen`]; one request of a process widens,
//!   the others throttled meanwhile wait for it rather than spend their
//!   retries on shards known to be too few);
//! - likes given before the switch stay where they are, counted on the post
//!   item: taking one back counts down there, as before. Each was marked in
//!   its liker's partition as it was given (the post item says so from its
//!   creation: `likersMoved`), so from the first hot like on a like reads
//!   nothing of the post's partition and writes nothing there, however many
//!   quiet likes the post had. A post created before quiet likes were
//!   marked has them marked by the switch while the post is closed
//!   ([`FanOut::move_likers`]; one with more quiet likes than the switch
//!   moves in 1.5 s opens hot without `likersMoved`, the fan-out moves the
//!   rest, [`FanOut::finish_switch`], and until then a hot like reads the
//!   marker such a like has beside it).
//!
//! The switch ([`crate::store::Requests::make_hot`]) first **closes** the
//! post: one small UpdateItem sets `closing`, which every quiet like's and
//! comment's count conditions on being absent (free), so from then on
//! nothing new lands in the post's partition, and the likes and comments of
//! every process that learns it wait (one read of the post every 250 ms a
//! process, `store::handle`) rather than read or write there. Then,
//! while nothing changes under it, it puts the shard counters (each in its
//! own shard's partition), the likes and comments pointers, moves the quiet
//! likers (an older post's), and opens the post hot with one UpdateItem
//! (`shards`, `likersMoved`, `commentsSharded`, `closing` removed). A switch whose
//! request stopped is taken over by the first request that finds the post
//! closed longer than [`CLOSING_STALE`](super::items::post::CLOSING_STALE). A post deleted while closed has its
//! deletion close the counters its switch may have made, and its walk read
//! the shards.
//!
//! A quiet post pays nothing for this: its likes, comments and reads are the
//! same calls and units as before; the conditions `attribute_not_exists(shards)`
//! and `attribute_not_exists(closing)` cost nothing.

use crate::store::items::counter::{
    CommentShardsItem, HOT_SHARDS, LikeShardsItem, MAX_SHARDS, ShardCounterItem, ShardGroupItem,
    counters_made, wider_than,
};
use crate::store::items::post::{
    CLOSING_ATTRIBUTE, COMMENTS_SHARDED_ATTRIBUTE, GROUPS_ADDED_ATTRIBUTE, LIKERS_MOVED_ATTRIBUTE,
    SHARDS_ATTRIBUTE, epoch_millis,
};
use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize;

use super::memory::Hot;
use super::{FanOut, Requests};
use super::{
    ItemType, Store, StoreError, from_item,
    items::like::{LikedMarker, LikerMarker},
    n,
    table::{Deleted, Expr, Landed, Outcome, Query, Returning, Write},
};
use crate::{
    ids::PostId,
    keys::{self, Entity, Key, PostPartition},
};

/// What the hot-post code reads of a post item: whether it is hot, and how
/// far its switch is (the item is read whole, strongly consistent; the rest
/// of it is not needed here).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PostShards {
    #[serde(default)]
    pub shards: Option<u8>,
    #[serde(default)]
    pub likers_moved: Option<bool>,
    #[serde(default)]
    pub comments_sharded: Option<bool>,
    /// Turning hot since then ([`CLOSING_ATTRIBUTE`]).
    #[serde(default)]
    pub closing: Option<u64>,
    /// A draft's: it takes no likes or comments.
    #[serde(default)]
    pub status: Option<crate::store::items::post::Unpublished>,
}

impl PostShards {
    /// What a process remembers of it, if it is hot.
    pub fn hot(&self) -> Option<Hot> {
        let moved = self.likers_moved == Some(true);
        let comments = self.comments_sharded == Some(true);
        self.shards.map(|shards| Hot::new(shards, moved, comments))
    }
}

impl Store {
    /// A hot post's comments sharded: its comments pointer (made or raised
    /// to as many shards as the post has), then its `commentsSharded` (if it
    /// still has as many), after the switch (the switch's request, else the
    /// fan-out: [`FanOut::finish_switch`]) or for a post made hot before comments went to shards
    /// (`blog-admin migrate`). Nothing if it has both, or widened meanwhile
    /// (the next one does it). From then on its new comments go to its
    /// shards, after every comment of its own partition, where Q4 finds
    /// them; until then they stay in its partition, counted in a shard.
    pub(super) async fn shard_comments(&self, post: &PostId, shards: u8) -> Result<(), StoreError> {
        self.raise_pointer(
            CommentShardsItem::key_of(post),
            ItemType::CommentShards,
            post,
            shards,
        )
        .await?;
        let set = Expr::new("SET #comments = :yes")
            .name("#comments", COMMENTS_SHARDED_ATTRIBUTE)
            .value(":yes", AttributeValue::Bool(true));
        let still = Expr::item_exists()
            .and("#shards = :shards AND attribute_not_exists(#comments)")
            .name("#shards", SHARDS_ATTRIBUTE)
            .name("#comments", COMMENTS_SHARDED_ATTRIBUTE)
            .value(":shards", n(u64::from(shards)));
        let landed = Landed::When(vec![(
            COMMENTS_SHARDED_ATTRIBUTE,
            AttributeValue::Bool(true),
        )]);
        let update = Write::update(keys::post_item(post).item(), set, landed).when(still);
        self.db.write("comments sharded", &update).await?;
        Ok(())
    }

    /// A pointer of `post`'s (`kind`: its likes' or its comments', at
    /// `key`) made, or raised, to `shards`; never lowered: a widening that
    /// raised it meanwhile stands. One small write, no transaction (the
    /// post's partition is the busy one when it is written).
    async fn raise_pointer(
        &self,
        key: Key,
        kind: ItemType,
        post: &PostId,
        shards: u8,
    ) -> Result<(), StoreError> {
        let set = Expr::new("SET #type = :type, postId = :post, #shards = :shards")
            .name("#type", keys::TYPE)
            .name("#shards", SHARDS_ATTRIBUTE)
            .value(":type", kind.attribute()?)
            .value(":post", super::s(post.to_string()))
            .value(":shards", n(u64::from(shards)));
        let below = Expr::item_absent()
            .or("#shards < :shards")
            .name("#shards", SHARDS_ATTRIBUTE)
            .value(":shards", n(u64::from(shards)));
        let raise = Write::update(key.item(), set, Landed::Untold).when(below);
        self.db.write("a shards pointer", &raise).await?;
        Ok(())
    }

    /// The post item's shards and shard counts, strongly consistent; `None`
    /// when there is no such post.
    pub(super) async fn post_shards(
        &self,
        post: &PostId,
    ) -> Result<Option<PostShards>, StoreError> {
        let found = self
            .db
            .get("a hot post's shards", keys::post_item(post).item(), true)
            .await?;
        Ok(found.map(from_item).transpose()?)
    }

    /// How many shards `post` has, if this process knows it is hot.
    pub(super) fn known_shards(&self, post: &PostId) -> Option<u8> {
        self.hot.get(post).map(|hot| hot.shards)
    }

    /// What this process knows of `post` being hot.
    pub(super) fn known_hot(&self, post: &PostId) -> Option<Hot> {
        self.hot.get(post)
    }

    /// A like or comment that read the post item and found it gone: not hot
    /// any more, and gone for good (a post id is never used again).
    pub(super) fn found_gone(&self, post: &PostId) {
        self.hot.gone(post);
    }
}

impl Requests<'_> {
    /// Request (a like or a comment whose post's partition throttled it), and
    /// tests: makes `post` hot, once; the number of its shards, or `None`
    /// when another request is switching it (the caller waits for it). The
    /// post's partition is the one DynamoDB is refusing writes in, so the
    /// switch writes one small item at a time, and closes the post while it
    /// moves what the quiet post kept there:
    ///
    /// 1. the post item's `closing` (if it exists and is neither hot nor
    ///    closing), which every quiet like's and comment's count conditions
    ///    on being absent: from then on nothing new lands in the post's
    ///    partition, and its likes and comments wait;
    /// 2. `Requests::finish_closing`: the shard counters, the pointers,
    ///    the likers moved, then one update that opens the post hot.
    ///
    /// A post hot or closed already is read (404 if it is gone).
    pub async fn make_hot(&self, post: &PostId) -> Result<Option<u8>, StoreError> {
        let since = epoch_millis();
        let change = Expr::new("SET #closing = :since")
            .name("#closing", CLOSING_ATTRIBUTE)
            .value(":since", n(since));
        // Published: a draft never turns hot (an edit taking a post back
        // conditions on it not being hot: one of the two lands first).
        let quiet = Expr::item_exists()
            .and(
                "attribute_not_exists(#shards) AND attribute_not_exists(#closing) \
                 AND attribute_not_exists(#status)",
            )
            .name("#shards", SHARDS_ATTRIBUTE)
            .name("#closing", CLOSING_ATTRIBUTE)
            .name("#status", crate::store::items::post::STATUS);
        let landed = Landed::When(vec![(CLOSING_ATTRIBUTE, n(since))]);
        // The post as it was says whether its likes are marked (none to
        // move): no read of the partition that is refusing writes.
        let close = Write::update(keys::post_item(post).item(), change, landed)
            .when(quiet)
            .returning(Returning::Old);
        if let Outcome::Done(was) = self.db.write("close a post to turn it hot", &close).await? {
            tracing::info!(post_id = %post, "post closed to turn hot");
            self.hot.closed(*post);
            // Unknown after a lost answer: the move reads the post.
            let marked = was
                .as_ref()
                .and_then(|was| was.get(LIKERS_MOVED_ATTRIBUTE)?.as_bool().ok().copied());
            return self
                .finish_closing(post, since, marked == Some(true))
                .await
                .map(Some);
        }
        let found = self.post_shards(post).await?;
        match found {
            Some(found) if found.hot().is_some() => {
                let hot = found.hot().map(|hot| hot.shards);
                self.learned(post, &found);
                Ok(hot)
            }
            Some(found) => {
                self.learned(post, &found);
                Ok(None)
            }
            None => {
                self.hot.gone(post);
                Err(StoreError::PostNotFound)
            }
        }
    }

    /// A post closed to turn hot at `since` (by this request, or by one that
    /// stopped before it was done: [`Requests::learn_shards`] takes over a
    /// closing older than [`CLOSING_STALE`]) made hot: the shard counters
    /// of its 16 shards and their group (each in its own partition, put
    /// where absent: a hot like's count conditions on its counter; the
    /// widening's are the widening's, so that the post is closed for as few
    /// writes as may be), the likes and comments pointers
    /// (made or raised to [`HOT_SHARDS`]); unless its likes are `marked`
    /// already (`likersMoved`, as the close or the takeover found the post:
    /// every post this version creates), the likes it had
    /// while quiet marked in their likers' partitions for at most
    /// [`MOVE_AT_SWITCH`] ([`FanOut::move_likers`]: nothing new lands
    /// meanwhile); then one update: `shards`, `commentsSharded`, and
    /// `likersMoved` if the move is done (else the fan-out goes on with it,
    /// [`FanOut::finish_switch`], and the post's likes read the marker such
    /// a like has beside it until then), `closing` removed, if it is still
    /// `since`. The shards the post has.
    pub(super) async fn finish_closing(
        &self,
        post: &PostId,
        since: u64,
        marked: bool,
    ) -> Result<u8, StoreError> {
        let shards = HOT_SHARDS;
        let comments = CommentShardsItem::key_of(post);
        futures::try_join!(
            self.put_counters(post, 0..shards),
            self.put_like_pointer(post, shards),
            self.raise_pointer(comments, ItemType::CommentShards, post, shards),
        )?;
        let deadline = super::deadline::Deadline::at(std::time::Instant::now() + MOVE_AT_SWITCH);
        let moving = if marked {
            Ok(Moving::MarkedAlready)
        } else {
            self.fanout()
                .move_likers(post, Marked::OwnPartition, &deadline)
                .await
        };
        let moved = match moving {
            Ok(Moving::Done { moved }) => {
                tracing::info!(post_id = %post, moved, "likers moved while the post was closed");
                true
            }
            Ok(Moving::Paused { moved }) => {
                tracing::info!(post_id = %post, moved, "the rest of the likers left for the fan-out");
                false
            }
            Ok(Moving::MarkedAlready) => true,
            Ok(Moving::Stale) => false,
            Err(error) => {
                tracing::warn!(post_id = %post, %error, "likers left for the fan-out to move");
                false
            }
        };
        let mut change =
            String::from("SET #shards = :shards, #added = :none, #comments = :yes REMOVE #closing");
        if moved {
            change = change.replace(" REMOVE", ", #moved = :yes REMOVE");
        }
        let mut open = Expr::new(change)
            .name("#shards", SHARDS_ATTRIBUTE)
            .name("#added", GROUPS_ADDED_ATTRIBUTE)
            .name("#comments", COMMENTS_SHARDED_ATTRIBUTE)
            .name("#closing", CLOSING_ATTRIBUTE)
            .value(":shards", n(u64::from(shards)))
            .value(":none", AttributeValue::M(HashMap::new()))
            .value(":yes", AttributeValue::Bool(true));
        if moved {
            open = open.name("#moved", LIKERS_MOVED_ATTRIBUTE);
        }
        let still = Expr::new("#closing = :since")
            .name("#closing", CLOSING_ATTRIBUTE)
            .value(":since", n(since));
        let landed = Landed::When(vec![(SHARDS_ATTRIBUTE, n(u64::from(shards)))]);
        let open = Write::update(keys::post_item(post).item(), open, landed).when(still);
        if self.db.write("open a post hot", &open).await?.done() {
            tracing::info!(post_id = %post, shards, "post made hot");
            self.hot.remember(*post, Hot::new(shards, moved, true));
            return Ok(shards);
        }
        // Opened by a request that took over meanwhile, or deleted.
        match self.post_shards(post).await? {
            Some(found) => {
                self.learned(post, &found);
                found.hot().map(|hot| hot.shards).ok_or_else(|| {
                    StoreError::Internal(format!("post {post} closed by another switch"))
                })
            }
            None => {
                self.hot.gone(post);
                self.drop_switch(post).await?;
                Err(StoreError::PostNotFound)
            }
        }
    }

    /// What this process knows of `post` from its item, `found`: hot,
    /// turning hot, or neither.
    pub(super) fn learned(&self, post: &PostId, found: &PostShards) {
        match (found.hot(), found.closing) {
            (Some(hot), _) => self.hot.remember(*post, hot),
            (None, Some(_)) => self.hot.closed(*post),
            (None, None) => self.hot.opened(post),
        }
    }

    /// A switch of a post deleted while it was closed: its counters and
    /// pointers out (the post's walk may have read its partitions before
    /// they were written).
    async fn drop_switch(&self, post: &PostId) -> Result<(), StoreError> {
        let made = counters_made(HOT_SHARDS);
        let groups =
            ShardGroupItem::apart_groups_of(0..made).map(|g| ShardGroupItem::key_of(*post, g));
        let keys = ShardCounterItem::keys_of(*post, made)
            .chain(groups)
            .map(|key| key.item())
            .chain([
                LikeShardsItem::key_of(post).item(),
                CommentShardsItem::key_of(post).item(),
            ]);
        let deletes = keys.map(|key| async move {
            let delete = Write::delete(key, Deleted::IfGone);
            self.db.write("an unused switch item", &delete).await
        });
        futures::future::try_join_all(deletes).await?;
        Ok(())
    }
}

impl Store {
    /// The counters of `post`'s shards `range` and of their groups, each
    /// put where absent, at once: before a switch or a widening makes the
    /// post count in them (a counter is added onto its group from its first
    /// count).
    pub(super) async fn put_counters(
        &self,
        post: &PostId,
        range: std::ops::Range<u8>,
    ) -> Result<(), StoreError> {
        let groups = ShardGroupItem::apart_groups_of(range.clone())
            .map(|group| Write::create(&ShardGroupItem::new(*post, group)));
        let counters = range.map(|shard| Write::create(&ShardCounterItem::new(*post, shard)));
        let writes = groups.chain(counters).collect::<Result<Vec<_>, _>>()?;
        let puts = writes
            .iter()
            .map(|write| self.db.write("a shard or group counter", write));
        futures::future::try_join_all(puts).await?;
        Ok(())
    }

    /// A hot post's like pointer, put where absent (with as many shards as
    /// the post has: a widening changes it only once it is there).
    pub(super) async fn put_like_pointer(
        &self,
        post: &PostId,
        shards: u8,
    ) -> Result<(), StoreError> {
        let key = LikeShardsItem::key_of(post);
        self.raise_pointer(key, ItemType::LikeShards, post, shards)
            .await
    }
}

impl Requests<'_> {
    /// Request (a hot like or comment whose shard DynamoDB throttled with
    /// its count, or this process writing its shards near their limit):
    /// gives `post` eight times as many shards (at most [`MAX_SHARDS`]:
    /// 16 → 128) if it still has `from` of them; the shards this
    /// process now knows. Three steps, no transaction (one would need all
    /// its units at once in the post's partition, which is busy): the new
    /// counters (each in its own partition, where absent); the pointers'
    /// `shards` (if below: Q4 and Q5 then read shards no like is in yet,
    /// which costs a Query each and skips nothing); the post's `shards` (if
    /// still `from`), after which new likes and comments spread over the new
    /// count. Stopped between any two, the post is as it was, or reads more
    /// shards than it writes; the next widening from `from` finishes it.
    /// Likes and comments given before stay where they are (their marks and
    /// ids say where).
    pub async fn widen(&self, post: &PostId, from: u8) -> Result<u8, StoreError> {
        if from >= MAX_SHARDS {
            return Ok(from);
        }
        // Nothing of the post's partition is read first: it may be at its
        // read limit with the post's readers (each write below conditions on
        // the post's shards as it must be, and one that finds it wider
        // already reads it then). Its first shard's counter says it is not
        // deleted (its deletion deletes the counters first), so that no
        // counter is put back after.
        let first = ShardCounterItem::key_of(*post, 0).item();
        if self
            .db
            .get("a hot post's first counter", first, true)
            .await?
            .is_none()
        {
            self.found_gone(post);
            return Err(StoreError::PostNotFound);
        }
        let wider = wider_than(from);
        let below = Expr::item_exists()
            .and("#shards < :wider")
            .name("#shards", SHARDS_ATTRIBUTE)
            .value(":wider", n(u64::from(wider)));
        let set = Expr::new("SET #shards = :wider")
            .name("#shards", SHARDS_ATTRIBUTE)
            .value(":wider", n(u64::from(wider)));
        // At once: the counters of the new shards (where absent: an earlier
        // version's switch put them) and those of the next widening, and the
        // pointers, each where it is (a pointer not there yet is made with
        // the post's count by whoever makes it).
        let pointers = [
            LikeShardsItem::key_of(post),
            CommentShardsItem::key_of(post),
        ]
        .map(|pointer| {
            let update = Write::update(pointer.item(), set.clone(), Landed::Untold);
            let update = update.when(below.clone());
            async move {
                self.db.write("widen a hot post's pointer", &update).await?;
                Ok::<_, StoreError>(())
            }
        });
        futures::try_join!(
            self.put_counters(post, from..counters_made(wider)),
            futures::future::try_join_all(pointers),
        )?;
        // From here Q4 and Q5 read the new shards, and each has its counter:
        // this process's likes and comments spread over them at once.
        self.hot.widened(post, wider);
        let still = Expr::item_exists()
            .and("#shards = :from")
            .name("#shards", SHARDS_ATTRIBUTE)
            .value(":from", n(u64::from(from)));
        let landed = Landed::When(vec![(SHARDS_ATTRIBUTE, n(u64::from(wider)))]);
        let widen = Write::update(keys::post_item(post).item(), set, landed).when(still);
        if self.db.write("widen a hot post", &widen).await?.done() {
            tracing::info!(post_id = %post, shards = wider, "a hot post widened");
            if let Some(hot) = self.known_hot(post) {
                let wider_hot = Hot::new(wider, hot.likers_moved, hot.comments_sharded);
                self.hot.remember(*post, wider_hot);
            }
            return Ok(wider);
        }
        // Widened or deleted meanwhile: as it is now.
        let found = self
            .post_shards(post)
            .await?
            .ok_or(StoreError::PostNotFound)?;
        let now = found.hot().ok_or(StoreError::PostNotFound)?;
        self.hot.remember(*post, now);
        Ok(now.shards)
    }
}

/// What the fan-out's move of a hot post's likers did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moving {
    /// Every like the post had before it was hot is marked in its liker's
    /// partition, and the post says so; `moved` marks written now.
    Done { moved: usize },
    /// The deadline came first: the record is to come again (the walk goes
    /// on from where the pointer says it is).
    Paused { moved: usize },
    /// Every like of the post was marked in its liker's partition already
    /// (created by a version whose quiet likes mark themselves, or moved
    /// before): nothing to move.
    MarkedAlready,
    /// The post is gone, or neither hot nor turning hot.
    Stale,
}

/// Where the likes of a hot post may be marked beside them, for
/// [`FanOut::move_likers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marked {
    /// A post made hot by this version: the likes it had while quiet, in its
    /// own partition.
    OwnPartition,
    /// A post made hot by a version before liked marks: its shards hold the
    /// markers of its hot likes too.
    AndShards,
}

/// How long the request that makes a post hot moves its likers itself
/// before it leaves the rest to the fan-out: the post's likes read a marker
/// in its partition until they are moved, so the sooner the better.
const MOVE_AT_SWITCH: std::time::Duration = std::time::Duration::from_millis(1500);

/// How many markers the move reads a page.
const MOVE_PAGE: i32 = 100;

/// The pointer's attribute that says how far the move has got: the place
/// (`-` for the post's own partition, else the shard) and the sort key of
/// the last marker moved.
const MOVED_TO_ATTRIBUTE: &str = "movedTo";
/// The place of a move that has read every partition.
const DONE: &str = "done";

impl FanOut<'_> {
    /// A quiet post the fan-out saw written fast (all its instances'
    /// likes and comments together, `fanout::rate`) made hot as a request
    /// would ([`Requests::make_hot`]); nothing if this process knows it hot
    /// already.
    pub async fn make_hot_by_rate(&self, post: &PostId) -> Result<(), StoreError> {
        if self.known_hot(post).is_some() {
            return Ok(());
        }
        self.requests().make_hot(post).await.map(|_| ())
    }

    /// A hot post whose shards the fan-out saw written fast (all its
    /// instances' likes and comments together, `fanout::rate`), as many
    /// writes a second as would turn `partitions` quiet posts hot: widened
    /// as a request would ([`Requests::widen`]) if that is as many as its
    /// shards or more, before they refuse anything. The post is read first
    /// (strongly: a process's memory of its shards may be behind another's
    /// widening), unless this process knows it wide enough already.
    pub async fn widen_by_rate(&self, post: &PostId, partitions: f64) -> Result<(), StoreError> {
        let enough = |shards: u8| shards >= MAX_SHARDS || partitions < f64::from(shards);
        if self.known_hot(post).is_some_and(|hot| enough(hot.shards)) {
            return Ok(());
        }
        let Some(found) = self.post_shards(post).await? else {
            return Ok(());
        };
        self.requests().learned(post, &found);
        let Some(hot) = found.hot() else {
            return Ok(());
        };
        if enough(hot.shards) {
            return Ok(());
        }
        tracing::info!(post_id = %post, shards = hot.shards, partitions, "the stream shows a hot post's shards written fast: widening it");
        self.requests().widen(post, hot.shards).await.map(|_| ())
    }
}

impl FanOut<'_> {
    /// Fan-out of a hot post's MODIFY while its switch is unfinished (its
    /// likers not moved, or its comments not sharded): what the switch's
    /// request did not get to ([`Requests::make_hot`]): the likes pointer
    /// (where absent), the comments sharded, the likers moved
    /// ([`FanOut::move_likers`]). Each step is idempotent; what the post
    /// says is done is skipped.
    pub async fn finish_switch(
        &self,
        post: &PostId,
        deadline: &super::deadline::Deadline,
    ) -> Result<Moving, StoreError> {
        let Some(hot) = self.post_shards(post).await?.and_then(|found| found.hot()) else {
            return Ok(Moving::Stale);
        };
        self.put_like_pointer(post, hot.shards).await?;
        if !hot.comments_sharded {
            self.shard_comments(post, hot.shards).await?;
        }
        if hot.likers_moved {
            return Ok(Moving::MarkedAlready);
        }
        self.move_likers(post, Marked::OwnPartition, deadline).await
    }

    /// A post made hot ([`FanOut::finish_switch`], the switch's request,
    /// `blog-admin migrate`): gives every like
    /// marked beside it (given while the post was quiet, or in a shard by a
    /// version that kept marks there) a mark in its liker's own partition
    /// ([`super::likes`]), then sets the post's `likersMoved`, after which
    /// no like reads the post's partition. A page at a time, its place
    /// kept on the pointer, until the deadline is near.
    ///
    /// Each mark is put only where none is; then the markers of the page are
    /// read again (strongly consistent), and a mark whose marker is gone or
    /// names another like (taken back as it was copied: the unlike deleted
    /// the mark before the put) is deleted again. An unlike that believes
    /// the post quiet cannot land once it is hot (its count's condition), and
    /// one that knows deletes the mark with the marker, so no mark outlives
    /// its like.
    pub async fn move_likers(
        &self,
        post: &PostId,
        from: Marked,
        deadline: &super::deadline::Deadline,
    ) -> Result<Moving, StoreError> {
        let Some(found) = self.post_shards(post).await? else {
            return Ok(Moving::Stale);
        };
        // Turning hot: its own partition only (its shards are empty yet).
        let Some(shards) = found.shards.or(found.closing.map(|_| 0)) else {
            return Ok(Moving::Stale);
        };
        if found.likers_moved == Some(true) {
            return Ok(Moving::MarkedAlready);
        }
        let pointer = LikeShardsItem::key_of(post);
        let moved_to = self
            .db
            .get("a likes pointer", pointer.item(), true)
            .await?
            .and_then(|item| item.get(MOVED_TO_ATTRIBUTE)?.as_s().ok().cloned());
        let shards = match from {
            Marked::OwnPartition => 0,
            Marked::AndShards => shards,
        };
        let places: Vec<PostPartition> = std::iter::once(PostPartition::own(*post))
            .chain((0..shards).map(|k| PostPartition::shard(*post, k)))
            .collect();
        let (mut at, mut start) = match moved_to.as_deref().and_then(|f| f.split_once('/')) {
            Some((DONE, _)) => (places.len(), None),
            Some((place, sk)) => (
                places
                    .iter()
                    .position(|p| place_label(*p) == place)
                    .unwrap_or(0),
                Some(sk.to_owned()),
            ),
            None => (0, None),
        };
        let mut moved = 0;
        while let Some(place) = places.get(at).copied() {
            if moved > 0 && deadline.near() {
                return Ok(Moving::Paused { moved });
            }
            let mut query = Query::partition(place.pk())
                .begins_with(keys::LIKER_PREFIX)
                .consistent();
            if let Some(sk) = &start {
                query = query.after(sk.clone());
            }
            let page = self
                .db
                .query_page("likers to move", &query, None, Some(MOVE_PAGE));
            let page = page.await?;
            let markers: Vec<LikerMarker> = page
                .items
                .into_iter()
                .map(|item| LikerMarker::decode(item).map_err(StoreError::from))
                .collect::<Result<_, _>>()?;
            moved += self.mark_moved(&markers).await?;
            let progressed = !markers.is_empty();
            match (page.next.is_some(), markers.last()) {
                (true, Some(last)) => start = Some(last.key().sk),
                _ => {
                    at += 1;
                    start = None;
                }
            }
            if !progressed {
                // An empty partition: read again, if it comes to that.
                continue;
            }
            let to = match places.get(at) {
                Some(next) => format!(
                    "{}/{}",
                    place_label(*next),
                    start.clone().unwrap_or_default()
                ),
                None => format!("{DONE}/"),
            };
            let progress = Write::update(
                pointer.item(),
                Expr::new("SET #to = :to")
                    .name("#to", MOVED_TO_ATTRIBUTE)
                    .value(":to", super::s(to.clone())),
                Landed::When(vec![(MOVED_TO_ATTRIBUTE, super::s(to))]),
            )
            .when(Expr::item_exists());
            if let Outcome::ConditionFailed { .. } =
                self.db.write("likers moved so far", &progress).await?
            {
                // The post was deleted: its walk takes the rest.
                return Ok(Moving::Stale);
            }
        }
        let done = Write::update(
            keys::post_item(post).item(),
            Expr::new("SET #moved = :yes")
                .name("#moved", LIKERS_MOVED_ATTRIBUTE)
                .value(":yes", AttributeValue::Bool(true)),
            Landed::When(vec![(LIKERS_MOVED_ATTRIBUTE, AttributeValue::Bool(true))]),
        )
        .when(Expr::item_exists());
        self.db.write("likers moved", &done).await?;
        tracing::info!(post_id = %post, moved, "a hot post's likers are marked in their partitions");
        Ok(Moving::Done { moved })
    }

    /// Marks for the likes `markers` guard, each put only where there is
    /// none; then the markers read again, and a mark whose marker changed
    /// meanwhile deleted again. How many marks were put.
    async fn mark_moved(&self, markers: &[LikerMarker]) -> Result<usize, StoreError> {
        if markers.is_empty() {
            return Ok(0);
        }
        let puts = markers.iter().map(|marker| async move {
            let mark = Write::create(&LikedMarker::moved(marker))?;
            let put = self.db.write("a moved liked mark", &mark).await?;
            Ok::<_, StoreError>(usize::from(matches!(put, Outcome::Done(_))))
        });
        let put: usize = futures::future::try_join_all(puts).await?.into_iter().sum();
        let keys = markers.iter().map(|m| m.key().item()).collect();
        let (again, _) = self.db.batch_get("likers moved, read again", keys).await?;
        let still: Vec<LikerMarker> = again
            .into_iter()
            .map(|item| LikerMarker::decode(item).map_err(StoreError::from))
            .collect::<Result<_, _>>()?;
        for marker in markers {
            let kept = still
                .iter()
                .any(|s| s.user_id == marker.user_id && s.like_id == marker.like_id);
            if !kept {
                let mark = LikedMarker::moved(marker);
                let names_it = Expr::new("likeId = :like")
                    .value(":like", super::s(marker.like_id.to_string()));
                let undo = Write::delete(mark.key().item(), Deleted::Untold).when(names_it);
                self.db.write("a moved mark taken back", &undo).await?;
            }
        }
        Ok(put)
    }
}

/// How [`FanOut::move_likers`]'s place names a partition of the post.
fn place_label(place: PostPartition) -> String {
    match place.shard {
        None => "-".to_owned(),
        Some(shard) => shard.to_string(),
    }
}
