//! The merge of a hot post's shards into one list (its likes, newest first;
//! its comments, oldest first), each shard read only as deep as the page
//! needs.
//!
//! A page of `limit` needs the list's first `limit + 1` entries (the one
//! more says whether more follow). Reading that many from every shard, as
//! the merge once did, reads up to 129 × 101 entries for a page of 100,
//! where the page shows 100: the entries fall into the shards about evenly
//! (by their writer's hash), so each shard holds about `(limit + 1) / n` of
//! them. So each shard is read for a few more than its share, and then,
//! round after round, only the shards that may still hold an entry of the
//! page are read further, twice as deep each time:
//!
//! - the *threshold* is the `limit + 1`-th entry of everything read so
//!   far (none while fewer were read);
//! - a shard read to its end (its Query answered fewer than asked) holds
//!   nothing more; one whose last entry read is at or past the threshold
//!   holds only entries past it (a shard is read in the list's order);
//! - every other shard is read again after its last entry.
//!
//! When no shard is left to read, the first `limit + 1` entries read are
//! the list's. A shard is read at most to `limit + 1` entries after where
//! it started: as many items as the old merge at most, and about
//! `limit + 1 + 3n` for evenly spread entries (two or three rounds of
//! Queries, the later ones of a few shards).
//!
//! A round's Queries go [`SHARDS_AT_ONCE`] at a time: a 16-shard post's all
//! at once, a 128-shard post's in eight waves. One page of the widest post
//! read at once held 129 connections (on a new Lambda instance, 129 TLS
//! handshakes at its share of a CPU), and the readers of a viral post, many
//! such pages at once, more open connections than one process may have
//! (`./infra/bench.sh --viral` ran out of files at 20,000).

use std::future::Future;

use futures::{StreamExt, TryStreamExt};

use super::StoreError;

/// How far past its share each shard is read in the first round.
const FIRST_ROUND_SLACK: usize = 2;

/// How many of a round's Queries are in flight at once.
pub(super) const SHARDS_AT_ONCE: usize = 16;

/// What the merge read: the list's first entries (at most `limit`) after
/// the start, in its order, and whether more follow.
pub(super) struct Merged<T> {
    pub items: Vec<T>,
    pub more: bool,
}

/// How one shard is read.
struct Shard<A, P> {
    /// Where its next read starts (after this entry).
    after: Option<A>,
    /// How many entries its next read asks for.
    take: usize,
    /// How many it has given.
    given: usize,
    /// Where the last entry it gave is in the list.
    last: Option<P>,
    /// Its last Query answered fewer than asked: nothing more there.
    ended: bool,
}

/// The first `limit` entries, in list order (`position`: smaller first),
/// of `items` (already read: the post's own partition, read as deep as
/// the page) and of `shards` shards, each read after `after` with
/// `read(shard, after, take)`: at most `take` of its entries after
/// `after`, in list order. `resume` is where an entry leaves its shard's
/// next read. With no shards (a quiet post) the page is `items`'.
pub(super) async fn merge_shards<T, P, A, R, Fut>(
    shards: u8,
    mut items: Vec<T>,
    limit: usize,
    after: Option<A>,
    position: impl Fn(&T) -> P,
    resume: impl Fn(&T) -> A,
    read: R,
) -> Result<Merged<T>, StoreError>
where
    P: Ord + Copy,
    A: Copy,
    R: Fn(u8, Option<A>, usize) -> Fut,
    Fut: Future<Output = Result<Vec<T>, StoreError>>,
{
    let wanted = limit.saturating_add(1);
    let share = wanted.div_ceil(usize::from(shards).max(1));
    let first = share.saturating_add(FIRST_ROUND_SLACK).min(wanted);
    let mut state: Vec<Shard<A, P>> = (0..shards)
        .map(|_| Shard {
            after,
            take: first,
            given: 0,
            last: None,
            ended: false,
        })
        .collect();
    let mut asking: Vec<u8> = (0..shards).collect();
    while !asking.is_empty() {
        let reads: Vec<Fut> = asking
            .iter()
            .map(|&k| {
                let shard = &state[usize::from(k)];
                read(k, shard.after, shard.take)
            })
            .collect();
        let pages: Vec<Vec<T>> = futures::stream::iter(reads)
            .buffered(SHARDS_AT_ONCE)
            .try_collect()
            .await?;
        for (&k, page) in asking.iter().zip(pages) {
            let shard = &mut state[usize::from(k)];
            shard.ended = page.len() < shard.take;
            shard.given += page.len();
            if let Some(last) = page.last() {
                shard.after = Some(resume(last));
                shard.last = Some(position(last));
            }
            items.extend(page);
        }
        items.sort_by_key(|item| position(item));
        // The page's last entry so far (with the one more): a shard whose
        // last entry read is at or past it holds nothing the page needs.
        let threshold = items.get(wanted - 1).map(&position);
        asking = (0..shards)
            .filter(|&k| {
                let shard = &state[usize::from(k)];
                let short_of_it = match (threshold, shard.last) {
                    (Some(threshold), Some(last)) => last < threshold,
                    _ => true,
                };
                !shard.ended && shard.given < wanted && short_of_it
            })
            .collect();
        for &k in &asking {
            let shard = &mut state[usize::from(k)];
            shard.take = shard.take.saturating_mul(2).min(wanted - shard.given);
        }
    }
    let more = items.len() > limit;
    items.truncate(limit);
    Ok(Merged { items, more })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use proptest::prelude::*;

    use super::merge_shards;

    /// Shard `k`'s entries after `after`, `take` of them at most.
    fn shard_page(shards: &[Vec<u32>], k: u8, after: Option<u32>, take: usize) -> Vec<u32> {
        shards[usize::from(k)]
            .iter()
            .copied()
            .filter(|entry| after.is_none_or(|after| *entry > after))
            .take(take)
            .collect()
    }

    /// Entries are numbers, listed smallest first; `shards[k]` holds shard
    /// k's, in list order. The merge against sorting everything, and how
    /// many Queries and entries it read.
    fn merged(
        shards: &[Vec<u32>],
        own: Vec<u32>,
        limit: usize,
        after: Option<u32>,
    ) -> (Vec<u32>, bool, usize, usize) {
        let (calls, read) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let fetch = |k: u8, after: Option<u32>, take: usize| {
            calls.fetch_add(1, Ordering::Relaxed);
            let page = shard_page(shards, k, after, take);
            read.fetch_add(page.len(), Ordering::Relaxed);
            async move { Ok(page) }
        };
        let count = u8::try_from(shards.len()).expect("at most 255 shards");
        let run = merge_shards(count, own, limit, after, |e| *e, |e| *e, fetch);
        let merged = futures::executor::block_on(run).expect("no read fails");
        (
            merged.items,
            merged.more,
            calls.into_inner(),
            read.into_inner(),
        )
    }

    fn exact(
        shards: &[Vec<u32>],
        own: &[u32],
        limit: usize,
        after: Option<u32>,
    ) -> (Vec<u32>, bool) {
        let mut all: Vec<u32> = shards
            .iter()
            .flatten()
            .copied()
            .filter(|entry| after.is_none_or(|after| *entry > after))
            .chain(own.iter().copied())
            .collect();
        all.sort_unstable();
        let more = all.len() > limit;
        all.truncate(limit);
        (all, more)
    }

    /// `count` entries (0..count), each in a shard drawn at random (as a
    /// writer's hash draws it; the same draw every run).
    fn spread(count: u32, shards: usize) -> Vec<Vec<u32>> {
        let mut draw = fastrand::Rng::with_seed(56);
        let mut spread = vec![Vec::new(); shards];
        for entry in 0..count {
            spread[draw.usize(..shards)].push(entry);
        }
        spread
    }

    #[test]
    fn evenly_spread_entries_are_read_a_little_past_their_share() {
        // 128 shards of 100,000 likes; a page of 100 (101 with the one more).
        let shards = spread(100_000, 128);
        let (items, more, calls, read) = merged(&shards, Vec::new(), 100, None);
        assert_eq!((items.clone(), more), exact(&shards, &[], 100, None));
        assert_eq!(items, (0..100).collect::<Vec<_>>());
        // The old merge: 128 Queries of 101 entries, 12,928 entries read;
        // now 3 a shard, then 6 deeper in the 6 shards that may hold more.
        assert_eq!((calls, read), (134, 420), "Queries, entries read");
        // And at 16 shards.
        let shards = spread(100_000, 16);
        let (items, _, calls, read) = merged(&shards, Vec::new(), 100, None);
        assert_eq!(items, (0..100).collect::<Vec<_>>());
        // The old merge: 1,616 entries read.
        assert_eq!((calls, read), (17, 162), "Queries, entries read");
    }

    #[test]
    fn one_shard_holding_the_whole_page_is_read_deeper_round_by_round() {
        let mut shards = vec![Vec::new(); 128];
        shards[5] = (0..1_000).collect();
        for (k, shard) in shards.iter_mut().enumerate().filter(|(k, _)| *k != 5) {
            shard.extend((0..3).map(|i| 10_000 + 10 * k as u32 + i));
        }
        let (items, more, calls, read) = merged(&shards, Vec::new(), 100, None);
        assert_eq!((items, more), exact(&shards, &[], 100, None));
        // Shard 5 read 3, 6, 12, 24, 48 and 8 deep (101 in all); the
        // shards whose 3 entries came before the threshold once again, to
        // find them ended (the page's 98 other entries end at shard 33's
        // second: shards 0 to 32 but 5); the rest never again.
        assert_eq!(calls, 128 + 5 + 32, "{calls} Queries");
        assert_eq!(read, 127 * 3 + 101, "{read} entries read");
    }

    #[tokio::test]
    async fn a_rounds_queries_are_in_flight_sixteen_at_a_time() {
        let shards = spread(10_000, 128);
        let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let fetch = |k: u8, after: Option<u32>, take: usize| {
            let page = shard_page(&shards, k, after, take);
            let (now, most) = (&now, &most);
            async move {
                let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(in_flight, Ordering::SeqCst);
                tokio::task::yield_now().await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(page)
            }
        };
        let merged = merge_shards(128, Vec::new(), 100, None, |e| *e, |e| *e, fetch).await;
        let items = merged.expect("no read fails").items;
        assert_eq!(items, (0..100).collect::<Vec<_>>());
        assert_eq!(most.into_inner(), super::SHARDS_AT_ONCE);
    }

    #[test]
    fn without_shards_the_page_is_the_own_partitions() {
        let (items, more, calls, _) = merged(&[], vec![1, 2, 3, 4], 3, None);
        assert_eq!((items, more, calls), (vec![1, 2, 3], true, 0));
        let (items, more, _, _) = merged(&[], vec![1, 2], 3, None);
        assert_eq!((items, more), (vec![1, 2], false));
    }

    proptest! {
        #[test]
        fn the_merge_is_the_lists_first_entries(
            entries in proptest::collection::vec((0_u32..5_000, 0_usize..40), 0..600),
            own in proptest::collection::vec(0_u32..5_000, 0..30),
            count in 1_usize..40,
            limit in 1_usize..120,
            after in proptest::option::of(0_u32..5_000),
        ) {
            let mut shards = vec![Vec::new(); count];
            for (entry, k) in entries {
                shards[k % count].push(entry);
            }
            // An entry is in one place only, each shard in list order.
            let mut seen = std::collections::HashSet::new();
            for shard in &mut shards {
                shard.retain(|entry| seen.insert(*entry) && *entry % 7 != 3);
                shard.sort_unstable();
            }
            let mut own: Vec<u32> = own.into_iter().filter(|e| *e % 7 == 3 && seen.insert(*e)).collect();
            own.retain(|entry| after.is_none_or(|after| *entry > after));
            own.sort_unstable();
            own.truncate(limit + 1);
            let (items, more, _, read) = merged(&shards, own.clone(), limit, after);
            prop_assert_eq!((items, more), exact(&shards, &own, limit, after));
            // Never more than the old merge read.
            prop_assert!(read <= count * (limit + 1));
        }
    }
}
