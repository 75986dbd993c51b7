//! User profiles (C1, Q1) and the username claims that keep names unique.

use std::collections::HashMap;

use crate::store::items::user::{ErasureMark, UserItem, UsernameClaim};

use super::{
    Busy, Item, Store, StoreError,
    idempotency::{Answer, Idempotency},
    items::request_record::Created,
    n, s,
    table::{Committing, Deleted, Expr, Landed, Outcome, Query, TxOutcome, Write},
};
use super::{FanOut, Requests};
use crate::{
    ids::UserId,
    keys::{self, ERASED_SK, Entity, Key, PROFILE_SK},
    mentions::Mentions,
    model::User,
    revision::{Expected, Revision},
    text::Username,
    timestamp,
};

/// How often a rename re-reads a profile that changed under it before giving up.
const OPTIMISTIC_ATTEMPTS: usize = 5;

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

    /// The users `names` mention (request: C2, its edit, C3): one
    /// BatchGetItem of the names' claims (`USERNAME#<folded>/USERNAME`),
    /// eventually consistent: half a unit a name, found or not (a claim is a
    /// few hundred bytes), where a strong read would cost twice that for
    /// what a second's lag can change (a name claimed or released that very
    /// second: the mention is plain text, or names whoever held it a moment
    /// ago). A name no one holds is left out. No names, no call: a post or
    /// comment without a mention costs what it did. A user who blocks
    /// `author` may not be mentioned by them: [`StoreError::Blocked`] (the
    /// marks of their blocks in `author`'s partition, one more
    /// BatchGetItem, strongly consistent: a block takes effect at once).
    pub(super) async fn find_mentioned(
        &self,
        author: &UserId,
        names: &[Username],
    ) -> Result<Mentions, StoreError> {
        if names.is_empty() {
            return Ok(Mentions::default());
        }
        // The parse keeps at most MAX_MENTIONS names: one call.
        let keys = names.iter().map(UsernameClaim::key).collect();
        let (found, _) = self.db.batch_get_with("mentions", keys, false).await?;
        let claims: Vec<UsernameClaim> = super::from_items(found)?;
        let marks: Vec<Item> = claims
            .iter()
            .filter(|claim| claim.user_id != *author)
            .map(|claim| keys::blocked_by(author, &claim.user_id).item())
            .collect();
        if !marks.is_empty() {
            let (blocking, _) = self
                .db
                .batch_get_with("mention blocks", marks, true)
                .await?;
            if !blocking.is_empty() {
                return Err(StoreError::Blocked);
            }
        }
        Ok(Mentions::resolved(claims.into_iter().filter_map(|claim| {
            let name = names
                .iter()
                .find(|name| name.folded() == claim.username.folded())?;
            Some((name, claim.user_id))
        })))
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
        (keys::VERSION, n(renamed.version)),
        ("username", s(&renamed.username)),
    ]);
    Write::update(UserItem::key(&current.user_id), change, landed).when(still)
}

/// The profiles of a batch's authors, read together ([`FanOut::authors`]):
/// a user among them found or found without a profile; one not among them
/// is read on its own.
#[derive(Debug, Default)]
pub struct Authors {
    read: HashMap<UserId, Option<UserItem>>,
}

impl FanOut<'_> {
    /// The profiles of `users`, strongly consistent: one BatchGetItem a
    /// hundred, at once (a batch's new items' authors, read together rather
    /// than one GetItem an item: a viral post's batch holds hundreds of
    /// likers).
    pub async fn authors(
        &self,
        users: impl IntoIterator<Item = UserId>,
    ) -> Result<Authors, StoreError> {
        let mut read: HashMap<UserId, Option<UserItem>> =
            users.into_iter().map(|user| (user, None)).collect();
        let keys = read.keys().map(UserItem::key).collect();
        let (items, _) = self
            .db
            .batch_get_with("the batch's authors", keys, true)
            .await?;
        for profile in super::from_items::<UserItem>(items)? {
            read.insert(profile.user_id.clone(), Some(profile));
        }
        Ok(Authors { read })
    }

    /// Fan-out of a new post, comment or like, written under profile version
    /// `user_version` (one strongly consistent read of the profile, unless
    /// `authors` read it already):
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
        authors: &Authors,
    ) -> Result<Author, StoreError> {
        let profile = match authors.read.get(user) {
            Some(read) => read.clone(),
            None => self.read_profile(user, true).await?,
        };
        let Some(profile) = profile else {
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
