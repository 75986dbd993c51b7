//! Validated identifiers. Every id that reaches a key passed through here, so no
//! client text can smuggle a `#` or another entity's key prefix into a key.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use ulid::Ulid;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum IdError {
    #[error("{kind} must be a 26-character ULID in canonical upper-case form")]
    NotUlid { kind: &'static str },
    #[error("userId must be 1–128 characters of A–Z, a–z, 0–9 and . _ - | @")]
    BadUserId,
    #[error("Idempotency-Key must be 1–64 characters of A–Z, a–z, 0–9 and . _ - :")]
    BadIdempotencyKey,
}

/// A client's `Idempotency-Key`: the name under which a creating write's
/// first answer is kept for its retries (`store::idempotency`). A UUID fits;
/// no `#`, so it cannot reach another key prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub const MAX_LEN: usize = 64;

    pub fn parse(raw: &str) -> Result<Self, IdError> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':');
        if raw.is_empty() || raw.len() > Self::MAX_LEN || !raw.chars().all(allowed) {
            return Err(IdError::BadIdempotencyKey);
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = IdError;
    fn try_from(raw: String) -> Result<Self, IdError> {
        Self::parse(&raw)
    }
}

impl From<IdempotencyKey> for String {
    fn from(key: IdempotencyKey) -> String {
        key.0
    }
}

/// A user's id is the caller's identity: the `sub` claim of their JWT (a UUID for
/// Cognito; other issuers use forms like `auth0|123`), so its alphabet is wider
/// than a ULID's, but it never contains `#`, the key separator.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserId(String);

impl UserId {
    pub const MAX_LEN: usize = 128;

    pub fn parse(raw: &str) -> Result<Self, IdError> {
        let allowed =
            |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '|' | '@');
        if raw.is_empty() || raw.len() > Self::MAX_LEN || !raw.chars().all(allowed) {
            return Err(IdError::BadUserId);
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for UserId {
    type Error = IdError;
    fn try_from(raw: String) -> Result<Self, IdError> {
        Self::parse(&raw)
    }
}

impl From<UserId> for String {
    fn from(id: UserId) -> String {
        id.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Server-generated, time-sortable ids. Sorting them as strings sorts them by
/// creation time, which is what makes "newest first" a plain key order.
macro_rules! ulid_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(Ulid);

        impl $name {
            pub fn generate() -> Self {
                Self(Ulid::generate())
            }

            /// When the id was made, in milliseconds since the epoch.
            pub fn millis(&self) -> u64 {
                self.0.timestamp_ms()
            }

            /// When the id was made, as the item's `createdAt`: one instant
            /// for both, so that listing by id is listing by `createdAt`.
            pub fn created_at(&self) -> String {
                let nanos = i128::from(self.0.timestamp_ms()) * 1_000_000;
                time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
                    .map(crate::timestamp::format)
                    .unwrap_or_else(|_| crate::timestamp::now())
            }

            /// The id as a URN, its 128 bits spelled as a UUID: permanent
            /// and the same wherever the API is served from (an Atom
            /// entry's `id`).
            pub fn urn(&self) -> String {
                let hex = format!("{:032x}", self.0.0);
                format!(
                    "urn:uuid:{}-{}-{}-{}-{}",
                    &hex[..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..]
                )
            }

            /// Only the canonical spelling is accepted, so one id has one key.
            pub fn parse(raw: &str) -> Result<Self, IdError> {
                match Ulid::from_string(raw) {
                    Ok(ulid) if ulid.to_string() == raw => Ok(Self(ulid)),
                    _ => Err(IdError::NotUlid { kind: $kind }),
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(raw: String) -> Result<Self, IdError> {
                Self::parse(&raw)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0.to_string()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

ulid_id!(
    /// Identifies a post.
    PostId,
    "postId"
);
ulid_id!(
    /// Identifies a comment within its post.
    CommentId,
    "commentId"
);

impl PostId {
    /// Where the post stands in lists once published at `published_ms`
    /// (milliseconds since the epoch): its id with that time in place of
    /// its creation time (the same random bits). Lists are in this order,
    /// so a draft published today comes before yesterday's posts; a post
    /// published as it was created is listed under its own id.
    pub fn listed_at(&self, published_ms: u64) -> PostId {
        PostId(Ulid::from_parts(published_ms, self.0.random()))
    }

    /// Milliseconds since the epoch of the id's time.
    pub fn timestamp_ms(&self) -> u64 {
        self.0.timestamp_ms()
    }
}
impl CommentId {
    /// A new comment's id, saying where the comment lives: in a hot post's
    /// shard `k` (below 128), or (`None`) in its post's own partition. The
    /// id's last byte holds it (its top bit set, and `k`; cleared for the
    /// post's partition); the other 72 random bits keep ids of one
    /// millisecond apart, and the time prefix keeps them in time order.
    pub fn generate_in(shard: Option<u8>) -> Self {
        let random = Ulid::generate().0;
        let last = match shard {
            None => random & 0x7F,
            Some(k) => 0x80 | u128::from(k & 0x7F),
        };
        Self(Ulid((random & !0xFF) | last))
    }

    /// A new comment's id for one of a hot post's `shards`, picked by the
    /// id's own random bits ([`CommentId::generate_in`]).
    pub fn generate_spread(shards: u8) -> Self {
        let random = Ulid::generate().0;
        let k = (random >> 8) % u128::from(shards.clamp(1, 128));
        // Below 128, so it fits.
        Self::generate_in(u8::try_from(k).ok())
    }

    /// The shard of a hot post an id made by [`CommentId::generate_in`]
    /// says its comment lives in. Ids made before it said so have a random
    /// last byte: a comment not found in the shard its id names is looked
    /// for in its post's own partition.
    pub fn shard(&self) -> Option<u8> {
        let last = (self.0.0 & 0xFF) as u8;
        (last & 0x80 != 0).then_some(last & 0x7F)
    }
}

ulid_id!(
    /// Identifies a like within its post; it orders the post's likes by time.
    LikeId,
    "likeId"
);
ulid_id!(
    /// Identifies a follow; it orders a user's follows and followers by time.
    FollowId,
    "followId"
);
ulid_id!(
    /// Identifies a block; it orders a user's blocks by time.
    BlockId,
    "blockId"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_accept_identity_provider_subjects() {
        for ok in [
            "0b3f1e2a-8c1d-4f5e-9a7b-2c3d4e5f6a7b",
            "auth0|12345",
            "a",
            "user.name@example_1",
        ] {
            assert_eq!(
                UserId::parse(ok).map(|id| id.to_string()),
                Ok(ok.to_owned())
            );
        }
    }

    #[test]
    fn user_ids_reject_key_separators_and_junk() {
        let too_long = "a".repeat(UserId::MAX_LEN + 1);
        for bad in [
            "",
            "a#b",
            "USER#x",
            "with space",
            "ü",
            "a/b",
            too_long.as_str(),
        ] {
            assert_eq!(UserId::parse(bad), Err(IdError::BadUserId), "{bad:?}");
        }
    }

    #[test]
    fn idempotency_keys_are_bounded_and_never_hold_a_separator() {
        assert!(IdempotencyKey::parse("0b3f1e2a-8c1d-4f5e-9a7b-2c3d4e5f6a7b").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(64)).is_ok());
        for bad in ["", "a#b", "with space", "ü", &"k".repeat(65)] {
            assert_eq!(
                IdempotencyKey::parse(bad),
                Err(IdError::BadIdempotencyKey),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn ulids_round_trip_and_only_canonical_form_parses() {
        let id = PostId::generate();
        let text = id.to_string();
        assert_eq!(PostId::parse(&text), Ok(id));
        assert!(PostId::parse(&text.to_lowercase()).is_err());
        assert!(PostId::parse("POST#01ARZ3NDEKTSV4RRFFQ69G5FAV").is_err());
        assert!(PostId::parse("01ARZ3NDEKTSV4RRFFQ69G5FA").is_err());
        assert!(CommentId::parse("").is_err());
    }

    #[test]
    fn a_comment_id_says_where_its_comment_lives() {
        for k in [0, 1, 17, 127] {
            let id = CommentId::generate_in(Some(k));
            assert_eq!(id.shard(), Some(k));
            assert_eq!(CommentId::parse(&id.to_string()).ok(), Some(id));
        }
        assert_eq!(CommentId::generate_in(None).shard(), None);
        let spread: std::collections::HashSet<u8> = (0..400)
            .filter_map(|_| CommentId::generate_spread(16).shard())
            .collect();
        assert_eq!(spread.len(), 16, "{spread:?}");
        let (a, b) = (
            CommentId::generate_in(Some(5)),
            CommentId::generate_in(None),
        );
        assert_ne!(a, CommentId::generate_in(Some(5)), "still unique");
        assert!(a.created_at() <= b.created_at());
    }

    #[test]
    fn ulids_sort_by_creation_time() {
        let listed = PostId::generate();
        let later = listed.listed_at(listed.timestamp_ms() + 1_000);
        assert!(later > listed);
        assert_eq!(listed.listed_at(listed.timestamp_ms()), listed);
        let older = PostId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
        let newer = PostId::generate();
        assert!(older.to_string() < newer.to_string());
    }
}
