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

/// One DynamoDB call: its operation (`GetItem`, `TransactWriteItems`, …) and
/// the capacity units it consumed, on the table and on its indexes.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub operation: String,
    pub table: f64,
    pub indexes: f64,
}

impl Call {
    pub fn total(&self) -> f64 {
        self.table + self.indexes
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
        let consumed = context
            .response()
            .and_then(|r| r.body().bytes())
            .and_then(|body| serde_json::from_slice::<Value>(body).ok())
            .map(|body| body["ConsumedCapacity"].clone())
            .unwrap_or(Value::Null);
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
