//! A block's items: the block in the blocker's partition (what their list,
//! their count, the export and the erasure read), and its mark in the
//! blocked user's partition (what the blocked user's writes against the
//! blocker check, in their own partition).

use serde::{Deserialize, Serialize};

use crate::keys::ItemType;
use crate::{
    ids::{BlockId, UserId},
    keys::{self, Entity, Key},
};

/// How many users one user may block: the bound of the Query of their
/// blocks that a page of comments on their posts makes (`store::blocks`).
pub const MAX_BLOCKS: u64 = 1_000;

/// The profile's attribute counting whom they block, changed in each
/// block's and unblock's transaction (at most [`MAX_BLOCKS`]).
pub(crate) const BLOCK_COUNT: &str = "blockCount";

/// The attribute a block's take-back conditions on: the block it read.
pub(crate) const BLOCK_ID: &str = "blockId";

/// A block, in the blocker's partition.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockItem {
    /// Who blocks.
    pub user_id: UserId,
    /// Whom.
    pub blocked_id: UserId,
    pub block_id: BlockId,
    pub created_at: String,
}

impl BlockItem {
    pub(crate) fn new(blocker: &UserId, blocked: &UserId) -> Self {
        let block_id = BlockId::generate();
        Self {
            user_id: blocker.clone(),
            blocked_id: blocked.clone(),
            created_at: block_id.created_at(),
            block_id,
        }
    }

    /// `blocker`'s block of `blocked`.
    pub fn key_of(blocker: &UserId, blocked: &UserId) -> Key {
        keys::block(blocker, blocked)
    }

    /// The mark it comes with, in the blocked user's partition.
    pub(crate) fn mark(&self) -> BlockedByItem {
        BlockedByItem {
            user_id: self.blocked_id.clone(),
            blocker_id: self.user_id.clone(),
            block_id: self.block_id,
        }
    }
}

impl Entity for BlockItem {
    const TYPE: ItemType = ItemType::Block;
    /// One per (blocker, blocked); it names its block id.
    const OWN: &'static [&'static str] = &[BLOCK_ID];

    fn key(&self) -> Key {
        Self::key_of(&self.user_id, &self.blocked_id)
    }

    fn gsi1(&self) -> Option<Key> {
        Some(Key::new(
            keys::user_items_pk(&self.user_id),
            keys::user_block_sk(&self.block_id),
        ))
    }
}

/// A block's mark in the blocked user's partition: while it is there, their
/// follow of the blocker, and their likes of and comments on the blocker's
/// posts, fail its check in their own transaction.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedByItem {
    /// Who is blocked (whose partition holds it).
    pub user_id: UserId,
    pub blocker_id: UserId,
    pub block_id: BlockId,
}

impl BlockedByItem {
    /// The mark that `blocker` blocked `blocked`.
    pub fn key_of(blocked: &UserId, blocker: &UserId) -> Key {
        keys::blocked_by(blocked, blocker)
    }
}

impl Entity for BlockedByItem {
    const TYPE: ItemType = ItemType::BlockedBy;
    /// Put with its block, whose create tells.
    const OWN: &'static [&'static str] = &[BLOCK_ID];

    fn key(&self) -> Key {
        Self::key_of(&self.user_id, &self.blocker_id)
    }
}
