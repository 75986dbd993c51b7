//! Every key of the single table, in one place.
//!
//! | item            | PK                  | SK                  | GSI1PK        | GSI1SK              |
//! |-----------------|---------------------|---------------------|---------------|---------------------|
//! | user profile    | `USER#<userId>`     | `PROFILE`           | –             | –                   |
//! | username claim  | `USERNAME#<lower>`  | `USERNAME`          | –             | –                   |
//! | post            | `POST#<postId>`     | `POST`              | `USER#<userId>` | `POST#<listedId>` (published), `POSTDRAFT#<postId>` (a draft) |
//! | post content    | `POST#<postId>`     | `POST#CONTENT`      | –             | –                   |
//! | comment         | `POST#<postId>`     | `COMMENT#<commentId>` | `USER#<userId>` | `COMMENT#<commentId>` |
//! | like            | `POST#<postId>`     | `LIKE#<likeId>`     | `USER#<userId>` | `LIKE#<likeId>`   |
//! | like marker (an older post's) | `POST#<postId>` | `LIKER#<userId>` | –           | –                   |
//! | hot post's likes pointer | `POST#<postId>` | `LIKE#~SHARDED`  | –             | –                   |
//! | hot post's comments pointer | `POST#<postId>` | `COMMENT#~SHARDED` | –         | –                   |
//! | hot post's comment | `POST#<postId>#<k>` | `COMMENT#<commentId>` | `USER#<userId>` | `COMMENT#<commentId>` |
//! | hot post's like | `POST#<postId>#<k>` | `LIKE#<likeId>`     | `USER#<userId>` | `LIKE#<likeId>`   |
//! | hot post's like marker (before likers moved) | `POST#<postId>#<k>` | `LIKER#<userId>` | – | –  |
//! | liker's mark    | `USER#<userId>`     | `~LIKED#<postId>`   | –             | –                   |
//! | hot post's shard counter | `POST#<postId>#<k>` | `COUNTS`     | –             | –                   |
//! | feed entry      | `FEED`              | `POST#<listedId>`   | –             | –                   |
//! | feed floor      | `FEED`              | `FLOOR`             | –             | –                   |
//! | schedule marker | `SCHEDULED`         | `<publishAt>#<postId>` | –          | –                   |
//! | tag entry       | `TAG#<tag>`         | `POST#<listedId>`   | –             | –                   |
//! | rename progress | `USER#<userId>`     | `RENAME`            | –             | –                   |
//! | erasure mark    | `USER#<userId>`     | `ERASED`            | –             | –                   |
//! | request record  | `USER#<userId>`     | `REQUEST#<key>`     | –             | –                   |
//! | parked record   | `PARKED#<k>` (`k` in `00`..`15`, a hash of the record's shard and sequence number); `PARKED` for those the earlier version parked | `RECORD#<seq>#<shardId>` | –        | –                   |
//! | follow          | `USER#<userId>`     | `~FOLLOWS#<followedId>` | `USER#<userId>` | `FOLLOW#<followId>` |
//! | block           | `USER#<userId>`     | `~BLOCKS#<blockedId>` | `USER#<userId>` | `BLOCK#<blockId>`  |
//! | blocked-by mark | `USER#<userId>`     | `~BLOCKEDBY#<blockerId>` | –          | –                   |
//! | follower entry  | `FOLLOWERS#<followedId>#<k>` | `FOLLOWER#<followId>` | – | –             |
//! | follower count  | `FOLLOWERS#<followedId>#<k>` | `COUNT`    | –             | –                   |
//! | home entry      | `HOME#<userId>`     | `POST#<listedId>`   | –             | –                   |
//! | delivery        | `DELIVERY#<postId>#<listedId>#<k>` | `DELIVERY` | –             | –                   |
//! | notification group | `NOTIFY#<userId>` | `GROUP#<kind>#<postId>`, `GROUP#follow` | `NOTIFY#<userId>` (once it has an actor) | `<lastAt>#<SK>` |
//! | notification    | `NOTIFY#<userId>`   | `NOTE#<kind>#<postId>[#<commentId>]` | `NOTIFY#<userId>` | `<at>#<SK>` |
//! | notifications seen | `NOTIFY#<userId>` | `SEEN`            | –             | –                   |
//!
//! A post's `listedId` is its id with its publication time in place of its
//! creation time ([`PostId::listed_at`]): the post id itself for a post
//! published as it was created, a later one for a draft published later.
//! Lists (the feed, GSI1's posts, tag lists) are keyed by it, so they are in
//! order of publication.
//!
//! A post's partition holds the post, its content, its comments and its likes
//! (the seeds' V3 `posts` container), so a comment or like and the post's
//! counter change in one single-partition transaction. The post item is small
//! (what lists show, the counts, the versions) and the content (up to 200 KB)
//! sits beside it, so that a like rewrites a few hundred bytes, never the text;
//! both share the prefix `POST`, so Q2 reads them with one Query. GSI1 is overloaded: under `USER#<userId>` it lists
//! what a user wrote, posts (Q3) as well as comments and likes (what a rename must
//! fan out to). Profiles, username claims, markers and feed entries carry no GSI1
//! keys, so the index stays sparse.
//!
//! A hot post (one whose partition DynamoDB throttled: [`crate::store::hot`])
//! spreads its new likes, their markers and its counts over shard partitions
//! `POST#<postId>#<k>`, `k` in `00`..: [`PostPartition`] names either.
//!
//! Every function here takes validated ids ([`crate::ids`]), never raw client text.
//!
//! Items know their keys: every entity of the table implements [`Entity`],
//! from which its `PK`/`SK`, its GSI1 keys and its `type` attribute follow.
//! Entity structs hold only their own fields; the keys are added when an item
//! is written ([`Entity::to_item`]) and ignored when one is read
//! ([`Entity::decode`]). So the key text and the trait through which items
//! use it are this one file.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::{
    ids::{BlockId, CommentId, FollowId, IdempotencyKey, LikeId, PostId, UserId},
    text::{Tag, Username},
};

/// What turning an entity into an item, or an item back into an entity, can
/// fail with. It is the key layer's own error, so that this file depends on
/// nothing of the store; the store turns it into an internal error
/// (`StoreError::Internal`) with the same words.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot encode {what}: {reason}")]
    Encode { what: &'static str, reason: String },
    #[error("cannot decode item: {0}")]
    Decode(String),
    #[error("an item without {0}")]
    NoKey(&'static str),
    #[error("{0}")]
    Misplaced(String),
}

pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI1: &str = "GSI1";
pub const GSI1PK: &str = "GSI1PK";
pub const GSI1SK: &str = "GSI1SK";
/// The attribute DynamoDB's TTL reads (template.yaml, `schema.rs`): an
/// item whose time (epoch seconds) has passed is deleted within days.
pub const EXPIRES_AT: &str = "expiresAt";
/// The attribute every versioned item (a profile, a post, a counter, a
/// copy) raises by one on each change, and copies compare.
pub const VERSION: &str = "version";

pub const PROFILE_SK: &str = "PROFILE";
pub const USERNAME_SK: &str = "USERNAME";
/// Where a rename's fan-out walk is, in the user's partition.
pub const RENAME_SK: &str = "RENAME";
pub const ERASED_SK: &str = "ERASED";
/// A caller's idempotency records sort after `PROFILE` (and `RENAME`), so
/// the writer's read (`ERASED`..`PROFILE`) never reads them.
pub const REQUEST_PREFIX: &str = "REQUEST#";
pub const POST_SK: &str = "POST";
pub const POST_CONTENT_SK: &str = "POST#CONTENT";
/// What the post item's and the content item's sort keys, and nothing else in
/// a post's partition, begin with.
pub const POST_ITEMS_PREFIX: &str = "POST";
pub const FEED_PK: &str = "FEED";
/// The feed's floor: the newest post id ever trimmed out of the feed.
pub const FEED_FLOOR_SK: &str = "FLOOR";

/// How many partitions hold the stream records the fan-out gave up on,
/// until `blog-admin replay` applies them (there are none while all is
/// well): a batch of 1,000 records parked at once writes about 63 to each
/// (`PARKED#<k>`, [`ParkedPartition`]), where one partition took them all.
pub const PARKED_PARTITIONS: u8 = 16;
/// The one partition the earlier version parked every record in; the replay
/// still reads it, and nothing writes to it any more.
const LEGACY_PARKED_PK: &str = "PARKED";
pub const PARKED_PREFIX: &str = "RECORD#";

/// What a user's partition key (and GSI1's) begins with.
const USER_PREFIX: &str = "USER#";

/// Sort-key prefixes that begin a list inside a partition.
pub const POST_PREFIX: &str = "POST#";
pub const COMMENT_PREFIX: &str = "COMMENT#";
pub const LIKE_PREFIX: &str = "LIKE#";
pub const LIKER_PREFIX: &str = "LIKER#";
/// A user's mark of a like they gave a hot post, in their own partition. It
/// sorts after `PROFILE`, `RENAME` and `REQUEST#…` (`~` is after every
/// letter), so the writer read (`ERASED`..`PROFILE`) never meets it.
pub const LIKED_PREFIX: &str = "~LIKED#";
/// A hot post's pointer to its like shards, in its own partition. It sorts
/// after every `LIKE#<ulid>` (a ULID is `0-9A-Z`), so the first item of Q5's
/// newest-first Query says whether the likes are sharded; the audit and the
/// lists skip it.
pub const LIKE_SHARDS_SK: &str = "LIKE#~SHARDED";
/// A hot post's pointer to its comment shards, in its own partition: it
/// sorts after every `COMMENT#<ulid>`, so Q4's oldest-first Query meets it
/// once it has read every comment the partition holds, which is when the
/// shards' comments (all made after the post was hot) come next.
pub const COMMENT_SHARDS_SK: &str = "COMMENT#~SHARDED";
/// A hot post's shard counter, in each shard partition.
pub const SHARD_COUNTS_SK: &str = "COUNTS";
/// A hot post's group counter (the sum of 16 shard counters), in a
/// partition of its own past the shards (`POST#p#128` on; a post made hot
/// by an earlier version: in its group's first shard's).
pub const SHARD_GROUP_SK: &str = "GROUP";

/// What ends the partition key of a hot post's first-page copies
/// (`POST#<postId>#PAGES`): not a shard number, so [`PostPartition::of_pk`]
/// and [`post_of_pk`] read no partition of the post in it, and nothing of
/// the copies is written or read in the post's own partition.
const FIRST_PAGES_SUFFIX: &str = "PAGES";
/// The sort key of a hot post's copy of its likes' first page.
pub const FIRST_LIKES_SK: &str = "LIKES";
/// The sort key of a hot post's copy of its comments' first page.
pub const FIRST_COMMENTS_SK: &str = "COMMENTS";
/// Between an entry's id and its shard in a first-page copy (`<id>#<k>`).
const ENTRY_SHARD_SEPARATOR: char = '#';

/// A post's counters, and the attributes that hold them: the one place of
/// their names: GSI1's projection and the audit's reads take them from
/// here, and a test ties the post item's fields to them. Each is exact: it changes in the
/// transaction that adds or removes what it counts (`store::hot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counter {
    Comments,
    Likes,
}

impl Counter {
    pub const ALL: [Counter; 2] = [Counter::Comments, Counter::Likes];

    /// The post item's attribute that holds it.
    pub const fn attribute(self) -> &'static str {
        match self {
            Counter::Comments => "commentCount",
            Counter::Likes => "likeCount",
        }
    }

    /// The sort-key prefix of what it counts, in the post's partition.
    pub fn counts(self) -> &'static str {
        match self {
            Counter::Comments => COMMENT_PREFIX,
            Counter::Likes => LIKE_PREFIX,
        }
    }
}

pub fn user_pk(user: &UserId) -> String {
    format!("{USER_PREFIX}{user}")
}

/// A user's profile: the item every write of content reads first.
pub fn profile(user: &UserId) -> Key {
    Key::new(user_pk(user), PROFILE_SK)
}

/// The mark an erased account leaves (`store::erasure`).
pub fn erasure(user: &UserId) -> Key {
    Key::new(user_pk(user), ERASED_SK)
}

/// Usernames are unique case-insensitively: the claim's key is the lower-cased name.
pub fn username_pk(username: &Username) -> String {
    format!("USERNAME#{}", username.folded())
}

pub fn post_pk(post: &PostId) -> String {
    format!("{POST_PREFIX}{post}")
}

/// A post's item (what lists show, its counts and versions), beside its
/// content in its partition.
pub fn post_item(post: &PostId) -> Key {
    Key::new(post_pk(post), POST_SK)
}

/// A post's content item.
pub fn post_content(post: &PostId) -> Key {
    Key::new(post_pk(post), POST_CONTENT_SK)
}

/// The user whose partition key `pk` is.
pub fn user_of_pk(pk: &str) -> Option<UserId> {
    pk.strip_prefix(USER_PREFIX)
        .and_then(|id| UserId::parse(id).ok())
}

/// The record of the caller's request made with idempotency key `key`.
pub fn request_record(user: &UserId, key: &IdempotencyKey) -> Key {
    Key::new(user_pk(user), format!("{REQUEST_PREFIX}{}", key.as_str()))
}

/// The post whose partition key `pk` is (its own partition or a shard's).
pub fn post_of_pk(pk: &str) -> Option<PostId> {
    PostPartition::of_pk(pk).map(|place| place.post)
}

/// One partition of a post: its own (`shard: None`: the post, its content,
/// its comments and, while it is quiet, its likes), or one of a hot post's
/// shards (`POST#<postId>#<k>`: likes, markers and a counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PostPartition {
    pub post: PostId,
    pub shard: Option<u8>,
}

impl PostPartition {
    pub fn own(post: PostId) -> Self {
        Self { post, shard: None }
    }

    pub fn shard(post: PostId, shard: u8) -> Self {
        Self {
            post,
            shard: Some(shard),
        }
    }

    pub fn pk(&self) -> String {
        match self.shard {
            None => post_pk(&self.post),
            Some(k) => format!("{POST_PREFIX}{}#{k:02}", self.post),
        }
    }

    /// The partition whose key `pk` is; `None` for anything but a post's.
    pub fn of_pk(pk: &str) -> Option<Self> {
        let rest = pk.strip_prefix(POST_PREFIX)?;
        let (id, shard) = match rest.split_once('#') {
            None => (rest, None),
            // As `pk` writes it: two digits at least (`07`, `42`, `127`).
            Some((id, k)) => {
                let shard = k.parse::<u8>().ok()?;
                (format!("{shard:02}") == k).then_some(())?;
                (id, Some(shard))
            }
        };
        let post = PostId::parse(id).ok()?;
        Some(Self { post, shard })
    }
}

/// The partition of a hot post's first-page copies (`POST#<postId>#PAGES`).
pub fn first_pages_pk(post: &PostId) -> String {
    format!("{POST_PREFIX}{post}#{FIRST_PAGES_SUFFIX}")
}

/// One entry of a first-page copy: the id of a like or a comment, and the
/// shard that holds it (`<id>#<k>`; the id alone: the post's own
/// partition).
pub fn page_entry(id: &str, shard: Option<u8>) -> String {
    match shard {
        None => id.to_owned(),
        Some(k) => format!("{id}{ENTRY_SHARD_SEPARATOR}{k}"),
    }
}

/// The id and the shard of a first-page copy's entry ([`page_entry`]);
/// `None` for text it does not write.
pub fn page_entry_parts(entry: &str) -> Option<(&str, Option<u8>)> {
    match entry.split_once(ENTRY_SHARD_SEPARATOR) {
        None => Some((entry, None)),
        Some((id, k)) => {
            let shard = k.parse::<u8>().ok()?;
            (shard.to_string() == k).then_some((id, Some(shard)))
        }
    }
}

pub fn comment_sk(comment: &CommentId) -> String {
    format!("{COMMENT_PREFIX}{comment}")
}

/// The comment whose sort key `sk` is; `None` for any other sort key,
/// the comment shards' pointer ([`COMMENT_SHARDS_SK`]) among them.
pub fn comment_of_sk(sk: &str) -> Option<CommentId> {
    CommentId::parse(sk.strip_prefix(COMMENT_PREFIX)?).ok()
}

pub fn like_sk(like: &LikeId) -> String {
    format!("{LIKE_PREFIX}{like}")
}

/// The like whose sort key `sk` is; `None` for any other sort key, the
/// like shards' pointer ([`LIKE_SHARDS_SK`]) and liker markers among them.
pub fn like_of_sk(sk: &str) -> Option<LikeId> {
    LikeId::parse(sk.strip_prefix(LIKE_PREFIX)?).ok()
}

/// One marker per (post, user): its conditional put is what makes a like unique.
pub fn liker_sk(user: &UserId) -> String {
    format!("{LIKER_PREFIX}{user}")
}

/// A comment, in the partition `place` of its post (its own, or a hot
/// post's shard: [`CommentId::shard`] says which a new comment went to).
pub fn comment(place: PostPartition, comment: &CommentId) -> Key {
    Key::new(place.pk(), comment_sk(comment))
}

/// A like, in the partition `place` of its post (its own, or a hot post's
/// shard).
pub fn like(place: PostPartition, like: &LikeId) -> Key {
    Key::new(place.pk(), like_sk(like))
}

/// `user`'s liker marker, beside their like in the partition `place`.
pub fn liker(place: PostPartition, user: &UserId) -> Key {
    Key::new(place.pk(), liker_sk(user))
}

/// `user`'s mark of their like of `post`, in their own partition: wherever
/// the post keeps the like, the mark stays here.
pub fn liked(user: &UserId, post: &PostId) -> Key {
    Key::new(user_pk(user), format!("{LIKED_PREFIX}{post}"))
}

/// Where a user's rename walk keeps its place (`store::rename`).
pub fn rename_progress(user: &UserId) -> Key {
    Key::new(user_pk(user), RENAME_SK)
}

/// GSI1 partition of everything a user wrote.
pub fn user_items_pk(user: &UserId) -> String {
    user_pk(user)
}

/// A published post under its author in GSI1 (Q3), by where it is listed
/// ([`PostId::listed_at`]).
pub fn user_post_sk(listed: &PostId) -> String {
    post_pk(listed)
}

/// The place ([`PostId::listed_at`]) that a published post's GSI1 sort
/// key `sk` names; `None` for a draft's key or any other.
pub fn listed_of_user_post_sk(sk: &str) -> Option<PostId> {
    match UserItemsKind::of_sk(sk)? {
        (UserItemsKind::Post, id) => PostId::parse(id).ok(),
        _ => None,
    }
}

/// An unpublished post's GSI1 sort key prefix (its author's drafts list):
/// after `POST#` in key order, and outside `begins_with(GSI1SK, "POST#")`.
pub const DRAFT_PREFIX: &str = "POSTDRAFT#";

pub fn user_draft_sk(post: &PostId) -> String {
    format!("{DRAFT_PREFIX}{post}")
}

pub fn user_comment_sk(comment: &CommentId) -> String {
    comment_sk(comment)
}

pub fn user_like_sk(like: &LikeId) -> String {
    like_sk(like)
}

/// A parked record's sort key: its sequence number zero-padded to the 40
/// digits DynamoDB Streams uses at most, so that a partition reads in
/// sequence order, then its shard (sequence numbers are the stream's, but the
/// shard keeps the key unique whatever the service does).
fn parked_sk(sequence_number: &str, shard_id: &str) -> String {
    format!("{PARKED_PREFIX}{sequence_number:0>40}#{shard_id}")
}

/// A partition of parked records: one of the [`PARKED_PARTITIONS`] that
/// records are parked in (`PARKED#<k>`), or the single `PARKED` one the
/// earlier version parked every record in (read by the replay, never
/// written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ParkedPartition {
    /// `PARKED`: what the earlier version parked, read first.
    Legacy,
    /// `PARKED#<k>`, `k` below [`PARKED_PARTITIONS`].
    Spread(u8),
}

impl ParkedPartition {
    /// The partition a record is parked in: a stable hash of its shard and
    /// sequence number (FNV-1a, then MurmurHash3's 64-bit finalizer: FNV-1a
    /// alone barely mixes its last bytes, and consecutive sequence numbers
    /// differ only in their last digits), so that parking it again writes
    /// the same item, in every build.
    pub fn of(sequence_number: &str, shard_id: &str) -> Self {
        let mut hash =
            crate::revision::stable_hash(format!("{shard_id}#{sequence_number}").as_bytes());
        hash ^= hash >> 33;
        hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
        hash ^= hash >> 33;
        hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        hash ^= hash >> 33;
        // The remainder is below `PARKED_PARTITIONS`, so it fits.
        let k = u8::try_from(hash % u64::from(PARKED_PARTITIONS)).unwrap_or(0);
        Self::Spread(k)
    }

    /// Every partition the replay reads, in the order it reads them: the
    /// legacy one, then `PARKED#00`..`PARKED#15`.
    pub fn all() -> impl Iterator<Item = Self> {
        std::iter::once(Self::Legacy).chain((0..PARKED_PARTITIONS).map(Self::Spread))
    }

    /// The partition the replay reads after this one; `None` after the last.
    pub fn next(self) -> Option<Self> {
        match self {
            Self::Legacy => Some(Self::Spread(0)),
            Self::Spread(k) if k + 1 < PARKED_PARTITIONS => Some(Self::Spread(k + 1)),
            Self::Spread(_) => None,
        }
    }

    /// Its partition key.
    pub fn pk(self) -> String {
        match self {
            Self::Legacy => LEGACY_PARKED_PK.to_owned(),
            Self::Spread(k) => format!("{LEGACY_PARKED_PK}#{k:02}"),
        }
    }

    /// The partition whose key is `pk`; `None` for any other key.
    pub fn of_pk(pk: &str) -> Option<Self> {
        if pk == LEGACY_PARKED_PK {
            return Some(Self::Legacy);
        }
        let k = pk.strip_prefix(LEGACY_PARKED_PK)?.strip_prefix('#')?;
        let k: u8 = k.parse().ok().filter(|_| k.len() == 2)?;
        (k < PARKED_PARTITIONS).then_some(Self::Spread(k))
    }

    /// The key of the record of `sequence_number` in `shard_id` in this
    /// partition.
    pub fn key(self, sequence_number: &str, shard_id: &str) -> Key {
        Key::new(self.pk(), parked_sk(sequence_number, shard_id))
    }
}

pub fn feed_sk(post: &PostId) -> String {
    post_pk(post)
}

/// The partition of scheduled posts' markers ([`crate::store::schedule`]).
pub const SCHEDULED_PK: &str = "SCHEDULED";

/// A scheduled post's marker: in time order.
pub fn scheduled_sk(publish_at: &str, post: &PostId) -> String {
    format!("{publish_at}#{post}")
}

/// The partition of a tag's list.
pub const TAG_PREFIX: &str = "TAG#";

pub fn tag_pk(tag: &Tag) -> String {
    format!("{TAG_PREFIX}{tag}")
}

/// A post's entry in a tag's list: newest first is key order, as in the feed.
pub fn tag_sk(post: &PostId) -> String {
    post_pk(post)
}

/// A user's follow of another, in the follower's partition: `~` sorts it
/// after `PROFILE`, `RENAME` and `REQUEST#…`, so the writer read never meets
/// it; its key is what makes a follow unique ([`crate::store::follows`]).
pub const FOLLOWS_PREFIX: &str = "~FOLLOWS#";

/// `follower`'s follow of `followed`.
pub fn follow(follower: &UserId, followed: &UserId) -> Key {
    Key::new(user_pk(follower), format!("{FOLLOWS_PREFIX}{followed}"))
}

/// Whom a follow item (its table sort key) follows.
pub fn followed_of_sk(sk: &str) -> Option<UserId> {
    sk.strip_prefix(FOLLOWS_PREFIX)
        .and_then(|id| UserId::parse(id).ok())
}

/// A follow under its follower in GSI1 (whom they follow, newest first):
/// after `COMMENT#` and before `LIKE#`, outside every other list's prefix.
pub const FOLLOW_PREFIX: &str = "FOLLOW#";

pub fn user_follow_sk(follow: &FollowId) -> String {
    format!("{FOLLOW_PREFIX}{follow}")
}

/// The follow whose GSI1 sort key `sk` is; `None` for any other key.
pub fn follow_of_user_follow_sk(sk: &str) -> Option<FollowId> {
    match UserItemsKind::of_sk(sk)? {
        (UserItemsKind::Follow, id) => FollowId::parse(id).ok(),
        _ => None,
    }
}

/// A user's block of another, in the blocker's partition
/// ([`crate::store::blocks`]): `~` sorts it after `PROFILE`, `RENAME` and
/// `REQUEST#…`, so the writer read never meets it, and `~BLOCKS#` is no
/// prefix of `~BLOCKEDBY#`, `~FOLLOWS#` or `~LIKED#` (nor they of it), so no
/// Query of those lists meets it. Its key makes a block unique.
pub const BLOCKS_PREFIX: &str = "~BLOCKS#";

/// `blocker`'s block of `blocked`.
pub fn block(blocker: &UserId, blocked: &UserId) -> Key {
    Key::new(user_pk(blocker), format!("{BLOCKS_PREFIX}{blocked}"))
}

/// Whom a block item (its table sort key) blocks.
pub fn blocked_of_sk(sk: &str) -> Option<UserId> {
    sk.strip_prefix(BLOCKS_PREFIX)
        .and_then(|id| UserId::parse(id).ok())
}

/// The mark a block leaves in the blocked user's own partition, which every
/// write of theirs that the block forbids checks in its transaction (a
/// ConditionCheck in the writer's own partition, never in the blocker's):
/// after `PROFILE`, `RENAME` and `REQUEST#…`, outside every other list's
/// prefix.
pub const BLOCKED_BY_PREFIX: &str = "~BLOCKEDBY#";

/// The mark that `blocker` blocked `blocked`, in `blocked`'s partition.
pub fn blocked_by(blocked: &UserId, blocker: &UserId) -> Key {
    Key::new(user_pk(blocked), format!("{BLOCKED_BY_PREFIX}{blocker}"))
}

/// A block under its blocker in GSI1 (whom they block, newest first):
/// before `COMMENT#`, outside every other list's prefix.
pub const BLOCK_PREFIX: &str = "BLOCK#";

pub fn user_block_sk(block: &BlockId) -> String {
    format!("{BLOCK_PREFIX}{block}")
}

/// The block whose GSI1 sort key `sk` is; `None` for any other key.
pub fn block_of_user_block_sk(sk: &str) -> Option<BlockId> {
    match UserItemsKind::of_sk(sk)? {
        (UserItemsKind::Block, id) => BlockId::parse(id).ok(),
        _ => None,
    }
}

/// What a GSI1 sort key of a user's partition ([`user_items_pk`]) lists,
/// told by its prefix: the one parse of those keys, for the readers of the
/// whole partition (the export, the audit) and the typed parsers above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserItemsKind {
    /// A published post, by where it is listed ([`user_post_sk`]).
    Post,
    /// An unpublished post, by its id ([`user_draft_sk`]).
    Draft,
    /// A comment ([`user_comment_sk`]).
    Comment,
    /// A like ([`user_like_sk`]).
    Like,
    /// A follow of another user ([`user_follow_sk`]).
    Follow,
    /// A block of another user ([`user_block_sk`]).
    Block,
}

impl UserItemsKind {
    pub const ALL: [UserItemsKind; 6] = [
        UserItemsKind::Post,
        UserItemsKind::Draft,
        UserItemsKind::Comment,
        UserItemsKind::Like,
        UserItemsKind::Follow,
        UserItemsKind::Block,
    ];

    /// The prefix its sort keys begin with. No prefix begins another
    /// (`POST#` and `POSTDRAFT#` part at their fifth letter), so a key is
    /// of one kind at most.
    pub const fn prefix(self) -> &'static str {
        match self {
            UserItemsKind::Post => POST_PREFIX,
            UserItemsKind::Draft => DRAFT_PREFIX,
            UserItemsKind::Comment => COMMENT_PREFIX,
            UserItemsKind::Like => LIKE_PREFIX,
            UserItemsKind::Follow => FOLLOW_PREFIX,
            UserItemsKind::Block => BLOCK_PREFIX,
        }
    }

    /// The kind of the GSI1 sort key `sk` and the id text after its
    /// prefix, unparsed (the caller says what an id that does not parse
    /// means); `None` for a key of no kind this version knows.
    pub fn of_sk(sk: &str) -> Option<(Self, &str)> {
        Self::ALL
            .into_iter()
            .find_map(|kind| Some((kind, sk.strip_prefix(kind.prefix())?)))
    }
}

/// How many partitions hold one user's followers: a follower's entry and
/// the count it is in go to the shard its id hashes to, so that an account
/// gaining followers fast spreads their writes (4 WCU a follow in the
/// shard: 8 shards take about 2,000 follows a second). Shards below
/// [`PUSH_SHARDS`] hold the followers whose homes a post's delivery writes
/// into; the others those who read the author's posts when they read their
/// home ([`crate::store::follows`], pull follows).
pub const FOLLOWER_SHARDS: u8 = 16;

/// The follower shards a post's delivery walks (`0..PUSH_SHARDS`); a pull
/// follower's entry is in shard `PUSH_SHARDS + k`.
pub const PUSH_SHARDS: u8 = 8;

/// Which of `shards` partitions holds what `bytes` name (a liker's like of
/// a hot post, a comment's count, a follower's entry): FNV-1a, 64 bits, the
/// same in every build, so that a shard never moves.
pub fn shard_of(bytes: &[u8], shards: u8) -> u8 {
    // The remainder is below `shards`, so it fits.
    u8::try_from(crate::revision::stable_hash(bytes) % u64::from(shards.max(1))).unwrap_or(0)
}

/// One shard of `user`'s followers: `FOLLOWERS#<userId>#<k>`.
pub fn followers_pk(user: &UserId, shard: u8) -> String {
    format!("FOLLOWERS#{user}#{shard:02}")
}

/// A follower's entry in its shard: oldest first is key order.
pub const FOLLOWER_PREFIX: &str = "FOLLOWER#";

pub fn follower_sk(follow: &FollowId) -> String {
    format!("{FOLLOWER_PREFIX}{follow}")
}

/// A follower shard's count of its entries.
pub const FOLLOWER_COUNT_SK: &str = "COUNT";

/// `user`'s followers newest first, in one partition: the fan-out's copy of
/// their follower entries, one item a window of [`FOLLOWER_WINDOW_MS`] of
/// follow time (`FOLLOWED#<userId> / W#<window>`,
/// [`crate::store::followers`]).
pub fn followed_pk(user: &UserId) -> String {
    format!("FOLLOWED#{user}")
}

/// How much follow time one follower window holds.
pub const FOLLOWER_WINDOW_MS: u64 = 100;

/// The sort-key prefix of follower windows.
pub const FOLLOWER_WINDOW_PREFIX: &str = "W#";

/// The window of `follow`'s time, zero-padded: key order is time order.
pub fn follower_window_sk(follow: &FollowId) -> String {
    follower_window_sk_at(follow.millis() / FOLLOWER_WINDOW_MS)
}

/// The sort key of window number `window` (follow time in milliseconds
/// over [`FOLLOWER_WINDOW_MS`]), zero-padded to 15 digits.
pub fn follower_window_sk_at(window: u64) -> String {
    format!("{FOLLOWER_WINDOW_PREFIX}{window:015}")
}

/// The window number whose sort key `sk` is; `None` for any other key.
pub fn window_of_follower_window_sk(sk: &str) -> Option<u64> {
    sk.strip_prefix(FOLLOWER_WINDOW_PREFIX)?.parse().ok()
}

/// The follower window that holds `follow` of `followed`.
pub fn follower_window(followed: &UserId, follow: &FollowId) -> Key {
    Key::new(followed_pk(followed), follower_window_sk(follow))
}

/// The attribute of a follower window that holds one follow (its value:
/// the follower's id): `f<followId>`.
pub fn follower_attribute(follow: &FollowId) -> String {
    format!("{FOLLOWER_ATTRIBUTE_PREFIX}{follow}")
}

/// The follow a follower window's attribute `name` holds; `None` for its
/// other attributes.
pub fn follow_of_attribute(name: &str) -> Option<FollowId> {
    FollowId::parse(name.strip_prefix(FOLLOWER_ATTRIBUTE_PREFIX)?).ok()
}

const FOLLOWER_ATTRIBUTE_PREFIX: &str = "f";

/// A user's notifications ([`crate::store::notifications`]).
pub fn notify_pk(user: &UserId) -> String {
    format!("NOTIFY#{user}")
}

/// A reader's home: the posts of the people they follow, newest first.
pub fn home_pk(reader: &UserId) -> String {
    format!("HOME#{reader}")
}

/// A post's entry in a home, by where it is listed, as in the feed.
pub fn home_sk(listed: &PostId) -> String {
    post_pk(listed)
}

/// The delivery of `post`, published at its place `listed`, into the homes
/// of its author's followers in follower shard `shard`: one partition each,
/// so their stream records spread over the stream's shards
/// ([`crate::store::home`]). A post published again (after being taken
/// back) is listed at a new place and delivered anew.
pub fn delivery(post: &PostId, listed: &PostId, shard: u8) -> Key {
    Key::new(
        format!("{DELIVERY_PREFIX}{post}#{listed}#{shard:02}"),
        DELIVERY_SK,
    )
}

/// Whether `key` is a delivery's (of this version's shape or an earlier
/// one's, `DELIVERY#<postId>#<k>`).
pub fn is_delivery(key: &Key) -> bool {
    key.sk == DELIVERY_SK && key.pk.starts_with(DELIVERY_PREFIX)
}

const DELIVERY_PREFIX: &str = "DELIVERY#";

pub const DELIVERY_SK: &str = "DELIVERY";

/// A DynamoDB item as the SDK sees it.
pub type Item = std::collections::HashMap<String, AttributeValue>;

/// The name of the attribute that holds an item's [`ItemType`].
pub const TYPE: &str = "type";

/// Declares [`ItemType`] and [`ItemType::ALL`] from one list, so that no
/// type can be missing from `ALL` (what the stream filter's test walks).
macro_rules! item_types {
    ($($(#[$meta:meta])* $variant:ident,)*) => {
        /// Which kind of entity an item is; stored as `type` so that stream
        /// records and offline tools can tell items apart without parsing
        /// keys.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub enum ItemType {
            $($(#[$meta])* $variant,)*
        }

        impl ItemType {
            /// Every type, in declaration order.
            pub const ALL: &[ItemType] = &[$(ItemType::$variant,)*];
        }
    };
}

item_types! {
    User,
    Username,
    Post,
    PostContent,
    Comment,
    Like,
    Liker,
    FeedEntry,
    FeedFloor,
    /// A post's entry in a tag's list (`TAG#t / POST#p`,
    /// [`crate::store::feed`]).
    TagEntry,
    /// A scheduled post's marker (`SCHEDULED / <publishAt>#<postId>`,
    /// [`crate::store::schedule`]).
    Scheduled,
    /// Where a rename's fan-out walk is (`USER#u / RENAME`).
    RenameProgress,
    /// What is left of an erased account (`USER#u / ERASED`,
    /// [`crate::store::erasure`]).
    Erasure,
    /// A hot post's counts in one shard (`POST#p#k / COUNTS`,
    /// [`crate::store::hot`]).
    ShardCounter,
    /// The sum of 16 of a hot post's shard counters (`POST#p#k / GROUP`,
    /// `k` a multiple of 16), added onto the post by the fan-out.
    ShardGroup,
    /// A hot post's pointer to its like shards (`POST#p / LIKE#~SHARDED`).
    LikeShards,
    /// A hot post's pointer to its comment shards (`POST#p / COMMENT#~SHARDED`).
    CommentShards,
    /// A user's mark of their like of a post (`USER#u / ~LIKED#p`,
    /// [`crate::store::likes`]).
    Liked,
    /// The first answer to a caller's creating request made with an
    /// `Idempotency-Key` (`USER#u / REQUEST#<key>`,
    /// [`crate::store::idempotency`]), deleted by TTL.
    RequestRecord,
    /// A follow (`USER#u / ~FOLLOWS#v`, [`crate::store::follows`]).
    Follow,
    /// A follower's entry in a shard of the followed user's followers
    /// (`FOLLOWERS#v#k / FOLLOWER#<followId>`).
    Follower,
    /// A block (`USER#u / ~BLOCKS#v`, [`crate::store::blocks`]).
    Block,
    /// A block's mark in the blocked user's partition (`USER#v /
    /// ~BLOCKEDBY#u`): what their writes against the blocker check.
    BlockedBy,
    /// A follower shard's count (`FOLLOWERS#v#k / COUNT`).
    FollowerCount,
    /// The fan-out's copy of a user's followers of one window of time
    /// (`FOLLOWED#v / W#<window>`, [`crate::store::followers`]).
    FollowerWindow,
    /// A post's entry in a reader's home (`HOME#u / POST#<listedId>`,
    /// [`crate::store::home`]).
    HomeEntry,
    /// A post's delivery into one follower shard's homes
    /// (`DELIVERY#p#listed#k / DELIVERY`).
    Delivery,
    /// A stream record the fan-out gave up on, kept until replayed
    /// (`PARKED#<k> / RECORD#…`, [`crate::store::parked`]).
    ParkedRecord,
    /// A group of a user's notifications: a post's likes, a hot post's
    /// comments, new followers (`NOTIFY#u / GROUP#…`,
    /// [`crate::store::notifications`]).
    NotificationGroup,
    /// One notification of a user's: a comment, a mention
    /// (`NOTIFY#u / NOTE#…`).
    Notification,
    /// Until when a user has read their notifications (`NOTIFY#u / SEEN`).
    NotificationsSeen,
    /// A hot post's copy of the keys of a list's first page, kept by the
    /// fan-out (`POST#p#PAGES / LIKES` and `/ COMMENTS`,
    /// [`crate::store::first_pages`]).
    FirstPage,
    /// A type this version does not know (written by a newer one).
    #[serde(other)]
    Other,
}

impl ItemType {
    /// The `type` attribute's value.
    pub fn attribute(self) -> Result<AttributeValue, KeyError> {
        serde_dynamo::to_attribute_value(self).map_err(|e| KeyError::Encode {
            what: "type",
            reason: e.to_string(),
        })
    }

    /// The type `item` says it is; `None` without a `type` attribute.
    pub fn of(item: &Item) -> Option<ItemType> {
        item.get(TYPE)
            .and_then(|v| serde_dynamo::from_attribute_value(v.clone()).ok())
    }
}

/// A primary key (of the table, or of GSI1 when [`Entity::gsi1`] gives it).
/// The one place the key attributes' names meet serde.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Key {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
}

impl Key {
    pub fn new(pk: String, sk: impl Into<String>) -> Self {
        Self { pk, sk: sk.into() }
    }

    /// The key as the SDK takes it.
    pub fn item(&self) -> Item {
        Item::from([
            (PK.to_owned(), AttributeValue::S(self.pk.clone())),
            (SK.to_owned(), AttributeValue::S(self.sk.clone())),
        ])
    }

    /// The table key of `item` (any item of the table has one).
    pub fn of(item: &Item) -> Result<Self, KeyError> {
        let part = |name: &'static str| {
            item.get(name)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .ok_or(KeyError::NoKey(name))
        };
        Ok(Self::new(part(PK)?, part(SK)?))
    }
}

/// An item of the table.
pub trait Entity: Serialize + DeserializeOwned {
    /// Its `type` attribute.
    const TYPE: ItemType;
    /// The attributes that make a stored item under this key the very write
    /// that made it (read back after a lost answer, see
    /// `store::table::Write::create`); empty when the key alone does, because
    /// it holds an id made for this write.
    const OWN: &'static [&'static str];

    /// Its `PK`/`SK`.
    fn key(&self) -> Key;

    /// Its `GSI1PK`/`GSI1SK`, if GSI1 lists it.
    fn gsi1(&self) -> Option<Key> {
        None
    }

    /// The item to write: its fields, its keys and its type.
    fn to_item(&self) -> Result<Item, KeyError> {
        let mut item: Item = serde_dynamo::to_item(self).map_err(|e| KeyError::Encode {
            what: "item",
            reason: e.to_string(),
        })?;
        let Key { pk, sk } = self.key();
        item.insert(PK.to_owned(), AttributeValue::S(pk));
        item.insert(SK.to_owned(), AttributeValue::S(sk));
        if let Some(Key { pk, sk }) = self.gsi1() {
            item.insert(GSI1PK.to_owned(), AttributeValue::S(pk));
            item.insert(GSI1SK.to_owned(), AttributeValue::S(sk));
        }
        item.insert(TYPE.to_owned(), Self::TYPE.attribute()?);
        Ok(item)
    }

    /// The entity an item holds (its keys and type are not fields).
    fn decode(item: Item) -> Result<Self, KeyError> {
        from_item(item)
    }

    /// [`Entity::decode`], its error turned into the caller's own (the table
    /// layer's reads give theirs); entities with a decoding of their own
    /// override `decode`, not this.
    fn from_item<E: From<KeyError>>(item: Item) -> Result<Self, E> {
        Self::decode(item).map_err(E::from)
    }
}

/// Any shape read from an item (an entity, or a projection of one).
pub fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, KeyError> {
    serde_dynamo::from_item(item).map_err(|e| KeyError::Decode(e.to_string()))
}

pub fn from_items<T: DeserializeOwned>(items: Vec<Item>) -> Result<Vec<T>, KeyError> {
    items.into_iter().map(from_item).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_is_keyed_by_its_post_and_place_and_an_earlier_shape_is_one_too() {
        let post = PostId::generate();
        let again = post.listed_at(post.timestamp_ms() + 1_000);
        let first = delivery(&post, &post, 3);
        let second = delivery(&post, &again, 3);
        assert_ne!(first, second, "published again: a delivery of its own");
        assert!(is_delivery(&first) && is_delivery(&second));
        let earlier = Key::new(format!("DELIVERY#{post}#03"), DELIVERY_SK);
        assert!(is_delivery(&earlier));
        assert!(!is_delivery(&Key::new(post_pk(&post), POST_SK)));
    }

    #[test]
    fn list_prefixes_do_not_overlap_other_items_of_the_same_partition() {
        let user = UserId::parse("u1").unwrap();
        // `LIKER#…` markers share the post partition with `LIKE#…` likes: a
        // begins_with(LIKE#) query must not see them.
        assert!(!liker_sk(&user).starts_with(LIKE_PREFIX));
        // The shard pointer sorts after every like, newest first it comes first.
        let newest = like_sk(&LikeId::parse("7ZZZZZZZZZZZZZZZZZZZZZZZZZ").unwrap());
        assert!(LIKE_SHARDS_SK.starts_with(LIKE_PREFIX) && LIKE_SHARDS_SK > newest.as_str());
        assert!(!SHARD_COUNTS_SK.starts_with(LIKE_PREFIX));
        for counter in [SHARD_COUNTS_SK, SHARD_GROUP_SK] {
            assert!(!counter.starts_with(LIKE_PREFIX) && !counter.starts_with(COMMENT_PREFIX));
        }
        assert!(!POST_SK.starts_with(COMMENT_PREFIX) && !POST_SK.starts_with(LIKE_PREFIX));
        // Q2's begins_with(POST) reads the post and its content, nothing else.
        for other in [COMMENT_PREFIX, LIKE_PREFIX, "LIKER#"] {
            assert!(!other.starts_with(POST_ITEMS_PREFIX));
        }
        assert!(POST_SK.starts_with(POST_ITEMS_PREFIX));
        assert!(POST_CONTENT_SK.starts_with(POST_ITEMS_PREFIX));
        // The writer's read (ERASED..PROFILE) never meets a request record.
        assert!(REQUEST_PREFIX > PROFILE_SK && REQUEST_PREFIX > RENAME_SK);
        // The feed's floor shares the feed partition with the entries.
        assert!(!FEED_FLOOR_SK.starts_with(POST_PREFIX));
    }

    #[test]
    fn partition_keys_give_their_ids_back() {
        let user = UserId::parse("u1").unwrap();
        assert_eq!(user_of_pk(&user_pk(&user)), Some(user));
        let post = PostId::generate();
        assert_eq!(post_of_pk(&post_pk(&post)), Some(post));
        assert_eq!(post_of_pk(&user_pk(&UserId::parse("u1").unwrap())), None);
        let shard = PostPartition::shard(post, 7);
        assert_eq!(shard.pk(), format!("POST#{post}#07"));
        assert_eq!(PostPartition::of_pk(&shard.pk()), Some(shard));
        assert_eq!(post_of_pk(&shard.pk()), Some(post));
        assert_eq!(PostPartition::of_pk(&format!("POST#{post}#7")), None);
        // Every shard a post can have, 0 to 127, gives its number back (a
        // third digit from 100: the fan-out coalesces those counters too).
        for k in 0..=u8::MAX {
            let shard = PostPartition::shard(post, k);
            assert_eq!(PostPartition::of_pk(&shard.pk()), Some(shard), "{k}");
        }
        for bad in ["007", "+7", "256", "1a", ""] {
            assert_eq!(
                PostPartition::of_pk(&format!("POST#{post}#{bad}")),
                None,
                "{bad}"
            );
        }
        assert_eq!(user_of_pk("FEED"), None);
        // The first-page copies' partition is no partition of the post.
        assert_eq!(PostPartition::of_pk(&first_pages_pk(&post)), None);
        assert_eq!(post_of_pk(&first_pages_pk(&post)), None);
    }

    #[test]
    fn a_first_page_entry_gives_its_id_and_shard_back() {
        let like = LikeId::generate().to_string();
        for shard in [None, Some(0), Some(7), Some(127)] {
            let entry = page_entry(&like, shard);
            assert_eq!(page_entry_parts(&entry), Some((like.as_str(), shard)));
        }
        for bad in ["a#", "a#07", "a#256", "a#-1", "a#1#2"] {
            assert_eq!(page_entry_parts(bad), None, "{bad}");
        }
    }

    #[test]
    fn post_partition_sort_keys_give_their_ids_back() {
        let comment = CommentId::generate();
        let like = LikeId::generate();
        assert_eq!(comment_of_sk(&comment_sk(&comment)), Some(comment));
        assert_eq!(like_of_sk(&like_sk(&like)), Some(like));
        let user = UserId::parse("u1").unwrap();
        for foreign in [
            like_sk(&like),
            COMMENT_SHARDS_SK.to_owned(),
            POST_SK.to_owned(),
            format!("{COMMENT_PREFIX}{comment}#1"),
        ] {
            assert_eq!(comment_of_sk(&foreign), None, "{foreign}");
        }
        for foreign in [
            comment_sk(&comment),
            LIKE_SHARDS_SK.to_owned(),
            liker_sk(&user),
            SHARD_COUNTS_SK.to_owned(),
            SHARD_GROUP_SK.to_owned(),
        ] {
            assert_eq!(like_of_sk(&foreign), None, "{foreign}");
        }
    }

    #[test]
    fn user_items_sort_keys_give_their_kind_and_id_back() {
        let post = PostId::generate();
        let listed = post.listed_at(post.timestamp_ms() + 1_000);
        let comment = CommentId::generate();
        let like = LikeId::generate();
        let follow = FollowId::generate();
        let cases = [
            (
                user_post_sk(&listed),
                UserItemsKind::Post,
                listed.to_string(),
            ),
            (user_draft_sk(&post), UserItemsKind::Draft, post.to_string()),
            (
                user_comment_sk(&comment),
                UserItemsKind::Comment,
                comment.to_string(),
            ),
            (user_like_sk(&like), UserItemsKind::Like, like.to_string()),
            (
                user_follow_sk(&follow),
                UserItemsKind::Follow,
                follow.to_string(),
            ),
        ];
        for (sk, kind, id) in &cases {
            assert_eq!(UserItemsKind::of_sk(sk), Some((*kind, id.as_str())), "{sk}");
        }
        // Every kind is in `ALL` once, and no prefix begins another.
        for kind in UserItemsKind::ALL {
            for other in UserItemsKind::ALL {
                assert_eq!(kind.prefix().starts_with(other.prefix()), kind == other);
            }
        }
        assert_eq!(UserItemsKind::of_sk(PROFILE_SK), None);
        assert_eq!(UserItemsKind::of_sk(&format!("{FOLLOWS_PREFIX}u2")), None);

        assert_eq!(listed_of_user_post_sk(&user_post_sk(&listed)), Some(listed));
        assert_eq!(listed_of_user_post_sk(&user_draft_sk(&post)), None);
        assert_eq!(listed_of_user_post_sk(&user_comment_sk(&comment)), None);
        assert_eq!(listed_of_user_post_sk(&format!("{POST_PREFIX}x")), None);
        assert_eq!(
            follow_of_user_follow_sk(&user_follow_sk(&follow)),
            Some(follow)
        );
        assert_eq!(follow_of_user_follow_sk(&user_like_sk(&like)), None);
        assert_eq!(follow_of_user_follow_sk(&format!("{FOLLOW_PREFIX}x")), None);
    }

    #[test]
    fn follower_window_sort_keys_give_their_window_back() {
        let follow = FollowId::generate();
        let window = follow.millis() / FOLLOWER_WINDOW_MS;
        let sk = follower_window_sk(&follow);
        assert_eq!(follower_window_sk_at(window), sk);
        assert_eq!(window_of_follower_window_sk(&sk), Some(window));
        assert_eq!(
            window_of_follower_window_sk(&follower_window_sk_at(0)),
            Some(0)
        );
        assert_eq!(window_of_follower_window_sk(FOLLOWER_COUNT_SK), None);
        assert_eq!(window_of_follower_window_sk(&follower_sk(&follow)), None);
        assert_eq!(
            window_of_follower_window_sk(&format!("{FOLLOWER_WINDOW_PREFIX}x")),
            None
        );
    }

    #[test]
    fn username_claims_ignore_case() {
        let name = |raw| Username::parse(raw).unwrap();
        assert_eq!(
            username_pk(&name("Alice_01")),
            username_pk(&name("aLICE_01"))
        );
    }
}
