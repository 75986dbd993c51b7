//! The JSON shapes of the HTTP contract (camelCase, RFC 3339 UTC timestamps).

use serde::{Deserialize, Serialize};

use crate::{
    ids::{CommentId, PostId, UserId},
    text::{Tag, Username},
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub user_id: UserId,
    pub username: Username,
    pub created_at: String,
    pub updated_at: String,
    /// How many follow them: exact once the fan-out has added the last
    /// follows' shard counts (within seconds).
    #[serde(default)]
    pub follower_count: u64,
    /// How many they follow: exact (it changes with each follow).
    #[serde(default)]
    pub following_count: u64,
}

/// A user in a list of follows: a follower, or someone followed, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Followed {
    pub user_id: UserId,
    pub username: Username,
    pub followed_at: String,
}

/// A user in the caller's list of blocks: whom (named as they are now),
/// and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocked {
    pub user_id: UserId,
    pub username: Username,
    pub blocked_at: String,
}

/// Whether a post is out: a draft is its author's alone (every other read
/// of it answers 404, it is in no list and takes no likes or comments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    Draft,
    /// A draft that publishes itself at its `publishAt`.
    Scheduled,
    Published,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Post {
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: Username,
    pub title: String,
    /// Markdown, as written.
    pub content: String,
    /// `content` rendered and sanitised ([`crate::markdown`]).
    pub content_html: String,
    /// 0–5 tags, lower-case.
    pub tags: Vec<Tag>,
    pub status: Status,
    /// When it was published (its place in lists); `null` while a draft.
    pub published_at: Option<String>,
    /// When a scheduled post publishes itself; `null` otherwise.
    pub publish_at: Option<String>,
    pub comment_count: u64,
    pub like_count: u64,
    pub created_at: String,
    pub updated_at: String,
}

/// The short form of a post, as lists show it (Q3, Q6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostSummary {
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: Username,
    pub title: String,
    pub summary: String,
    #[serde(deserialize_with = "count")]
    pub comment_count: u64,
    #[serde(deserialize_with = "count")]
    pub like_count: u64,
    pub created_at: String,
    /// When it was published: the time of the place lists hold it at
    /// ([`PostId::listed_at`]), which each list's key says. Never stored
    /// with a copy; a list fills it in as it reads ([`PostSummary::listed_at`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub published_at: String,
    /// When the post was last edited (its `updatedAt`), where the list read
    /// knows it: the feed's and the tags' entries hold it beside the short
    /// form ([`PostSummary::edited_at`]); Q3's index does not project it.
    /// The Atom feeds' entry `updated`; never in a JSON answer.
    #[serde(skip)]
    pub updated_at: Option<String>,
}

impl PostSummary {
    /// The short form as a list holding it under `listed` shows it: its
    /// `publishedAt` is the listed id's time (`createdAt` for a post listed
    /// under its own id: published as it was created).
    pub fn listed_at(mut self, listed: PostId) -> Self {
        self.published_at = listed.created_at();
        self
    }

    /// The short form with the post's last edit time, as a list's entry
    /// holds it (`None` in entries written before they held it).
    pub fn edited_at(mut self, updated_at: Option<String>) -> Self {
        self.updated_at = updated_at;
        self
    }
}

/// A stored count, read as at least 0: a count is never below 0 while the
/// items it counts exist, and if one ever were (a repair racing the
/// fan-out), a read answers 0 rather than failing.
pub(crate) fn count<'de, D: serde::Deserializer<'de>>(stored: D) -> Result<u64, D::Error> {
    let value = i64::deserialize(stored)?;
    Ok(u64::try_from(value).unwrap_or(0))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    pub comment_id: CommentId,
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: Username,
    pub content: String,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Like {
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: Username,
    pub created_at: String,
}

/// One page of a list. `next_cursor` is `null` on the last page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// The feed has no cursor: it is the newest posts, at most 100.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feed {
    pub items: Vec<PostSummary>,
}

/// One thing a user wrote, in their export: `{"post": {...}}`,
/// `{"comment": {...}}`, `{"like": {...}}`, `{"follow": {...}}` or
/// `{"block": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Exported {
    Post(Post),
    Comment(Comment),
    Like(Like),
    Follow(Follow),
    Block(Block),
}

/// A block, in its blocker's export: whom, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Block {
    pub user_id: UserId,
    pub blocked_at: String,
}

/// A follow, in its follower's export: whom, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Follow {
    pub user_id: UserId,
    pub followed_at: String,
}

/// One page of a user's export: their profile on every page, then what
/// they wrote (blocks, then comments, then follows, then likes, then posts,
/// each oldest first).
/// `next_cursor` is `null` on the last page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportPage {
    pub profile: User,
    pub items: Vec<Exported>,
    pub next_cursor: Option<String>,
}
