//! Metrics in CloudWatch's Embedded Metric Format: one JSON line on stdout per
//! event, which CloudWatch Logs turns into metrics (namespace `Blog`,
//! dimension `Function`) with no API call and no permission beyond the logs.
//!
//! | metric ([`Metric`]) | from | dimensions ([`Dimension`]) |
//! |---|---|---|
//! | `Created` | every 201 | Function |
//! | `Unavailable` | every 503, by what DynamoDB said | Function, Cause (`throttle`, `conflict`, `unavailable`) |
//! | `Records`, `Applied`, `Stale`, `Ignored`, `Failed`, `Paused`, `Writes`, `OldestRecordAge` | each fan-out batch | Function |
//! | `RenameCopies`, `RenamesPaused`, `RenamesFinished` | each rename walk's invocation | Function |
//! | `ErasedItems`, `ErasuresPaused`, `ErasuresFinished` | each erasure walk's invocation | Function |
//! | `Parked`, `ParkingFailed` | each `park-failures` invocation | Function |
//! | `ReadCapacityUnits`, `WriteCapacityUnits` | each invocation, from the `ConsumedCapacity` of its DynamoDB calls | Function, Target (`table`, `GSI1`) |
//!
//! The capacity figures are what DynamoDB reports: a write refused by its
//! condition reports none but is billed 1 unit, and a transaction's units
//! count twice (docs/data-model.md, "As DynamoDB bills them").
//!
//! Only inside Lambda (or `cargo lambda watch`), where `AWS_LAMBDA_FUNCTION_NAME`
//! is set: the tests, the local gateway and the benchmark print none.

use std::{
    collections::BTreeMap,
    sync::OnceLock,
    time::{SystemTime, UNIX_EPOCH},
};

use serde_json::{Map, Value, json};

use crate::store::meter::Call;

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

/// Declares [`Metric`] from one list of its variants, each named in
/// CloudWatch as it is here, so that [`Metric::ALL`] cannot miss one.
macro_rules! metrics {
    ($($variant:ident,)*) => {
        /// Every metric the functions print (the table above): its name in
        /// CloudWatch, which the template's alarms use, and its unit.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Metric {
            $($variant,)*
        }

        impl Metric {
            pub const ALL: &[Metric] = &[$(Metric::$variant,)*];

            pub const fn name(self) -> &'static str {
                match self {
                    $(Metric::$variant => stringify!($variant),)*
                }
            }
        }
    };
}

metrics! {
    Created,
    Unavailable,
    Records,
    Applied,
    Stale,
    Ignored,
    Failed,
    Paused,
    Writes,
    OldestRecordAge,
    RenameCopies,
    RenamesPaused,
    RenamesFinished,
    ErasedItems,
    ErasuresPaused,
    ErasuresFinished,
    Parked,
    ParkingFailed,
    ReadCapacityUnits,
    WriteCapacityUnits,
}

impl Metric {
    pub const fn unit(self) -> Unit {
        match self {
            Metric::OldestRecordAge => Unit::Milliseconds,
            _ => Unit::Count,
        }
    }
}

/// A dimension a metric is printed under besides `Function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// Why a request answered 503 (`throttle`, `conflict`, `unavailable`).
    Cause,
    /// What a call's capacity was consumed on (`table`, `GSI1`).
    Target,
}

impl Dimension {
    pub const fn name(self) -> &'static str {
        match self {
            Dimension::Cause => "Cause",
            Dimension::Target => "Target",
        }
    }
}

/// One EMF document: `values` recorded at `timestamp_ms` under `Function`
/// and the extra `dimensions`.
pub fn document(
    function: &str,
    dimensions: &[(Dimension, &str)],
    values: &[(Metric, f64)],
    timestamp_ms: u64,
) -> Value {
    let mut names = vec!["Function"];
    names.extend(dimensions.iter().map(|(dimension, _)| dimension.name()));
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
                    .map(|(metric, _)| json!({ "Name": metric.name(), "Unit": metric.unit().as_str() }))
                    .collect::<Vec<_>>(),
            }],
        }),
    );
    doc.insert("Function".into(), function.into());
    for (dimension, value) in dimensions {
        doc.insert(dimension.name().into(), (*value).into());
    }
    for (metric, value) in values {
        doc.insert(metric.name().into(), json!(value));
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

/// Whether metrics are printed: inside Lambda (or `cargo lambda watch`).
pub fn enabled() -> bool {
    function().is_some()
}

/// The capacity `calls` consumed, by target (`table`, then each index): read
/// units and write units.
pub fn capacity_by_target(calls: &[Call]) -> BTreeMap<String, (f64, f64)> {
    let mut by_target: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for call in calls {
        for (target, units) in &call.targets {
            let (read, write) = by_target.entry(target.clone()).or_default();
            if call.reads() {
                *read += units;
            } else {
                *write += units;
            }
        }
    }
    by_target
}

/// Prints one invocation's capacity, one line per target it touched.
pub fn emit_capacity(calls: &[Call]) {
    for (target, (read, write)) in capacity_by_target(calls) {
        if read == 0.0 && write == 0.0 {
            continue;
        }
        emit(
            &[(Dimension::Target, target.as_str())],
            &[
                (Metric::ReadCapacityUnits, read),
                (Metric::WriteCapacityUnits, write),
            ],
        );
    }
}

/// Prints one EMF line, when running as a Lambda function.
pub fn emit(dimensions: &[(Dimension, &str)], values: &[(Metric, f64)]) {
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

    fn call(operation: &str, targets: &[(&str, f64)]) -> Call {
        Call {
            operation: operation.to_owned(),
            table: 0.0,
            indexes: 0.0,
            targets: targets.iter().map(|(t, u)| ((*t).to_owned(), *u)).collect(),
            error: None,
        }
    }

    #[test]
    fn capacity_is_summed_by_target_as_read_or_write_units() {
        let calls = [
            call("GetItem", &[("table", 0.5)]),
            call("TransactWriteItems", &[("table", 8.0), ("GSI1", 2.0)]),
            call("Query", &[("table", 0.0), ("GSI1", 1.5)]),
            call("UpdateItem", &[("table", 1.0)]),
        ];
        assert_eq!(
            capacity_by_target(&calls),
            BTreeMap::from([
                ("GSI1".to_owned(), (1.5, 2.0)),
                ("table".to_owned(), (0.5, 9.0)),
            ])
        );
    }

    #[test]
    fn a_document_names_its_metrics_dimensions_and_values_as_emf_wants() {
        let doc = document(
            "like-post",
            &[(Dimension::Cause, "throttle")],
            &[(Metric::Unavailable, 1.0)],
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

    #[test]
    fn the_table_above_lists_every_metric() {
        let docs = include_str!("metrics.rs");
        for metric in Metric::ALL {
            let name = metric.name();
            assert!(
                docs.contains(&format!("`{name}`")),
                "{name} is not in the table"
            );
        }
    }

    #[test]
    fn the_templates_alarms_on_the_blog_namespace_name_metrics_the_functions_print() {
        let template = include_str!("../../template.yaml");
        let lines: Vec<_> = template.lines().map(str::trim).collect();
        let alarmed: Vec<_> = lines
            .windows(2)
            .filter(|pair| pair[0] == format!("Namespace: {NAMESPACE}"))
            .filter_map(|pair| pair[1].strip_prefix("MetricName: "))
            .collect();
        assert!(!alarmed.is_empty(), "no alarm on the Blog namespace found");
        for name in alarmed {
            assert!(
                Metric::ALL.iter().any(|m| m.name() == name),
                "the template alarms on {name}, which no function prints"
            );
        }
    }
}
