//! A hot post's sharded counts: the shard counter items (`POST#p#k /
//! COUNTS`), their group counters (`POST#p#k / GROUP`, one per 16 shards),
//! the pointers in the post's own partition that say how many
//! shards hold its likes and comments, and which shard holds what.

use serde::{Deserialize, Serialize};

#[cfg(feature = "admin")]
use crate::store::table::{Expr, Landed, Write, n};
use crate::{
    ids::{CommentId, PostId, UserId},
    keys::{
        self, Counter, Entity, Item, ItemType, Key, LIKE_SHARDS_SK, PostPartition, SHARD_COUNTS_SK,
        SHARD_GROUP_SK,
    },
};

/// How many shard partitions a hot post spreads over at first. At 1,000
/// likes and 300 comments a second (4 WCU a like, 2 a comment's count) each
/// takes about 290 WCU a second, 29 % of a partition, with room for an
/// uneven hash.
pub const HOT_SHARDS: u8 = 16;

/// How many shards a hot post grows to at most, widening when its shards
/// are written near their limit or throttled
/// ([`Requests::widen`](crate::store::Requests::widen)): 128 partitions of
/// about 1,000 WCU a second, about 25,000 likes a second at 4 WCU each plus
/// their comments.
pub const MAX_SHARDS: u8 = 128;

/// How many times more shards a widening gives a post: eight, so that a
/// post's first widening takes it from 16 shards to the most, 128. A post
/// whose 16 shards are full takes some 4,000 writes a second, by how much
/// more its throttled writes do not say, and a widening takes a moment
/// while its shards refuse likes (three calls one after another, each slow
/// when the machines are busy: 16 → 64 → 128 took 1.2 s and 2.5 s under
/// `./infra/bench.sh --viral --confine`, docs/benchmarks.md); one widening
/// is half as long. What more shards cost: a deeper page of the post's
/// comments or likes reads one Query a shard (its first page reads a copy,
/// [`crate::store::first_pages`]), and the fan-out adds a count per
/// changed shard a batch. A post made hot by an earlier version with 32 or
/// 64 shards widens to 128 too.
const WIDEN_BY: u8 = 8;

/// How many shards a widening from `shards` gives a post.
pub fn wider_than(shards: u8) -> u8 {
    shards.saturating_mul(WIDEN_BY).min(MAX_SHARDS)
}

/// How many shard counters a post with `shards` shards may have: its own,
/// and those of its next widening (put by the widening, where absent, and
/// by earlier versions at the switch), which its deletion closes and walks.
/// A switch puts only its own 16 (and their group): while the post is
/// closed every like and comment waits, where a widening keeps the post
/// open.
pub fn counters_made(shards: u8) -> u8 {
    wider_than(shards).max(shards)
}

/// Whether `n` is a shard count a hot post can have: 16, 32, 64 or 128
/// (each a power of two: a widening from 16 makes 128; 32 and 64 are those
/// of posts widened by earlier versions, four times a widening).
pub fn is_shard_count(n: u8) -> bool {
    (HOT_SHARDS..=MAX_SHARDS).contains(&n) && n.is_power_of_two()
}

use crate::keys::shard_of;

/// The shard of a hot post that holds `liker`'s like and its marker (a
/// version before liked marks kept the marker beside the like, and looks
/// for it there).
pub fn liker_shard(liker: &UserId, shards: u8) -> u8 {
    shard_of(liker.as_str().as_bytes(), shards)
}

/// The shard a new like of `liker` goes to, on a try after `throttled`
/// throttles: the liker's ([`liker_shard`]) at first, then another each
/// time. A like may be in any shard (its mark in the liker's partition
/// says which, and makes it unique), so one that chance bursts of other
/// likes have filled turns no like away: at 0.01 of the limits a shard
/// takes 2.5 likes a second, and 128 shards at half their rate still met
/// their limit by chance.
pub fn like_shard(liker: &UserId, shards: u8, throttled: u32) -> u8 {
    if throttled == 0 {
        return liker_shard(liker, shards);
    }
    shard_of(format!("{liker}#{throttled}").as_bytes(), shards)
}

/// The shard whose counter counts `comment`.
pub fn comment_shard(comment: &CommentId, shards: u8) -> u8 {
    shard_of(comment.to_string().as_bytes(), shards)
}

/// How many shard counters one group counter sums: a post's widest 128
/// shards in 8 groups, so that the post keeps 8 entries of what it has
/// added (not 128: every write of the post item is billed by its size) and
/// a group 16.
pub const SHARDS_PER_GROUP: u8 = 16;

/// The group whose counter sums shard `shard`'s, in the partition of the
/// group's first shard (`group_of(shard)` × 16): the layout of the counters
/// of posts made hot by earlier versions (without `groupApart`).
pub fn group_of(shard: u8) -> u8 {
    shard / SHARDS_PER_GROUP
}

/// The group whose counter sums shard `shard`'s, in a partition of its
/// own: `POST#p#128` to `POST#p#135`, past every shard a post can have
/// ([`MAX_SHARDS`]), where no like or comment is written. Its number is its
/// partition's (128 + [`group_of`]), so that a post's `groupCounts` keeps
/// it apart from a group of the layout before. The fan-out adds onto a
/// group once a batch of each stream shard that carries its shards'
/// counters, a few hundred bytes each time: in a shard's own partition that
/// competed with the shard's likes (the hottest partitions of
/// `./infra/bench.sh --viral` at 20,000 likes a second were the groups'
/// shards, 0, 16, 32, …).
pub fn group_apart_of(shard: u8) -> u8 {
    MAX_SHARDS + group_of(shard)
}

/// A hot post's counts in one shard, changed in the transaction of each like,
/// unlike, comment and comment deletion counted there. Never below 0: what
/// counts down here was counted up here.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardCounterItem {
    pub post_id: PostId,
    pub shard: u8,
    #[serde(deserialize_with = "crate::model::count")]
    pub like_count: u64,
    #[serde(deserialize_with = "crate::model::count")]
    pub comment_count: u64,
    pub version: u64,
    /// Whether the fan-out adds it onto its group's counter
    /// ([`ShardGroupItem`]); absent on the counters of posts made hot before
    /// groups were, which it adds onto the post item itself (their entries
    /// in its `shardCounts`). Set when the counter is made, never changed:
    /// a shard's counts go one way only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grouped: bool,
    /// Whether its group counter is in a partition of its own
    /// ([`group_apart_of`]); absent on the counters of posts made hot
    /// before, whose group is in the partition of the group's first shard
    /// ([`group_of`]). Set when the counter is made, never changed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub group_apart: bool,
}

impl ShardCounterItem {
    pub fn new(post: PostId, shard: u8) -> Self {
        Self {
            post_id: post,
            shard,
            like_count: 0,
            comment_count: 0,
            version: 0,
            grouped: true,
            group_apart: true,
        }
    }

    /// The number of the group it is added onto (if grouped).
    pub fn group(&self) -> Option<u8> {
        match (self.grouped, self.group_apart) {
            (false, _) => None,
            (true, true) => Some(group_apart_of(self.shard)),
            (true, false) => Some(group_of(self.shard)),
        }
    }

    pub fn key_of(post: PostId, shard: u8) -> Key {
        Key::new(PostPartition::shard(post, shard).pk(), SHARD_COUNTS_SK)
    }

    /// The keys of a post's first `shards` counters: what its deletion
    /// closes.
    pub fn keys_of(post: PostId, shards: u8) -> impl Iterator<Item = Key> {
        (0..shards).map(move |shard| Self::key_of(post, shard))
    }

    /// The audit's repair: the counts (likes, comments) set to what the shard
    /// holds, if its `version` is still `seen`.
    #[cfg(feature = "admin")]
    pub fn set(post: PostId, shard: u8, counts: (u64, u64), seen: u64) -> Write {
        let change =
            Expr::new("SET #likes = :likes, #comments = :comments, version = version + :one")
                .with_counters()
                .value(":likes", n(counts.0))
                .value(":comments", n(counts.1))
                .value(":one", n(1));
        let still = Expr::new("version = :seen").value(":seen", n(seen));
        let landed = Landed::When(vec![
            (keys::VERSION, n(seen + 1)),
            (Counter::Likes.attribute(), n(counts.0)),
            (Counter::Comments.attribute(), n(counts.1)),
        ]);
        Write::update(Self::key_of(post, shard).item(), change, landed).when(still)
    }

    /// The counter of `counter` in it.
    pub fn of(&self, counter: Counter) -> u64 {
        match counter {
            Counter::Comments => self.comment_count,
            Counter::Likes => self.like_count,
        }
    }
}

impl Entity for ShardCounterItem {
    const TYPE: ItemType = ItemType::ShardCounter;
    /// Made only by the switch, whose post update says it landed.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(self.post_id, self.shard)
    }
}

/// The sum of 16 shard counters of a hot post ([`SHARDS_PER_GROUP`]), in a
/// partition of its own ([`group_apart_of`]; a post made hot by an earlier
/// version: in the partition of its group's first shard): the fan-out adds what each of
/// its shards counted since the version it holds of it (`shardCounts`, by
/// shard number), moving its `version`, and then what the group counted
/// onto the post (whose `groupCounts` holds each group's). One write of a
/// few hundred bytes per shard batch, and the post item written once per
/// group batch with 8 entries, where it would carry 128.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardGroupItem {
    pub post_id: PostId,
    pub group: u8,
    #[serde(deserialize_with = "crate::model::count")]
    pub like_count: u64,
    #[serde(deserialize_with = "crate::model::count")]
    pub comment_count: u64,
    pub version: u64,
    /// What the fan-out has added of each of its shards, by shard number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_counts: Option<std::collections::BTreeMap<String, Added>>,
}

impl ShardGroupItem {
    pub fn new(post: PostId, group: u8) -> Self {
        Self {
            post_id: post,
            group,
            like_count: 0,
            comment_count: 0,
            version: 0,
            shard_counts: None,
        }
    }

    /// Group `group`'s key: a group apart (128 on) in its own partition, one
    /// of the layout before (0–7) in its first shard's.
    pub fn key_of(post: PostId, group: u8) -> Key {
        let partition = if group >= MAX_SHARDS {
            group
        } else {
            group.saturating_mul(SHARDS_PER_GROUP)
        };
        Key::new(PostPartition::shard(post, partition).pk(), SHARD_GROUP_SK)
    }

    /// The groups apart of shards `shards` (each once, in order): those
    /// this version makes ([`group_apart_of`]).
    pub fn apart_groups_of(shards: std::ops::Range<u8>) -> impl Iterator<Item = u8> {
        Self::groups_of(shards).map(|group| MAX_SHARDS + group)
    }

    /// The groups of shards `shards` in the layout before (each once, in
    /// order).
    pub fn groups_of(shards: std::ops::Range<u8>) -> impl Iterator<Item = u8> {
        let first = group_of(shards.start);
        let end = shards
            .end
            .checked_sub(1)
            .map_or(0, |last| group_of(last) + 1);
        (first..end).filter(move |_| !shards.is_empty())
    }

    /// What the fan-out has added onto it of shard `shard`'s counts.
    pub fn added(&self, shard: u8) -> Option<Added> {
        self.shard_counts.as_ref()?.get(&shard.to_string()).copied()
    }
}

impl Entity for ShardGroupItem {
    const TYPE: ItemType = ItemType::ShardGroup;
    /// Made only with its post's counters, before the post counts in them.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(self.post_id, self.group)
    }
}

/// What the fan-out has added of one counter onto its owner (a group
/// counter's of each shard, a post's of each group): its counts and
/// version. Its names are one letter each: they ride on every write of
/// their owner, which DynamoDB bills by the KB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Added {
    #[serde(rename = "l")]
    pub like_count: u64,
    #[serde(rename = "c")]
    pub comment_count: u64,
    #[serde(rename = "v")]
    pub version: u64,
}

impl Added {
    /// The count of `counter` added.
    pub fn of(&self, counter: Counter) -> u64 {
        match counter {
            Counter::Comments => self.comment_count,
            Counter::Likes => self.like_count,
        }
    }
}

/// In a hot post's own partition, among its likes: how many shards hold the
/// rest (Q5's first Query meets it first).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LikeShardsItem {
    pub post_id: PostId,
    pub shards: u8,
}

impl LikeShardsItem {
    /// The shards the pointer names, if `item` is one.
    pub fn of(item: &Item) -> Option<u8> {
        pointer_shards::<Self>(item)
    }

    pub fn key_of(post: &PostId) -> Key {
        Key::new(keys::post_pk(post), LIKE_SHARDS_SK)
    }
}

/// The shards a pointer of type `E` names, if `item` is one.
fn pointer_shards<E: Entity + Into<u8>>(item: &Item) -> Option<u8> {
    (ItemType::of(item) == Some(E::TYPE))
        .then(|| crate::keys::from_item::<E>(item.clone()).ok())
        .flatten()
        .map(Into::into)
}

impl From<LikeShardsItem> for u8 {
    fn from(pointer: LikeShardsItem) -> u8 {
        pointer.shards
    }
}

impl From<CommentShardsItem> for u8 {
    fn from(pointer: CommentShardsItem) -> u8 {
        pointer.shards
    }
}

impl Entity for LikeShardsItem {
    const TYPE: ItemType = ItemType::LikeShards;
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(&self.post_id)
    }
}

/// In a hot post's own partition, after its comments: how many shards hold
/// the comments made since it was hot (Q4 meets it once it has read the
/// partition's comments).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentShardsItem {
    pub post_id: PostId,
    pub shards: u8,
}

impl CommentShardsItem {
    /// The shards the pointer names, if `item` is one.
    pub fn of(item: &Item) -> Option<u8> {
        pointer_shards::<Self>(item)
    }

    pub fn key_of(post: &PostId) -> Key {
        Key::new(keys::post_pk(post), keys::COMMENT_SHARDS_SK)
    }
}

impl Entity for CommentShardsItem {
    const TYPE: ItemType = ItemType::CommentShards;
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Self::key_of(&self.post_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::revision::stable_hash;

    #[test]
    fn sixteen_shards_make_a_group_in_its_first_shards_partition() {
        let post = PostId::parse("01J00000000000000000000000").expect("id");
        assert_eq!(group_of(0), 0);
        assert_eq!(group_of(15), 0);
        assert_eq!(group_of(16), 1);
        assert_eq!(group_of(MAX_SHARDS - 1), 7);
        assert_eq!(
            ShardGroupItem::groups_of(0..64).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(
            ShardGroupItem::groups_of(64..128).collect::<Vec<_>>(),
            [4, 5, 6, 7]
        );
        assert_eq!(ShardGroupItem::groups_of(3..3).count(), 0);
        let group = ShardGroupItem::key_of(post, 2);
        assert_eq!(group.pk, ShardCounterItem::key_of(post, 32).pk);
        // This version's: in partitions of their own, past every shard.
        assert_eq!(
            ShardGroupItem::apart_groups_of(0..MAX_SHARDS).collect::<Vec<_>>(),
            (128..136).collect::<Vec<_>>()
        );
        assert_eq!(group_apart_of(MAX_SHARDS - 1), 135);
        assert_eq!(
            ShardGroupItem::key_of(post, 130).pk,
            format!("POST#{post}#130")
        );
    }

    #[test]
    fn a_like_throttled_goes_to_another_shard_each_try() {
        let user = UserId::parse("user-7").expect("id");
        assert_eq!(
            like_shard(&user, MAX_SHARDS, 0),
            liker_shard(&user, MAX_SHARDS)
        );
        let tries: std::collections::BTreeSet<u8> =
            (0..8).map(|t| like_shard(&user, MAX_SHARDS, t)).collect();
        assert!(tries.len() >= 6, "{tries:?}");
        assert!(tries.iter().all(|&k| k < MAX_SHARDS));
        assert_eq!(
            like_shard(&user, MAX_SHARDS, 3),
            like_shard(&user, MAX_SHARDS, 3)
        );
    }

    #[test]
    fn a_liker_stays_in_one_shard_and_likers_spread() {
        let mut seen = [0usize; HOT_SHARDS as usize];
        for i in 0..1600 {
            let user = UserId::parse(&format!("user-{i}")).expect("id");
            let shard = liker_shard(&user, HOT_SHARDS);
            assert_eq!(shard, liker_shard(&user, HOT_SHARDS));
            seen[usize::from(shard)] += 1;
        }
        // 100 a shard on average; none far off.
        assert!(seen.iter().all(|&c| (60..=140).contains(&c)), "{seen:?}");
        // The hash is FNV-1a, fixed: a liker's shard never moves between builds.
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
