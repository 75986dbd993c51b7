//! Measures what each DynamoDB call costs, from the `ConsumedCapacity` that
//! every request of the store asks for (`ReturnConsumedCapacity: INDEXES`).
//! Tests and benchmarks attach it to a client; it reads raw responses, so it
//! sees every operation the same way, transactions included.

use std::sync::{Arc, Mutex, PoisonError};

use aws_sdk_dynamodb::config::{
    ConfigBag, Intercept, RuntimeComponents, interceptors::FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use serde_json::Value;

/// One DynamoDB call: its operation (`GetItem`, `TransactWriteItems`, …),
/// the capacity units it consumed, on the table and on its indexes, and the
/// error code it failed with, if it did.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub operation: String,
    pub table: f64,
    pub indexes: f64,
    /// `ConditionalCheckFailedException`, `TransactionCanceledException`, …
    pub error: Option<String>,
}

impl Call {
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
        let body = response
            .and_then(|r| r.body().bytes())
            .and_then(|body| serde_json::from_slice::<Value>(body).ok())
            .unwrap_or(Value::Null);
        let consumed = body["ConsumedCapacity"].clone();
        // `__type` is `com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException` or the bare name.
        let error = response
            .filter(|r| !r.status().is_success())
            .map(|_| body["__type"].as_str().unwrap_or("unknown").to_owned());
        // One object per table, or a list of them (transactions, batches).
        let entries = match consumed {
            Value::Array(list) => list,
            Value::Null => Vec::new(),
            one => vec![one],
        };
        let units = |v: &Value| v["CapacityUnits"].as_f64().unwrap_or(0.0);
        let mut call = Call {
            operation,
            table: 0.0,
            indexes: 0.0,
            error,
        };
        for entry in &entries {
            let indexes: f64 = ["GlobalSecondaryIndexes", "LocalSecondaryIndexes"]
                .iter()
                .filter_map(|kind| entry[kind].as_object())
                .flat_map(|map| map.values().map(units))
                .sum();
            // `Table` is absent when a call touched no index: then the total is the table's.
            let table = entry
                .get("Table")
                .map_or_else(|| units(entry) - indexes, units);
            call.table += table;
            call.indexes += indexes;
        }
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
        Ok(())
    }
}
