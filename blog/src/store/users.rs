//! User profiles (C1, Q1) and the username claims that keep names unique.

use aws_sdk_dynamodb::types::{Delete, Put, ReturnConsumedCapacity, Update};
use serde::{Deserialize, Serialize};

use super::{
    Busy, Cancelled, ItemType, Store, StoreError, condition_held, from_item, key, n, s, to_item,
};
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
/// database itself, not a read before the write, rejects a taken name; and it
/// holds a copy of the profile, so that finding a user by name is one GetItem
/// of it. Every write of the profile's name writes it in the same transaction.
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
    /// The profile's copy; absent from claims written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
}

impl UsernameClaim {
    /// The claim of `profile`'s username, with its copy of the profile.
    pub(super) fn of(profile: &UserItem) -> Self {
        Self {
            pk: keys::username_pk(&profile.username),
            sk: USERNAME_SK.to_owned(),
            kind: ItemType::Username,
            user_id: profile.user_id.clone(),
            username: profile.username.clone(),
            created_at: Some(profile.created_at.clone()),
            updated_at: Some(profile.updated_at.clone()),
            version: Some(profile.version),
        }
    }

    pub(super) fn key(username: &str) -> super::Item {
        key(keys::username_pk(username), USERNAME_SK)
    }

    /// The profile it copies, if it holds a copy.
    fn profile(self) -> Option<User> {
        Some(User {
            user_id: self.user_id,
            username: self.username,
            created_at: self.created_at?,
            updated_at: self.updated_at?,
        })
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
        let claim = tx.put_new("username claim", &UsernameClaim::of(&item))?;
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

    /// Q1 by name (`GET /users?username=`), ignoring case: one eventually
    /// consistent GetItem of the name's claim, which copies the profile. A
    /// claim written before it held the copy costs a second read, of the
    /// profile it names.
    pub async fn find_user(&self, username: &str) -> Result<Option<User>, StoreError> {
        let Some(item) = self.get(UsernameClaim::key(username), false).await? else {
            return Ok(None);
        };
        let claim: UsernameClaim = from_item(item)?;
        let user = claim.user_id.clone();
        match claim.profile() {
            Some(profile) => Ok(Some(profile)),
            None => self.get_user(&user).await,
        }
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
            let renamed = UserItem {
                username: username.to_owned(),
                updated_at: now.clone(),
                version: current.version + 1,
                ..current.clone()
            };
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
            if same_claim {
                // Only the case changed: the claim stays, its copy follows.
                let follow = Put::builder()
                    .table_name(self.table())
                    .set_item(Some(to_item(&UsernameClaim::of(&renamed))?))
                    .condition_expression("userId = :me")
                    .expression_attribute_values(":me", s(user.as_str()))
                    .build()?;
                tx.put("username claim", follow);
            } else {
                let release = Delete::builder()
                    .table_name(self.table())
                    .set_key(Some(UsernameClaim::key(&current.username)))
                    .condition_expression("userId = :me")
                    .expression_attribute_values(":me", s(user.as_str()))
                    .build()?;
                tx.delete("old username claim", release);
                claim = Some(tx.put_new("new username claim", &UsernameClaim::of(&renamed))?);
            }
            match tx.commit().await {
                Ok(()) => return Ok(renamed.into()),
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
