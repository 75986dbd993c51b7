//! Blocks: a user blocks another, their list of whom they block, and what a
//! block forbids the blocked user.
//!
//! A block is two items written in one transaction with the blocker's
//! count:
//! - the **block** in the blocker's partition (`USER#a / ~BLOCKS#b`): its
//!   key makes a block unique; GSI1 lists it under its blocker
//!   (`USER#a / BLOCK#<blockId>`: whom they block, newest first, and what the
//!   erasure and the export walk);
//! - its **mark** in the blocked user's partition (`USER#b / ~BLOCKEDBY#a`):
//!   while it is there, `b`'s follow of `a`, likes of `a`'s posts and
//!   comments on them fail a ConditionCheck of it inside their own
//!   transaction, so a block takes effect at once, even against a write
//!   already in flight (each builds its check with its item:
//!   `FollowItem::not_blocked`, `LikeItem::not_blocked`,
//!   `CommentItem::not_blocked`). The check sits in the writer's own partition, never
//!   in the blocker's: the likes of a viral post (10,000 a second, from as
//!   many users) would otherwise all check items of its author's one
//!   partition, 2 WCU each, twenty times what a partition takes.
//!
//! The blocker's `blockCount` on their profile changes in the same
//! transaction, on the condition that it stays within [`MAX_BLOCKS`]: what
//! bounds the Query of an author's blocks that a page of comments on their
//! posts makes (comments by a user they block are left out of it).
//!
//! Blocking ends the follows between the two, either way, after the
//! transaction, by the unfollow's own transaction
//! (`Requests::end_follow`), so counts, follower entries and homes stay
//! right; a block asked again (its answer lost) ends them again.

use std::collections::HashSet;

use serde::Deserialize;

use super::{
    Busy, Requests, Store, StoreError, from_item,
    items::block::{BLOCK_COUNT, BLOCK_ID, BlockItem, MAX_BLOCKS},
    items::user::UserItem,
    memory::PostHead,
    n, s, signed,
    table::{Deleted, Expr, Landed, Query, TxOutcome, Write},
};
use crate::{
    ids::{BlockId, PostId, UserId},
    keys::{self, BLOCK_PREFIX, BLOCKS_PREFIX, Entity},
    model::{Blocked, Page},
};

/// How often a block or an unblock tries again when the other changed the
/// block under it.
const ATTEMPTS: usize = 5;

/// What blocking did: a new block, or the one the caller had already.
#[derive(Debug)]
pub enum Blocks {
    New(Blocked),
    Already(Blocked),
}

/// One up or down on the blocker's `blockCount`; up only within
/// [`MAX_BLOCKS`], and either only while the profile is there.
fn block_counted(blocker: &UserId, step: i64) -> Write {
    let change = Expr::new("ADD #blocks :step")
        .name("#blocks", BLOCK_COUNT)
        .value(":step", signed(step));
    let mut condition = Expr::item_exists();
    if step > 0 {
        condition = condition
            .and("attribute_not_exists(#blocks) OR #blocks < :max")
            .name("#blocks", BLOCK_COUNT)
            .value(":max", n(MAX_BLOCKS));
    }
    Write::update(UserItem::key(blocker), change, Landed::Untold).when(condition)
}

impl Requests<'_> {
    /// `PUT /blocks/{userId}` (request): the block, its mark and one up on
    /// the caller's `blockCount` (within [`MAX_BLOCKS`]) in one transaction,
    /// after the writer read (the caller's profile), a strongly consistent
    /// read of the blocked user's profile (a 404 without one) and of the
    /// caller's block of them (if there is one, it is the answer, and
    /// nothing is written but the follows' ends). Then the follows between
    /// the two are taken back, either way (`Requests::end_follow`).
    pub async fn block(&self, blocker: &UserId, blocked: &UserId) -> Result<Blocks, StoreError> {
        if blocker == blocked {
            return Err(StoreError::BlockSelf);
        }
        let mut profile = self.writer(blocker).await?.profile()?;
        let Some(target) = self.read_profile(blocked, true).await? else {
            return Err(StoreError::UserNotFound);
        };
        let answer = |block: &BlockItem| Blocked {
            user_id: blocked.clone(),
            username: target.username.clone(),
            blocked_at: block.created_at.clone(),
        };
        let mut made = None;
        for _ in 0..ATTEMPTS {
            if let Some(existing) = self.block_of(blocker, blocked).await? {
                made = Some(Blocks::Already(answer(&existing)));
                break;
            }
            if profile.block_count >= MAX_BLOCKS {
                return Err(StoreError::BlockLimit);
            }
            let block = BlockItem::new(blocker, blocked);
            let mut tx = self.db.transaction("block");
            let put = tx.add("block", Write::create(&block)?);
            let own = Landed::When(vec![(BLOCK_ID, s(block.block_id.to_string()))]);
            tx.add("blocked-by mark", Write::put(&block.mark(), own)?);
            let counted = tx.add("block count", block_counted(blocker, 1));
            match tx.commit().await? {
                TxOutcome::Committed => {
                    made = Some(Blocks::New(answer(&block)));
                    break;
                }
                // Blocked meanwhile (by this caller's other request): read it.
                TxOutcome::ConditionFailed(failed) if failed.failed(put) => continue,
                TxOutcome::ConditionFailed(failed) if failed.failed(counted) => {
                    // At the limit meanwhile, or erased: read it again.
                    profile = self.writer(blocker).await?.profile()?;
                    if profile.block_count >= MAX_BLOCKS {
                        return Err(StoreError::BlockLimit);
                    }
                }
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("block")),
            }
        }
        let made = made.ok_or_else(|| {
            StoreError::busy(Busy::Conflict, "the block kept being given and taken back")
        })?;
        // The follows either way. The blocked user's own (to the caller) is
        // taken back on their profile's count; an account erased meanwhile
        // has its follows taken back by its erasure's walk.
        self.end_follow(blocker, blocked).await?;
        match self.end_follow(blocked, blocker).await {
            Ok(()) | Err(StoreError::AccountErased) => Ok(made),
            Err(error) => Err(error),
        }
    }

    /// `DELETE /blocks/{userId}` (request): the block, its mark and one off
    /// the caller's `blockCount`, in one transaction, after the writer read
    /// and a strongly consistent read of the block; nothing when there is
    /// none (unblocking twice is unblocking once).
    pub async fn unblock(&self, blocker: &UserId, blocked: &UserId) -> Result<(), StoreError> {
        self.writer(blocker).await?.profile()?;
        for _ in 0..ATTEMPTS {
            let Some(block) = self.block_of(blocker, blocked).await? else {
                return Ok(());
            };
            let mut tx = self.db.transaction("unblock");
            let taken = tx.add("block", block_taken_back(&block));
            tx.add("blocked-by mark", mark_taken_back(&block));
            let counted = tx.add("block count", block_counted(blocker, -1));
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(()),
                // Taken back (or given anew) meanwhile: read it again.
                TxOutcome::ConditionFailed(failed) if failed.failed(taken) => continue,
                TxOutcome::ConditionFailed(failed) if failed.failed(counted) => {
                    return Err(StoreError::AccountErased);
                }
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("unblock")),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the block kept being given and taken back",
        ))
    }

    /// `GET /blocks` (request): whom `blocker` blocks, newest first: one
    /// Query of GSI1 `USER#u` under `BLOCK#`, then one BatchGetItem of their
    /// profiles and the caller's own (usernames as they are now; a user
    /// whose account was erased is left out, the block kept: see
    /// `FanOut::erase_block`, in the erasure's walk).
    pub async fn list_blocks(
        &self,
        blocker: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Blocked>, StoreError> {
        let list = format!("blocks:{blocker}");
        let after = super::pages::resume_after(&list, cursor, block_and_blocked)?;
        // Where the last page ended: the index's key and the table's.
        let start = after.map(|(block, blocked)| {
            let mut start = keys::block(blocker, &blocked).item();
            start.insert(keys::GSI1PK.to_owned(), s(keys::user_items_pk(blocker)));
            start.insert(keys::GSI1SK.to_owned(), s(keys::user_block_sk(&block)));
            start
        });
        let query = Query::gsi1(keys::user_items_pk(blocker))
            .begins_with(BLOCK_PREFIX)
            .newest_first();
        let rows = self
            .db
            .query_up_to("list blocks", &query, start, limit.saturating_add(1))
            .await?;
        let mut blocks: Vec<(UserId, BlockId, String)> = Vec::new();
        for row in rows {
            let row: BlockRow = from_item(row)?;
            blocks.push((row.blocked_id, row.block_id, row.created_at));
        }
        let more = blocks.len() > limit;
        blocks.truncate(limit);
        let next = match blocks.last() {
            Some((blocked, block, _)) if more => Some(format!("{block}.{blocked}")),
            _ => None,
        };
        let blocks = blocks.into_iter().map(|(other, _, at)| (other, at));
        let page = self
            .named_page(blocker, &list, blocks.collect(), next)
            .await?;
        Ok(Page {
            items: page
                .items
                .into_iter()
                .map(|named| Blocked {
                    user_id: named.user_id,
                    username: named.username,
                    blocked_at: named.followed_at,
                })
                .collect(),
            next_cursor: page.next_cursor,
        })
    }
}

impl Store {
    /// The author of `post`, for a like's or a comment's block check and a
    /// hot post's first-page copies ([`super::first_pages`]): this process's
    /// memory ([`super::memory::PostAuthors`]: an author never changes),
    /// else one GetItem of the post item, eventually consistent
    /// (0.5 RCU), then strongly consistent if that found none (a post made
    /// a moment ago); none then is a 404. Once a process per post: a hot
    /// post's partition is read by each instance once, not by each like.
    /// The same read tells whether the post's likes are marked
    /// ([`super::memory::PostHead`]).
    pub(in crate::store) async fn post_author(&self, post: &PostId) -> Result<UserId, StoreError> {
        if let Some(head) = self.authors.get(post) {
            return Ok(head.author);
        }
        let key = keys::post_item(post).item();
        let mut found = self.db.get("a post's author", key.clone(), false).await?;
        if found.is_none() {
            found = self.db.get("a post's author", key, true).await?;
        }
        let found = found.ok_or(StoreError::PostNotFound)?;
        let head: StoredHead = from_item(found)?;
        let author = head.user_id.clone();
        self.authors.remember(
            *post,
            PostHead {
                author: head.user_id,
                likes_marked: head.likers_moved,
            },
        );
        Ok(author)
    }

    /// `blocker`'s block of `blocked`, strongly consistent.
    pub(crate) async fn block_of(
        &self,
        blocker: &UserId,
        blocked: &UserId,
    ) -> Result<Option<BlockItem>, StoreError> {
        self.db
            .get_entity(BlockItem::key_of(blocker, blocked).item(), true)
            .await
    }

    /// Whom `blocker` blocks (Q4 leaves their comments on `blocker`'s posts
    /// out): one Query of their partition, `begins_with(SK, ~BLOCKS#)`,
    /// eventually consistent, keys only; at most [`MAX_BLOCKS`] items of
    /// about 200 bytes (`blockCount` bounds them): 0.5 RCU with none, at
    /// most about 25 RCU, in one call (under 1 MB).
    pub(crate) async fn blocked_users(
        &self,
        blocker: &UserId,
    ) -> Result<HashSet<UserId>, StoreError> {
        let query = Query::partition(keys::user_pk(blocker))
            .begins_with(BLOCKS_PREFIX)
            .project(Expr::new("#sk").name("#sk", keys::SK));
        // Bounded by the count's condition (a few more at most, given while
        // the count was read).
        let most = usize::try_from(MAX_BLOCKS).unwrap_or(usize::MAX);
        let rows = self
            .db
            .query_up_to("blocked users", &query, None, most.saturating_add(1))
            .await?;
        let mut blocked = HashSet::with_capacity(rows.len());
        for row in rows {
            let sk = row.get(keys::SK).and_then(|sk| sk.as_s().ok());
            if let Some(user) = sk.and_then(|sk| keys::blocked_of_sk(sk)) {
                blocked.insert(user);
            }
        }
        Ok(blocked)
    }
}

/// The delete of `block` while it is still that block (not one given again
/// since under the same key).
fn block_taken_back(block: &BlockItem) -> Write {
    Write::delete(block.key().item(), Deleted::IfGone).when(
        Expr::new("#block = :block")
            .name("#block", BLOCK_ID)
            .value(":block", s(block.block_id.to_string())),
    )
}

/// The delete of `block`'s mark (whatever it names: a mark is only ever
/// written with its block).
fn mark_taken_back(block: &BlockItem) -> Write {
    Write::delete(block.mark().key().item(), Deleted::Untold)
}

/// A block list's cursor back: `<blockId>.<blockedId>` (the index's key and
/// the table's of the last block shown), both validated.
fn block_and_blocked(raw: &str) -> Result<(BlockId, UserId), crate::ids::IdError> {
    let (block, blocked) = raw
        .split_once('.')
        .ok_or(crate::ids::IdError::NotUlid { kind: "cursor" })?;
    Ok((BlockId::parse(block)?, UserId::parse(blocked)?))
}

/// A block as GSI1 lists it under its blocker (the index projects the
/// table's keys, `userId` and `createdAt`: whom it blocks is read from its
/// table sort key, the block from its index sort key).
#[derive(Deserialize)]
struct BlockRow {
    #[serde(rename = "SK", deserialize_with = "blocked_of_sk")]
    blocked_id: UserId,
    #[serde(rename = "GSI1SK", deserialize_with = "block_of_gsi1sk")]
    block_id: BlockId,
    #[serde(rename = "createdAt")]
    created_at: String,
}

fn blocked_of_sk<'de, D: serde::Deserializer<'de>>(raw: D) -> Result<UserId, D::Error> {
    let sk = String::deserialize(raw)?;
    keys::blocked_of_sk(&sk)
        .ok_or_else(|| serde::de::Error::custom(format!("not a block's key: {sk}")))
}

fn block_of_gsi1sk<'de, D: serde::Deserializer<'de>>(raw: D) -> Result<BlockId, D::Error> {
    let sk = String::deserialize(raw)?;
    keys::block_of_user_block_sk(&sk)
        .ok_or_else(|| serde::de::Error::custom(format!("not a block's index key: {sk}")))
}

/// What a block check needs of a post item, its author, and whether its
/// likes are marked ([`crate::store::items::post::LIKERS_MOVED_ATTRIBUTE`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredHead {
    user_id: UserId,
    #[serde(default)]
    likers_moved: bool,
}
