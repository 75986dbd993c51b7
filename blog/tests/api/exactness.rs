//! The fan-out is exact under Lambda's delivery: records at least once, in
//! order per item, interleaved in any order across items, and after a partial
//! failure again from the lowest failed record. A workload's real stream
//! records (as DynamoDB Local produced them) are applied to copies of the
//! table in many such schedules; every copy must end up identical to the one a
//! single clean application gives.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    time::Duration,
};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use blog::{
    fanout,
    keys::{FEED_PK, PK, POST_PREFIX, RENAME_SK, SK},
    store::{Store, meter::CapacityMeter},
};
use futures::future::join_all;
use proptest::{prelude::*, test_runner::TestRunner};
use serde_json::json;

use crate::support::{TestApi, client, endpoint, new_table, store_snapshot};

type Item = HashMap<String, AttributeValue>;

/// The feed keeps this many posts here, so that a small workload trims it.
const CAPACITY: usize = 8;

/// What the workload left: its table before any fan-out, and its stream.
struct Recorded {
    before: Vec<Item>,
    records: Vec<EventRecord>,
}

/// Users post, comment, like, take comments and likes back, delete a post,
/// edit and rename, concurrently; nothing is fanned out yet. Returns the table and every
/// stream record it produced.
async fn record_workload() -> Recorded {
    let api = TestApi::start_with_feed_capacity(CAPACITY).await;
    let users = join_all((0..3).map(|i| api.user_named(format!("member{i}")))).await;
    let mut posts = Vec::new();
    for round in 0..6 {
        posts.extend(
            join_all(
                users
                    .iter()
                    .map(|u| api.post(u, format!("round {round}"), "text")),
            )
            .await,
        );
    }
    join_all(posts.iter().enumerate().map(|(i, post)| {
        let (api, who) = (&api, &users[i % users.len()]);
        async move {
            if i % 2 == 0 {
                api.like(who, post).await;
            }
            if i % 3 == 0 {
                let id = api.comment(who, post, "a comment").await;
                // Some are taken back: a REMOVE and a count change down.
                if i % 4 == 0 {
                    assert_eq!(api.take_back_comment(who, post, &id).await.0, 204);
                }
            }
            // Some likes are taken back, and one of them given again.
            if i % 4 == 0 {
                assert_eq!(api.unlike(who, post).await.0, 204);
                if i == 0 {
                    assert_eq!(api.like_post(who, post).await.0, 201);
                }
            }
        }
    }))
    .await;
    let edits = [(0, "edited title"), (posts.len() - 1, "newest, edited")];
    for (index, title) in edits {
        let author = &users[index % users.len()];
        let body = json!({ "title": title });
        assert_eq!(api.edit_post(author, &posts[index], body).await.0, 200);
    }
    // A post with a like and a comment deleted (its author is users[3 % 3]).
    let deleted = &posts[3];
    assert_eq!(api.delete_post(&users[0], deleted).await.0, 204);
    for (who, name) in [
        (&users[0], "renamed_once"),
        (&users[0], "renamed_twice"),
        (&users[1], "other_name"),
    ] {
        assert_eq!(api.change_username(who, who, name).await.0, 200);
    }
    // Late activity by a renamed user on the oldest posts.
    api.like(&users[0], &posts[1]).await;

    let before = store_snapshot(&api.app.store).await;
    let records = api.stream_records().await;
    assert!(records.len() > 60, "{} records", records.len());
    Recorded { before, records }
}

/// A new table holding `items`, with the same small feed.
async fn copy_of(items: &[Item]) -> Store {
    metered_copy_of(items, &CapacityMeter::default()).await
}

async fn metered_copy_of(items: &[Item], meter: &CapacityMeter) -> Store {
    let client = client(&endpoint(), meter, None);
    let name = new_table(&client).await;
    for chunk in items.chunks(25) {
        let writes = chunk
            .iter()
            .map(|item| {
                let put = PutRequest::builder()
                    .set_item(Some(item.clone()))
                    .build()
                    .expect("put");
                WriteRequest::builder().put_request(put).build()
            })
            .collect();
        let mut pending = HashMap::from([(name.clone(), writes)]);
        while !pending.is_empty() {
            let out = client
                .batch_write_item()
                .set_request_items(Some(pending))
                .send()
                .await
                .expect("load");
            pending = out.unprocessed_items.unwrap_or_default();
            pending.retain(|_, w| !w.is_empty());
        }
    }
    crate::support::quiet_store(client, name).with_feed_capacity(CAPACITY)
}

/// Applies batches in order, as deliveries of the fan-out function.
async fn apply(store: &Store, batches: &[Vec<EventRecord>]) -> Vec<Item> {
    for batch in batches {
        let mut event = Event::default();
        event.records = batch.clone();
        let response = fanout::handle(store, event).await;
        assert!(
            response.batch_item_failures.is_empty(),
            "{:?}",
            response.batch_item_failures
        );
    }
    visible(store_snapshot(store).await)
}

/// The table as the requests see it. The feed partition shows its newest
/// `CAPACITY` entries; below them it may keep up to its slack of older ones
/// until the next trim, and its floor and count move with the trims, whose
/// timing depends on the order records arrive in. So of the feed partition
/// only the newest `CAPACITY` entries count. A rename's saved place
/// (`USER#u/RENAME`) is the fan-out's bookkeeping, not data: how many
/// invocations it took and when depends on the schedule, so it does not count
/// either. Every other item counts whole.
fn visible(mut items: Vec<Item>) -> Vec<Item> {
    let text = |item: &Item, name: &str| {
        item.get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    let mut entries: Vec<String> = items
        .iter()
        .filter(|i| text(i, PK) == FEED_PK && text(i, SK).starts_with(POST_PREFIX))
        .map(|i| text(i, SK))
        .collect();
    entries.sort_unstable_by(|a, b| b.cmp(a));
    entries.truncate(CAPACITY);
    items.retain(|i| text(i, PK) != FEED_PK || entries.contains(&text(i, SK)));
    items.retain(|i| text(i, SK) != RENAME_SK);
    items
}

/// The record's item: its `PK` and `SK`.
fn item_key(record: &EventRecord) -> String {
    let key = serde_json::to_value(&record.change.keys).unwrap_or_default();
    format!("{}/{}", key[PK], key[SK])
}

/// A delivery schedule Lambda could produce from `records`:
/// - `picks` interleaves the items' record queues (each queue keeps its order);
/// - each `(size, resume)` is one delivery of `1 + size % 30` records, after
///   which delivery resumes at its start plus `resume % (len + 1)` (a partial
///   failure replays from that record; `len` means the batch succeeded);
/// - `twice` delivers the whole stream once more at the end.
fn schedule(
    records: &[EventRecord],
    picks: &[usize],
    cuts: &[(usize, usize)],
    twice: bool,
) -> Vec<Vec<EventRecord>> {
    let mut queues: BTreeMap<String, VecDeque<EventRecord>> = BTreeMap::new();
    for record in records {
        queues
            .entry(item_key(record))
            .or_default()
            .push_back(record.clone());
    }
    let mut queues: Vec<VecDeque<EventRecord>> = queues.into_values().collect();
    let mut interleaved = Vec::with_capacity(records.len());
    let mut picks = picks.iter().copied().chain(std::iter::repeat(0));
    while !queues.is_empty() {
        let index = picks.next().unwrap_or_default() % queues.len();
        if let Some(record) = queues[index].pop_front() {
            interleaved.push(record);
        }
        if queues[index].is_empty() {
            queues.remove(index);
        }
    }
    let mut batches = Vec::new();
    let mut start = 0;
    let mut cuts = cuts.iter();
    while start < interleaved.len() {
        let (size, resume) = cuts.next().copied().unwrap_or((99, usize::MAX));
        let end = (start + 1 + size % 30).min(interleaved.len());
        batches.push(interleaved[start..end].to_vec());
        let len = end - start;
        start += if resume == usize::MAX {
            len
        } else {
            resume % (len + 1)
        };
    }
    if twice {
        batches.push(records.to_vec());
    }
    batches
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn any_lambda_delivery_schedule_gives_the_same_table() {
    let recorded = record_workload().await;
    let clean = apply(
        &copy_of(&recorded.before).await,
        std::slice::from_ref(&recorded.records),
    )
    .await;
    assert_ne!(clean, recorded.before, "the fan-out changed something");

    // The two schedules the issue names, then generated ones.
    let whole = recorded.records.clone();
    let prefix = whole[..whole.len() / 2].to_vec();
    for (name, batches) in [
        ("twice", vec![whole.clone(), whole.clone()]),
        ("prefix, then whole", vec![prefix, whole]),
    ] {
        assert!(
            apply(&copy_of(&recorded.before).await, &batches).await == clean,
            "{name}"
        );
    }

    let strategy = (
        prop::collection::vec(any::<usize>(), 0..400),
        prop::collection::vec((any::<usize>(), any::<usize>()), 0..40),
        any::<bool>(),
    );
    let config = ProptestConfig {
        cases: 12,
        failure_persistence: None,
        max_shrink_iters: 8,
        ..ProptestConfig::default()
    };
    let runtime = tokio::runtime::Handle::current();
    let result = tokio::task::block_in_place(|| {
        TestRunner::new(config).run(&strategy, |(picks, cuts, twice)| {
            let batches = schedule(&recorded.records, &picks, &cuts, twice);
            let table =
                runtime.block_on(async { apply(&copy_of(&recorded.before).await, &batches).await });
            prop_assert!(
                table == clean,
                "a schedule of {} batches gave another table:\n{}",
                batches.len(),
                diff(&clean, &table)
            );
            Ok(())
        })
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fan_out_killed_between_writes_then_rerun_gives_the_same_table() {
    let recorded = record_workload().await;
    let meter = CapacityMeter::default();
    let clean_store = metered_copy_of(&recorded.before, &meter).await;
    meter.take();
    let clean = apply(&clean_store, std::slice::from_ref(&recorded.records)).await;
    // The batch's own calls (the snapshot's Scan pages are not among them).
    let calls = meter
        .take()
        .iter()
        .filter(|c| c.operation != "Scan")
        .count();
    let mut event = Event::default();
    event.records = recorded.records.clone();
    let mut kills = 0;
    for killed_after in [
        1,
        2,
        calls / 8,
        calls / 4,
        calls / 2,
        calls * 3 / 4,
        calls * 7 / 8,
    ] {
        let meter = CapacityMeter::default();
        let store = metered_copy_of(&recorded.before, &meter).await;
        meter.take();
        // The process dies once `killed_after` DynamoDB calls have gone out:
        // the handler's future is dropped wherever it is, mid-request maybe.
        let killed = async {
            while meter.count() < killed_after {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        };
        // (`calls` counts attempts: an SDK retry in the clean run makes it
        // larger than a run without one, so a batch may finish first.)
        tokio::select! {
            _ = fanout::handle(&store, event.clone()) => {}
            () = killed => kills += 1,
        }
        // Lambda delivers the whole batch again.
        let table = apply(&store, std::slice::from_ref(&recorded.records)).await;
        assert!(
            table == clean,
            "killed after {killed_after} calls:\n{}",
            diff(&clean, &table)
        );
    }
    assert!(kills >= 6, "only {kills} of 7 runs were killed mid-batch");
}

#[tokio::test]
async fn a_poisoned_record_is_reported_and_the_rest_applied() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let first = api.post(&author, "first", "text").await;
    let second = api.post(&author, "second", "text").await;
    let mut records = api.stream_records().await;

    // A post record whose image is not a whole post: it has no postId.
    let mut poisoned = records
        .iter()
        .find(|r| r.event_name == "INSERT" && is_post(r))
        .cloned()
        .expect("a post INSERT");
    poisoned.event_id = "poisoned-event".into();
    poisoned.change.sequence_number = Some("999999999999999999999".into());
    let mut image: serde_json::Value =
        serde_json::to_value(&poisoned.change.new_image).expect("image");
    image.as_object_mut().map(|fields| fields.remove("postId"));
    poisoned.change.new_image = serde_json::from_value(image).expect("image");
    records.insert(1, poisoned);

    let mut event = Event::default();
    event.records = records;
    let response = fanout::handle(&api.app.store, event).await;
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(failed, vec![Some("999999999999999999999".to_owned())]);
    let (_, feed) = api.get_feed().await;
    let listed: Vec<_> = feed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| p["postId"].clone())
        .collect();
    assert_eq!(
        listed,
        vec![json!(second), json!(first)],
        "the rest of the batch was applied"
    );
}

fn is_post(record: &EventRecord) -> bool {
    serde_json::to_value(&record.change.new_image)
        .is_ok_and(|image| image["type"] == json!({ "S": "post" }))
}

/// The items that differ between two snapshots, for a readable failure.
fn diff(expected: &[Item], actual: &[Item]) -> String {
    let by_key = |items: &[Item]| -> BTreeMap<String, String> {
        items
            .iter()
            .map(|i| {
                let attrs: BTreeMap<_, _> = i
                    .iter()
                    .map(|(k, v)| (k.clone(), format!("{v:?}")))
                    .collect();
                (
                    format!("{:?}/{:?}", i.get(PK), i.get(SK)),
                    format!("{attrs:?}"),
                )
            })
            .collect()
    };
    let (expected, actual) = (by_key(expected), by_key(actual));
    let mut out = String::new();
    for key in expected
        .keys()
        .chain(actual.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        if expected.get(key) != actual.get(key) {
            out += &format!(
                "{key}\n  expected {:?}\n  actual   {:?}\n",
                expected.get(key),
                actual.get(key)
            );
        }
    }
    out
}
