//! A hot post's first-page copies (`POST#<postId>#PAGES / LIKES` and
//! `/ COMMENTS`): the keys of the first entries of its likes (newest first)
//! and of its comments (oldest first) across its own partition and its
//! shards, as the exact merge found them at `madeAt`, kept by the fan-out
//! ([`crate::store::first_pages`]). Keys only: what a page shows of each
//! entry is read from the entry itself (kept by a read instance for 10 s:
//! `store::memory::HotReads`), so an unlike, a deleted comment or an
//! erasure shows once the copy is made again, a rename once the entry is
//! read again. Each copy also says whose post it
//! is (a page of comments leaves out those by whom its author blocks), so
//! that a first page reads nothing of the post's own partition, which its
//! readers would otherwise take to its read limit.

use serde::{Deserialize, Serialize};

use crate::{
    ids::{IdError, PostId, UserId},
    keys::{self, Entity, ItemType, Key, KeyError, PostPartition},
    store::error::StoreError,
    store::table::{Expr, Landed, Write, n},
};

/// How many entries a copy holds: a page's most (`limit` is at most 100).
pub const FIRST_PAGE_ENTRIES: usize = 100;

/// The copy's attribute that says when its merge began (epoch ms).
pub const MADE_AT_ATTRIBUTE: &str = "madeAt";
/// The copy's attribute that says a rebuild is due (epoch ms): set by a
/// batch that found the copy too fresh to rebuild and not covering its
/// records; its MODIFY record brings the post back to the fan-out.
pub const DUE_ATTRIBUTE: &str = "due";

/// Which list of a post a copy is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PageList {
    /// Its likes, newest first (Q5).
    Likes,
    /// Its comments, oldest first (Q4).
    Comments,
}

impl PageList {
    pub const ALL: [PageList; 2] = [PageList::Likes, PageList::Comments];

    fn sk(self) -> &'static str {
        match self {
            PageList::Likes => keys::FIRST_LIKES_SK,
            PageList::Comments => keys::FIRST_COMMENTS_SK,
        }
    }
}

/// A copy of the keys of a hot post's list's first
/// [`FIRST_PAGE_ENTRIES`] entries.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FirstPageItem {
    pub post_id: PostId,
    pub list: PageList,
    /// The entries in the list's order, each its id and the shard that
    /// holds it ([`keys::page_entry`]).
    pub entries: Vec<String>,
    /// The list held more entries than these when it was made.
    pub more: bool,
    /// How many shards the merge read (the post's pointer's count then).
    pub shards: u8,
    /// When the merge began (epoch ms, the fan-out's clock): every entry
    /// written before then is in it, or was taken back.
    pub made_at: u64,
    /// A rebuild is due once the time is past this (epoch ms): see
    /// [`DUE_ATTRIBUTE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due: Option<u64>,
    /// Its post's author (who never changes); `None` on a copy made before
    /// copies said (a page then reads the author, once a process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<UserId>,
}

impl FirstPageItem {
    pub fn key_of(post: &PostId, list: PageList) -> Key {
        Key::new(keys::first_pages_pk(post), list.sk())
    }

    /// The copy of `list` whose entries are `entries` (ids and shards, in
    /// the list's order, at most [`FIRST_PAGE_ENTRIES`]), its merge begun at
    /// `made_at` over `shards` shards (its post's author still to be said).
    pub fn made(
        post: PostId,
        list: PageList,
        entries: impl IntoIterator<Item = (String, Option<u8>)>,
        more: bool,
        shards: u8,
        made_at: u64,
    ) -> Self {
        let entries = entries
            .into_iter()
            .map(|(id, shard)| keys::page_entry(&id, shard))
            .collect();
        Self {
            post_id: post,
            list,
            entries,
            more,
            shards,
            made_at,
            due: None,
            author: None,
        }
    }

    /// Its entries as ids (`parse`d) and the partitions that hold them;
    /// an entry it cannot read is an error (nothing but the fan-out writes
    /// it).
    pub fn entries<I>(
        &self,
        parse: fn(&str) -> Result<I, IdError>,
    ) -> Result<Vec<(I, PostPartition)>, KeyError> {
        self.entries
            .iter()
            .map(|entry| {
                let bad = || KeyError::Decode(format!("a first page's entry {entry:?}"));
                let (id, shard) = keys::page_entry_parts(entry).ok_or_else(bad)?;
                let id = parse(id).map_err(|_| bad())?;
                let place = PostPartition {
                    post: self.post_id,
                    shard,
                };
                Ok((id, place))
            })
            .collect()
    }

    /// Whether it holds every entry written up to `at` (epoch ms).
    pub fn covers(&self, at: u64) -> bool {
        self.made_at >= at
    }

    /// This copy put in place of the stored one, if that one is older (or
    /// absent) and has no rebuild due after this copy's merge began (that
    /// rebuild, brought back by its record, makes a newer one).
    pub fn replace(&self) -> Result<Write, StoreError> {
        let newer = Expr::new(
            "(attribute_not_exists(#made) OR #made < :made) \
             AND (attribute_not_exists(#due) OR #due <= :made)",
        )
        .name("#made", MADE_AT_ATTRIBUTE)
        .name("#due", DUE_ATTRIBUTE)
        .value(":made", n(self.made_at));
        let landed = Landed::When(vec![(MADE_AT_ATTRIBUTE, n(self.made_at))]);
        Ok(Write::put(self, landed)?.when(newer))
    }

    /// A rebuild of `post`'s copy of `list` due at `at`, set on the copy
    /// made at `made_at` if no rebuild as late is due already.
    pub fn mark_due(post: &PostId, list: PageList, made_at: u64, at: u64) -> Write {
        let change = Expr::new("SET #due = :at")
            .name("#due", DUE_ATTRIBUTE)
            .value(":at", n(at));
        let still = Expr::new("#made = :made AND (attribute_not_exists(#due) OR #due < :at)")
            .name("#made", MADE_AT_ATTRIBUTE)
            .name("#due", DUE_ATTRIBUTE)
            .value(":made", n(made_at))
            .value(":at", n(at));
        let landed = Landed::When(vec![(DUE_ATTRIBUTE, n(at))]);
        Write::update(Self::key_of(post, list).item(), change, landed).when(still)
    }
}

impl Entity for FirstPageItem {
    const TYPE: ItemType = ItemType::FirstPage;
    const OWN: &'static [&'static str] = &[MADE_AT_ATTRIBUTE];

    fn key(&self) -> Key {
        Self::key_of(&self.post_id, self.list)
    }
}
