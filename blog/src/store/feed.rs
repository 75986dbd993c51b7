//! The lists of posts in short form, which requests only read (one Query a
//! page) and the stream fan-out writes from the posts' images: the feed and
//! each tag's list. Their entries are one shape ([`FeedEntryItem`],
//! [`TagEntryItem`]), kept by the same rules: a new post in, a changed
//! post's entry refreshed where it is older (once a batch, so a like adds no
//! write of its own), out with the post. An entry put is checked against
//! the post item as it is after the put (`Store::post_item`, which a home
//! delivery reads too), so that a record delivered again or late never
//! brings back what a newer change took out.
//!
//! **The feed** (Q6): one partition holding the short form of the newest
//! posts, capped at [`FEED_CAPACITY`] posts (the seeds' V3 feed container
//! and the trigger that trims it). Besides its entries the partition holds
//! the *floor*: the newest post id ever trimmed out. A post at or below it
//! can never enter again, whatever order stream records arrive in, so a post
//! that has left the feed stays out.
//!
//! **The tag lists** (`GET /tags/{tag}/posts`): one partition a tag,
//! `TAG#<tag>`, holding the short form of each post that has the tag, whatever
//! the tag's size; a post's entries move when its tags change.

use crate::store::items::feed::{
    FeedEntryItem, TagEntryItem, feed_reserve, feed_slack, floor_key, floor_type,
};
use serde::Deserialize;

#[cfg(feature = "admin")]
use super::Admin;
use super::{FanOut, Requests};
use super::{
    Store, StoreError, from_item, from_items,
    items::post::PostItem,
    n, s,
    table::{Deleted, Expr, Landed, Outcome, Query, Returning, Write},
};
use crate::{
    ids::PostId,
    keys::{self, Entity, FEED_PK, POST_PREFIX},
    model::{Page, PostSummary},
    text::Tag,
};

pub use super::handle::FEED_CAPACITY;

/// What a conditional copy did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copied {
    /// The copy was written.
    Written,
    /// The copy already held this version or a newer one, or (for the feed) the
    /// post is not, or no longer, in it: nothing changed.
    Stale,
}

impl Store {
    /// A Query of the feed's entries (not its floor), newest first.
    fn feed_entries() -> Query {
        Query::partition(FEED_PK.to_owned())
            .begins_with(POST_PREFIX)
            .newest_first()
    }

    /// The post item alone (not its content), strongly consistent (1 RCU):
    /// what the fan-out checks a feed entry, a tag entry or a home delivery
    /// against once it has written it (the post may have been deleted or
    /// taken back meanwhile), what the audit repairs them from, and what a
    /// scheduled publication reads.
    pub(crate) async fn post_item(&self, post: &PostId) -> Result<Option<PostItem>, StoreError> {
        let key = keys::post_item(post).item();
        self.db.get_entity::<PostItem>(key, true).await
    }

    /// Deletes a post's feed entry, if there is one: the trim's (fan-out) and
    /// the audit's (admin).
    pub(crate) async fn remove_feed_entry(&self, post: &PostId) -> Result<(), StoreError> {
        let delete = Write::delete(FeedEntryItem::key_of(post).item(), Deleted::IfGone);
        self.db
            .write("remove feed entry", &delete)
            .await
            .map(|_| ())
    }
}

impl Requests<'_> {
    /// Q6 (request): one Query of the feed partition, newest first (entries
    /// are small enough, see `text`'s byte bounds, that 100 never reach a
    /// 1 MB page; a second call would follow if they did).
    pub async fn feed(&self, limit: usize) -> Result<Vec<PostSummary>, StoreError> {
        let want = limit.min(self.feed_capacity());
        let entries = Store::feed_entries();
        let entries: Vec<FeedEntryItem> =
            from_items(self.db.query_up_to("feed", &entries, None, want).await?)?;
        Ok(entries
            .into_iter()
            .map(|e| {
                let listed = e.listed();
                e.post.listed_at(listed).edited_at(e.updated_at)
            })
            .collect())
    }
}

impl FanOut<'_> {
    /// Fan-out of a new post: its entry enters the feed unless it is there
    /// already or the post is at or below the floor (a post that left the
    /// feed never comes back); then the feed's count of entries grows by one,
    /// and a trim follows when it passes the slack. Plain writes, not a
    /// transaction: a post read as above the floor just before a trim raised
    /// the floor past it sits below the newest `capacity`, where Q6 never
    /// reads and the next trim removes it; a count that drifts (a delivery
    /// that died between the two writes) only moves the next trim, which
    /// counts again.
    ///
    /// Returns what it did and how many entries the feed holds, as counted.
    pub async fn enter_feed(&self, post: &PostItem) -> Result<(Copied, u64), StoreError> {
        let Some(listed) = post.listed_id() else {
            // A draft is in no list.
            return Ok((Copied::Stale, 0));
        };
        let (floor, entries) = self.feed_head().await?;
        if floor.is_some_and(|floor| listed <= floor) {
            return Ok((Copied::Stale, entries));
        }
        let entry = Write::create(&FeedEntryItem::from(post))?;
        if !self.db.write("enter feed", &entry).await?.done() {
            // Delivered before: a newer name the INSERT rule found still
            // reaches the entry.
            self.refresh_feed_entry(post).await?;
            return Ok((Copied::Stale, entries));
        }
        let change = Expr::new("SET entries = if_not_exists(entries, :zero) + :one, #type = :type")
            .value(":zero", n(0))
            .value(":one", n(1));
        // A count up leaves nothing of its own: a lost answer is retried as
        // a failed record, and the next trim recounts.
        let count = Write::update(floor_key().item(), floor_type(change)?, Landed::Untold)
            .returning(Returning::UpdatedNew);
        let counted = match self.db.write("count feed entry", &count).await? {
            Outcome::Done(attributes) => attributes,
            Outcome::ConditionFailed { .. } => None,
        };
        let entries = counted
            .and_then(|a| a.get("entries").and_then(|v| v.as_n().ok()).cloned())
            .and_then(|n| n.parse().ok())
            .unwrap_or(entries + 1);
        // A record that arrives after the post was deleted or went back to
        // a draft (a redelivery, a replay) must not bring it back: the record
        // that takes the entry out may have come and gone already. Checked
        // once the entry is in and counted, so that taking it out again
        // counts it out.
        let still = self.post_item(&post.post_id).await?;
        if still.and_then(|now| now.listed_id()) != Some(listed) {
            self.leave_feed(&listed).await?;
            return Ok((Copied::Stale, entries.saturating_sub(1)));
        }
        Ok((Copied::Written, entries))
    }

    /// Whether a feed holding `entries` (as counted) is due a trim: past its
    /// capacity and slack.
    pub fn feed_due_trim(&self, entries: u64) -> bool {
        let capacity = self.feed_capacity();
        let limit = capacity + feed_reserve(capacity) + feed_slack(capacity);
        usize::try_from(entries).unwrap_or(usize::MAX) > limit
    }

    /// The feed's floor and count of entries, strongly consistent.
    async fn feed_head(&self) -> Result<(Option<PostId>, u64), StoreError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Head {
            floor_post_id: Option<PostId>,
            entries: Option<u64>,
        }
        let Some(item) = self
            .db
            .get("the feed's floor", floor_key().item(), true)
            .await?
        else {
            return Ok((None, 0));
        };
        let head: Head = from_item(item)?;
        Ok((head.floor_post_id, head.entries.unwrap_or(0)))
    }

    /// Fan-out of a changed post: refreshes its feed entry if the feed holds an
    /// older version of it. Never creates one: a post that left the feed (or
    /// never entered it) stays out.
    pub async fn refresh_feed_entry(&self, post: &PostItem) -> Result<Copied, StoreError> {
        if !post.is_published() {
            return Ok(Copied::Stale);
        }
        let entry = FeedEntryItem::from(post);
        let change = Expr::new(
            "SET username = :username, title = :title, summary = :summary, \
             #comments = :comments, #likes = :likes, version = :version, \
             userVersion = :uv, updatedAt = :updated",
        )
        .with_counters()
        .value(":updated", s(&post.updated_at))
        .value(":username", s(&entry.post.username))
        .value(":title", s(&entry.post.title))
        .value(":summary", s(&entry.post.summary))
        .value(":comments", n(entry.post.comment_count))
        .value(":likes", n(entry.post.like_count));
        // An entry written before entries carried `userVersion` takes the
        // first image at its version or later, and has it from then on.
        let older = Expr::item_exists()
            .and(
                "version < :version OR userVersion < :uv \
                 OR (attribute_not_exists(userVersion) AND version <= :version)",
            )
            .value(":uv", n(entry.user_version))
            .value(":version", n(entry.version));
        let landed = Landed::When(vec![
            (keys::VERSION, n(entry.version)),
            ("userVersion", n(entry.user_version)),
        ]);
        let write = Write::update(entry.key().item(), change, landed).when(older);
        Ok(match self.db.write("refresh feed entry", &write).await? {
            Outcome::Done(_) => Copied::Written,
            Outcome::ConditionFailed { .. } => Copied::Stale,
        })
    }

    /// Fan-out: keeps the newest [`FEED_CAPACITY`] entries (or the store's
    /// capacity): raises the floor to the newest entry beyond them, deletes
    /// those, and sets the count to what is left. Returns how many writes it
    /// issued. Raising the floor first means a crash between the steps leaves
    /// entries that the next trim removes, never a post that can return. It
    /// reads the whole feed (its keys), so it runs only when the count has
    /// passed the slack: once every fifth of the capacity's posts.
    pub async fn trim_feed(&self) -> Result<usize, StoreError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Id {
            post_id: PostId,
            listed_id: Option<PostId>,
        }
        let everything = Store::feed_entries()
            .project(Expr::new("postId, listedId"))
            .consistent();
        let ids = self
            .db
            .query_up_to("read the feed", &everything, None, usize::MAX);
        let ids: Vec<Id> = from_items(ids.await?)?;
        // Where each is held, newest first as read.
        let mut ids: Vec<PostId> = ids
            .into_iter()
            .map(|id| id.listed_id.unwrap_or(id.post_id))
            .collect();
        let kept = self.feed_capacity + feed_reserve(self.feed_capacity);
        let excess = ids.split_off(ids.len().min(kept));
        let Some(newest_excess) = excess.first() else {
            return Ok(0);
        };
        let change = Expr::new("SET floorPostId = :post, #type = :type, entries = :left")
            .value(":left", n(ids.len() as u64))
            .value(":post", s(newest_excess.to_string()));
        let higher = Expr::new("attribute_not_exists(floorPostId) OR floorPostId < :post");
        let raised = Landed::When(vec![("floorPostId", s(newest_excess.to_string()))]);
        let raise = Write::update(floor_key().item(), floor_type(change)?, raised).when(higher);
        // Refused when another trim raised it as far or further: fine too.
        self.db.write("raise feed floor", &raise).await?;
        for post in &excess {
            self.remove_feed_entry(post).await?;
        }
        Ok(1 + excess.len())
    }

    /// Fan-out of a deleted (or unpublished) post: its entry, held under
    /// `listed`, leaves the feed, and the feed's count goes one down if the
    /// entry was there (a redelivery finds none). The next newest entry,
    /// kept in reserve, shows in its place.
    pub async fn leave_feed(&self, listed: &PostId) -> Result<bool, StoreError> {
        // What it deletes tells whether to count one down: after a lost
        // answer that is unknown, and the record is retried.
        let delete = Write::delete(FeedEntryItem::key_of(listed).item(), Deleted::Untold)
            .returning(Returning::Old);
        let Outcome::Done(Some(_)) = self.db.write("leave feed", &delete).await? else {
            return Ok(false);
        };
        let change = Expr::new("SET entries = entries - :one").value(":one", n(1));
        let positive = Expr::new("entries > :zero").value(":zero", n(0));
        let uncount = Write::update(floor_key().item(), change, Landed::Untold).when(positive);
        // A count already at 0 (it drifted) stays there; the next trim recounts.
        self.db.write("uncount feed entry", &uncount).await?;
        Ok(true)
    }
}

#[cfg(feature = "admin")]
impl Admin<'_> {
    /// The audit's repair of a feed entry (admin): puts `entry` unless the
    /// feed holds a newer copy of the post (the fan-out wrote one meanwhile).
    pub(crate) async fn repair_feed_entry(
        &self,
        entry: &FeedEntryItem,
    ) -> Result<bool, StoreError> {
        let not_newer = Expr::item_absent()
            .or("version <= :version AND userVersion <= :uv")
            .value(":version", n(entry.version))
            .value(":uv", n(entry.user_version));
        let landed = Landed::When(vec![
            (keys::VERSION, n(entry.version)),
            ("userVersion", n(entry.user_version)),
        ]);
        let put = Write::put(entry, landed)?.when(not_newer);
        Ok(self.db.write("repair feed entry", &put).await?.done())
    }

    /// The audit's repair of the floor (admin): sets it to `post`, lower than
    /// a trim would ever set it, so that no post the feed shows is kept out.
    pub(crate) async fn set_feed_floor(&self, post: &PostId) -> Result<bool, StoreError> {
        let change = Expr::new("SET floorPostId = :floor, #type = :type")
            .value(":floor", s(post.to_string()));
        let landed = Landed::When(vec![("floorPostId", s(post.to_string()))]);
        let write = Write::update(floor_key().item(), floor_type(change)?, landed);
        Ok(self.db.write("set feed floor", &write).await?.done())
    }
}

// The tag lists.

impl Requests<'_> {
    /// `GET /tags/{tag}/posts`: the tag's posts in short form, newest first;
    /// one Query a page.
    pub async fn tag_posts(
        &self,
        tag: &Tag,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostSummary>, StoreError> {
        let list = format!("tag-posts:{tag}");
        let after = super::pages::resume_after(&list, cursor, PostId::parse)?;
        let start = after.map(|listed| TagEntryItem::key_of(tag, &listed).item());
        let query = Query::partition(keys::tag_pk(tag))
            .begins_with(POST_PREFIX)
            .newest_first();
        let page = self
            .list_page(&list, &query, start, limit, |e: &TagEntryItem| {
                e.listed().to_string()
            })
            .await?;
        Ok(Page {
            items: page
                .items
                .into_iter()
                .map(|e| {
                    let listed = e.listed();
                    e.post.listed_at(listed).edited_at(e.updated_at)
                })
                .collect(),
            next_cursor: page.next_cursor,
        })
    }
}

impl FanOut<'_> {
    /// The post as `post` shows it, into the list of each of its tags where
    /// the entry is missing or older: a new post's entries, a changed one's
    /// refreshed, an added tag's entry. Then, if it wrote anything, reads the
    /// post item (strongly consistent; 1 RCU) and takes back each entry written for a
    /// tag the post no longer has (or for a post that is gone): a record
    /// delivered again, or replayed, after a newer change cannot bring an
    /// entry back. Returns how many writes it issued.
    pub async fn enter_tags(&self, post: &PostItem) -> Result<usize, StoreError> {
        let Some(listed) = post.listed_id() else {
            return Ok(0);
        };
        let mut written = Vec::new();
        for tag in &post.tags {
            let entry = TagEntryItem::of(post, tag);
            let older = Expr::new(
                "attribute_not_exists(version) OR version < :version OR userVersion < :uv",
            )
            .value(":version", n(entry.version))
            .value(":uv", n(entry.user_version));
            let landed = Landed::When(vec![
                (keys::VERSION, n(entry.version)),
                ("userVersion", n(entry.user_version)),
            ]);
            let put = Write::put(&entry, landed)?.when(older);
            if self.db.write("enter tag list", &put).await?.done() {
                written.push(tag);
            }
        }
        let mut writes = post.tags.len();
        if written.is_empty() {
            return Ok(writes);
        }
        let now = self.post_item(&post.post_id).await?;
        for tag in written {
            let kept = now
                .as_ref()
                .is_some_and(|now| now.tags.contains(tag) && now.listed_id() == Some(listed));
            if !kept {
                self.leave_tag(tag, &listed, None).await?;
                writes += 1;
            }
        }
        Ok(writes + 1)
    }

    /// Takes the post listed under `listed` out of `tag`'s list; with
    /// `as_of`, only an entry no newer than that version (a tag a newer
    /// change gave back keeps its entry). Deleting what is gone is a no-op.
    pub async fn leave_tag(
        &self,
        tag: &Tag,
        listed: &PostId,
        as_of: Option<u64>,
    ) -> Result<(), StoreError> {
        let mut delete = Write::delete(TagEntryItem::key_of(tag, listed).item(), Deleted::IfGone);
        if let Some(version) = as_of {
            delete = delete.when(
                Expr::new("attribute_not_exists(version) OR version <= :version")
                    .value(":version", n(version)),
            );
        }
        self.db.write("leave tag list", &delete).await?;
        Ok(())
    }
}

#[cfg(feature = "admin")]
impl Admin<'_> {
    /// The audit's read of a post's entry under `tag` (strongly consistent).
    pub(crate) async fn tag_entry(
        &self,
        tag: &Tag,
        listed: &PostId,
    ) -> Result<Option<TagEntryItem>, StoreError> {
        self.db
            .get_entity::<TagEntryItem>(TagEntryItem::key_of(tag, listed).item(), true)
            .await
    }

    /// The audit's repair of a post's entry under `tag`, held under
    /// `listed`: the post read again; its short form put there if it still
    /// has the tag and is listed there, else the entry deleted. A fan-out writing meanwhile writes the same or newer.
    pub(crate) async fn repair_tag_entry(
        &self,
        tag: &Tag,
        post: &PostId,
        listed: &PostId,
    ) -> Result<bool, StoreError> {
        let now = self.post_item(post).await?;
        match now.filter(|now| now.tags.contains(tag) && now.listed_id() == Some(*listed)) {
            Some(now) => {
                let put = Write::put(&TagEntryItem::of(&now, tag), Landed::Untold)?;
                self.db.write("repair tag entry", &put).await?;
            }
            None => self.fanout().leave_tag(tag, listed, None).await?,
        }
        Ok(true)
    }
}
