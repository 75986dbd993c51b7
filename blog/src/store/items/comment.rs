//! A comment, in its post's partition (or, once the post is hot, its shard).

use serde::{Deserialize, Serialize};

use super::user::UserItem;
use crate::keys::ItemType;
use crate::{
    ids::{CommentId, PostId, UserId},
    keys::{self, Entity, Key, PostPartition},
    mentions::Mentions,
    model::Comment,
    store::table::{Expr, Write},
    text::Username,
};

/// A comment, stored beside its post and listed in its author's GSI1 partition
/// (what a rename fans out to).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentItem {
    pub comment_id: CommentId,
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: Username,
    pub user_version: u64,
    pub content: String,
    pub created_at: String,
    /// On a hot post: the shard whose counter counts it. `None`: counted on
    /// the post item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_in: Option<u8>,
    /// The hot post's shard it lives in (its id says so too:
    /// [`CommentId::shard`]). `None`: its post's own partition (a comment
    /// made while the post was quiet, or before hot posts sharded comments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u8>,
    /// The users its content mentions, found when it was written: each
    /// folded name → the user's id, at most 10; absent when none
    /// ([`super::post::MENTIONS_ATTRIBUTE`]). Kept for the notifications,
    /// which read it from the stream's images; a comment is shown as
    /// plain text, so nothing renders them.
    #[serde(default, skip_serializing_if = "Mentions::is_empty")]
    pub mentions: Mentions,
}

impl CommentItem {
    /// `author`'s comment on `post`, made when `comment_id` was.
    pub fn new(post: PostId, comment_id: CommentId, author: &UserItem, content: &str) -> Self {
        Self {
            comment_id,
            post_id: post,
            user_id: author.user_id.clone(),
            username: author.username.clone(),
            user_version: author.version,
            content: content.to_owned(),
            created_at: comment_id.created_at(),
            counted_in: None,
            shard: None,
            mentions: Mentions::default(),
        }
    }

    pub(crate) fn key_of(place: PostPartition, comment: &CommentId) -> Key {
        keys::comment(place, comment)
    }

    /// The check a comment adds to its transaction: no mark of a block by
    /// the post's `owner` in the commenter's (`author`'s) own partition
    /// (`USER#author / ~BLOCKEDBY#owner`, [`super::block::BlockedByItem`]).
    /// `None` on a comment on one's own post: then it costs nothing; else
    /// 2 WCU.
    pub(crate) fn not_blocked(author: &UserId, owner: &UserId) -> Option<Write> {
        let mark = (author != owner).then(|| keys::blocked_by(author, owner));
        mark.map(|mark| Write::check(mark.item(), Expr::item_absent()))
    }

    /// The partition it lives in.
    pub fn place(&self) -> PostPartition {
        PostPartition {
            post: self.post_id,
            shard: self.shard,
        }
    }
}

impl Entity for CommentItem {
    const TYPE: ItemType = ItemType::Comment;
    /// The key holds a comment id made for this comment.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(self.place(), &self.comment_id)
    }

    fn gsi1(&self) -> Option<Key> {
        let pk = keys::user_items_pk(&self.user_id);
        Some(Key::new(pk, keys::user_comment_sk(&self.comment_id)))
    }
}

impl From<CommentItem> for Comment {
    fn from(item: CommentItem) -> Self {
        Comment {
            comment_id: item.comment_id,
            post_id: item.post_id,
            user_id: item.user_id,
            username: item.username,
            content: item.content,
            created_at: item.created_at,
        }
    }
}
