//! The DynamoDB Streams fan-out: keeps every denormalised copy true.
//!
//! | stream record | what it writes | why it is idempotent |
//! |---|---|---|
//! | post INSERT | the post's feed entry and the feed's count; when the count passes the capacity, its reserve and its slack (100 + 20 + 20), trims the feed back to the capacity and its reserve (120) (also when the entry was there already: a first delivery may have died before trimming) | put only if absent and the post is above the feed's floor |
//! | post, comment or like INSERT | the author's current username, if the profile moved on since the item was written (a rename whose walk read GSI1 before the index showed the item) | update only where `userVersion` is older |
//! | post MODIFY (short form changed) | the feed entry's copy of it, once a batch: a MODIFY followed in the batch by another of the same post is coalesced into that one | update only if the entry exists and is older |
//! | user MODIFY (username changed) | the username onto every post, comment and like the user wrote, page by page, its place saved (`store::rename`); near the deadline it stops and the record is reported failed, so that the retry goes on from there | update only where `userVersion` is older; an older rename's walk stops once a newer one exists |
//! | user REMOVE (erased) | everything the user wrote out, page by page under GSI1 `USER#u`: each post as `DELETE /posts/{id}` deletes it, each comment and like with its post's count one down; near the deadline it stops and the record is reported failed, so that the retry deletes what is left (`store::erasure`) | deleting what is gone is a no-op; the erased user can write nothing new, and what they had in flight is taken out by the INSERT rule |
//! | post, comment or like INSERT of an erased author (in flight when the erasure committed) | the item out, with its count (as the erasure's walk does) | deleting what is gone is a no-op |
//! | post REMOVE (deleted) | its feed entry out (the count one down; the reserve's next newest shows in its place), then every comment, like and marker of its partition (and of a hot post's shards), a page at a time; near the deadline it stops and the record is reported failed, so that the retry deletes what is left (`store::deletion`) | deleting what is gone is a no-op; nothing can be added to a deleted post; a late INSERT finds no post and takes its entry back out |
//! | a hot post's shard counter MODIFY | once a batch per post (its counters' records coalesced into the last one): what each shard counted since the version the post holds of it, added onto the post's counts (`store::hot`); that post MODIFY then refreshes the feed entry | the post update is conditional on each shard's version as read |
//! | anything else | nothing | – |
//!
//! A quiet post's counts need no rule of their own: a comment or like changes
//! the post in the same transaction, and that change reaches the feed entry as
//! a post MODIFY. A hot post's count in a shard counter reaches the post
//! through the shard counter rule, and the feed entry from there.
//! The fan-out's own writes to feed entries, comments and likes match no rule,
//! and its writes to posts only refresh feed entries, so nothing loops.
//!
//! Lambda delivers records at least once, in order per item, and after a
//! partial failure again from the lowest failed sequence number, so a record
//! may come again after newer ones: every write above is conditional on
//! versions, and applying any such schedule gives the table a single clean
//! application gives. A batch is applied in that order too: the records of
//! one item one after another, those of different items at once (as Lambda
//! runs the batches of different shards at once).

use std::{
    collections::HashMap,
    future::Future,
    sync::atomic::{AtomicUsize, Ordering},
    time::{SystemTime, UNIX_EPOCH},
};

use aws_lambda_events::event::{
    dynamodb::{Event, EventRecord},
    streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse},
};
use futures::StreamExt;
use serde::{Deserialize, de::DeserializeOwned};
use thiserror::Error;

use crate::{
    ids::UserId,
    keys::{Key, PostPartition},
    metrics::{self, Unit},
    store::{
        ItemType, Store, StoreError,
        deletion::Removal,
        erasure::{ErasureStep, Written},
        feed::{Copied, FeedEntryItem},
        hot::{ShardCounterItem, Summed},
        posts::PostItem,
        rename::{Deadline, RenameStep},
        users::{Author, UserItem},
    },
};

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
    let mut stats = BatchStats {
        records: event.records.len(),
        oldest_age_ms: oldest_age_ms(&event.records),
        ..BatchStats::default()
    };
    let mut response = DynamoDbEventResponse::default();
    let superseded = superseded_post_changes(&event.records);
    // The records coalesced into each carrier: it writes their changes too.
    let mut carried: HashMap<usize, Vec<&EventRecord>> = HashMap::new();
    for (record, carrier) in event.records.iter().zip(&superseded) {
        if let Some(carrier) = carrier {
            stats.count(Outcome::Coalesced);
            carried.entry(*carrier).or_default().push(record);
        }
    }
    let lanes = item_lanes(&event.records, &superseded);
    let applied = apply_in_lanes(lanes, |index| {
        let record = &event.records[index];
        let carried = carried.get(&index).map_or(&[][..], Vec::as_slice);
        // Transactions of a redelivered record reuse their tokens (a token is
        // the account's, so the table is part of the seed).
        let seed = format!("{}/{}", store.table(), record.event_id);
        let applying = apply_record(store, record, &deadline, carried);
        async move {
            let applied = crate::store::request_scope(seed, applying).await;
            let paused = matches!(applied, Ok(Outcome::Paused { .. }));
            (applied, paused)
        }
    })
    .await;
    // The first record reported failed (or paused at): where Lambda delivers
    // from again. Past a pause nothing is reported: it all comes again.
    let mut first_failure = None;
    let mut paused = false;
    for (index, applied) in applied {
        let record = &event.records[index];
        match applied {
            Ok(outcome @ Outcome::Paused { .. }) => {
                stats.count(outcome);
                if !paused {
                    tracing::info!(
                        event_id = %record.event_id,
                        "walk paused before the deadline; it goes on when the record comes again"
                    );
                    response.batch_item_failures.push(failure(record));
                    first_failure.get_or_insert(index);
                    paused = true;
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
                if !paused {
                    response.batch_item_failures.push(failure(record));
                    first_failure.get_or_insert(index);
                }
            }
        }
    }
    // A coalesced MODIFY whose carrier is not applied yet (it failed, or
    // comes at or after the failure) must come again too: else the carrier,
    // delivered again without it, would refresh only when its own images
    // differ, and the coalesced change would be lost. Reporting it moves
    // Lambda's restart back to it.
    if let Some(first) = first_failure {
        let pending = event
            .records
            .iter()
            .zip(&superseded)
            .take(first)
            .find(|(_, carrier)| carrier.is_some_and(|carrier| carrier >= first));
        if let Some((record, _)) = pending {
            response.batch_item_failures.push(failure(record));
        }
    }
    stats.log();
    response
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
/// shard counters of a hot post (the last record of any of its counters
/// carries the others: one write onto the post a batch); `None` for every
/// other record.
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
            let post = match Rule::of(record) {
                Some(Rule::ChangedPost) => post_key(record)?,
                Some(Rule::ShardCounts) => shard_counters_of(record)?,
                _ => return None,
            };
            match last.get(&post) {
                Some(carrier) => Some(*carrier),
                None => {
                    last.insert(post, index);
                    None
                }
            }
        })
        .collect();
    superseded.reverse();
    superseded
}

/// What the shard counters of one post are coalesced under: the key of its
/// first shard's counter.
fn shard_counters_of(record: &EventRecord) -> Option<Key> {
    let key = post_key(record)?;
    let place = PostPartition::of_pk(&key.pk)?;
    Some(Key::new(PostPartition::shard(place.post, 0).pk(), key.sk))
}

/// The record's item key, to tell records of one item apart.
fn post_key(record: &EventRecord) -> Option<Key> {
    serde_dynamo::from_item(record.change.keys.clone()).ok()
}

/// Whether a post MODIFY refreshes its feed entry only when what the feed
/// shows changed between its two images, or always (earlier MODIFYs of the
/// post in its batch were coalesced into it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refresh {
    WhenChanged,
    Always,
}

fn failure(record: &EventRecord) -> DynamoDbBatchItemFailure {
    let mut failure = DynamoDbBatchItemFailure::default();
    failure.item_identifier = record.change.sequence_number.clone();
    failure
}

/// What happened to the item of a stream record (its `eventName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Insert,
    Modify,
    Remove,
}

impl Change {
    /// The record's change; `None` for a name DynamoDB Streams does not use.
    pub fn of(record: &EventRecord) -> Option<Change> {
        match record.event_name.as_str() {
            "INSERT" => Some(Change::Insert),
            "MODIFY" => Some(Change::Modify),
            "REMOVE" => Some(Change::Remove),
            _ => None,
        }
    }
}

/// The rule a record falls under (the table above), if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    NewPost,
    NewReply,
    ChangedPost,
    ChangedUser,
    RemovedUser,
    RemovedPost,
    ShardCounts,
}

impl Rule {
    /// Every item type has its decision here, for every change: a new type
    /// does not compile until it has one, and template.yaml's
    /// `FilterCriteria` must let through exactly what gets a rule (the
    /// API suite's `stream_filter` tests hold the two together).
    fn of(record: &EventRecord) -> Option<Rule> {
        let change = Change::of(record)?;
        match kind_of(record)? {
            ItemType::Post => Some(match change {
                Change::Insert => Rule::NewPost,
                Change::Modify => Rule::ChangedPost,
                Change::Remove => Rule::RemovedPost,
            }),
            // A reply is never edited; its removal changed its post's count
            // in the same transaction (a post MODIFY).
            ItemType::Comment | ItemType::Like => match change {
                Change::Insert => Some(Rule::NewReply),
                Change::Modify | Change::Remove => None,
            },
            // A profile is created with nothing to copy yet.
            ItemType::User => match change {
                Change::Insert => None,
                Change::Modify => Some(Rule::ChangedUser),
                Change::Remove => Some(Rule::RemovedUser),
            },
            // A hot post's counts, added onto the post; made with the switch
            // (nothing counted yet), deleted with the post.
            ItemType::ShardCounter => match change {
                Change::Modify => Some(Rule::ShardCounts),
                Change::Insert | Change::Remove => None,
            },
            // The copies the fan-out keeps and its own bookkeeping: nothing
            // is copied from them.
            ItemType::Username
            | ItemType::LikeShards
            | ItemType::PostContent
            | ItemType::Liker
            | ItemType::FeedEntry
            | ItemType::FeedFloor
            | ItemType::RenameProgress
            | ItemType::Erasure
            | ItemType::RequestRecord
            | ItemType::ParkedRecord
            | ItemType::Other => None,
        }
    }
}

/// Whether [`apply`] may change a copy for this record: what template.yaml's
/// `FilterCriteria` lets through to the function (new posts, comments and
/// likes; changed posts and profiles; deleted posts and profiles). Records of any other
/// kind are [`Outcome::Ignored`], so recovery need not keep them.
pub fn applies_to(record: &EventRecord) -> bool {
    Rule::of(record).is_some()
}

/// The record's item type, from its new image (its old one for a REMOVE);
/// `None` for an image without a known type, which is not one of ours.
fn kind_of(record: &EventRecord) -> Option<ItemType> {
    let (image, which) = match Change::of(record) {
        Some(Change::Remove) => (&record.change.old_image, "old"),
        _ => (&record.change.new_image, "new"),
    };
    decode::<Kind>(image, which).map_or(None, |k| k.kind)
}

/// Applies one stream record; a rename or a deletion stops near `deadline`.
pub async fn apply(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    apply_record(store, record, deadline, &[]).await
}

/// Applies `record`, and the records of its batch `carried` into it.
async fn apply_record(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
    carried: &[&EventRecord],
) -> Result<Outcome, FanoutError> {
    let refresh = if carried.is_empty() {
        Refresh::WhenChanged
    } else {
        Refresh::Always
    };
    // Each rule boxed: their futures are large, and a caller's future holds
    // the largest of them (debug builds overflowed a test thread's stack).
    match Rule::of(record) {
        Some(Rule::NewPost) => Box::pin(new_post(store, record)).await,
        Some(Rule::NewReply) => Box::pin(new_reply(store, record)).await,
        Some(Rule::ChangedPost) => Box::pin(changed_post(store, record, refresh)).await,
        Some(Rule::ChangedUser) => Box::pin(changed_user(store, record, deadline)).await,
        Some(Rule::RemovedUser) => Box::pin(removed_user(store, record, deadline)).await,
        Some(Rule::RemovedPost) => Box::pin(removed_post(store, record, deadline)).await,
        Some(Rule::ShardCounts) => Box::pin(shard_counts(store, record, carried)).await,
        None => Ok(Outcome::Ignored),
    }
}

/// A post INSERT: the post's name caught up, its feed entry, the feed trimmed.
async fn new_post(store: &Store, record: &EventRecord) -> Result<Outcome, FanoutError> {
    let mut post: PostItem = decode(&record.change.new_image, "new")?;
    let renamed = match author_of(store, record).await? {
        Author::Erased => return erased_author(store, record).await,
        Author::Renamed(profile) => Some(profile),
        Author::Current => None,
    };
    // The feed gets the name the post has now.
    if let Some(profile) = &renamed {
        post.username.clone_from(&profile.username);
        post.user_version = profile.version;
    }
    let (entered, entries) = store.fanout().enter_feed(&post).await?;
    // Also when the entry was there already: a first delivery may have
    // entered it and died before trimming.
    let trimmed = if store.fanout().feed_due_trim(entries) {
        store.fanout().trim_feed().await?
    } else {
        0
    };
    let writes = 2 + trimmed + usize::from(renamed.is_some());
    Ok(match (entered, renamed) {
        (Copied::Written, _) | (_, Some(_)) => Outcome::Written { writes },
        _ => Outcome::Stale { writes },
    })
}

/// A comment or like INSERT: its author's name caught up, or the item out
/// if its author was erased meanwhile.
async fn new_reply(store: &Store, record: &EventRecord) -> Result<Outcome, FanoutError> {
    Ok(match author_of(store, record).await? {
        Author::Current => Outcome::Ignored,
        Author::Renamed(_) => Outcome::Written { writes: 1 },
        Author::Erased => return erased_author(store, record).await,
    })
}

/// A new item whose author's account was erased while it was written: out
/// it goes, as the erasure's walk would have taken it.
async fn erased_author(store: &Store, record: &EventRecord) -> Result<Outcome, FanoutError> {
    let key: Key = decode(&record.change.new_image, "new")?;
    let item: Authored = decode(&record.change.new_image, "new")?;
    let written = Written::of(&key).ok_or_else(|| FanoutError::Malformed {
        image: "new",
        reason: format!("{}/{} is not a post, comment or like", key.pk, key.sk),
    })?;
    let erased = store.fanout().erase_written(&item.user_id, written).await?;
    tracing::info!(pk = %key.pk, sk = %key.sk, "an erased author's late item taken out");
    Ok(match erased.total() {
        0 => Outcome::Stale { writes: 1 },
        writes => Outcome::Written { writes },
    })
}

/// A user REMOVE: everything the erased user wrote, out.
async fn removed_user(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    let old: UserItem = decode(&record.change.old_image, "old")?;
    let step = store.fanout().erase_items(&old.user_id, deadline).await?;
    let (erased, paused, finished) = match step {
        ErasureStep::Paused(e) => (e.total(), 1.0, 0.0),
        ErasureStep::Done(e) => (e.total(), 0.0, 1.0),
        ErasureStep::Stale => (0, 0.0, 0.0),
    };
    metrics::emit(
        &[],
        &[
            ("ErasedItems", erased as f64, Unit::Count),
            ("ErasuresPaused", paused, Unit::Count),
            ("ErasuresFinished", finished, Unit::Count),
        ],
    );
    Ok(match step {
        ErasureStep::Paused(e) => Outcome::Paused { writes: e.total() },
        ErasureStep::Done(e) => Outcome::Written {
            writes: e.total() + 2,
        },
        ErasureStep::Stale => Outcome::Stale { writes: 0 },
    })
}

/// A post MODIFY: its feed entry, when what the feed shows changed (or
/// `Always`, for the last of a batch's coalesced MODIFYs).
async fn changed_post(
    store: &Store,
    record: &EventRecord,
    refresh: Refresh,
) -> Result<Outcome, FanoutError> {
    let old: PostItem = decode(&record.change.old_image, "old")?;
    let new: PostItem = decode(&record.change.new_image, "new")?;
    if refresh == Refresh::WhenChanged && short_form(&old) == short_form(&new) {
        return Ok(Outcome::Ignored);
    }
    Ok(match store.fanout().refresh_feed_entry(&new).await? {
        Copied::Written => Outcome::Written { writes: 1 },
        Copied::Stale => Outcome::Stale { writes: 1 },
    })
}

/// Shard counter MODIFYs of a hot post (this one and those of its batch
/// carried into it): what they counted added onto the post, once.
async fn shard_counts(
    store: &Store,
    record: &EventRecord,
    carried: &[&EventRecord],
) -> Result<Outcome, FanoutError> {
    let counters = carried
        .iter()
        .chain(std::iter::once(&record))
        .map(|r| decode::<ShardCounterItem>(&r.change.new_image, "new"))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(post) = counters.first().map(|c| c.post_id) else {
        return Ok(Outcome::Ignored);
    };
    Ok(
        match store.fanout().add_shard_counts(&post, &counters).await? {
            Summed::Written => Outcome::Written { writes: 1 },
            Summed::Stale | Summed::Gone => Outcome::Stale { writes: 0 },
        },
    )
}

/// A user MODIFY: a new username onto everything they wrote.
async fn changed_user(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    let old: UserItem = decode(&record.change.old_image, "old")?;
    let new: UserItem = decode(&record.change.new_image, "new")?;
    if old.username == new.username {
        return Ok(Outcome::Ignored);
    }
    let step = store.fanout().copy_username(&new, deadline).await?;
    let (copies, paused, finished) = match step {
        RenameStep::Paused(r) => (r.written, 1.0, 0.0),
        RenameStep::Superseded(r) => (r.written, 0.0, 0.0),
        RenameStep::Done(r) => (r.written, 0.0, 1.0),
    };
    metrics::emit(
        &[],
        &[
            ("RenameCopies", copies as f64, Unit::Count),
            ("RenamesPaused", paused, Unit::Count),
            ("RenamesFinished", finished, Unit::Count),
        ],
    );
    Ok(match step {
        RenameStep::Paused(renamed) => Outcome::Paused {
            writes: renamed.written + renamed.stale,
        },
        // Stale when every copy already had this rename, or a newer rename
        // took over.
        RenameStep::Superseded(renamed) => Outcome::Stale {
            writes: renamed.written + renamed.stale,
        },
        RenameStep::Done(renamed) if renamed.written == 0 => Outcome::Stale {
            writes: renamed.stale,
        },
        RenameStep::Done(renamed) => Outcome::Written {
            writes: renamed.written + renamed.stale,
        },
    })
}

/// A post REMOVE: its feed entry out, then what its partition holds.
async fn removed_post(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    let old: PostItem = decode(&record.change.old_image, "old")?;
    let left = usize::from(store.fanout().leave_feed(&old.post_id).await?);
    Ok(
        match store
            .fanout()
            .remove_post_items(&old.post_id, old.shards, deadline)
            .await?
        {
            Removal::Paused { deleted } => Outcome::Paused {
                writes: left + deleted,
            },
            Removal::Done { deleted } if left + deleted == 0 => Outcome::Stale { writes: 0 },
            Removal::Done { deleted } => Outcome::Written {
                writes: left + deleted,
            },
        },
    )
}

/// Who wrote a new item that copies its author's username: see
/// [`crate::store::FanOut::author_of_new_item`].
async fn author_of(store: &Store, record: &EventRecord) -> Result<Author, FanoutError> {
    let key: Key = decode(&record.change.new_image, "new")?;
    let item: Authored = decode(&record.change.new_image, "new")?;
    Ok(store
        .fanout()
        .author_of_new_item(&key, &item.user_id, item.user_version)
        .await?)
}

/// What a post, comment or like says of its author.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Authored {
    user_id: UserId,
    user_version: u64,
}

#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type")]
    kind: Option<ItemType>,
}

/// What a feed entry shows of a post: a change elsewhere (content beyond the
/// summary, `updatedAt`) is no reason to write.
fn short_form(post: &PostItem) -> FeedEntryItem {
    FeedEntryItem {
        version: 0,
        user_version: 0,
        ..FeedEntryItem::from(post)
    }
}

fn decode<T: DeserializeOwned>(
    image: &serde_dynamo::Item,
    which: &'static str,
) -> Result<T, FanoutError> {
    serde_dynamo::from_item(image.clone()).map_err(|e| FanoutError::Malformed {
        image: which,
        reason: e.to_string(),
    })
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
}

impl BatchStats {
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
            "fan-out batch"
        );
        let count = |n: usize| n as f64;
        metrics::emit(
            &[],
            &[
                ("Records", count(self.records), Unit::Count),
                ("Applied", count(self.written), Unit::Count),
                ("Stale", count(self.stale), Unit::Count),
                ("Ignored", count(self.ignored), Unit::Count),
                ("Failed", count(self.failed), Unit::Count),
                ("Paused", count(self.paused), Unit::Count),
                ("Writes", count(self.writes), Unit::Count),
                (
                    "OldestRecordAge",
                    self.oldest_age_ms as f64,
                    Unit::Milliseconds,
                ),
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
