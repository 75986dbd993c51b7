//! A hot post's first pages, copied: what makes reading a viral post's likes
//! (Q5) and comments (Q4) cost about what reading a quiet post's does.
//!
//! A hot post keeps its likes and new comments in up to 128 shard
//! partitions, and the exact first page of either list is a merge of one
//! Query per partition (up to 129 Queries, each reading up to `limit + 1`
//! items). So the fan-out keeps, for each hot post and list, a small item in
//! a partition of its own (`POST#p#PAGES / LIKES`, `/ COMMENTS`,
//! [`FirstPageItem`]): the keys of the list's first
//! [`FIRST_PAGE_ENTRIES`] entries (the newest likes; the oldest comments)
//! as that merge found them, when the merge began (`madeAt`), and the post's
//! author (which never changes). A first page then reads
//! the copy (one GetItem), and the entries it names by their keys (one
//! BatchGetItem, of those the read instance has not kept:
//! `store::memory::HotReads`): an entry taken back since is missing and left
//! out (a kept one once the copy is made again), and what the page shows of
//! each (the username, the content) is the entry's own. Nothing of the post's own partition is read: a viral post's read
//! instances, each missing its memory (`HOT_READ_CACHE_SECONDS`) about once
//! a second, would take it to its read limit. A hot post is published (it
//! cannot be taken back to a draft); a deleted one's first pages show until
//! its walk deletes the copies, as its lists' later pages show what the
//! walk has not deleted yet. Later pages go on from the page's last entry
//! through the exact merge, as before.
//!
//! **When the fan-out rebuilds a copy** (once a batch, for each hot post and
//! list whose like or comment INSERT or REMOVE records are in it:
//! `fanout::pages`). Every record of a batch was written before the
//! fan-out received the batch, so a copy whose merge began after that
//! moment (both by the fan-out's clock, which its instances keep to within
//! milliseconds of each other) holds what they wrote (it *covers* them),
//! or holds them taken back. No record's own time is
//! used: DynamoDB Streams rounds it down to the second, and DynamoDB Local
//! does not keep it at all. The batch reads the copy (eventually
//! consistent):
//!
//! 1. it covers the batch's records (another batch rebuilt it since this
//!    one was received), or a rebuild is due as late, or the list held
//!    more than the copy and every entry the records name comes after its
//!    last ([`Reach`]: a viral post's new comments past its 100 oldest):
//!    nothing to do;
//! 2. it is missing (and one of the records is an INSERT: a post without a
//!    copy is read by the merge), or older than [`REBUILD_AFTER`]: rebuilt
//!    now;
//! 3. else (younger than [`REBUILD_AFTER`], not covering): `due` set on it
//!    (the moment the batch was received, if no rebuild as late is due
//!    already), one UpdateItem.
//!
//! A copy's INSERT or MODIFY with `due` comes back to the fan-out (the
//! stream filter lets only those of the copy's records through); that batch
//! waits until the copy is [`REBUILD_AFTER`] old and `due` is past (at most
//! about 2 s), then rebuilds it. So every record is covered by some copy
//! made after it, the last copy after the likes stop included, and a post's
//! copy is rebuilt about once a second whatever its like rate (plus one
//! trailing rebuild).
//!
//! A rebuild's put lands only over an older copy with no later rebuild due
//! (that one, brought back by its record, makes a newer copy), and only
//! while the post is hot and its deletion's walk has not begun (a
//! ConditionCheck of its likes pointer, `POST#p / LIKE#~SHARDED`, made by
//! the switch, in the same transaction): the walk deletes the pointer, then
//! the copies, and no rebuild brings one back after. The pointer, not the
//! post item: a few hundred bytes, so the check costs 2 WCU of the post's
//! partition where the post item's would cost 2 a KB of it (up to 8). A
//! put or a mark that lost to another batch's is not sent again: the copy
//! is read again (strongly consistent)
//! and decided on again, since the copy that won may not cover this
//! batch's records.

use std::{collections::HashMap, time::Duration};

use super::{
    FanOut, StoreError,
    items::counter::LikeShardsItem,
    items::first_page::{FirstPageItem, PageList},
    table::{Expr, TxOutcome, Write},
};
use crate::{
    ids::{CommentId, LikeId, PostId, UserId},
    keys::{self, Key},
};

pub use super::items::first_page::FIRST_PAGE_ENTRIES;

/// How old a copy must be before a batch rebuilds it rather than marking a
/// rebuild due: a post's copy is rebuilt about once this long whatever its
/// like rate.
pub const REBUILD_AFTER: Duration = Duration::from_secs(1);

/// How many times a batch decides again about one copy after another
/// batch's write won.
pub const KEEP_ATTEMPTS: usize = 3;

/// The longest a batch waits for a due copy to be old enough to rebuild.
pub const LONGEST_WAIT: Duration = Duration::from_secs(2);

/// What a batch does about one hot post's copy of one list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The copy covers the batch's records.
    Covered,
    /// Rebuild now.
    Rebuild,
    /// Mark a rebuild due at this time on the copy made at `made_at`.
    MarkDue { made_at: u64, at: u64 },
    /// A due copy's record: wait until this time (epoch ms), then rebuild.
    RebuildAt(u64),
}

/// What became of a batch's write to a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// It landed.
    Landed,
    /// Another batch's write won: read the copy again and decide again.
    Lost,
    /// The post is gone: nothing to keep.
    Gone,
}

/// What a batch's records of one hot post's list ask of its copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    /// The moment the copy's merge must have begun after to cover them
    /// (epoch ms: when the batch was received, or a due rebuild's `due`).
    pub need: u64,
    /// One of them is the copy's own record of a rebuild due.
    pub due: bool,
    /// One of them is an INSERT (a missing copy is made only for one: the
    /// merge reads a post without a copy, and a deleted post's walk takes
    /// its likes and comments out after its copies).
    pub added: bool,
    /// Where in the list their entries are.
    pub reach: Reach,
}

impl Wanted {
    /// What the records `self` and `other` ask together.
    pub fn and(self, other: Wanted) -> Wanted {
        Wanted {
            need: self.need.max(other.need),
            due: self.due || other.due,
            added: self.added || other.added,
            reach: self.reach.and(other.reach),
        }
    }
}

/// Where in a list a batch's records of it are: by the entry of theirs
/// nearest the list's head (the newest like; the oldest comment). Records
/// whose entries all come after a full copy's last entry cannot change its
/// page (a viral post's new comments, newer than its first 100; an unlike
/// of an old like): they ask for no rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// A record names no entry (a copy's own record of a rebuild due):
    /// anywhere.
    Anywhere,
    /// Likes, the newest of them this one.
    Likes { newest: LikeId },
    /// Comments, the oldest of them this one.
    Comments { oldest: CommentId },
}

impl Reach {
    /// Where the records of `self` and of `other` are together.
    pub fn and(self, other: Reach) -> Reach {
        match (self, other) {
            (Reach::Likes { newest: a }, Reach::Likes { newest: b }) => {
                Reach::Likes { newest: a.max(b) }
            }
            (Reach::Comments { oldest: a }, Reach::Comments { oldest: b }) => {
                Reach::Comments { oldest: a.min(b) }
            }
            _ => Reach::Anywhere,
        }
    }

    /// Whether every entry it names comes after `copy`'s last one in a list
    /// that held more than the copy: none of them is on the first page.
    fn past(self, copy: &FirstPageItem) -> bool {
        if !copy.more {
            return false;
        }
        let Some((last, _)) = copy.entries.last().and_then(|e| keys::page_entry_parts(e)) else {
            return false;
        };
        match (self, copy.list) {
            (Reach::Likes { newest }, PageList::Likes) => {
                LikeId::parse(last).is_ok_and(|last| newest < last)
            }
            (Reach::Comments { oldest }, PageList::Comments) => {
                CommentId::parse(last).is_ok_and(|last| oldest > last)
            }
            _ => false,
        }
    }
}

/// What to do about a copy (`None`: there is none) for the batch's records
/// `wanted`, at `now` (epoch ms).
pub fn step(copy: Option<&FirstPageItem>, wanted: Wanted, now: u64) -> Step {
    let Some(copy) = copy else {
        return if wanted.added {
            Step::Rebuild
        } else {
            Step::Covered
        };
    };
    if copy.covers(wanted.need) || wanted.reach.past(copy) {
        return Step::Covered;
    }
    // A rebuild due as late (later, for a due record: its own due is this
    // one): the record that marked it brings it.
    let later = |due: u64| due > wanted.need || (due == wanted.need && !wanted.due);
    if copy.due.is_some_and(later) {
        return Step::Covered;
    }
    let old_enough = copy.made_at.saturating_add(rebuild_after_ms());
    if wanted.due {
        return Step::RebuildAt(old_enough.max(wanted.need));
    }
    if now >= old_enough {
        return Step::Rebuild;
    }
    Step::MarkDue {
        made_at: copy.made_at,
        at: wanted.need,
    }
}

fn rebuild_after_ms() -> u64 {
    u64::try_from(REBUILD_AFTER.as_millis()).unwrap_or(u64::MAX)
}

/// How long to wait from `now` until `at` (both epoch ms), at most
/// [`LONGEST_WAIT`].
pub fn wait_until(at: u64, now: u64) -> Duration {
    Duration::from_millis(at.saturating_sub(now)).min(LONGEST_WAIT)
}

impl super::Store {
    /// Whether a first page of `post`'s lists reads the fan-out's copy: this
    /// process found it hot (on a list read, or on a like or comment), and
    /// has not just found its copy missing
    /// ([`PagedPosts`](super::memory::PagedPosts)).
    pub(super) fn paged_hot(&self, post: &PostId) -> bool {
        let hot = self.known_hot(post).is_some();
        self.paged.reads_copy(post, hot)
    }

    /// A first page's first read: the fan-out's copy of `post`'s `list`
    /// (one GetItem, eventually consistent, in the copies' partition) and
    /// its post's author as the copy says; nothing of the post's own
    /// partition, which the post's readers would take to its read limit (a
    /// copy made before copies said reads the author: once a process).
    /// A hot post is published (it cannot be taken back to a draft:
    /// `StoreError::PostIsHot`). `None` when the copy or the post is
    /// missing (the post is gone, or not copied yet: the merge reads the
    /// page, and the process's next pages for a moment).
    pub(super) async fn copy_for_page(
        &self,
        post: &PostId,
        list: PageList,
    ) -> Result<Option<(FirstPageItem, UserId)>, StoreError> {
        let key = FirstPageItem::key_of(post, list).item();
        let copy = self.db.get_entity::<FirstPageItem>(key, false).await?;
        let found = match copy {
            Some(copy) => match copy.author.clone() {
                Some(author) => Some((copy, author)),
                None => self.author_of(post).await?.map(|author| (copy, author)),
            },
            None => None,
        };
        match &found {
            Some(_) => self.paged.found(*post),
            None => self.paged.missed(*post),
        }
        Ok(found)
    }

    /// The entries at `keys` a copied first page shows (`what` names the
    /// read): those this instance read within
    /// [`HOT_ENTRIES_TTL`](super::memory::HOT_ENTRIES_TTL) from its memory,
    /// the others by one BatchGetItem (eventually consistent), kept. The
    /// items found, in no order; one missing (taken back) is left out.
    pub(super) async fn copied_entries(
        &self,
        what: &'static str,
        keys: Vec<Key>,
    ) -> Result<Vec<super::Item>, StoreError> {
        let mut found = Vec::with_capacity(keys.len());
        let mut unread = Vec::new();
        for key in keys {
            match self.hot_reads.entry(&key) {
                Some(item) => found.push(item),
                None => unread.push(key.item()),
            }
        }
        if unread.is_empty() {
            return Ok(found);
        }
        let (read, _) = self.db.batch_get_with(what, unread, false).await?;
        for item in read {
            if let Ok(key) = Key::of(&item) {
                self.hot_reads.keep_entry(key, item.clone());
            }
            found.push(item);
        }
        Ok(found)
    }

    /// `post`'s author ([`super::Store::post_author`]: this process's
    /// memory, else one read of the post item); `None` when the post is
    /// gone.
    async fn author_of(&self, post: &PostId) -> Result<Option<UserId>, StoreError> {
        match self.post_author(post).await {
            Ok(author) => Ok(Some(author)),
            Err(StoreError::PostNotFound) => Ok(None),
            Err(other) => Err(other),
        }
    }
}

impl FanOut<'_> {
    /// The copies of `wanted`, eventually consistent: one BatchGetItem (a
    /// hundred to a call).
    pub async fn first_pages(
        &self,
        wanted: &[(PostId, PageList)],
    ) -> Result<HashMap<(PostId, PageList), FirstPageItem>, StoreError> {
        let keys = wanted
            .iter()
            .map(|(post, list)| FirstPageItem::key_of(post, *list).item())
            .collect();
        let (items, _) = self
            .db
            .batch_get_with("hot posts' first pages", keys, false)
            .await?;
        let copies: Vec<FirstPageItem> = super::from_items(items)?;
        Ok(copies
            .into_iter()
            .map(|copy| ((copy.post_id, copy.list), copy))
            .collect())
    }

    /// What the batch's records `wanted` of `post`'s `list` ask of its copy
    /// (`read`: as the batch read it, eventually consistent), done
    /// ([`step`]): nothing, a rebuild (now, or once a due copy is old
    /// enough) or a rebuild marked due. A put or a mark that lost to
    /// another batch's reads the copy again (strongly consistent) and
    /// decides again, at most [`KEEP_ATTEMPTS`] times: the copy that won may
    /// not cover these records. How many writes landed.
    pub async fn keep_first_page(
        &self,
        post: &PostId,
        list: PageList,
        wanted: Wanted,
        read: Option<FirstPageItem>,
    ) -> Result<usize, StoreError> {
        let mut copy = read;
        for _ in 0..KEEP_ATTEMPTS {
            let now = super::items::post::epoch_millis();
            let kept = match step(copy.as_ref(), wanted, now) {
                Step::Covered => return Ok(0),
                Step::Rebuild => self.rebuild_first_page(post, list, wanted.need).await?,
                Step::RebuildAt(at) => {
                    tokio::time::sleep(wait_until(at, now)).await;
                    self.rebuild_first_page(post, list, wanted.need).await?
                }
                Step::MarkDue { made_at, at } => {
                    if self.mark_first_page_due(post, list, made_at, at).await? {
                        Kept::Landed
                    } else {
                        Kept::Lost
                    }
                }
            };
            match kept {
                Kept::Landed => return Ok(1),
                Kept::Gone => return Ok(0),
                Kept::Lost => {}
            }
            let key = FirstPageItem::key_of(post, list).item();
            copy = self.db.get_entity::<FirstPageItem>(key, true).await?;
            if copy.is_none() {
                // Gone with its post (or never made): nothing to keep.
                return Ok(0);
            }
        }
        Ok(0)
    }

    /// `post`'s copy of `list` made again by the exact merge (strongly
    /// consistent), begun now, with its post's author (this process's
    /// memory, else the post item's), and put
    /// ([`FanOut::put_first_page`]); `need`: the moment the batch's records
    /// need it to cover (after now: the copy is put with a rebuild due
    /// then). [`Kept::Gone`] when the post is gone and its author was not
    /// known (a copy put after the post's deletion goes in its walk, which
    /// deletes the likes pointer every put checks before the copies).
    pub async fn rebuild_first_page(
        &self,
        post: &PostId,
        list: PageList,
        need: u64,
    ) -> Result<Kept, StoreError> {
        let made_at = super::items::post::epoch_millis();
        let merged = async {
            match list {
                PageList::Likes => self.first_likes(post, made_at).await,
                PageList::Comments => self.first_comments(post, made_at).await,
            }
        };
        let (mut copy, author) = futures::try_join!(merged, self.author_of(post))?;
        let Some(author) = author else {
            return Ok(Kept::Gone);
        };
        copy.author = Some(author);
        if !copy.covers(need) {
            copy.due = Some(need);
        }
        Ok(if self.put_first_page(&copy).await? {
            Kept::Landed
        } else {
            Kept::Lost
        })
    }

    /// Puts `copy` over an older one with no later rebuild due
    /// ([`FirstPageItem::replace`]), while its post is hot and not being
    /// deleted (a ConditionCheck of its likes pointer, which the deletion's
    /// walk deletes before the copies): one transaction, its tokens its
    /// own (seeded by the copy's post, list and time). Whether it landed.
    pub async fn put_first_page(&self, copy: &FirstPageItem) -> Result<bool, StoreError> {
        let seed = format!(
            "{}/first-page/{}/{:?}/{}",
            self.table(),
            copy.post_id,
            copy.list,
            copy.made_at
        );
        let put = copy.replace()?;
        let pointer = LikeShardsItem::key_of(&copy.post_id);
        let check = Write::check(pointer.item(), Expr::item_exists());
        let committing = async {
            let mut tx = self.db.transaction("a hot post's first page");
            tx.add("likes pointer still there", check);
            tx.add("first page", put);
            tx.commit().await
        };
        match super::request_scope(seed, committing).await? {
            TxOutcome::Committed => Ok(true),
            // Gone (its walk deletes the copies), or a newer copy, or a
            // later rebuild due: nothing to retry.
            TxOutcome::ConditionFailed(_) => Ok(false),
        }
    }

    /// A rebuild of `post`'s copy of `list` due `at`, marked on the copy
    /// made at `made_at`: its MODIFY record brings the post back to the
    /// fan-out. Whether it was marked (not: the copy changed since, or a
    /// rebuild as late is due already).
    pub async fn mark_first_page_due(
        &self,
        post: &PostId,
        list: PageList,
        made_at: u64,
        at: u64,
    ) -> Result<bool, StoreError> {
        let mark = FirstPageItem::mark_due(post, list, made_at, at);
        Ok(self
            .db
            .write("a first page's rebuild due", &mark)
            .await?
            .done())
    }
}

/// The keys of `post`'s copies, for its deletion's walk.
pub(super) fn copies_of(post: &PostId) -> impl Iterator<Item = super::Item> {
    PageList::ALL
        .into_iter()
        .map(move |list| FirstPageItem::key_of(post, list).item())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(made_at: u64) -> FirstPageItem {
        FirstPageItem::made(
            PostId::generate(),
            PageList::Likes,
            Vec::new(),
            false,
            16,
            made_at,
        )
    }

    /// A copy's own record of a rebuild due at `need`.
    fn due_at(need: u64) -> Wanted {
        Wanted {
            need,
            due: true,
            added: false,
            reach: Reach::Anywhere,
        }
    }

    fn wanted(received: u64, due: bool, added: bool) -> Wanted {
        Wanted {
            need: received,
            due,
            added,
            reach: Reach::Anywhere,
        }
    }

    #[test]
    fn a_copy_is_rebuilt_once_it_is_a_second_old_and_marked_due_before() {
        // A batch received at 11 s is covered by a merge begun then or later.
        let like = wanted(11_000, false, true);
        assert_eq!(step(Some(&copy(11_000)), like, 11_500), Step::Covered);
        // Not covering, a second old: rebuilt now.
        assert_eq!(step(Some(&copy(9_900)), like, 11_100), Step::Rebuild);
        // Not covering, younger: a rebuild due when the record is covered.
        assert_eq!(
            step(Some(&copy(10_500)), like, 11_100),
            Step::MarkDue {
                made_at: 10_500,
                at: 11_000
            }
        );
        // The due copy's record: rebuilt once the copy is a second old and
        // the due moment is past, whichever is later.
        let due = due_at(11_000);
        assert_eq!(
            step(Some(&copy(10_500)), due, 10_900),
            Step::RebuildAt(11_500)
        );
        assert_eq!(
            step(Some(&copy(9_500)), due, 10_900),
            Step::RebuildAt(11_000)
        );
        // A record that asks what a due rebuild will cover: nothing to do;
        // the due copy's record leaves a later due to its own record.
        let marked = |due| FirstPageItem {
            due: Some(due),
            ..copy(10_500)
        };
        assert_eq!(step(Some(&marked(11_000)), like, 11_100), Step::Covered);
        assert_eq!(step(Some(&marked(12_000)), due, 11_100), Step::Covered);
        assert_eq!(
            step(Some(&marked(11_000)), due, 11_100),
            Step::RebuildAt(11_500)
        );
        // No copy: made for a new like or comment, not for removals alone.
        assert_eq!(step(None, like, 10_900), Step::Rebuild);
        assert_eq!(
            step(None, wanted(10_250, false, false), 10_900),
            Step::Covered
        );
        // Records together ask the most of each.
        assert_eq!(
            wanted(13_000, false, false).and(like),
            Wanted {
                need: 13_000,
                due: false,
                added: true,
                reach: Reach::Anywhere,
            }
        );
        assert_eq!(wait_until(11_500, 10_900), Duration::from_millis(600));
        assert_eq!(wait_until(90_000, 10_900), LONGEST_WAIT);
        assert_eq!(wait_until(10_000, 10_900), Duration::ZERO);
    }

    #[test]
    fn records_past_a_full_copys_last_entry_ask_for_no_rebuild() {
        let ids = |n: usize| -> Vec<String> {
            let mut ids: Vec<String> = (0..n).map(|_| LikeId::generate().to_string()).collect();
            ids.sort();
            ids
        };
        // Comments, oldest first: the copy holds the 100 oldest of more.
        let held = ids(FIRST_PAGE_ENTRIES + 1);
        let copy_of = |list, entries: &[String], more| {
            let entries = entries.iter().map(|id| (id.clone(), Some(3)));
            FirstPageItem::made(PostId::generate(), list, entries, more, 16, 10_000)
        };
        let comments = copy_of(PageList::Comments, &held[..FIRST_PAGE_ENTRIES], true);
        let comment = |id: &String| Wanted {
            reach: Reach::Comments {
                oldest: CommentId::parse(id).expect("an id"),
            },
            ..wanted(11_000, false, true)
        };
        let (last, newer, older) = (&held[99], &held[100], &held[0]);
        // A newer comment than the 100th: past the page, whenever.
        assert_eq!(step(Some(&comments), comment(newer), 11_100), Step::Covered);
        // The 100th itself (taken back), or an older one: the page changes.
        assert_eq!(step(Some(&comments), comment(last), 11_100), Step::Rebuild);
        let both = comment(newer).and(comment(older));
        assert_eq!(step(Some(&comments), both, 11_100), Step::Rebuild);
        // A copy of a list that held no more: a new comment joins its page.
        let whole = copy_of(PageList::Comments, &held[..FIRST_PAGE_ENTRIES], false);
        assert_eq!(step(Some(&whole), comment(newer), 11_100), Step::Rebuild);
        // A due copy's record among them: anywhere.
        let due = due_at(11_000);
        assert_eq!(
            step(Some(&comments), comment(newer).and(due), 11_100),
            Step::RebuildAt(11_000)
        );

        // Likes, newest first: the copy holds the 100 newest of more.
        let mut newest_first = held.clone();
        newest_first.reverse();
        let likes = copy_of(PageList::Likes, &newest_first[..FIRST_PAGE_ENTRIES], true);
        let like = |id: &String| Wanted {
            reach: Reach::Likes {
                newest: LikeId::parse(id).expect("an id"),
            },
            ..wanted(11_000, false, false)
        };
        // An unlike of a like older than the 100th: past the page.
        assert_eq!(step(Some(&likes), like(older), 11_100), Step::Covered);
        // A new like: on it.
        let new = LikeId::generate().to_string();
        assert_eq!(
            step(Some(&likes), like(&new).and(like(older)), 11_100),
            Step::Rebuild
        );
        // A comment's reach says nothing of a likes copy.
        assert_eq!(step(Some(&likes), comment(older), 11_100), Step::Rebuild);
    }
}
