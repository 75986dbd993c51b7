//! Comments (C3) and a post's list of comments (Q4): in the post's
//! partition; on a hot post, in the shard each comment's id names, listed
//! after the post's own through its comments pointer.

use crate::store::items::comment::CommentItem;

use std::collections::HashMap;

use super::{
    Busy, Store, StoreError,
    counts::post::{self as counts, Counting, Tried},
    idempotency::{Answer, Idempotency},
    items::counter::CommentShardsItem,
    items::first_page::{FIRST_PAGE_ENTRIES, FirstPageItem, PageList},
    items::post::PostItem,
    items::request_record::Created,
    items::user::UserItem,
    table::{Committing, Deleted, Expr, Query, TxOutcome, Write},
};
use super::{FanOut, Requests};
use crate::{
    ids::{CommentId, PostId, UserId},
    keys::{COMMENT_PREFIX, Counter, Entity, PostPartition},
    mentions::{self, Mentions},
    model::{Comment, Page},
};

/// How often a comment is tried again when its post turned hot under it.
const COMMENT_ATTEMPTS: usize = 3;

/// A comment to write: its author's profile, its text and the users it
/// mentions.
#[derive(Debug, Clone, Copy)]
struct NewComment<'a> {
    profile: &'a UserItem,
    content: &'a str,
    mentions: &'a Mentions,
}

impl Requests<'_> {
    /// C3 taken back (request): removes `comment` from `post` and one from
    /// the post's `commentCount`, in one transaction. Its author may, and so
    /// may the post's author (a strongly consistent read of each, the post's
    /// only when the caller is not the comment's author); an erased account
    /// may not, whatever the comment ([`crate::store::Requests::writer`] first).
    pub async fn delete_comment(
        &self,
        post: &PostId,
        comment: &CommentId,
        caller: &UserId,
    ) -> Result<(), StoreError> {
        self.refuse_erased(caller).await?;
        let found = self.read_comment(post, comment).await?;
        let found = found.ok_or(StoreError::CommentNotFound)?;
        let comment_key = found.key().item();
        if &found.user_id != caller {
            let post_item = self.db.get_entity::<PostItem>(PostItem::key(post), true);
            let post_item = post_item.await?.ok_or(StoreError::CommentNotFound)?;
            if &post_item.user_id != caller {
                return Err(StoreError::NotCommentAuthor);
            }
        }
        let exists = Expr::item_exists();
        let mut tx = self.db.transaction("delete comment");
        let remove = Write::delete(comment_key, Deleted::IfGone).when(exists);
        let removed = tx.add("comment", remove);
        let count = counts::counted_down(post, found.counted_in, Counter::Comments);
        let counted = tx.add("count", count);
        match tx.commit().await? {
            TxOutcome::Committed => Ok(()),
            // Deleted meanwhile (by its other permitted deleter, or the post's
            // deletion): there is no such comment now.
            TxOutcome::ConditionFailed(failed) if failed.failed(removed) => {
                Err(StoreError::CommentNotFound)
            }
            TxOutcome::ConditionFailed(failed) if failed.failed(counted) => {
                Err(StoreError::CommentNotFound)
            }
            TxOutcome::ConditionFailed(failed) => Err(failed.unexpected("delete comment")),
        }
    }

    /// C3 (request): the comment and one up on the post's `commentCount`
    /// commit together, so the count is exact however many comment at once
    /// (the seeds' stored procedure, as one single-partition transaction).
    /// On a hot post the count goes to a shard's counter instead ([`hot`](super::hot));
    /// a quiet post's partition refusing the comment for capacity makes the
    /// post hot. A comment that mentions anyone costs one BatchGetItem
    /// first (`Requests::find_mentioned`): the users go onto its item. A
    /// commenter the post's author blocks is refused
    /// ([`StoreError::Blocked`], nothing written), as a like is
    /// ([`Requests::like_post`]).
    pub async fn create_comment(
        &self,
        post: &PostId,
        author: &UserId,
        content: &str,
    ) -> Result<Comment, StoreError> {
        match self
            .create_comment_keyed(post, author, content, None)
            .await?
        {
            Answer::New(comment) => Ok(comment),
            Answer::Replayed(_) => Err(StoreError::Internal(
                "a replay without an idempotency key".to_owned(),
            )),
        }
    }

    /// [`crate::store::Requests::create_comment`], with an `Idempotency-Key` if the request
    /// had one ([`super::idempotency`]): its record goes in the same
    /// transaction, and a retry gets the first answer.
    pub async fn create_comment_keyed(
        &self,
        post: &PostId,
        author: &UserId,
        content: &str,
        keyed: Option<&Idempotency>,
    ) -> Result<Answer<Comment>, StoreError> {
        // The caller's profile (403 for an erased account, or without one):
        // its name goes onto the item.
        let profile = self.writer(author).await?.profile()?;
        // The users it mentions, found once whatever the attempts.
        let mentions = self
            .find_mentioned(author, &mentions::in_comment(content))
            .await?;
        let comment = NewComment {
            profile: &profile,
            content,
            mentions: &mentions,
        };
        // Refused if the post's author blocks the caller: the block's mark
        // in the caller's own partition, checked in the transaction.
        let owner = self.post_author(post).await?;
        let check = CommentItem::not_blocked(author, &owner);
        let commented = self.count_up(post, COMMENT_ATTEMPTS, |counting| {
            self.comment_once(post, comment, keyed, check.clone(), counting)
        });
        commented.await?.ok_or_else(|| {
            StoreError::busy(
                Busy::Conflict,
                "the post kept changing while it was commented on",
            )
        })
    }

    /// One attempt of [`Requests::create_comment_keyed`], counting where
    /// `counting` says ([`super::counts`]).
    async fn comment_once(
        &self,
        post: &PostId,
        comment: NewComment<'_>,
        keyed: Option<&Idempotency>,
        check: Option<Write>,
        counting: Counting,
    ) -> Result<Tried<Answer<Comment>>, StoreError> {
        let NewComment {
            profile,
            content,
            mentions,
        } = comment;
        let mut item = match counting.shards {
            // A hot post's comment lives and counts in a shard its id names.
            Some(shards) if counting.comments_sharded => {
                let id = CommentId::generate_spread(shards);
                let mut item = CommentItem::new(*post, id, profile, content);
                item.shard = id.shard();
                item.counted_in = id.shard();
                item
            }
            // Made hot before its comments were sharded: in its partition,
            // counted in a shard.
            Some(shards) => {
                let id = CommentId::generate_in(None);
                let mut item = CommentItem::new(*post, id, profile, content);
                item.counted_in = Some(crate::store::items::counter::comment_shard(&id, shards));
                item
            }
            None => CommentItem::new(*post, CommentId::generate_in(None), profile, content),
        };
        item.mentions = mentions.clone();
        let mut tx = self.db.transaction("comment");
        let comment = tx.add("comment", Write::create(&item)?);
        let count = counts::counted_up(post, item.counted_in, Counter::Comments);
        let counted = tx.add("count", count);
        let answer = Comment::from(item.clone());
        let created = Created::Comment {
            post_id: *post,
            comment_id: item.comment_id,
        };
        let record = Idempotency::add_record(keyed, &mut tx, profile.account(), &answer, created)?;
        let unblocked = check.map(|check| tx.add("not blocked", check));
        let sharded = item.shard.is_some() && item.shard == item.counted_in;
        if counting.watch && (item.counted_in.is_none() || sharded) {
            // Both in one partition (the post's, or one of its shards); each
            // also in an index partition of its own (the commenter's, the
            // author's): throttled together, that partition is at its
            // limit, and the post may turn hot, or widen (at the most
            // shards: the next try has a new id, in another shard).
            tx.yield_when_throttled(&[comment, counted]);
        }
        let failed = match tx.commit_watched().await? {
            Committing::Done(TxOutcome::Committed) => return Ok(Tried::Done(Answer::New(answer))),
            Committing::Done(TxOutcome::ConditionFailed(failed)) => failed,
            Committing::Throttled => return Ok(Tried::Throttled),
            Committing::Held => return Err(StoreError::IdempotencyKeyInFlight),
        };
        if let (Some(keyed), Some(record)) = (keyed, record)
            && failed.failed(record)
        {
            let replay = self.replay(profile.account(), keyed).await?;
            return Ok(Tried::Done(Answer::Replayed(replay)));
        }
        if unblocked.is_some_and(|check| failed.failed(check)) {
            return Err(StoreError::Blocked);
        }
        if !failed.failed(counted) {
            return Err(failed.unexpected("comment"));
        }
        // Gone (404), or hot meanwhile: in its shards then.
        Ok(Tried::Refused)
    }

    /// Q4 (request): one Query in the post's partition, oldest first, and
    /// for a page with comments what `Requests::shown_comments` reads. A hot
    /// post's comments pointer sorts after its comments: met, the page goes
    /// on in each of its shards (one Query each, at once, after the same
    /// comment), and the pages are merged oldest first. The cursor is the
    /// last comment's id; each page reads the shard count from the pointer,
    /// so no cursor decides how much is read. A hot post's first page reads
    /// the fan-out's copy of its keys instead
    /// (`Requests::first_comments_page`), at once when this process knows it
    /// is hot, else once the first Query has met its pointer.
    pub async fn list_comments(
        &self,
        post: &PostId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Comment>, StoreError> {
        let list = format!("comments:{post}");
        let after = super::pages::resume_after(&list, cursor, CommentId::parse)?;
        let mut own = None;
        if after.is_none() {
            if let Some(kept) = self.hot_reads.comments(post, limit) {
                return Ok(kept);
            }
            // A post this process has not met hot: its own partition first,
            // whose pointer (a hot post's, after its own comments) sends the
            // page to the copy rather than to every shard.
            if !self.paged_hot(post) {
                let read = self.own_comments(post, after, limit, false).await?;
                if read.shards.is_some() {
                    self.paged.saw(*post);
                }
                own = Some(read);
            }
            if self.paged_hot(post)
                && let Some(page) = self.first_comments_page(post, &list, limit).await?
            {
                self.hot_reads.keep_comments(post, limit, &page);
                return Ok(page);
            }
        }
        let own = match own {
            Some(own) => own,
            None => self.own_comments(post, after, limit, false).await?,
        };
        let (mut comments, more, shards) =
            self.merge_comments(post, after, limit, false, own).await?;
        let next_cursor = match comments.last() {
            Some(last) if more => Some(super::cursor::encode(&list, &last.comment_id.to_string())),
            _ => None,
        };
        if !comments.is_empty() {
            comments = self.shown_comments(post, comments).await?;
        }
        let page = Page {
            items: comments.into_iter().map(Comment::from).collect(),
            next_cursor,
        };
        if after.is_none() && shards.is_some() {
            self.hot_reads.keep_comments(post, limit, &page);
        }
        Ok(page)
    }

    /// A hot post's first page of comments from the fan-out's copy
    /// ([`super::first_pages`]): the copy (one GetItem, eventually
    /// consistent: `Store::copy_for_page`, which says the post's author),
    /// then at once the comments it names first (one BatchGetItem,
    /// eventually consistent, `limit + 1` of them, at most 100, but those
    /// the instance keeps: `Store::copied_entries`) and the post's author's
    /// blocks (one Query). A comment by someone the author blocks is left
    /// out, and one deleted since (a kept one once the copy is made
    /// again). `None` when the post or the
    /// copy is missing: the merge reads it.
    async fn first_comments_page(
        &self,
        post: &PostId,
        list: &str,
        limit: usize,
    ) -> Result<Option<Page<Comment>>, StoreError> {
        let Some((copy, author)) = self.copy_for_page(post, PageList::Comments).await? else {
            return Ok(None);
        };
        let entries = copy.entries(CommentId::parse)?;
        let read = &entries[..super::pages::copy_read(entries.len(), limit)];
        let keys = read
            .iter()
            .map(|(comment, place)| CommentItem::key_of(*place, comment))
            .collect();
        let (found, blocked) = futures::try_join!(
            self.copied_entries("a hot post's first comments", keys),
            self.blocked_users(&author),
        )?;
        let mut found: HashMap<CommentId, CommentItem> = super::from_items::<CommentItem>(found)?
            .into_iter()
            .map(|comment| (comment.comment_id, comment))
            .collect();
        let present = read
            .iter()
            .filter_map(|(comment, _)| found.remove(comment))
            .filter(|comment| !blocked.contains(&comment.user_id))
            .collect();
        let ids: Vec<CommentId> = read.iter().map(|(comment, _)| *comment).collect();
        let beyond = copy.more || entries.len() > read.len();
        let (shown, after) =
            super::pages::from_copy(&ids, present, limit, beyond, |c: &CommentItem| c.comment_id);
        let next_cursor = after.map(|comment| super::cursor::encode(list, &comment.to_string()));
        Ok(Some(Page {
            items: shown.into_iter().map(Comment::from).collect(),
            next_cursor,
        }))
    }

    /// What a page of comments shows of `comments` (not empty): the post
    /// item read, eventually consistent (a post taken back to a draft shows
    /// no one what it had: 404); then, if someone other than its author
    /// commented, whom the author blocks ([`Store::blocked_users`]: one
    /// Query of their blocks, at most
    /// [`MAX_BLOCKS`](super::items::block::MAX_BLOCKS) of them), whose
    /// comments are left out from the moment of the block until it is taken
    /// back. The cursor is the last comment read, shown or not, so a page may
    /// hold fewer than `limit` while `nextCursor` goes on.
    async fn shown_comments(
        &self,
        post: &PostId,
        comments: Vec<CommentItem>,
    ) -> Result<Vec<CommentItem>, StoreError> {
        let found = self
            .db
            .get("a post item", PostItem::key(post), false)
            .await?;
        let Some(found) = found else {
            // Deleted meanwhile: its walk takes the rest.
            return Ok(comments);
        };
        let head: ShownPost = super::from_item(found)?;
        if head.status.is_some() {
            return Err(StoreError::PostNotFound);
        }
        if comments
            .iter()
            .all(|comment| comment.user_id == head.user_id)
        {
            return Ok(comments);
        }
        let blocked = self.blocked_users(&head.user_id).await?;
        Ok(comments
            .into_iter()
            .filter(|comment| !blocked.contains(&comment.user_id))
            .collect())
    }
}

impl Store {
    /// The exact merge of `post`'s comments after `after` (none: from the
    /// oldest): [`Self::own_comments`], then [`Self::merge_comments`];
    /// strongly consistent if `consistent` (the fan-out's copy). Up to
    /// `limit` comments, whether more follow, and the shards read.
    async fn merged_comments(
        &self,
        post: &PostId,
        after: Option<CommentId>,
        limit: usize,
        consistent: bool,
    ) -> Result<(Vec<CommentItem>, bool, Option<u8>), StoreError> {
        let own = self.own_comments(post, after, limit, consistent).await?;
        self.merge_comments(post, after, limit, consistent, own)
            .await
    }

    /// The merge's first read: one Query of `post`'s own partition, its
    /// comments and the shards a hot post's comments pointer, met after
    /// them, names.
    async fn own_comments(
        &self,
        post: &PostId,
        after: Option<CommentId>,
        limit: usize,
        consistent: bool,
    ) -> Result<OwnComments, StoreError> {
        let mut items = self
            .comments_in(PostPartition::own(*post), after, limit, consistent)
            .await?;
        let shards = items.last().and_then(CommentShardsItem::of);
        if shards.is_some() {
            items.pop();
        }
        Ok(OwnComments { items, shards })
    }

    /// The rest of the merge after `own`: each shard it names read after
    /// the same comment (one Query each, at once), merged oldest first.
    async fn merge_comments(
        &self,
        post: &PostId,
        after: Option<CommentId>,
        limit: usize,
        consistent: bool,
        own: OwnComments,
    ) -> Result<(Vec<CommentItem>, bool, Option<u8>), StoreError> {
        let OwnComments { items, shards } = own;
        let comments: Vec<CommentItem> = super::from_items(items)?;
        let read = |k: u8, after: Option<CommentId>, take: usize| async move {
            let place = PostPartition::shard(*post, k);
            let page = self.comments_in(place, after, take - 1, consistent).await?;
            Ok::<_, StoreError>(super::from_items::<CommentItem>(page)?)
        };
        // A quiet post's page is its own partition's: no shard to read.
        let merged = super::merge::merge_shards(
            shards.unwrap_or(0),
            comments,
            limit,
            after,
            |comment| comment.comment_id,
            |comment| comment.comment_id,
            read,
        )
        .await?;
        Ok((merged.items, merged.more, shards))
    }

    /// Up to `limit + 1` comments (and a hot post's pointer, after them) of
    /// one partition, oldest first, after `after`.
    async fn comments_in(
        &self,
        place: PostPartition,
        after: Option<CommentId>,
        limit: usize,
        consistent: bool,
    ) -> Result<Vec<super::Item>, StoreError> {
        let start = after.map(|comment| CommentItem::key_of(place, &comment).item());
        let mut query = Query::partition(place.pk()).begins_with(COMMENT_PREFIX);
        if consistent {
            query = query.consistent();
        }
        // Named apart in the retry layer's logs: the fan-out's merge reads
        // strongly, a reader's eventually.
        let what = if consistent {
            "comments, strongly"
        } else {
            "comments"
        };
        self.db
            .query_up_to(what, &query, start, limit.saturating_add(1))
            .await
    }
}

/// The merge's first read: the comments of the post's own partition, and
/// the shards to read after them (a hot post's).
struct OwnComments {
    items: Vec<super::Item>,
    shards: Option<u8>,
}

impl FanOut<'_> {
    /// The fan-out's copy of `post`'s comments' first page: the exact merge
    /// of its [`FIRST_PAGE_ENTRIES`] oldest, strongly consistent, begun at
    /// `made_at` ([`super::first_pages`]).
    pub(super) async fn first_comments(
        &self,
        post: &PostId,
        made_at: u64,
    ) -> Result<FirstPageItem, StoreError> {
        let (comments, more, shards) = self
            .merged_comments(post, None, FIRST_PAGE_ENTRIES, true)
            .await?;
        let entries = comments
            .iter()
            .map(|comment| (comment.comment_id.to_string(), comment.shard));
        Ok(FirstPageItem::made(
            *post,
            PageList::Comments,
            entries,
            more,
            shards.unwrap_or(0),
            made_at,
        ))
    }
}

/// What a page of comments reads of its post item: its author, and whether
/// it is a draft.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ShownPost {
    user_id: UserId,
    #[serde(default)]
    status: Option<crate::store::items::post::Unpublished>,
}

impl Store {
    /// A comment, strongly consistent (a replay reads its content; a
    /// deletion its author and where it was counted): in the shard its id
    /// names, else in its post's own partition (ids made before they named
    /// one may name a shard by chance).
    pub(super) async fn read_comment(
        &self,
        post: &PostId,
        comment: &CommentId,
    ) -> Result<Option<CommentItem>, StoreError> {
        let own = PostPartition::own(*post);
        if let Some(shard) = comment.shard() {
            let key = CommentItem::key_of(PostPartition::shard(*post, shard), comment);
            let found = self.db.get_entity::<CommentItem>(key.item(), true).await?;
            if found.is_some() {
                return Ok(found);
            }
        }
        let key = CommentItem::key_of(own, comment).item();
        self.db.get_entity::<CommentItem>(key, true).await
    }
}
