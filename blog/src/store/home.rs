//! Homes: each reader's list of the posts of the people they follow
//! (`HOME#u / POST#<listedId>`), written by the fan-out as each post is
//! published (fan-out on write, one entry a follower), read newest first.
//!
//! An entry is a pointer (the post, its author, where it is listed), never a
//! copy of what lists show: a post's counts change with every like, and a
//! copy in a million homes could not follow them. A home page reads its
//! entries, then the posts, the caller's follows of their authors and the
//! authors' profiles in one BatchGetItem, and shows only a published post,
//! listed where the entry says, by an author the caller still follows and
//! whose account is not erased: an unfollow, a deletion, an un-publication
//! or an erasure leaves the home at the next read, and the posts carry
//! their counts and usernames as they are. Entries expire (TTL) 30 days
//! after they were written; no entry is ever rewritten.
//!
//! **Delivery.** A post's publication puts one delivery item for each of its
//! author's follower shards that holds followers (`DELIVERY#p#listed#k /
//! DELIVERY`, by the post and where it is listed: a post published again
//! is delivered again, at its new place; a partition each, so their stream records spread over the
//! stream's shards and are walked side by side). The delivery's INSERT walks
//! its shard's followers, oldest first, a page of [`DELIVERY_PAGE`](super::DELIVERY_PAGE) at a time: their
//! entries with BatchWriteItem, then its place (`after`: the last follow
//! delivered) saved with a condition on the place it read, so that a
//! redelivered or replayed record goes on from the saved place and never
//! starts over, and two walkers never both go on. Near its deadline the
//! walk saves its place with a `handoff` time, whose MODIFY record (the only
//! one the stream's filter lets through) goes on in the next invocation. A
//! crash between a page's writes and the save of its place writes that page
//! again, the same entries (at most a page).

use crate::store::items::home::{DAY_SECONDS, now_seconds};
use crate::store::items::home::{DeliveryItem, HomeEntryItem};
use std::collections::{HashMap, HashSet};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize;

use super::{
    FanOut, Item, ItemType, Requests, StoreError,
    deadline::Deadline,
    follows::PULL_LIMIT,
    from_item,
    items::follow::{FollowItem, FollowerCountItem, FollowerItem},
    items::post::PostItem,
    items::user::UserItem,
    memory::Pointer,
    n, s,
    table::{Expr, Landed, Query, Write},
};
use crate::{
    ids::{FollowId, PostId, UserId},
    keys::{self, Entity, Key, POST_PREFIX, PUSH_SHARDS},
    model::{Page, PostSummary},
};

/// The largest home page (`GET /home?limit`): a page reads its posts, the
/// reader's follows and the authors too.
pub const MAX_PAGE: usize = 25;
/// How many of a pulled author's newest posts the cache keeps: a first page
/// of the largest size and the one past it.
const PULLED_WINDOW: usize = MAX_PAGE + 1;
/// How many of an author's newest posts a new follow puts into the
/// follower's home.
pub const BACKFILL: usize = 20;
/// How many BatchWriteItem calls (25 entries each) a page sends at once.
const PARALLEL_WRITES: usize = 4;
/// How long a finished delivery's item stays (it tells a late record that
/// the delivery was done).
const DELIVERY_DAYS: u64 = 7;

/// What one walk of a delivery did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivering {
    /// Every follower of the shard has the entry.
    Done { written: usize },
    /// Stopped near the deadline, its place saved with a handoff.
    Paused { written: usize },
    /// Nothing to do: done before, gone, or another walker is ahead.
    Stale,
}

impl Requests<'_> {
    /// `GET /home` (request): the caller's home, newest first. At once: one
    /// Query of `HOME#u` (`limit` + 1 entries, the pushed posts) and one
    /// GetItem of the caller's profile (whom they pull); then at once one
    /// Query of GSI1 for each author they pull (at most [`PULL_LIMIT`]:
    /// that author's `limit` + 1 newest posts before the cursor; on a first
    /// page, none for an author whose list the instance read within its
    /// [`PulledLists`](super::memory::PulledLists)' time to live); merged,
    /// newest first; then one eventually consistent BatchGetItem of the
    /// page's posts, the caller's follows of their authors and the authors'
    /// profiles (at most 3 × `limit` keys). An entry whose post is gone,
    /// unpublished or listed elsewhere, or whose author the caller no
    /// longer follows or was erased, is left out, so a page may hold fewer
    /// than `limit`; `nextCursor` still goes on. At most
    /// 3 + [`PULL_LIMIT`] calls, whatever the caller follows.
    pub async fn home(
        &self,
        reader: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostSummary>, StoreError> {
        let list = format!("home:{reader}");
        let after = super::pages::resume_after(&list, cursor, PostId::parse)?;
        let start = after.map(|listed| HomeEntryItem::key_of(reader, &listed).item());
        let query = Query::partition(keys::home_pk(reader))
            .begins_with(POST_PREFIX)
            .newest_first();
        let want = limit.saturating_add(1);
        let (items, profile) = futures::try_join!(
            self.db.query_up_to("home", &query, start, want),
            self.read_profile(reader, false),
        )?;
        let mut entries: Vec<Pointer> =
            items.into_iter().map(from_item).collect::<Result<_, _>>()?;
        let pulls = profile.map(|p| p.pulls).unwrap_or_default();
        let pulled = pulls
            .iter()
            .take(PULL_LIMIT)
            .map(|author| self.pulled_posts(author, after, want));
        for posts in futures::future::try_join_all(pulled).await? {
            entries.extend(posts);
        }
        // Newest first; a post both delivered and pulled (pushed before the
        // follow was made again as a pull) shown once. A post published
        // again has an entry at each place it was listed: only the one
        // where it is listed now is shown (below).
        entries.sort_by_key(|e| std::cmp::Reverse((e.listed_id, e.post_id)));
        entries.dedup_by_key(|e| (e.listed_id, e.post_id));
        let more = entries.len() > limit;
        entries.truncate(limit);
        let next_cursor = match entries.last() {
            Some(last) if more => Some(super::cursor::encode(&list, &last.listed_id.to_string())),
            _ => None,
        };
        let authors: Vec<&UserId> = {
            let mut seen = HashSet::new();
            entries
                .iter()
                .map(|e| &e.user_id)
                .filter(|a| seen.insert(*a))
                .collect()
        };
        // Each post once, however many places its entries name.
        let mut wanted: Vec<Item> = Vec::with_capacity(entries.len() + 2 * authors.len());
        let mut named = HashSet::new();
        for entry in entries.iter().filter(|e| named.insert(e.post_id)) {
            wanted.push(PostItem::key(&entry.post_id));
        }
        for author in &authors {
            wanted.push(keys::follow(reader, author).item());
            wanted.push(UserItem::key(author));
        }
        let (found, _) = self.db.batch_get_with("home", wanted, false).await?;
        let (mut posts, mut followed, mut profiles) =
            (HashMap::new(), HashSet::new(), HashSet::new());
        for item in found {
            match ItemType::of(&item) {
                Some(ItemType::Post) => {
                    let post = PostItem::from_item::<StoreError>(item)?;
                    posts.insert(post.post_id, post);
                }
                Some(ItemType::Follow) => {
                    followed.insert(FollowItem::from_item::<StoreError>(item)?.followed_id);
                }
                Some(ItemType::User) => {
                    profiles.insert(UserItem::from_item::<StoreError>(item)?.user_id);
                }
                _ => {}
            }
        }
        let items = entries
            .into_iter()
            .filter(|e| followed.contains(&e.user_id) && profiles.contains(&e.user_id))
            .filter_map(|e| {
                let post = posts.get(&e.post_id)?;
                (post.listed_id() == Some(e.listed_id))
                    .then(|| PostSummary::from(post).listed_at(e.listed_id))
            })
            .collect();
        Ok(Page { items, next_cursor })
    }

    /// `author`'s newest published posts listed before `before` (all when
    /// none), at most `count`: one Query of their GSI1 list (Q3's), keys and
    /// ids only.
    /// A pulled author's newest `count` posts before `before`: a first
    /// page's from the instance's [`PulledLists`](super::memory::PulledLists) while they are fresh (read
    /// as [`PULLED_WINDOW`] when not), any other by a Query.
    async fn pulled_posts(
        &self,
        author: &UserId,
        before: Option<PostId>,
        count: usize,
    ) -> Result<Vec<Pointer>, StoreError> {
        let lists = &self.pulled;
        if before.is_some() || !lists.is_on() || count > PULLED_WINDOW {
            return self.posts_of(author, before, count).await;
        }
        let newest = match lists.fresh(author) {
            Some(newest) => newest,
            None => lists.keep(author, self.posts_of(author, None, PULLED_WINDOW).await?),
        };
        Ok(newest.iter().take(count).cloned().collect())
    }

    async fn posts_of(
        &self,
        author: &UserId,
        before: Option<PostId>,
        count: usize,
    ) -> Result<Vec<Pointer>, StoreError> {
        let list = Query::gsi1(keys::user_items_pk(author));
        let list = match before {
            // Inclusive: the cursor's own post is dropped below.
            Some(listed) => list.between(POST_PREFIX.to_owned(), keys::home_sk(&listed)),
            None => list.begins_with(POST_PREFIX),
        };
        let query = list
            .newest_first()
            .project(Expr::new("#gsk, postId").name("#gsk", keys::GSI1SK));
        let rows = self
            .db
            .query_up_to(
                "posts of a followed author",
                &query,
                None,
                count.saturating_add(1),
            )
            .await?;
        let mut posts = Vec::with_capacity(rows.len());
        for row in rows {
            #[derive(Deserialize)]
            struct Listed {
                #[serde(rename = "GSI1SK")]
                gsi1sk: String,
                #[serde(rename = "postId")]
                post_id: PostId,
            }
            let row: Listed = from_item(row)?;
            let listed = keys::listed_of_user_post_sk(&row.gsi1sk).unwrap_or(row.post_id);
            if Some(listed) != before {
                posts.push(Pointer {
                    post_id: row.post_id,
                    user_id: author.clone(),
                    listed_id: listed,
                });
            }
        }
        posts.truncate(count);
        Ok(posts)
    }

    /// A new push follow's backfill: `author`'s newest [`BACKFILL`]
    /// published posts into `reader`'s home (one Query of GSI1, keys only,
    /// then BatchWriteItem: 1 WCU a post).
    pub(super) async fn backfill_home(
        &self,
        reader: &UserId,
        author: &UserId,
    ) -> Result<(), StoreError> {
        let mut entries = Vec::new();
        for post in self.posts_of(author, None, BACKFILL).await? {
            entries
                .push(HomeEntryItem::new(reader, post.post_id, author, post.listed_id).to_item()?);
        }
        self.db
            .put_all("home backfill", entries, PARALLEL_WRITES)
            .await
    }
}

impl FanOut<'_> {
    /// A post published (fan-out of its INSERT, or of the MODIFY that
    /// publishes it): one delivery item for each of its author's push
    /// shards whose count (read strongly, one BatchGetItem of the
    /// [`PUSH_SHARDS`] count items) is above 0, each only if absent (a
    /// record delivered again starts nothing twice). Returns how many it
    /// put.
    pub async fn start_deliveries(&self, post: &PostItem) -> Result<usize, StoreError> {
        let Some(listed) = post.listed_id() else {
            return Ok(0);
        };
        let counts: Vec<Item> = (0..PUSH_SHARDS)
            .map(|k| FollowerCountItem::key_of(&post.user_id, k).item())
            .collect();
        let (found, _) = self
            .db
            .batch_get("delivery: follower counts", counts)
            .await?;
        let mut started = 0;
        for item in found {
            let count: FollowerCountItem = from_item(item)?;
            if count.count == 0 {
                continue;
            }
            let delivery = DeliveryItem {
                post_id: post.post_id,
                user_id: post.user_id.clone(),
                listed_id: listed,
                shard: count.shard,
                after: None,
                delivered: 0,
                done: false,
                handoff: None,
                expires_at: now_seconds() + DELIVERY_DAYS * DAY_SECONDS,
            };
            // Started before (a record delivered again): its condition fails.
            if self
                .db
                .write("start delivery", &Write::create(&delivery)?)
                .await?
                .done()
            {
                started += 1;
            }
        }
        Ok(started)
    }

    /// Walks the delivery at `key` (its stream record's) from where its
    /// item says it is (read strongly), until its shard's followers all have
    /// the entry or `deadline` is near (at least one page a call). A
    /// delivery whose post is no longer published where it says is ended
    /// without writing. The item is saved under the key it was read at (a
    /// delivery started by a version that keyed it `DELIVERY#p#k` goes on).
    pub async fn deliver(&self, key: &Key, deadline: &Deadline) -> Result<Delivering, StoreError> {
        let Some(mut delivery) = self.db.get_entity::<DeliveryItem>(key.item(), true).await? else {
            return Ok(Delivering::Stale);
        };
        if delivery.done {
            return Ok(Delivering::Stale);
        }
        let shard = delivery.shard;
        let still = self.post_item(&delivery.post_id).await?;
        if still.and_then(|p| p.listed_id()) != Some(delivery.listed_id) {
            // Deleted or un-published since: its entries would be left out
            // by every read anyway.
            self.save_place(key, &delivery, delivery.after, 0, Save::Done)
                .await?;
            return Ok(Delivering::Stale);
        }
        let followers = keys::followers_pk(&delivery.user_id, shard);
        let mut written = 0;
        let mut first = true;
        loop {
            if !first && deadline.near() {
                return Ok(
                    match self
                        .save_place(key, &delivery, delivery.after, 0, Save::Handoff)
                        .await?
                    {
                        true => Delivering::Paused { written },
                        false => Delivering::Stale,
                    },
                );
            }
            first = false;
            let start = delivery
                .after
                .map(|follow| FollowerItem::key_of(&delivery.user_id, shard, &follow).item());
            let query = Query::partition(followers.clone()).begins_with(keys::FOLLOWER_PREFIX);
            let page_size = i32::try_from(self.delivery_page).unwrap_or(i32::MAX);
            let page = self
                .db
                .query_page("delivery: followers", &query, start, Some(page_size))
                .await?;
            let last_page = page.next.is_none();
            let mut entries = Vec::with_capacity(page.items.len());
            let mut last = delivery.after;
            for item in page.items {
                let follower = FollowerItem::from_item::<StoreError>(item)?;
                last = Some(follower.follow_id);
                entries.push(
                    HomeEntryItem::new(
                        &follower.follower_id,
                        delivery.post_id,
                        &delivery.user_id,
                        delivery.listed_id,
                    )
                    .to_item()?,
                );
            }
            let count = entries.len();
            self.db
                .put_all("delivery: home entries", entries, PARALLEL_WRITES)
                .await?;
            written += count;
            let save = if last_page { Save::Done } else { Save::Place };
            if !self.save_place(key, &delivery, last, count, save).await? {
                // Another walker saved a place meanwhile: it goes on.
                return Ok(Delivering::Stale);
            }
            if last_page {
                return Ok(Delivering::Done { written });
            }
            delivery.delivered += count as u64;
            delivery.after = last;
            delivery.handoff = None;
        }
    }

    /// Saves `delivery`'s place as `after` (conditional on the place it
    /// read), with `count` more entries delivered; `false` when another
    /// walker moved it first.
    async fn save_place(
        &self,
        key: &Key,
        delivery: &DeliveryItem,
        after: Option<FollowId>,
        count: usize,
        save: Save,
    ) -> Result<bool, StoreError> {
        let mut text = String::from("SET delivered = delivered + :count");
        let mut change = Expr::new("").value(":count", n(count as u64));
        if let Some(after) = after {
            text.push_str(", #after = :after");
            change = change.value(":after", s(after.to_string()));
        }
        match save {
            Save::Place => text.push_str(" REMOVE handoff"),
            Save::Handoff => {
                text.push_str(", handoff = :now");
                change = change.value(":now", n(now_seconds()));
            }
            Save::Done => {
                text.push_str(", done = :yes REMOVE handoff");
                change = change.value(":yes", AttributeValue::Bool(true));
            }
        }
        let condition = match delivery.after {
            Some(was) => Expr::new("#after = :was").value(":was", s(was.to_string())),
            None => Expr::new("attribute_exists(PK) AND attribute_not_exists(#after)"),
        }
        .and("attribute_not_exists(done)")
        .name("#after", "after");
        let change = change.with_text(text).name("#after", "after");
        let write = Write::update(key.item(), change, Landed::Untold).when(condition);
        Ok(self.db.write("delivery: place", &write).await?.done())
    }
}

/// How a delivery's place is saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Save {
    /// After a page, the walk going on.
    Place,
    /// Near the deadline: its MODIFY record goes on.
    Handoff,
    /// Every follower has the entry (or the post is no longer out).
    Done,
}
