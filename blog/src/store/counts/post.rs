//! A post's counts (request, fan-out): where its `likeCount` and
//! `commentCount` go up or down, in the transaction of the like or comment
//! they count (the request's, or the erasure walk's); the one loop every
//! like and comment counts up through; and what the fan-out's add of a hot
//! post's shard counters onto the post item
//! ([`crate::store::FanOut::add_shard_counts`]) adds where.
//!
//! A count is on the post item while the post is quiet, in one of its
//! shard counters once it is hot ([`crate::store::hot`]). Counting up, a request
//! does not know which for sure, so `Requests::count_up` goes round:
//!
//! 1. the shards this process knows the post has (none: the post item);
//! 2. one attempt: the caller's transaction, counting where step 1 says;
//! 3. throttled on the post's own partition ⇒ the post is made hot
//!    (`Requests::switch_if_hot`), and the next attempt counts in a shard;
//!    throttled on a hot post's shard ⇒ it widens, up to
//!    [`crate::store::items::counter::MAX_SHARDS`] (`Requests::widen`), so their number
//!    follows the rate the post takes;
//! 4. the count refused by its condition ⇒ the post is gone (404) or hot
//!    meanwhile: its shards are learned (`Requests::learn_shards`) and
//!    the next attempt counts there.
//!
//! Counting down is its inverse, with no loop: a like or comment taken back
//! is counted down where it was counted up (it says where: `shard`,
//! `countedIn`), and a refusal there means the post is gone.

use std::future::Future;

use super::{ShardCounter, Step, Tally, above_zero, step};
use crate::store::{
    Busy, Item, Requests, StoreError,
    items::counter::{MAX_SHARDS, ShardCounterItem, ShardGroupItem},
    items::post::{
        ADDED_ATTRIBUTE, CLOSING_ATTRIBUTE, GROUPS_ADDED_ATTRIBUTE, LIKERS_MOVED_ATTRIBUTE,
        SHARDS_ATTRIBUTE,
    },
    table::{Expr, Landed, Room, Throttle, Write},
};
use crate::{
    ids::PostId,
    keys::{self, Counter, Key},
};

/// How long a like or comment of a post turning hot waits before it looks
/// again whether it is hot (in this process: reading the post is one
/// request's a while, [`crate::store::handle`]).
const CLOSED_WAIT: std::time::Duration = std::time::Duration::from_millis(25);

/// `counter` of the item at `key` (a post, or a hot post's shard counter) one
/// `step` up or down, its `version` one up ([`step`]), as a transaction's
/// item: it must exist and meet `also`, and going down the counter must be
/// above 0.
fn step_counter(key: Item, counter: Counter, way: Step, also: Option<Expr>) -> Write {
    let change = step(counter.attribute(), way, "");
    let condition = match way {
        Step::Up => Expr::item_exists(),
        Step::Down => Expr::item_exists().and_expr(above_zero(counter.attribute())),
    };
    let condition = match also {
        None => condition,
        Some(also) => condition.and_expr(also),
    };
    // Its transaction's create or delete tells whether it committed.
    Write::update(key, change, Landed::Untold).when(condition)
}

/// `counter` one `step` up or down where it is counted: on the post item
/// (`shard` `None`), whose condition also fails going up once the post is
/// hot (its new likes and comments count in its shards), or in shard
/// `shard`'s counter, whose condition fails once the post is deleted (its
/// deletion deletes the counters). Going down, either fails at 0, which an
/// exact count never is while the counted item exists.
fn counted(post: &PostId, shard: Option<u8>, counter: Counter, step: Step) -> Write {
    match shard {
        None => {
            let quiet = (step == Step::Up).then(still_quiet);
            step_counter(keys::post_item(post).item(), counter, step, quiet)
        }
        Some(shard) => {
            let key = ShardCounterItem::key_of(*post, shard).item();
            step_counter(key, counter, step, None)
        }
    }
}

/// Where a post's counter for a new like or comment is, by what is known of
/// it: the post item while it is quiet, a shard's counter once it is hot.
pub fn counted_up(post: &PostId, shard: Option<u8>, counter: Counter) -> Write {
    counted(post, shard, counter, Step::Up)
}

/// A quiet like guarded by its liker's mark alone (no marker beside it):
/// one up on the post item's `likeCount`, which fails, as [`counted_up`]'s,
/// once the post is hot or turning hot, and on a post whose likes are not
/// all marked (`likersMoved` absent: created by a version before quiet likes
/// were marked, whose likes are unique by the marker beside them). Free.
pub(in crate::store) fn counted_up_marked(post: &PostId) -> Write {
    let marked = Expr::new("#moved = :yes")
        .name("#moved", LIKERS_MOVED_ATTRIBUTE)
        .value(":yes", aws_sdk_dynamodb::types::AttributeValue::Bool(true));
    let also = still_quiet().and_expr(marked);
    step_counter(
        keys::post_item(post).item(),
        Counter::Likes,
        Step::Up,
        Some(also),
    )
}

/// Where a like or comment being taken back was counted: on the post item
/// (`None`: given while the post was quiet), or in a shard.
pub(in crate::store) fn counted_down(post: &PostId, shard: Option<u8>, counter: Counter) -> Write {
    counted(post, shard, counter, Step::Down)
}

/// A like given while the post was quiet, taken back by a request that
/// believes it still is: one off the post item's `likeCount`, which fails
/// once the post is hot or turning hot. Then its liker may have a mark of it
/// in their own partition ([`crate::store::hot::FanOut::move_likers`]), which the
/// request must take back too: it learns the post is hot (or turning hot)
/// and goes the hot way. The condition costs nothing.
pub(in crate::store) fn counted_down_while_quiet(post: &PostId, counter: Counter) -> Write {
    step_counter(
        keys::post_item(post).item(),
        counter,
        Step::Down,
        Some(still_quiet()),
    )
}

/// The post item is neither hot nor turning hot ([`crate::store::hot`]), nor a
/// draft: what a count on it conditions on where the post's being hot would
/// change where the count goes (and a draft takes none: the refused count
/// reads the post and answers 404). Free: a condition on the item written
/// costs nothing.
fn still_quiet() -> Expr {
    Expr::new(
        "attribute_not_exists(#shards) AND attribute_not_exists(#closing) \
         AND attribute_not_exists(#status)",
    )
    .name("#shards", SHARDS_ATTRIBUTE)
    .name("#closing", CLOSING_ATTRIBUTE)
    .name("#status", crate::store::items::post::STATUS)
}

/// Where one attempt counts up: in the shards this process knows the post
/// has (`None`: on the post item), and whether a throttle of the post's
/// partition may make it hot (the attempt then watches its items there:
/// `Transaction::yield_when_throttled`).
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct Counting {
    pub shards: Option<u8>,
    /// The post is hot and its quiet likes' marks are in their likers'
    /// partitions: a like need not read the post's.
    pub likers_moved: bool,
    /// The post is hot and its new comments go to its shards.
    pub comments_sharded: bool,
    pub watch: bool,
    /// How many times this request's count was throttled so far (a like
    /// goes to another shard after each: [`crate::store::items::counter::like_shard`]).
    pub throttled: u32,
}

/// What one attempt that counts up did.
#[derive(Debug)]
pub(in crate::store) enum Tried<T> {
    /// The caller's answer.
    Done(T),
    /// Throttled on every item watched in the post's partition.
    Throttled,
    /// The count's condition refused it: the post is gone, or hot.
    Refused,
    /// Something else changed under it (a like taken back meanwhile).
    Again,
}

impl Requests<'_> {
    /// The loop every like and comment counts up through (the module's
    /// docs): first its write noted in the process's rates
    /// ([`crate::store::memory::WriteRates`]), and the post made hot (or,
    /// hot, widened) once they reach their threshold (before its partitions
    /// refuse anything); then `attempt` at most `attempts`
    /// times, each told where to count;
    /// `None` when they ran out. A hot post's shard throttled with its count
    /// is not retried by the table layer but here, after the table's
    /// backoff and within its attempts and budget (one retry layer): each
    /// try picks its shard again, among as many as the post has by then.
    pub(in crate::store) async fn count_up<T, F, Fut>(
        &self,
        post: &PostId,
        attempts: usize,
        mut attempt: F,
    ) -> Result<Option<T>, StoreError>
    where
        F: FnMut(Counting) -> Fut,
        Fut: Future<Output = Result<Tried<T>, StoreError>>,
    {
        let mut watch = self.hot_switch;
        let backoff = *self.db.backoff();
        let started = std::time::Instant::now();
        let (mut tries, mut throttled, mut probed) = (0, 0_u32, false);
        // Written fast by this process: hot, or wider, before its
        // partitions refuse anything.
        if self.hot_switch {
            match self.known_hot(post) {
                None if self.rates.note(post, 1) => {
                    tracing::info!(post_id = %post, "a post written fast turns hot");
                    watch = self.switch_once(post, &mut true).await?;
                }
                Some(hot) if hot.shards < MAX_SHARDS && self.rates.note(post, hot.shards) => {
                    self.widen_once(post, hot.shards).await?;
                }
                _ => {}
            }
        }
        while tries < attempts {
            if self.hot.is_gone(post) {
                return Err(StoreError::PostNotFound);
            }
            // Refused by DynamoDB, the read leaves what is known as it is:
            // the likes go on (reading a quiet like's marker) until the next.
            if self.hot.claim_relearn(post) {
                match self.learn_shards(post).await {
                    Err(StoreError::Busy { cause, detail }) => {
                        tracing::info!(post_id = %post, cause = cause.as_str(), %detail, "a hot post not read again yet");
                    }
                    other => other?,
                }
            }
            if self.hot.claim_closing_relearn(post) {
                match self.learn_shards(post).await {
                    Err(StoreError::Busy { cause, detail }) => {
                        tracing::info!(post_id = %post, cause = cause.as_str(), %detail, "a post turning hot not read again yet");
                    }
                    other => other?,
                }
            }
            if self.hot.is_closing(post) {
                // Turning hot: nothing is counted until it is.
                if started.elapsed() + CLOSED_WAIT > backoff.budget {
                    return Err(StoreError::busy(
                        Busy::Throttled,
                        "the post stayed closed while it turned hot",
                    ));
                }
                tokio::time::sleep(CLOSED_WAIT).await;
                continue;
            }
            let known = self.known_hot(post);
            let counting = Counting {
                shards: known.map(|hot| hot.shards),
                likers_moved: known.is_some_and(|hot| hot.likers_moved),
                comments_sharded: known.is_some_and(|hot| hot.comments_sharded),
                watch,
                throttled,
            };
            match attempt(counting).await? {
                Tried::Done(answer) => return Ok(Some(answer)),
                Tried::Throttled => {
                    match counting.shards {
                        None => watch = self.switch_once(post, &mut probed).await?,
                        // At the most shards: the next try goes to another
                        // (a like's `like_shard`, a comment's new id).
                        Some(shards) if shards >= MAX_SHARDS => {}
                        Some(shards) => {
                            self.widen_once(post, shards).await?;
                            // Widened meanwhile (by this request or
                            // another): at once, among the new shards; being
                            // widened by another request of this process:
                            // its shards are known to be too few, so wait
                            // for it rather than spend attempts on them.
                            while self.known_shards(post) == Some(shards)
                                && self.hot.is_widening(post)
                            {
                                if started.elapsed() + CLOSED_WAIT > backoff.budget {
                                    return Err(StoreError::busy(
                                        Busy::Throttled,
                                        "the post's shards stayed too few while it widened",
                                    ));
                                }
                                tokio::time::sleep(CLOSED_WAIT).await;
                            }
                            if self.known_shards(post) != Some(shards) {
                                continue;
                            }
                        }
                    }
                    throttled += 1;
                    let delay = backoff.delay(throttled);
                    if throttled >= backoff.attempts || started.elapsed() + delay > backoff.budget {
                        return Err(StoreError::busy(
                            Busy::Throttled,
                            "the post's partitions stayed throttled",
                        ));
                    }
                    tokio::time::sleep(delay).await;
                }
                Tried::Refused => {
                    self.learn_shards(post).await?;
                    tries += 1;
                }
                Tried::Again => tries += 1,
            }
        }
        Ok(None)
    }

    /// A quiet post's partition throttled a like or comment with its count:
    /// [`Requests::switch_if_hot`] the first time in a request (one probe
    /// a request: each is a write in the partition that is refusing them),
    /// [`Requests::make_hot`] after; whether to go on watching for
    /// throttles. A switch DynamoDB refuses (the post's partition is what is
    /// busy) is tried again at the next throttle.
    async fn switch_once(&self, post: &PostId, probed: &mut bool) -> Result<bool, StoreError> {
        if !self.hot.claim_switch(post) {
            // Another request of this process is switching it: wait for it.
            return Ok(true);
        }
        let switched = if *probed {
            self.make_hot(post).await.map(|_| true)
        } else {
            *probed = true;
            self.switch_if_hot(post).await
        };
        match switched {
            Err(StoreError::Busy { cause, detail }) => {
                tracing::warn!(post_id = %post, cause = cause.as_str(), %detail, "a post not made hot yet");
                // Another request may try: the post is as it was, or closed
                // (then the item says so, and a stale closing is taken over).
                self.hot.opened(post);
                Ok(true)
            }
            Ok(watch) => {
                if !watch {
                    self.hot.opened(post);
                } else if self.known_hot(post).is_none() {
                    // Another process is switching it: wait, reading it
                    // again now and then.
                    self.hot.switch_released(post);
                }
                Ok(watch)
            }
            Err(error) => {
                self.hot.opened(post);
                Err(error)
            }
        }
    }

    /// A hot post's shard throttled with its count: one request of the
    /// process widens the post from `shards` ([`Requests::widen`]); the
    /// others go on. A widening DynamoDB refuses (the post's partition is
    /// busy: the fan-out adds counts there) leaves the post as it is, and a
    /// later throttle tries again.
    async fn widen_once(&self, post: &PostId, shards: u8) -> Result<(), StoreError> {
        if !self.hot.claim_widening(post, shards) {
            return Ok(());
        }
        tracing::info!(post_id = %post, shards, "widening a hot post");
        match self.widen(post, shards).await {
            Ok(_) => Ok(()),
            Err(StoreError::PostNotFound) => Err(StoreError::PostNotFound),
            Err(error) => {
                tracing::warn!(post_id = %post, %error, "a hot post not widened");
                self.hot.widening_failed(post);
                Ok(())
            }
        }
    }

    /// A like's or a comment's count refused by its condition: the post is
    /// gone (404), or it is hot (remembered, and the caller tries again in its
    /// shards), or its likes are not marked (remembered: its likes put their
    /// marker beside them).
    ///
    /// A post turning hot is remembered so (its likes and comments wait);
    /// one closed longer than [`crate::store::items::post::CLOSING_STALE`] had its switch's
    /// request stop before it was done, and this one takes the switch over
    /// (`Requests::finish_closing`), one request of the process at a time.
    pub(in crate::store) async fn learn_shards(&self, post: &PostId) -> Result<(), StoreError> {
        let Some(found) = self.post_shards(post).await? else {
            self.hot.gone(post);
            return Err(StoreError::PostNotFound);
        };
        // A draft takes nothing (it may be published later: not gone).
        if found.status.is_some() {
            return Err(StoreError::PostNotFound);
        }
        self.learned(post, &found);
        if found.hot().is_none() && found.closing.is_none() && found.likers_moved != Some(true) {
            // Created before quiet likes were marked: its likes put their
            // marker too (`counted_up_marked` refused them).
            self.authors.unmarked(post);
        }
        if let Some(since) = found.closing
            && found.hot().is_none()
            && crate::store::items::post::closing_is_stale(since)
            && self.hot.claim_switch_over(post)
        {
            tracing::warn!(post_id = %post, since, "a switch to hot taken over");
            let marked = found.likers_moved == Some(true);
            match self.finish_closing(post, since, marked).await {
                Ok(_) => {}
                Err(StoreError::Busy { cause, detail }) => {
                    tracing::warn!(post_id = %post, cause = cause.as_str(), %detail, "a switch taken over, not finished");
                    self.hot.switch_released(post);
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// A like's or a comment's transaction was throttled on every item it
    /// has in the post's partition, which says that partition is at its
    /// limit (an index partition refuses only the item that writes to it,
    /// and the table's on-demand maximum the whole request, never an item).
    /// Makes the post hot unless a probe of the post item
    /// ([`crate::store::table::Table::probe_write`]) is refused for another
    /// limit (an index's, the table's): then nothing is switched, and
    /// `false` says to retry without watching for throttles again. A probe
    /// that finds room (its one unit fits where the transaction's six did
    /// not, or the burst has passed) does not undo what the cancellation
    /// showed.
    pub(in crate::store) async fn switch_if_hot(&self, post: &PostId) -> Result<bool, StoreError> {
        let probe = self.db.probe_write(keys::post_item(post).item()).await?;
        match probe {
            Room::Refused(cause @ (Throttle::Index | Throttle::Table)) => {
                tracing::info!(post_id = %post, ?cause, "a throttle elsewhere: the post stays quiet");
                Ok(false)
            }
            Room::Now | Room::Refused(Throttle::KeyRange | Throttle::Unstated) => {
                self.make_hot(post).await?;
                Ok(true)
            }
        }
    }
}

/// The likes and comments a counter counts, onto its owner's `likeCount`
/// and `commentCount`, what it added of each kept as `{"l", "c", "v"}`
/// ([`Added`](crate::store::items::counter::Added)).
const POST_TALLIES: &[Tally] = &[
    Tally {
        total: Counter::Likes.attribute(),
        letter: "l",
    },
    Tally {
        total: Counter::Comments.attribute(),
        letter: "c",
    },
];

/// A hot post's shard counter, as the fan-out adds it onto its group
/// counter (what it added of each shard kept in the group's `shardCounts`);
/// one of a post made hot before groups were, onto the post item itself
/// (in the post's `shardCounts`).
impl ShardCounter for ShardCounterItem {
    const ADDED: &'static str = ADDED_ATTRIBUTE;
    const TALLIES: &'static [Tally] = POST_TALLIES;
    const MOVES_VERSION: bool = true;

    fn owner(&self) -> Key {
        match self.group() {
            Some(group) => ShardGroupItem::key_of(self.post_id, group),
            None => keys::post_item(&self.post_id),
        }
    }

    fn shard(&self) -> u8 {
        self.shard
    }

    fn version(&self) -> u64 {
        self.version
    }

    fn counts(&self) -> Vec<u64> {
        vec![self.like_count, self.comment_count]
    }

    fn entry(shard: u8) -> String {
        shard.to_string()
    }
}

/// A hot post's group counter, as the fan-out adds it onto the post: what
/// it added of each group kept in the post's `groupCounts`, 8 entries at
/// most.
impl ShardCounter for ShardGroupItem {
    const ADDED: &'static str = GROUPS_ADDED_ATTRIBUTE;
    const TALLIES: &'static [Tally] = POST_TALLIES;
    const MOVES_VERSION: bool = true;

    fn owner(&self) -> Key {
        keys::post_item(&self.post_id)
    }

    fn shard(&self) -> u8 {
        self.group
    }

    fn version(&self) -> u64 {
        self.version
    }

    fn counts(&self) -> Vec<u64> {
        vec![self.like_count, self.comment_count]
    }

    fn entry(group: u8) -> String {
        group.to_string()
    }
}
