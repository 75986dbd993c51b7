//! User profiles (C1, Q1) and the username claims that keep names unique.

use aws_sdk_dynamodb::types::{Delete, ReturnConsumedCapacity, Update};
use serde::{Deserialize, Serialize};

use super::{Busy, Cancelled, ItemType, Store, StoreError, condition_held, from_item, key, n, s};
use crate::{
    ids::UserId,
    keys::{self, PROFILE_SK, USERNAME_SK},
    model::User,
    timestamp,
};

/// How often a rename re-reads a profile that changed under it before giving up.
const OPTIMISTIC_ATTEMPTS: usize = 5;

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
        let mut tx = self.transaction("create user");
        let profile = tx.put_new("profile", &item)?;
        let claim = tx.put_new("username claim", &UsernameClaim::new(user, username))?;
        match tx.commit().await {
            Ok(()) => Ok(item.into()),
            Err(Cancelled::Conditions(failed)) if failed.failed(profile) => {
                Err(StoreError::ProfileExists)
            }
            Err(Cancelled::Conditions(failed)) if failed.failed(claim) => {
                Err(StoreError::UsernameTaken)
            }
            Err(Cancelled::Conditions(failed)) => Err(failed.unexpected("create user")),
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
        let item = self.get(UserItem::key(user), consistent).await?;
        item.map(from_item).transpose()
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
            let mut tx = self.transaction("rename");
            let profile = tx.update("profile", update);
            let same_claim = keys::username_pk(&current.username) == keys::username_pk(username);
            let mut claim = None;
            if !same_claim {
                let release = Delete::builder()
                    .table_name(self.table())
                    .set_key(Some(key(keys::username_pk(&current.username), USERNAME_SK)))
                    .condition_expression("userId = :me")
                    .expression_attribute_values(":me", s(user.as_str()))
                    .build()?;
                tx.delete("old username claim", release);
                claim =
                    Some(tx.put_new("new username claim", &UsernameClaim::new(user, username))?);
            }
            match tx.commit().await {
                Ok(()) => {
                    return Ok(UserItem {
                        username: username.to_owned(),
                        updated_at: now,
                        version: current.version + 1,
                        ..current
                    }
                    .into());
                }
                Err(Cancelled::Conditions(failed)) if claim.is_some_and(|c| failed.failed(c)) => {
                    return Err(StoreError::UsernameTaken);
                }
                // The profile changed since we read it: read it again.
                Err(Cancelled::Conditions(failed)) if failed.failed(profile) => continue,
                Err(Cancelled::Conditions(failed)) => return Err(failed.unexpected("rename")),
                Err(Cancelled::Store(err)) => return Err(err),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the profile kept changing during the rename",
        ))
    }
}

impl Store {
    /// Fan-out of a new post, comment or like whose copied username may be
    /// stale: written under profile version `user_version`, it may have been
    /// missed by a rename whose walk read GSI1 before the index showed it. If
    /// the profile has moved on since, copies its current name, and returns
    /// that profile (the copy landed, or a newer one did); `None` when the
    /// item is up to date.
    pub async fn catch_up_username(
        &self,
        pk: &str,
        sk: &str,
        user: &UserId,
        user_version: u64,
    ) -> Result<Option<UserItem>, StoreError> {
        let Some(profile) = self.read_profile(user, true).await? else {
            return Ok(None);
        };
        if profile.version <= user_version {
            return Ok(None);
        }
        let item = key(pk.to_owned(), sk.to_owned());
        self.copy_username_onto(item, &profile).await?;
        Ok(Some(profile))
    }

    /// One username copy; `false` when the item already had this version (or
    /// is gone).
    pub(super) async fn copy_username_onto(
        &self,
        item: super::Item,
        user: &UserItem,
    ) -> Result<bool, StoreError> {
        let key: super::Item = item
            .into_iter()
            .filter(|(name, _)| name == keys::PK || name == keys::SK)
            .collect();
        let copy = UsernameCopy {
            username: &user.username,
            version: user.version,
        };
        self.write_username(key, copy, Overwrite::Older).await
    }

    /// Writes a profile's username onto the item at `key`, as `over` allows:
    /// the one write behind the fan-out's copies and the audit's repairs.
    /// `false` when the condition refused it.
    pub(crate) async fn write_username(
        &self,
        key: super::Item,
        copy: UsernameCopy<'_>,
        over: Overwrite<'_>,
    ) -> Result<bool, StoreError> {
        let mut update = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key))
            .update_expression("SET username = :name, userVersion = :uv")
            .expression_attribute_values(":name", s(copy.username))
            .expression_attribute_values(":uv", n(copy.version))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        update = match over {
            Overwrite::Older => {
                update.condition_expression("attribute_exists(PK) AND userVersion < :uv")
            }
            Overwrite::Repair { stored } => update
                .condition_expression("username = :stored AND userVersion <= :uv")
                .expression_attribute_values(":stored", s(stored)),
        };
        condition_held(
            self.backoff()
                .send("copy username", || update.clone().send())
                .await,
        )
    }
}

/// A profile's name and version, as copied onto what the user wrote.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UsernameCopy<'a> {
    pub username: &'a str,
    pub version: u64,
}

/// Which copies a username write may replace.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Overwrite<'a> {
    /// One of an older profile version (the fan-out: in order, once).
    Older,
    /// The value `stored` the audit read, at this profile version or an older
    /// one (it also mends a copy that disagrees at the same version).
    Repair { stored: &'a str },
}
