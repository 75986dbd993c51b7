//! What the proxy did, so a test or a benchmark can say how hostile the run
//! actually was ("injected N faults"), not only how hostile it was set to be.

use std::{
    collections::{BTreeMap, HashMap},
    fmt,
    sync::{
        PoisonError, RwLock,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
};

use serde::Serialize;

use crate::faults::Fault;

/// Distinct operation names kept; a client sending arbitrary targets cannot
/// grow the map past this, later names count under [`OTHER`].
const MAX_OPERATIONS: usize = 256;
const OTHER: &str = "(other)";

/// A snapshot of the proxy's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Requests received, faulted or not.
    pub requests: u64,
    /// Requests forwarded upstream, by operation: the DynamoDB operation name
    /// (`PutItem`), or the whole `x-amz-target` for other services
    /// (`DynamoDBStreams_20120810.GetRecords`), or `(none)` without one.
    pub forwarded: BTreeMap<String, u64>,
    /// Transactions answered with `TransactionCanceledException`.
    pub transaction_cancel: u64,
    /// Single-item writes answered with `TransactionConflictException`.
    pub write_conflict: u64,
    /// Requests answered with a throttling error at the fault rate.
    pub throttle: u64,
    /// Requests refused because a partition they touch was out of its
    /// allowance (the partition limits), whole or, a BatchGetItem, in part
    /// (the keys of such a partition answered as `UnprocessedKeys`).
    pub partition_throttle: u64,
    /// Committed transactions answered with a 500.
    pub lost_response: u64,
    /// Writes answered with a 500 without being sent.
    pub server_error: u64,
    /// Transactions answered with a 500 and sent later (late commits).
    pub late_commit: u64,
    /// Retries of a late commit's transaction answered "in progress".
    pub in_progress: u64,
    /// Index queries that had items hidden by the GSI lag.
    pub gsi_lagged_queries: u64,
    /// Items hidden from index queries by the GSI lag.
    pub gsi_hidden_items: u64,
    /// Requests upstream did not answer (the client got a 502).
    pub upstream_failures: u64,
}

impl Stats {
    /// Faults injected: failed or lost requests (not GSI lag, which only
    /// makes answers stale).
    pub fn faults(&self) -> u64 {
        self.transaction_cancel
            + self.write_conflict
            + self.throttle
            + self.lost_response
            + self.server_error
            + self.late_commit
            + self.in_progress
    }

    /// Requests refused by the partition limits (not counted in
    /// [`Stats::faults`]: they are DynamoDB's limits, not injected faults).
    pub fn partition_throttled(&self) -> u64 {
        self.partition_throttle
    }

    /// Requests forwarded upstream, all operations together.
    pub fn forwarded_total(&self) -> u64 {
        self.forwarded.values().sum()
    }

    /// Requests forwarded for `operation`.
    pub fn forwarded(&self, operation: &str) -> u64 {
        self.forwarded.get(operation).copied().unwrap_or(0)
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests, {} forwarded; injected {} faults ({} transaction cancels, {} write conflicts, {} throttles, {} lost responses, {} server errors); {} items hidden by GSI lag from {} queries",
            self.requests,
            self.forwarded_total(),
            self.faults(),
            self.transaction_cancel,
            self.write_conflict,
            self.throttle,
            self.lost_response,
            self.server_error,
            self.gsi_hidden_items,
            self.gsi_lagged_queries,
        )?;
        if self.late_commit > 0 {
            write!(
                f,
                "; {} late commits ({} retries answered in progress)",
                self.late_commit, self.in_progress
            )?;
        }
        if self.partition_throttle > 0 {
            write!(
                f,
                "; {} refused (whole or in part) by the partition limits",
                self.partition_throttle
            )?;
        }
        if self.upstream_failures > 0 {
            write!(f, "; {} upstream failures", self.upstream_failures)?;
        }
        Ok(())
    }
}

/// The live counters behind [`Stats`]; shared by every connection.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    requests: AtomicU64,
    forwarded: RwLock<HashMap<String, AtomicU64>>,
    transaction_cancel: AtomicU64,
    write_conflict: AtomicU64,
    throttle: AtomicU64,
    partition_throttle: AtomicU64,
    lost_response: AtomicU64,
    server_error: AtomicU64,
    late_commit: AtomicU64,
    in_progress: AtomicU64,
    gsi_lagged_queries: AtomicU64,
    gsi_hidden_items: AtomicU64,
    upstream_failures: AtomicU64,
}

impl Counters {
    pub(crate) fn request(&self) {
        self.requests.fetch_add(1, Relaxed);
    }

    pub(crate) fn forwarded(&self, operation: &str) {
        // The common case, an operation seen before, takes only the read lock.
        {
            let map = self
                .forwarded
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(count) = map.get(operation) {
                count.fetch_add(1, Relaxed);
                return;
            }
        }
        let mut map = self
            .forwarded
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let key = if map.len() < MAX_OPERATIONS || map.contains_key(operation) {
            operation
        } else {
            OTHER
        };
        map.entry(key.to_owned()).or_default().fetch_add(1, Relaxed);
    }

    pub(crate) fn fault(&self, fault: Fault) {
        let counter = match fault {
            Fault::Throttle { .. } => &self.throttle,
            Fault::WriteConflict => &self.write_conflict,
            Fault::TransactionCancel { .. } => &self.transaction_cancel,
            Fault::LostResponse => &self.lost_response,
            Fault::ServerError => &self.server_error,
            Fault::LateCommit => &self.late_commit,
            Fault::InProgress => &self.in_progress,
        };
        counter.fetch_add(1, Relaxed);
    }

    pub(crate) fn gsi_hidden(&self, items: u64) {
        self.gsi_lagged_queries.fetch_add(1, Relaxed);
        self.gsi_hidden_items.fetch_add(items, Relaxed);
    }

    pub(crate) fn partition_throttle(&self) {
        self.partition_throttle.fetch_add(1, Relaxed);
    }

    pub(crate) fn upstream_failure(&self) {
        self.upstream_failures.fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let forwarded = self
            .forwarded
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(op, count)| (op.clone(), count.load(Relaxed)))
            .collect();
        Stats {
            requests: self.requests.load(Relaxed),
            forwarded,
            transaction_cancel: self.transaction_cancel.load(Relaxed),
            write_conflict: self.write_conflict.load(Relaxed),
            throttle: self.throttle.load(Relaxed),
            partition_throttle: self.partition_throttle.load(Relaxed),
            lost_response: self.lost_response.load(Relaxed),
            server_error: self.server_error.load(Relaxed),
            late_commit: self.late_commit.load(Relaxed),
            in_progress: self.in_progress.load(Relaxed),
            gsi_lagged_queries: self.gsi_lagged_queries.load(Relaxed),
            gsi_hidden_items: self.gsi_hidden_items.load(Relaxed),
            upstream_failures: self.upstream_failures.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_up() {
        let counters = Counters::default();
        for op in ["PutItem", "PutItem", "Query"] {
            counters.request();
            counters.forwarded(op);
        }
        counters.request();
        counters.fault(Fault::WriteConflict);
        counters.fault(Fault::LostResponse);
        counters.gsi_hidden(3);
        let stats = counters.snapshot();
        assert_eq!(stats.requests, 4);
        assert_eq!(stats.forwarded("PutItem"), 2);
        assert_eq!(stats.forwarded_total(), 3);
        assert_eq!(stats.faults(), 2);
        assert_eq!((stats.gsi_lagged_queries, stats.gsi_hidden_items), (1, 3));
        assert!(stats.to_string().contains("injected 2 faults"), "{stats}");
    }

    #[test]
    fn operation_names_are_bounded() {
        let counters = Counters::default();
        for i in 0..MAX_OPERATIONS + 10 {
            counters.forwarded(&format!("Op{i}"));
        }
        counters.forwarded("Op0");
        let stats = counters.snapshot();
        assert_eq!(stats.forwarded.len(), MAX_OPERATIONS + 1);
        assert_eq!(stats.forwarded(OTHER), 10);
        assert_eq!(stats.forwarded("Op0"), 2);
    }
}
