//! The local stream poller does what template.yaml's event source mapping
//! does on AWS: records no filter matches never reach the function; partial
//! failures are redelivered from the lowest failed record; a function error
//! splits the batch (bisection) until the failing record is alone; a batch
//! given up on after the retries, or records past the maximum age, go to the
//! failure destination; a batch gathers records for the batching window; a
//! restarted poller resumes from its checkpoint.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use aws_lambda_events::event::{
    dynamodb::{Event, EventRecord},
    streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse},
};
use blog::{fanout, recovery::FailureNotice};
use local::stream_poller::{InvokeError, StreamPoller};

use crate::support::{TestApi, endpoint, stream_mapping};

fn sequence_numbers(event: &Event) -> Vec<String> {
    event
        .records
        .iter()
        .filter_map(|r| r.change.sequence_number.clone())
        .collect()
}

/// The record's partition key.
fn pk(record: &EventRecord) -> Option<String> {
    let keys = serde_json::to_value(&record.change.keys).ok()?;
    keys["PK"]["S"].as_str().map(str::to_owned)
}

/// A partial-batch response naming these records as failed.
fn failing(sequence_numbers: &[&String]) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    for sequence_number in sequence_numbers {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some((*sequence_number).clone());
        response.batch_item_failures.push(failure);
    }
    response
}

/// The notices a poller sent to its failure destination.
#[derive(Clone, Default)]
struct Notices(Arc<Mutex<Vec<FailureNotice>>>);

impl Notices {
    fn on(&self, poller: StreamPoller) -> StreamPoller {
        let notices = self.0.clone();
        poller.with_failure_sink(Box::new(move |notice| {
            notices.lock().expect("lock").push(notice);
            Box::pin(async { Ok(()) })
        }))
    }

    fn taken(&self) -> Vec<FailureNotice> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }
}

/// Writes `count` posts and waits until the stream holds their records.
async fn posts(api: &TestApi, count: usize) -> Vec<String> {
    let author = api.user("author").await;
    let mut ids = Vec::new();
    for i in 0..count {
        ids.push(api.post(&author, format!("post {i}"), "text").await);
    }
    // The profile, its claim, and each post with its content.
    api.wait_for_stream(2 + 2 * count).await;
    ids
}

#[tokio::test]
async fn records_no_filter_matches_never_reach_the_function_and_are_passed() {
    let api = TestApi::start().await;
    api.user("someone").await;
    api.wait_for_stream(2).await;
    let delivered: Mutex<Vec<Event>> = Mutex::default();
    let deliver = |event: Event| {
        delivered.lock().expect("lock").push(event);
        async { Ok(DynamoDbEventResponse::default()) }
    };
    let mut poller = api.poller();
    assert_eq!(
        poller.poll_once(&deliver).await.expect("poll"),
        2,
        "a profile and its username claim read"
    );
    assert!(
        delivered.lock().expect("lock").is_empty(),
        "a new profile and a claim are no fan-out's business: not delivered"
    );
    assert_eq!(
        poller.poll_once(&deliver).await.expect("poll"),
        0,
        "the position moved past them"
    );

    let author = api.user("author").await;
    let post = api.post(&author, "kept", "text").await;
    api.wait_for_stream(6).await;
    while poller.poll_once(&deliver).await.expect("poll") > 0 {}
    let delivered = delivered.into_inner().expect("lock");
    let records: Vec<_> = delivered.iter().flat_map(|e| &e.records).collect();
    assert_eq!(records.len(), 1, "the post's INSERT alone: {records:?}");
    assert_eq!(records[0].event_name, "INSERT");
    assert_eq!(pk(records[0]), Some(format!("POST#{post}")));
}

#[tokio::test]
async fn a_partial_failure_is_redelivered_from_the_lowest_failed_record() {
    let api = TestApi::start().await;
    posts(&api, 3).await;
    let deliveries: Mutex<Vec<Vec<String>>> = Mutex::default();
    let deliver = |event: Event| {
        let seqs = sequence_numbers(&event);
        let first_delivery = deliveries.lock().expect("lock").is_empty();
        deliveries.lock().expect("lock").push(seqs.clone());
        let store = &api.app.store;
        async move {
            let applied = fanout::handle(store, event).await;
            assert!(applied.batch_item_failures.is_empty());
            // The first time, the third and second records "fail".
            Ok(if first_delivery {
                failing(&[&seqs[2], &seqs[1]])
            } else {
                applied
            })
        }
    };
    let mut poller = api.poller();
    while poller.poll_once(&deliver).await.expect("poll") > 0 {}
    let deliveries = deliveries.into_inner().expect("lock");
    assert_eq!(
        deliveries[0].len(),
        3,
        "the three posts' INSERTs (the profile, its claim and the contents filtered out)"
    );
    assert_eq!(
        deliveries[1],
        deliveries[0][1..],
        "again from the lowest failed record"
    );
    assert_eq!(
        api.get_feed().await.1["items"].as_array().map(Vec::len),
        Some(3)
    );
}

#[tokio::test]
async fn a_batch_that_keeps_failing_is_given_up_after_the_templates_retries() {
    let api = TestApi::start().await;
    posts(&api, 1).await;
    let attempts = Mutex::new(0);
    let deliver = |event: Event| {
        *attempts.lock().expect("lock") += 1;
        let seqs = sequence_numbers(&event);
        async move { Ok(failing(&[&seqs[0]])) }
    };
    let notices = Notices::default();
    let mut poller = notices.on(api.poller());
    let deliveries = poller.mapping().maximum_deliveries();
    assert_eq!(
        deliveries,
        Some(11),
        "template.yaml: MaximumRetryAttempts 10"
    );
    assert_eq!(poller.poll_once(&deliver).await.expect("poll"), 4);
    assert_eq!(Some(*attempts.lock().expect("lock")), deliveries);
    let notices = notices.taken();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].condition(), Some("RetryAttemptsExhausted"));
    assert_eq!(notices[0].batch.batch_size, Some(1), "the post's INSERT");
    // It moved on: the next poll finds nothing new.
    assert_eq!(poller.poll_once(&deliver).await.expect("poll"), 0);
}

/// A function error (the function failed as a whole) splits the batch in
/// two, again and again, until the record that fails it is alone; splitting
/// is no retry. The rest is applied once each; the failing record alone is
/// retried as the template says and its notice goes to the destination.
#[tokio::test]
async fn a_function_error_is_bisected_down_to_the_failing_record() {
    let api = TestApi::start().await;
    let ids = posts(&api, 8).await;
    let poison = format!("POST#{}", ids[5]);
    let invocations: Mutex<Vec<usize>> = Mutex::default();
    let applied: Mutex<Vec<String>> = Mutex::default();
    let deliver = |event: Event| {
        invocations.lock().expect("lock").push(event.records.len());
        let keys: Vec<String> = event.records.iter().filter_map(pk).collect();
        let fails = keys.contains(&poison);
        if !fails {
            applied.lock().expect("lock").extend(keys);
        }
        async move {
            if fails {
                Err(InvokeError::Function("poisoned".into()))
            } else {
                Ok(DynamoDbEventResponse::default())
            }
        }
    };
    let notices = Notices::default();
    let mut poller = notices.on(api.poller());
    while poller.poll_once(&deliver).await.expect("poll") > 0 {}
    // 8 → 4 ok + 4; 4 → 2 + 2 ok; 2 → 1 ok + 1 poisoned, delivered 11
    // times in all (the first and 10 retries).
    assert_eq!(
        invocations.into_inner().expect("lock"),
        [[8, 4, 4, 2, 1].as_slice(), &[1; 11], &[2]].concat()
    );
    let mut expected: Vec<String> = ids.iter().map(|id| format!("POST#{id}")).collect();
    expected.remove(5);
    assert_eq!(
        applied.into_inner().expect("lock"),
        expected,
        "each once, in order"
    );
    let notices = notices.taken();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].condition(), Some("RetryAttemptsExhausted"));
    assert_eq!(notices[0].batch.batch_size, Some(1));
}

#[tokio::test]
async fn without_bisection_a_function_error_retries_the_whole_batch() {
    let api = TestApi::start().await;
    posts(&api, 3).await;
    let invocations = Mutex::new(Vec::new());
    let deliver = |event: Event| {
        invocations.lock().expect("lock").push(event.records.len());
        async { Err(InvokeError::Function("always".into())) }
    };
    let mut mapping = stream_mapping();
    mapping.bisect_on_function_error = false;
    let notices = Notices::default();
    let mut poller = notices.on(api.poller_with(mapping, &endpoint(), None));
    while poller.poll_once(&deliver).await.expect("poll") > 0 {}
    assert_eq!(invocations.into_inner().expect("lock"), [3; 11]);
    let notices = notices.taken();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].batch.batch_size, Some(3));
}

#[tokio::test]
async fn without_report_batch_item_failures_a_reported_failure_is_a_success() {
    let api = TestApi::start().await;
    posts(&api, 2).await;
    let invocations = Mutex::new(0);
    let deliver = |event: Event| {
        *invocations.lock().expect("lock") += 1;
        let seqs = sequence_numbers(&event);
        async move { Ok(failing(&[&seqs[0]])) }
    };
    let mut mapping = stream_mapping();
    mapping.report_batch_item_failures = false;
    let notices = Notices::default();
    let mut poller = notices.on(api.poller_with(mapping, &endpoint(), None));
    while poller.poll_once(&deliver).await.expect("poll") > 0 {}
    assert_eq!(*invocations.lock().expect("lock"), 1);
    assert!(notices.taken().is_empty());
}

/// Records older than `MaximumRecordAgeInSeconds` never reach the function:
/// their notice goes to the failure destination (the template says 6 hours;
/// one second here).
#[tokio::test]
async fn records_past_the_maximum_age_go_to_the_failure_destination() {
    let api = TestApi::start().await;
    posts(&api, 2).await;
    // DynamoDB Streams times records to the second, rounded down.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let invocations = Mutex::new(0);
    let deliver = |_event: Event| {
        *invocations.lock().expect("lock") += 1;
        async { Ok(DynamoDbEventResponse::default()) }
    };
    let mut mapping = stream_mapping();
    mapping.maximum_record_age = Some(Duration::from_secs(1));
    let notices = Notices::default();
    let mut poller = notices.on(api.poller_with(mapping, &endpoint(), None));
    assert_eq!(poller.poll_once(&deliver).await.expect("poll"), 6);
    assert_eq!(*invocations.lock().expect("lock"), 0);
    let notices = notices.taken();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].condition(), Some("RecordAgeExceeded"));
    assert_eq!(
        notices[0].batch.batch_size,
        Some(2),
        "the two posts' INSERTs"
    );
    assert_eq!(poller.poll_once(&deliver).await.expect("poll"), 0);
}

/// With a batching window, a batch waits for more records (up to the batch
/// size) before it is delivered: a post written while the first one's batch
/// gathers goes in the same invocation.
#[tokio::test]
async fn a_batch_gathers_records_for_the_batching_window() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    api.post(&author, "first", "text").await;
    api.wait_for_stream(4).await;
    let mut mapping = stream_mapping();
    mapping.batching_window = Duration::from_secs(4);
    let mut poller = api.poller_with(mapping, &endpoint(), None);
    let delivered: Arc<Mutex<Vec<usize>>> = Arc::default();
    let seen = delivered.clone();
    let polling = tokio::spawn(async move {
        let deliver = |event: Event| {
            seen.lock().expect("lock").push(event.records.len());
            async { Ok(DynamoDbEventResponse::default()) }
        };
        poller.poll_once(&deliver).await.expect("poll")
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    api.post(&author, "second", "text").await;
    assert_eq!(
        polling.await.expect("the poll"),
        6,
        "both posts' records read"
    );
    assert_eq!(
        *delivered.lock().expect("lock"),
        [2],
        "one invocation with both posts"
    );
}

/// A `GetRecords` page holds more than a batch takes: what the batch leaves
/// starts the next one, every record is delivered once, in stream order, and
/// the checkpoint is past them all.
#[tokio::test]
async fn a_page_larger_than_a_batch_is_delivered_batch_by_batch_in_order() {
    let api = TestApi::start().await;
    posts(&api, 5).await;
    let all: Vec<String> = api
        .stream_records()
        .await
        .into_iter()
        .filter(|r| r.event_name == "INSERT" && pk(r).is_some_and(|pk| pk.starts_with("POST#")))
        .filter(|r| {
            r.change.new_image.get("type") == Some(&serde_dynamo::AttributeValue::S("post".into()))
        })
        .filter_map(|r| r.change.sequence_number)
        .collect();
    assert_eq!(all.len(), 5, "the posts' INSERTs");
    let checkpoint =
        std::env::temp_dir().join(format!("checkpoint-{}.json", ulid::Ulid::generate()));
    let mut mapping = stream_mapping();
    mapping.batch_size = 2;
    let delivered: Mutex<Vec<Vec<String>>> = Mutex::default();
    let deliver = |event: Event| {
        delivered
            .lock()
            .expect("lock")
            .push(sequence_numbers(&event));
        async { Ok(DynamoDbEventResponse::default()) }
    };
    let mut poller = api.poller_with(mapping.clone(), &endpoint(), Some(checkpoint.clone()));
    assert_eq!(
        poller.poll_once(&deliver).await.expect("poll"),
        12,
        "the profile, its claim, and each post with its content, read in one poll"
    );
    let batches = delivered.lock().expect("lock").clone();
    assert_eq!(
        batches.iter().map(Vec::len).collect::<Vec<_>>(),
        [2, 2, 1],
        "batches of at most 2"
    );
    assert_eq!(batches.concat(), all, "each post once, in stream order");
    let mut restarted = api.poller_with(mapping, &endpoint(), Some(checkpoint.clone()));
    assert_eq!(
        restarted.poll_once(&deliver).await.expect("poll"),
        0,
        "nothing is read again"
    );
    let _ = std::fs::remove_file(checkpoint);
}

#[tokio::test]
async fn a_restarted_poller_resumes_from_its_checkpoint() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    api.post(&author, "before the restart", "text").await;
    api.wait_for_stream(3).await;
    let checkpoint =
        std::env::temp_dir().join(format!("checkpoint-{}.json", ulid::Ulid::generate()));
    let store = &api.app.store;
    let deliver = |event: Event| async move { Ok(fanout::handle(store, event).await) };

    let mut first = api.poller_with_checkpoint(&checkpoint);
    assert!(first.poll_once(&deliver).await.expect("poll") >= 3);
    while first.poll_once(&deliver).await.expect("poll") > 0 {}
    drop(first);

    let mut restarted = api.poller_with_checkpoint(&checkpoint);
    assert_eq!(
        restarted.poll_once(&deliver).await.expect("poll"),
        0,
        "nothing is delivered twice"
    );
    api.post(&author, "after the restart", "text").await;
    assert!(restarted.poll_once(&deliver).await.expect("poll") >= 1);
    let (_, feed) = api.get_feed().await;
    assert_eq!(feed["items"][0]["title"], "after the restart");
    assert_eq!(feed["items"][1]["title"], "before the restart");
    let _ = std::fs::remove_file(checkpoint);
}

/// An invocation that never reached the function is no retry: the batch is
/// there for the next poll, however many times that happens.
#[tokio::test]
async fn an_unreachable_function_leaves_the_batch_for_the_next_poll() {
    let api = TestApi::start().await;
    posts(&api, 1).await;
    let store = &api.app.store;
    let down = |_event: Event| async {
        Err::<DynamoDbEventResponse, _>(InvokeError::Unreachable("connection refused".into()))
    };
    let up = |event: Event| async move { Ok(fanout::handle(store, event).await) };
    let mut poller = api.poller();
    for _ in 0..15 {
        assert!(poller.poll_once(&down).await.is_err());
    }
    assert!(
        poller.poll_once(&up).await.expect("poll") >= 4,
        "the same records (and the fan-out's own), the post delivered now"
    );
    assert_eq!(
        api.get_feed().await.1["items"].as_array().map(Vec::len),
        Some(1)
    );
}
