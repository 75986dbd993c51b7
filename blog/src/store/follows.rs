//! Follows: who follows whom, the lists of a user's followers and of whom
//! they follow, and the counts on the profile.
//!
//! A follow is three items written in one transaction with the follower's
//! count:
//! - the **follow** in the follower's partition (`USER#u / ~FOLLOWS#v`): its
//!   key makes a follow unique; GSI1 lists it under its follower
//!   (`USER#u / FOLLOW#<followId>`: whom they follow, newest first, and what
//!   the erasure and the export walk);
//! - the follower's **entry** in one of the followed user's follower shards
//!   (`FOLLOWERS#v#k / FOLLOWER#<followId>`, `k` the follower id's hash mod
//!   [`FOLLOWER_SHARDS`]): what a post's delivery into its followers' homes
//!   and the erasure walk, and what the fan-out copies into the followers
//!   list by time ([`crate::store::followers`]);
//! - that shard's **count** (`FOLLOWERS#v#k / COUNT`, with a version that
//!   grows with every change), which the fan-out adds onto the followed
//!   profile's `followerCount` ([`crate::store::counts`]): an account that
//!   gains 1,000 followers a second writes 125 a second to each shard, and
//!   its profile takes one write a batch.
//!
//! The follower's `followingCount` on their profile changes in the same
//! transaction, on the condition that it stays within [`FOLLOWING_LIMIT`].
//!
//! **Push and pull.** A follow of an author who has [`PULL_FOLLOWERS`](super::PULL_FOLLOWERS) or
//! more followers when it is made is a *pull* follow, while the follower has
//! fewer than [`PULL_LIMIT`] of them: its entry goes into one of the
//! author's pull shards (`PUSH_SHARDS + k`), which no delivery walks, and the
//! author's id into the follower's `pulls` set on their profile, in the same
//! transaction; their home read merges those authors' own post lists
//! (`crate::store::home`). Every other follow is a push follow: its entry in
//! a shard `k < PUSH_SHARDS`, and each of the author's posts delivered into
//! the follower's home. So a post is written into at most about
//! [`PULL_FOLLOWERS`](super::PULL_FOLLOWERS) homes (plus those of followers whose pull follows are
//! all taken), whatever its author's follower count, and a home read merges
//! at most [`PULL_LIMIT`] lists, whatever the reader follows. A follow stays
//! what it was made: an author who grows past the threshold keeps pushing to
//! the followers they had.

use crate::store::items::follow::{FOLLOWING_COUNT, FollowItem, FollowerItem, PULLS};
use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize;

use super::counts::{
    Step,
    followers::{counted, counted_open},
};
use super::{
    Busy, FanOut, Item, Requests, StoreError, from_item,
    items::user::UserItem,
    n, s, signed,
    table::{Deleted, Expr, Landed, Query, Slot, Transaction, TxOutcome, Write},
};
use crate::{
    ids::{FollowId, UserId},
    keys::{self, Entity, FOLLOW_PREFIX, FOLLOWER_SHARDS},
    model::{Followed, Page},
};

/// How many users one user may follow (a reader's fan-in: their home stays
/// one partition fed by at most this many authors).
pub const FOLLOWING_LIMIT: u64 = 5_000;

/// How often a follow or an unfollow tries again when the other changed the
/// follow under it.
const ATTEMPTS: usize = 5;

/// How many pull follows one user may have: the most author lists their
/// home read merges (each one Query). Past it, a follow is a push follow
/// whatever the author's count.
pub const PULL_LIMIT: usize = 8;

/// One up or down on the follower's `followingCount`; up only within the
/// limit. A pull follow's author goes into (or out of) their `pulls` with
/// it, in only while they pull fewer than [`PULL_LIMIT`]. Either only while
/// the profile is there (an erased account follows no one).
fn following_counted(follow: &FollowItem, step: i64) -> Write {
    let mut change = Expr::new("ADD #following :step")
        .name("#following", FOLLOWING_COUNT)
        .value(":step", signed(step));
    let mut condition = Expr::item_exists();
    if step > 0 {
        condition = condition
            .and("attribute_not_exists(#following) OR #following < :max")
            .name("#following", FOLLOWING_COUNT)
            .value(":max", n(FOLLOWING_LIMIT));
    }
    if follow.pull {
        let author = AttributeValue::Ss(vec![follow.followed_id.to_string()]);
        change = if step > 0 {
            Expr::new("ADD #following :step, #pulls :author")
        } else {
            Expr::new("ADD #following :step DELETE #pulls :author")
        }
        .name("#following", FOLLOWING_COUNT)
        .name("#pulls", PULLS)
        .value(":step", signed(step))
        .value(":author", author);
        if step > 0 {
            condition = condition
                .and("attribute_not_exists(#pulls) OR size(#pulls) < :pull_limit")
                .name("#pulls", PULLS)
                .value(":pull_limit", n(PULL_LIMIT as u64));
        }
    }
    Write::update(UserItem::key(&follow.user_id), change, Landed::Untold).when(condition)
}

/// What following did: a new follow, or the one the caller had already.
#[derive(Debug)]
pub enum Follows {
    New(Followed),
    Already(Followed),
}

impl Requests<'_> {
    /// Follow (request, `POST /users/{userId}/followers`): the follow, the
    /// follower's entry and its shard's count, and one up on the caller's
    /// `followingCount` (within [`FOLLOWING_LIMIT`]; a pull follow's author
    /// into their `pulls`, within [`PULL_LIMIT`]) in one transaction, after
    /// a strongly consistent read of the followed profile (a 404 without
    /// one) and of the caller's follow of them (if there is one, it is the
    /// answer, and nothing is written), and on the condition that the shard's count is not closed by
    /// that account's erasure: nothing in it writes the followed user's own
    /// partition, which an account gaining 1,000 followers a second could
    /// not take (each write twice, as a transaction's). A pull follow when the
    /// followed user has at least the store's pull threshold
    /// ([`PULL_FOLLOWERS`](super::PULL_FOLLOWERS)) of followers and the caller has a pull follow
    /// left. Before a push follow's transaction, the followed user's newest
    /// posts go into the caller's home (`Requests::backfill_home`), so
    /// that the next home read shows them; if the follow then fails they are
    /// entries of an author the caller does not follow, which the home read
    /// leaves out. A pull follow needs none: the home read merges the
    /// author's posts. A caller the followed user blocks is refused
    /// ([`StoreError::Blocked`]) by a strongly consistent read of the block's
    /// mark in their own partition before the backfill, and by a
    /// ConditionCheck of it in the transaction (a block made meanwhile:
    /// `FollowItem::not_blocked`; the block itself is [`super::blocks`]'s).
    pub async fn follow(
        &self,
        follower: &UserId,
        followed: &UserId,
    ) -> Result<Follows, StoreError> {
        if follower == followed {
            return Err(StoreError::FollowSelf);
        }
        let profile = self.writer(follower).await?.profile()?;
        let Some(target) = self.read_profile(followed, true).await? else {
            return Err(StoreError::UserNotFound);
        };
        self.follow_as_read(profile, &target).await
    }

    /// [`Requests::follow`] after its reads: `profile` the caller's and
    /// `target` the followed user's, as read. Public for the tests that
    /// hold a follow between its reads and its writes (an erasure of the
    /// followed account meanwhile).
    #[doc(hidden)]
    pub async fn follow_as_read(
        &self,
        mut profile: UserItem,
        target: &UserItem,
    ) -> Result<Follows, StoreError> {
        let (follower, followed) = (&profile.user_id.clone(), &target.user_id);
        let answer = |follow: &FollowItem| Followed {
            user_id: followed.clone(),
            username: target.username.clone(),
            followed_at: follow.created_at.clone(),
        };
        // Followed already: the follow as it is, nothing written (no
        // backfill, no transaction bound to refuse).
        if let Some(existing) = self.follow_of(follower, followed).await? {
            return Ok(Follows::Already(answer(&existing)));
        }
        // Blocked by them: refused before the backfill writes anything (the
        // transaction checks the mark again, for a block made meanwhile).
        let mark = FollowItem::block_mark_of(follower, followed).item();
        if self.db.get("a block's mark", mark, true).await?.is_some() {
            return Err(StoreError::Blocked);
        }
        let famous = target.follower_count() >= self.pull_threshold;
        let mut backfilled = false;
        for _ in 0..ATTEMPTS {
            if profile.following_count >= FOLLOWING_LIMIT {
                // Already following counts among them: asked for below.
                if let Some(existing) = self.follow_of(follower, followed).await? {
                    return Ok(Follows::Already(answer(&existing)));
                }
                return Err(StoreError::FollowingLimit);
            }
            let pull = famous && profile.pulls.len() < PULL_LIMIT;
            if !pull && !backfilled {
                self.backfill_home(follower, followed).await?;
                backfilled = true;
            }
            let follow = FollowItem::new(follower, followed, pull);
            let mut tx = self.db.transaction("follow");
            let made = tx.add("follow", Write::create(&follow)?);
            let counted_following = tx.add("following count", following_counted(&follow, 1));
            tx.add("follower entry", Write::create(&follow.entry())?);
            let there = tx.add(
                "follower count",
                counted_open(followed, follow.entry().shard(), target.first_version)?,
            );
            let unblocked = tx.add("not blocked", follow.not_blocked());
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(Follows::New(answer(&follow))),
                TxOutcome::ConditionFailed(failed) if failed.failed(unblocked) => {
                    return Err(StoreError::Blocked);
                }
                TxOutcome::ConditionFailed(failed) if failed.failed(made) => {
                    match self.follow_of(follower, followed).await? {
                        Some(existing) => return Ok(Follows::Already(answer(&existing))),
                        // Taken back between the refused put and the read.
                        None => continue,
                    }
                }
                TxOutcome::ConditionFailed(failed) if failed.failed(there) => {
                    return Err(StoreError::UserNotFound);
                }
                TxOutcome::ConditionFailed(failed) if failed.failed(counted_following) => {
                    // At the limit, its pull follows taken meanwhile, or
                    // erased: read it again (and follow to push if the pull
                    // follows are all taken).
                    profile = self.writer(follower).await?.profile()?;
                    if profile.following_count < FOLLOWING_LIMIT {
                        continue;
                    }
                }
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("follow")),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the follow kept being given and taken back",
        ))
    }

    /// Unfollow (request, `DELETE /users/{userId}/followers`): the follow,
    /// the follower's entry, one off their shard's count and one off the
    /// caller's `followingCount`, in one transaction; nothing when the caller
    /// does not follow them (taking back twice is taking back once).
    pub async fn unfollow(&self, follower: &UserId, followed: &UserId) -> Result<(), StoreError> {
        self.writer(follower).await?.profile()?;
        self.end_follow(follower, followed).await
    }

    /// [`Requests::unfollow`] after its writer read: `follower`'s follow of
    /// `followed` taken back as the unfollow takes it (nothing when there is
    /// none). A block ([`super::blocks`]) ends the follows either way with
    /// it, so that counts, follower entries and homes stay right.
    pub(super) async fn end_follow(
        &self,
        follower: &UserId,
        followed: &UserId,
    ) -> Result<(), StoreError> {
        for _ in 0..ATTEMPTS {
            let Some(follow) = self.follow_of(follower, followed).await? else {
                return Ok(());
            };
            let mut tx = self.db.transaction("unfollow");
            let taken = taken_back(&mut tx, &follow)?;
            let counted_following = tx.add("following count", following_counted(&follow, -1));
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(()),
                // Taken back (or given anew) meanwhile: read it again.
                TxOutcome::ConditionFailed(failed) if failed.failed(taken) => continue,
                TxOutcome::ConditionFailed(failed) if failed.failed(counted_following) => {
                    return Err(StoreError::AccountErased);
                }
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("unfollow")),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the follow kept being given and taken back",
        ))
    }

    /// `GET /users/{userId}/following` (request): whom `user` follows,
    /// newest first: one Query of GSI1 `USER#u` under `FOLLOW#`, then one
    /// BatchGetItem of their profiles and `user`'s own (their usernames as
    /// they are now; a user without a profile is a 404, an erased account
    /// followed is left out).
    pub async fn list_following(
        &self,
        user: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Followed>, StoreError> {
        let list = format!("following:{user}");
        let after = super::pages::resume_after(&list, cursor, follow_and_followed)?;
        // Where the last page ended: the index's key and the table's.
        let start = after.map(|(follow, followed)| {
            let mut start = keys::follow(user, &followed).item();
            start.insert(keys::GSI1PK.to_owned(), s(keys::user_items_pk(user)));
            start.insert(keys::GSI1SK.to_owned(), s(keys::user_follow_sk(&follow)));
            start
        });
        let query = Query::gsi1(keys::user_items_pk(user))
            .begins_with(FOLLOW_PREFIX)
            .newest_first();
        let rows = self
            .db
            .query_up_to("list following", &query, start, limit.saturating_add(1))
            .await?;
        let mut follows: Vec<(UserId, FollowId, String)> = Vec::new();
        for row in rows {
            let row: FollowRow = from_item(row)?;
            let followed = keys::followed_of_sk(&row.sk)
                .ok_or_else(|| StoreError::Internal(format!("a follow under {}", row.sk)))?;
            follows.push((followed, row.follow_id, row.created_at));
        }
        let more = follows.len() > limit;
        follows.truncate(limit);
        let next = match follows.last() {
            Some((followed, follow, _)) if more => Some(format!("{follow}.{followed}")),
            _ => None,
        };
        let follows = follows.into_iter().map(|(other, _, at)| (other, at));
        self.named_page(user, &list, follows.collect(), next).await
    }

    /// A page of `follows` (whom, and since when), named from their
    /// profiles, read in one BatchGetItem with `owner`'s (404 without it);
    /// its cursor names `next` when more follow. A block list's page too
    /// ([`super::blocks`]).
    pub(super) async fn named_page(
        &self,
        owner: &UserId,
        list: &str,
        follows: Vec<(UserId, String)>,
        next: Option<String>,
    ) -> Result<Page<Followed>, StoreError> {
        let mut wanted: Vec<Item> = vec![UserItem::key(owner)];
        wanted.extend(
            follows
                .iter()
                .filter(|(other, _)| other != owner)
                .map(|(other, _)| UserItem::key(other)),
        );
        wanted.dedup();
        let (found, _) = self
            .db
            .batch_get_with("follow list profiles", wanted, false)
            .await?;
        let mut profiles: HashMap<UserId, UserItem> = HashMap::new();
        for item in found {
            let profile = UserItem::from_item::<StoreError>(item)?;
            profiles.insert(profile.user_id.clone(), profile);
        }
        if !profiles.contains_key(owner) {
            return Err(StoreError::UserNotFound);
        }
        let next_cursor = next.map(|next| super::cursor::encode(list, &next));
        let items = follows
            .into_iter()
            .filter_map(|(other, at)| {
                profiles.get(&other).map(|p| Followed {
                    user_id: other,
                    username: p.username.clone(),
                    followed_at: at,
                })
            })
            .collect();
        Ok(Page { items, next_cursor })
    }
}

impl super::Store {
    /// `follower`'s follow of `followed`, strongly consistent.
    pub(crate) async fn follow_of(
        &self,
        follower: &UserId,
        followed: &UserId,
    ) -> Result<Option<FollowItem>, StoreError> {
        self.db
            .get_entity(keys::follow(follower, followed).item(), true)
            .await
    }
}

/// A following list's cursor back: `<followId>.<followedId>` (the index's
/// key and the table's of the last follow shown), both validated.
fn follow_and_followed(raw: &str) -> Result<(FollowId, UserId), crate::ids::IdError> {
    let (follow, followed) = raw
        .split_once('.')
        .ok_or(crate::ids::IdError::NotUlid { kind: "cursor" })?;
    Ok((FollowId::parse(follow)?, UserId::parse(followed)?))
}

/// A follow as GSI1 lists it under its follower.
#[derive(Deserialize)]
struct FollowRow {
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1SK", deserialize_with = "follow_of_gsi1sk")]
    follow_id: FollowId,
    #[serde(rename = "createdAt")]
    created_at: String,
}

fn follow_of_gsi1sk<'de, D: serde::Deserializer<'de>>(raw: D) -> Result<FollowId, D::Error> {
    let sk = String::deserialize(raw)?;
    keys::follow_of_user_follow_sk(&sk)
        .ok_or_else(|| serde::de::Error::custom(format!("not a follow's index key: {sk}")))
}

/// A follow's take-back into `tx`: the follow (while it is still that
/// follow), its follower entry, and one off its shard's count. The follow's
/// slot, whose failed condition means it was taken back (or given anew)
/// meanwhile.
fn taken_back(tx: &mut Transaction<'_>, follow: &FollowItem) -> Result<Slot, StoreError> {
    let taken = tx.add("follow", follow_taken_back(follow));
    tx.add(
        "follower entry",
        Write::delete(follow.entry().key().item(), Deleted::Untold),
    );
    let shard = follow.entry().shard();
    tx.add(
        "follower count",
        counted(&follow.followed_id, shard, Step::Down)?,
    );
    Ok(taken)
}

/// The delete of `follow` while it is still that follow (not one given
/// again since under the same key).
fn follow_taken_back(follow: &FollowItem) -> Write {
    Write::delete(follow.key().item(), Deleted::IfGone)
        .when(Expr::new("followId = :follow").value(":follow", s(follow.follow_id.to_string())))
}

impl FanOut<'_> {
    /// An erased account's follow out (the erasure's walk): the follow, the
    /// follower's entry and one off its shard's count; the profile is gone.
    /// `false` when it was gone already.
    pub(super) async fn erase_follow(
        &self,
        follower: &UserId,
        followed: &UserId,
    ) -> Result<bool, StoreError> {
        let Some(follow) = self.follow_of(follower, followed).await? else {
            return Ok(false);
        };
        let mut tx = self.db.transaction("erase follow");
        let taken = taken_back(&mut tx, &follow)?;
        match tx.commit().await? {
            TxOutcome::Committed => Ok(true),
            TxOutcome::ConditionFailed(failed) if failed.failed(taken) => Ok(false),
            TxOutcome::ConditionFailed(failed) => Err(failed.unexpected("erase follow")),
        }
    }
}

impl FanOut<'_> {
    /// An erased account's followers and home out (the erasure's walk, after
    /// what the account wrote): each follower shard a page at a time, each
    /// follower's follow taken out with one off their `followingCount` (one
    /// transaction each), then the entries; then the shards' counts; then
    /// the account's home, a page at a time. Deleting as it goes, it needs no
    /// place: a call after a pause starts from what is left. Stops when
    /// `deadline` is near, after at least one page (`false`: paused).
    /// Returns the follows taken out and whether it finished.
    pub async fn erase_followers(
        &self,
        user: &UserId,
        version: u64,
        deadline: &super::deadline::Deadline,
    ) -> Result<(usize, bool), StoreError> {
        self.close_follower_counts(user, version).await?;
        let mut erased = 0;
        let mut first = true;
        for shard in 0..FOLLOWER_SHARDS {
            let query = Query::partition(keys::followers_pk(user, shard))
                .begins_with(keys::FOLLOWER_PREFIX)
                .consistent();
            loop {
                if !first && deadline.near() {
                    return Ok((erased, false));
                }
                let page = self
                    .db
                    .query_page("erase followers", &query, None, Some(ERASE_PAGE))
                    .await?;
                if page.items.is_empty() {
                    break;
                }
                // At least one page of work a call, however near the deadline.
                first = false;
                let mut entries = Vec::with_capacity(page.items.len());
                for item in page.items {
                    let entry = FollowerItem::from_item::<StoreError>(item)?;
                    erased += usize::from(self.unfollow_erased(&entry).await?);
                    entries.push(entry.key().item());
                }
                self.db.delete_all("erase followers", entries, 4).await?;
            }
        }
        self.empty_follower_counts(user, version).await?;
        // Its followers list's copy: nothing copies into it any more.
        if !self.erase_follower_windows(user, deadline).await? {
            return Ok((erased, false));
        }
        let home = Query::partition(keys::home_pk(user)).project(
            Expr::new("#pk, #sk")
                .name("#pk", keys::PK)
                .name("#sk", keys::SK),
        );
        loop {
            if !first && deadline.near() {
                return Ok((erased, false));
            }
            let page = self
                .db
                .query_page("erase home", &home, None, Some(ERASE_PAGE))
                .await?;
            if page.items.is_empty() {
                return Ok((erased, true));
            }
            self.db.delete_all("erase home", page.items, 4).await?;
            first = false;
        }
    }

    /// A follower's follow of an erased account out, with one off their
    /// `followingCount` (the follower's own account may be erased too: then
    /// the follow alone). `false` when it was gone.
    async fn unfollow_erased(&self, entry: &FollowerItem) -> Result<bool, StoreError> {
        let follow = FollowItem {
            user_id: entry.follower_id.clone(),
            followed_id: entry.user_id.clone(),
            follow_id: entry.follow_id,
            created_at: entry.created_at.clone(),
            pull: entry.pull,
        };
        let mut tx = self.db.transaction("unfollow an erased account");
        let taken = tx.add("follow", follow_taken_back(&follow));
        let counted = tx.add("following count", following_counted(&follow, -1));
        match tx.commit().await? {
            TxOutcome::Committed => Ok(true),
            TxOutcome::ConditionFailed(failed) if failed.failed(taken) => Ok(false),
            TxOutcome::ConditionFailed(failed) if failed.failed(counted) => {
                let alone = follow_taken_back(&follow);
                Ok(self
                    .db
                    .write("unfollow an erased account", &alone)
                    .await?
                    .done())
            }
            TxOutcome::ConditionFailed(failed) => Err(failed.unexpected("unfollow erased")),
        }
    }
}

/// How many followers (or home entries) an erasure reads a page.
const ERASE_PAGE: i32 = 100;
