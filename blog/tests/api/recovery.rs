//! Recovery: a batch the fan-out gives up on is parked with its records (the
//! on-failure destination's notice carries none), and `replay` applies them,
//! exactly once in effect, whenever it runs.

use std::sync::{Arc, Mutex};

use aws_lambda_events::event::{
    dynamodb::Event,
    sqs::{SqsEvent, SqsMessage},
    streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse},
};
use blog::{
    fanout,
    recovery::{self, FailureNotice, ReplayReport, Replayed},
    store::items::parked::ParkedRecordItem,
};
use local::stream_poller::InvokeError;
use serde_json::json;

use crate::support::{TestApi, endpoint, streams_client};

/// A fan-out that fails every record, every time.
fn failing_everything(
    event: Event,
) -> std::future::Ready<Result<DynamoDbEventResponse, InvokeError>> {
    let mut response = DynamoDbEventResponse::default();
    for record in &event.records {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = record.change.sequence_number.clone();
        response.batch_item_failures.push(failure);
    }
    std::future::ready(Ok(response))
}

async fn parked(api: &TestApi) -> Vec<ParkedRecordItem> {
    let mut all = Vec::new();
    let mut start = None;
    loop {
        let (page, next) = api
            .app
            .store
            .admin()
            .parked_page(start)
            .await
            .expect("parked");
        all.extend(page);
        match next {
            Some(next) => start = Some(next),
            None => return all,
        }
    }
}

async fn replay(api: &TestApi) -> ReplayReport {
    recovery::replay(&api.app.store, false, |_, replayed| {
        assert!(!matches!(replayed, Replayed::Failed(_)), "{replayed:?}");
    })
    .await
    .expect("replay")
}

/// An author's post, commented and liked by a fan; returns the post's id.
async fn a_post_with_a_comment_and_a_like(api: &TestApi) -> String {
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "Parked", "text").await;
    api.like(&fan, &post).await;
    api.comment(&fan, &post, "hi").await;
    post
}

#[tokio::test]
async fn records_the_fan_out_gave_up_on_are_parked_and_replay_applies_them_once() {
    let api = TestApi::start().await;
    a_post_with_a_comment_and_a_like(&api).await;
    let records = api.stream_records().await;
    let applicable = records.iter().filter(|r| fanout::applies_to(r)).count();
    assert_eq!(
        applicable, 5,
        "the post, the comment and the like, and the post's two count changes"
    );

    // The template's eleven deliveries, all failed: the poller gives the batch up and its
    // failure destination (in process here) parks the records.
    // (It may also read the parked items' own records, which change no copy,
    // and give them up too: they park nothing.)
    let mut poller = api.poller();
    assert!(poller.poll_once(&failing_everything).await.expect("poll") >= records.len());
    let kept = parked(&api).await;
    assert_eq!(kept.len(), applicable, "only what the fan-out applies");
    assert_eq!(
        api.get_feed().await.1["items"],
        json!([]),
        "nothing was applied"
    );

    let dry = recovery::replay(&api.app.store, true, |_, _| {})
        .await
        .expect("dry run");
    assert_eq!(
        (dry.listed, dry.applied, parked(&api).await.len()),
        (applicable, 0, applicable),
        "a dry run lists and leaves everything"
    );

    let report = replay(&api).await;
    assert_eq!((report.applied, report.failed), (applicable, 0));
    let (_, feed) = api.get_feed().await;
    assert_eq!(feed["items"][0]["title"], "Parked");
    assert_eq!(feed["items"][0]["commentCount"], 1);
    assert_eq!(feed["items"][0]["likeCount"], 1);
    assert_eq!(
        parked(&api).await,
        vec![],
        "each applied record is forgotten"
    );

    assert_eq!(
        replay(&api).await,
        ReplayReport::default(),
        "nothing is left"
    );
    // The fan-out's own records of what replay wrote change nothing more.
    api.settle(&mut api.poller()).await;
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

#[tokio::test]
async fn a_record_replayed_after_newer_ones_changes_nothing() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let post = api.post(&author, "First title", "text").await;
    let mut poller = api.poller();
    poller.poll_once(&failing_everything).await.expect("poll");
    assert_eq!(parked(&api).await.len(), 1, "the post's INSERT");

    // Life goes on before anyone replays: the post is edited, and the audit
    // puts it in the feed as it is now.
    let (status, _) = api
        .edit_post(
            &author,
            &post,
            json!({ "title": "Second title", "content": "text" }),
        )
        .await;
    assert_eq!(status, 200);
    api.audit(true).await;
    api.settle(&mut poller).await;
    assert_eq!(api.get_feed().await.1["items"][0]["title"], "Second title");

    let report = replay(&api).await;
    assert_eq!(report.applied, 1);
    assert_eq!(
        api.get_feed().await.1["items"][0]["title"],
        "Second title",
        "the old INSERT did not bring the first title back"
    );
    assert_eq!(parked(&api).await, vec![]);
}

#[tokio::test]
async fn park_failures_parks_a_notice_once_however_often_it_comes_and_refuses_what_it_cannot_read()
{
    let api = TestApi::start().await;
    a_post_with_a_comment_and_a_like(&api).await;
    api.wait_for_stream(11).await;
    // Catch the notice the poller sends instead of parking in process.
    let notices = Arc::new(Mutex::new(Vec::<FailureNotice>::new()));
    let sink = notices.clone();
    let mut poller = api.poller().with_failure_sink(Box::new(move |notice| {
        sink.lock().expect("lock").push(notice);
        Box::pin(async { Ok(()) })
    }));
    poller.poll_once(&failing_everything).await.expect("poll");
    let notices = notices.lock().expect("lock").clone();
    assert_eq!(notices.len(), 1);
    assert_eq!(
        parked(&api).await,
        vec![],
        "the sink got it, not this process"
    );

    // The queue delivers it as SQS does, twice (at least once), beside a
    // message that is not a notice at all.
    let message = |id: &str, body: String| {
        let mut message = SqsMessage::default();
        message.message_id = Some(id.to_owned());
        message.body = Some(body);
        message
    };
    let body = serde_json::to_string(&notices[0]).expect("encode");
    let mut event = SqsEvent::default();
    event.records = vec![
        message("first", body.clone()),
        message("garbled", "{\"not\": \"a notice\"}".to_owned()),
        message("again", body),
    ];
    let streams = streams_client(&endpoint());
    let response = recovery::handle_notices(&api.app.store, &streams, event).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(
        failed,
        ["garbled"],
        "only the message it cannot serve comes back"
    );
    let kept = parked(&api).await;
    assert_eq!(kept.len(), 5, "each record once");
    for item in &kept {
        let record = item.record().expect("readable");
        assert!(fanout::applies_to(&record));
        assert_eq!(
            record.change.sequence_number.as_ref(),
            Some(&item.sequence_number)
        );
    }

    // A notice of records the stream does not hold fails, and parks nothing.
    let mut gone = notices[0].batch.clone();
    gone.shard_id = "shardId-00000000000000000000-00000000".to_owned();
    let err = recovery::park_batch(&api.app.store, &streams, &gone)
        .await
        .expect_err("no such shard");
    assert!(err.to_string().contains("audit --repair"), "{err}");
    assert_eq!(parked(&api).await.len(), 5);
}
