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

/// A record parked by the earlier version, under the single `PARKED`
/// partition (written here as it wrote it), is replayed beside those parked
/// now (spread over `PARKED#<k>`), and forgotten where it was.
#[tokio::test]
async fn records_parked_under_the_earlier_single_partition_are_replayed_too() {
    let api = TestApi::start().await;
    a_post_with_a_comment_and_a_like(&api).await;
    let records = api.stream_records().await;
    let applicable: Vec<_> = records.iter().filter(|r| fanout::applies_to(r)).collect();
    assert_eq!(applicable.len(), 5);
    let shard = "shardId-00000001573689847184-864758bb";
    let at = "2026-01-01T00:00:00Z";
    // One of the middle records, as the earlier version kept it: `PARKED /
    // RECORD#<sequence number, 40 digits>#<shard>`.
    let first = applicable[2];
    let sequence = first
        .change
        .sequence_number
        .clone()
        .expect("a sequence number");
    let legacy = json!({
        "PK": "PARKED",
        "SK": format!("RECORD#{sequence:0>40}#{shard}"),
        "type": "parkedRecord",
        "shardId": shard,
        "sequenceNumber": sequence,
        "eventName": first.event_name,
        "record": serde_json::to_string(first).expect("a record as JSON"),
        "parkedAt": at,
    });
    let store = &api.app.store;
    store
        .client()
        .put_item()
        .table_name(store.table())
        .set_item(Some(serde_dynamo::to_item(legacy).expect("item")))
        .send()
        .await
        .expect("put the legacy record");
    // The others, parked now.
    let items: Vec<_> = applicable
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, r)| r)
        .map(|r| ParkedRecordItem::new(shard, r, at.to_owned()).expect("parked"))
        .collect();
    store.fanout().park_all(&items).await.expect("park");

    let kept = parked(&api).await;
    assert_eq!(kept.len(), 5);
    assert_eq!(
        kept.iter().filter(|item| item.legacy).count(),
        1,
        "the legacy record, read first"
    );
    assert!(kept[0].legacy);
    assert_eq!(kept[0].sequence_number, sequence);
    // The replay takes them in stream order across the partitions, the
    // legacy one among them: the post's INSERT before its MODIFYs.
    let mut order = Vec::new();
    recovery::replay(&api.app.store, true, |item, _| {
        order.push(item.sequence_number.clone());
    })
    .await
    .expect("dry run");
    let in_stream: Vec<_> = applicable
        .iter()
        .filter_map(|r| r.change.sequence_number.clone())
        .collect();
    assert_eq!(order, in_stream);

    let report = replay(&api).await;
    assert_eq!((report.applied, report.failed), (5, 0));
    let (_, feed) = api.get_feed().await;
    assert_eq!(feed["items"][0]["title"], "Parked");
    assert_eq!(feed["items"][0]["commentCount"], 1);
    assert_eq!(feed["items"][0]["likeCount"], 1);
    assert_eq!(
        parked(&api).await,
        vec![],
        "each one forgotten where it was"
    );
    let old_key = blog::keys::ParkedPartition::Legacy.key(&sequence, shard);
    let left = store
        .client()
        .get_item()
        .table_name(store.table())
        .set_key(Some(old_key.item()))
        .consistent_read(true)
        .send()
        .await
        .expect("get");
    assert!(left.item.is_none(), "the legacy item is gone");
}

/// 1,600 records parked at once spread over all 16 partitions, and the
/// replay's pages (one Query each, up to 100 records of one partition) walk
/// them all, partitions that take more than one page included.
#[tokio::test]
async fn many_records_parked_at_once_spread_and_are_all_listed() {
    use blog::keys::{PARKED_PARTITIONS, ParkedPartition};
    use std::collections::BTreeMap;

    let api = TestApi::start().await;
    let author = api.user("author").await;
    api.post(&author, "Parked", "text").await;
    let records = api.stream_records().await;
    let insert = records
        .iter()
        .find(|r| fanout::applies_to(r))
        .expect("the post's INSERT");
    let items: Vec<_> = (0..1_600_u64)
        .map(|n| {
            let mut record = insert.clone();
            record.change.sequence_number = Some((900_000_000_000_000_000 + n).to_string());
            ParkedRecordItem::new("shard", &record, "2026-01-01T00:00:00Z".into()).expect("parked")
        })
        .collect();
    let fanout_store = api.app.store.fanout();
    fanout_store.park_all(&items).await.expect("park");
    fanout_store
        .park_all(&items)
        .await
        .expect("park again: the same items");

    let mut pages = 0;
    let mut held: BTreeMap<ParkedPartition, usize> = BTreeMap::new();
    let mut start = None;
    loop {
        let (page, next) = api
            .app
            .store
            .admin()
            .parked_page(start)
            .await
            .expect("a page");
        pages += 1;
        assert!(page.len() <= 100);
        for item in &page {
            *held.entry(item.partition()).or_default() += 1;
        }
        match next {
            Some(next) => start = Some(next),
            None => break,
        }
    }
    assert_eq!(held.values().sum::<usize>(), 1_600, "each once: {held:?}");
    assert_eq!(held.len(), usize::from(PARKED_PARTITIONS), "{held:?}");
    assert!(
        held.values().all(|&n| n <= 200),
        "none over twice its share: {held:?}"
    );
    let over_a_page = held.values().filter(|&&n| n >= 100).count();
    assert!(over_a_page > 0, "{held:?}");
    // One page a partition (the legacy one empty), and one more for each
    // partition of 100 or more (a full page says more may follow).
    assert_eq!(pages, 17 + over_a_page, "{held:?}");

    // The replay holds a page a partition and hands them out in sequence
    // order across all 16.
    let mut order = Vec::new();
    let dry = recovery::replay(&api.app.store, true, |item, _| {
        order.push(item.sequence_number.clone());
    })
    .await
    .expect("dry run");
    assert_eq!(dry.listed, 1_600);
    let in_stream: Vec<_> = items.iter().map(|i| i.sequence_number.clone()).collect();
    assert_eq!(order, in_stream);
}
