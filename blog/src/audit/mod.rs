//! The audit: an offline check of every denormalised value against its
//! source, and the repair of what disagrees.
//!
//! Three scopes, one set of checks:
//! - the whole table ([`crate::store::Admin::audit_with`], `scan`): a parallel Scan, strongly
//!   consistent, whose memory grows with the number of users, never with the
//!   number of posts, comments or likes;
//! - one user ([`crate::store::Admin::audit_user`], `one`): their profile and everything
//!   GSI1 lists under them;
//! - one post ([`crate::store::Admin::audit_post`], `one`): its partition, its authors'
//!   profiles and its feed entry.
//!
//! The full audit reads the whole table, so it is a tool for operators, never
//! a request path. It is how a deployment recovers when the fan-out could not
//! keep up: after a bug, or once a stream's 24-hour retention has passed with
//! records unprocessed. Every repair is a conditional write that re-checks the
//! value it read, so a repair never overwrites a change made meanwhile, and
//! running it again finds nothing to do.

mod hot;
mod one;
mod scan;

use std::{
    fmt,
    sync::{Arc, Mutex, PoisonError},
};

use crate::store::Admin;
use crate::{
    ids::{PostId, UserId},
    keys::{Counter, Key},
    store::{
        Item, ItemType, Store, StoreError,
        deadline::Deadline,
        deletion::Removal,
        erasure::ErasureStep,
        items::feed::FeedEntryItem,
        items::post::PostItem,
        table::Expr,
        users::{Overwrite, UsernameCopy},
    },
    text::{Tag, Username},
};

/// Scan segments of the full audit unless told otherwise: enough to keep a
/// few pages in flight, few enough to leave capacity for requests.
pub const DEFAULT_SEGMENTS: u32 = 4;
/// Findings a report keeps by default; the rest are counted (and passed to
/// [`AuditOptions::on_finding`]).
pub const DEFAULT_KEEP: usize = 1_000;

/// One value that disagrees with its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A deleted post's comments, likes, markers or content are still in its
    /// partition (its fan-out has not run, or failed).
    Orphans { post: PostId, items: u64 },
    /// A post's `commentCount` or `likeCount` is not the number of its comment
    /// or like items.
    Count {
        post: PostId,
        counter: Counter,
        stored: u64,
        actual: u64,
        /// The post's `version` when read: the repair lands only if it is
        /// still that, so it never undoes a newer like, comment or rename.
        version: u64,
    },
    /// A hot post's shard counter is not what its shard holds: (likes,
    /// comments) stored and actual.
    ShardCount {
        post: PostId,
        shard: u8,
        stored: (u64, u64),
        actual: (u64, u64),
        /// The counter's `version` when read: the repair's condition.
        version: u64,
    },
    /// A hot post's group counter (or, made hot before groups were, the
    /// post) holds a shard's counts at an older version than the shard
    /// counter's: the fan-out has not added what it counted since.
    ShardNotAdded { post: PostId, shard: u8 },
    /// A hot post holds a group counter's counts at an older version than
    /// the group's: the fan-out has not added what its shards counted since.
    GroupNotAdded { post: PostId, group: u8 },
    /// A post, comment or like shows another username than its author's profile.
    Username {
        pk: String,
        sk: String,
        user: UserId,
        stored: String,
        current: Username,
        user_version: u64,
    },
    /// A feed entry's copy differs from its post's short form. (`post` in
    /// the feed's findings is where the feed holds it: the post's id, or a
    /// later one for a draft published after it was made.)
    StaleFeedEntry { post: PostId },
    /// One of the newest posts is missing from the feed.
    MissingFeedEntry { post: PostId },
    /// The feed holds a post that is not among the newest and its slack (or
    /// does not exist).
    ExtraFeedEntry { post: PostId },
    /// An erased user's posts, comments or likes are still there, or their
    /// erasure's walk never finished (its fan-out has not run, or failed).
    Unerased { user: UserId, items: u64 },
    /// The feed's floor is above the newest post outside the newest: it could
    /// keep one of them out.
    Floor {
        stored: Option<PostId>,
        expected: PostId,
    },
    /// A post's entry in one of its tags' lists (held under `listed`) is
    /// missing, or differs from the post's short form.
    StaleTagEntry {
        tag: Tag,
        post: PostId,
        listed: PostId,
    },
    /// A scheduled post has no marker for its time: nothing would publish
    /// it.
    Unscheduled { post: PostId, publish_at: String },
    /// A tag's list holds (under `listed`) a post that is gone, a draft, or
    /// no longer has the tag or that place.
    ExtraTagEntry {
        tag: Tag,
        post: PostId,
        listed: PostId,
    },
    /// A follower shard's count is not the number of its follower entries
    /// (`stored` 0 also when the count item is missing).
    FollowerCount {
        user: UserId,
        shard: u8,
        stored: u64,
        actual: u64,
    },
}

impl Finding {
    /// The findings of `post`'s counts against the `comments` and `likes`
    /// its partition holds.
    fn counts(post: &PostItem, comments: u64, likes: u64) -> Vec<Finding> {
        [(Counter::Comments, comments), (Counter::Likes, likes)]
            .into_iter()
            .filter(|(counter, actual)| post.count_of(*counter) != *actual)
            .map(|(counter, actual)| Finding::Count {
                post: post.post_id,
                counter,
                stored: post.count_of(counter),
                actual,
                version: post.version,
            })
            .collect()
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Orphans { post, items } => {
                write!(
                    f,
                    "post {post} is deleted, but {items} of its items are left"
                )
            }
            Self::Count {
                post,
                counter,
                stored,
                actual,
                ..
            } => {
                let counter = counter.attribute();
                write!(f, "post {post}: {counter} is {stored}, but it has {actual}")
            }
            Self::ShardCount {
                post,
                shard,
                stored,
                actual,
                ..
            } => write!(
                f,
                "post {post}: shard {shard} counts (likes, comments) {stored:?}, but holds {actual:?}"
            ),
            Self::ShardNotAdded { post, shard } => write!(
                f,
                "post {post}: shard {shard} counted more than its group holds of it"
            ),
            Self::GroupNotAdded { post, group } => write!(
                f,
                "post {post}: shard group {group} counted more than the post holds of it"
            ),
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
            Self::Unerased { user, items } => {
                write!(
                    f,
                    "user {user} was erased, but {items} of their items are left"
                )
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
            Self::Unscheduled { post, publish_at } => {
                write!(
                    f,
                    "post {post} is scheduled for {publish_at} with no marker to publish it"
                )
            }
            Self::StaleTagEntry { tag, post, .. } => {
                write!(
                    f,
                    "post {post}: its entry under tag {tag} is missing or differs"
                )
            }
            Self::ExtraTagEntry { tag, post, .. } => {
                write!(f, "tag {tag} lists post {post}, which is gone or untagged")
            }
            Self::FollowerCount {
                user,
                shard,
                stored,
                actual,
            } => write!(
                f,
                "user {user}: follower shard {shard} counts {stored}, but holds {actual}"
            ),
        }
    }
}

/// What to do with each finding as it is made (print it, say), besides
/// counting it: called from the audit's tasks, in the order they find.
pub type OnFinding = Arc<dyn Fn(&Finding) + Send + Sync>;

/// How an audit runs.
#[derive(Clone)]
pub struct AuditOptions {
    /// Rewrite what is wrong, each write conditional on what was read.
    pub repair: bool,
    /// The full audit's Scan segments (`TotalSegments`), read in parallel; at
    /// least one.
    pub segments: u32,
    /// Items per Scan or Query page (`Limit`); `None` for DynamoDB's 1 MB
    /// pages. Tests make pages small to cross page boundaries.
    pub page_size: Option<i32>,
    /// How many findings the report keeps; all are counted.
    pub keep: usize,
    pub on_finding: Option<OnFinding>,
}

impl Default for AuditOptions {
    fn default() -> Self {
        Self {
            repair: false,
            segments: DEFAULT_SEGMENTS,
            page_size: None,
            keep: DEFAULT_KEEP,
            on_finding: None,
        }
    }
}

impl fmt::Debug for AuditOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditOptions")
            .field("repair", &self.repair)
            .field("segments", &self.segments)
            .field("page_size", &self.page_size)
            .field("keep", &self.keep)
            .field("on_finding", &self.on_finding.is_some())
            .finish()
    }
}

impl AuditOptions {
    /// The defaults, repairing or not.
    pub fn repairing(repair: bool) -> Self {
        Self {
            repair,
            ..Self::default()
        }
    }
}

/// What the audit found and, with repair, what it fixed.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub items_read: usize,
    /// The first [`AuditOptions::keep`] findings, in the order made.
    pub findings: Vec<Finding>,
    /// Every finding, kept or not.
    pub found: usize,
    /// Findings repaired; the rest changed while repairing (run again).
    pub repaired: usize,
    /// Read capacity units DynamoDB reported for the audit's reads.
    pub read_units: f64,
    /// Scan or Query calls made.
    pub pages: usize,
    /// The full audit's per-user digest: one entry per user seen.
    pub users_held: usize,
    /// The most post items one Scan segment held at once (the open item
    /// collection's post and the newest posts kept for the feed's checks):
    /// bounded by the feed's capacity, whatever the table holds.
    pub max_held: usize,
}

impl Report {
    /// Findings neither repaired nor repairable in this run.
    pub fn left(&self) -> usize {
        self.found.saturating_sub(self.repaired)
    }
}

/// Where the findings of concurrent tasks go: counted, the first `keep`
/// kept, each passed to the caller's callback; repaired at once when asked.
struct Sink {
    options: AuditOptions,
    state: Mutex<Tally>,
}

#[derive(Default)]
struct Tally {
    findings: Vec<Finding>,
    found: usize,
    repaired: usize,
}

impl Sink {
    fn new(options: &AuditOptions) -> Arc<Self> {
        Arc::new(Self {
            options: options.clone(),
            state: Mutex::new(Tally::default()),
        })
    }

    /// Records `finding` and, with repair, applies it (`expected` is the feed
    /// entry a feed finding's repair writes).
    async fn found(
        &self,
        store: &Store,
        finding: Finding,
        expected: Option<&FeedEntryItem>,
    ) -> Result<(), StoreError> {
        tracing::debug!(%finding, "audit finding");
        if let Some(on_finding) = &self.options.on_finding {
            on_finding(&finding);
        }
        let repaired = self.options.repair && store.admin().repair(&finding, expected).await?;
        let mut tally = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        tally.found += 1;
        tally.repaired += usize::from(repaired);
        if tally.findings.len() < self.options.keep {
            tally.findings.push(finding);
        }
        Ok(())
    }

    /// The findings so far, into `report`.
    fn fill_report(&self, report: &mut Report) {
        let mut tally = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        report.findings = std::mem::take(&mut tally.findings);
        report.found = tally.found;
        report.repaired = tally.repaired;
    }
}

impl Admin<'_> {
    /// Checks every denormalised value with the default options; with
    /// `repair`, rewrites what is wrong.
    pub async fn audit(&self, repair: bool) -> Result<Report, StoreError> {
        self.audit_with(&AuditOptions::repairing(repair)).await
    }

    /// Applies one repair; `false` when the value changed since it was read
    /// (or, for a feed entry, when its post is gone).
    async fn repair(
        &self,
        finding: &Finding,
        expected: Option<&FeedEntryItem>,
    ) -> Result<bool, StoreError> {
        match finding {
            Finding::Count { post, counter, .. } => self.recount(post, *counter).await,
            Finding::ShardCount { post, shard, .. } => self.recount_shard(post, *shard).await,
            Finding::ShardNotAdded { post, shard } => self.add_shard(post, *shard).await,
            Finding::GroupNotAdded { post, group } => self.add_group(post, *group).await,
            // What the fan-out's walk does; safe beside it (deleting what is
            // gone is a no-op, and nothing can be added to a deleted post).
            Finding::Orphans { post, .. } => {
                match self
                    .fanout()
                    .remove_post_items(post, hot::ANY_SHARDS, &Deadline::NONE)
                    .await?
                {
                    Removal::Done { .. } => Ok(true),
                    Removal::Paused { .. } => Ok(false),
                }
            }
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
                let at = Key::new(pk.clone(), sk.clone()).item();
                self.write_username(at, profile, over).await
            }
            Finding::StaleFeedEntry { .. } | Finding::MissingFeedEntry { .. } => match expected {
                Some(expected) => self.repair_feed_entry(expected).await,
                None => Ok(false),
            },
            Finding::ExtraFeedEntry { post } => self.remove_feed_entry(post).await.map(|()| true),
            // What the fan-out's walk does, to its end.
            Finding::Unerased { user, .. } => Ok(matches!(
                self.finish_erasure(user).await?,
                ErasureStep::Done(_)
            )),
            Finding::Floor { expected, .. } => self.set_feed_floor(expected).await,
            Finding::Unscheduled { post, publish_at } => self.reschedule(post, publish_at).await,
            Finding::StaleTagEntry { tag, post, listed }
            | Finding::ExtraTagEntry { tag, post, listed } => {
                self.repair_tag_entry(tag, post, listed).await
            }
            Finding::FollowerCount { user, shard, .. } => {
                self.fanout().recount_followers(user, *shard).await
            }
        }
    }
}

impl Admin<'_> {
    /// The repair of a count: counts again, with the post read first, then
    /// sets the count only if the post's `version` is still the one read.
    ///
    /// The order matters. A Scan or Query of the partition reads comments and
    /// likes before the post (`COMMENT#` < `LIKE#` < `POST`), so a like that
    /// commits in between is on the post but not in the count, and a repair
    /// conditional on the post's version as read would write one too few.
    /// Read first, the post's version moves with any like or comment that
    /// commits while counting, and the conditional write then refuses.
    async fn recount(&self, post: &PostId, counter: Counter) -> Result<bool, StoreError> {
        let read = self.db().get_entity::<PostItem>(PostItem::key(post), true);
        let Some(read) = read.await? else {
            return Ok(false);
        };
        let actual = self.count_of(&read, counter).await?;
        if actual == read.count_of(counter) {
            return Ok(true);
        }
        self.set_post_count(post, counter, actual, read.version)
            .await
    }
}

/// What the feed shows of an entry: versions may differ (a repair bumps the
/// post's), what readers see may not.
fn shown(entry: &FeedEntryItem) -> FeedEntryItem {
    FeedEntryItem {
        version: 0,
        user_version: 0,
        ..entry.clone()
    }
}

/// The attributes the audit reads: everything but a post's content, which
/// nothing copies (it is never sent over the wire to the audit).
const READ: [&str; 32] = [
    "PK",
    "SK",
    "GSI1PK",
    "GSI1SK",
    "type",
    "postId",
    "userId",
    "username",
    "userVersion",
    "title",
    "summary",
    Counter::Comments.attribute(),
    Counter::Likes.attribute(),
    "createdAt",
    "updatedAt",
    "version",
    "floorPostId",
    // An erasure mark's: whether its walk is done.
    "done",
    // A hot post's shards, and the shard that counts a comment.
    "shards",
    "countedIn",
    // What the fan-out has added of each group's counts (and, on a post
    // made hot before groups, of each shard's).
    crate::store::items::post::GROUPS_ADDED_ATTRIBUTE,
    crate::store::items::post::ADDED_ATTRIBUTE,
    // A post's tags; a tag entry's tag.
    "tags",
    "tag",
    // Whether a post is out, and since when (where lists hold it); a feed
    // entry's or tag entry's place.
    crate::store::items::post::STATUS,
    "publishedAt",
    "listedId",
    "publishAt",
    // A follower entry's follower and follow; a follower shard's count.
    "followerId",
    "followId",
    "count",
    "shard",
];

/// [`READ`] as a projection expression (every name through a placeholder,
/// so that reserved words need no care).
fn projection() -> Expr {
    let expression = (0..READ.len())
        .map(|i| format!("#a{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    READ.iter()
        .enumerate()
        .fold(Expr::new(expression), |expr, (i, name)| {
            expr.name(&format!("#a{i}"), name)
        })
}

/// A string attribute of `item`.
fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

/// The shard a comment was counted in, if it is a hot post's.
fn counted_in(item: &Item) -> Option<u8> {
    number(item, "countedIn").and_then(|n| u8::try_from(n).ok())
}

/// A number attribute of `item`.
fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
}

/// The `type` of `item`; [`ItemType::Other`] for one this version does not know.
fn kind(item: &Item) -> Option<ItemType> {
    ItemType::of(item)
}
