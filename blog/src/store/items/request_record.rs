//! An idempotent request's record: what a keyed create answered.

use serde::{Deserialize, Serialize};

use crate::keys::ItemType;
use crate::{
    ids::{CommentId, IdempotencyKey, PostId, UserId},
    keys::{self, Entity, Key},
};

/// The first answer to a keyed request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecordItem {
    pub user_id: UserId,
    pub key: IdempotencyKey,
    pub request_digest: String,
    pub status: u16,
    /// The answer's JSON body, without `content`.
    pub response: String,
    #[serde(flatten)]
    pub created: Created,
    pub created_at: String,
    /// Seconds since the epoch (DynamoDB's TTL).
    pub expires_at: u64,
    /// The writer's profile version when it was written. A record below the
    /// profile's `firstVersion` is an erased account's: it never answers
    /// for the person who signed up again, and a request under its key
    /// replaces it. (Records written before it was kept read as 1.)
    #[serde(default = "first_account_version")]
    pub user_version: u64,
}

/// The version a record without one is read at: an account's first.
pub(crate) fn first_account_version() -> u64 {
    1
}

/// The attribute that holds a record's [`RequestRecordItem::user_version`].
pub const USER_VERSION: &str = "userVersion";

impl RequestRecordItem {
    /// Whether it was written by an account erased before `account` was
    /// made (`first_version`: the user's current account's first).
    pub fn is_an_erased_accounts(&self, first_version: u64) -> bool {
        self.user_version < first_version
    }
}

impl Entity for RequestRecordItem {
    const TYPE: ItemType = ItemType::RequestRecord;
    /// The request it answers and when: a retry's own record is the first's.
    const OWN: &'static [&'static str] = &["requestDigest", "createdAt"];

    fn key(&self) -> Key {
        keys::request_record(&self.user_id, &self.key)
    }
}

/// What a keyed request created, so that a replay can read its `content`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "created",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Created {
    User,
    Post {
        post_id: PostId,
    },
    Comment {
        post_id: PostId,
        comment_id: CommentId,
    },
}

/// Who sends a keyed request, as their profile says: the user, the
/// profile's version, and the version it started at (above every version of
/// an erased account of the same user).
#[derive(Debug, Clone, Copy)]
pub struct Account<'a> {
    pub user: &'a UserId,
    pub version: u64,
    pub first_version: u64,
}
