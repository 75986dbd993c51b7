//! Counts kept by shards (one home for the protocol): a counter item with a
//! `version`, stepped one up or down in the transaction of what it counts;
//! the fan-out adds onto its owner what each counter counted since the
//! version the owner holds of it, so a record delivered twice or late counts
//! nothing twice; the owner's deletion or erasure closes its counters; the
//! audit holds each counter to what it counts.
//!
//! - [`post`]: a post's `likeCount` and `commentCount`: on the post item
//!   while it is quiet, in one of its shard counters (`POST#p#k / COUNTS`)
//!   once it is hot, added by the fan-out onto their group counter (16
//!   shards a group, `POST#p#k / GROUP`, in `shardCounts`), and the groups
//!   onto the post item (`groupCounts`, 8 entries at most): so that an add
//!   rewrites a few hundred bytes, never a 128-entry map; the loop every
//!   like and comment counts up through.
//! - [`followers`]: a user's followers, in one counter a follower shard
//!   (`FOLLOWERS#v#k / COUNT`), added onto the profile's `followerCount`
//!   by the fan-out (`followerShards`).
//!
//! What both share is here: the versioned step of a counter (`step`),
//! and the fan-out's sum onto the owner ([`FanOut::add_shard_counts`]):
//! the owner keeps, by shard, the counts and version it has added of each
//! counter (a map attribute, [`ShardCounter::ADDED`]), and its totals move by
//! what each counter counted since, in updates conditioned on those
//! versions. What differs is where their owners do: a post's counters are
//! made when it turns hot and deleted with it, its quiet counts stay on the
//! post item; a follower counter is made by the first follow and closed by
//! an erasure of the followed account.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::keys::{Key, PK};
use crate::store::{
    Busy, FanOut, Item, StoreError, n, signed,
    table::{Expr, Landed, Outcome, Write},
};

pub mod followers;
pub mod post;

/// Which way a counter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Up,
    Down,
}

/// The step every counter takes, in the transaction of what it counts:
/// `counter` one up or down and the item's `version` one up
/// (`ADD #counter :step, #version :one`), then the caller's `more` clauses
/// (`SET …`, `REMOVE …`). Going down, its condition is that the counter is
/// above 0 ([`above_zero`]), which an exact count never is not while what it
/// counts exists.
pub(in crate::store) fn step(counter: &str, step: Step, more: &str) -> Expr {
    let by = match step {
        Step::Up => 1,
        Step::Down => -1,
    };
    Expr::new(
        format!("ADD #counter :step, #version :one {more}")
            .trim_end()
            .to_owned(),
    )
    .name("#counter", counter)
    .name("#version", crate::keys::VERSION)
    .value(":step", signed(by))
    .value(":one", n(1))
}

/// The condition of a step down: `counter` above 0 (and so there).
pub(in crate::store) fn above_zero(counter: &str) -> Expr {
    Expr::new("#counter > :zero")
        .name("#counter", counter)
        .value(":zero", n(0))
}

/// One total an owner keeps of its shard counters: the owner's attribute,
/// and the letter its entry of a shard keeps that shard's count under.
#[derive(Debug, Clone, Copy)]
pub struct Tally {
    pub total: &'static str,
    pub letter: &'static str,
}

/// The letter an owner's entry of a shard keeps the counter's version under.
const VERSION_LETTER: &str = "v";

/// A shard counter as a stream image or a read holds it: one of the
/// counters whose sum an owner item keeps.
pub trait ShardCounter {
    /// The owner's attribute holding, by shard ([`Self::entry`]), what the
    /// fan-out has added of each counter: `{letter: count, …, "v": version}`.
    const ADDED: &'static str;
    /// The owner's totals, and their letters in its entries.
    const TALLIES: &'static [Tally];
    /// Whether an add moves the owner's `version` too (a post's does: its
    /// counts are part of what it shows; a profile's version is its own).
    const MOVES_VERSION: bool;
    /// The owner item's key.
    fn owner(&self) -> Key;
    fn shard(&self) -> u8;
    fn version(&self) -> u64;
    /// Its counts, in [`Self::TALLIES`]' order.
    fn counts(&self) -> Vec<u64>;
    /// The name of `shard`'s entry in the owner's [`Self::ADDED`].
    fn entry(shard: u8) -> String;
}

/// What an owner holds of one shard: each letter's count, and the version.
type Entry = BTreeMap<String, u64>;

/// How often the fan-out reads the owner again when another batch added its
/// shards' counts in between.
const SUM_ATTEMPTS: usize = 8;

/// What adding a batch's shard counts onto their owner did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Summed {
    /// The owner's counts changed.
    Written,
    /// The owner held these versions of the shards already.
    Stale,
    /// The owner is gone.
    Gone,
}

impl FanOut<'_> {
    /// Fan-out of shard counter changes (their newest images in a batch, of
    /// one owner): adds to the owner's totals what each shard counted since
    /// the version the owner holds of it, and records the versions added. A
    /// shard already added at that version or a newer one adds nothing, so
    /// a record delivered twice or late adds nothing twice; another batch
    /// adding other shards at once makes a condition fail, and the owner is
    /// read again (strongly, whole).
    ///
    /// Counters of several owners (a post's shards of several groups) are
    /// added onto each in turn: `Written` if any owner changed, `Gone` only
    /// if every owner is gone.
    pub async fn add_shard_counts<C: ShardCounter>(
        &self,
        counters: &[C],
    ) -> Result<Summed, StoreError> {
        let mut owners: Vec<(Key, Vec<&C>)> = Vec::new();
        for counter in counters {
            let owner = counter.owner();
            match owners.iter_mut().find(|(key, _)| *key == owner) {
                Some((_, theirs)) => theirs.push(counter),
                None => owners.push((owner, vec![counter])),
            }
        }
        let mut summed = Summed::Stale;
        let mut gone = !owners.is_empty();
        for (owner, theirs) in &owners {
            match self.add_onto(owner, theirs).await? {
                Summed::Written => summed = Summed::Written,
                Summed::Stale => gone = false,
                Summed::Gone => {}
            }
        }
        Ok(match summed {
            Summed::Written => Summed::Written,
            _ if gone => Summed::Gone,
            _ => Summed::Stale,
        })
    }

    /// [`Self::add_shard_counts`] onto one owner.
    async fn add_onto<C: ShardCounter>(
        &self,
        owner: &Key,
        counters: &[&C],
    ) -> Result<Summed, StoreError> {
        for _ in 0..SUM_ATTEMPTS {
            let Some(item) = self.db.get("a counters' owner", owner.item(), true).await? else {
                return Ok(Summed::Gone);
            };
            let added = added_of::<C>(&item)?;
            let updates = shard_updates(owner, added.as_ref(), counters);
            if updates.is_empty() {
                return Ok(Summed::Stale);
            }
            // In turn: one refused (another batch added some of these shards
            // meanwhile) sends the loop back to read the owner again.
            let mut refused = false;
            for update in &updates {
                if let Outcome::ConditionFailed { .. } =
                    self.db.write("add shard counts", update).await?
                {
                    refused = true;
                    break;
                }
            }
            if !refused {
                return Ok(Summed::Written);
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "other batches kept adding the shard counts",
        ))
    }
}

/// The owner's entries, by shard name; `None` where it has no map yet.
fn added_of<C: ShardCounter>(owner: &Item) -> Result<Option<BTreeMap<String, Entry>>, StoreError> {
    owner
        .get(C::ADDED)
        .map(|map| {
            serde_dynamo::from_attribute_value(map.clone())
                .map_err(|e| StoreError::Internal(format!("{}: {e}", C::ADDED)))
        })
        .transpose()
}

/// How many shards one update adds at most: each shard names itself in the
/// update (`#added.#s127 = :s127`, about 22 bytes) and in the condition
/// (`attribute_not_exists(#added.#s127)`, about 40), and DynamoDB takes
/// expressions of 4 KB at most: 32 shards keep the condition near 1.3 KB. A
/// group counter holds 16; a post made hot before groups up to 128 (all new
/// at once: 4 updates).
const SHARDS_PER_UPDATE: usize = 32;

/// One changed shard: its number, what the owner holds of it, its newest.
type Changed<'c, C> = (u8, Option<Entry>, &'c C);

/// The owner updates that add `counters` (each shard's newest) onto an
/// owner that holds `added` ([`SHARDS_PER_UPDATE`] shards an update), none
/// when every one of them is added already. Each update adds its own
/// shards' changes and conditions on their versions alone, so each is right
/// on its own: one that lands before another fails leaves nothing to undo
/// (the owner is read again, and the shards it added are added already). An
/// owner with no map yet gets it whole from the first.
fn shard_updates<C: ShardCounter>(
    owner: &Key,
    added: Option<&BTreeMap<String, Entry>>,
    counters: &[&C],
) -> Vec<Write> {
    let mut newest: BTreeMap<u8, &C> = BTreeMap::new();
    for counter in counters.iter().copied() {
        let slot = newest.entry(counter.shard()).or_insert(counter);
        if counter.version() > slot.version() {
            *slot = counter;
        }
    }
    let held = |shard: u8| added.and_then(|a| a.get(&C::entry(shard)).cloned());
    let changed: Vec<Changed<'_, C>> = newest
        .into_iter()
        .filter_map(|(shard, counter)| {
            let before = held(shard);
            let seen = before.as_ref().and_then(|b| b.get(VERSION_LETTER).copied());
            let stale = seen.is_some_and(|v| v >= counter.version());
            (!stale).then_some((shard, before, counter))
        })
        .collect();
    // Where a total is absent, it starts from what the map holds.
    let base: Vec<u64> = C::TALLIES
        .iter()
        .map(|tally| {
            added
                .iter()
                .flat_map(|a| a.values())
                .filter_map(|entry| entry.get(tally.letter))
                .sum()
        })
        .collect();
    changed
        .chunks(SHARDS_PER_UPDATE)
        .enumerate()
        .filter_map(|(i, chunk)| {
            let whole_map = i == 0 && added.is_none();
            shard_update(owner, chunk, &base, whole_map)
        })
        .collect()
}

/// One update adding `shards`' changes onto `owner`: with `whole_map`, the
/// map made with them, where the owner has none.
fn shard_update<C: ShardCounter>(
    owner: &Key,
    shards: &[Changed<'_, C>],
    base: &[u64],
    whole_map: bool,
) -> Option<Write> {
    if shards.is_empty() {
        return None;
    }
    let mut differences = vec![0_i64; C::TALLIES.len()];
    let mut entries = Vec::new();
    let mut conditions = Vec::new();
    let mut checks = Vec::new();
    for (shard, before, counter) in shards {
        let counts = counter.counts();
        let mut now = Entry::new();
        for (k, tally) in C::TALLIES.iter().enumerate() {
            let count = counts.get(k).copied().unwrap_or(0);
            let was = before
                .as_ref()
                .and_then(|b| b.get(tally.letter).copied())
                .unwrap_or(0);
            differences[k] += signed_difference(count, was);
            now.insert(tally.letter.to_owned(), count);
        }
        now.insert(VERSION_LETTER.to_owned(), counter.version());
        let value = serde_dynamo::to_attribute_value(now).ok()?;
        entries.push((*shard, C::entry(*shard), value));
        conditions.push(match before.as_ref().and_then(|b| b.get(VERSION_LETTER)) {
            Some(version) => {
                checks.push((format!(":was{shard}"), n(*version)));
                format!("#added.#s{shard}.{VERSION_LETTER} = :was{shard}")
            }
            None => format!("attribute_not_exists(#added.#s{shard})"),
        });
    }
    let mut sets: Vec<String> = C::TALLIES
        .iter()
        .enumerate()
        .map(|(k, _)| format!("#t{k} = if_not_exists(#t{k}, :base{k}) + :d{k}"))
        .collect();
    if C::MOVES_VERSION {
        sets.push("#version = #version + :one".to_owned());
    }
    let mut change = Expr::new("").name("#added", C::ADDED);
    let mut condition = Expr::new(format!("attribute_exists({PK})")).name("#added", C::ADDED);
    if whole_map {
        sets.push("#added = :map".to_owned());
        let map = entries
            .into_iter()
            .map(|(_, name, value)| (name, value))
            .collect();
        change = change.value(":map", AttributeValue::M(map));
        condition = condition.and("attribute_not_exists(#added)");
    } else {
        for (shard, name, value) in entries {
            sets.push(format!("#added.#s{shard} = :s{shard}"));
            change = change
                .name(&format!("#s{shard}"), &name)
                .value(&format!(":s{shard}"), value);
            condition = condition.name(&format!("#s{shard}"), &name);
        }
        condition = condition.and(&conditions.join(" AND "));
        for (placeholder, value) in checks {
            condition = condition.value(&placeholder, value);
        }
    }
    for (k, tally) in C::TALLIES.iter().enumerate() {
        change = change
            .name(&format!("#t{k}"), tally.total)
            .value(&format!(":base{k}"), n(base.get(k).copied().unwrap_or(0)))
            .value(&format!(":d{k}"), signed(differences[k]));
    }
    if C::MOVES_VERSION {
        change = change
            .name("#version", crate::keys::VERSION)
            .value(":one", n(1));
    }
    let change = change.with_text(format!("SET {}", sets.join(", ")));
    // A lost answer's write shows as a failed condition: the caller reads the
    // owner again and finds its shards' counts added.
    Some(Write::update(owner.item(), change, Landed::Untold).when(condition))
}

fn signed_difference(now: u64, was: u64) -> i64 {
    i64::try_from(now).unwrap_or(i64::MAX) - i64::try_from(was).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{PostId, UserId};
    use crate::store::items::{counter::ShardCounterItem, follow::FollowerCountItem};
    use crate::store::table::MAX_EXPRESSION_BYTES;

    /// A counter of a post made hot before groups were (added onto the
    /// post itself, 128 entries at most).
    fn counter(shard: u8, likes: u64, comments: u64, version: u64) -> ShardCounterItem {
        ShardCounterItem {
            post_id: PostId::parse("01J00000000000000000000000").expect("id"),
            shard,
            like_count: likes,
            comment_count: comments,
            version,
            grouped: false,
            group_apart: false,
        }
    }

    fn entry(pairs: &[(&str, u64)]) -> Entry {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn post_updates(
        added: Option<&BTreeMap<String, Entry>>,
        counters: &[ShardCounterItem],
    ) -> Vec<Write> {
        let owner = counters
            .first()
            .map(ShardCounter::owner)
            .expect("a counter");
        let counters: Vec<&ShardCounterItem> = counters.iter().collect();
        shard_updates(&owner, added, &counters)
    }

    #[test]
    fn a_shard_adds_what_it_counted_since_the_version_the_owner_holds() {
        let added = BTreeMap::from([("3".to_owned(), entry(&[("l", 5), ("c", 1), ("v", 6)]))]);
        // Shard 3 at an older and a newer version in one batch, shard 4 new.
        let batch = [
            counter(3, 4, 1, 5),
            counter(3, 9, 2, 11),
            counter(4, 2, 0, 2),
        ];
        let updates = post_updates(Some(&added), &batch);
        assert_eq!(updates.len(), 1);
        let text = format!("{:?}", updates[0]);
        assert!(text.contains("\":d0\": N(\"6\")"), "{text}"); // 9 - 5 + 2 likes
        assert!(text.contains("\":d1\": N(\"1\")"), "{text}"); // 2 - 1 comments
        assert!(text.contains("#added.#s3.v = :was3"), "{text}");
        assert!(text.contains("attribute_not_exists(#added.#s4)"), "{text}");
        // Everything added already: no write.
        assert!(post_updates(Some(&added), &[counter(3, 5, 1, 6)]).is_empty());
    }

    #[test]
    fn a_grouped_shard_adds_onto_its_group_in_one_update_and_the_group_onto_the_post() {
        use crate::store::items::counter::{SHARDS_PER_GROUP, ShardGroupItem};
        let grouped: Vec<ShardCounterItem> = (0..128)
            .map(|k| ShardCounterItem {
                grouped: true,
                group_apart: true,
                ..counter(k, 1, 1, 1)
            })
            .collect();
        let post = grouped[0].post_id;
        // 8 owners, the groups, 16 shards each: one update each; each group
        // in a partition of its own, past the shards (a post made hot
        // before: in its first shard's).
        let mut owners: Vec<Key> = grouped.iter().map(ShardCounter::owner).collect();
        owners.dedup();
        assert_eq!(owners.len(), 8);
        assert_eq!(owners[3], ShardGroupItem::key_of(post, 131));
        assert_eq!(owners[3].pk, format!("POST#{post}#131"));
        let before = ShardCounterItem {
            group_apart: false,
            ..grouped[50].clone()
        };
        assert_eq!(before.owner().pk, format!("POST#{post}#48"));
        for (g, owner) in owners.iter().enumerate() {
            let theirs: Vec<&ShardCounterItem> = grouped
                .iter()
                .filter(|c| usize::from(c.shard / SHARDS_PER_GROUP) == g)
                .collect();
            let updates = shard_updates(owner, Some(&BTreeMap::new()), &theirs);
            assert_eq!(updates.len(), 1);
            assert!(updates[0].longest_expression() <= MAX_EXPRESSION_BYTES);
        }
        // The groups onto the post: 8 entries, one update.
        let groups: Vec<ShardGroupItem> = (0..8)
            .map(|g| ShardGroupItem {
                like_count: 16,
                comment_count: 16,
                version: 16,
                ..ShardGroupItem::new(post, g)
            })
            .collect();
        let refs: Vec<&ShardGroupItem> = groups.iter().collect();
        let owner = groups[0].owner();
        assert_eq!(owner, crate::keys::post_item(&post));
        let updates = shard_updates(&owner, Some(&BTreeMap::new()), &refs);
        assert_eq!(updates.len(), 1);
        let text = format!("{:?}", updates[0]);
        assert!(text.contains("\":d0\": N(\"128\")"), "{text}");
        assert!(text.contains("groupCounts"), "{text}");
    }

    #[test]
    fn the_widest_post_adds_its_shards_in_updates_dynamodb_takes() {
        // A post made hot before groups: 128 shards onto the post, all new
        // at once (a post just widened to its most), and 128 more seen
        // before: each expression within 4 KB.
        let fresh: Vec<ShardCounterItem> = (0..128).map(|k| counter(k, 1, 1, 1)).collect();
        let none = BTreeMap::new();
        let updates = post_updates(Some(&none), &fresh);
        assert_eq!(updates.len(), 128 / SHARDS_PER_UPDATE);
        let seen: BTreeMap<String, Entry> = (0..128_u8)
            .map(|k| (k.to_string(), entry(&[("l", 1), ("c", 1), ("v", 1)])))
            .collect();
        let newer: Vec<ShardCounterItem> = (0..128).map(|k| counter(k, 2, 2, 2)).collect();
        let again = post_updates(Some(&seen), &newer);
        assert_eq!(again.len(), 128 / SHARDS_PER_UPDATE);
        for update in updates.iter().chain(&again) {
            assert!(
                update.longest_expression() <= MAX_EXPRESSION_BYTES,
                "{} bytes",
                update.longest_expression()
            );
        }
        // All in one update, the condition alone is over 4 KB: the limit
        // binds at this width.
        let owner = fresh[0].owner();
        let all: Vec<Changed<'_, ShardCounterItem>> =
            fresh.iter().map(|c| (c.shard, None, c)).collect();
        let one = shard_update(&owner, &all, &[0, 0], false).expect("an update");
        assert!(one.longest_expression() > MAX_EXPRESSION_BYTES);
    }

    #[test]
    fn a_profile_without_the_map_gets_it_whole_and_its_total_from_the_map() {
        let user = UserId::parse("reader").expect("id");
        let count = |shard: u8, count: u64, version: u64| FollowerCountItem {
            user_id: user.clone(),
            shard,
            count,
            version,
        };
        // No map yet: one update making it, on the condition that there is
        // none, its total started from 0.
        let owner = count(0, 0, 0).owner();
        let first = shard_updates(&owner, None, &[&count(0, 2, 2), &count(7, 1, 1)]);
        assert_eq!(first.len(), 1);
        let text = format!("{:?}", first[0]);
        assert!(text.contains("#added = :map"), "{text}");
        assert!(text.contains("attribute_not_exists(#added)"), "{text}");
        assert!(text.contains("\"07\""), "{text}");
        assert!(text.contains("\":d0\": N(\"3\")"), "{text}");
        assert!(!text.contains("#version"), "{text}");
        // A map from before the total was kept: the total starts from its sum.
        let added = BTreeMap::from([
            ("00".to_owned(), entry(&[("n", 4), ("v", 4)])),
            ("03".to_owned(), entry(&[("n", 5), ("v", 9)])),
        ]);
        let next = shard_updates(&owner, Some(&added), &[&count(0, 3, 5)]);
        let text = format!("{:?}", next[0]);
        assert!(text.contains("if_not_exists(#t0, :base0) + :d0"), "{text}");
        assert!(text.contains("\":base0\": N(\"9\")"), "{text}");
        assert!(text.contains("\":d0\": N(\"-1\")"), "{text}");
    }
}
