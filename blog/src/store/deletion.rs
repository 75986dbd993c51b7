//! Deleting a post (C2 taken back): the request removes the post and its
//! content in one transaction; the fan-out, on the post's REMOVE record,
//! removes its feed entry and then everything else its partition holds
//! (comments, likes, like markers), a page at a time.
//!
//! Nothing can be added to a deleted post: a comment or a like changes the
//! post's count in its transaction, on the condition that the post exists. So
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
    Item, Store, StoreError,
    posts::PostItem,
    rename::Deadline,
    s,
    table::{Deleted, Expr, Query, TxOutcome, Write},
};
use crate::{
    ids::{PostId, UserId},
    keys::{self, PK, PostPartition, SK},
};

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
    /// C2 taken back (request): the post and its content, in one
    /// transaction, by its author only. An erased account is refused first
    /// ([`crate::store::Requests::writer`]), whatever the post; then the post is read
    /// (strongly consistent, for 404 and 403). The rest goes in the fan-out.
    pub async fn delete_post(&self, post: &PostId, caller: &UserId) -> Result<(), StoreError> {
        self.refuse_erased(caller).await?;
        self.delete_post_by(post, caller).await
    }
}

impl Store {
    /// The post and its content, in one transaction, if `author` wrote it:
    /// the request's deletion once the caller may write, and the erasure's
    /// walk deleting what an erased account wrote.
    pub(super) async fn delete_post_by(
        &self,
        post: &PostId,
        author: &UserId,
    ) -> Result<(), StoreError> {
        let found = self
            .db
            .get_entity::<PostItem>(keys::post_item(post).item(), true);
        let found = found.await?.ok_or(StoreError::PostNotFound)?;
        if &found.user_id != author {
            return Err(StoreError::NotAuthor);
        }
        let mine = Expr::new("userId = :me").value(":me", s(author.as_str()));
        let content = keys::post_content(post).item();
        let mut tx = self.db.transaction("delete post");
        let remove = Write::delete(keys::post_item(post).item(), Deleted::IfGone).when(mine);
        let removed = tx.add("post", remove);
        // The post's own delete tells whether this committed: an old-shape
        // post has no content item, whose absence would pass for a commit.
        tx.add("content", Write::delete(content, Deleted::Untold));
        // A hot post's counters go with it: a like or comment counted there
        // fails from now on, as one on a quiet post does.
        if let Some(shards) = found.shards {
            for counter in Store::shard_counter_keys(post, shards) {
                tx.add("shard counter", Write::delete(counter, Deleted::Untold));
            }
        }
        match tx.commit().await? {
            TxOutcome::Committed => Ok(()),
            // Deleted meanwhile by another request.
            TxOutcome::ConditionFailed(failed) if failed.failed(removed) => {
                Err(StoreError::PostNotFound)
            }
            TxOutcome::ConditionFailed(failed) => Err(failed.unexpected("delete post")),
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
    /// counts on from the partitions before it.
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
                .project(Expr::new("#k1, #k2").name("#k1", PK).name("#k2", SK))
                .consistent();
            let page = self
                .db
                .query_page("read a deleted post's items", &query, None, Some(PAGE));
            let keys: Vec<Item> = page.await?.items;
            if keys.is_empty() {
                return Ok(Removal::Done { deleted: *deleted });
            }
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
