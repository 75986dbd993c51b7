//! Measures what each DynamoDB call costs, from the `ConsumedCapacity` that
//! every request of the store asks for (`ReturnConsumedCapacity: INDEXES`).
//! Tests and benchmarks attach it to a client, and so does every Lambda (for
//! its capacity metrics, `crate::metrics::emit_capacity`); it reads raw
//! responses, so it sees every operation the same way, transactions included.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
};

use aws_sdk_dynamodb::config::{
    ConfigBag, Intercept, RuntimeComponents, interceptors::FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use serde::Deserialize;

/// One DynamoDB call: its operation (`GetItem`, `TransactWriteItems`, …),
/// the capacity units it consumed, on the table and on its indexes, and the
/// error code it failed with, if it did.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub operation: String,
    pub table: f64,
    pub indexes: f64,
    /// The units by where they were spent: `table`, then each index by name.
    pub targets: Vec<(String, f64)>,
    /// `ConditionalCheckFailedException`, `TransactionCanceledException`, …
    pub error: Option<String>,
}

impl Call {
    /// Whether its units are read units (the other operations write).
    pub fn reads(&self) -> bool {
        matches!(
            self.operation.as_str(),
            "GetItem" | "BatchGetItem" | "Query" | "Scan" | "TransactGetItems"
        )
    }

    pub fn total(&self) -> f64 {
        self.table + self.indexes
    }

    /// A write refused by its condition: DynamoDB bills it (at least 1 WCU)
    /// but reports no capacity for it.
    pub fn failed_condition(&self) -> bool {
        self.error
            .as_deref()
            .is_some_and(|e| e.ends_with("ConditionalCheckFailedException"))
    }
}

#[derive(Clone, Debug, Default)]
pub struct CapacityMeter {
    calls: Arc<Mutex<Vec<Call>>>,
}

impl CapacityMeter {
    /// How many calls were recorded since the last `take`.
    pub fn count(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The calls recorded since the last `take`.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Intercept for CapacityMeter {
    fn name(&self) -> &'static str {
        "CapacityMeter"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let operation = cfg
            .load::<Metadata>()
            .map_or("unknown", Metadata::name)
            .to_owned();
        let response = context.response();
        // Only `ConsumedCapacity` and `__type` are decoded; the rest of the
        // body (up to a 1 MB Query page) is skipped over.
        let body: Body = response
            .and_then(|r| r.body().bytes())
            .and_then(|body| serde_json::from_slice(body).ok())
            .unwrap_or_default();
        // `__type` is `com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException` or the bare name.
        let error = response
            .filter(|r| !r.status().is_success())
            .map(|_| body.error.unwrap_or_else(|| "unknown".to_owned()));
        // One object per table, or a list of them (transactions, batches).
        let entries = match body.consumed {
            Consumed::None => Vec::new(),
            Consumed::One(entry) => vec![entry],
            Consumed::Many(entries) => entries,
        };
        let mut call = Call {
            operation,
            table: 0.0,
            indexes: 0.0,
            targets: Vec::new(),
            error,
        };
        let mut targets: BTreeMap<String, f64> = BTreeMap::new();
        for entry in entries {
            let by_index = entry.global.into_iter().chain(entry.local);
            let mut indexes = 0.0;
            for (name, units) in by_index {
                indexes += units.units;
                *targets.entry(name).or_default() += units.units;
            }
            // `Table` is absent when a call touched no index: then the total is the table's.
            let table = entry.table.map_or(entry.units - indexes, |t| t.units);
            call.table += table;
            call.indexes += indexes;
        }
        call.targets = std::iter::once(("table".to_owned(), call.table))
            .chain(targets)
            .collect();
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
        Ok(())
    }
}

/// What the meter reads of a response body.
#[derive(Debug, Default, Deserialize)]
struct Body {
    #[serde(rename = "ConsumedCapacity", default)]
    consumed: Consumed,
    #[serde(rename = "__type")]
    error: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum Consumed {
    #[default]
    None,
    Many(Vec<Entry>),
    One(Entry),
}

#[derive(Debug, Deserialize)]
struct Entry {
    #[serde(rename = "CapacityUnits", default)]
    units: f64,
    #[serde(rename = "Table")]
    table: Option<Units>,
    #[serde(rename = "GlobalSecondaryIndexes", default)]
    global: BTreeMap<String, Units>,
    #[serde(rename = "LocalSecondaryIndexes", default)]
    local: BTreeMap<String, Units>,
}

#[derive(Debug, Deserialize)]
struct Units {
    #[serde(rename = "CapacityUnits", default)]
    units: f64,
}
