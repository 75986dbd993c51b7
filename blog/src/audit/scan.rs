//! The full audit: one parallel, strongly consistent Scan of the table.
//!
//! Memory is bounded by the number of users, not by what they wrote:
//! - A Scan returns the items of one partition key together, in sort-key
//!   order, within one segment (a partition's item collection never spans
//!   segments, though it may span pages). So each segment checks one post
//!   partition at a time: it counts its comments and likes and compares the
//!   counts with the post item's when the partition ends, holding two
//!   counters and the post item, whatever the post has.
//! - A username copy cannot be checked where it is read: the author's
//!   profile may come later, in any segment. So the segments keep one entry
//!   per user (the profile's name and version) plus, until the profile is
//!   known, the distinct names seen on what the user wrote. Once the Scan is
//!   done, each user whose items showed another name than the profile is
//!   audited on their own ([`crate::store::Admin::audit_user`]), which names every stale
//!   copy; everyone else's copies are right.
//! - For the feed, each segment keeps only the newest posts it has seen (the
//!   feed's capacity, its slack and one more), and the feed partition itself,
//!   which the trim keeps small.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, PoisonError},
};

use futures::StreamExt;

use super::{
    AuditOptions, Finding, Report, Sink, counted_in, kind, number, projection, shown, text,
};
use crate::store::Admin;
use crate::{
    ids::{PostId, UserId},
    keys::{self, PostPartition},
    model::PostSummary,
    store::{
        ItemType, Store, StoreError, from_item,
        items::feed::TagEntryItem,
        items::feed::{FeedEntryItem, feed_reserve, feed_slack},
        items::follow::{FollowerCountItem, FollowerItem},
        items::post::PostItem,
        table::Scan,
    },
    text::{Tag, Username},
};

/// What the Scan keeps of one user.
#[derive(Debug, Default)]
struct Seen {
    /// The profile's username and version, once read.
    profile: Option<(Username, u64)>,
    /// Distinct usernames seen on the user's items that are not (or, before
    /// the profile was read, not known to be) the profile's.
    names: Vec<String>,
    /// The user's posts, comments and likes.
    items: u64,
    /// Their erasure mark, if any: whether its walk is done.
    erasure: Option<bool>,
}

impl Seen {
    fn saw(&mut self, name: &str) {
        let current = self.profile.as_ref().is_some_and(|(p, _)| p == name);
        if !current && !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_owned());
        }
    }

    fn profile(&mut self, name: Username, version: u64) {
        self.names.retain(|n| name != *n.as_str());
        self.profile = Some((name, version));
    }

    /// Whether any of the user's items showed another name than the profile.
    fn stale(&self) -> bool {
        self.profile.is_some() && !self.names.is_empty()
    }

    /// What an erasure left undone: the items of a user who has no profile
    /// but an erasure mark, or a mark whose walk never said it was done.
    fn unerased(&self) -> Option<u64> {
        let mark = self.erasure?;
        let left = if self.profile.is_none() {
            self.items
        } else {
            0
        };
        (left > 0 || !mark).then_some(left)
    }
}

/// The partition a segment is reading.
struct Collection {
    pk: String,
    comments: u64,
    likes: u64,
    /// Like markers and the content: with no post, they are a deleted
    /// post's leftovers too.
    others: u64,
    post: Option<PostItem>,
    /// A hot post's comments by the shard that counts them.
    counted_in: BTreeMap<u8, u64>,
    /// In a tag's partition: the posts it lists (each checked against its
    /// post when the partition ends).
    tag_entries: Vec<(Tag, PostId, PostId)>,
    /// In a follower shard's partition: whose shard, its entries, and its
    /// count as stored.
    followers: Option<(UserId, u8)>,
    follower_entries: u64,
    follower_count: Option<u64>,
}

/// What one segment leaves for the checks that need the whole table.
#[derive(Default)]
struct Segment {
    items_read: usize,
    read_units: f64,
    pages: usize,
    max_held: usize,
    /// The newest posts it read, as their feed entries should be (counts from
    /// their items; usernames are set from the profiles at the end).
    newest: BTreeMap<PostId, FeedEntryItem>,
    feed: BTreeMap<PostId, FeedEntryItem>,
    floor: Option<PostId>,
}

/// The usernames and profiles one page showed, applied under one lock.
#[derive(Default)]
struct PageNames {
    profiles: Vec<(UserId, Username, u64)>,
    copies: HashMap<UserId, Vec<String>>,
    items: HashMap<UserId, u64>,
    marks: Vec<(UserId, bool)>,
}

impl PageNames {
    fn saw(&mut self, user: UserId, name: &str) {
        *self.items.entry(user.clone()).or_default() += 1;
        let names = self.copies.entry(user).or_default();
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }

    fn apply(self, users: &Mutex<HashMap<UserId, Seen>>) {
        let mut users = users.lock().unwrap_or_else(PoisonError::into_inner);
        for (user, name, version) in self.profiles {
            users.entry(user).or_default().profile(name, version);
        }
        for (user, names) in self.copies {
            let seen = users.entry(user).or_default();
            for name in names {
                seen.saw(&name);
            }
        }
        for (user, items) in self.items {
            users.entry(user).or_default().items += items;
        }
        for (user, done) in self.marks {
            users.entry(user).or_default().erasure = Some(done);
        }
    }
}

/// One item of the Scan, into the segment's tallies: its partition's
/// counts, its user's names, the feed.
fn read_item(
    done: &mut Segment,
    collection: &mut Collection,
    names: &mut PageNames,
    item: crate::store::Item,
) -> Result<(), StoreError> {
    let user = text(&item, "userId").and_then(|u| UserId::parse(u).ok());
    let name = text(&item, "username");
    match kind(&item) {
        Some(ItemType::User) => {
            let name = name.and_then(|name| Username::parse(name).ok());
            if let (Some(user), Some(name)) = (user, name) {
                let version = number(&item, keys::VERSION).unwrap_or_default();
                names.profiles.push((user, name, version));
            }
        }
        Some(ItemType::Post) => {
            let post: PostItem = from_item(item)?;
            names.saw(post.user_id.clone(), post.username.as_str());
            collection.post = Some(post);
        }
        Some(k @ (ItemType::Comment | ItemType::Like)) => {
            if k == ItemType::Comment {
                collection.comments += 1;
                if let Some(shard) = counted_in(&item) {
                    *collection.counted_in.entry(shard).or_default() += 1;
                }
            } else {
                collection.likes += 1;
            }
            if let (Some(user), Some(name)) = (user, name) {
                names.saw(user, name);
            }
        }
        Some(ItemType::FeedEntry) => {
            let entry: FeedEntryItem = from_item(item)?;
            done.feed.insert(entry.listed(), entry);
        }
        Some(ItemType::TagEntry) => {
            let entry: TagEntryItem = from_item(item)?;
            let listed = entry.listed();
            collection
                .tag_entries
                .push((entry.tag, entry.post.post_id, listed));
        }
        Some(ItemType::Follower) => {
            let entry: FollowerItem = from_item(item)?;
            collection.followers = Some((entry.user_id.clone(), entry.shard()));
            collection.follower_entries += 1;
        }
        Some(ItemType::FollowerCount) => {
            let count: FollowerCountItem = from_item(item)?;
            collection.followers = Some((count.user_id, count.shard));
            collection.follower_count = Some(count.count);
        }
        Some(ItemType::FeedFloor) => {
            done.floor = text(&item, "floorPostId").and_then(|p| PostId::parse(p).ok());
        }
        Some(ItemType::Liker | ItemType::PostContent) => collection.others += 1,
        Some(
            ItemType::ShardCounter
            | ItemType::ShardGroup
            | ItemType::LikeShards
            | ItemType::CommentShards,
        ) => {
            collection.others += 1;
        }
        Some(ItemType::Erasure) => {
            let done = matches!(
                item.get("done"),
                Some(aws_sdk_dynamodb::types::AttributeValue::Bool(true))
            );
            if let Some(user) = user {
                names.marks.push((user, done));
            }
        }
        // Claims, rename progress, parked records, and whatever a newer
        // version writes: nothing to compare.
        _ => {}
    }
    let held = done.newest.len() + usize::from(collection.post.is_some());
    done.max_held = done.max_held.max(held);
    Ok(())
}

impl Collection {
    fn new(pk: &str) -> Self {
        Collection {
            pk: pk.to_owned(),
            comments: 0,
            likes: 0,
            others: 0,
            post: None,
            counted_in: BTreeMap::new(),
            tag_entries: Vec::new(),
            followers: None,
            follower_entries: 0,
            follower_count: None,
        }
    }
}

/// What the segments' Scan leaves for the checks that need the whole table.
#[derive(Default)]
struct Scanned {
    report: Report,
    /// The newest posts of the table, as their feed entries should be.
    newest: BTreeMap<PostId, FeedEntryItem>,
    /// The feed as it is, and its floor.
    feed: BTreeMap<PostId, FeedEntryItem>,
    floor: Option<PostId>,
}

impl Scanned {
    /// Adds one segment's tallies, keeping only the `keep_newest` newest
    /// posts of all segments so far.
    fn add(&mut self, done: Segment, keep_newest: usize) {
        self.report.items_read += done.items_read;
        self.report.read_units += done.read_units;
        self.report.pages += done.pages;
        self.report.max_held = self.report.max_held.max(done.max_held);
        self.newest.extend(done.newest);
        while self.newest.len() > keep_newest {
            self.newest.pop_first();
        }
        self.feed.extend(done.feed);
        self.floor = self.floor.or(done.floor);
    }
}

/// The feed's entries named as their authors are now (the profiles the Scan
/// read).
fn named_as_now(newest: &mut BTreeMap<PostId, FeedEntryItem>, users: &HashMap<UserId, Seen>) {
    for entry in newest.values_mut() {
        if let Some(Seen {
            profile: Some((name, _)),
            ..
        }) = users.get(&entry.post.user_id)
        {
            entry.post.username.clone_from(name);
        }
    }
}

impl Admin<'_> {
    /// The full audit: checks every denormalised value with a parallel Scan
    /// of `options.segments` segments; with `options.repair`, rewrites what
    /// is wrong. Counts are repaired as each post is read, usernames once
    /// the Scan is done (see the module's notes), the feed last.
    pub async fn audit_with(&self, options: &AuditOptions) -> Result<Report, StoreError> {
        let sink = Sink::new(options);
        let users: Arc<Mutex<HashMap<UserId, Seen>>> = Arc::default();
        let mut scanned = self.scan_segments(options, &sink, &users).await?;
        let users = std::mem::take(&mut *users.lock().unwrap_or_else(PoisonError::into_inner));
        scanned.report.users_held = users.len();
        tracing::info!(
            items_read = scanned.report.items_read,
            users = users.len(),
            "audit scan done"
        );
        self.audit_stale_names(&users, options, &sink, &mut scanned.report)
            .await?;
        self.find_unerased(&users, &sink).await?;
        // The feed: what it should hold, with the authors' names as now.
        named_as_now(&mut scanned.newest, &users);
        self.check_feed(&scanned.newest, &scanned.feed, scanned.floor, &sink)
            .await?;
        let mut report = scanned.report;
        sink.fill_report(&mut report);
        Ok(report)
    }

    /// The Scan: `options.segments` segments at once, each checking its post
    /// partitions and noting its users in `users`; what they leave, merged.
    async fn scan_segments(
        &self,
        options: &AuditOptions,
        sink: &Arc<Sink>,
        users: &Arc<Mutex<HashMap<UserId, Seen>>>,
    ) -> Result<Scanned, StoreError> {
        let segments = options.segments.max(1);
        let capacity = self.feed_capacity();
        let keep_newest = capacity + feed_reserve(capacity) + feed_slack(capacity) + 1;
        let mut tasks = tokio::task::JoinSet::new();
        for segment in 0..segments {
            let store = Store::clone(self);
            let (sink, users) = (Arc::clone(sink), Arc::clone(users));
            let page_size = options.page_size;
            tasks.spawn(async move {
                store
                    .admin()
                    .scan_segment(segment, segments, page_size, keep_newest, &sink, &users)
                    .await
            });
        }
        let mut scanned = Scanned::default();
        while let Some(done) = tasks.join_next().await {
            let done = done.map_err(|e| StoreError::Internal(format!("audit segment: {e}")))??;
            scanned.add(done, keep_newest);
        }
        Ok(scanned)
    }

    /// Usernames: each user whose items showed another name than their
    /// profile audited on their own, as many at once as the Scan had
    /// segments; what those reads cost added to `report`.
    async fn audit_stale_names(
        &self,
        users: &HashMap<UserId, Seen>,
        options: &AuditOptions,
        sink: &Sink,
        report: &mut Report,
    ) -> Result<(), StoreError> {
        let stale: Vec<&UserId> = users
            .iter()
            .filter(|(_, seen)| seen.stale())
            .map(|(user, _)| user)
            .collect();
        let mut audits = futures::stream::iter(stale)
            .map(|user| self.audit_user_into(user, options.page_size, sink))
            .buffer_unordered(options.segments.max(1) as usize);
        while let Some(done) = audits.next().await {
            let (items, read_units, pages) = done?;
            report.items_read += items;
            report.read_units += read_units;
            report.pages += pages;
        }
        Ok(())
    }

    /// Erasures left undone: what the fan-out's walk would have deleted.
    async fn find_unerased(
        &self,
        users: &HashMap<UserId, Seen>,
        sink: &Sink,
    ) -> Result<(), StoreError> {
        for (user, seen) in users {
            if let Some(items) = seen.unerased() {
                let finding = Finding::Unerased {
                    user: user.clone(),
                    items,
                };
                sink.found(self, finding, None).await?;
            }
        }
        Ok(())
    }

    /// Reads one segment, checking each post partition as it ends.
    async fn scan_segment(
        &self,
        segment: u32,
        segments: u32,
        page_size: Option<i32>,
        keep_newest: usize,
        sink: &Sink,
        users: &Mutex<HashMap<UserId, Seen>>,
    ) -> Result<Segment, StoreError> {
        let scan = Scan::default()
            .consistent()
            .project(projection())
            .page_size(page_size)
            .segment(segment, segments);
        let mut done = Segment::default();
        let mut open: Option<Collection> = None;
        let mut start = None;
        loop {
            let page = self
                .db()
                .scan_page("audit scan", &scan, start.clone())
                .await?;
            done.pages += 1;
            done.read_units += page.read_units;
            let mut names = PageNames::default();
            for item in page.items {
                done.items_read += 1;
                let Some(pk) = text(&item, keys::PK) else {
                    continue;
                };
                if open.as_ref().is_none_or(|c| c.pk != pk) {
                    if let Some(closed) = open.take() {
                        self.close(closed, &mut done, keep_newest, sink).await?;
                    }
                    open = Some(Collection::new(pk));
                }
                if let Some(collection) = open.as_mut() {
                    read_item(&mut done, collection, &mut names, item)?;
                }
            }
            names.apply(users);
            start = page.next;
            if start.is_none() {
                break;
            }
        }
        if let Some(closed) = open.take() {
            self.close(closed, &mut done, keep_newest, sink).await?;
        }
        tracing::debug!(
            segment,
            items_read = done.items_read,
            pages = done.pages,
            "audit segment done"
        );
        Ok(done)
    }

    /// A partition has ended: its post's counts against its items, and the
    /// post among the segment's newest.
    async fn close(
        &self,
        collection: Collection,
        done: &mut Segment,
        keep_newest: usize,
        sink: &Sink,
    ) -> Result<(), StoreError> {
        for (tag, post, listed) in &collection.tag_entries {
            let now = self.post_item(post).await?;
            if !now.is_some_and(|now| now.tags.contains(tag) && now.listed_id() == Some(*listed)) {
                let finding = Finding::ExtraTagEntry {
                    tag: tag.clone(),
                    post: *post,
                    listed: *listed,
                };
                sink.found(self, finding, None).await?;
            }
        }
        if let Some((user, shard)) = &collection.followers {
            let stored = collection.follower_count.unwrap_or(0);
            if stored != collection.follower_entries {
                let finding = Finding::FollowerCount {
                    user: user.clone(),
                    shard: *shard,
                    stored,
                    actual: collection.follower_entries,
                };
                sink.found(self, finding, None).await?;
            }
        }
        let Some(mut post) = collection.post else {
            // A deleted post's partition the fan-out has not emptied (yet);
            // a hot post's shard is checked with its post, unless it has none.
            let left = collection.comments + collection.likes + collection.others;
            let place = PostPartition::of_pk(&collection.pk);
            if left > 0
                && let Some(place) = place
                && (place.shard.is_none() || self.shard_orphaned(place).await?)
            {
                let finding = Finding::Orphans {
                    post: place.post,
                    items: left,
                };
                sink.found(self, finding, None).await?;
            }
            return Ok(());
        };
        self.audit_shards(&post, &collection.counted_in, sink)
            .await?;
        // A scheduled post: the marker that will publish it.
        if let Some(at) = &post.publish_at
            && !self.is_scheduled(&post.post_id, at).await?
        {
            let finding = Finding::Unscheduled {
                post: post.post_id,
                publish_at: at.clone(),
            };
            sink.found(self, finding, None).await?;
        }
        // A published post's tags: each list holds it where it is listed.
        let listed = post.listed_id();
        for tag in listed.iter().flat_map(|_| &post.tags) {
            let Some(listed) = listed else { break };
            let entry = self.tag_entry(tag, &listed).await?;
            if entry.is_none_or(|entry| entry.post != PostSummary::from(&post)) {
                let finding = Finding::StaleTagEntry {
                    tag: tag.clone(),
                    post: post.post_id,
                    listed,
                };
                sink.found(self, finding, None).await?;
            }
        }
        let (comments, likes) = super::hot::expected_counts(
            &post,
            collection.comments,
            collection.likes,
            &collection.counted_in,
        );
        for finding in Finding::counts(&post, comments, likes) {
            sink.found(self, finding, None).await?;
        }
        // The feed's candidates: published posts, by where they are listed.
        let Some(listed) = post.listed_id() else {
            return Ok(());
        };
        let newer = done
            .newest
            .first_key_value()
            .is_none_or(|(oldest, _)| *oldest < listed);
        if done.newest.len() < keep_newest || newer {
            post.comment_count = comments;
            post.like_count = likes;
            done.newest.insert(listed, FeedEntryItem::from(&post));
            while done.newest.len() > keep_newest {
                done.newest.pop_first();
            }
        }
        Ok(())
    }

    /// The feed against the newest posts (`newest`, as their entries should
    /// be): exactly the newest `capacity`, each as its post shows now; up to
    /// the slack of older ones until the next trim; a floor below the newest.
    async fn check_feed(
        &self,
        newest: &BTreeMap<PostId, FeedEntryItem>,
        feed: &BTreeMap<PostId, FeedEntryItem>,
        floor: Option<PostId>,
        sink: &Sink,
    ) -> Result<(), StoreError> {
        let capacity = self.feed_capacity();
        for (post, expected) in newest.iter().rev().take(capacity) {
            match feed.get(post) {
                None => {
                    let finding = Finding::MissingFeedEntry { post: *post };
                    sink.found(self, finding, Some(expected)).await?;
                }
                Some(entry) if shown(expected) != shown(entry) => {
                    let finding = Finding::StaleFeedEntry { post: *post };
                    sink.found(self, finding, Some(expected)).await?;
                }
                Some(_) => {}
            }
        }
        // Below the newest, the feed keeps its reserve (what takes a deleted
        // post's place) and up to its slack of older posts until the next
        // trim; nothing else.
        let kept: Vec<&PostId> = newest
            .keys()
            .rev()
            .take(capacity + feed_reserve(capacity) + feed_slack(capacity))
            .collect();
        for post in feed.keys() {
            if !kept.contains(&post) {
                let finding = Finding::ExtraFeedEntry { post: *post };
                sink.found(self, finding, None).await?;
            }
        }
        // The floor may lag (it rises only when a trim runs), but never reach
        // one of the newest posts, which it would keep out.
        if let Some(expected) = newest.keys().rev().nth(capacity).copied()
            && floor.is_some_and(|floor| floor > expected)
        {
            let finding = Finding::Floor {
                stored: floor,
                expected,
            };
            sink.found(self, finding, None).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(raw: &str) -> Username {
        Username::parse(raw).unwrap()
    }

    #[test]
    fn a_user_is_stale_only_when_an_item_showed_another_name_than_the_profile() {
        // Items read before the profile: kept until the profile says.
        let mut seen = Seen::default();
        seen.saw("alice");
        seen.saw("alice");
        assert_eq!(seen.names, ["alice"]);
        assert!(!seen.stale(), "no profile: nothing to compare with");
        seen.profile(name("alice"), 2);
        assert!(seen.names.is_empty() && !seen.stale());
        // After it, the profile's own name is not kept at all.
        seen.saw("alice");
        assert!(!seen.stale());
        seen.saw("old_alice");
        assert!(seen.stale());

        let mut early = Seen::default();
        early.saw("old_bob");
        early.saw("bob");
        early.profile(name("bob"), 3);
        assert_eq!(early.names, ["old_bob"]);
        assert!(early.stale());
    }
}
