//! The DynamoDB Streams fan-out: keeps every denormalised copy true.
//!
//! Its rules, which record falls under which and what each writes (the
//! table of them, and why each is idempotent), are in [`rules`]. This file is
//! the handler Lambda calls with a batch of records: it coalesces the post
//! MODIFYs, shard counter MODIFYs and follower counts a later record carries,
//! applies the rest in lanes, stops starting records once a walk pauses at
//! the deadline, then runs the batch steps (the notifications, the hot
//! posts' first-page copies), reports the failed records and logs what the
//! batch did and how long each step took.
//!
//! A batch is applied in the order Lambda delivers a stream in: the records
//! of one item one after another, those of different items at once (as
//! Lambda runs the batches of different shards at once). After a partial
//! failure Lambda delivers again from the lowest record reported failed.

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use aws_lambda_events::event::{
    dynamodb::{Event, EventRecord},
    streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse},
};
use futures::StreamExt;
use thiserror::Error;

use crate::{
    ids::UserId,
    keys::Key,
    metrics::{self, Metric},
    store::{
        Store, StoreError,
        deadline::Deadline,
        items::counter::{ShardCounterItem, ShardGroupItem},
        users::Authors,
    },
};

mod notify;
mod pages;
mod rate;
mod record;
pub mod rules;

pub use record::Change;
use rules::Rule;
pub use rules::{applies_to, apply};

/// Items whose records a batch applies at once, at most.
const CONCURRENT_ITEMS: usize = 16;

#[derive(Debug, Error)]
pub enum FanoutError {
    #[error("cannot decode the {image} image: {reason}")]
    Malformed { image: &'static str, reason: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What applying one record did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// At least one copy changed.
    Written { writes: usize },
    /// Every copy already held this version or a newer one.
    Stale { writes: usize },
    /// The record changes nothing that is copied.
    Ignored,
    /// A later record of the same batch carries this one's change: a post
    /// MODIFY followed by another MODIFY of that post (its new image holds
    /// every change before it), so the copies are written once a batch.
    Coalesced,
    /// A walk (a rename's, a deleted post's, an erasure's) stopped before
    /// the deadline, its place saved or none needed: the
    /// record must come again.
    Paused { writes: usize },
}

/// Applies a batch with no deadline (the local poller, tools, tests): see
/// [`handle_until`].
pub async fn handle(store: &Store, event: Event) -> DynamoDbEventResponse {
    handle_until(store, event, Deadline::NONE).await
}

/// Applies a batch and reports the records that failed, so that Lambda (or the
/// local poller) retries from the lowest of them. The records of one item are
/// applied in stream order, one after another; those of different items at
/// once. A failed record never stops the rest of the batch; a walk paused by
/// the `deadline` does: it is reported, no record after it starts (those
/// already under way finish), and the records after it come again with it.
pub async fn handle_until(
    store: &Store,
    event: Event,
    deadline: Deadline,
) -> DynamoDbEventResponse {
    // Every record of the batch was written before this moment.
    let received = crate::store::items::post::epoch_millis();
    let records = &event.records;
    let mut stats = BatchStats::of(records);
    // Before the rules: a post turning hot spreads its next likes at once.
    let seed = format!(
        "{}/{}/rate",
        store.table(),
        records.first().map_or("", |r| r.event_id.as_str())
    );
    let rating = crate::store::request_scope(seed, rate::make_fast_posts_hot(store, records));
    stats.steps.rate = timed(rating).await.1;
    let superseded = superseded_post_changes(records);
    let carried = carried_records(records, &superseded, &mut stats);
    let lanes = item_lanes(records, &superseded);
    let applying = async {
        let authors = batch_authors(store, records).await;
        apply_in_lanes(lanes, |index| {
            let carried = carried.get(&index).map_or(&[][..], Vec::as_slice);
            apply_scoped(store, &records[index], &deadline, carried, &authors)
        })
        .await
    };
    let (applied, rules_took) = timed(applying).await;
    stats.steps.rules = rules_took;
    let mut failures = Failures::default();
    for (index, applied) in applied {
        failures.note(index, &records[index], applied, &mut stats);
    }
    // The batch's notifications, once a group: a failure comes again from
    // its first record.
    let seed = format!(
        "{}/{}/notify",
        store.table(),
        records.first().map_or("", |r| r.event_id.as_str())
    );
    let notified = timed(crate::store::request_scope(
        seed,
        notify::apply_batch(store, records),
    ));
    // And at once, the hot posts' first-page copies (each rebuild's
    // transaction has a scope of its own).
    let paged = timed(pages::apply_batch(store, records, received));
    let ((notified, notify_took), (paged, pages_took)) = futures::join!(notified, paged);
    (stats.steps.notify, stats.steps.pages) = (notify_took, pages_took);
    for failed in [notified, paged] {
        if let Err(index) = failed {
            failures.report_batch_step(index, &records[index]);
        }
    }
    failures.report_uncarried(records, &superseded);
    stats.log();
    failures.response
}

/// The records coalesced into each carrier (by the carrier's index), which
/// writes their changes too; each is counted as coalesced.
fn carried_records<'r>(
    records: &'r [EventRecord],
    superseded: &[Option<usize>],
    stats: &mut BatchStats,
) -> HashMap<usize, Vec<&'r EventRecord>> {
    let mut carried: HashMap<usize, Vec<&EventRecord>> = HashMap::new();
    for (record, carrier) in records.iter().zip(superseded) {
        if let Some(carrier) = carrier {
            stats.count(Outcome::Coalesced);
            carried.entry(*carrier).or_default().push(record);
        }
    }
    carried
}

/// Applies one record, and those `carried` into it, in a request scope of
/// its own; answers what it did and whether it paused (which stops the
/// batch). Transactions of a redelivered record reuse their tokens: the
/// scope's seed is the record's id (and the table's name, as a token is the
/// account's).
async fn apply_scoped(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
    carried: &[&EventRecord],
    authors: &Authors,
) -> (Result<Outcome, FanoutError>, bool) {
    let seed = format!("{}/{}", store.table(), record.event_id);
    let applying = rules::apply_record(store, record, deadline, carried, authors);
    let applied = crate::store::request_scope(seed, applying).await;
    let paused = matches!(applied, Ok(Outcome::Paused { .. }));
    (applied, paused)
}

/// The profiles of the authors of the batch's new posts, comments and
/// likes, read together (a viral post's batch holds hundreds of likers:
/// one BatchGetItem a hundred rather than one GetItem a record). When
/// that read fails, each record reads its author on its own, as it would
/// without it.
async fn batch_authors(store: &Store, records: &[EventRecord]) -> Authors {
    let users: HashSet<UserId> = records.iter().filter_map(rules::new_item_author).collect();
    if users.is_empty() {
        return Authors::default();
    }
    match store.fanout().authors(users).await {
        Ok(authors) => authors,
        Err(error) => {
            tracing::warn!(%error, "the batch's authors could not be read together; each record reads its own");
            Authors::default()
        }
    }
}

/// The records a batch reports failed, as they are applied: Lambda delivers
/// again from the first of them.
#[derive(Default)]
struct Failures {
    response: DynamoDbEventResponse,
    /// The first record reported failed (or paused at).
    first: Option<usize>,
    /// Whether a walk paused: past it nothing is reported, it all comes
    /// again.
    paused: bool,
}

impl Failures {
    /// Counts what the record at `index` did, and reports it if it failed or
    /// is the first to pause.
    fn note(
        &mut self,
        index: usize,
        record: &EventRecord,
        applied: Result<Outcome, FanoutError>,
        stats: &mut BatchStats,
    ) {
        match applied {
            Ok(outcome @ Outcome::Paused { .. }) => {
                stats.count(outcome);
                if !self.paused {
                    tracing::info!(
                        event_id = %record.event_id,
                        "walk paused before the deadline; it goes on when the record comes again"
                    );
                    self.report(index, record);
                    self.paused = true;
                }
            }
            Ok(outcome) => stats.count(outcome),
            Err(err) => {
                stats.failed += 1;
                tracing::error!(
                    event_id = %record.event_id,
                    sequence_number = record.change.sequence_number.as_deref().unwrap_or_default(),
                    event_name = %record.event_name,
                    error = %err,
                    "fan-out record failed"
                );
                if !self.paused {
                    self.report(index, record);
                }
            }
        }
    }

    /// A record whose batch step (its notification, its hot post's first
    /// page) failed, unless it or one before it is reported already (Lambda
    /// comes again from the lowest).
    fn report_batch_step(&mut self, index: usize, record: &EventRecord) {
        if self.first.is_none_or(|first| index < first) {
            self.report(index, record);
            self.first = Some(index);
        }
    }

    fn report(&mut self, index: usize, record: &EventRecord) {
        self.response.batch_item_failures.push(failure(record));
        self.first.get_or_insert(index);
    }

    /// A coalesced MODIFY whose carrier is not applied yet (it failed, or
    /// comes at or after the first failure) must come again too: else the
    /// carrier, delivered again without it, would refresh only when its own
    /// images differ, and the coalesced change would be lost. Reporting it
    /// moves Lambda's restart back to it.
    fn report_uncarried(&mut self, records: &[EventRecord], superseded: &[Option<usize>]) {
        let Some(first) = self.first else {
            return;
        };
        let pending = records
            .iter()
            .zip(superseded)
            .take(first)
            .find(|(_, carrier)| carrier.is_some_and(|carrier| carrier >= first));
        if let Some((record, _)) = pending {
            self.response.batch_item_failures.push(failure(record));
        }
    }
}

/// The indices of a batch's records to apply (all but the coalesced ones),
/// by item: each item's in stream order, the items in the order of their
/// first record.
fn item_lanes(records: &[EventRecord], superseded: &[Option<usize>]) -> Vec<Vec<usize>> {
    let mut lanes: Vec<Vec<usize>> = Vec::new();
    let mut lane_of: HashMap<Option<Key>, usize> = HashMap::new();
    for (index, record) in records.iter().enumerate() {
        if superseded.get(index).is_some_and(Option::is_some) {
            continue;
        }
        let lane = *lane_of.entry(post_key(record)).or_insert_with(|| {
            lanes.push(Vec::new());
            lanes.len() - 1
        });
        lanes[lane].push(index);
    }
    lanes
}

/// Runs `apply` on every index of `lanes`: the indices of one lane one after
/// another, in order; up to [`CONCURRENT_ITEMS`] lanes at once, in the order
/// given. `apply` answers its result and whether it stops the batch: once
/// one does, no index after it starts (those before it still do, as they
/// would have run before it one at a time). The results, by index.
async fn apply_in_lanes<T, F, Fut>(lanes: Vec<Vec<usize>>, apply: F) -> Vec<(usize, T)>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = (T, bool)>,
{
    let stop_after = AtomicUsize::new(usize::MAX);
    let (apply, stop_after) = (&apply, &stop_after);
    let mut results: Vec<(usize, T)> = futures::stream::iter(lanes)
        .map(|lane| async move {
            let mut done = Vec::with_capacity(lane.len());
            for index in lane {
                if index > stop_after.load(Ordering::Acquire) {
                    break;
                }
                let (result, stops) = apply(index).await;
                if stops {
                    stop_after.fetch_min(index, Ordering::AcqRel);
                }
                done.push((index, result));
            }
            futures::stream::iter(done)
        })
        .buffer_unordered(CONCURRENT_ITEMS)
        .flatten()
        .collect()
        .await;
    results.sort_by_key(|(index, _)| *index);
    results
}

/// For each record of a batch, if a later record of the batch is a MODIFY
/// of the same post, the index of its last MODIFY in the batch (the
/// carrier: its new image holds this one's change), and likewise for the
/// shard counters of a hot post and the follower counts of a user (the last
/// record of any of an owner's counters carries the others: one write onto
/// the owner a batch); `None` for every other record.
///
/// Lambda delivers a post's records in order and, after a failure, again
/// from the lowest failed record; [`handle_until`] reports a coalesced
/// record whose carrier was not applied, so that both come again.
fn superseded_post_changes(records: &[EventRecord]) -> Vec<Option<usize>> {
    let mut last = HashMap::new();
    let mut superseded: Vec<Option<usize>> = records
        .iter()
        .enumerate()
        .rev()
        .map(|(index, record)| {
            let rule = Rule::of(record)?;
            let post = match rule {
                Rule::ChangedPost => post_key(record)?,
                // A post's shard counters by group (or, made before groups
                // were, all onto the post); its groups onto the post.
                Rule::ShardCounts => rules::counters_owner::<ShardCounterItem>(record)?,
                Rule::GroupCounts => rules::counters_owner::<ShardGroupItem>(record)?,
                // The last record of any of a user's follower counts
                // carries the others: one write onto the profile a batch.
                Rule::FollowerCount => rules::follower_counts_of(record)?,
                // A window's records, one write (the carrier applies them
                // all, in order).
                Rule::FollowerCopy => rules::follower_window_of(record)?,
                _ => return None,
            };
            // By rule too: a post's own MODIFYs and its groups' share a key.
            match last.get(&(rule, post.clone())) {
                Some(carrier) => Some(*carrier),
                None => {
                    last.insert((rule, post), index);
                    None
                }
            }
        })
        .collect();
    superseded.reverse();
    superseded
}

/// The record's item key, to tell records of one item apart.
fn post_key(record: &EventRecord) -> Option<Key> {
    serde_dynamo::from_item(record.change.keys.clone()).ok()
}

/// `step`'s output and how long it took.
async fn timed<T>(step: impl Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let output = step.await;
    (output, started.elapsed())
}

fn failure(record: &EventRecord) -> DynamoDbBatchItemFailure {
    let mut failure = DynamoDbBatchItemFailure::default();
    failure.item_identifier = record.change.sequence_number.clone();
    failure
}

fn oldest_age_ms(records: &[EventRecord]) -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default();
    records
        .iter()
        .map(|r| r.change.approximate_creation_date_time.timestamp_millis())
        .min()
        .map_or(0, |oldest| (now - oldest).max(0))
}

/// What one batch did, logged as one structured line.
#[derive(Debug, Default)]
struct BatchStats {
    records: usize,
    written: usize,
    stale: usize,
    ignored: usize,
    coalesced: usize,
    failed: usize,
    paused: usize,
    writes: usize,
    oldest_age_ms: i64,
    steps: StepTimes,
}

/// How long each of a batch's steps took (the notifications and the first
/// pages run at once).
#[derive(Debug, Default)]
struct StepTimes {
    rate: Duration,
    rules: Duration,
    notify: Duration,
    pages: Duration,
}

impl BatchStats {
    /// The stats of a batch of `records`, before any is applied.
    fn of(records: &[EventRecord]) -> Self {
        Self {
            records: records.len(),
            oldest_age_ms: oldest_age_ms(records),
            ..Self::default()
        }
    }

    fn count(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Written { writes } => {
                self.written += 1;
                self.writes += writes;
            }
            Outcome::Stale { writes } => {
                self.stale += 1;
                self.writes += writes;
            }
            Outcome::Ignored => self.ignored += 1,
            Outcome::Coalesced => self.coalesced += 1,
            Outcome::Paused { writes } => {
                self.paused += 1;
                self.writes += writes;
            }
        }
    }

    fn log(&self) {
        tracing::info!(
            records = self.records,
            applied = self.written,
            skipped_stale = self.stale,
            ignored = self.ignored,
            coalesced = self.coalesced,
            failed = self.failed,
            paused = self.paused,
            writes = self.writes,
            oldest_record_age_ms = self.oldest_age_ms,
            rate_ms = self.steps.rate.as_millis(),
            rules_ms = self.steps.rules.as_millis(),
            notify_ms = self.steps.notify.as_millis(),
            pages_ms = self.steps.pages.as_millis(),
            "fan-out batch"
        );
        let count = |n: usize| n as f64;
        metrics::emit(
            &[],
            &[
                (Metric::Records, count(self.records)),
                (Metric::Applied, count(self.written)),
                (Metric::Stale, count(self.stale)),
                (Metric::Ignored, count(self.ignored)),
                (Metric::Failed, count(self.failed)),
                (Metric::Paused, count(self.paused)),
                (Metric::Writes, count(self.writes)),
                (Metric::OldestRecordAge, self.oldest_age_ms as f64),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    };

    use aws_lambda_events::event::dynamodb::EventRecord;

    use super::{apply_in_lanes, item_lanes};
    use crate::keys::Key;

    fn record(pk: &str, sk: &str) -> EventRecord {
        let mut record = EventRecord::default();
        record.change.keys = serde_dynamo::to_item(Key::new(pk.to_owned(), sk)).expect("keys");
        record
    }

    #[test]
    fn a_batch_is_laned_by_item_in_stream_order_without_its_coalesced_records() {
        let records = [
            record("POST#a", "POST"),
            record("POST#a#1", "LIKE#x"),
            record("POST#a", "POST"),
            record("USER#u", "PROFILE"),
            record("POST#a", "POST"),
            record("POST#a#1", "LIKE#y"),
            record("USER#u", "PROFILE"),
        ];
        // The first MODIFY of the post is carried by its last.
        let superseded = [None, None, Some(4), None, None, None, None];
        assert_eq!(
            item_lanes(&records, &superseded),
            [vec![0, 4], vec![1], vec![3, 6], vec![5]]
        );
    }

    /// A hot post's shard counter MODIFY, of shard `shard` (of a post made
    /// hot before groups were, without `grouped`).
    fn counter(post: crate::ids::PostId, shard: u8, grouped: bool) -> EventRecord {
        let place = crate::keys::PostPartition::shard(post, shard);
        let mut record = record(&place.pk(), crate::keys::SHARD_COUNTS_SK);
        record.event_name = "MODIFY".to_owned();
        let mut image = serde_json::json!({
            "type": "shardCounter", "postId": post.to_string(), "shard": shard,
            "likeCount": 1, "commentCount": 0, "version": 1,
        });
        if grouped {
            image["grouped"] = serde_json::Value::Bool(true);
        }
        record.change.new_image = serde_dynamo::to_item(image).expect("an image");
        record
    }

    /// A hot post's group counter MODIFY, or the post's own.
    fn owner(post: crate::ids::PostId, group: Option<u8>) -> EventRecord {
        use crate::store::items::counter::ShardGroupItem;
        let key = match group {
            Some(g) => ShardGroupItem::key_of(post, g),
            None => crate::keys::post_item(&post),
        };
        let mut record = record(&key.pk, &key.sk);
        record.event_name = "MODIFY".to_owned();
        let image = match group {
            Some(g) => serde_json::json!({
                "type": "shardGroup", "postId": post.to_string(), "group": g,
                "likeCount": 16, "commentCount": 0, "version": 16,
            }),
            None => serde_json::json!({ "type": "post", "postId": post.to_string() }),
        };
        record.change.new_image = serde_dynamo::to_item(image).expect("an image");
        record
    }

    #[test]
    fn a_posts_shard_counters_are_carried_by_the_last_of_their_group_and_its_groups_by_their_last()
    {
        let (a, b, old) = (
            crate::ids::PostId::generate(),
            crate::ids::PostId::generate(),
            crate::ids::PostId::generate(),
        );
        // Shards past 99 have three digits in their key (`POST#p#117`).
        let records = [
            counter(a, 5, true),
            counter(a, 117, true),
            counter(b, 100, true),
            counter(a, 127, true),
            counter(b, 3, true),
            // A post made hot before groups: every shard onto the post.
            counter(old, 1, false),
            counter(old, 90, false),
            // The groups of `a` onto the post, and the post's own MODIFY:
            // two adds, and the post's refresh apart from them.
            owner(a, Some(0)),
            owner(a, None),
            owner(a, Some(7)),
        ];
        assert_eq!(
            super::superseded_post_changes(&records),
            [
                None,
                Some(3),
                None,
                None,
                None,
                Some(6),
                None,
                Some(9),
                None,
                None
            ],
            "one add a batch per owner"
        );
    }

    /// A follower count's INSERT or MODIFY: shard `shard` of `user`'s.
    fn follower_count(user: &str, shard: u8) -> EventRecord {
        let user = crate::ids::UserId::parse(user).expect("id");
        let mut record = record(
            &crate::keys::followers_pk(&user, shard),
            crate::keys::FOLLOWER_COUNT_SK,
        );
        record.event_name = "MODIFY".to_owned();
        let count = serde_json::json!({
            "type": "followerCount", "userId": user.as_str(), "shard": shard,
            "count": 1, "version": 1,
        });
        record.change.new_image = serde_dynamo::to_item(count).expect("an image");
        record
    }

    #[test]
    fn every_follower_count_of_a_user_is_carried_by_its_last() {
        let records = [
            follower_count("star", 0),
            follower_count("fan", 2),
            follower_count("star", 15),
            follower_count("star", 0),
            follower_count("fan", 2),
        ];
        assert_eq!(
            super::superseded_post_changes(&records),
            [Some(3), Some(4), Some(3), None, None],
            "one add a batch per followed user"
        );
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Step {
        Start(usize),
        End(usize),
    }

    #[tokio::test]
    async fn one_items_records_run_one_after_another_and_different_items_at_once() {
        let lanes = vec![vec![0, 2, 5], vec![1, 4], vec![3], vec![6, 7]];
        let steps = Mutex::new(Vec::new());
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let results = apply_in_lanes(lanes.clone(), |index| {
            let (steps, running, most) = (&steps, &running, &most);
            async move {
                steps.lock().expect("lock").push(Step::Start(index));
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                for _ in 0..(index % 3 + 1) {
                    tokio::task::yield_now().await;
                }
                running.fetch_sub(1, Ordering::SeqCst);
                steps.lock().expect("lock").push(Step::End(index));
                (index * 10, false)
            }
        })
        .await;
        assert_eq!(
            results,
            (0..8).map(|i| (i, i * 10)).collect::<Vec<_>>(),
            "every record once, the results in stream order"
        );
        let steps = steps.into_inner().expect("lock");
        let at = |step: Step| steps.iter().position(|s| *s == step).expect("a step");
        for lane in &lanes {
            for pair in lane.windows(2) {
                assert!(
                    at(Step::End(pair[0])) < at(Step::Start(pair[1])),
                    "{} ends before {} of the same item starts: {steps:?}",
                    pair[0],
                    pair[1]
                );
            }
        }
        assert!(
            most.load(Ordering::SeqCst) > 1,
            "records of different items ran at once: {steps:?}"
        );
    }

    #[tokio::test]
    async fn after_a_stop_no_later_record_starts_and_every_earlier_one_runs() {
        // Item 0's second record (30) stops the batch at once, while the
        // other items' records (1 to 20) are still to run or under way; 31
        // comes after the stop.
        let mut lanes = vec![vec![0, 30]];
        lanes.extend((1..=20).map(|i| vec![i]));
        lanes.push(vec![31]);
        let results = apply_in_lanes(lanes, |index| async move {
            if index != 0 && index != 30 {
                tokio::task::yield_now().await;
            }
            (index, index == 30)
        })
        .await;
        let ran: Vec<usize> = results.into_iter().map(|(index, _)| index).collect();
        let mut expected: Vec<usize> = (0..=20).collect();
        expected.push(30);
        assert_eq!(ran, expected);
    }
}
