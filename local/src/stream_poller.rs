//! The local stand-in for Lambda's DynamoDB Streams event source mapping.
//!
//! It reads the table's stream from DynamoDB Local (every shard, parents before
//! children; from the start on first run, from a saved checkpoint after a
//! restart), turns each batch into the JSON event Lambda would send, parses it
//! back as an `aws_lambda_events` DynamoDB event, and delivers it. Failures
//! follow Lambda's partial-batch semantics: delivery resumes at the lowest
//! sequence number the handler reported, a bounded number of times, after
//! which the batch is logged as sent to the failure destination and skipped.

use std::{
    collections::{BTreeMap, HashSet},
    future::Future,
    path::PathBuf,
    time::Duration,
};

use aws_lambda_events::event::{dynamodb::Event, streams::DynamoDbEventResponse};
use aws_sdk_dynamodbstreams::types::{Record, Shard, ShardIteratorType};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use blog::store::{Busy, Store, StoreError, classify};

/// Lambda's default batch size for DynamoDB streams.
const BATCH_SIZE: i32 = 100;
/// Deliveries of one batch before it is given up: the first and the
/// template's `MaximumRetryAttempts: 10` retries. (A rename too large for one
/// invocation resumes over several of them.)
pub const MAX_ATTEMPTS: u32 = 11;

/// Where each shard has been read to. Saved as JSON after every batch.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Checkpoint {
    stream_arn: Option<String>,
    /// Shard id → the last sequence number handled.
    positions: BTreeMap<String, String>,
    /// Shards that are closed and fully handled.
    finished: Vec<String>,
}

pub struct StreamPoller {
    store: Store,
    streams: aws_sdk_dynamodbstreams::Client,
    checkpoint_file: Option<PathBuf>,
    checkpoint: Checkpoint,
    region: String,
}

impl StreamPoller {
    /// A poller of `store`'s table. With a `checkpoint_file`, progress survives
    /// restarts; without one, every new poller starts at the stream's beginning.
    pub fn new(
        store: Store,
        streams: aws_sdk_dynamodbstreams::Client,
        checkpoint_file: Option<PathBuf>,
    ) -> Self {
        let checkpoint = checkpoint_file
            .as_ref()
            .and_then(|path| std::fs::read(path).ok())
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let region = streams
            .config()
            .region()
            .map_or_else(|| "local".to_owned(), ToString::to_string);
        Self {
            store,
            streams,
            checkpoint_file,
            checkpoint,
            region,
        }
    }

    /// Reads everything the stream holds now and delivers it; returns how many
    /// records were handled.
    pub async fn poll_once<D, F>(&mut self, deliver: &D) -> Result<usize, StoreError>
    where
        D: Fn(Event) -> F,
        F: Future<Output = Result<DynamoDbEventResponse, String>>,
    {
        let table = self
            .store
            .client()
            .describe_table()
            .table_name(self.store.table())
            .send()
            .await
            .map_err(classify)?;
        let Some(arn) = table.table.and_then(|t| t.latest_stream_arn) else {
            return Ok(0);
        };
        if self.checkpoint.stream_arn.as_deref() != Some(arn.as_str()) {
            // A new stream (the table was recreated): start it from the top.
            self.checkpoint = Checkpoint {
                stream_arn: Some(arn.clone()),
                ..Checkpoint::default()
            };
        }
        let shards = self.shards(&arn).await?;
        let known: HashSet<&str> = shards.iter().filter_map(|s| s.shard_id()).collect();
        let mut handled = 0;
        // Parents before children: a shard waits until its parent (if the
        // stream still has it) is finished. Repeat until no shard can advance.
        loop {
            let ready: Vec<&Shard> = shards
                .iter()
                .filter(|s| s.shard_id().is_some_and(|id| !self.is_finished(id)))
                .filter(|s| {
                    s.parent_shard_id()
                        .is_none_or(|parent| !known.contains(parent) || self.is_finished(parent))
                })
                .collect();
            let mut progressed = false;
            for shard in ready {
                let (count, finished) = self.read_shard(&arn, shard, deliver).await?;
                handled += count;
                progressed |= finished;
            }
            if !progressed {
                return Ok(handled);
            }
        }
    }

    /// Polls until `stop` resolves, pausing `idle` between empty polls.
    pub async fn run<D, F>(mut self, deliver: D, idle: Duration, stop: impl Future<Output = ()>)
    where
        D: Fn(Event) -> F,
        F: Future<Output = Result<DynamoDbEventResponse, String>>,
    {
        tokio::pin!(stop);
        loop {
            let pause = match self.poll_once(&deliver).await {
                Ok(0) => idle,
                Ok(_) => Duration::ZERO,
                Err(err) => {
                    tracing::warn!(error = %err, "stream poll failed; retrying");
                    idle * 4
                }
            };
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    fn is_finished(&self, shard: &str) -> bool {
        self.checkpoint.finished.iter().any(|s| s == shard)
    }

    async fn shards(&self, arn: &str) -> Result<Vec<Shard>, StoreError> {
        let mut shards = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .streams
                .describe_stream()
                .stream_arn(arn)
                .set_exclusive_start_shard_id(start)
                .send()
                .await
                .map_err(classify)?;
            let Some(description) = page.stream_description else {
                return Ok(shards);
            };
            shards.extend(description.shards.unwrap_or_default());
            start = description.last_evaluated_shard_id;
            if start.is_none() {
                return Ok(shards);
            }
        }
    }

    /// Reads one shard up to its current end. Returns the records handled and
    /// whether the shard is now finished (closed and fully read).
    async fn read_shard<D, F>(
        &mut self,
        arn: &str,
        shard: &Shard,
        deliver: &D,
    ) -> Result<(usize, bool), StoreError>
    where
        D: Fn(Event) -> F,
        F: Future<Output = Result<DynamoDbEventResponse, String>>,
    {
        let shard_id = shard.shard_id().unwrap_or_default().to_owned();
        let mut handled = 0;
        let mut iterator = Some(self.iterator(arn, &shard_id).await?);
        while let Some(current) = iterator.take() {
            let page = self
                .streams
                .get_records()
                .shard_iterator(current)
                .limit(BATCH_SIZE)
                .send()
                .await
                .map_err(classify)?;
            let records = page.records.unwrap_or_default();
            if records.is_empty() {
                if page.next_shard_iterator.is_none() {
                    self.checkpoint.finished.push(shard_id);
                    self.save();
                    return Ok((handled, true));
                }
                // Caught up with an open shard.
                return Ok((handled, false));
            }
            handled += records.len();
            self.deliver_batch(arn, &records, deliver).await?;
            if let Some(last) = records
                .last()
                .and_then(|r| r.dynamodb())
                .and_then(|d| d.sequence_number())
            {
                self.checkpoint
                    .positions
                    .insert(shard_id.clone(), last.to_owned());
                self.save();
            }
            iterator = page.next_shard_iterator;
        }
        self.checkpoint.finished.push(shard_id);
        self.save();
        Ok((handled, true))
    }

    async fn iterator(&self, arn: &str, shard_id: &str) -> Result<String, StoreError> {
        let request = self
            .streams
            .get_shard_iterator()
            .stream_arn(arn)
            .shard_id(shard_id);
        let request = match self.checkpoint.positions.get(shard_id) {
            Some(sequence) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(sequence),
            None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        };
        let output = request.send().await.map_err(classify)?;
        output
            .shard_iterator
            .ok_or_else(|| StoreError::Internal("no shard iterator".into()))
    }

    /// Delivers a batch as Lambda does: on a partial failure, again from the
    /// lowest failed record, at most [`MAX_ATTEMPTS`] times in all, after which
    /// the rest is logged as sent to the failure destination. An invocation
    /// that fails as a whole (the function is not reachable, or crashed) is an
    /// error: the batch stays unread and the next poll tries it again.
    async fn deliver_batch<D, F>(
        &self,
        arn: &str,
        records: &[Record],
        deliver: &D,
    ) -> Result<(), StoreError>
    where
        D: Fn(Event) -> F,
        F: Future<Output = Result<DynamoDbEventResponse, String>>,
    {
        let mut from = 0;
        for attempt in 1..=MAX_ATTEMPTS {
            let batch = &records[from..];
            let event = lambda_event(arn, &self.region, batch)
                .map_err(|e| StoreError::Internal(format!("cannot build the stream event: {e}")))?;
            let response = deliver(event).await.map_err(|e| {
                StoreError::busy(Busy::Unavailable, format!("fan-out invocation failed: {e}"))
            })?;
            match lowest_failure(batch, &response) {
                None => return Ok(()),
                Some(index) => from += index,
            }
            tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt.min(4)))).await;
        }
        let first = records[from]
            .dynamodb()
            .and_then(|d| d.sequence_number())
            .unwrap_or_default();
        tracing::error!(
            first_sequence_number = first,
            records = records.len() - from,
            "fan-out retries exhausted; records sent to the failure destination (this log)"
        );
        Ok(())
    }

    fn save(&self) {
        let Some(path) = &self.checkpoint_file else {
            return;
        };
        let written = serde_json::to_vec_pretty(&self.checkpoint)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let tmp = path.with_extension("tmp");
                std::fs::write(&tmp, bytes)?;
                std::fs::rename(&tmp, path)
            });
        if let Err(err) = written {
            tracing::warn!(error = %err, path = %path.display(), "cannot save the stream checkpoint");
        }
    }
}

/// The index in `batch` of the lowest sequence number the handler reported as
/// failed, or `None` when everything succeeded. An identifier that matches no
/// record fails the whole batch, as Lambda treats it.
fn lowest_failure(batch: &[Record], response: &DynamoDbEventResponse) -> Option<usize> {
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_deref().unwrap_or_default())
        .collect();
    if failed.is_empty() {
        return None;
    }
    let position = |seq: &str| {
        batch
            .iter()
            .position(|r| r.dynamodb().and_then(|d| d.sequence_number()) == Some(seq))
    };
    failed
        .iter()
        .map(|seq| position(seq))
        .try_fold(usize::MAX, |lowest, found| found.map(|i| lowest.min(i)))
        .or(Some(0))
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

fn lambda_record(arn: &str, region: &str, record: &Record) -> Result<Value, serde_json::Error> {
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

/// The DynamoDB Streams client, pointed at `endpoint` when one is given
/// (DynamoDB Local), as [`blog::store::dynamodb_client`] is for the table.
pub fn streams_client(
    sdk: &aws_config::SdkConfig,
    endpoint: Option<&str>,
) -> aws_sdk_dynamodbstreams::Client {
    let mut config = aws_sdk_dynamodbstreams::config::Builder::from(sdk);
    if let Some(endpoint) = endpoint {
        config = config.endpoint_url(endpoint);
    }
    aws_sdk_dynamodbstreams::Client::from_conf(config.build())
}
