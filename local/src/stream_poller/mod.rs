//! The local stand-in for Lambda's DynamoDB Streams event source mapping,
//! configured from template.yaml ([`mapping::StreamMapping`]) as the local
//! API Gateway is: the same settings, written once.
//!
//! It reads the table's stream from DynamoDB Local (every shard, parents before
//! children, the shards that are ready at once, each with one batch in flight
//! as `ParallelizationFactor: 1` has it; from the mapping's starting position
//! on first run, from a saved checkpoint after a restart) and does with each
//! record what the deployed mapping does:
//! - **filters** it with the mapping's `FilterCriteria` ([`filter`]): a record
//!   no filter matches is dropped before the function sees it; it is no
//!   failure, and the position moves past it;
//! - **batches** what passes: up to `BatchSize` records, gathered for at most
//!   `MaximumBatchingWindowInSeconds`, and no event larger than Lambda's 6 MB
//!   invocation payload (records are read in `GetRecords` pages of up to
//!   1,000, whatever the batch size: what one batch leaves of a page starts
//!   the next);
//! - turns each batch into the JSON event Lambda would send, parses it back as
//!   an `aws_lambda_events` DynamoDB event, and **delivers** it;
//! - on a **partial failure** (`ReportBatchItemFailures`) delivers again from
//!   the lowest failed record; on a **function error** (the function failed
//!   as a whole) splits the batch in two when `BisectBatchOnFunctionError` is
//!   on (a split is not a retry, as AWS documents it), else delivers it again;
//!   after `MaximumRetryAttempts` failed retries, or once a record is older
//!   than `MaximumRecordAgeInSeconds`, the records' failure notice goes to the
//!   `OnFailure` destination (the function its queue invokes, `park-failures`,
//!   or its code in process: `blog::recovery`) and the shard goes on.
//!
//! An invocation that never reached the function (not running yet, not
//! reachable) is not the function's failure: as Lambda does with its own
//! service errors, the poller tries the batch again later without counting it.

pub mod filter;
pub mod mapping;

use std::{
    collections::{BTreeMap, HashSet, VecDeque},
    future::Future,
    path::PathBuf,
    pin::Pin,
    sync::{Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant, SystemTime},
};

use aws_lambda_events::event::{dynamodb::Event, streams::DynamoDbEventResponse};
use aws_sdk_dynamodbstreams::types::{Record, Shard, ShardIteratorType};
use serde::{Deserialize, Serialize};

use blog::{
    recovery::{self, BatchInfo, FailureNotice, lambda_event, lambda_record},
    store::{Busy, Store, StoreError, classify},
};

use self::mapping::{StartingPosition, StreamMapping};

/// Lambda's limit on a synchronous invocation's payload: a batch is cut
/// before its event would pass it.
const PAYLOAD_LIMIT: usize = 6 * 1024 * 1024;
/// DynamoDB Streams' `GetRecords` returns at most this many records.
const GET_RECORDS_LIMIT: usize = 1000;

/// Why an invocation of the function failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    /// The invocation never reached the function (not running, not
    /// reachable, or its runtime refused it): tried again later, not counted
    /// as a retry.
    #[error("the function could not be invoked: {0}")]
    Unreachable(String),
    /// The function ran and failed as a whole (an error, a crash, a timeout):
    /// a retry, and a split when the mapping bisects.
    #[error("the function failed: {0}")]
    Function(String),
}

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
    mapping: StreamMapping,
    checkpoint_file: Option<PathBuf>,
    /// Shared by the shards read at once; never held across an await.
    checkpoint: Mutex<Checkpoint>,
    region: String,
    /// `None`: park the records in this process ([`recovery::park_batch`]).
    failure_sink: Option<FailureSink>,
}

/// A stretch of a batch still to deliver, and the retries it has used.
struct Pending<'a> {
    records: &'a [Record],
    retries: u32,
}

impl StreamPoller {
    /// A poller of `store`'s table that does what `mapping` does. With a
    /// `checkpoint_file`, progress survives restarts; without one, every new
    /// poller starts at the mapping's starting position.
    pub fn new(
        store: Store,
        streams: aws_sdk_dynamodbstreams::Client,
        mapping: StreamMapping,
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
            mapping,
            checkpoint_file,
            checkpoint: Mutex::new(checkpoint),
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

    /// The mapping it emulates.
    pub fn mapping(&self) -> &StreamMapping {
        &self.mapping
    }

    /// Reads everything the stream holds now and delivers what passes the
    /// filters; returns how many records were read (delivered or filtered).
    pub async fn poll_once<D, F>(&mut self, deliver: &D) -> Result<usize, StoreError>
    where
        D: Fn(Event) -> F,
        F: Future<Output = Result<DynamoDbEventResponse, InvokeError>>,
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
        let checkpoint = self
            .checkpoint
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if checkpoint.stream_arn.as_deref() != Some(arn.as_str()) {
            // A new stream (the table was recreated): start it afresh.
            *checkpoint = Checkpoint {
                stream_arn: Some(arn.clone()),
                ..Checkpoint::default()
            };
        }
        let shards = self.shards(&arn).await?;
        let known: HashSet<&str> = shards.iter().filter_map(|s| s.shard_id()).collect();
        let mut handled = 0;
        // Parents before children: a shard waits until its parent (if the
        // stream still has it) is finished. The shards that are ready are read
        // at once, as Lambda reads them, each a batch at a time. Repeat until
        // no shard can advance.
        loop {
            let ready: Vec<&Shard> = shards
                .iter()
                .filter(|s| s.shard_id().is_some_and(|id| !self.is_finished(id)))
                .filter(|s| {
                    s.parent_shard_id()
                        .is_none_or(|parent| !known.contains(parent) || self.is_finished(parent))
                })
                .collect();
            let reads = ready
                .into_iter()
                .map(|shard| self.read_shard(&arn, shard, deliver));
            let mut progressed = false;
            let mut failed = None;
            for read in futures::future::join_all(reads).await {
                match read {
                    Ok((count, finished)) => {
                        handled += count;
                        progressed |= finished;
                    }
                    // The other shards' progress is saved; the error is the poll's.
                    Err(err) => {
                        failed.get_or_insert(err);
                    }
                }
            }
            if let Some(err) = failed {
                return Err(err);
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
        F: Future<Output = Result<DynamoDbEventResponse, InvokeError>>,
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

    fn checkpoint(&self) -> MutexGuard<'_, Checkpoint> {
        self.checkpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn is_finished(&self, shard: &str) -> bool {
        self.checkpoint().finished.iter().any(|s| s == shard)
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

    /// Reads one shard up to its current end, a batch at a time. Returns the
    /// records read and whether the shard is now finished (closed and fully
    /// read).
    async fn read_shard<D, F>(
        &self,
        arn: &str,
        shard: &Shard,
        deliver: &D,
    ) -> Result<(usize, bool), StoreError>
    where
        D: Fn(Event) -> F,
        F: Future<Output = Result<DynamoDbEventResponse, InvokeError>>,
    {
        let shard_id = shard.shard_id().unwrap_or_default().to_owned();
        let mut handled = 0;
        let mut reader = ShardReader {
            iterator: Some(self.iterator(arn, &shard_id).await?),
            unread: VecDeque::new(),
        };
        loop {
            let gathered = self.gather(arn, &mut reader).await?;
            handled += gathered.read;
            if !gathered.admitted.is_empty() {
                for batch in payload_batches(&gathered.admitted, |r| {
                    lambda_record(arn, &self.region, r).map_or(0, |json| json.to_string().len())
                }) {
                    self.deliver_batch(arn, &shard_id, batch, deliver).await?;
                }
            }
            // Past the filtered records too.
            if let Some(last) = gathered.last_sequence_number {
                self.advance(&shard_id, &last);
            }
            if reader.iterator.is_none() && reader.unread.is_empty() {
                self.update(|checkpoint| checkpoint.finished.push(shard_id));
                return Ok((handled, true));
            }
            if gathered.read == 0 {
                // Caught up with an open shard.
                return Ok((handled, false));
            }
        }
    }

    /// Takes records into a batch (those a page left unread first, then
    /// `GetRecords` pages of up to 1,000) until it is full (`BatchSize`
    /// records that pass the filters), the batching window since the first
    /// record has passed, or the shard is caught up with (window 0) or
    /// closed. The reader moves on: what a page holds past a full batch
    /// stays unread, for the next.
    async fn gather(&self, arn: &str, reader: &mut ShardReader) -> Result<Gathered, StoreError> {
        let mut gathered = Gathered::default();
        let mut first_read = (!reader.unread.is_empty()).then(Instant::now);
        let window = self.mapping.batching_window;
        loop {
            while let Some(record) = reader.unread.pop_front() {
                gathered.read += 1;
                gathered.last_sequence_number = sequence_number(&record).map(str::to_owned);
                if self.admits(arn, &record)? {
                    gathered.admitted.push(record);
                }
                if gathered.admitted.len() >= self.mapping.batch_size {
                    return Ok(gathered);
                }
            }
            let waited = first_read.map_or(Duration::ZERO, |t| t.elapsed());
            if first_read.is_some() && waited >= window {
                return Ok(gathered);
            }
            let Some(current) = reader.iterator.clone() else {
                // Closed, and read to its end.
                return Ok(gathered);
            };
            let page = self
                .streams
                .get_records()
                .shard_iterator(current)
                .limit(i32::try_from(GET_RECORDS_LIMIT).unwrap_or(i32::MAX))
                .send()
                .await
                .map_err(classify)?;
            reader.iterator = page.next_shard_iterator;
            let records = page.records.unwrap_or_default();
            let caught_up = records.is_empty();
            reader.unread.extend(records);
            if first_read.is_none() && !reader.unread.is_empty() {
                first_read = Some(Instant::now());
            }
            if caught_up {
                let Some(first) = first_read else {
                    // Nothing new: caught up with the shard.
                    return Ok(gathered);
                };
                // Records came, the batch is not full and its window is open:
                // wait for more, as Lambda does.
                let waited = first.elapsed();
                if waited >= window {
                    return Ok(gathered);
                }
                tokio::time::sleep((window - waited).min(Duration::from_millis(100))).await;
            }
        }
    }

    /// Whether the mapping's filters let `record` through to the function.
    fn admits(&self, arn: &str, record: &Record) -> Result<bool, StoreError> {
        if self.mapping.filters.is_empty() {
            return Ok(true);
        }
        let json = lambda_record(arn, &self.region, record).map_err(|e| {
            StoreError::Internal(format!("cannot read a stream record for the filters: {e}"))
        })?;
        Ok(self.mapping.filters.admits(&json))
    }

    async fn iterator(&self, arn: &str, shard_id: &str) -> Result<String, StoreError> {
        let request = self
            .streams
            .get_shard_iterator()
            .stream_arn(arn)
            .shard_id(shard_id);
        // The mapping's starting position is TRIM_HORIZON (the only one
        // emulated): a shard without a position is read from its start.
        let StartingPosition::TrimHorizon = self.mapping.starting_position;
        let position = self.checkpoint().positions.get(shard_id).cloned();
        let output = match position {
            None => {
                request
                    .shard_iterator_type(ShardIteratorType::TrimHorizon)
                    .send()
                    .await
            }
            Some(sequence) => {
                let after = request
                    .clone()
                    .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                    .sequence_number(&sequence)
                    .send()
                    .await;
                match after {
                    // The position is older than the stream keeps (24 hours;
                    // DynamoDB Local trims at start): Lambda goes on from the
                    // oldest record left, and so does the poller.
                    Err(err)
                        if err
                            .as_service_error()
                            .is_some_and(|e| e.is_trimmed_data_access_exception()) =>
                    {
                        tracing::warn!(
                            shard_id,
                            %sequence,
                            "the checkpoint is past the stream's retention: reading the shard from its trim horizon"
                        );
                        request
                            .shard_iterator_type(ShardIteratorType::TrimHorizon)
                            .send()
                            .await
                    }
                    other => other,
                }
            }
        }
        .map_err(classify)?;
        output
            .shard_iterator
            .ok_or_else(|| StoreError::Internal("no shard iterator".into()))
    }

    /// Delivers a batch as Lambda does, stretch by stretch in stream order:
    /// - records older than the maximum record age are given up on (their
    ///   notice to the failure destination) before each delivery;
    /// - a partial failure is delivered again from the lowest failed record;
    /// - a function error splits the stretch in two when the mapping bisects
    ///   (not a retry), or is a retry of the whole stretch;
    /// - a stretch that failed more than the maximum retries is given up on.
    ///
    /// The checkpoint moves past each stretch once it is done. An invocation
    /// that never reached the function is an error: the rest of the batch
    /// stays unread and the next poll tries it again.
    async fn deliver_batch<D, F>(
        &self,
        arn: &str,
        shard_id: &str,
        records: &[Record],
        deliver: &D,
    ) -> Result<(), StoreError>
    where
        D: Fn(Event) -> F,
        F: Future<Output = Result<DynamoDbEventResponse, InvokeError>>,
    {
        let mut pending = VecDeque::from([Pending {
            records,
            retries: 0,
        }]);
        while let Some(Pending {
            mut records,
            mut retries,
        }) = pending.pop_front()
        {
            loop {
                let expired = self.expired(records);
                if expired > 0 {
                    let (old, rest) = records.split_at(expired);
                    self.give_up(
                        arn,
                        shard_id,
                        old,
                        FailureNotice::record_age_exceeded,
                        retries,
                    )
                    .await;
                    records = rest;
                }
                let Some(last) = records.last() else { break };
                let event = lambda_event(arn, &self.region, records).map_err(|e| {
                    StoreError::Internal(format!("cannot build the stream event: {e}"))
                })?;
                match deliver(event).await {
                    Ok(response) => match self.lowest_failure(records, &response) {
                        None => {
                            if let Some(seq) = sequence_number(last) {
                                self.advance(shard_id, seq);
                            }
                            break;
                        }
                        Some(index) => records = &records[index..],
                    },
                    Err(InvokeError::Function(error))
                        if self.mapping.bisect_on_function_error && records.len() > 1 =>
                    {
                        tracing::warn!(%error, records = records.len(), "function error; the batch is split in two");
                        let (first, second) = records.split_at(records.len() / 2);
                        pending.push_front(Pending {
                            records: second,
                            retries,
                        });
                        pending.push_front(Pending {
                            records: first,
                            retries,
                        });
                        break;
                    }
                    Err(InvokeError::Function(error)) => {
                        tracing::warn!(%error, records = records.len(), "function error");
                    }
                    Err(InvokeError::Unreachable(error)) => {
                        return Err(StoreError::busy(
                            Busy::Unavailable,
                            format!("fan-out invocation failed: {error}"),
                        ));
                    }
                }
                retries += 1;
                if self
                    .mapping
                    .maximum_retry_attempts
                    .is_some_and(|most| retries > most)
                {
                    self.give_up(
                        arn,
                        shard_id,
                        records,
                        FailureNotice::retries_exhausted,
                        retries,
                    )
                    .await;
                    break;
                }
                tokio::time::sleep(backoff(retries)).await;
            }
        }
        Ok(())
    }

    /// How many of `records` (oldest first) are past the maximum record age.
    fn expired(&self, records: &[Record]) -> usize {
        let Some(most) = self.mapping.maximum_record_age else {
            return 0;
        };
        let now = SystemTime::now();
        records
            .iter()
            .take_while(|r| {
                r.dynamodb()
                    .and_then(|d| d.approximate_creation_date_time())
                    .and_then(|t| SystemTime::try_from(*t).ok())
                    .and_then(|created| now.duration_since(created).ok())
                    .is_some_and(|age| age > most)
            })
            .count()
    }

    /// The index in `batch` of the lowest sequence number the function
    /// reported as failed, or `None` when it reported none (or the mapping
    /// does not read reports). An identifier that matches no record fails
    /// the whole batch, as Lambda treats it.
    fn lowest_failure(&self, batch: &[Record], response: &DynamoDbEventResponse) -> Option<usize> {
        if !self.mapping.report_batch_item_failures {
            return None;
        }
        let failed: Vec<&str> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_deref().unwrap_or_default())
            .collect();
        if failed.is_empty() {
            return None;
        }
        let position = |seq: &str| batch.iter().position(|r| sequence_number(r) == Some(seq));
        failed
            .iter()
            .map(|seq| position(seq))
            .try_fold(usize::MAX, |lowest, found| found.map(|i| lowest.min(i)))
            .or(Some(0))
    }

    /// Sends the notice of `records` to the failure destination (or parks
    /// them in this process); without a destination, Lambda drops them, and
    /// so does the poller, with an error in the log. The shard goes on.
    async fn give_up(
        &self,
        arn: &str,
        shard_id: &str,
        records: &[Record],
        notice: fn(BatchInfo, u32) -> FailureNotice,
        retries: u32,
    ) {
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return;
        };
        let sequence = |r: &Record| sequence_number(r).unwrap_or_default().to_owned();
        let batch = BatchInfo {
            shard_id: shard_id.to_owned(),
            start_sequence_number: sequence(first),
            end_sequence_number: sequence(last),
            stream_arn: arn.to_owned(),
            batch_size: Some(records.len() as u64),
        };
        let notice = notice(batch, retries);
        tracing::error!(
            first_sequence_number = %notice.batch.start_sequence_number,
            last_sequence_number = %notice.batch.end_sequence_number,
            records = records.len(),
            condition = notice.condition().unwrap_or_default(),
            "fan-out gave up on records; their notice goes to the failure destination"
        );
        let sent = match (&self.mapping.on_failure, &self.failure_sink) {
            (None, _) => Err("the mapping has no failure destination: the records are dropped, as Lambda drops them".to_owned()),
            (Some(_), Some(sink)) => sink(notice.clone()).await,
            (Some(_), None) => recovery::park_batch(&self.store, &self.streams, &notice.batch)
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
        self.advance(shard_id, &notice.batch.end_sequence_number);
    }

    /// The shard is handled up to `sequence` (saved).
    fn advance(&self, shard_id: &str, sequence: &str) {
        self.update(|checkpoint| {
            checkpoint
                .positions
                .insert(shard_id.to_owned(), sequence.to_owned());
        });
    }

    /// Changes the checkpoint and saves it, under its lock.
    fn update(&self, change: impl FnOnce(&mut Checkpoint)) {
        let mut checkpoint = self.checkpoint();
        change(&mut checkpoint);
        let Some(path) = &self.checkpoint_file else {
            return;
        };
        let written = serde_json::to_vec_pretty(&*checkpoint)
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

/// Where a shard is being read: its iterator (`None` once closed and read
/// to its end) and what the last page held past the batch taken from it.
struct ShardReader {
    iterator: Option<String>,
    unread: VecDeque<Record>,
}

/// What one batch's reading found.
#[derive(Default)]
struct Gathered {
    /// Records read, filtered or not.
    read: usize,
    /// Those the filters let through, in stream order.
    admitted: Vec<Record>,
    last_sequence_number: Option<String>,
}

fn sequence_number(record: &Record) -> Option<&str> {
    record.dynamodb().and_then(|d| d.sequence_number())
}

/// Between deliveries of a failing batch.
fn backoff(retries: u32) -> Duration {
    Duration::from_millis(50 * u64::from(retries.min(4)))
}

/// `records` cut into consecutive batches whose events stay under Lambda's
/// payload limit (a record alone over it is still sent alone).
fn payload_batches(records: &[Record], size: impl Fn(&Record) -> usize) -> Vec<&[Record]> {
    let mut batches = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, record) in records.iter().enumerate() {
        let record_bytes = size(record) + 1;
        if i > start && bytes + record_bytes > PAYLOAD_LIMIT {
            batches.push(&records[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += record_bytes;
    }
    if start < records.len() {
        batches.push(&records[start..]);
    }
    batches
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodbstreams::types::{Record, StreamRecord};

    use super::{PAYLOAD_LIMIT, payload_batches};

    fn records(count: usize) -> Vec<Record> {
        (0..count)
            .map(|i| {
                Record::builder()
                    .dynamodb(
                        StreamRecord::builder()
                            .sequence_number(i.to_string())
                            .build(),
                    )
                    .build()
            })
            .collect()
    }

    fn lengths(batches: &[&[Record]]) -> Vec<usize> {
        batches.iter().map(|b| b.len()).collect()
    }

    #[test]
    fn a_batch_is_cut_before_its_event_passes_lambdas_payload_limit() {
        let all = records(10);
        let small = payload_batches(&all, |_| 1_000);
        assert_eq!(lengths(&small), [10], "10 KB: one invocation");
        // 2 MB records: three fit in 6 MB, not four.
        let large = payload_batches(&all, |_| 2 * 1024 * 1024 - 100);
        assert_eq!(lengths(&large), [3, 3, 3, 1]);
        let flat: Vec<_> = large.iter().flat_map(|b| b.iter()).collect();
        assert_eq!(flat.len(), 10, "every record once, in order");
        // A record alone over the limit still goes, alone.
        let huge = payload_batches(&all[..2], |_| PAYLOAD_LIMIT + 1);
        assert_eq!(lengths(&huge), [1, 1]);
        assert!(payload_batches(&[], |_| 1).is_empty());
    }
}
