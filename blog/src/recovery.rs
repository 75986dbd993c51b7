//! Recovery of what the fan-out gave up on: park the records, replay them later.
//!
//! 1. After 10 retries (or 6 hours), Lambda's stream event source mapping sends
//!    a *description* of the failed batch (its shard and its first and last
//!    sequence numbers, [`FailureNotice`]) to the fan-out's failure queue; the
//!    records themselves are not in it.
//! 2. The `park-failures` function, fed by that queue, reads those records back
//!    from the stream, which keeps them 24 hours (the mapping gives up after 6
//!    at most, `MaximumRecordAgeInSeconds`), and parks in the table every one
//!    the fan-out applies ([`crate::store::parked`]), spread over 16
//!    partitions. A notice it cannot serve
//!    (the records already gone, DynamoDB unavailable throughout) stays on the
//!    queue and, after 5 receipts, moves to the queue's dead-letter queue,
//!    which has an alarm: then `blog-admin audit --repair` is the way back.
//! 3. Once the cause is mended, `blog-admin replay` applies the parked records
//!    through the fan-out's own [`fanout::apply`] and forgets each one that
//!    applied. Every fan-out write is conditional on versions, so records may
//!    be replayed in any order, twice, or after newer ones, and the table ends
//!    as one clean application leaves it (`exactness.rs`).
//!
//! Locally, the stream poller sends the same notice after its 11 deliveries,
//! through `cargo lambda watch` to the same function, or in process.

use aws_lambda_events::event::{
    dynamodb::Event,
    sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent},
};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    fanout,
    metrics::{self, Metric},
    store::{Store, StoreError, classify, items::parked::ParkedRecordItem},
    timestamp,
};
#[cfg(feature = "admin")]
use crate::{
    fanout::Outcome,
    keys::{Entity, ParkedPartition},
    store::deadline::Deadline,
};

/// What the event source mapping sends to its on-failure destination for a
/// DynamoDB stream (the SQS message's body).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureNotice {
    #[serde(rename = "requestContext", default)]
    pub request_context: Value,
    #[serde(rename = "DDBStreamBatchInfo")]
    pub batch: BatchInfo,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchInfo {
    pub shard_id: String,
    pub start_sequence_number: String,
    pub end_sequence_number: String,
    pub stream_arn: String,
    #[serde(default)]
    pub batch_size: Option<u64>,
}

impl FailureNotice {
    /// The notice Lambda sends once a batch's retries are exhausted.
    pub fn retries_exhausted(batch: BatchInfo, invocations: u32) -> Self {
        Self::given_up(batch, "RetryAttemptsExhausted", invocations)
    }

    /// The notice Lambda sends for records older than the mapping's
    /// `MaximumRecordAgeInSeconds`, after `invocations` failed deliveries.
    pub fn record_age_exceeded(batch: BatchInfo, invocations: u32) -> Self {
        Self::given_up(batch, "RecordAgeExceeded", invocations)
    }

    fn given_up(batch: BatchInfo, condition: &str, invocations: u32) -> Self {
        Self {
            request_context: json!({
                "condition": condition,
                "approximateInvokeCount": invocations,
            }),
            batch,
        }
    }

    /// Why the records were given up on (`RetryAttemptsExhausted`,
    /// `RecordAgeExceeded`).
    pub fn condition(&self) -> Option<&str> {
        self.request_context["condition"].as_str()
    }
}

/// What parking one notice's batch did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Parked {
    /// Records the notice's range held.
    pub read: usize,
    /// Those the fan-out applies, now parked (the rest change no copy).
    pub parked: usize,
}

/// Reads the notice's records back from the stream and parks those the
/// fan-out applies. Parking again parks the same items.
pub async fn park_batch(
    store: &Store,
    streams: &aws_sdk_dynamodbstreams::Client,
    batch: &BatchInfo,
) -> Result<Parked, StoreError> {
    let records = read_range(store, streams, batch).await?;
    let region = streams
        .config()
        .region()
        .map_or_else(|| "local".to_owned(), ToString::to_string);
    let event = lambda_event(&batch.stream_arn, &region, &records)
        .map_err(|e| StoreError::Internal(format!("cannot read a stream record: {e}")))?;
    let parked_at = timestamp::now();
    let items = event
        .records
        .iter()
        .filter(|r| fanout::applies_to(r))
        .map(|record| ParkedRecordItem::new(&batch.shard_id, record, parked_at.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    // Spread over the parked partitions by their keys, 25 a call.
    store.fanout().park_all(&items).await?;
    Ok(Parked {
        read: event.records.len(),
        parked: items.len(),
    })
}

/// The `park-failures` function: parks each notice's batch and reports the
/// messages it could not serve, so that SQS offers them again (and, after
/// 5 receipts, moves them to the dead-letter queue).
pub async fn handle_notices(
    store: &Store,
    streams: &aws_sdk_dynamodbstreams::Client,
    event: SqsEvent,
) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    let (mut parked, mut failed) = (0, 0);
    for message in &event.records {
        let id = message.message_id.clone().unwrap_or_default();
        let result = match serde_json::from_str::<FailureNotice>(
            message.body.as_deref().unwrap_or_default(),
        ) {
            Ok(notice) => park_batch(store, streams, &notice.batch)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(format!("not a stream failure notice: {e}")),
        };
        match result {
            Ok(done) => {
                parked += done.parked;
                tracing::warn!(
                    message_id = %id,
                    read = done.read,
                    parked = done.parked,
                    "parked the records the fan-out gave up on; `blog-admin replay` applies them"
                );
            }
            Err(error) => {
                failed += 1;
                tracing::error!(message_id = %id, %error, "cannot park a failed batch");
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = id;
                response.batch_item_failures.push(failure);
            }
        }
    }
    metrics::emit(
        &[],
        &[
            (Metric::Parked, parked as f64),
            (Metric::ParkingFailed, f64::from(failed)),
        ],
    );
    response
}

#[cfg(feature = "admin")]
/// What applying one parked record did.
#[derive(Debug)]
pub enum Replayed {
    /// Applied (or found already applied) and forgotten.
    Applied(Outcome),
    /// Left parked: the error says why.
    Failed(String),
    /// `--dry-run`: neither applied nor forgotten.
    Listed,
}

#[cfg(feature = "admin")]
/// What a replay did, in all.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplayReport {
    pub applied: usize,
    pub failed: usize,
    pub listed: usize,
}

#[cfg(feature = "admin")]
/// Applies every parked record through the fan-out, in stream order
/// (sequence number, then shard) across all the partitions they are parked
/// in (the 16 `PARKED#<k>` and the earlier version's `PARKED`), as the one
/// partition they were all once in read: the fan-out's rules need a post's
/// INSERT before its MODIFYs (a MODIFY updates only a feed entry that
/// exists). Forgets each one that applied; with `dry_run`, only lists them.
/// `each` hears of every record.
///
/// It holds at most one page (100 records) a partition: the next page of a
/// partition is read once its last record has gone by.
pub async fn replay(
    store: &Store,
    dry_run: bool,
    mut each: impl FnMut(&ParkedRecordItem, &Replayed),
) -> Result<ReplayReport, StoreError> {
    let mut report = ReplayReport::default();
    let mut merge = Merge::start(store).await?;
    while let Some(item) = merge.next(store).await? {
        let replayed = if dry_run {
            report.listed += 1;
            Replayed::Listed
        } else {
            match apply_parked(store, &item).await {
                Ok(outcome) => {
                    report.applied += 1;
                    Replayed::Applied(outcome)
                }
                Err(error) => {
                    report.failed += 1;
                    Replayed::Failed(error.to_string())
                }
            }
        };
        each(&item, &replayed);
    }
    Ok(report)
}

#[cfg(feature = "admin")]
/// The parked partitions read side by side, each a page at a time, their
/// records handed out in key order across them all.
struct Merge {
    partitions: Vec<Pages>,
}

#[cfg(feature = "admin")]
/// One partition's page being handed out, and where its next page starts.
struct Pages {
    partition: ParkedPartition,
    page: std::collections::VecDeque<ParkedRecordItem>,
    /// `None`: the partition's last page has been read.
    next: Option<crate::store::Item>,
}

#[cfg(feature = "admin")]
impl Merge {
    /// Every partition's first page.
    async fn start(store: &Store) -> Result<Self, StoreError> {
        let mut partitions = Vec::new();
        for partition in ParkedPartition::all() {
            let mut pages = Pages {
                partition,
                page: Default::default(),
                next: None,
            };
            pages.read(store, None).await?;
            partitions.push(pages);
        }
        Ok(Self { partitions })
    }

    /// The record with the lowest key left in any partition; `None` once
    /// every partition is done. A failed record stays parked, so each
    /// partition goes on from where its page ended, whatever was forgotten.
    async fn next(&mut self, store: &Store) -> Result<Option<ParkedRecordItem>, StoreError> {
        let lowest = self
            .partitions
            .iter_mut()
            .filter_map(|p| Some((p.page.front()?.key().sk, p)))
            .min_by(|(a, _), (b, _)| a.cmp(b))
            .map(|(_, p)| p);
        let Some(pages) = lowest else {
            return Ok(None);
        };
        let item = pages.page.pop_front();
        if pages.page.is_empty()
            && let Some(start) = pages.next.take()
        {
            pages.read(store, Some(start)).await?;
        }
        Ok(item)
    }
}

#[cfg(feature = "admin")]
impl Pages {
    /// Reads the partition from `start` until a page holds a record or the
    /// partition ends (a full page may be followed by an empty one).
    async fn read(
        &mut self,
        store: &Store,
        mut start: Option<crate::store::Item>,
    ) -> Result<(), StoreError> {
        loop {
            let (page, next) = store.admin().parked_page_of(self.partition, start).await?;
            self.page = page.into();
            self.next = next;
            if !self.page.is_empty() {
                return Ok(());
            }
            match self.next.take() {
                Some(next) => start = Some(next),
                None => return Ok(()),
            }
        }
    }
}

#[cfg(feature = "admin")]
async fn apply_parked(store: &Store, item: &ParkedRecordItem) -> Result<Outcome, String> {
    let record = item.record().map_err(|e| e.to_string())?;
    let seed = format!("{}/{}", store.table(), record.event_id);
    let outcome = crate::store::request_scope(seed, fanout::apply(store, &record, &Deadline::NONE))
        .await
        .map_err(|e| e.to_string())?;
    if let Outcome::Paused { .. } = outcome {
        return Err("the rename paused; replay again".into());
    }
    store
        .admin()
        .unpark(item)
        .await
        .map_err(|e| e.to_string())?;
    Ok(outcome)
}

/// How many empty pages in a row mean the range's end is not coming: DynamoDB
/// Streams may answer an empty page before the records that follow.
const MAX_EMPTY_PAGES: usize = 5;

/// The records of `batch`'s shard from its first sequence number to its last.
async fn read_range(
    store: &Store,
    streams: &aws_sdk_dynamodbstreams::Client,
    batch: &BatchInfo,
) -> Result<Vec<Record>, StoreError> {
    let gone = |e: StoreError| {
        StoreError::Internal(format!(
            "cannot read records {}..{} of shard {} back from the stream ({e}); \
             if they are older than 24 hours, run `blog-admin audit --repair`",
            batch.start_sequence_number, batch.end_sequence_number, batch.shard_id
        ))
    };
    let get_iterator = streams
        .get_shard_iterator()
        .stream_arn(&batch.stream_arn)
        .shard_id(&batch.shard_id)
        .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
        .sequence_number(&batch.start_sequence_number);
    let mut iterator = store
        .backoff()
        .send("get a shard iterator", || get_iterator.clone().send())
        .await
        .map_err(|e| gone(classify(e)))?
        .shard_iterator;
    let mut records = Vec::new();
    let mut empty = 0;
    while let Some(position) = iterator {
        let get = streams.get_records().shard_iterator(position);
        let page = store
            .backoff()
            .send("read stream records", || get.clone().send())
            .await
            .map_err(|e| gone(classify(e)))?;
        iterator = page.next_shard_iterator;
        let page = page.records.unwrap_or_default();
        if page.is_empty() {
            empty += 1;
            if empty == MAX_EMPTY_PAGES {
                return Err(gone(StoreError::Internal(
                    "the shard ended before the range's last record".into(),
                )));
            }
            continue;
        }
        empty = 0;
        for record in page {
            let sequence = record
                .dynamodb()
                .and_then(|d| d.sequence_number())
                .unwrap_or_default();
            if sequence_after(sequence, &batch.end_sequence_number) {
                return Ok(records);
            }
            let more = sequence_after(&batch.end_sequence_number, sequence);
            records.push(record);
            if !more {
                return Ok(records);
            }
        }
    }
    // The shard closed: the range ended with it.
    Ok(records)
}

/// Whether sequence number `a` comes after `b`: they are decimal numbers of
/// up to 40 digits, compared as numbers.
fn sequence_after(a: &str, b: &str) -> bool {
    let a = a.trim_start_matches('0');
    let b = b.trim_start_matches('0');
    (a.len(), a) > (b.len(), b)
}

/// The JSON event Lambda sends for `records`, parsed the way the function
/// parses it.
pub fn lambda_event(
    arn: &str,
    region: &str,
    records: &[Record],
) -> Result<Event, serde_json::Error> {
    let records: Vec<Value> = records
        .iter()
        .map(|r| lambda_record(arn, region, r))
        .collect::<Result<_, _>>()?;
    serde_json::from_value(json!({ "Records": records }))
}

/// One record as Lambda's event carries it.
pub fn lambda_record(arn: &str, region: &str, record: &Record) -> Result<Value, serde_json::Error> {
    let image = |item: Option<
        &std::collections::HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>,
    >| {
        item.map(|i| serde_json::to_value(serde_dynamo::Item::from(i.clone())))
            .transpose()
    };
    let change = record.dynamodb();
    let created = change
        .and_then(|c| c.approximate_creation_date_time())
        .map_or(0.0, |t| t.as_secs_f64());
    let mut dynamodb = json!({
        "ApproximateCreationDateTime": created,
        "SequenceNumber": change.and_then(|c| c.sequence_number()),
        "SizeBytes": change.and_then(|c| c.size_bytes()).unwrap_or_default(),
        "StreamViewType": change.and_then(|c| c.stream_view_type()).map(|v| v.as_str()),
    });
    for (name, value) in [
        ("Keys", image(change.and_then(|c| c.keys.as_ref()))?),
        (
            "NewImage",
            image(change.and_then(|c| c.new_image.as_ref()))?,
        ),
        (
            "OldImage",
            image(change.and_then(|c| c.old_image.as_ref()))?,
        ),
    ] {
        if let Some(value) = value {
            dynamodb[name] = value;
        }
    }
    Ok(json!({
        "eventID": record.event_id(),
        "eventName": record.event_name().map(|n| n.as_str()),
        "eventVersion": record.event_version(),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.aws_region().unwrap_or(region),
        "eventSourceARN": arn,
        "dynamodb": dynamodb,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_compare_as_numbers() {
        assert!(sequence_after("100", "99"));
        assert!(!sequence_after("99", "100"));
        assert!(!sequence_after("000100", "100"));
        assert!(sequence_after(
            "800000000003126276363",
            "800000000003126276362"
        ));
    }

    #[test]
    fn a_notice_reads_as_lambda_writes_it() {
        // The shape of Lambda's on-failure record for a DynamoDB stream.
        let body = r#"{
            "requestContext": {
                "requestId": "316aa6d0-8154-xmpl-9af7-85d5f4a6bc81",
                "functionArn": "arn:aws:lambda:us-east-2:123456789012:function:fan-out",
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": 11
            },
            "responseContext": { "statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled" },
            "version": "1.0",
            "timestamp": "2019-11-14T00:38:06.021Z",
            "DDBStreamBatchInfo": {
                "shardId": "shardId-00000001573689847184-864758bb",
                "startSequenceNumber": "800000000003126276362",
                "endSequenceNumber": "800000000003126276362",
                "approximateArrivalOfFirstRecord": "2019-11-14T00:38:04Z",
                "approximateArrivalOfLastRecord": "2019-11-14T00:38:04Z",
                "batchSize": 1,
                "streamArn": "arn:aws:dynamodb:us-east-2:123456789012:table/blog/stream/2019-11-14T00:04:50.133"
            }
        }"#;
        let notice: FailureNotice = serde_json::from_str(body).expect("a notice");
        assert_eq!(
            notice.batch.shard_id,
            "shardId-00000001573689847184-864758bb"
        );
        assert_eq!(notice.batch.start_sequence_number, "800000000003126276362");
        assert_eq!(notice.batch.batch_size, Some(1));
        // And the local poller's notice reads back the same way.
        let local = FailureNotice::retries_exhausted(notice.batch.clone(), 11);
        let json = serde_json::to_string(&local).expect("encode");
        let back: FailureNotice = serde_json::from_str(&json).expect("decode");
        assert_eq!(back.batch, notice.batch);
        assert_eq!(back.request_context["condition"], "RetryAttemptsExhausted");
    }
}
