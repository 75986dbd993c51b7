//! User profiles (C1, Q1) and the username claims that keep names unique.

use serde::{Deserialize, Serialize};

use super::{
    Busy, Item, ItemType, Store, StoreError,
    idempotency::{Account, Answer, Created, Idempotency},
    n, s,
    table::{Committing, Deleted, Expr, Landed, Outcome, Query, TxOutcome, Write},
};
use super::{FanOut, Requests};
use crate::{
    ids::UserId,
    keys::{self, ERASED_SK, Entity, Key, PROFILE_SK, USERNAME_SK},
    model::User,
    revision::{Expected, Revision},
    text::Username,
    timestamp,
};

/// How often a rename re-reads a profile that changed under it before giving up.
const OPTIMISTIC_ATTEMPTS: usize = 5;

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
    /// Each follower shard's count as the fan-out last copied it, by shard
    /// (`"00"`..): their sum is the follower count
    /// ([`crate::store::follows`]). Absent until the first follower.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub follower_shards: std::collections::BTreeMap<String, ShardCount>,
    /// The authors they pull (their pull follows, [`crate::store::follows`]):
    /// their home read merges these authors' posts. A string set, at most
    /// [`super::follows::PULL_LIMIT`]; absent while empty. Written by the
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
            follower_shards: std::collections::BTreeMap::new(),
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

    /// Their follower count: the shards' counts as the fan-out last copied
    /// them.
    pub fn follower_count(&self) -> u64 {
        self.follower_shards.values().map(|c| c.count).sum()
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
pub(super) struct UsernameClaim {
    user_id: UserId,
    username: Username,
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
            user_id: profile.user_id.clone(),
            username: profile.username.clone(),
            created_at: Some(profile.created_at.clone()),
            updated_at: Some(profile.updated_at.clone()),
            version: Some(profile.version),
        }
    }

    pub(super) fn key(username: &Username) -> Item {
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

/// Who is writing, as the caller's own partition tells: the profile, or
/// the mark an erased account leaves, or neither. Every write request but
/// `POST /users` reads it first ([`crate::store::Requests::writer`]), before it looks at its
/// target.
#[derive(Debug, Clone)]
pub enum Writer {
    /// The caller has a profile (a user who signed up again after an
    /// erasure has one again).
    Active(UserItem),
    /// The caller's account was erased: no profile, and its mark. Every
    /// write answers [`StoreError::AccountErased`].
    Erased,
    /// The caller never made a profile (or it is not there yet).
    NoProfile,
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

impl Writer {
    /// The profile of a caller whose write copies it (C2, C3, C4 create):
    /// [`StoreError::AccountErased`] for an erased account,
    /// [`StoreError::NoProfile`] without a profile.
    pub fn profile(self) -> Result<UserItem, StoreError> {
        match self {
            Writer::Active(profile) => Ok(profile),
            Writer::Erased => Err(StoreError::AccountErased),
            Writer::NoProfile => Err(StoreError::NoProfile),
        }
    }
}

impl Requests<'_> {
    /// Who `user` is as a writer (request): one strongly consistent Query of
    /// their partition, `SK BETWEEN "ERASED" AND "PROFILE"`, which reads the
    /// profile and the erasure mark (and nothing else: the rename's place,
    /// `RENAME`, sorts after both) for one read unit, where a GetItem of
    /// each would cost two.
    pub async fn writer(&self, user: &UserId) -> Result<Writer, StoreError> {
        let query = Query::partition(keys::user_pk(user))
            .between(ERASED_SK.to_owned(), PROFILE_SK.to_owned())
            .consistent();
        let (mut profile, mut erased) = (None, false);
        for found in self.db.query_up_to("writer", &query, None, 2).await? {
            match Key::of(&found)?.sk.as_str() {
                PROFILE_SK => profile = Some(UserItem::decode(found)?),
                ERASED_SK => erased = true,
                _ => {}
            }
        }
        Ok(match (profile, erased) {
            (Some(profile), _) => Writer::Active(profile),
            (None, true) => Writer::Erased,
            (None, false) => Writer::NoProfile,
        })
    }

    /// Refuses the write of an erased account (request: [`crate::store::Requests::writer`],
    /// before the write looks at its target). A caller with a profile, or
    /// without one, goes on to the write's own answers.
    pub(super) async fn refuse_erased(&self, user: &UserId) -> Result<(), StoreError> {
        match self.writer(user).await? {
            Writer::Erased => Err(StoreError::AccountErased),
            Writer::Active(_) | Writer::NoProfile => Ok(()),
        }
    }

    /// C1 (request): creates the caller's profile and claims its username,
    /// atomically. A user whose earlier account was erased starts past its
    /// version, once the erasure's walk is done (strongly consistent read of
    /// the erasure mark first).
    pub async fn create_user(
        &self,
        user: &UserId,
        username: &Username,
    ) -> Result<User, StoreError> {
        match self.create_user_keyed(user, username, None).await? {
            Answer::New(user) => Ok(user),
            Answer::Replayed(_) => Err(StoreError::Internal(
                "a replay without an idempotency key".to_owned(),
            )),
        }
    }

    /// [`crate::store::Requests::create_user`], with an `Idempotency-Key` if the request had
    /// one ([`super::idempotency`]): its record goes in the same transaction,
    /// and a retry gets the first answer.
    pub async fn create_user_keyed(
        &self,
        user: &UserId,
        username: &Username,
        keyed: Option<&Idempotency>,
    ) -> Result<Answer<User>, StoreError> {
        let first = match self.erasure_mark(user).await? {
            Some(mark) if !mark.done => return Err(StoreError::BeingErased),
            Some(mark) => mark.version + 1,
            None => 1,
        };
        let item = UserItem::new(user, username, &timestamp::now()).starting_at(first);
        let mut tx = self.db.transaction("create user");
        let profile = tx.add("profile", Write::create(&item)?);
        let claim = tx.add("username claim", Write::create(&UsernameClaim::of(&item))?);
        let answer = User::from(item.clone());
        let record =
            Idempotency::add_record(keyed, &mut tx, item.account(), &answer, Created::User)?;
        let failed = match tx.commit_watched().await? {
            Committing::Done(TxOutcome::Committed) => return Ok(Answer::New(answer)),
            Committing::Done(TxOutcome::ConditionFailed(failed)) => failed,
            Committing::Held => return Err(StoreError::IdempotencyKeyInFlight),
            Committing::Throttled => {
                return Err(StoreError::Internal("create user: throttled".into()));
            }
        };
        match (keyed, record) {
            (Some(keyed), Some(record)) if failed.failed(record) => {
                Ok(Answer::Replayed(self.replay(item.account(), keyed).await?))
            }
            _ if failed.failed(profile) => Err(StoreError::ProfileExists),
            _ if failed.failed(claim) => Err(StoreError::UsernameTaken),
            _ => Err(failed.unexpected("create user")),
        }
    }

    /// Q1 (request): one eventually consistent GetItem.
    pub async fn get_user(&self, user: &UserId) -> Result<Option<User>, StoreError> {
        Ok(self.read_profile(user, false).await?.map(User::from))
    }

    /// Q1 by name (request, `GET /users?username=`), ignoring case: two
    /// eventually consistent GetItems, of the name's claim, then of the
    /// profile it names (which alone holds the follow counts).
    pub async fn find_user(&self, username: &Username) -> Result<Option<User>, StoreError> {
        let claim = self
            .db
            .get_entity::<UsernameClaim>(UsernameClaim::key(username), false);
        let Some(claim) = claim.await? else {
            return Ok(None);
        };
        // The claim's copy of the profile has no counts (the fan-out keeps
        // the follower count on the profile alone): the profile is read.
        self.get_user(&claim.user_id).await
    }

    /// C1 (edit; request): renames a user. The profile change, the release of the old
    /// name and the claim of the new one commit together or not at all; the
    /// profile's `version` condition makes a concurrent rename retry instead of
    /// releasing a name it no longer holds. The profile is read with the
    /// erasure mark ([`crate::store::Requests::writer`]): an erased account, or one erased
    /// while the rename was under way (its condition then fails and the read
    /// finds the mark), answers [`StoreError::AccountErased`].
    pub async fn rename_user(
        &self,
        user: &UserId,
        username: &Username,
        expected: &Expected,
    ) -> Result<User, StoreError> {
        for _ in 0..OPTIMISTIC_ATTEMPTS {
            let current = match self.writer(user).await? {
                Writer::Active(profile) => profile,
                Writer::Erased => return Err(StoreError::AccountErased),
                Writer::NoProfile => return Err(StoreError::UserNotFound),
            };
            // Against what was read; the transaction's condition on the
            // profile then fails if it changed since, and it is read again.
            let revision = Revision::of_profile(current.username.as_str(), &current.updated_at);
            if !expected.admits(revision) {
                return Err(StoreError::PreconditionFailed);
            }
            if &current.username == username {
                return Ok(current.into());
            }
            let now = timestamp::after(&current.updated_at);
            let renamed = UserItem {
                username: username.clone(),
                updated_at: now.clone(),
                version: current.version + 1,
                ..current.clone()
            };
            let mut tx = self.db.transaction("rename");
            let profile = tx.add("profile", renamed_profile(&current, &renamed));
            let same_claim = keys::username_pk(&current.username) == keys::username_pk(username);
            let mut claim = None;
            let mine = Expr::new("userId = :me").value(":me", s(user.as_str()));
            if same_claim {
                // Only the case changed: the claim stays, its copy follows.
                // The profile's update tells whether the rename committed.
                let claim = UsernameClaim::of(&renamed);
                let follow = Write::put(&claim, Landed::Untold)?.when(mine);
                tx.add("username claim", follow);
            } else {
                let old = UsernameClaim::key(&current.username);
                let release = Write::delete(old, Deleted::Untold).when(mine);
                tx.add("old username claim", release);
                let new_claim = Write::create(&UsernameClaim::of(&renamed))?;
                claim = Some(tx.add("new username claim", new_claim));
            }
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(renamed.into()),
                TxOutcome::ConditionFailed(failed) if claim.is_some_and(|c| failed.failed(c)) => {
                    return Err(StoreError::UsernameTaken);
                }
                // The profile changed (or went) since we read it: read it again.
                TxOutcome::ConditionFailed(failed) if failed.failed(profile) => continue,
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("rename")),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the profile kept changing during the rename",
        ))
    }
}

impl Store {
    /// The profile item, strongly consistent when a write depends on it.
    pub(crate) async fn read_profile(
        &self,
        user: &UserId,
        consistent: bool,
    ) -> Result<Option<UserItem>, StoreError> {
        self.db.get_entity(UserItem::key(user), consistent).await
    }

    /// The mark of `user`'s erased account, if any (strongly consistent:
    /// requests and the fan-out decide on it), in the user's partition
    /// beside the profile.
    pub async fn erasure_mark(&self, user: &UserId) -> Result<Option<ErasureMark>, StoreError> {
        self.db.get_entity(keys::erasure(user).item(), true).await
    }
}

/// The rename of `current` into `renamed`, on the condition that the profile
/// is still at the version read.
fn renamed_profile(current: &UserItem, renamed: &UserItem) -> Write {
    let change = Expr::new("SET username = :name, updatedAt = :now, version = version + :one")
        .value(":name", s(&renamed.username))
        .value(":now", s(&renamed.updated_at))
        .value(":one", n(1));
    let still = Expr::new("version = :seen").value(":seen", n(current.version));
    let landed = Landed::When(vec![
        ("version", n(renamed.version)),
        ("username", s(&renamed.username)),
    ]);
    Write::update(UserItem::key(&current.user_id), change, landed).when(still)
}

impl FanOut<'_> {
    /// Fan-out of a new post, comment or like, written under profile version
    /// `user_version` (one strongly consistent read of the profile):
    /// - its copied username may be stale: it may have been missed by a
    ///   rename whose walk read GSI1 before the index showed it. If the
    ///   profile has moved on since, copies its current name and answers
    ///   [`Author::Renamed`] (the copy landed, or a newer one did);
    /// - its author's account may have been erased while it was being
    ///   written (the write had read the profile before): then it is the
    ///   erased account's, [`Author::Erased`], and the caller removes it.
    pub async fn author_of_new_item(
        &self,
        key: &Key,
        user: &UserId,
        user_version: u64,
    ) -> Result<Author, StoreError> {
        let Some(profile) = self.read_profile(user, true).await? else {
            let mark = self.erasure_mark(user).await?;
            return Ok(match mark {
                Some(mark) if user_version <= mark.version => Author::Erased,
                _ => Author::Current,
            });
        };
        if user_version < profile.first_version {
            return Ok(Author::Erased);
        }
        if profile.version <= user_version {
            return Ok(Author::Current);
        }
        self.copy_username_onto(key.item(), &profile).await?;
        Ok(Author::Renamed(profile))
    }

    /// One username copy; `false` when the item already had this version (or
    /// is gone).
    pub(super) async fn copy_username_onto(
        &self,
        item: Item,
        user: &UserItem,
    ) -> Result<bool, StoreError> {
        let key: Item = item
            .into_iter()
            .filter(|(name, _)| name == keys::PK || name == keys::SK)
            .collect();
        let copy = UsernameCopy {
            username: &user.username,
            version: user.version,
        };
        let over = Overwrite::Older {
            since: user.first_version,
        };
        self.write_username(key, copy, over).await
    }
}

impl Store {
    /// Writes a profile's username onto the item at `key`, as `over` allows:
    /// the one write behind the fan-out's copies and the audit's repairs.
    /// `false` when the condition refused it.
    pub(crate) async fn write_username(
        &self,
        key: Item,
        copy: UsernameCopy<'_>,
        over: Overwrite<'_>,
    ) -> Result<bool, StoreError> {
        let change = Expr::new("SET username = :name, userVersion = :uv")
            .value(":name", s(copy.username))
            .value(":uv", n(copy.version));
        let condition = match over {
            // Never onto what an erased account of the same user wrote.
            Overwrite::Older { since } => Expr::item_exists()
                .and("userVersion < :uv AND userVersion >= :since")
                .value(":since", n(since)),
            Overwrite::Repair { stored } => {
                Expr::new("username = :stored AND userVersion <= :uv").value(":stored", s(stored))
            }
        };
        let landed = Landed::When(vec![
            ("username", s(copy.username)),
            ("userVersion", n(copy.version)),
        ]);
        let write =
            Write::update(key, change, landed).when(condition.value(":uv", n(copy.version)));
        let outcome = self.db.write("copy username", &write).await?;
        Ok(matches!(outcome, Outcome::Done(_)))
    }
}

/// Who wrote a new item, as the fan-out finds it.
#[derive(Debug)]
pub enum Author {
    /// The profile it copied is the current one.
    Current,
    /// The profile was renamed since; its name is on the item now.
    Renamed(UserItem),
    /// The account that wrote it has been erased.
    Erased,
}

/// A profile's name and version, as copied onto what the user wrote.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UsernameCopy<'a> {
    pub username: &'a Username,
    pub version: u64,
}

/// Which copies a username write may replace.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Overwrite<'a> {
    /// One of an older profile version, not older than the profile's first
    /// (the fan-out: in order, once).
    Older { since: u64 },
    /// The value `stored` the audit read, at this profile version or an older
    /// one (it also mends a copy that disagrees at the same version).
    // Only the audit (the `admin` feature) repairs.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    Repair { stored: &'a str },
}

#[cfg(test)]
mod tests {
    use super::UserItem;
    use crate::ids::UserId;
    use crate::keys::{ERASED_SK, PROFILE_SK, RENAME_SK};
    use crate::text::Username;
    use serde_dynamo::AttributeValue;

    /// A profile's `pulls` is stored as the string set the follows' `ADD
    /// pulls :author` adds to (a list there fails that update), and read
    /// back as written; none stored while empty.
    #[test]
    fn pulls_are_a_string_set_and_absent_while_empty() -> Result<(), Box<dyn std::error::Error>> {
        let user = UserId::parse("reader")?;
        let mut profile = UserItem::new(&user, &Username::parse("reader")?, "2026-11-27T00:00:00Z");
        let empty: serde_dynamo::Item = serde_dynamo::to_item(&profile)?;
        assert!(!empty.contains_key("pulls"), "{empty:?}");
        profile.pulls = vec![UserId::parse("star-1")?, UserId::parse("star-2")?];
        let item: serde_dynamo::Item = serde_dynamo::to_item(&profile)?;
        assert_eq!(
            item.get("pulls"),
            Some(&AttributeValue::Ss(vec![
                "star-1".to_owned(),
                "star-2".to_owned()
            ]))
        );
        let back: UserItem = serde_dynamo::from_item(item)?;
        assert_eq!(back.pulls, profile.pulls);
        Ok(())
    }

    /// The writer read's range, `ERASED` to `PROFILE`, holds the erasure
    /// mark and the profile, and not the rename walk's place.
    #[test]
    fn the_writer_read_spans_the_mark_and_the_profile_only() {
        let range = ERASED_SK..=PROFILE_SK;
        assert!(range.contains(&ERASED_SK) && range.contains(&PROFILE_SK));
        assert!(!range.contains(&RENAME_SK), "{RENAME_SK} sorts after");
    }
}
