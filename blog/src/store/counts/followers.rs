//! Follower counts: a followed user's followers counted in one counter a
//! follower shard (`FOLLOWERS#v#k / COUNT`, beside the shard's entries),
//! one up or down in each follow's and unfollow's transaction, its
//! `version` one up; the fan-out adds what each shard counted since onto the
//! followed profile's `followerCount` ([`super::FanOut::add_shard_counts`]);
//! an erasure closes the counters before it walks the shards
//! and empties them after; the audit recounts a shard against its entries.

use std::collections::BTreeMap;

use futures::future::try_join_all;

use super::{ShardCounter, Step, Tally, step};
use crate::store::{
    FanOut, StoreError,
    items::{
        follow::{FOLLOWER_COUNT_ATTRIBUTE, FOLLOWER_SHARDS_ATTRIBUTE, FollowerCountItem},
        user::UserItem,
    },
    n, s, signed,
    table::{Expr, Landed, Write},
};
#[cfg(feature = "admin")]
use crate::store::{from_item, table::Query};
use crate::{
    ids::UserId,
    keys::{self, FOLLOWER_SHARDS, ItemType, Key},
};

/// The count item's attribute an erasure sets (to the erased profile's
/// version) before it walks the shard: a follow of that account fails on it.
pub(in crate::store) const CLOSED: &str = "closed";

/// One up on a follower shard's count, on the condition that the followed
/// account (the profile version `first` starts it) is not being erased: no
/// follow needs the followed profile in its transaction, whose partition
/// would take every follow's write (`counted`).
pub(in crate::store) fn counted_open(
    followed: &UserId,
    shard: u8,
    first: u64,
) -> Result<Write, StoreError> {
    Ok(counted(followed, shard, Step::Up)?.when(open_since(first)))
}

/// A count not closed by an erasure of the account at `version` or later.
pub(in crate::store) fn open_since(version: u64) -> Expr {
    Expr::new("attribute_not_exists(#closed) OR #closed < :open_since")
        .name("#closed", CLOSED)
        .value(":open_since", n(version))
}

/// One up or down on a follower shard's count, its version one up
/// ([`step`]): an UpdateItem that makes the item on the first follow.
pub(in crate::store) fn counted(
    followed: &UserId,
    shard: u8,
    way: Step,
) -> Result<Write, StoreError> {
    let key = FollowerCountItem::key_of(followed, shard);
    let change = step(
        COUNT,
        way,
        "SET #type = :type, #user = :user, #shard = :shard REMOVE #expires",
    )
    .name("#expires", keys::EXPIRES_AT);
    let change = whole(change, followed, shard)?;
    Ok(Write::update(key.item(), change, Landed::Untold))
}

/// The count item's attribute that holds the count.
const COUNT: &str = "count";

/// A change of a follower count with the values of the count's own
/// attributes (its type, whose followers, which shard), which every change
/// sets so that the first makes the item whole.
fn whole(change: Expr, followed: &UserId, shard: u8) -> Result<Expr, StoreError> {
    Ok(change
        .name("#type", keys::TYPE)
        .name("#user", "userId")
        .name("#shard", "shard")
        .value(":type", ItemType::FollowerCount.attribute()?)
        .value(":user", s(followed.as_str()))
        .value(":shard", n(u64::from(shard))))
}

/// How long an erased account's emptied follower counts stay closed: far
/// longer than any follow request lives between its reads and its writes.
const CLOSED_DAYS: i64 = 1;

/// A follower shard's count, as the fan-out adds it onto the followed
/// profile: its count onto `followerCount`, what it added of each shard kept
/// in `followerShards` (`{"n", "v"}` by two-digit shard, [`ShardCount`](crate::store::items::user::ShardCount)).
impl ShardCounter for FollowerCountItem {
    const ADDED: &'static str = FOLLOWER_SHARDS_ATTRIBUTE;
    const TALLIES: &'static [Tally] = &[Tally {
        total: FOLLOWER_COUNT_ATTRIBUTE,
        letter: "n",
    }];
    const MOVES_VERSION: bool = false;

    fn owner(&self) -> Key {
        keys::profile(&self.user_id)
    }

    fn shard(&self) -> u8 {
        self.shard
    }

    fn version(&self) -> u64 {
        self.version
    }

    fn counts(&self) -> Vec<u64> {
        vec![self.count]
    }

    fn entry(shard: u8) -> String {
        format!("{shard:02}")
    }
}

/// The follower shards a profile says hold followers.
pub fn shards_with_followers(profile: &UserItem) -> Vec<u8> {
    let counted: BTreeMap<u8, u64> = profile
        .follower_shards
        .iter()
        .filter_map(|(k, c)| k.parse::<u8>().ok().map(|k| (k, c.count)))
        .collect();
    counted
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(k, _)| k)
        .collect()
}

impl FanOut<'_> {
    /// Closes `user`'s follower shards' counts to new follows of the
    /// account erased at `version` (made where missing): a follow that read
    /// the profile before the erasure and commits after this fails on its
    /// count's condition, and one that committed before is in a shard the
    /// walk reads after this. One conditional UpdateItem a shard (at once);
    /// a count closed already is left as it is.
    pub(in crate::store) async fn close_follower_counts(
        &self,
        user: &UserId,
        version: u64,
    ) -> Result<(), StoreError> {
        let closes = (0..FOLLOWER_SHARDS).map(|shard| {
            let key = FollowerCountItem::key_of(user, shard).item();
            let change = Expr::new(
                "SET #closed = :version, #type = :type, #user = :user, #shard = :shard, \
                 #count = if_not_exists(#count, :zero), #version = if_not_exists(#version, :zero)",
            )
            .name("#closed", CLOSED)
            .name("#type", keys::TYPE)
            .name("#user", "userId")
            .name("#shard", "shard")
            .name("#count", "count")
            .name("#version", keys::VERSION)
            .value(":version", n(version))
            .value(":zero", n(0))
            .value(":user", s(user.as_str()))
            .value(":shard", n(u64::from(shard)));
            async move {
                let write = Write::update(
                    key,
                    change.value(":type", ItemType::FollowerCount.attribute()?),
                    Landed::Untold,
                )
                .when(open_since(version));
                self.db.write("close follower count", &write).await
            }
        });
        try_join_all(closes).await?;
        Ok(())
    }

    /// `user`'s follower counts, closed at `version` and their entries gone,
    /// back to 0 and left closed for `CLOSED_DAYS` (then TTL takes them),
    /// not deleted: a follow that read the profile before the erasure and
    /// whose transaction comes after the whole walk still finds its count
    /// closed, and fails. The same person's new account (a later first
    /// version) opens them again, its first follow removing the expiry. One
    /// conditional UpdateItem a shard, at once.
    pub(in crate::store) async fn empty_follower_counts(
        &self,
        user: &UserId,
        version: u64,
    ) -> Result<(), StoreError> {
        let expires = time::OffsetDateTime::now_utc().unix_timestamp() + CLOSED_DAYS * 86_400;
        let empties = (0..FOLLOWER_SHARDS).map(|shard| {
            let key = FollowerCountItem::key_of(user, shard).item();
            let change = Expr::new("SET #count = :zero, #expires = :expires ADD #version :one")
                .name("#count", "count")
                .name("#expires", keys::EXPIRES_AT)
                .name("#version", keys::VERSION)
                .value(":zero", n(0))
                .value(":one", n(1))
                .value(":expires", signed(expires));
            let closed = Expr::new("#closed = :closed")
                .name("#closed", CLOSED)
                .value(":closed", n(version));
            let write = Write::update(key, change, Landed::Untold).when(closed);
            async move { self.db.write("empty follower count", &write).await }
        });
        try_join_all(empties).await?;
        Ok(())
    }
}

#[cfg(feature = "admin")]
impl FanOut<'_> {
    /// The audit's repair of a follower shard's count: the count item read
    /// first (strongly), then the shard's entries counted, then the count set
    /// (its version one up, so that the fan-out copies it onto the profile)
    /// only if its version is still the one read: a follow or unfollow that
    /// commits while counting moves the version, and the repair refuses
    /// (`false`: run the audit again).
    pub async fn recount_followers(&self, user: &UserId, shard: u8) -> Result<bool, StoreError> {
        let key = FollowerCountItem::key_of(user, shard).item();
        let read: Option<FollowerCountItem> =
            match self.db.get("a follower count", key.clone(), true).await? {
                Some(item) => Some(from_item(item)?),
                None => None,
            };
        let query = Query::partition(keys::followers_pk(user, shard))
            .begins_with(keys::FOLLOWER_PREFIX)
            .count()
            .consistent();
        let (mut actual, mut start) = (0, None);
        loop {
            let page = self
                .db
                .query_page("recount followers", &query, start, None)
                .await?;
            actual += page.count;
            start = page.next;
            if start.is_none() {
                break;
            }
        }
        let version = read.as_ref().map_or(0, |c| c.version);
        let change = Expr::new(
            "SET #count = :actual, #version = :next, #type = :type, #user = :user, #shard = :shard",
        )
        .name("#count", COUNT)
        .name("#version", keys::VERSION)
        .value(":actual", n(actual))
        .value(":next", n(version + 1));
        let change = whole(change, user, shard)?;
        let unchanged = match read {
            Some(_) => Expr::new("#version = :seen")
                .name("#version", keys::VERSION)
                .value(":seen", n(version)),
            None => Expr::item_absent(),
        };
        let write = Write::update(key, change, Landed::Untold).when(unchanged);
        Ok(self.db.write("recount followers", &write).await?.done())
    }
}
