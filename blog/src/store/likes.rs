//! Likes (C4) and a post's list of likes (Q5): in the post's partition (on a
//! hot post, in its shards), each made unique by a mark in its liker's own
//! partition (`USER#u / ~LIKED#p`); on a post created before quiet likes were
//! marked, a like given while it is quiet by a marker beside it (and marked
//! too).

use crate::store::items::like::{LikeItem, LikedMarker, LikerMarker};

use std::collections::HashMap;

use super::{
    Busy, StoreError,
    counts::post::{self as counts, Counting, Tried},
    items::counter::LikeShardsItem,
    items::first_page::{FIRST_PAGE_ENTRIES, FirstPageItem, PageList},
    items::user::UserItem,
    table::{Committing, Deleted, Expr, Query, TxOutcome, Write},
};
use super::{FanOut, Requests, Store};
use crate::{
    ids::{IdError, LikeId, PostId, UserId},
    keys::{Counter, Entity, LIKE_PREFIX, PostPartition},
    model::{Like, Page},
};

/// How often a like or an unlike tries again when the other changed the
/// marker under it.
const UNLIKE_ATTEMPTS: usize = 5;

/// Where a user's like of a post is marked: in their own partition (a hot
/// post's), or beside the like (a quiet post's, and a hot post's given while
/// it was quiet, until the fan-out has moved its mark).
#[derive(Debug)]
enum Marked {
    Liked(LikedMarker),
    Beside(LikerMarker),
}

/// What liking did: a new like, or the one the user had already given.
#[derive(Debug)]
pub enum Liked {
    New(Like),
    Already(Like),
}

/// Where a page of a post's likes resumes: after a like, and whether the
/// list was a hot post's (its shards merged in). A cursor made while the post
/// was quiet goes on in its own partition only, which is right: every like in
/// a shard is newer than every like given before the post was hot.
#[derive(Debug, Clone, Copy)]
struct LikesCursor {
    after: LikeId,
    shards: Option<u8>,
}

impl LikesCursor {
    fn parse(raw: &str) -> Result<Self, IdError> {
        let (like, shards) = match raw.split_once('.') {
            None => (raw, None),
            Some((like, shards)) => {
                let shards = shards.parse::<u8>().ok().filter(|n| *n > 0);
                let bad = IdError::NotUlid { kind: "cursor" };
                (like, Some(shards.ok_or(bad)?))
            }
        };
        Ok(Self {
            after: LikeId::parse(like)?,
            shards,
        })
    }

    fn encode(like: LikeId, shards: Option<u8>) -> String {
        match shards {
            None => like.to_string(),
            Some(n) => format!("{like}.{n}"),
        }
    }
}

impl Requests<'_> {
    /// C4 (request): the liker's mark in their own partition, the like and
    /// one up on the post's `likeCount` commit together; a second like by
    /// the same user fails on the mark and changes nothing. On a hot post
    /// the like goes to the liker's shard and the count to its counter; a
    /// hot post created before quiet likes were marked reads, until the
    /// fan-out has moved their marks, the marker a like given while it was
    /// quiet has ([`hot`](super::hot)). A quiet post written fast, or whose
    /// partition refuses the like for capacity, is made hot. The like
    /// copies the liker's username as read; a rename racing with it is
    /// caught up by the fan-out's INSERT rule.
    ///
    /// A liker the post's author blocks is refused ([`StoreError::Blocked`],
    /// nothing written): both ways (quiet and hot) check the block's mark in
    /// the liker's own partition in their transaction
    /// (`LikeItem::not_blocked`, 2 WCU; none on the author's own
    /// like). The author comes from this process's memory, or one read of
    /// the post item the first time (`Requests::post_author`).
    pub async fn like_post(&self, post: &PostId, liker: &UserId) -> Result<Liked, StoreError> {
        // The caller's profile (403 for an erased account, or without one):
        // its name goes onto the item.
        let profile = self.writer(liker).await?.profile()?;
        let author = self.post_author(post).await?;
        let check = LikeItem::not_blocked(liker, &author);
        // A like taken back between the refused put and the read of the
        // existing one: like again.
        let liked = self.count_up(post, UNLIKE_ATTEMPTS, |counting| {
            self.like_once(post, &profile, check.clone(), counting)
        });
        liked.await?.ok_or_else(|| {
            StoreError::busy(Busy::Conflict, "the like kept being given and taken back")
        })
    }

    /// One attempt of [`Requests::like_post`], counting where `counting`
    /// says ([`super::counts`]). A quiet post's like goes to its partition
    /// with its marker; a hot post's to the liker's shard, marked in the
    /// liker's own partition ([`LikedMarker`]). Until the fan-out has moved
    /// the marks of the likes given while the post was quiet, a hot like
    /// first reads the marker such a like has beside it.
    async fn like_once(
        &self,
        post: &PostId,
        profile: &UserItem,
        check: Option<Write>,
        counting: Counting,
    ) -> Result<Tried<Liked>, StoreError> {
        let liker = &profile.user_id;
        let Some(shards) = counting.shards else {
            return self.like_quiet(post, profile, check, counting.watch).await;
        };
        if !counting.likers_moved
            && let Some(existing) = self.unmoved_like(post, liker, shards).await?
        {
            // A deleted post's likes stay until the fan-out's walk takes
            // them: answered only while the post is there (404 after, as a
            // quiet post's like is).
            if self.post_shards(post).await?.is_none() {
                self.found_gone(post);
                return Err(StoreError::PostNotFound);
            }
            return Ok(Tried::Done(Liked::Already(existing)));
        }
        let shard = crate::store::items::counter::like_shard(liker, shards, counting.throttled);
        let place = PostPartition::shard(*post, shard);
        let like = LikeItem::new(place, LikeId::generate(), profile);
        let mut tx = self.db.transaction("like a hot post");
        let marked = tx.add("liked mark", Write::create(&LikedMarker::for_like(&like))?);
        let liked = tx.add("like", Write::create(&like)?);
        let counted = tx.add(
            "count",
            counts::counted_up(post, Some(shard), Counter::Likes),
        );
        let unblocked = check.map(|check| tx.add("not blocked", check));
        if counting.watch {
            // The like and the count share the shard's partition (the like's
            // index entry is in the liker's): throttled together, that
            // partition is at its limit, and the post may widen (at the
            // most shards: the next try goes to another shard).
            tx.yield_when_throttled(&[liked, counted]);
        }
        let outcome = match tx.commit_watched().await? {
            Committing::Done(outcome) => outcome,
            Committing::Throttled => return Ok(Tried::Throttled),
            Committing::Held => return Err(StoreError::Internal("hot like: held".into())),
        };
        match outcome {
            TxOutcome::Committed => Ok(Tried::Done(Liked::New(like.into()))),
            TxOutcome::ConditionFailed(failed)
                if unblocked.is_some_and(|check| failed.failed(check)) =>
            {
                Err(StoreError::Blocked)
            }
            // Gone (its counters are closed first).
            TxOutcome::ConditionFailed(failed) if failed.failed(counted) => Ok(Tried::Refused),
            TxOutcome::ConditionFailed(failed) if failed.failed(marked) => {
                Ok(match self.marked_like(post, liker).await? {
                    Some(existing) => Tried::Done(Liked::Already(existing)),
                    None => Tried::Again,
                })
            }
            TxOutcome::ConditionFailed(failed) => Err(failed.unexpected("hot like")),
        }
    }

    /// A like of a post this process knows no shards of: the liker's mark
    /// in their own partition, the like and the count in the post's
    /// partition; a second like by the same user fails on the mark. On a
    /// post created before quiet likes were marked (this process read it so,
    /// or its count refused a like without a marker: [`counts`]), the marker
    /// beside the like too, which is what makes it unique there (and the
    /// mark says so: `beside`). Throttled in the post's partition on the
    /// like and the count while `watch`ing, it yields (the post may be made
    /// hot).
    async fn like_quiet(
        &self,
        post: &PostId,
        profile: &UserItem,
        check: Option<Write>,
        watch: bool,
    ) -> Result<Tried<Liked>, StoreError> {
        let place = PostPartition::own(*post);
        let like = LikeItem::new(place, LikeId::generate(), profile);
        let marked_only = self.authors.likes_marked(post);
        let mut tx = self.db.transaction("like");
        let (mark, count, marker) = if marked_only {
            let count = counts::counted_up_marked(post);
            (LikedMarker::for_like(&like), count, None)
        } else {
            let marker = LikerMarker::for_like(&like);
            let count = counts::counted_up(post, None, Counter::Likes);
            (LikedMarker::moved(&marker), count, Some(marker))
        };
        let marked = tx.add("liked mark", Write::create(&mark)?);
        let marker = match marker {
            Some(marker) => Some(tx.add("liker marker", Write::create(&marker)?)),
            None => None,
        };
        let liked = tx.add("like", Write::create(&like)?);
        let counted = tx.add("count", count);
        let unblocked = check.map(|check| tx.add("not blocked", check));
        if watch {
            // The like touches its liker's index partition, the count its
            // author's: throttled together, it is the post's partition that
            // is at its limit.
            tx.yield_when_throttled(&[liked, counted]);
        }
        let failed = match tx.commit_watched().await? {
            Committing::Throttled => return Ok(Tried::Throttled),
            Committing::Done(TxOutcome::Committed) => {
                return Ok(Tried::Done(Liked::New(like.into())));
            }
            Committing::Done(TxOutcome::ConditionFailed(failed)) => failed,
            Committing::Held => return Err(StoreError::Internal("like: held".into())),
        };
        if unblocked.is_some_and(|check| failed.failed(check)) {
            Err(StoreError::Blocked)
        } else if failed.failed(counted) {
            // Gone, hot (or turning hot) meanwhile, or its likes unmarked.
            Ok(Tried::Refused)
        } else if marker.is_some_and(|marker| failed.failed(marker)) {
            Ok(match self.existing_like(place, &profile.user_id).await? {
                Some(existing) => Tried::Done(Liked::Already(existing)),
                None => Tried::Again,
            })
        } else if failed.failed(marked) {
            // Liked already (a mark whose like is gone is dropped, and the
            // like tried again).
            Ok(match self.marked_like(post, &profile.user_id).await? {
                Some(existing) => Tried::Done(Liked::Already(existing)),
                None => Tried::Again,
            })
        } else {
            Err(failed.unexpected("like"))
        }
    }

    /// A like of a hot post marked only beside it: given while the post was
    /// quiet (in its own partition), or in the liker's shard by a version
    /// that kept marks there, and not yet moved by the fan-out. Both reads
    /// at once.
    async fn unmoved_like(
        &self,
        post: &PostId,
        liker: &UserId,
        shards: u8,
    ) -> Result<Option<Like>, StoreError> {
        let shard = PostPartition::shard(
            *post,
            crate::store::items::counter::liker_shard(liker, shards),
        );
        let (own, sharded) = futures::try_join!(
            self.existing_like(PostPartition::own(*post), liker),
            self.existing_like(shard, liker),
        )?;
        Ok(own.or(sharded))
    }

    /// The like a user already gave a post, in the partition `place`: the
    /// marker there names it. `None` when there is none (or it was taken back
    /// meanwhile).
    async fn existing_like(
        &self,
        place: PostPartition,
        liker: &UserId,
    ) -> Result<Option<Like>, StoreError> {
        let Some(marker) = self.marker(place, liker).await? else {
            return Ok(None);
        };
        self.like_at(place, marker.like_id).await
    }

    /// The like `like` in the partition `place`, strongly consistent.
    async fn like_at(
        &self,
        place: PostPartition,
        like: LikeId,
    ) -> Result<Option<Like>, StoreError> {
        let like_key = LikeItem::key_of(place, &like);
        let like = self
            .db
            .get_entity::<LikeItem>(like_key.item(), true)
            .await?;
        Ok(like.map(Like::from))
    }

    /// The like a user's own partition marks as theirs on a hot post. A mark
    /// whose like is gone (the fan-out's move copied a marker as the like
    /// was taken back) is deleted, and `None` says to try again.
    async fn marked_like(&self, post: &PostId, liker: &UserId) -> Result<Option<Like>, StoreError> {
        let Some(mark) = self.liked_mark(post, liker).await? else {
            return Ok(None);
        };
        match self.like_at(mark.like_place(), mark.like_id).await? {
            Some(like) => Ok(Some(like)),
            None => {
                self.drop_stale_mark(&mark).await?;
                Ok(None)
            }
        }
    }

    /// A mark whose like is gone, out (if it still names that like).
    async fn drop_stale_mark(&self, mark: &LikedMarker) -> Result<(), StoreError> {
        let delete = Write::delete(mark.key().item(), Deleted::Untold)
            .when(LikedMarker::naming(mark.like_id));
        self.db.write("a stale liked mark", &delete).await?;
        Ok(())
    }

    async fn marker(
        &self,
        place: PostPartition,
        liker: &UserId,
    ) -> Result<Option<LikerMarker>, StoreError> {
        let key = LikerMarker::key_of(place, liker).item();
        self.db.get_entity::<LikerMarker>(key, true).await
    }

    async fn liked_mark(
        &self,
        post: &PostId,
        liker: &UserId,
    ) -> Result<Option<LikedMarker>, StoreError> {
        let key = LikedMarker::key_of(liker, post).item();
        self.db.get_entity::<LikedMarker>(key, true).await
    }

    /// Where `liker`'s like of `post` is marked, if they gave one: their
    /// own partition first (every like this version gives is marked there);
    /// then, on a post this process knows is hot, until its marks are
    /// moved, beside a like given while it was quiet or in the liker's
    /// shard ([`Requests::hot_marker`]). Else the post is read (404 when
    /// there is none; one it learns is hot is looked at as above), and on a
    /// quiet post created before quiet likes were marked (no `likersMoved`)
    /// the marker beside a like given there.
    async fn find_marker(
        &self,
        post: &PostId,
        liker: &UserId,
    ) -> Result<Option<Marked>, StoreError> {
        if let Some(mark) = self.liked_mark(post, liker).await? {
            return Ok(Some(Marked::Liked(mark)));
        }
        if let Some(hot) = self.known_hot(post) {
            return self
                .hot_marker(post, liker, hot.shards, hot.likers_moved, false)
                .await;
        }
        let found = self.post_shards(post).await?;
        let found = found.ok_or(StoreError::PostNotFound)?;
        if let Some(hot) = found.hot() {
            self.hot.remember(*post, hot);
            return self
                .hot_marker(post, liker, hot.shards, hot.likers_moved, true)
                .await;
        }
        if found.likers_moved == Some(true) {
            return Ok(None);
        }
        let marker = self.marker(PostPartition::own(*post), liker).await?;
        Ok(marker.map(Marked::Beside))
    }

    /// [`Requests::find_marker`] on a hot post with no mark of the liker's:
    /// (marks not yet moved) a marker beside a like given while it was
    /// quiet, or in the liker's shard. Nothing found: `None`, or 404 if the
    /// post is gone (read unless `found`: read just now, and there).
    async fn hot_marker(
        &self,
        post: &PostId,
        liker: &UserId,
        shards: u8,
        likers_moved: bool,
        found: bool,
    ) -> Result<Option<Marked>, StoreError> {
        if !likers_moved {
            let shard = PostPartition::shard(
                *post,
                crate::store::items::counter::liker_shard(liker, shards),
            );
            for place in [PostPartition::own(*post), shard] {
                if let Some(marker) = self.marker(place, liker).await? {
                    return Ok(Some(Marked::Beside(marker)));
                }
            }
        }
        if !found && self.post_shards(post).await?.is_none() {
            self.found_gone(post);
            return Err(StoreError::PostNotFound);
        }
        Ok(None)
    }

    /// C4 taken back (request): the caller's like of `post`, its marker (or
    /// mark) and one off the count it was counted in (the post's
    /// `likeCount`, or its shard's counter on a hot post) go together.
    /// `false` when there is no like to take back (answered 204 all the
    /// same); an error if there is no such post. A marker is deleted only if
    /// it still names the like read, so a concurrent unlike and like again
    /// are read afresh. An erased account's unlike is refused before
    /// anything of the post is read ([`crate::store::Requests::writer`]).
    pub async fn unlike_post(&self, post: &PostId, liker: &UserId) -> Result<bool, StoreError> {
        self.refuse_erased(liker).await?;
        for _ in 0..UNLIKE_ATTEMPTS {
            let Some(marked) = self.find_marker(post, liker).await? else {
                return Ok(false);
            };
            let taken = match marked {
                Marked::Liked(mark) => self.unlike_marked(post, liker, mark).await?,
                Marked::Beside(marker) => self.unlike_beside(post, liker, marker).await?,
            };
            match taken {
                Tried::Done(taken) => return Ok(taken),
                // The post is gone (404), or hot: learned, and read again.
                Tried::Refused => self.learn_shards(post).await?,
                Tried::Again | Tried::Throttled => {}
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the like kept changing while it was taken back",
        ))
    }

    /// A like taken back by its mark: the mark, the like, the marker beside
    /// it if the mark says there is one (`beside`), and one off where it was
    /// counted: its shard's counter, or the post item for a like given while
    /// the post was quiet. There, on a post this process does not know is
    /// hot or turning hot, the count's condition fails if it is after all,
    /// or if it is a draft (`Refused`: the caller learns it, and reads
    /// again or answers 404), as a like's does.
    async fn unlike_marked(
        &self,
        post: &PostId,
        liker: &UserId,
        mark: LikedMarker,
    ) -> Result<Tried<bool>, StoreError> {
        let place = mark.like_place();
        let quiet = place.shard.is_none()
            && self.known_shards(post).is_none()
            && !self.hot.is_closing(post);
        let mut tx = self.db.transaction("unlike by the mark");
        let unmarked = tx.add(
            "liked mark",
            Write::delete(mark.key().item(), Deleted::IfGone)
                .when(LikedMarker::naming(mark.like_id)),
        );
        if mark.beside {
            let key = LikerMarker::key_of(place, liker).item();
            let names_it = LikedMarker::absent_or_naming(mark.like_id);
            tx.add(
                "liker marker",
                Write::delete(key, Deleted::Untold).when(names_it),
            );
        }
        let like_key = LikeItem::key_of(place, &mark.like_id);
        let like = Write::delete(like_key.item(), Deleted::Untold).when(Expr::item_exists());
        let removed = tx.add("like", like);
        let count = if quiet {
            counts::counted_down_while_quiet(post, Counter::Likes)
        } else {
            counts::counted_down(post, place.shard, Counter::Likes)
        };
        let counted = tx.add("count", count);
        match tx.commit().await? {
            TxOutcome::Committed => Ok(Tried::Done(true)),
            // Taken back or given again meanwhile (or by this very request,
            // its answer lost): read the mark again.
            TxOutcome::ConditionFailed(failed) if failed.failed(unmarked) => Ok(Tried::Again),
            TxOutcome::ConditionFailed(failed) if quiet && failed.failed(counted) => {
                Ok(Tried::Refused)
            }
            TxOutcome::ConditionFailed(failed) if failed.failed(removed) => {
                // A mark the fan-out's move left as the like was taken back.
                self.drop_stale_mark(&mark).await?;
                Ok(Tried::Again)
            }
            TxOutcome::ConditionFailed(failed) if failed.failed(counted) => {
                self.hot.forget(post);
                Err(StoreError::PostNotFound)
            }
            TxOutcome::ConditionFailed(failed) => Err(failed.unexpected("unlike by the mark")),
        }
    }

    /// A like taken back by the marker beside it: a quiet post's, or a hot
    /// post's given while it was quiet. The liker's mark goes too, if it
    /// names this like (given with it, or copied by the move; a like given
    /// by a version before quiet marks may have none). On a post this
    /// process knows is hot or turning hot the count is taken off where it
    /// was counted; on one it believes quiet, the count's condition fails if
    /// the post is hot (or turning hot) after all (`Refused`: the caller
    /// learns it and reads again).
    async fn unlike_beside(
        &self,
        post: &PostId,
        liker: &UserId,
        marker: LikerMarker,
    ) -> Result<Tried<bool>, StoreError> {
        let place = marker.place();
        // Known hot or turning hot: counted down on the post item as it is;
        // else its condition says whether it still is quiet.
        let hot = self.known_shards(post).is_some() || self.hot.is_closing(post);
        let mut tx = self.db.transaction("unlike");
        let unmarked = tx.add(
            "liker marker",
            Write::delete(marker.key().item(), Deleted::IfGone)
                .when(LikedMarker::naming(marker.like_id)),
        );
        let like_key = LikeItem::key_of(place, &marker.like_id);
        let like = Write::delete(like_key.item(), Deleted::Untold).when(Expr::item_exists());
        let removed = tx.add("like", like);
        let count = match (hot, place.shard) {
            (false, None) => counts::counted_down_while_quiet(post, Counter::Likes),
            (_, shard) => counts::counted_down(post, shard, Counter::Likes),
        };
        let counted = tx.add("count", count);
        // Its mark, made with it (or by the move), goes too.
        let key = LikedMarker::key_of(liker, post).item();
        let names_it = LikedMarker::absent_or_naming(marker.like_id);
        tx.add(
            "liked mark",
            Write::delete(key, Deleted::Untold).when(names_it),
        );
        match tx.commit().await? {
            TxOutcome::Committed => Ok(Tried::Done(true)),
            TxOutcome::ConditionFailed(failed) if failed.failed(unmarked) => Ok(Tried::Again),
            TxOutcome::ConditionFailed(failed) if failed.failed(counted) => Ok(Tried::Refused),
            TxOutcome::ConditionFailed(failed) if failed.failed(removed) => {
                Err(failed.unexpected("unlike: the marked like is missing"))
            }
            // The liker's mark names another like: given again meanwhile.
            TxOutcome::ConditionFailed(_) => Ok(Tried::Again),
        }
    }

    /// Q5 (request): one Query in the post's partition, newest first. Its
    /// first item says whether the post is hot ([`LikeShardsItem`]); then
    /// each shard is read too, one Query each (at once), and the pages are
    /// merged newest first. A page with likes reads the post item too
    /// (eventually consistent): a post back to a draft keeps what it had,
    /// shown to no one (404). A hot post's first page reads the fan-out's
    /// copy of its keys instead ([`super::first_pages`]: two BatchGetItems),
    /// at once when this process knows it is hot, else once the first Query
    /// has met its pointer; its cursor goes on through the merge.
    pub async fn list_likes(
        &self,
        post: &PostId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Like>, StoreError> {
        let list = format!("likes:{post}");
        let resume = super::pages::resume_after(&list, cursor, LikesCursor::parse)?;
        let mut own = None;
        if resume.is_none() {
            if let Some(kept) = self.hot_reads.likes(post, limit) {
                return Ok(kept);
            }
            // A post this process has not met hot: its own partition first,
            // whose pointer (a hot post's) sends the page to the copy rather
            // than to every shard.
            if !self.paged_hot(post) {
                let read = self.own_likes(post, resume, limit, false).await?;
                if read.shards.is_some() {
                    self.paged.saw(*post);
                }
                own = Some(read);
            }
            if self.paged_hot(post)
                && let Some(page) = self.first_likes_page(post, &list, limit).await?
            {
                self.hot_reads.keep_likes(post, limit, &page);
                return Ok(page);
            }
        }
        let own = match own {
            Some(own) => own,
            None => self.own_likes(post, resume, limit, false).await?,
        };
        let merged = self.merge_likes(post, resume, limit, false, own).await?;
        // A post back to a draft keeps what it had: shown to no one.
        if !merged.items.is_empty() && self.is_draft(post).await? {
            return Err(StoreError::PostNotFound);
        }
        let next_cursor = match merged.items.last() {
            Some(last) if merged.more => Some(super::cursor::encode(
                &list,
                &LikesCursor::encode(last.like_id, merged.shards),
            )),
            _ => None,
        };
        let page = Page {
            items: merged.items.into_iter().map(Like::from).collect(),
            next_cursor,
        };
        if resume.is_none() && merged.shards.is_some() {
            self.hot_reads.keep_likes(post, limit, &page);
        }
        Ok(page)
    }

    /// A hot post's first page of likes from the fan-out's copy: the copy
    /// (one GetItem, eventually consistent: `Store::copy_for_page`), then
    /// the likes it names first (one BatchGetItem, eventually consistent,
    /// `limit + 1` of them, at most 100, but those the instance keeps:
    /// `Store::copied_entries`); a like taken back since is left out (a
    /// kept one once the copy is made again). `None` when there is no copy
    /// (the post is quiet, or just turned hot) or no post: the merge reads
    /// it.
    async fn first_likes_page(
        &self,
        post: &PostId,
        list: &str,
        limit: usize,
    ) -> Result<Option<Page<Like>>, StoreError> {
        let Some((copy, _)) = self.copy_for_page(post, PageList::Likes).await? else {
            return Ok(None);
        };
        let entries = copy.entries(LikeId::parse)?;
        let read = &entries[..super::pages::copy_read(entries.len(), limit)];
        let keys = read
            .iter()
            .map(|(like, place)| LikeItem::key_of(*place, like))
            .collect();
        let items = self
            .copied_entries("a hot post's first likes", keys)
            .await?;
        let mut found: HashMap<LikeId, LikeItem> = super::from_items::<LikeItem>(items)?
            .into_iter()
            .map(|like| (like.like_id, like))
            .collect();
        let present = read
            .iter()
            .filter_map(|(like, _)| found.remove(like))
            .collect();
        let ids: Vec<LikeId> = read.iter().map(|(like, _)| *like).collect();
        let beyond = copy.more || entries.len() > read.len();
        let (shown, after) =
            super::pages::from_copy(&ids, present, limit, beyond, |l: &LikeItem| l.like_id);
        let shards = (copy.shards > 0).then_some(copy.shards);
        let next_cursor =
            after.map(|like| super::cursor::encode(list, &LikesCursor::encode(like, shards)));
        Ok(Some(Page {
            items: shown.into_iter().map(Like::from).collect(),
            next_cursor,
        }))
    }
}

/// A page of a post's likes as the merge reads it: up to `limit` likes,
/// newest first, whether more follow, and how many shards were read.
struct Merged {
    items: Vec<LikeItem>,
    more: bool,
    shards: Option<u8>,
}

/// The merge's first read: the likes of the post's own partition, and the
/// shards to read after it (a hot post's).
struct OwnLikes {
    items: Vec<super::Item>,
    shards: Option<u8>,
}

impl Store {
    /// The exact merge of `post`'s likes after `resume` (none: from the
    /// newest): [`Self::own_likes`], then [`Self::merge_likes`]; strongly
    /// consistent if `consistent` (the fan-out's copy).
    async fn merged_likes(
        &self,
        post: &PostId,
        resume: Option<LikesCursor>,
        limit: usize,
        consistent: bool,
    ) -> Result<Merged, StoreError> {
        let own = self.own_likes(post, resume, limit, consistent).await?;
        self.merge_likes(post, resume, limit, consistent, own).await
    }

    /// The merge's first read: one Query of `post`'s own partition (on a
    /// first page its first item is a hot post's pointer, naming its
    /// shards). A resumed page's shard count is the cursor's, believed only
    /// when the post's pointer names as many, or more (the post widened
    /// since the page before: its new shards hold only likes newer than the
    /// cursor's): a forged count would decide how many Queries the page
    /// makes (or which likes it skips).
    async fn own_likes(
        &self,
        post: &PostId,
        resume: Option<LikesCursor>,
        limit: usize,
        consistent: bool,
    ) -> Result<OwnLikes, StoreError> {
        let own = PostPartition::own(*post);
        // A first page reads one item more: a hot post's pointer comes
        // first and takes a place.
        let room = if resume.is_none() { limit + 1 } else { limit };
        let own_page = self.likes_in(own, resume.map(|c| c.after), room, consistent);
        let mut items = match resume.and_then(|c| c.shards) {
            None => own_page.await?,
            Some(claimed) => {
                let (items, pointer) = futures::try_join!(own_page, self.like_shards(post))?;
                let believed = crate::store::items::counter::is_shard_count(claimed);
                if !(believed && pointer.is_some_and(|real| claimed <= real)) {
                    return Err(StoreError::BadCursor(super::cursor::CursorError::Mismatch));
                }
                items
            }
        };
        let mut shards = resume.and_then(|c| c.shards);
        if resume.is_none() && items.first().and_then(LikeShardsItem::of).is_some() {
            shards = items.first().and_then(LikeShardsItem::of);
            items.remove(0);
        }
        Ok(OwnLikes { items, shards })
    }

    /// The rest of the merge after `own`: each shard it names read (one
    /// Query each, at once, after the same like), merged newest first.
    async fn merge_likes(
        &self,
        post: &PostId,
        resume: Option<LikesCursor>,
        limit: usize,
        consistent: bool,
        own: OwnLikes,
    ) -> Result<Merged, StoreError> {
        let OwnLikes { items, shards } = own;
        let likes: Vec<LikeItem> = super::from_items(items)?;
        let read = |k: u8, after: Option<LikeId>, take: usize| async move {
            let place = PostPartition::shard(*post, k);
            let page = self.likes_in(place, after, take - 1, consistent).await?;
            Ok::<_, StoreError>(super::from_items::<LikeItem>(page)?)
        };
        // A quiet post's page is its own partition's: no shard to read.
        let merged = super::merge::merge_shards(
            shards.unwrap_or(0),
            likes,
            limit,
            resume.map(|c| c.after),
            |like| std::cmp::Reverse(like.like_id),
            |like| like.like_id,
            read,
        )
        .await?;
        Ok(Merged {
            items: merged.items,
            more: merged.more,
            shards,
        })
    }

    /// How many shards a hot post's likes pointer names (`None`: the post is
    /// quiet, or gone): one strongly consistent read of one small item.
    async fn like_shards(&self, post: &PostId) -> Result<Option<u8>, StoreError> {
        let key = LikeShardsItem::key_of(post);
        let pointer = self
            .db
            .get_entity::<LikeShardsItem>(key.item(), true)
            .await?;
        Ok(pointer.map(|p| p.shards))
    }

    /// Up to `limit + 1` likes (and a hot post's pointer) of one partition,
    /// newest first, after `after`.
    async fn likes_in(
        &self,
        place: PostPartition,
        after: Option<LikeId>,
        limit: usize,
        consistent: bool,
    ) -> Result<Vec<super::Item>, StoreError> {
        let start = after.map(|like| LikeItem::key_of(place, &like).item());
        let mut query = Query::partition(place.pk())
            .begins_with(LIKE_PREFIX)
            .newest_first();
        if consistent {
            query = query.consistent();
        }
        // Named apart in the retry layer's logs: the fan-out's merge reads
        // strongly, a reader's eventually.
        let what = if consistent {
            "likes, strongly"
        } else {
            "likes"
        };
        self.db
            .query_up_to(what, &query, start, limit.saturating_add(1))
            .await
    }
}

impl FanOut<'_> {
    /// The fan-out's copy of `post`'s likes' first page: the exact merge of
    /// its [`FIRST_PAGE_ENTRIES`] newest, strongly consistent, begun at
    /// `made_at` ([`super::first_pages`]).
    pub(super) async fn first_likes(
        &self,
        post: &PostId,
        made_at: u64,
    ) -> Result<FirstPageItem, StoreError> {
        let merged = self
            .merged_likes(post, None, FIRST_PAGE_ENTRIES, true)
            .await?;
        let entries = merged
            .items
            .iter()
            .map(|like| (like.like_id.to_string(), like.shard));
        Ok(FirstPageItem::made(
            *post,
            PageList::Likes,
            entries,
            merged.more,
            merged.shards.unwrap_or(0),
            made_at,
        ))
    }
}
