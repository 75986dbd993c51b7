//! Deleting a post (C2 taken back): the request removes the post item, one
//! conditional DeleteItem (and closes a hot post's shards: below); the
//! fan-out, on the post's REMOVE record, removes its feed entry and then
//! everything else its partitions hold (its content, comments, likes, like
//! markers; a hot post's first-page copies), a page at a time.
//!
//! Nothing can be added to a deleted post: a comment or a like changes the
//! post's count in its transaction, on the condition that the post exists
//! (a hot post's: its shard's counter, which the request deletes, each on
//! its own, before it answers, and the walk before it reads a shard). The
//! request's delete touches only the post item, which no like or comment
//! of a hot post writes: it goes through under any load. So
//! the walk, which starts after the post is gone, finds everything there will
//! ever be, and needs no saved place: each page it deletes is gone from the
//! next Query, and a walk stopped at the deadline (or killed) goes on from
//! what is left when the record comes again. A late record never brings the
//! post back: the feed takes an entry only for a post that still exists
//! (`FanOut::enter_feed`), refreshes only entries that exist, and a username
//! copy only lands on an item that exists.

use futures::StreamExt;

use super::{FanOut, Requests};
use super::{
    Item, ItemType, Store, StoreError,
    deadline::Deadline,
    items::counter::{LikeShardsItem, ShardCounterItem, ShardGroupItem},
    items::post::{PostItem, StoredPost},
    n, s,
    table::{Deleted, Expr, Outcome, Query, TxOutcome, Write},
};
use crate::{
    ids::{PostId, UserId},
    keys::{self, Key, PK, PostPartition, SK},
    revision::Expected,
};

/// How often a deletion reads the post again when it turned hot between
/// its read and its transaction.
const DELETE_ATTEMPTS: usize = 3;
/// How many times a shard counter's delete is sent through the table
/// layer's retries (each up to its attempts and budget) while likes keep
/// holding it.
const CLOSE_ROUNDS: usize = 4;
/// Items deleted at once while walking a post's partition.
const DELETE_CONCURRENCY: usize = 16;
/// Items read per page of the walk.
const PAGE: i32 = 100;

/// What one invocation's walk over a deleted post's partition did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Nothing of the post is left.
    Done { deleted: usize },
    /// Stopped before the deadline; the record must come again.
    Paused { deleted: usize },
}

impl Requests<'_> {
    /// C2 taken back (request): the post, by its author only
    /// ([`Store::delete_post_as_read`]). An erased account is refused first
    /// ([`crate::store::Requests::writer`]), whatever the post; then the post is read
    /// (strongly consistent, for 404 and 403). A hot post's shards are closed
    /// before the answer; the rest goes in the fan-out.
    ///
    /// With an `If-Match` (`expected` not [`Expected::Any`]), the post is
    /// read whole (its content's `updatedAt` is part of its revision), and
    /// deleted only if it is still the revision read: the post item's
    /// delete and a check of its content as read, in one transaction.
    pub async fn delete_post(
        &self,
        post: &PostId,
        caller: &UserId,
        expected: &Expected,
    ) -> Result<(), StoreError> {
        self.refuse_erased(caller).await?;
        self.delete_post_by(post, caller, expected).await
    }
}

/// What deleting a post as it was read did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleting {
    /// Deleted, and a hot post's shards closed.
    Done,
    /// The post is not as read any more (it turned hot, or was deleted):
    /// read it again.
    Changed,
}

impl Store {
    /// The post, if `author` wrote it and it is a revision `expected`
    /// admits: the request's deletion once the caller may write, and the
    /// erasure's walk deleting what an erased account wrote
    /// ([`Expected::Any`]). Read, then deleted as read; read again if it
    /// changed in between.
    pub(super) async fn delete_post_by(
        &self,
        post: &PostId,
        author: &UserId,
        expected: &Expected,
    ) -> Result<(), StoreError> {
        for _ in 0..DELETE_ATTEMPTS {
            if self.delete_once(post, author, expected).await? == Deleting::Done {
                return Ok(());
            }
        }
        Err(StoreError::busy(
            super::Busy::Conflict,
            "the post kept changing while it was deleted",
        ))
    }

    /// One round of [`Store::delete_post_by`]: without a precondition, the
    /// post item alone is read (strongly consistent) and deleted as read;
    /// with one, the post is read whole (its content's `updatedAt` is part of
    /// its revision) and deleted only if neither changed since.
    async fn delete_once(
        &self,
        post: &PostId,
        author: &UserId,
        expected: &Expected,
    ) -> Result<Deleting, StoreError> {
        if *expected == Expected::Any {
            let found = self
                .db
                .get_entity::<PostItem>(keys::post_item(post).item(), true);
            let found = found.await?.ok_or(StoreError::PostNotFound)?;
            found.authored_by(author)?;
            return self.delete_post_as_read(&found).await;
        }
        let found = self.read_post(post, true).await?;
        let found = found.ok_or(StoreError::PostNotFound)?;
        found.item.authored_by(author)?;
        if !expected.admits(found.revision()) {
            return Err(StoreError::PreconditionFailed);
        }
        self.delete_stored_as_read(&found).await
    }

    /// Deletes the post `found` (as read, strongly consistent): its item,
    /// on the condition that it is still its author's and still of the shape
    /// read (quiet, turning hot since the same moment, or hot with as many
    /// shards), one DeleteItem of one small item that no like or comment of
    /// a hot post writes; then, for a hot post (or one turning hot: its
    /// counters are there), closes its shards (`Store::close_shards`). Its content goes
    /// with the rest in the fan-out's walk (without the post item, every
    /// read of the post answers 404). A post that turned hot after it was
    /// read is [`Deleting::Changed`]: it is not deleted as a quiet one, which
    /// would leave its shards open.
    pub async fn delete_post_as_read(&self, found: &PostItem) -> Result<Deleting, StoreError> {
        let remove = Write::delete(keys::post_item(&found.post_id).item(), Deleted::IfGone)
            .when(as_read(found));
        match self.db.write("delete post", &remove).await? {
            Outcome::Done(_) => {}
            // Deleted, or made hot, meanwhile.
            Outcome::ConditionFailed { .. } => return Ok(Deleting::Changed),
        }
        self.close_shards_made(found).await?;
        Ok(Deleting::Done)
    }

    /// [`Store::delete_post_as_read`] of a post read whole, on the condition
    /// that neither its item nor its content was edited since (an
    /// `If-Match` deletion): the item's delete and a check of the content
    /// as read, one transaction.
    async fn delete_stored_as_read(&self, found: &StoredPost) -> Result<Deleting, StoreError> {
        let item = &found.item;
        let unedited = as_read(item)
            .and("updatedAt = :updated")
            .value(":updated", s(&item.updated_at));
        let mut tx = self.db.transaction("delete post as read");
        let remove = Write::delete(keys::post_item(&item.post_id).item(), Deleted::IfGone);
        tx.add("post", remove.when(unedited));
        let content = keys::post_content(&item.post_id).item();
        let content_as_read = match &found.content {
            Some(read) => Expr::new("updatedAt = :read").value(":read", s(&read.updated_at)),
            None => Expr::item_absent(),
        };
        tx.add("post content", Write::check(content, content_as_read));
        match tx.commit().await? {
            TxOutcome::Committed => {}
            // Deleted, made hot or edited meanwhile: read again.
            TxOutcome::ConditionFailed(_) => return Ok(Deleting::Changed),
        }
        self.close_shards_made(item).await?;
        Ok(Deleting::Done)
    }

    /// After the post item's delete: a hot post's shards closed (and those a
    /// post turning hot has counters in).
    async fn close_shards_made(&self, found: &PostItem) -> Result<(), StoreError> {
        if let Some(shards) = found.shards_made() {
            self.close_shards(&found.post_id, shards).await?;
        }
        Ok(())
    }
}

/// A deletion's condition on the post item as read: still its author's and
/// of the shape read (quiet, turning hot since the same moment, or hot with
/// as many shards).
fn as_read(found: &PostItem) -> Expr {
    let shape = match (found.shards, found.closing) {
        (Some(shards), _) => Expr::new("#shards = :shards").value(":shards", n(u64::from(shards))),
        (None, Some(since)) => Expr::new("attribute_not_exists(#shards) AND #closing = :since")
            .name("#closing", crate::store::items::post::CLOSING_ATTRIBUTE)
            .value(":since", n(since)),
        (None, None) => {
            Expr::new("attribute_not_exists(#shards) AND attribute_not_exists(#closing)")
                .name("#closing", crate::store::items::post::CLOSING_ATTRIBUTE)
        }
    }
    .name("#shards", crate::store::items::post::SHARDS_ATTRIBUTE);
    Expr::new("userId = :me")
        .value(":me", s(found.user_id.as_str()))
        .and_expr(shape)
}

impl Store {
    /// Deletes a deleted hot post's shard counters, each on its own (all at
    /// once): a hot like or comment counts in one on the condition that it
    /// exists, so from then on every one is refused (404), as on a deleted
    /// quiet post. Each is a plain delete, which fails while a like's
    /// transaction holds its counter (`TransactionConflict`) and is sent
    /// again; a transaction holds it for milliseconds, so under any load it
    /// soon goes through, where one transaction over all 16 would need all
    /// of them free at once. The fan-out's walk closes them too (first,
    /// before it reads a shard), so that one left open here is closed before
    /// anything of its shard is read.
    pub(super) async fn close_shards(&self, post: &PostId, shards: u8) -> Result<(), StoreError> {
        let closing = ShardCounterItem::keys_of(*post, shards)
            .map(|counter| self.close_shard(counter.item()));
        futures::future::try_join_all(closing).await?;
        Ok(())
    }

    async fn close_shard(&self, counter: Item) -> Result<(), StoreError> {
        let delete = Write::delete(counter, Deleted::IfGone);
        let mut rounds = 0;
        loop {
            rounds += 1;
            match self.db.write("close a deleted post's shard", &delete).await {
                Ok(_) => return Ok(()),
                Err(StoreError::Busy {
                    cause: super::Busy::Conflict | super::Busy::Throttled,
                    ..
                }) if rounds < CLOSE_ROUNDS => {}
                Err(err) => return Err(err),
            }
        }
    }
}

impl FanOut<'_> {
    /// Fan-out of a deleted post: deletes what is left in its partition (and
    /// a hot post's in each of its `shards`), a page at a time, until none
    /// is left or `deadline` is near. Items are read and deleted by key only;
    /// a delete of an item already gone is a no-op, so a walk run twice
    /// deletes nothing twice.
    pub async fn remove_post_items(
        &self,
        post: &PostId,
        shards: Option<u8>,
        deadline: &Deadline,
    ) -> Result<Removal, StoreError> {
        let mut deleted = 0;
        // The shards are closed first: nothing is counted in them, so
        // nothing lands in them, once they are.
        if let Some(shards) = shards {
            self.close_shards(post, shards).await?;
            // Its first pages' copies, in a partition of their own: no
            // rebuild puts one once its likes pointer is gone (each checks
            // it is there).
            let pointer = LikeShardsItem::key_of(post).item();
            self.delete_keys(vec![pointer]).await?;
            let copies = super::first_pages::copies_of(post).collect();
            self.delete_keys(copies).await?;
            // Its group counters, each in a partition of its own (those of
            // the layout before are in shards, which the walk reads).
            let groups = ShardGroupItem::apart_groups_of(0..shards)
                .map(|group| ShardGroupItem::key_of(*post, group).item())
                .collect();
            self.delete_keys(groups).await?;
        }
        // Likers have marks of their likes in their own partitions (every
        // like of a hot post, and of a quiet one this version made): each
        // goes before its like.
        let shards = (0..shards.unwrap_or(0)).map(|k| PostPartition::shard(*post, k));
        for place in std::iter::once(PostPartition::own(*post)).chain(shards) {
            if let Removal::Paused { deleted } =
                self.remove_partition(place, deadline, &mut deleted).await?
            {
                return Ok(Removal::Paused { deleted });
            }
        }
        Ok(Removal::Done { deleted })
    }

    /// One partition of [`crate::store::FanOut::remove_post_items`]'s walk; `deleted`
    /// counts on from the partitions before it. Each like's mark in its
    /// liker's partition goes first, so that a walk stopped between the two
    /// finds the like again (a like given by a version before quiet likes
    /// were marked has none: its mark's delete costs 1 WCU and deletes
    /// nothing).
    async fn remove_partition(
        &self,
        place: PostPartition,
        deadline: &Deadline,
        deleted: &mut usize,
    ) -> Result<Removal, StoreError> {
        loop {
            // At least one page per invocation, however short its time.
            if *deleted > 0 && deadline.near() {
                return Ok(Removal::Paused { deleted: *deleted });
            }
            let query = Query::partition(place.pk())
                .project(
                    Expr::new("#k1, #k2, #type, #user")
                        .name("#k1", PK)
                        .name("#k2", SK)
                        .name("#type", keys::TYPE)
                        .name("#user", "userId"),
                )
                .consistent();
            let page = self
                .db
                .query_page("read a deleted post's items", &query, None, Some(PAGE));
            let items: Vec<Item> = page.await?.items;
            if items.is_empty() {
                return Ok(Removal::Done { deleted: *deleted });
            }
            let marks = items
                .iter()
                .filter(|item| ItemType::of(item) == Some(ItemType::Like))
                .filter_map(|item| item.get("userId")?.as_s().ok())
                .filter_map(|user| UserId::parse(user).ok())
                .map(|user| keys::liked(&user, &place.post).item())
                .collect();
            self.delete_keys(marks).await?;
            let keys = items
                .iter()
                .map(|item| Key::of(item).map(|key| key.item()))
                .collect::<Result<Vec<_>, _>>()?;
            *deleted += self.delete_keys(keys).await?;
        }
    }

    /// Deletes `keys`, [`DELETE_CONCURRENCY`] at a time; a delete that stays
    /// busy through its retries fails the call (the record comes again).
    async fn delete_keys(&self, keys: Vec<Item>) -> Result<usize, StoreError> {
        let results: Vec<Result<(), StoreError>> = futures::stream::iter(keys)
            .map(|key| async move {
                let delete = Write::delete(key, Deleted::IfGone);
                let outcome = self.db.write("delete a deleted post's item", &delete);
                outcome.await.map(|_| ())
            })
            .buffer_unordered(DELETE_CONCURRENCY)
            .collect()
            .await;
        let mut deleted = 0;
        for result in results {
            result?;
            deleted += 1;
        }
        Ok(deleted)
    }
}
