//! Erasing a user (`DELETE /users/{userId}`, GDPR article 17).
//!
//! The request deletes the profile and the username claim (the name is free
//! at once) and puts a small mark, `USER#u / ERASED`, in one transaction:
//! from then on every write of the user but the erasure answers 403
//! `account_erased`, before it looks at its target: each reads the profile
//! and the mark first, with one strongly consistent Query ([`crate::store::Requests::writer`]).
//! The fan-out, on the profile's REMOVE record, deletes everything the user
//! wrote, found under their GSI1 partition, a page at a time:
//! - a post as `DELETE /posts/{id}` deletes it (its REMOVE then clears its
//!   partition and its feed entry, and the feed's reserve shows the next);
//! - a comment or a like on someone's post with that post's count one down,
//!   in one transaction, as deleting the comment or unliking does;
//! - a follow as unfollowing does, a block with its mark in the blocked
//!   user's partition (the blocks others made of the account stay: they are
//!   the blockers' own, and still hold against a new account of the same
//!   identity).
//!
//! Before the walk, the user's notifications go (`NOTIFY#u`, a page of keys
//! at a time).
//!
//! Each page it deletes is gone from the next Query, so the walk needs no
//! saved place: stopped near the deadline (the record is reported failed) or
//! killed, it goes on from what is left when the record comes again. Once
//! GSI1 has had [`Store::gsi_lag_bound`](super::Store::gsi_lag_bound) to
//! show what was written before the erasure and the partition reads empty,
//! the mark says `done`, and the same user may make a new profile, which
//! starts past the erased one's version.
//!
//! A write that had read the profile before the erasure may commit after it
//! (a like in flight): the fan-out's INSERT rule finds its author erased
//! (`FanOut::author_of_new_item`: no profile and a mark at or above the
//! item's `userVersion`, or a new profile that started above it) and removes
//! it the same way. The mark stays (about 100 bytes) so that such a late item
//! is known for what it is, and so that a second `DELETE` is a no-op.
//!
//! This module holds the erasure's own writes: the request's transaction, the
//! mark, the walk, the transactions that take out a comment, a like or a
//! block, and the deletion of the notifications, the rename's place and the
//! request records. What it borrows: a post goes by
//! `Store::delete_post_by` (`deletion.rs`), as its author's
//! `DELETE /posts/{id}` does; a count goes one down by the write
//! `counts/post.rs` builds for wherever it was counted (the post item or a
//! shard); a follow, and the account's followers and home, go by the
//! unfollow's take-back (`follows.rs`).

use aws_sdk_dynamodb::types::AttributeValue;
use futures::StreamExt;

#[cfg(feature = "admin")]
use super::Admin;
use super::{
    Busy, Item, StoreError,
    counts::post as counts,
    deadline::Deadline,
    items::block::{BLOCK_ID, BlockItem},
    items::comment::CommentItem,
    items::request_record::USER_VERSION,
    items::user::{ErasureMark, UserItem, UsernameClaim},
    n, s,
    table::{Deleted, Expr, Landed, Query, TxOutcome, Write},
    users::Writer,
};
use super::{FanOut, Requests};
use crate::{
    ids::{CommentId, LikeId, PostId, UserId},
    keys::{self, Counter, Key, PK, PostPartition, REQUEST_PREFIX, SK},
    revision::Expected,
    timestamp,
};

/// How often the request re-reads a profile renamed under it.
const ATTEMPTS: usize = 5;
/// How many of the user's items one page of the walk reads.
const PAGE: i32 = 100;
/// How many items the walk deletes at once.
const CONCURRENCY: usize = 16;
/// How many of the user's notifications one call deletes (keys read in one
/// Query page).
const NOTIFICATION_PAGE: i32 = 500;
/// How often erasing a comment reads it again when it was counted elsewhere
/// than its transaction took it to be (its post turned hot meanwhile).
const COMMENT_ATTEMPTS: usize = 3;

/// What `DELETE /users/{userId}` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Erased {
    /// The profile was erased by this request.
    Now,
    /// It had been erased before (a repeated request).
    Already,
}

/// What one invocation of the walk deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Erasing {
    pub posts: usize,
    pub comments: usize,
    pub likes: usize,
    pub follows: usize,
    pub blocks: usize,
}

impl Erasing {
    pub fn total(&self) -> usize {
        self.posts + self.comments + self.likes + self.follows + self.blocks
    }
}

impl std::ops::AddAssign for Erasing {
    fn add_assign(&mut self, other: Self) {
        self.posts += other.posts;
        self.comments += other.comments;
        self.likes += other.likes;
        self.follows += other.follows;
        self.blocks += other.blocks;
    }
}

/// How an invocation of the walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErasureStep {
    /// Nothing the user wrote is left; the mark says so.
    Done(Erasing),
    /// Stopped before the deadline: the record must come again.
    Paused(Erasing),
    /// There is no erasure to walk (no mark, or its walk was done before).
    Stale,
}

/// One of the user's items, as GSI1 lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Post(PostId),
    Comment(PostPartition, CommentId),
    Like(PostPartition, LikeId),
    /// Their follow of another user.
    Follow(UserId),
    /// Their block of another user.
    Block(UserId),
}

impl Written {
    /// What the item at `key` (a table key) is, if the user wrote it.
    pub fn of(key: &Key) -> Option<Self> {
        if let Some(followed) = keys::followed_of_sk(&key.sk) {
            return keys::user_of_pk(&key.pk).map(|_| Self::Follow(followed));
        }
        if let Some(blocked) = keys::blocked_of_sk(&key.sk) {
            return keys::user_of_pk(&key.pk).map(|_| Self::Block(blocked));
        }
        let place = PostPartition::of_pk(&key.pk)?;
        let post = place.post;
        if key.sk == keys::POST_SK {
            return Some(Self::Post(post));
        }
        if let Some(comment) = keys::comment_of_sk(&key.sk) {
            return Some(Self::Comment(place, comment));
        }
        keys::like_of_sk(&key.sk).map(|like| Self::Like(place, like))
    }
}

impl Requests<'_> {
    /// `DELETE /users/{userId}` (request): the profile and its username
    /// claim go, and the mark is put, in one transaction (the profile and
    /// the mark read first, by one strongly consistent Query:
    /// [`crate::store::Requests::writer`]; a rename in between makes it read again). Without
    /// a profile: [`Erased::Already`] if a mark says it was erased, else
    /// [`StoreError::UserNotFound`].
    pub async fn erase_user(&self, user: &UserId) -> Result<Erased, StoreError> {
        for _ in 0..ATTEMPTS {
            let profile = match self.writer(user).await? {
                Writer::Active(profile) => profile,
                Writer::Erased => return Ok(Erased::Already),
                Writer::NoProfile => return Err(StoreError::UserNotFound),
            };
            let mark = ErasureMark {
                user_id: user.clone(),
                version: profile.version,
                erased_at: timestamp::now(),
                done: false,
            };
            let unchanged = Expr::new("version = :seen").value(":seen", n(profile.version));
            let theirs = Expr::new("userId = :me").value(":me", s(user.as_str()));
            let mut tx = self.db.transaction("erase user");
            let removed = tx.add(
                "profile",
                Write::delete(UserItem::key(user), Deleted::IfGone).when(unchanged),
            );
            let claim = UsernameClaim::key(&profile.username);
            let claim = Write::delete(claim, Deleted::Untold).when(theirs);
            tx.add("username claim", claim);
            let erased_at = Landed::When(vec![("erasedAt", s(&mark.erased_at))]);
            tx.add("erasure mark", Write::put(&mark, erased_at)?);
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(Erased::Now),
                // Renamed (or erased) since it was read: read it again.
                TxOutcome::ConditionFailed(failed) if failed.failed(removed) => continue,
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("erase user")),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the profile kept changing during the erasure",
        ))
    }
}

impl FanOut<'_> {
    /// Fan-out of an erased profile: deletes everything `user` wrote, a page
    /// of GSI1 at a time, until none is left or `deadline` is near; then the
    /// rename walk's place, and the mark says `done`.
    pub async fn erase_items(
        &self,
        user: &UserId,
        deadline: &Deadline,
    ) -> Result<ErasureStep, StoreError> {
        match self.erasure_mark(user).await? {
            Some(mark) if !mark.done => self.walk_erasure(&mark, deadline).await,
            _ => Ok(ErasureStep::Stale),
        }
    }

    async fn walk_erasure(
        &self,
        mark: &ErasureMark,
        deadline: &Deadline,
    ) -> Result<ErasureStep, StoreError> {
        let user = &mark.user_id;
        let mut done = Erasing::default();
        let mut first = true;
        loop {
            // At least one page per invocation, however short its time.
            if !first && deadline.near() {
                return Ok(ErasureStep::Paused(done));
            }
            first = false;
            let query = Query::gsi1(keys::user_items_pk(user))
                .project(Expr::new("#k1, #k2").name("#k1", PK).name("#k2", SK));
            let page = self.db.query_page("erasure walk", &query, None, Some(PAGE));
            let page = page.await?;
            if page.items.is_empty() {
                if self.wait_for_index(mark).await? {
                    continue;
                }
                break;
            }
            done += self.erase_page(user, page.items).await?;
        }
        // Who followed the account, and its home.
        let (unfollowed, finished) = self.erase_followers(user, mark.version, deadline).await?;
        done.follows += unfollowed;
        if !finished {
            return Ok(ErasureStep::Paused(done));
        }
        let progress = Write::delete(keys::rename_progress(user).item(), Deleted::IfGone);
        self.db
            .write("erasure: the rename's place", &progress)
            .await?;
        // The answers kept for the account's Idempotency-Keys hold its name
        // and what it wrote: they go too, not a day later by TTL.
        self.forget_requests(user, None).await?;
        // So do the marks of its likes of hot posts (each like is gone).
        self.forget_liked_marks(user).await?;
        let finished = Write::update(
            keys::erasure(user).item(),
            Expr::new("SET done = :yes").value(":yes", AttributeValue::Bool(true)),
            Landed::When(vec![("done", AttributeValue::Bool(true))]),
        )
        .when(Expr::new("erasedAt = :at").value(":at", s(&mark.erased_at)));
        self.db.write("erasure done", &finished).await?;
        tracing::info!(user_id = %user, version = mark.version, "erasure walked everything");
        Ok(ErasureStep::Done(done))
    }

    /// Whether the walk must look once more: GSI1 has not yet had its lag
    /// bound since the erasure to show items written just before it. Waits
    /// out the rest of the bound first.
    async fn wait_for_index(&self, mark: &ErasureMark) -> Result<bool, StoreError> {
        let erased_at = timestamp::parse(&mark.erased_at).ok_or_else(|| {
            StoreError::Internal(format!(
                "erasure mark has a bad erasedAt {}",
                mark.erased_at
            ))
        })?;
        let wait = erased_at + self.gsi_lag_bound() - time::OffsetDateTime::now_utc();
        if !wait.is_positive() {
            return Ok(false);
        }
        tokio::time::sleep(wait.unsigned_abs()).await;
        Ok(true)
    }

    /// Deletes one page of the user's items, [`CONCURRENCY`] at a time.
    async fn erase_page(&self, user: &UserId, keys: Vec<Item>) -> Result<Erasing, StoreError> {
        let results: Vec<Result<Erasing, StoreError>> = futures::stream::iter(keys)
            .map(|item| async move {
                let key = Key::of(&item)?;
                let written = Written::of(&key).ok_or_else(|| {
                    StoreError::Internal(format!("GSI1 lists {}/{} under a user", key.pk, key.sk))
                })?;
                self.erase_written(user, written).await
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let mut done = Erasing::default();
        for result in results {
            done += result?;
        }
        Ok(done)
    }

    /// Deletes one item `user` wrote (fan-out: the walk, and the INSERT of an
    /// item whose author was erased meanwhile); nothing when it is gone.
    ///
    /// Its transactions take their tokens from the item, not from the stream
    /// record: one record's walk runs many of them, in an order that differs
    /// between deliveries, and the same item must replay under the same
    /// tokens whichever delivery erases it.
    pub async fn erase_written(
        &self,
        user: &UserId,
        written: Written,
    ) -> Result<Erasing, StoreError> {
        let seed = format!("{}/erase/{user}/{written:?}", self.table());
        super::request_scope(seed, self.erase_one(user, written)).await
    }

    async fn erase_one(&self, user: &UserId, written: Written) -> Result<Erasing, StoreError> {
        let mut done = Erasing::default();
        match written {
            Written::Post(post) => match self.delete_post_by(&post, user, &Expected::Any).await {
                Ok(()) => done.posts += 1,
                Err(StoreError::PostNotFound) => {}
                Err(err) => return Err(err),
            },
            Written::Comment(place, comment) => {
                done.comments += usize::from(self.erase_comment(place, &comment).await?);
            }
            Written::Like(place, like) => {
                done.likes += usize::from(self.erase_like(place, &like, user).await?);
            }
            Written::Follow(followed) => {
                done.follows += usize::from(self.erase_follow(user, &followed).await?);
            }
            Written::Block(blocked) => {
                done.blocks += usize::from(self.erase_block(user, &blocked).await?);
            }
        }
        Ok(done)
    }

    /// `comment` out of `post` with one off the count it was counted in, in
    /// one transaction, as its author deleting it would; `false` when it is
    /// gone already. It is first taken to be counted on the post item (a
    /// comment made while the post was quiet); one counted in a hot post's
    /// shard fails that condition, and is read. When the post is gone (its
    /// own deletion clears its partition) the comment goes alone.
    async fn erase_comment(
        &self,
        place: PostPartition,
        comment: &CommentId,
    ) -> Result<bool, StoreError> {
        let post = &place.post;
        let key = keys::comment(place, comment).item();
        let mut counted_in = None;
        for _ in 0..COMMENT_ATTEMPTS {
            let there = match counted_in {
                None => "attribute_not_exists(countedIn)",
                Some(_) => "countedIn = :shard",
            };
            let mut there = Expr::item_exists().and(there);
            if let Some(shard) = counted_in {
                there = there.value(":shard", n(u64::from(shard)));
            }
            let mut tx = self.db.transaction("erase comment");
            let remove = Write::delete(key.clone(), Deleted::IfGone).when(there);
            let removed = tx.add("comment", remove);
            let count = counts::counted_down(post, counted_in, Counter::Comments);
            let counted = tx.add("count", count);
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(true),
                TxOutcome::ConditionFailed(failed) if failed.failed(removed) => {
                    let found = self.db.get_entity::<CommentItem>(key.clone(), true);
                    match found.await? {
                        None => return Ok(false),
                        Some(found) => counted_in = found.counted_in,
                    }
                }
                TxOutcome::ConditionFailed(failed) if failed.failed(counted) => {
                    let alone = Write::delete(key, Deleted::IfGone);
                    self.db
                        .write("erase comment of a deleted post", &alone)
                        .await?;
                    return Ok(true);
                }
                TxOutcome::ConditionFailed(failed) => {
                    return Err(failed.unexpected("erase comment"));
                }
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the comment kept changing while it was erased",
        ))
    }

    /// The like `like` of `liker` in the partition
    /// `place`, its marker (when it names this like: a new account of the
    /// same user may have liked since) and one off the count it was counted
    /// in, in one transaction, as unliking would; `false` when the like is
    /// gone already. When the post is gone (its own deletion clears its
    /// partitions) the like goes alone.
    async fn erase_like(
        &self,
        place: PostPartition,
        like: &LikeId,
        liker: &UserId,
    ) -> Result<bool, StoreError> {
        let like_key = keys::like(place, like).item();
        let mut with_marker = true;
        // Marked in the liker's own partition (a like given by a version
        // before quiet likes were marked may not be: then the delete's
        // condition holds on nothing; the sweep at the walk's end takes any
        // mark left).
        let mut with_mark = true;
        let mut with_count = true;
        loop {
            let mut tx = self.db.transaction("erase like");
            let exists = Expr::item_exists();
            let remove = Write::delete(like_key.clone(), Deleted::IfGone).when(exists);
            let removed = tx.add("like", remove);
            let marker = with_marker.then(|| {
                let names_it = Expr::item_absent()
                    .or("likeId = :like")
                    .value(":like", s(like.to_string()));
                let key = keys::liker(place, liker).item();
                tx.add(
                    "liker marker",
                    // The like's own delete tells (a marker may be absent).
                    Write::delete(key, Deleted::Untold).when(names_it),
                )
            });
            let mark = with_mark.then(|| {
                let names_it = Expr::item_absent()
                    .or("likeId = :like")
                    .value(":like", s(like.to_string()));
                let key = keys::liked(liker, &place.post).item();
                tx.add(
                    "liked mark",
                    Write::delete(key, Deleted::Untold).when(names_it),
                )
            });
            let counted = with_count.then(|| {
                let count = counts::counted_down(&place.post, place.shard, Counter::Likes);
                tx.add("count", count)
            });
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(true),
                TxOutcome::ConditionFailed(failed) if failed.failed(removed) => return Ok(false),
                TxOutcome::ConditionFailed(failed) if marker.is_some_and(|m| failed.failed(m)) => {
                    with_marker = false;
                }
                TxOutcome::ConditionFailed(failed) if mark.is_some_and(|m| failed.failed(m)) => {
                    with_mark = false;
                }
                TxOutcome::ConditionFailed(failed) if counted.is_some_and(|c| failed.failed(c)) => {
                    with_count = false;
                }
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("erase like")),
            }
        }
    }

    /// An erased account's block out (the walk): the block (while it is the
    /// one read) and its mark in the blocked user's partition, in one
    /// transaction; the profile (and its `blockCount`) is gone. `false` when
    /// it was gone already. The blocks others made of the erased account
    /// stay: they are the blockers' own (their lists leave the erased
    /// account out while it has no profile, and a new account of the same
    /// identity is still blocked by them).
    async fn erase_block(&self, blocker: &UserId, blocked: &UserId) -> Result<bool, StoreError> {
        let key = keys::block(blocker, blocked).item();
        let found = self.db.get_entity::<BlockItem>(key.clone(), true).await?;
        let Some(block) = found else {
            return Ok(false);
        };
        let still = Expr::new("#block = :block")
            .name("#block", BLOCK_ID)
            .value(":block", s(block.block_id.to_string()));
        let mut tx = self.db.transaction("erase block");
        let taken = tx.add("block", Write::delete(key, Deleted::IfGone).when(still));
        let mark = keys::blocked_by(blocked, blocker).item();
        tx.add("blocked-by mark", Write::delete(mark, Deleted::Untold));
        match tx.commit().await? {
            TxOutcome::Committed => Ok(true),
            TxOutcome::ConditionFailed(failed) if failed.failed(taken) => Ok(false),
            TxOutcome::ConditionFailed(failed) => Err(failed.unexpected("erase block")),
        }
    }

    /// `user`'s notifications (`NOTIFY#u`), all of them out (the erasure,
    /// before its walk of what they wrote): one page of keys (at most
    /// 500) a call. `true` when none is left.
    pub async fn erase_notifications(&self, user: &UserId) -> Result<bool, StoreError> {
        let query = Query::partition(keys::notify_pk(user))
            .project(Expr::new("#k1, #k2").name("#k1", PK).name("#k2", SK));
        let page = self
            .db
            .query_page("erase notifications", &query, None, Some(NOTIFICATION_PAGE))
            .await?;
        // Keys only (the projection): deleted as read.
        if !page.items.is_empty() {
            self.db
                .delete_all("erase notifications", page.items, 4)
                .await?;
        }
        Ok(page.next.is_none())
    }

    /// The request records of an erased account of `user`'s (fan-out: the
    /// INSERT of an item it wrote that landed after its erasure's walk, in
    /// the same transaction as its record, if it had a key): every one when
    /// the user has no profile, else those below the profile's first
    /// version, so that the account signed up again keeps its own.
    pub async fn forget_erased_requests(&self, user: &UserId) -> Result<usize, StoreError> {
        let profile = self.read_profile(user, true).await?;
        self.forget_requests(user, profile.map(|p| p.first_version))
            .await
    }

    /// Every mark `user`'s partition holds of a like of a hot post
    /// ([`super::likes`]), a page of keys at a time (strongly consistent),
    /// deleted one by one; how many.
    async fn forget_liked_marks(&self, user: &UserId) -> Result<usize, StoreError> {
        let query = Query::partition(keys::user_pk(user))
            .begins_with(keys::LIKED_PREFIX)
            .project(Expr::new("#k1, #k2").name("#k1", PK).name("#k2", SK))
            .consistent();
        let mut forgotten = 0;
        loop {
            let page = self.db.query_page("liked marks", &query, None, Some(100));
            let page = page.await?;
            if page.items.is_empty() {
                return Ok(forgotten);
            }
            for mark in page.items {
                let delete = Write::delete(Key::of(&mark)?.item(), Deleted::IfGone);
                self.db.write("forget a liked mark", &delete).await?;
                forgotten += 1;
            }
        }
    }

    /// The request records of `user`'s (the answers kept for their
    /// Idempotency-Keys) written below profile version `below` (every one
    /// when `None`), a page of keys at a time (strongly consistent), deleted
    /// one by one; how many.
    async fn forget_requests(
        &self,
        user: &UserId,
        below: Option<u64>,
    ) -> Result<usize, StoreError> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Kept {
            #[serde(default = "crate::store::items::request_record::first_account_version")]
            user_version: u64,
        }
        let query = Query::partition(keys::user_pk(user))
            .begins_with(REQUEST_PREFIX)
            .project(
                Expr::new("#k1, #k2, #version")
                    .name("#k1", PK)
                    .name("#k2", SK)
                    .name("#version", USER_VERSION),
            )
            .consistent();
        let mut forgotten = 0;
        let mut start = None;
        loop {
            let page = self
                .db
                .query_page("request records", &query, start, Some(100))
                .await?;
            for record in page.items {
                let kept: Kept = super::from_item(record.clone())?;
                if below.is_some_and(|first| kept.user_version >= first) {
                    continue;
                }
                let key = Key::of(&record)?.item();
                let delete = Write::delete(key, Deleted::IfGone);
                self.db.write("forget a request record", &delete).await?;
                forgotten += 1;
            }
            start = page.next;
            if start.is_none() {
                return Ok(forgotten);
            }
        }
    }
}

#[cfg(feature = "admin")]
impl Admin<'_> {
    /// The audit's repair (admin): the walk of `user`'s erasure to its end,
    /// done or not; nothing without a mark, or while the user has a profile
    /// again (the walk would take their new items).
    pub async fn finish_erasure(&self, user: &UserId) -> Result<ErasureStep, StoreError> {
        if self.read_profile(user, true).await?.is_some() {
            return Ok(ErasureStep::Stale);
        }
        match self.erasure_mark(user).await? {
            Some(mark) => self.fanout().walk_erasure(&mark, &Deadline::NONE).await,
            None => Ok(ErasureStep::Stale),
        }
    }
}
