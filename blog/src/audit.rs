//! The audit: an offline check of every denormalised value against its
//! source, and the repair of what disagrees.
//!
//! It reads the whole table with a Scan, so it is a tool for operators, never a
//! request path. It is how a deployment recovers when the fan-out could not
//! keep up: after a bug, or once a stream's 24-hour retention has passed with
//! records unprocessed. Every repair is a conditional write that re-checks the
//! value it read, so a repair never overwrites a change made meanwhile, and
//! running it again finds nothing to do.

use std::{
    collections::{BTreeMap, HashMap},
    fmt,
};

use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use serde::Deserialize;

use crate::{
    ids::{PostId, UserId},
    keys::{self, POST_SK},
    store::{
        Item, ItemType, Store, StoreError, classify,
        feed::FeedEntryItem,
        from_item, key,
        posts::PostItem,
        users::{Overwrite, UsernameCopy},
    },
};

/// One value that disagrees with its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A post's `commentCount` or `likeCount` is not the number of its comment
    /// or like items.
    Count {
        post: PostId,
        counter: &'static str,
        stored: u64,
        actual: u64,
        /// The post's `version` when read: the repair lands only if it is
        /// still that, so it never undoes a newer like, comment or rename.
        version: u64,
    },
    /// A post, comment or like shows another username than its author's profile.
    Username {
        pk: String,
        sk: String,
        user: UserId,
        stored: String,
        current: String,
        user_version: u64,
    },
    /// A feed entry's copy differs from its post's short form.
    StaleFeedEntry { post: PostId },
    /// One of the newest posts is missing from the feed.
    MissingFeedEntry { post: PostId },
    /// The feed holds a post that is not among the newest and its slack (or
    /// does not exist).
    ExtraFeedEntry { post: PostId },
    /// The feed's floor is above the newest post outside the newest: it could
    /// keep one of them out.
    Floor {
        stored: Option<PostId>,
        expected: PostId,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Count {
                post,
                counter,
                stored,
                actual,
                ..
            } => write!(f, "post {post}: {counter} is {stored}, but it has {actual}"),
            Self::Username {
                pk,
                sk,
                stored,
                current,
                ..
            } => write!(
                f,
                "{pk}/{sk}: username {stored:?}, but its author is now {current:?}"
            ),
            Self::StaleFeedEntry { post } => {
                write!(f, "feed entry of post {post} differs from the post")
            }
            Self::MissingFeedEntry { post } => {
                write!(f, "post {post} is among the newest but not in the feed")
            }
            Self::ExtraFeedEntry { post } => {
                write!(f, "post {post} is in the feed but not among the newest")
            }
            Self::Floor { stored, expected } => {
                write!(f, "feed floor is {stored:?}, expected {expected}")
            }
        }
    }
}

/// What the audit found and, with repair, what it fixed.
#[derive(Debug, Default)]
pub struct Report {
    pub items_read: usize,
    pub findings: Vec<Finding>,
    /// Findings repaired; the rest changed while repairing (run again).
    pub repaired: usize,
}

/// The fields of any item the audit reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "type")]
    kind: Option<ItemType>,
    post_id: Option<PostId>,
    user_id: Option<UserId>,
    username: Option<String>,
    version: Option<u64>,
    floor_post_id: Option<PostId>,
}

/// Everything the table holds that the checks compare.
#[derive(Default)]
struct Snapshot {
    items_read: usize,
    /// userId → (username, version)
    profiles: HashMap<UserId, (String, u64)>,
    posts: BTreeMap<PostId, PostItem>,
    comments: HashMap<PostId, u64>,
    likes: HashMap<PostId, u64>,
    /// Comments and likes, for their usernames: (pk, sk, userId, username).
    authored: Vec<(String, String, UserId, String)>,
    feed: BTreeMap<PostId, FeedEntryItem>,
    floor: Option<PostId>,
}

impl Store {
    /// Checks every denormalised value; with `repair`, rewrites what is wrong.
    pub async fn audit(&self, repair: bool) -> Result<Report, StoreError> {
        let snapshot = self.snapshot().await?;
        let findings = snapshot.findings(self.feed_capacity());
        let mut repaired = 0;
        if repair {
            for finding in &findings {
                if self.repair(finding, &snapshot).await? {
                    repaired += 1;
                }
            }
        }
        Ok(Report {
            items_read: snapshot.items_read,
            findings,
            repaired,
        })
    }

    async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let mut snapshot = Snapshot::default();
        let mut start = None;
        loop {
            let scan = self
                .client()
                .scan()
                .table_name(self.table())
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
            let page = self
                .backoff()
                .send("audit scan", || scan.clone().send())
                .await
                .map_err(classify)?;
            for item in page.items.unwrap_or_default() {
                snapshot.add(item)?;
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(snapshot);
            }
        }
    }

    /// Applies one repair; `false` when the value changed since it was read.
    async fn repair(&self, finding: &Finding, snapshot: &Snapshot) -> Result<bool, StoreError> {
        match finding {
            Finding::Count {
                post,
                counter,
                actual,
                version,
                ..
            } => self.set_post_count(post, counter, *actual, *version).await,
            Finding::Username {
                pk,
                sk,
                stored,
                current,
                user_version,
                ..
            } => {
                let profile = UsernameCopy {
                    username: current,
                    version: *user_version,
                };
                // Only over the value read, and never over a newer rename's
                // copy (a higher `userVersion`), even one back to this name.
                let over = Overwrite::Repair { stored };
                self.write_username(key(pk.clone(), sk.clone()), profile, over)
                    .await
            }
            Finding::StaleFeedEntry { post } | Finding::MissingFeedEntry { post } => {
                match snapshot.expected_entry(post) {
                    Some(expected) => self.repair_feed_entry(&expected).await,
                    None => Ok(false),
                }
            }
            Finding::ExtraFeedEntry { post } => self.remove_feed_entry(post).await.map(|()| true),
            Finding::Floor { expected, .. } => self.set_feed_floor(expected).await,
        }
    }
}

impl Snapshot {
    fn add(&mut self, item: Item) -> Result<(), StoreError> {
        self.items_read += 1;
        let row: Row = from_item(item.clone())?;
        match (row.kind, row.post_id, row.user_id) {
            (Some(ItemType::User), _, Some(user)) => {
                let username = row.username.unwrap_or_default();
                self.profiles
                    .insert(user, (username, row.version.unwrap_or_default()));
            }
            (Some(ItemType::Post), Some(post), _) => {
                self.posts.insert(post, from_item(item)?);
            }
            (Some(kind @ (ItemType::Comment | ItemType::Like)), Some(post), Some(user)) => {
                let counts = if kind == ItemType::Comment {
                    &mut self.comments
                } else {
                    &mut self.likes
                };
                *counts.entry(post).or_default() += 1;
                self.authored
                    .push((row.pk, row.sk, user, row.username.unwrap_or_default()));
            }
            (Some(ItemType::FeedEntry), Some(post), _) => {
                self.feed.insert(post, from_item(item)?);
            }
            (Some(ItemType::FeedFloor), _, _) => self.floor = row.floor_post_id,
            _ => {}
        }
        Ok(())
    }

    /// The post with every value it copies set from its source.
    fn expected_post(&self, post: &PostItem) -> PostItem {
        let mut expected = post.clone();
        expected.comment_count = self
            .comments
            .get(&post.post_id)
            .copied()
            .unwrap_or_default();
        expected.like_count = self.likes.get(&post.post_id).copied().unwrap_or_default();
        if let Some((username, _)) = self.profiles.get(&post.user_id) {
            expected.username.clone_from(username);
        }
        expected
    }

    fn expected_entry(&self, post: &PostId) -> Option<FeedEntryItem> {
        self.posts
            .get(post)
            .map(|p| FeedEntryItem::from(&self.expected_post(p)))
    }

    fn findings(&self, capacity: usize) -> Vec<Finding> {
        let mut findings = Vec::new();
        for post in self.posts.values() {
            let expected = self.expected_post(post);
            for (counter, stored, actual) in [
                ("commentCount", post.comment_count, expected.comment_count),
                ("likeCount", post.like_count, expected.like_count),
            ] {
                if stored != actual {
                    findings.push(Finding::Count {
                        post: post.post_id,
                        counter,
                        stored,
                        actual,
                        version: post.version,
                    });
                }
            }
        }
        let authored = self
            .posts
            .values()
            .map(|p| {
                (
                    keys::post_pk(&p.post_id),
                    POST_SK.to_owned(),
                    p.user_id.clone(),
                    p.username.clone(),
                )
            })
            .chain(self.authored.iter().cloned());
        for (pk, sk, user, stored) in authored {
            if let Some((current, version)) = self.profiles.get(&user)
                && *current != stored
            {
                findings.push(Finding::Username {
                    pk,
                    sk,
                    user,
                    stored,
                    current: current.clone(),
                    user_version: *version,
                });
            }
        }
        // The feed: exactly the newest posts, each as its post shows now.
        let newest: Vec<PostId> = self.posts.keys().rev().take(capacity).copied().collect();
        for post in &newest {
            match self.feed.get(post) {
                None => findings.push(Finding::MissingFeedEntry { post: *post }),
                Some(entry) => {
                    // Versions may differ (a repair bumps the post's); what
                    // the feed shows may not.
                    let shown = |e: &FeedEntryItem| FeedEntryItem {
                        version: 0,
                        user_version: 0,
                        ..e.clone()
                    };
                    if self
                        .expected_entry(post)
                        .is_none_or(|expected| shown(&expected) != shown(entry))
                    {
                        findings.push(Finding::StaleFeedEntry { post: *post });
                    }
                }
            }
        }
        // Below the newest, the feed may keep up to its slack of older posts
        // until the next trim; nothing else.
        let kept: Vec<PostId> = self
            .posts
            .keys()
            .rev()
            .take(capacity + crate::store::feed::feed_slack(capacity))
            .copied()
            .collect();
        for post in self.feed.keys() {
            if !kept.contains(post) {
                findings.push(Finding::ExtraFeedEntry { post: *post });
            }
        }
        // The floor may lag (it rises only when a trim runs), but never reach
        // one of the newest posts, which it would keep out.
        if let Some(expected) = self.posts.keys().rev().nth(capacity).copied()
            && self.floor.is_some_and(|floor| floor > expected)
        {
            findings.push(Finding::Floor {
                stored: self.floor,
                expected,
            });
        }
        findings
    }
}
