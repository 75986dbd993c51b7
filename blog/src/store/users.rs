//! User profiles (C1, Q1) and the username claims that keep names unique.

use aws_sdk_dynamodb::types::{Delete, ReturnConsumedCapacity, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};

use super::{
    Cancelled, ItemType, Store, StoreError, classify, condition_failed, condition_held, from_item,
    key, n, s,
};
use crate::{
    ids::UserId,
    keys::{self, PROFILE_SK, USERNAME_SK},
    model::User,
    timestamp,
};

/// How often a write re-reads a profile that changed under it before giving up.
pub(crate) const OPTIMISTIC_ATTEMPTS: usize = 5;

/// The profile item. `version` grows by one on every change, so copies of the
/// username elsewhere can be applied in order and only once.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: ItemType,
    pub user_id: UserId,
    pub username: String,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
}

impl UserItem {
    pub fn key(user: &UserId) -> super::Item {
        key(keys::user_pk(user), PROFILE_SK)
    }
}

impl From<UserItem> for User {
    fn from(item: UserItem) -> Self {
        User {
            user_id: item.user_id,
            username: item.username,
            created_at: item.created_at,
            updated_at: item.updated_at,
        }
    }
}

/// Claims a username (case-insensitively) for one user. It exists so that the
/// database itself, not a read before the write, rejects a taken name.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UsernameClaim {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "type")]
    kind: ItemType,
    user_id: UserId,
    username: String,
}

impl UsernameClaim {
    pub(super) fn new(user: &UserId, username: &str) -> Self {
        Self {
            pk: keys::username_pk(username),
            sk: USERNAME_SK.to_owned(),
            kind: ItemType::Username,
            user_id: user.clone(),
            username: username.to_owned(),
        }
    }
}

impl Store {
    /// C1: creates the caller's profile and claims its username, atomically.
    pub async fn create_user(&self, user: &UserId, username: &str) -> Result<User, StoreError> {
        let now = timestamp::now();
        let item = UserItem {
            pk: keys::user_pk(user),
            sk: PROFILE_SK.to_owned(),
            kind: ItemType::User,
            user_id: user.clone(),
            username: username.to_owned(),
            created_at: now.clone(),
            updated_at: now,
            version: 1,
        };
        let writes = vec![
            self.put_new(&item)?,
            self.put_new(&UsernameClaim::new(user, username))?,
        ];
        match self.transact(writes).await {
            Ok(()) => Ok(item.into()),
            Err(Cancelled::Conditions(reasons)) if condition_failed(&reasons, 0) => {
                Err(StoreError::ProfileExists)
            }
            Err(Cancelled::Conditions(reasons)) if condition_failed(&reasons, 1) => {
                Err(StoreError::UsernameTaken)
            }
            Err(Cancelled::Conditions(reasons)) => Err(StoreError::Internal(format!(
                "create user cancelled: {reasons:?}"
            ))),
            Err(Cancelled::Store(err)) => Err(err),
        }
    }

    /// Q1: one eventually consistent GetItem.
    pub async fn get_user(&self, user: &UserId) -> Result<Option<User>, StoreError> {
        Ok(self.read_profile(user, false).await?.map(User::from))
    }

    /// The profile item, strongly consistent when a write depends on it.
    pub(crate) async fn read_profile(
        &self,
        user: &UserId,
        consistent: bool,
    ) -> Result<Option<UserItem>, StoreError> {
        let output = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(UserItem::key(user)))
            .consistent_read(consistent)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(classify)?;
        output.item.map(from_item).transpose()
    }

    /// The caller's profile, which every write of content needs (403 without).
    pub(crate) async fn author(&self, user: &UserId) -> Result<UserItem, StoreError> {
        self.read_profile(user, true)
            .await?
            .ok_or(StoreError::NoProfile)
    }

    /// C1 (edit): renames a user. The profile change, the release of the old
    /// name and the claim of the new one commit together or not at all; the
    /// profile's `version` condition makes a concurrent rename retry instead of
    /// releasing a name it no longer holds.
    pub async fn rename_user(&self, user: &UserId, username: &str) -> Result<User, StoreError> {
        for _ in 0..OPTIMISTIC_ATTEMPTS {
            let current = self
                .read_profile(user, true)
                .await?
                .ok_or(StoreError::UserNotFound)?;
            if current.username == username {
                return Ok(current.into());
            }
            let now = timestamp::now();
            let update = Update::builder()
                .table_name(self.table())
                .set_key(Some(UserItem::key(user)))
                .update_expression(
                    "SET username = :name, updatedAt = :now, version = version + :one",
                )
                .condition_expression("version = :seen")
                .expression_attribute_values(":name", s(username))
                .expression_attribute_values(":now", s(&now))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":seen", n(current.version))
                .build()?;
            let mut writes = vec![TransactWriteItem::builder().update(update).build()];
            let same_claim = keys::username_pk(&current.username) == keys::username_pk(username);
            if !same_claim {
                let release = Delete::builder()
                    .table_name(self.table())
                    .set_key(Some(key(keys::username_pk(&current.username), USERNAME_SK)))
                    .condition_expression("userId = :me")
                    .expression_attribute_values(":me", s(user.as_str()))
                    .build()?;
                writes.push(TransactWriteItem::builder().delete(release).build());
                writes.push(self.put_new(&UsernameClaim::new(user, username))?);
            }
            match self.transact(writes).await {
                Ok(()) => {
                    return Ok(UserItem {
                        username: username.to_owned(),
                        updated_at: now,
                        version: current.version + 1,
                        ..current
                    }
                    .into());
                }
                Err(Cancelled::Conditions(reasons)) if condition_failed(&reasons, 2) => {
                    return Err(StoreError::UsernameTaken);
                }
                // The profile changed since we read it: read it again.
                Err(Cancelled::Conditions(reasons)) if condition_failed(&reasons, 0) => continue,
                Err(Cancelled::Conditions(reasons)) => {
                    return Err(StoreError::Internal(format!(
                        "rename cancelled: {reasons:?}"
                    )));
                }
                Err(Cancelled::Store(err)) => return Err(err),
            }
        }
        Err(StoreError::Contention)
    }
}

/// How many of a user's items one page of the rename fan-out reads.
const RENAME_PAGE: i32 = 100;
/// How many username copies the rename fan-out writes at once.
const RENAME_CONCURRENCY: usize = 16;

/// What a rename fan-out did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Renamed {
    /// Items that now carry the new username.
    pub written: usize,
    /// Items that already carried this rename or a newer one.
    pub stale: usize,
}

impl Store {
    /// Fan-out of a rename: writes `user`'s username onto everything they wrote,
    /// found page by page under their GSI1 partition. Each write lands only on
    /// an item that copied an older version of the profile (`userVersion`), so
    /// replaying a rename, or an older one after a newer one, changes nothing.
    /// A post's `version` grows with the copy, so its feed entry follows.
    pub async fn copy_username(&self, user: &UserItem) -> Result<Renamed, StoreError> {
        use futures::{StreamExt, TryStreamExt};

        let mut done = Renamed::default();
        let mut start = None;
        loop {
            let page = self
                .client()
                .query()
                .table_name(self.table())
                .index_name(keys::GSI1)
                .key_condition_expression("GSI1PK = :pk")
                .expression_attribute_values(":pk", s(keys::user_items_pk(&user.user_id)))
                .limit(RENAME_PAGE)
                .set_exclusive_start_key(start)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await
                .map_err(classify)?;
            let copies: Vec<super::Item> = page.items.unwrap_or_default();
            let outcomes: Vec<bool> = futures::stream::iter(copies)
                .map(|item| self.copy_username_onto(item, user))
                .buffer_unordered(RENAME_CONCURRENCY)
                .try_collect()
                .await?;
            for written in outcomes {
                if written {
                    done.written += 1;
                } else {
                    done.stale += 1;
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(done);
            }
        }
    }

    /// One username copy; `false` when the item already had this version.
    async fn copy_username_onto(
        &self,
        item: super::Item,
        user: &UserItem,
    ) -> Result<bool, StoreError> {
        let is_post = item
            .get(keys::SK)
            .and_then(|sk| sk.as_s().ok())
            .is_some_and(|sk| sk == keys::POST_SK);
        let key: super::Item = item
            .into_iter()
            .filter(|(name, _)| name == keys::PK || name == keys::SK)
            .collect();
        let expression = if is_post {
            "SET username = :name, userVersion = :uv, version = version + :one"
        } else {
            "SET username = :name, userVersion = :uv"
        };
        let mut update = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key))
            .update_expression(expression)
            .condition_expression("attribute_exists(PK) AND userVersion < :uv")
            .expression_attribute_values(":name", s(&user.username))
            .expression_attribute_values(":uv", n(user.version))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        if is_post {
            update = update.expression_attribute_values(":one", n(1));
        }
        condition_held(update.send().await)
    }
}
