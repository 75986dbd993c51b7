//! A user's followers, newest first, in one partition: the list
//! `GET /users/{userId}/followers` reads.
//!
//! A follow writes its follower's entry into one of the followed user's
//! sixteen follower shards (`FOLLOWERS#v#k`, [`super::follows`]): spread so
//! that an account gaining 1,000 followers a second stays within each
//! partition's limit, and walked shard by shard by deliveries and erasures.
//! Newest first across sixteen shards would take a Query of each for every
//! page. So the fan-out copies each entry's INSERT and REMOVE into
//! `FOLLOWED#v / W#<window>`: one item a window of
//! [`keys::FOLLOWER_WINDOW_MS`] of follow time, one attribute a follower
//! (`f<followId>`: the follower's id). A batch's records of one window are
//! coalesced into one UpdateItem (their last state per follow), so the
//! partition takes a write a window a batch, not one a follow. The item
//! key order is time order: a page is one to three Queries of that
//! partition, newest first, whatever the shard count.
//!
//! A window emptied by unfollows is deleted (read strongly after the
//! removals, deleted only at the version read), and an erasure of the
//! account deletes them all. A copy is
//! as fresh as the fan-out (a new follower is listed within seconds); the
//! names come from the followers' profiles at every read, and an erased
//! follower's profile is gone at once.

use std::collections::HashMap;

use super::items::follow::{WINDOW_OWNER, WINDOW_VERSION};
use super::{
    FanOut, Item, ItemType, Requests, StoreError,
    deadline::Deadline,
    s,
    table::{Deleted, Expr, Landed, Query, Write},
};
use crate::{
    ids::{FollowId, UserId},
    keys::{self, Key},
    model::{Followed, Page},
};

/// How many follows one UpdateItem of a window changes at most: its
/// expression stays far below DynamoDB's 4 KB (about 14 bytes a follow).
const PER_UPDATE: usize = 100;

/// How many windows a page's first Query reads: a busy account's newest
/// window holds a page by itself.
const FIRST_WINDOWS: usize = 2;

/// How many Queries a page makes at most (the page is short, its cursor
/// going on, when windows emptied by unfollows filled them).
const QUERIES: usize = 3;

/// How many windows an erasure deletes a call.
const ERASE_PAGE: i32 = 100;

/// A follow as a follower window holds it, and whether it is still there
/// (`None`: taken back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerChange {
    pub followed: UserId,
    pub follow: FollowId,
    pub follower: Option<UserId>,
}

impl FanOut<'_> {
    /// `changes` (a batch's records of one window, in stream order) onto
    /// their window: each follow's last state, set or removed, in one
    /// UpdateItem per `PER_UPDATE` follows. Removals alone never make the
    /// item (an erased account's windows stay gone). How many updates it
    /// sent.
    pub async fn copy_followers(&self, changes: &[FollowerChange]) -> Result<usize, StoreError> {
        // Each follow's last state, in the order first met.
        let mut last: Vec<&FollowerChange> = Vec::with_capacity(changes.len());
        for change in changes {
            match last
                .iter_mut()
                .find(|c| c.follow == change.follow && c.followed == change.followed)
            {
                Some(earlier) => *earlier = change,
                None => last.push(change),
            }
        }
        type Follows<'a> = (Key, &'a UserId, Vec<(FollowId, Option<&'a UserId>)>);
        let mut by_window: HashMap<(String, String), Follows> = HashMap::new();
        for change in last {
            let window = keys::follower_window(&change.followed, &change.follow);
            by_window
                .entry((window.pk.clone(), window.sk.clone()))
                .or_insert_with(|| (window, &change.followed, Vec::new()))
                .2
                .push((change.follow, change.follower.as_ref()));
        }
        let mut sent = 0;
        for (window, followed, follows) in by_window.into_values() {
            for chunk in follows.chunks(PER_UPDATE) {
                self.db
                    .write("copy followers", &window_update(&window, followed, chunk)?)
                    .await?;
                sent += 1;
            }
            // Only taken back: the window may be empty now.
            if follows.iter().all(|(_, follower)| follower.is_none()) {
                sent += usize::from(self.drop_if_empty(&window).await?);
            }
        }
        Ok(sent)
    }

    /// `window` deleted if it holds no follow (read strongly), on the
    /// condition that its version is still the one read: a follow copied
    /// in meanwhile keeps it. So no empty window stays, and none of an
    /// erased account's: a late record of a follow that committed before
    /// the erasure closed the counts may make one again after the walk
    /// deleted them, and its REMOVE (the walk's, after it) empties it.
    async fn drop_if_empty(&self, window: &Key) -> Result<bool, StoreError> {
        let Some(item) = self
            .db
            .get("a followers window", window.item(), true)
            .await?
        else {
            return Ok(false);
        };
        if !follows_in(&item)?.is_empty() {
            return Ok(false);
        }
        let Some(version) = item.get(WINDOW_VERSION).cloned() else {
            return Ok(false);
        };
        let unchanged = Expr::new("#v = :v")
            .name("#v", WINDOW_VERSION)
            .value(":v", version);
        let drop = Write::delete(window.item(), Deleted::Untold).when(unchanged);
        Ok(self
            .db
            .write("drop an empty follower window", &drop)
            .await?
            .done())
    }

    /// An erased account's follower windows out, a page at a time (after
    /// its follower entries: nothing copies into them any more). `true`
    /// when none is left; stops near `deadline` after at least one page.
    pub(super) async fn erase_follower_windows(
        &self,
        user: &UserId,
        deadline: &Deadline,
    ) -> Result<bool, StoreError> {
        let windows = Query::partition(keys::followed_pk(user))
            .project(
                Expr::new("#pk, #sk")
                    .name("#pk", keys::PK)
                    .name("#sk", keys::SK),
            )
            .consistent();
        let mut first = true;
        loop {
            if !first && deadline.near() {
                return Ok(false);
            }
            let page = self
                .db
                .query_page("erase follower windows", &windows, None, Some(ERASE_PAGE))
                .await?;
            if page.items.is_empty() {
                return Ok(true);
            }
            self.db
                .delete_all("erase follower windows", page.items, 4)
                .await?;
            first = false;
        }
    }
}

/// One UpdateItem of `window`: each follow of `follows` set to its follower
/// or removed; with a set, the item made if absent (its type and owner).
fn window_update(
    window: &Key,
    followed: &UserId,
    follows: &[(FollowId, Option<&UserId>)],
) -> Result<Write, StoreError> {
    let (mut sets, mut removes) = (Vec::new(), Vec::new());
    let mut change = Expr::new("");
    for (i, (follow, follower)) in follows.iter().enumerate() {
        let name = format!("#f{i}");
        change = change.name(&name, &keys::follower_attribute(follow));
        match follower {
            Some(follower) => {
                let value = format!(":f{i}");
                sets.push(format!("{name} = {value}"));
                change = change.value(&value, s(follower.as_str()));
            }
            None => removes.push(name),
        }
    }
    // Every change moves the window's version: an empty window is deleted
    // only as it was read (`drop_if_empty`).
    let mut text = String::from("ADD #v :one");
    change = change.name("#v", WINDOW_VERSION).value(":one", super::n(1));
    if !sets.is_empty() {
        text.push_str(" SET #type = :type, #of = :of, ");
        text.push_str(&sets.join(", "));
        change = change
            .name("#type", keys::TYPE)
            .name("#of", WINDOW_OWNER)
            .value(":type", ItemType::FollowerWindow.attribute()?)
            .value(":of", s(followed.as_str()));
    }
    if !removes.is_empty() {
        text.push_str(" REMOVE ");
        text.push_str(&removes.join(", "));
    }
    let write = Write::update(window.item(), change.with_text(text), Landed::Untold);
    Ok(if sets.is_empty() {
        write.when(Expr::item_exists())
    } else {
        write
    })
}

/// The follows a window item holds, newest first.
fn follows_in(item: &Item) -> Result<Vec<(FollowId, UserId)>, StoreError> {
    let mut follows = Vec::new();
    for (name, value) in item {
        let Some(follow) = keys::follow_of_attribute(name) else {
            continue;
        };
        let follower = value
            .as_s()
            .ok()
            .and_then(|id| UserId::parse(id).ok())
            .ok_or_else(|| StoreError::Internal(format!("a follower window's {name}")))?;
        follows.push((follow, follower));
    }
    follows.sort_by_key(|(follow, _)| std::cmp::Reverse(*follow));
    Ok(follows)
}

/// Where a followers page goes on: the window it stopped in and, if it
/// stopped inside it, the last follow shown (older ones of that window
/// come next).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    window: u64,
    shown: Option<FollowId>,
}

impl Place {
    fn encode(&self) -> String {
        match self.shown {
            Some(follow) => format!("{}.{follow}", self.window),
            None => self.window.to_string(),
        }
    }

    fn parse(raw: &str) -> Result<Self, crate::ids::IdError> {
        // A cursor of the version that read the shards: the follow shown
        // last, in its window.
        if let Ok(follow) = FollowId::parse(raw) {
            return Ok(Self {
                window: follow.millis() / keys::FOLLOWER_WINDOW_MS,
                shown: Some(follow),
            });
        }
        let bad = || crate::ids::IdError::NotUlid {
            kind: "a followers cursor",
        };
        let (window, shown) = match raw.split_once('.') {
            Some((window, follow)) => (window, Some(FollowId::parse(follow)?)),
            None => (raw, None),
        };
        if window.is_empty() || window.len() > 15 || !window.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let window = window.parse().map_err(|_| bad())?;
        Ok(Self { window, shown })
    }
}

impl Requests<'_> {
    /// `GET /users/{userId}/followers` (request): who follows `user`, newest
    /// first. Up to `QUERIES` Queries of `FOLLOWED#v` (descending, before
    /// the cursor): `FIRST_WINDOWS` windows, then as many as the page
    /// still needs at the rate the first held, the last as many as it still
    /// needs followers (a full page however the follows fell into windows),
    /// then one BatchGetItem of
    /// the page's followers' profiles and `user`'s own (404 without it; two
    /// for a page of 100, 101 keys). At most 5 calls and about the units of
    /// the windows read and the profiles shown, whatever the follower or
    /// shard count. A follower shows once on a page (an unfollow and a
    /// follow again not yet both copied would show them twice).
    pub async fn list_followers(
        &self,
        user: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Followed>, StoreError> {
        let list = format!("followers:{user}");
        let after = super::pages::resume_after(&list, cursor, Place::parse)?;
        let want = limit.saturating_add(1);
        let newest = match after {
            Some(Place {
                window,
                shown: Some(_),
            }) => keys::follower_window_sk_at(window),
            // The cursor's window was read whole: the ones before it.
            Some(Place {
                window,
                shown: None,
            }) => keys::follower_window_sk_at(window.saturating_sub(1)),
            None => format!("{}~", keys::FOLLOWER_WINDOW_PREFIX),
        };
        let query = Query::partition(keys::followed_pk(user))
            .between(keys::FOLLOWER_WINDOW_PREFIX.to_owned(), newest)
            .newest_first();
        let skip_to = after.and_then(|p| p.shown);
        // (window, follow, follower), newest first.
        let mut follows: Vec<(u64, FollowId, UserId)> = Vec::new();
        let (mut start, mut windows_read, mut last_window) = (None, 0, None);
        let mut seen = std::collections::HashSet::new();
        for round in 0..QUERIES {
            let windows = match round {
                0 => FIRST_WINDOWS,
                // The last: as many windows as the page still needs
                // followers (a window holds one at least: one emptied by
                // unfollows is deleted), so that the page is full however
                // the follows fell into windows.
                last if last + 1 == QUERIES => want.saturating_sub(follows.len()).max(1),
                // As many windows as the page still needs at the rate the
                // windows read so far held (at least one each).
                _ => {
                    let per_window = follows.len().div_ceil(windows_read.max(1)).max(1);
                    want.saturating_sub(follows.len())
                        .div_ceil(per_window)
                        .max(1)
                }
            };
            let page = self
                .db
                .query_page(
                    "list followers",
                    &query,
                    start,
                    Some(i32::try_from(windows).unwrap_or(i32::MAX)),
                )
                .await?;
            for item in &page.items {
                let window = item
                    .get(keys::SK)
                    .and_then(|sk| sk.as_s().ok())
                    .and_then(|sk| keys::window_of_follower_window_sk(sk))
                    .ok_or_else(|| StoreError::Internal("a follower window's key".into()))?;
                windows_read += 1;
                last_window = Some(window);
                for (follow, follower) in follows_in(item)? {
                    if skip_to.is_none_or(|shown| follow < shown) && seen.insert(follower.clone()) {
                        follows.push((window, follow, follower));
                    }
                }
            }
            start = page.next;
            if follows.len() >= want || start.is_none() {
                break;
            }
        }
        let next = if follows.len() > limit {
            follows.truncate(limit);
            follows.last().map(|(window, follow, _)| Place {
                window: *window,
                shown: Some(*follow),
            })
        } else {
            // Short: the windows read were all there was, or held too few
            // (emptied by unfollows): the next page starts past them.
            start.and(last_window).map(|window| Place {
                window,
                shown: None,
            })
        };
        let follows = follows
            .into_iter()
            .map(|(_, follow, follower)| (follower, follow.created_at()))
            .collect();
        self.named_page(user, &list, follows, next.map(|place| place.encode()))
            .await
    }
}

#[cfg(feature = "admin")]
impl super::Admin<'_> {
    /// The migration's copy of follower entries written before the
    /// windows existed: each one into its window, in a transaction with a
    /// check that the entry is still there (an unfollow racing the copy
    /// leaves no stale follower: its REMOVE record comes after). `true`
    /// when it was copied, `false` when the entry was gone.
    pub(crate) async fn copy_follower_entry(
        &self,
        entry: &super::items::follow::FollowerItem,
    ) -> Result<bool, StoreError> {
        use super::table::TxOutcome;
        use crate::keys::Entity;
        let window = keys::follower_window(&entry.user_id, &entry.follow_id);
        let change = Expr::new("SET #type = :type, #of = :of, #f = :follower ADD #v :one")
            .name("#v", WINDOW_VERSION)
            .value(":one", super::n(1))
            .name("#type", keys::TYPE)
            .name("#of", WINDOW_OWNER)
            .name("#f", &keys::follower_attribute(&entry.follow_id))
            .value(":type", ItemType::FollowerWindow.attribute()?)
            .value(":of", s(entry.user_id.as_str()))
            .value(":follower", s(entry.follower_id.as_str()));
        let mut tx = self.db.transaction("copy a follower entry");
        let there = tx.add(
            "follower entry",
            Write::check(entry.key().item(), Expr::item_exists()),
        );
        tx.add(
            "follower window",
            Write::update(window.item(), change, Landed::Untold),
        );
        match tx.commit().await? {
            TxOutcome::Committed => Ok(true),
            TxOutcome::ConditionFailed(failed) if failed.failed(there) => Ok(false),
            TxOutcome::ConditionFailed(failed) => Err(failed.unexpected("copy a follower entry")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_names_its_window_and_the_follow_shown_and_an_earlier_one_still_reads() {
        let follow = FollowId::generate();
        let window = follow.millis() / keys::FOLLOWER_WINDOW_MS;
        let inside = Place {
            window,
            shown: Some(follow),
        };
        let past = Place {
            window,
            shown: None,
        };
        for place in [inside, past] {
            assert_eq!(Place::parse(&place.encode()).ok(), Some(place));
        }
        // The version that read the shards gave the follow alone.
        assert_eq!(Place::parse(&follow.to_string()).ok(), Some(inside));
        for bad in ["", "x", "1234567890123456", "12.x", "-1", "1.2.3"] {
            assert!(Place::parse(bad).is_err(), "{bad}");
        }
    }

    /// The widest window update, [`PER_UPDATE`] follows set (or removed) at
    /// once, is well within DynamoDB's 4 KB an expression.
    #[test]
    fn the_widest_window_update_is_within_4_kb() {
        use crate::store::table::MAX_EXPRESSION_BYTES;
        let followed = UserId::parse("user-followed").expect("id");
        let follower = UserId::parse("user-follower").expect("id");
        let follows: Vec<FollowId> = (0..PER_UPDATE).map(|_| FollowId::generate()).collect();
        let window = keys::follower_window(&followed, &follows[0]);
        let set: Vec<_> = follows.iter().map(|f| (*f, Some(&follower))).collect();
        let removed: Vec<_> = follows.iter().map(|f| (*f, None)).collect();
        for changes in [set, removed] {
            let update = window_update(&window, &followed, &changes).expect("an update");
            let bytes = update.longest_expression();
            assert!(bytes <= MAX_EXPRESSION_BYTES / 2, "{bytes} bytes");
        }
    }
}
