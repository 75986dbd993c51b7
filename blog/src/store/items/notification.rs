//! A user's notifications, in their own partition (`NOTIFY#<userId>`): the
//! groups (a post's likes, a hot post's comments, new followers), the
//! notes (a comment on a quiet post, a mention), and when they last read
//! them. GSI1 (`NOTIFY#<userId>`, `<lastAt>#<SK>`) lists them newest first;
//! a group gets its index keys with its first actor, so a group made by the
//! recipient's own like alone stays out of the list.

use serde::{Deserialize, Serialize};

use super::{comment::CommentItem, post::PostItem};
use crate::{
    ids::{CommentId, PostId, UserId},
    keys::{self, Entity, ItemType, Key},
    timestamp,
};

/// What a notification tells of: the kinds `GET /notifications` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NotificationKind {
    /// Likes of a post of theirs (a group).
    Like,
    /// Comments on a post of theirs: one note each, or a group on a hot post.
    Comment,
    /// A mention of them in a post or a comment (a note).
    Mention,
    /// New followers (a group).
    Follow,
}

impl NotificationKind {
    /// Its name in keys and answers.
    pub const fn name(self) -> &'static str {
        match self {
            NotificationKind::Like => "like",
            NotificationKind::Comment => "comment",
            NotificationKind::Mention => "mention",
            NotificationKind::Follow => "follow",
        }
    }
}

/// How many actors the list shows of a group, newest first, by name.
pub const GROUP_ACTORS: usize = 3;

/// How many a group keeps, newest first: those shown and a reserve that
/// takes the place of those who take back what they did.
pub const KEPT_ACTORS: usize = 8;

/// How long a notification is kept after its last activity (TTL).
pub const KEEP_DAYS: i64 = 30;

/// How many characters of a comment (or of a post's title) a note previews.
const PREVIEW_CHARS: usize = 140;

/// Seconds since the Unix epoch, [`KEEP_DAYS`] after `at` (now if `at` does
/// not parse): when a notification of `at` expires (TTL).
pub fn expires_after(at: &str) -> i64 {
    let from = timestamp::parse(at).unwrap_or_else(time::OffsetDateTime::now_utc);
    from.unix_timestamp() + KEEP_DAYS * 86_400
}

/// One of a group's newest actors, and when they acted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    #[serde(rename = "u")]
    pub user_id: UserId,
    #[serde(rename = "t")]
    pub at: String,
}

/// A group of notifications of one kind about one target: the likes of a
/// post, the comments of a hot post, the new followers. It holds no count:
/// the list reads the target's own exact count (the post's `likeCount`, the
/// comments its shards counted, the profile's `followerCount`) and takes
/// the recipient's own part out ([`Self::own`]); its actors are the newest
/// few others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationGroupItem {
    /// The recipient.
    pub user_id: UserId,
    pub kind: NotificationKind,
    /// The post a like or comment group is about; `None` for followers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_id: Option<PostId>,
    /// Newest first, at most [`KEPT_ACTORS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actors: Vec<Actor>,
    /// When the first other actor acted, and the newest: absent while only
    /// the recipient's own part is known (then the group is not listed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_at: Option<String>,
    /// The recipient's own like of the post (its like id), which the post's
    /// like count holds and the group does not show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_like: Option<String>,
    /// The recipient's own comments on their hot post, which its count
    /// holds and the group does not show.
    #[serde(
        with = "serde_dynamo::string_set",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub own_comments: Vec<String>,
}

impl NotificationGroupItem {
    /// The group of `kind` about `post` (`None`: new followers) in `user`'s
    /// notifications.
    pub fn key_of(user: &UserId, kind: NotificationKind, post: Option<&PostId>) -> Key {
        let sk = match post {
            Some(post) => format!("{GROUP_PREFIX}{}#{post}", kind.name()),
            None => format!("{GROUP_PREFIX}{}", kind.name()),
        };
        Key::new(keys::notify_pk(user), sk)
    }

    /// What the recipient does not hear of in the target's `count`: their
    /// own like, their own comments.
    pub fn own(&self) -> u64 {
        u64::from(self.own_like.is_some())
            + u64::try_from(self.own_comments.len()).unwrap_or(u64::MAX)
    }
}

impl Entity for NotificationGroupItem {
    const TYPE: ItemType = ItemType::NotificationGroup;
    /// Made by updates only.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(&self.user_id, self.kind, self.post_id.as_ref())
    }

    fn gsi1(&self) -> Option<Key> {
        let at = self.last_at.as_deref()?;
        Some(listed_at(&self.key(), at))
    }
}

/// One notification of its own: a comment on a quiet post of theirs, or a
/// mention of them in a post or a comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationItem {
    /// The recipient.
    pub user_id: UserId,
    pub kind: NotificationKind,
    /// Who wrote the comment or the mention.
    pub actor: UserId,
    pub post_id: PostId,
    /// The comment (of a comment, or a mention in one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment_id: Option<CommentId>,
    /// The start of the comment's text, or of the post's title.
    pub preview: String,
    pub at: String,
    /// TTL: [`KEEP_DAYS`] after `at`, in seconds since the Unix epoch.
    pub expires_at: i64,
}

impl NotificationItem {
    /// The note of `kind` about `comment` on `post` (or, a mention in a
    /// post, the post) in `user`'s notifications: under the post, so that
    /// the post's deletion finds its notes ([`Self::of_post`]).
    pub fn key_of(
        user: &UserId,
        kind: NotificationKind,
        post: &PostId,
        comment: Option<&CommentId>,
    ) -> Key {
        let sk = match comment {
            Some(comment) => format!("{}{comment}", Self::of_post(kind, post)),
            None => format!("{NOTE_PREFIX}{}#{post}", kind.name()),
        };
        Key::new(keys::notify_pk(user), sk)
    }

    /// The note telling `user` of a mention of them in `post`, with the
    /// start of its title, at its publication.
    pub fn mention_in_post(user: &UserId, post: &PostItem) -> Self {
        let at = post
            .published_at()
            .map_or_else(|| post.created_at.clone(), str::to_owned);
        Self {
            user_id: user.clone(),
            kind: NotificationKind::Mention,
            actor: post.user_id.clone(),
            post_id: post.post_id,
            comment_id: None,
            preview: post.title.chars().take(PREVIEW_CHARS).collect(),
            expires_at: expires_after(&at),
            at,
        }
    }

    /// The note telling `user` of a mention of them in `comment`.
    pub fn mention_in_comment(user: &UserId, comment: &CommentItem) -> Self {
        Self {
            user_id: user.clone(),
            kind: NotificationKind::Mention,
            actor: comment.user_id.clone(),
            post_id: comment.post_id,
            comment_id: Some(comment.comment_id),
            preview: comment.content.chars().take(PREVIEW_CHARS).collect(),
            at: comment.created_at.clone(),
            expires_at: expires_after(&comment.created_at),
        }
    }

    /// The note telling a quiet post's `author` of `comment` on it.
    pub fn comment_on_post(author: &UserId, comment: &CommentItem) -> Self {
        Self {
            kind: NotificationKind::Comment,
            ..Self::mention_in_comment(author, comment)
        }
    }

    /// The sort-key prefix of the notes of `kind` about the comments of
    /// `post`.
    pub fn of_post(kind: NotificationKind, post: &PostId) -> String {
        format!("{NOTE_PREFIX}{}#{post}#", kind.name())
    }
}

impl Entity for NotificationItem {
    const TYPE: ItemType = ItemType::Notification;
    /// The same comment or mention is the same note.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(
            &self.user_id,
            self.kind,
            &self.post_id,
            self.comment_id.as_ref(),
        )
    }

    fn gsi1(&self) -> Option<Key> {
        Some(listed_at(&self.key(), &self.at))
    }
}

/// Until when a user has read their notifications.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationsSeenItem {
    pub user_id: UserId,
    pub seen_at: String,
}

impl NotificationsSeenItem {
    pub fn key_of(user: &UserId) -> Key {
        Key::new(keys::notify_pk(user), SEEN_SK.to_owned())
    }
}

impl Entity for NotificationsSeenItem {
    const TYPE: ItemType = ItemType::NotificationsSeen;
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(&self.user_id)
    }
}

const GROUP_PREFIX: &str = "GROUP#";
const NOTE_PREFIX: &str = "NOTE#";
const SEEN_SK: &str = "SEEN";

/// A notification's place in GSI1: its user's list, by time, then its key.
fn listed_at(key: &Key, at: &str) -> Key {
    Key::new(key.pk.clone(), format!("{at}#{}", key.sk))
}

/// The attributes of a group the fan-out's updates name.
pub mod attributes {
    pub const ACTORS: &str = "actors";
    pub const FIRST_AT: &str = "firstAt";
    pub const LAST_AT: &str = "lastAt";
    pub const OWN_LIKE: &str = "ownLike";
    pub const OWN_COMMENTS: &str = "ownComments";
    pub const KIND: &str = "kind";
    pub const POST_ID: &str = "postId";
    pub const USER_ID: &str = "userId";
    pub const EXPIRES_AT: &str = crate::keys::EXPIRES_AT;
}
