//! A user's items: the profile, the claim that keeps a username unique,
//! and the mark an erased account leaves.

use serde::{Deserialize, Serialize};

use super::request_record::Account;
use crate::keys::{Item, ItemType};
use crate::{
    ids::UserId,
    keys::{self, Entity, Key, USERNAME_SK},
    model::User,
    text::Username,
};

/// The profile item. `version` grows by one on every change, so copies of the
/// username elsewhere can be applied in order and only once.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserItem {
    pub user_id: UserId,
    pub username: Username,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    /// The version this profile started at: 1, or one past the version of
    /// an erased account of the same user, so that what that account wrote
    /// (`userVersion` below this) is never taken for this one's.
    #[serde(default = "first_version", skip_serializing_if = "is_first_version")]
    pub first_version: u64,
    /// How many users they follow, changed in each follow's transaction
    /// (absent until the first).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub following_count: u64,
    /// How many users they block, changed in each block's transaction
    /// (absent until the first; at most
    /// [`MAX_BLOCKS`](super::block::MAX_BLOCKS)).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub block_count: u64,
    /// Each follower shard's count as the fan-out last added it, by shard
    /// (`"00"`..), with the counter's version
    /// ([`crate::store::counts`]). Absent until the first follower.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub follower_shards: std::collections::BTreeMap<String, ShardCount>,
    /// Their follower count: the sum of `follower_shards`, moved by each of
    /// the fan-out's adds. Absent until the first (on a profile the fan-out
    /// added to before it was kept, until its next add: then the map's sum).
    #[serde(
        rename = "followerCount",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub follower_total: Option<u64>,
    /// The authors they pull (their pull follows, [`crate::store::follows`]):
    /// their home read merges these authors' posts. A string set, at most
    /// [`crate::store::follows::PULL_LIMIT`]; absent while empty. Written by the
    /// follows' update expressions (`ADD`/`DELETE`), which need a string set:
    /// a whole profile written with pulls writes them as one too.
    #[serde(
        with = "serde_dynamo::string_set",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub pulls: Vec<UserId>,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

fn first_version() -> u64 {
    1
}

fn is_first_version(version: &u64) -> bool {
    *version == 1
}

/// A follower shard's count as the fan-out copied it onto the profile, and
/// the count item's version it was copied from. One letter each: eight of
/// them ride on every write of the profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardCount {
    #[serde(rename = "n")]
    pub count: u64,
    #[serde(rename = "v")]
    pub version: u64,
}

impl UserItem {
    /// Who this profile's user is, as a keyed request records it.
    pub fn account(&self) -> Account<'_> {
        Account {
            user: &self.user_id,
            version: self.version,
            first_version: self.first_version,
        }
    }

    /// A new profile, version 1, made `at`.
    pub fn new(user: &UserId, username: &Username, at: &str) -> Self {
        Self {
            user_id: user.clone(),
            username: username.clone(),
            created_at: at.to_owned(),
            updated_at: at.to_owned(),
            version: 1,
            first_version: 1,
            following_count: 0,
            block_count: 0,
            follower_shards: std::collections::BTreeMap::new(),
            follower_total: None,
            pulls: Vec::new(),
        }
    }

    /// The same profile starting at `version` (after an erasure).
    pub fn starting_at(self, version: u64) -> Self {
        Self {
            version,
            first_version: version,
            ..self
        }
    }

    pub fn key(user: &UserId) -> Item {
        keys::profile(user).item()
    }

    /// Their follower count: the shards' counts as the fan-out last added
    /// them.
    pub fn follower_count(&self) -> u64 {
        self.follower_total
            .unwrap_or_else(|| self.follower_shards.values().map(|c| c.count).sum())
    }
}

impl Entity for UserItem {
    const TYPE: ItemType = ItemType::User;
    /// A profile made again by a later request has its own `createdAt`.
    const OWN: &'static [&'static str] = &["createdAt"];

    fn key(&self) -> Key {
        keys::profile(&self.user_id)
    }
}

impl From<UserItem> for User {
    fn from(item: UserItem) -> Self {
        User {
            follower_count: item.follower_count(),
            following_count: item.following_count,
            user_id: item.user_id,
            username: item.username,
            created_at: item.created_at,
            updated_at: item.updated_at,
        }
    }
}

/// Claims a username (case-insensitively) for one user. It exists so that the
/// database itself, not a read before the write, rejects a taken name. It
/// holds a copy of the profile (finding a user by name once read it alone;
/// the follow counts are on the profile only, so it now reads the profile
/// too). Every write of the profile's name writes it in the same transaction.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UsernameClaim {
    pub(crate) user_id: UserId,
    pub(crate) username: Username,
    /// The profile's copy; absent from claims written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) updated_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<u64>,
}

impl UsernameClaim {
    /// The claim of `profile`'s username, with its copy of the profile.
    pub(crate) fn of(profile: &UserItem) -> Self {
        Self {
            user_id: profile.user_id.clone(),
            username: profile.username.clone(),
            created_at: Some(profile.created_at.clone()),
            updated_at: Some(profile.updated_at.clone()),
            version: Some(profile.version),
        }
    }

    pub(crate) fn key(username: &Username) -> Item {
        Key::new(keys::username_pk(username), USERNAME_SK).item()
    }
}

impl Entity for UsernameClaim {
    const TYPE: ItemType = ItemType::Username;
    /// Each write of a user's claim copies a new profile version.
    const OWN: &'static [&'static str] = &["userId", "version"];

    fn key(&self) -> Key {
        Key::new(keys::username_pk(&self.username), USERNAME_SK)
    }
}

/// What is left of an erased account (in its partition, beside where the
/// profile was; `store::erasure` writes and walks it): the version its profile had (every
/// item it wrote carries a `userVersion` at most this), when, and whether
/// the fan-out has deleted everything it wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErasureMark {
    pub user_id: UserId,
    pub version: u64,
    pub erased_at: String,
    pub done: bool,
}

impl Entity for ErasureMark {
    const TYPE: ItemType = ItemType::Erasure;
    /// Each erasure of the same user has its own time.
    const OWN: &'static [&'static str] = &["erasedAt"];

    fn key(&self) -> Key {
        keys::erasure(&self.user_id)
    }
}
