//! A post's items: the post item (what lists show, its counts, and on a
//! hot post what the fan-out has added of its shards' counts), its content
//! item beside it, and the attribute names operations condition on.

use serde::{Deserialize, Serialize};

use super::{counter::Added, user::UserItem};
use crate::{
    ids::{PostId, UserId},
    keys::{self, Counter, Entity, Item, ItemType, Key},
    markdown,
    mentions::Mentions,
    model::{Post, PostSummary, Status},
    revision::Revision,
    store::error::StoreError,
    text::{Tag, Username},
    timestamp,
};

/// What an unpublished post is (the post item's `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Unpublished {
    Draft,
    /// Publishes itself at `publishAt` (`store::schedule`).
    Scheduled,
}

impl Unpublished {
    /// What the item holds for an answer's status (`None`: published).
    pub fn of(status: Status) -> Option<Self> {
        match status {
            Status::Draft => Some(Self::Draft),
            Status::Scheduled => Some(Self::Scheduled),
            Status::Published => None,
        }
    }

    pub fn status(this: Option<Self>) -> Status {
        match this {
            Some(Self::Draft) => Status::Draft,
            Some(Self::Scheduled) => Status::Scheduled,
            None => Status::Published,
        }
    }
}

/// The post item: what lists show (the short form, copied by GSI1 for Q3 and
/// by the fan-out into the feed), the counts (changed in the same transaction
/// as each comment and like), the author's username copied at `userVersion`,
/// and its own `version`. It stays a few hundred bytes whatever the post's
/// length, so a like or a comment rewrites only that (DynamoDB bills a write
/// by the larger of the old and new item, on the table and on GSI1).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostItem {
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: Username,
    pub user_version: u64,
    pub title: String,
    pub summary: String,
    #[serde(deserialize_with = "crate::model::count")]
    pub comment_count: u64,
    #[serde(deserialize_with = "crate::model::count")]
    pub like_count: u64,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    /// 0–5 tags (absent when none): the fan-out keeps the post's entry in
    /// each tag's list ([`feed`](crate::store::feed)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Tag>,
    /// `draft` while unpublished; absent once published (and on every post
    /// written before drafts existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Unpublished>,
    /// When a post published after it was created was published; absent
    /// while a draft, and for a post published as it was created (then it is
    /// `createdAt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
    /// A scheduled post's time to publish itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_at: Option<String>,
    /// Only on posts written before the content had an item of its own, until
    /// `blog-admin migrate` moves it there (`store::migrate`, admin only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// On a hot post only: how many shard partitions hold its new likes and
    /// counts ([`hot`](crate::store::hot)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u8>,
    /// On a post made hot before group counters were: what the fan-out has
    /// added of each of its ungrouped shards' counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_counts: Option<std::collections::BTreeMap<String, Added>>,
    /// On a hot post only: what the fan-out has added of each group
    /// counter's counts ([`ShardGroupItem`](super::counter::ShardGroupItem)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_counts: Option<std::collections::BTreeMap<String, Added>>,
    /// On a post turning hot only: since when (its switch closed it to new
    /// likes and comments: [`super::post::CLOSING_ATTRIBUTE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closing: Option<u64>,
    /// The users its content mentions, found when the content was written
    /// (created or edited): each folded name → the user's id, at most 10;
    /// absent when none ([`MENTIONS_ATTRIBUTE`]). Q2's `contentHtml` links
    /// them; the notifications read them from the stream's images. Not
    /// projected into GSI1 nor copied into the feed.
    #[serde(default, skip_serializing_if = "Mentions::is_empty")]
    pub mentions: Mentions,
    /// Every like of it has a mark in its liker's own partition
    /// ([`LIKERS_MOVED_ATTRIBUTE`]): from its creation on a post this
    /// version made (its quiet likes mark themselves), or once the fan-out
    /// moved the marks of the likes an older post had while quiet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub likers_moved: bool,
}

/// What the fan-out reads of a post's stream images to see how fast its
/// likes and comments come while it is quiet (`fanout::rate`): its counts,
/// and whether it is hot, turning hot or unpublished.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostCountsImage {
    #[serde(default, deserialize_with = "crate::model::count")]
    pub like_count: u64,
    #[serde(default, deserialize_with = "crate::model::count")]
    pub comment_count: u64,
    #[serde(default)]
    pub shards: Option<u8>,
    #[serde(default)]
    pub closing: Option<u64>,
    #[serde(default)]
    pub status: Option<Unpublished>,
}

impl PostCountsImage {
    /// Published, neither hot nor turning hot.
    pub fn quiet(&self) -> bool {
        self.shards.is_none() && self.closing.is_none() && self.status.is_none()
    }

    /// Likes and comments together.
    pub fn counted(&self) -> u64 {
        self.like_count.saturating_add(self.comment_count)
    }
}

impl PostItem {
    /// A new post by `author` (as of the profile's version), made at `at`.
    pub fn new(
        post_id: PostId,
        author: &UserItem,
        title: &str,
        content: &str,
        tags: &[Tag],
        status: Status,
        at: &str,
    ) -> Self {
        Self {
            post_id,
            user_id: author.user_id.clone(),
            username: author.username.clone(),
            user_version: author.version,
            title: title.to_owned(),
            summary: markdown::summary(content),
            comment_count: 0,
            like_count: 0,
            created_at: at.to_owned(),
            updated_at: at.to_owned(),
            version: 1,
            tags: tags.to_vec(),
            status: Unpublished::of(status),
            published_at: None,
            publish_at: None,
            content: None,
            shards: None,
            shard_counts: None,
            group_counts: None,
            closing: None,
            mentions: Mentions::default(),
            likers_moved: true,
        }
    }

    /// The shard partitions its deletion closes and walks: those a hot post
    /// or one turning hot has counters in ([`super::counter::counters_made`]).
    pub fn shards_made(&self) -> Option<u8> {
        self.shards
            .or(self.closing.map(|_| super::counter::HOT_SHARDS))
            .map(super::counter::counters_made)
    }

    pub fn key(post: &PostId) -> Item {
        keys::post_item(post).item()
    }

    /// Whether it is out: in lists, readable by all, taking likes.
    pub fn is_published(&self) -> bool {
        self.status.is_none()
    }

    /// When it was published; `None` while a draft.
    pub fn published_at(&self) -> Option<&str> {
        self.is_published()
            .then(|| self.published_at.as_deref().unwrap_or(&self.created_at))
    }

    /// Whether `user` may change it: its author may; to anyone else a draft
    /// or a scheduled post is no post at all (404, as for one that does not
    /// exist: its existence does not leak), a published one is not theirs
    /// (403).
    pub fn authored_by(&self, user: &UserId) -> Result<(), StoreError> {
        match (self.user_id == *user, self.is_published()) {
            (true, _) => Ok(()),
            (false, true) => Err(StoreError::NotAuthor),
            (false, false) => Err(StoreError::PostNotFound),
        }
    }

    /// Where lists hold it ([`PostId::listed_at`]); `None` while a draft.
    pub fn listed_id(&self) -> Option<PostId> {
        let at = self.published_at()?;
        let ms = timestamp::parse(at)
            .and_then(|t| u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok());
        Some(match (&self.published_at, ms) {
            (Some(_), Some(ms)) => self.post_id.listed_at(ms),
            _ => self.post_id,
        })
    }

    /// The value of `counter` on it.
    pub fn count_of(&self, counter: Counter) -> u64 {
        match counter {
            Counter::Comments => self.comment_count,
            Counter::Likes => self.like_count,
        }
    }

    /// What the fan-out has added onto it of ungrouped shard `shard`'s
    /// counts.
    pub fn added(&self, shard: u8) -> Option<Added> {
        self.shard_counts.as_ref()?.get(&shard.to_string()).copied()
    }

    /// What the fan-out has added onto it of group `group`'s counts.
    pub fn added_group(&self, group: u8) -> Option<Added> {
        self.group_counts.as_ref()?.get(&group.to_string()).copied()
    }

    /// How much of `counter` the fan-out has added onto it from its shards
    /// (through their groups, or on their own).
    pub fn added_from_shards(&self, counter: Counter) -> u64 {
        [&self.shard_counts, &self.group_counts]
            .into_iter()
            .flatten()
            .flat_map(|added| added.values())
            .map(|added| added.of(counter))
            .sum()
    }
}

/// What lists show of a post (Q3, Q6; a feed entry holds it too).
impl From<&PostItem> for PostSummary {
    fn from(post: &PostItem) -> Self {
        Self {
            post_id: post.post_id,
            user_id: post.user_id.clone(),
            username: post.username.clone(),
            title: post.title.clone(),
            summary: post.summary.clone(),
            comment_count: post.comment_count,
            like_count: post.like_count,
            created_at: post.created_at.clone(),
            // Filled in by the list that reads it, from its key.
            published_at: String::new(),
            // Filled in by a list whose entries keep it beside the short
            // form (the feed's, a tag's).
            updated_at: None,
        }
    }
}

impl Entity for PostItem {
    const TYPE: ItemType = ItemType::Post;
    /// The key holds a post id made for this post.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        keys::post_item(&self.post_id)
    }

    /// Under its author: a published post where it is listed (Q3), a draft
    /// under `POSTDRAFT#` (its author's drafts).
    fn gsi1(&self) -> Option<Key> {
        let pk = keys::user_items_pk(&self.user_id);
        Some(match self.listed_id() {
            Some(listed) => Key::new(pk, keys::user_post_sk(&listed)),
            None => Key::new(pk, keys::user_draft_sk(&self.post_id)),
        })
    }
}

/// A post's full text, beside the post item in its partition. Nothing copies
/// it and nothing but Q2 and edits reads or writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostContentItem {
    pub post_id: PostId,
    pub content: String,
    /// When the content last changed (an edit of it moves the post item's
    /// `updatedAt` too, since posts written before that, not always).
    pub updated_at: String,
}

impl PostContentItem {
    /// The content item beside post `post`.
    pub fn key_of(post: &PostId) -> Key {
        keys::post_content(post)
    }

    pub fn new(post: PostId, content: &str, at: &str) -> Self {
        Self {
            post_id: post,
            content: content.to_owned(),
            updated_at: at.to_owned(),
        }
    }
}

impl Entity for PostContentItem {
    const TYPE: ItemType = ItemType::PostContent;
    /// Beside a post made for this request; the migration's copy of an old
    /// post's content keeps the post's `updatedAt`.
    const OWN: &'static [&'static str] = &["updatedAt"];

    fn key(&self) -> Key {
        Self::key_of(&self.post_id)
    }
}

/// A post as stored: its item and its content, in either shape.
#[derive(Debug, Clone)]
pub struct StoredPost {
    pub item: PostItem,
    pub content: Option<PostContentItem>,
}

impl StoredPost {
    /// The text: the content item's, or the post item's in the old shape.
    pub fn text(&self) -> &str {
        match (&self.content, &self.item.content) {
            (Some(content), _) => &content.content,
            (None, Some(legacy)) => legacy,
            (None, None) => "",
        }
    }
}

impl StoredPost {
    /// When it was last edited: the later of its item's and its content's
    /// `updatedAt` (an edit of the content alone left the post item as it
    /// was before edits moved both).
    pub fn updated_at(&self) -> &str {
        match &self.content {
            Some(c) if c.updated_at > self.item.updated_at => &c.updated_at,
            _ => &self.item.updated_at,
        }
    }

    /// What an edit's `If-Match` compares ([`crate::revision`]).
    pub fn revision(&self) -> Revision {
        Revision::of_post(
            &self.item.title,
            self.updated_at(),
            self.item.published_at(),
        )
    }
}

impl From<StoredPost> for Post {
    fn from(stored: StoredPost) -> Self {
        let updated_at = stored.updated_at().to_owned();
        let content = stored.text().to_owned();
        let item = stored.item;
        let status = Unpublished::status(item.status);
        let published_at = item.published_at().map(str::to_owned);
        let publish_at = item.publish_at.clone();
        Post {
            post_id: item.post_id,
            user_id: item.user_id,
            username: item.username,
            status,
            published_at,
            publish_at,
            title: item.title,
            tags: item.tags,
            content_html: markdown::to_html_mentioning(&content, &item.mentions),
            content,
            comment_count: item.comment_count,
            like_count: item.like_count,
            created_at: item.created_at,
            updated_at,
        }
    }
}

/// The post item's and the comment item's attribute that holds the users
/// the text mentions ([`Mentions`]): what the notifications read.
pub const MENTIONS_ATTRIBUTE: &str = "mentions";

/// The post item's attribute for [`Unpublished`] (a reserved word in
/// DynamoDB's expressions: always through a name placeholder).
pub const STATUS: &str = "status";

/// The attribute that holds the [`Added`] of each shard, by shard number:
/// on a group counter, and on a post made hot before groups were.
pub const ADDED_ATTRIBUTE: &str = "shardCounts";
/// The post item's attribute that holds the [`Added`] of each of its group
/// counters, by group number.
pub const GROUPS_ADDED_ATTRIBUTE: &str = "groupCounts";
/// The post item's attribute that says it is hot, and how many shards it has.
pub const SHARDS_ATTRIBUTE: &str = "shards";
/// The post item's attribute that says its new comments go to its shards,
/// listed through its comments pointer ([`CommentShardsItem`](super::counter::CommentShardsItem)).
pub const COMMENTS_SHARDED_ATTRIBUTE: &str = "commentsSharded";
/// The post item's attribute that says it is turning hot, since when
/// (milliseconds since the Unix epoch): closed to new likes and comments
/// while its switch moves its quiet likers ([`Requests::make_hot`](crate::store::Requests::make_hot)).
pub const CLOSING_ATTRIBUTE: &str = "closing";
/// The post item's attribute that says every like of the post has a mark in
/// its liker's partition: set when the post is created (every quiet like
/// this version gives is marked there too), or, on a post created before,
/// once the fan-out has given every like the post had before it was hot a
/// mark ([`FanOut::move_likers`](crate::store::FanOut::move_likers)). On a
/// hot post, from then on a like reads nothing of the post's partition.
pub const LIKERS_MOVED_ATTRIBUTE: &str = "likersMoved";

/// Milliseconds since the Unix epoch: when a switch closed its post.
pub fn epoch_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// Whether a post closed to turn hot at `since` has been closed so long
/// that its switch's request must have stopped ([`CLOSING_STALE`]).
pub(crate) fn closing_is_stale(since: u64) -> bool {
    epoch_millis().saturating_sub(since) >= u64::try_from(CLOSING_STALE.as_millis()).unwrap_or(0)
}

/// How long a post stays closed to turn hot before a request takes the
/// switch over (`Requests::finish_closing`): the switch's own request keeps
/// it closed for at most 1.5 s (`MOVE_AT_SWITCH`) and a few writes.
pub const CLOSING_STALE: std::time::Duration = std::time::Duration::from_secs(3);
