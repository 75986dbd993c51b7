//! The local stand-in for Lambda's DynamoDB Streams event source mapping.
//!
//! It reads the table's stream from DynamoDB Local (every shard, parents before
//! children; from the start on first run, from a saved checkpoint after a
//! restart), turns each batch into the JSON event Lambda would send, parses it
//! back as an `aws_lambda_events` DynamoDB event, and delivers it. Failures
//! follow Lambda's partial-batch semantics: delivery resumes at the lowest
//! sequence number the handler reported, a bounded number of times, after
//! which the batch's failure notice goes to the failure destination (the
//! `park-failures` function, or its code in process: `blog::recovery`) and
//! the batch is skipped.

use std::{
    collections::{BTreeMap, HashSet},
    future::Future,
    path::PathBuf,
    pin::Pin,
    time::Duration,
};

use aws_lambda_events::event::{dynamodb::Event, streams::DynamoDbEventResponse};
use aws_sdk_dynamodbstreams::types::{Record, Shard, ShardIteratorType};
use serde::{Deserialize, Serialize};

use blog::{
    recovery::{self, BatchInfo, FailureNotice, lambda_event},
    store::{Busy, Store, StoreError, classify},
};

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

/// Sends a failure notice to the failure destination, as the event source
/// mapping does: e.g. invokes `park-failures` through `cargo lambda watch`.
pub type FailureSink = Box<
    dyn Fn(FailureNotice) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync,
>;

pub struct StreamPoller {
    store: Store,
    streams: aws_sdk_dynamodbstreams::Client,
    checkpoint_file: Option<PathBuf>,
    checkpoint: Checkpoint,
    region: String,
    /// `None`: park the records in this process ([`recovery::park_batch`]).
    failure_sink: Option<FailureSink>,
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
            failure_sink: None,
        }
    }

    /// Sends the notices of batches given up on to `sink` instead of parking
    /// their records in this process.
    #[must_use]
    pub fn with_failure_sink(mut self, sink: FailureSink) -> Self {
        self.failure_sink = Some(sink);
        self
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
            self.deliver_batch(arn, &shard_id, &records, deliver)
                .await?;
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
    /// the rest's failure notice goes to the failure destination. An invocation
    /// that fails as a whole (the function is not reachable, or crashed) is an
    /// error: the batch stays unread and the next poll tries it again.
    async fn deliver_batch<D, F>(
        &self,
        arn: &str,
        shard_id: &str,
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
        let sequence = |r: &Record| {
            r.dynamodb()
                .and_then(|d| d.sequence_number())
                .unwrap_or_default()
                .to_owned()
        };
        let rest = &records[from..];
        let (Some(first), Some(last)) = (rest.first(), rest.last()) else {
            return Ok(());
        };
        let batch = BatchInfo {
            shard_id: shard_id.to_owned(),
            start_sequence_number: sequence(first),
            end_sequence_number: sequence(last),
            stream_arn: arn.to_owned(),
            batch_size: Some(rest.len() as u64),
        };
        tracing::error!(
            first_sequence_number = %batch.start_sequence_number,
            last_sequence_number = %batch.end_sequence_number,
            records = rest.len(),
            "fan-out retries exhausted; the batch's notice goes to the failure destination"
        );
        let sent = match &self.failure_sink {
            Some(sink) => sink(FailureNotice::retries_exhausted(batch, MAX_ATTEMPTS)).await,
            None => recovery::park_batch(&self.store, &self.streams, &batch)
                .await
                .map(|parked| {
                    tracing::warn!(
                        read = parked.read,
                        parked = parked.parked,
                        "parked the records the fan-out gave up on; `blog-admin replay` applies them"
                    );
                })
                .map_err(|e| e.to_string()),
        };
        if let Err(error) = sent {
            // The queue's dead-letter queue and its alarm, on AWS.
            tracing::error!(%error, "the failure destination refused the notice; run `blog-admin audit --repair`");
        }
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
