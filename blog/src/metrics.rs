//! Metrics in CloudWatch's Embedded Metric Format: one JSON line on stdout per
//! event, which CloudWatch Logs turns into metrics (namespace `Blog`,
//! dimension `Function`) with no API call and no permission beyond the logs.
//!
//! | metric | from | dimensions |
//! |---|---|---|
//! | `Created` | every 201 | Function |
//! | `Unavailable` | every 503, by what DynamoDB said | Function, Cause (`throttle`, `conflict`, `unavailable`) |
//! | `Records`, `Applied`, `Stale`, `Ignored`, `Failed`, `Paused`, `Writes`, `OldestRecordAge` | each fan-out batch | Function |
//! | `RenameCopies`, `RenamesPaused` | each rename walk's invocation | Function |
//!
//! Only inside Lambda (or `cargo lambda watch`), where `AWS_LAMBDA_FUNCTION_NAME`
//! is set: the tests, the local gateway and the benchmark print none.

use std::{
    sync::OnceLock,
    time::{SystemTime, UNIX_EPOCH},
};

use serde_json::{Map, Value, json};

pub const NAMESPACE: &str = "Blog";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

/// One EMF document: `values` recorded at `timestamp_ms` under `Function`
/// and the extra `dimensions`.
pub fn document(
    function: &str,
    dimensions: &[(&str, &str)],
    values: &[(&str, f64, Unit)],
    timestamp_ms: u64,
) -> Value {
    let mut names = vec!["Function"];
    names.extend(dimensions.iter().map(|(name, _)| *name));
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [names],
                "Metrics": values
                    .iter()
                    .map(|(name, _, unit)| json!({ "Name": name, "Unit": unit.as_str() }))
                    .collect::<Vec<_>>(),
            }],
        }),
    );
    doc.insert("Function".into(), function.into());
    for (name, value) in dimensions {
        doc.insert((*name).into(), (*value).into());
    }
    for (name, value, _) in values {
        doc.insert((*name).into(), json!(value));
    }
    Value::Object(doc)
}

/// The function's name, read once; none outside Lambda.
fn function() -> Option<&'static str> {
    static FUNCTION: OnceLock<Option<String>> = OnceLock::new();
    FUNCTION
        .get_or_init(|| std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok())
        .as_deref()
}

/// Prints one EMF line, when running as a Lambda function.
pub fn emit(dimensions: &[(&str, &str)], values: &[(&str, f64, Unit)]) {
    let Some(function) = function() else {
        return;
    };
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default();
    println!("{}", document(function, dimensions, values, now_ms));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_names_its_metrics_dimensions_and_values_as_emf_wants() {
        let doc = document(
            "like-post",
            &[("Cause", "throttle")],
            &[("Unavailable", 1.0, Unit::Count)],
            1_700_000_000_000,
        );
        assert_eq!(
            doc,
            json!({
                "_aws": {
                    "Timestamp": 1_700_000_000_000_u64,
                    "CloudWatchMetrics": [{
                        "Namespace": "Blog",
                        "Dimensions": [["Function", "Cause"]],
                        "Metrics": [{ "Name": "Unavailable", "Unit": "Count" }],
                    }],
                },
                "Function": "like-post",
                "Cause": "throttle",
                "Unavailable": 1.0,
            })
        );
    }
}
