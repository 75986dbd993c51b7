//! A like's items: the like, and the mark in its liker's own partition that
//! makes it unique; on a post created before quiet likes were marked, the
//! marker beside a like given while the post was quiet, which made it
//! unique in its post's partition.

use serde::{Deserialize, Serialize};

use super::user::UserItem;
use crate::{
    ids::{LikeId, PostId, UserId},
    keys::{self, Entity, Item, ItemType, Key, KeyError, PostPartition},
    model::Like,
    store::{
        s,
        table::{Expr, Write},
    },
    text::Username,
};

/// A like. Its sort key is time-ordered (`LIKE#<likeId>`) so that Q5 lists
/// newest first with one Query; it is listed in its author's GSI1 partition for
/// renames. It lives in its post's partition, or, given once the post was
/// hot, in the liker's shard of it (`shard`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LikeItem {
    pub like_id: LikeId,
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: Username,
    pub user_version: u64,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u8>,
}

impl LikeItem {
    /// `liker`'s like of the post whose partition `place` is, made when
    /// `like_id` was.
    pub fn new(place: PostPartition, like_id: LikeId, liker: &UserItem) -> Self {
        Self {
            like_id,
            post_id: place.post,
            user_id: liker.user_id.clone(),
            username: liker.username.clone(),
            user_version: liker.version,
            created_at: like_id.created_at(),
            shard: place.shard,
        }
    }

    /// The partition it lives in.
    pub fn place(&self) -> PostPartition {
        PostPartition {
            post: self.post_id,
            shard: self.shard,
        }
    }

    pub(crate) fn key_of(place: PostPartition, like: &LikeId) -> Key {
        keys::like(place, like)
    }

    /// The check a like adds to its transaction: no mark of a block by the
    /// post's `author` in the `liker`'s own partition (`USER#liker /
    /// ~BLOCKEDBY#author`, [`super::block::BlockedByItem`]), so that a block
    /// holds even against a like already in flight. `None` on the author's
    /// own like (no one blocks themselves): then it costs nothing; else 2 WCU
    /// (a ConditionCheck is billed as a transactional write of the item it
    /// reads).
    pub(crate) fn not_blocked(liker: &UserId, author: &UserId) -> Option<Write> {
        let mark = (liker != author).then(|| keys::blocked_by(liker, author));
        mark.map(|mark| Write::check(mark.item(), Expr::item_absent()))
    }
}

impl Entity for LikeItem {
    const TYPE: ItemType = ItemType::Like;
    /// The key holds a like id made for this like.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(self.place(), &self.like_id)
    }

    fn gsi1(&self) -> Option<Key> {
        let pk = keys::user_items_pk(&self.user_id);
        Some(Key::new(pk, keys::user_like_sk(&self.like_id)))
    }
}

impl From<LikeItem> for Like {
    fn from(item: LikeItem) -> Self {
        Like {
            post_id: item.post_id,
            user_id: item.user_id,
            username: item.username,
            created_at: item.created_at,
        }
    }
}

/// One per (post, user), keyed by the user, beside the like it guards (in the
/// post's partition or its shard): on a post created before quiet likes
/// were marked (no `likersMoved`), its conditional put is what makes a like
/// given while the post is quiet unique. It points at the like it guards.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LikerMarker {
    pub(crate) post_id: PostId,
    pub(crate) like_id: LikeId,
    pub(crate) user_id: UserId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) shard: Option<u8>,
}

impl LikerMarker {
    /// The marker that guards `like`.
    pub(crate) fn for_like(like: &LikeItem) -> Self {
        Self {
            post_id: like.post_id,
            like_id: like.like_id,
            user_id: like.user_id.clone(),
            shard: like.shard,
        }
    }

    pub(crate) fn key_of(place: PostPartition, liker: &UserId) -> Key {
        keys::liker(place, liker)
    }

    pub(crate) fn place(&self) -> PostPartition {
        PostPartition {
            post: self.post_id,
            shard: self.shard,
        }
    }
}

impl Entity for LikerMarker {
    const TYPE: ItemType = ItemType::Liker;
    /// One per (post, user); it names the like it guards.
    const OWN: &'static [&'static str] = &["likeId"];

    fn key(&self) -> Key {
        Self::key_of(self.place(), &self.user_id)
    }

    /// Markers written before they carried `postId` take it from their key.
    fn decode(item: Item) -> Result<Self, KeyError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Stored {
            post_id: Option<PostId>,
            like_id: LikeId,
            user_id: UserId,
        }
        let key = Key::of(&item)?;
        let stored: Stored = crate::keys::from_item(item)?;
        let place = PostPartition::of_pk(&key.pk)
            .ok_or_else(|| KeyError::Misplaced(format!("a like marker under {}", key.pk)))?;
        Ok(Self {
            post_id: stored.post_id.unwrap_or(place.post),
            like_id: stored.like_id,
            user_id: stored.user_id,
            shard: place.shard,
        })
    }
}

/// A user's mark of their like of a post, in their own partition
/// (`USER#u / ~LIKED#p`): its conditional put is what makes a like unique,
/// wherever the post keeps the like, so the post's shards can be many or
/// few and a like reads nothing of the post's own partition, before the
/// post turns hot or after. It names the like and where it is: one of the
/// post's shards, or the post's own partition (a like given while the post
/// was quiet). On a post created before quiet likes were marked, a quiet
/// like has a [`LikerMarker`] beside it too (`beside`: put with the mark, or
/// before it, the mark then given by the fan-out's move,
/// [`crate::store::FanOut::move_likers`]).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LikedMarker {
    pub(crate) post_id: PostId,
    pub(crate) like_id: LikeId,
    pub(crate) user_id: UserId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) shard: Option<u8>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) beside: bool,
}

impl LikedMarker {
    /// The mark of a like with no marker beside it.
    pub(crate) fn for_like(like: &LikeItem) -> Self {
        Self {
            post_id: like.post_id,
            like_id: like.like_id,
            user_id: like.user_id.clone(),
            shard: like.shard,
            beside: false,
        }
    }

    /// The mark of the like `marker` guards (beside it): given with it, or
    /// by the fan-out's move.
    pub(crate) fn moved(marker: &LikerMarker) -> Self {
        Self {
            post_id: marker.post_id,
            like_id: marker.like_id,
            user_id: marker.user_id.clone(),
            shard: marker.shard,
            beside: true,
        }
    }

    pub(crate) fn key_of(liker: &UserId, post: &PostId) -> Key {
        keys::liked(liker, post)
    }

    /// The partition of the like it names.
    pub(crate) fn like_place(&self) -> PostPartition {
        PostPartition {
            post: self.post_id,
            shard: self.shard,
        }
    }

    /// The condition of a delete of it (or of a [`LikerMarker`]) that holds
    /// only while it names `like`.
    pub(crate) fn naming(like: LikeId) -> Expr {
        Expr::new("likeId = :like").value(":like", s(like.to_string()))
    }

    /// The condition of a delete, in a transaction, of a mark or marker that
    /// may be absent, but must not name another like.
    pub(crate) fn absent_or_naming(like: LikeId) -> Expr {
        Expr::item_absent()
            .or("likeId = :like")
            .value(":like", s(like.to_string()))
    }
}

impl Entity for LikedMarker {
    const TYPE: ItemType = ItemType::Liked;
    /// One per (user, post); it names the like it marks.
    const OWN: &'static [&'static str] = &["likeId"];

    fn key(&self) -> Key {
        Self::key_of(&self.user_id, &self.post_id)
    }
}
