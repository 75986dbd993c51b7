//! A rename's progress: where its walk over the user's items is.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::user::UserItem;
use crate::keys::{Item, ItemType};
use crate::store::table::s;
use crate::{
    ids::UserId,
    keys::{self, Entity, Key, KeyError},
    timestamp,
};

/// Where a rename's walk is: `USER#u / RENAME`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RenameProgress {
    /// Whose rename it is (in its key, and stored).
    pub(crate) user_id: UserId,
    /// The profile version being copied.
    pub(crate) version: u64,
    pub(crate) phase: Phase,
    /// GSI1's key of the last item of the last page done (the walk goes on
    /// after it); none before the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cursor: Option<HashMap<String, String>>,
    /// Totals over every invocation of this rename.
    pub(crate) written: u64,
    pub(crate) stale: u64,
    pub(crate) invocations: u64,
    pub(crate) updated_at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Phase {
    /// Walking all of GSI1 `USER#u`.
    Walk,
    /// The walk is done; the short second pass over what GSI1 may not have
    /// shown yet is not.
    Tail,
    Done,
}

impl RenameProgress {
    pub(crate) fn key(user: &UserId) -> Item {
        keys::rename_progress(user).item()
    }

    pub(crate) fn start(user: &UserItem) -> Self {
        Self {
            user_id: user.user_id.clone(),
            version: user.version,
            phase: Phase::Walk,
            cursor: None,
            written: 0,
            stale: 0,
            invocations: 0,
            updated_at: timestamp::now(),
        }
    }
}

impl Entity for RenameProgress {
    const TYPE: ItemType = ItemType::RenameProgress;
    const OWN: &'static [&'static str] = &["version", "updatedAt"];

    fn key(&self) -> Key {
        keys::rename_progress(&self.user_id)
    }

    /// Progress saved before it carried `userId` takes it from its key.
    fn decode(mut item: Item) -> Result<Self, KeyError> {
        if !item.contains_key("userId") {
            let pk = Key::of(&item)?.pk;
            let user = keys::user_of_pk(&pk)
                .ok_or_else(|| KeyError::Misplaced(format!("rename progress under {pk}")))?;
            item.insert("userId".to_owned(), s(user.as_str()));
        }
        crate::keys::from_item(item)
    }
}
