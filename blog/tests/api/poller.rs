//! The local stream poller behaves like Lambda's event source mapping: partial
//! failures are redelivered from the lowest failed record, and a restarted
//! poller resumes from its checkpoint.

use std::sync::Mutex;

use aws_lambda_events::event::{
    dynamodb::Event,
    streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse},
};
use blog::fanout;

use crate::support::TestApi;

fn sequence_numbers(event: &Event) -> Vec<String> {
    event
        .records
        .iter()
        .filter_map(|r| r.change.sequence_number.clone())
        .collect()
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

#[tokio::test]
async fn a_partial_failure_is_redelivered_from_the_lowest_failed_record() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    for i in 0..3 {
        api.post(&author, format!("post {i}"), "text").await;
    }
    api.wait_for_stream(8).await;
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
        8,
        "a profile, its username claim and three posts with their contents"
    );
    assert_eq!(
        deliveries[1],
        deliveries[0][1..],
        "again from the lowest failed record"
    );
    assert_eq!(
        api.get("/feed").await.1["items"].as_array().map(Vec::len),
        Some(3)
    );
}

#[tokio::test]
async fn a_batch_that_keeps_failing_is_given_up_after_a_bounded_number_of_tries() {
    let api = TestApi::start().await;
    api.user("someone").await;
    api.wait_for_stream(2).await;
    let attempts = Mutex::new(0);
    let deliver = |event: Event| {
        *attempts.lock().expect("lock") += 1;
        let seqs = sequence_numbers(&event);
        async move { Ok(failing(&[&seqs[0]])) }
    };
    let mut poller = api.poller();
    assert_eq!(
        poller.poll_once(&deliver).await.expect("poll"),
        2,
        "a profile and its username claim"
    );
    assert_eq!(
        *attempts.lock().expect("lock"),
        local::stream_poller::MAX_ATTEMPTS
    );
    // It moved on: the next poll finds nothing new.
    assert_eq!(poller.poll_once(&deliver).await.expect("poll"), 0);
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
    let (_, feed) = api.get("/feed").await;
    assert_eq!(feed["items"][0]["title"], "after the restart");
    assert_eq!(feed["items"][1]["title"], "before the restart");
    let _ = std::fs::remove_file(checkpoint);
}

#[tokio::test]
async fn an_unreachable_function_leaves_the_batch_for_the_next_poll() {
    let api = TestApi::start().await;
    api.user("patient").await;
    api.wait_for_stream(2).await;
    let store = &api.app.store;
    let down =
        |_event: Event| async { Err::<DynamoDbEventResponse, _>("connection refused".to_owned()) };
    let up = |event: Event| async move { Ok(fanout::handle(store, event).await) };
    let mut poller = api.poller();
    assert!(poller.poll_once(&down).await.is_err());
    assert_eq!(
        poller.poll_once(&up).await.expect("poll"),
        2,
        "the same records, delivered now"
    );
}
