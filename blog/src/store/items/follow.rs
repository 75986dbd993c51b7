//! A follow's items: the follow (in the follower's partition), its copy
//! in a follower shard of the followed, and the follower counts' shards.

use serde::{Deserialize, Serialize};

use crate::keys::ItemType;
use crate::{
    ids::{FollowId, UserId},
    keys::{self, Entity, Key, PUSH_SHARDS},
    store::table::{Expr, Write},
};

/// The profile's attribute counting whom they follow.
pub(crate) const FOLLOWING_COUNT: &str = "followingCount";
/// The profile's set of the authors they pull (a string set, at most
/// [`PULL_LIMIT`]).
pub(crate) const PULLS: &str = "pulls";
/// The profile's map of its follower shards' counts as copied.
pub(crate) const FOLLOWER_SHARDS_ATTRIBUTE: &str = "followerShards";
/// The profile's attribute that holds the sum of its `followerShards`.
pub(crate) const FOLLOWER_COUNT_ATTRIBUTE: &str = "followerCount";

/// The follower shard that holds `follower`'s entry in any user's followers:
/// one of the [`PUSH_SHARDS`] by their id's hash, that plus [`PUSH_SHARDS`]
/// for a pull follow.
pub fn follower_shard(follower: &UserId, pull: bool) -> u8 {
    keys::shard_of(follower.as_str().as_bytes(), PUSH_SHARDS) + if pull { PUSH_SHARDS } else { 0 }
}

/// A follow, in the follower's partition.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowItem {
    /// Who follows.
    pub user_id: UserId,
    /// Whom.
    pub followed_id: UserId,
    pub follow_id: FollowId,
    pub created_at: String,
    /// A pull follow: the follower's home reads the author's posts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pull: bool,
}

impl FollowItem {
    pub(crate) fn new(follower: &UserId, followed: &UserId, pull: bool) -> Self {
        let follow_id = FollowId::generate();
        Self {
            user_id: follower.clone(),
            followed_id: followed.clone(),
            created_at: follow_id.created_at(),
            follow_id,
            pull,
        }
    }

    /// Where a block of `follower` by `followed` is marked: in the
    /// follower's own partition (`USER#follower / ~BLOCKEDBY#followed`,
    /// [`super::block::BlockedByItem`]). A follow reads it before its
    /// backfill, and checks it again in its transaction ([`Self::not_blocked`]).
    pub(crate) fn block_mark_of(follower: &UserId, followed: &UserId) -> Key {
        keys::blocked_by(follower, followed)
    }

    /// The check the follow adds to its transaction: no mark of a block of
    /// the follower by the followed user (one made since it was read).
    /// 2 WCU: a ConditionCheck is billed as a transactional write of the
    /// item it reads.
    pub(crate) fn not_blocked(&self) -> Write {
        let mark = Self::block_mark_of(&self.user_id, &self.followed_id);
        Write::check(mark.item(), Expr::item_absent())
    }

    /// The follower's entry it comes with.
    pub(crate) fn entry(&self) -> FollowerItem {
        FollowerItem {
            user_id: self.followed_id.clone(),
            follower_id: self.user_id.clone(),
            follow_id: self.follow_id,
            created_at: self.created_at.clone(),
            pull: self.pull,
        }
    }
}

impl Entity for FollowItem {
    const TYPE: ItemType = ItemType::Follow;
    /// One per (follower, followed); it names its follow id.
    const OWN: &'static [&'static str] = &["followId"];

    fn key(&self) -> Key {
        keys::follow(&self.user_id, &self.followed_id)
    }

    fn gsi1(&self) -> Option<Key> {
        Some(Key::new(
            keys::user_items_pk(&self.user_id),
            keys::user_follow_sk(&self.follow_id),
        ))
    }
}

/// A follower's entry in a shard of the followed user's followers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowerItem {
    /// Who is followed.
    pub user_id: UserId,
    pub follower_id: UserId,
    pub follow_id: FollowId,
    pub created_at: String,
    /// In a pull shard: no delivery writes into this follower's home.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pull: bool,
}

impl FollowerItem {
    pub fn shard(&self) -> u8 {
        follower_shard(&self.follower_id, self.pull)
    }

    /// `follow`'s entry in shard `shard` of `followed`'s followers.
    pub fn key_of(followed: &UserId, shard: u8, follow: &FollowId) -> Key {
        Key::new(
            keys::followers_pk(followed, shard),
            keys::follower_sk(follow),
        )
    }
}

impl Entity for FollowerItem {
    const TYPE: ItemType = ItemType::Follower;
    /// The key holds the follow's id.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(&self.user_id, self.shard(), &self.follow_id)
    }
}

/// A follower shard's count item, as a stream record's image holds it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowerCountItem {
    pub user_id: UserId,
    pub shard: u8,
    /// Never below 0 while its entries exist; read as at least 0.
    #[serde(deserialize_with = "crate::model::count")]
    pub count: u64,
    pub version: u64,
}

impl FollowerCountItem {
    /// The count of shard `shard` of `followed`'s followers.
    pub fn key_of(followed: &UserId, shard: u8) -> Key {
        Key::new(keys::followers_pk(followed, shard), keys::FOLLOWER_COUNT_SK)
    }
}

/// A follower window (`FOLLOWED#v / W#<window>`, the fan-out's copy of
/// the follower entries by time) has no struct: one attribute a follow
/// (`f<followId>`, [`keys::follower_attribute`]) beside these two.
/// The attribute naming whose followers a window holds.
pub const WINDOW_OWNER: &str = "userId";

/// The attribute every change of a window moves (`ADD 1`).
pub const WINDOW_VERSION: &str = keys::VERSION;
