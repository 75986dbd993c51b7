//! The fan-out's event source mapping as template.yaml deploys it: the one
//! function event of `Type: DynamoDB`, read at start as the local API Gateway
//! reads the routes, so that the settings are written once.
//!
//! Every property of the event is either emulated by the poller or refused
//! here with a message naming it: a setting the poller would ignore would make
//! the local stream silently differ from the deployed one.

use std::time::Duration;

use serde_yaml_ng::{Mapping, Value};

use super::filter::Filters;

/// Where a mapping starts reading a shard it has no position in. Only
/// `TRIM_HORIZON` is emulated: `LATEST` would need the poller to keep each
/// shard's iterator between polls (records written between two polls, and
/// every child shard, would be skipped), and the template does not use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartingPosition {
    TrimHorizon,
}

/// The event source mapping of the template's DynamoDB stream event.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamMapping {
    /// The function it invokes (its build's `Binary`: watch's name for it).
    pub function: String,
    /// Records handed to one invocation, at most (`BatchSize`, default 100).
    pub batch_size: usize,
    /// How long a batch may gather records before it is delivered
    /// (`MaximumBatchingWindowInSeconds`, default 0).
    pub batching_window: Duration,
    pub starting_position: StartingPosition,
    /// Whether the function's `batchItemFailures` are read
    /// (`FunctionResponseTypes: [ReportBatchItemFailures]`); without it an
    /// answer is a success whatever it says.
    pub report_batch_item_failures: bool,
    /// Split a batch in two when the function fails as a whole
    /// (`BisectBatchOnFunctionError`).
    pub bisect_on_function_error: bool,
    /// Retries after the first delivery (`MaximumRetryAttempts`); `None`
    /// (-1, the default) retries until the record is too old.
    pub maximum_retry_attempts: Option<u32>,
    /// Records older than this go to the failure destination instead of the
    /// function (`MaximumRecordAgeInSeconds`); `None` (-1, the default): no
    /// limit but the stream's 24 hours.
    pub maximum_record_age: Option<Duration>,
    /// Where a batch given up on is reported (`DestinationConfig.OnFailure`).
    pub on_failure: Option<FailureDestination>,
    /// `FilterCriteria`: records no filter matches never reach the function.
    pub filters: Filters,
}

/// The on-failure destination: an SQS queue of the template, and the
/// function its SQS event invokes with the notices (locally the poller
/// invokes that function directly, as the queue would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureDestination {
    /// The queue's logical id.
    pub queue: String,
    /// The binary of the function that consumes it, if any does.
    pub consumer: Option<String>,
}

/// The event's properties the poller emulates.
const EMULATED: &[&str] = &[
    "Stream",
    "StartingPosition",
    "BatchSize",
    "MaximumBatchingWindowInSeconds",
    "ParallelizationFactor",
    "FunctionResponseTypes",
    "BisectBatchOnFunctionError",
    "MaximumRetryAttempts",
    "MaximumRecordAgeInSeconds",
    "DestinationConfig",
    "FilterCriteria",
    "Enabled",
];

impl StreamMapping {
    /// The mapping of the one DynamoDB stream event in template.yaml's text.
    pub fn from_template(text: &str) -> Result<Self, String> {
        let template: Value =
            serde_yaml_ng::from_str(text).map_err(|e| format!("template.yaml: {e}"))?;
        let resources = template["Resources"]
            .as_mapping()
            .ok_or("template.yaml has no Resources")?;
        let mut found = Vec::new();
        for function in functions(resources) {
            let Some(events) = function["Properties"]["Events"].as_mapping() else {
                continue;
            };
            for event in events.values() {
                if event["Type"].as_str() == Some("DynamoDB") {
                    found.push((function, &event["Properties"]));
                }
            }
        }
        let [(function, props)] = found[..] else {
            return Err(format!(
                "template.yaml has {} DynamoDB stream events; the local poller serves exactly one",
                found.len()
            ));
        };
        let binary = binary(function)?;
        Self::from_event(binary, props, resources)
            .map_err(|e| format!("{binary}'s stream event: {e}"))
    }

    fn from_event(function: &str, props: &Value, resources: &Mapping) -> Result<Self, String> {
        let props = props.as_mapping().ok_or("no Properties")?;
        for name in props.keys() {
            let name = name.as_str().unwrap_or_default();
            if !EMULATED.contains(&name) {
                return Err(format!("{name} is not emulated by the local poller"));
            }
        }
        let get = |name: &str| props.get(name).filter(|v| !v.is_null());
        let integer = |name: &str, default: i64| -> Result<i64, String> {
            get(name).map_or(Ok(default), |v| {
                v.as_i64().ok_or(format!("{name} is not an integer: {v:?}"))
            })
        };
        let flag = |name: &str| -> Result<bool, String> {
            get(name).map_or(Ok(false), |v| {
                v.as_bool()
                    .ok_or(format!("{name} is not true or false: {v:?}"))
            })
        };
        if get("Enabled").is_some_and(|v| v.as_bool() != Some(true)) {
            return Err("a disabled mapping (Enabled) is not emulated".into());
        }
        if integer("ParallelizationFactor", 1)? != 1 {
            return Err("ParallelizationFactor other than 1 is not emulated (one batch per shard at a time)".into());
        }
        let starting_position = match get("StartingPosition").and_then(Value::as_str) {
            Some("TRIM_HORIZON") => StartingPosition::TrimHorizon,
            other => {
                return Err(format!(
                    "StartingPosition {other:?} is not emulated (TRIM_HORIZON is)"
                ));
            }
        };
        let batch_size = usize::try_from(integer("BatchSize", 100)?)
            .ok()
            .filter(|n| (1..=10_000).contains(n))
            .ok_or("BatchSize is not within 1–10,000")?;
        let window = integer("MaximumBatchingWindowInSeconds", 0)?;
        let batching_window = Duration::from_secs(
            u64::try_from(window)
                .ok()
                .filter(|s| *s <= 300)
                .ok_or("MaximumBatchingWindowInSeconds is not within 0–300")?,
        );
        let report_batch_item_failures = match get("FunctionResponseTypes") {
            None => false,
            Some(types) => {
                let types = types
                    .as_sequence()
                    .ok_or("FunctionResponseTypes is not a list")?;
                for t in types {
                    if t.as_str() != Some("ReportBatchItemFailures") {
                        return Err(format!("FunctionResponseTypes {t:?} is not emulated"));
                    }
                }
                !types.is_empty()
            }
        };
        let maximum_retry_attempts = match integer("MaximumRetryAttempts", -1)? {
            -1 => None,
            n => Some(
                u32::try_from(n)
                    .ok()
                    .filter(|n| *n <= 10_000)
                    .ok_or("MaximumRetryAttempts is not -1 or within 0–10,000")?,
            ),
        };
        let maximum_record_age = match integer("MaximumRecordAgeInSeconds", -1)? {
            -1 => None,
            n => Some(Duration::from_secs(
                u64::try_from(n)
                    .ok()
                    .filter(|n| (60..=604_800).contains(n))
                    .ok_or("MaximumRecordAgeInSeconds is not -1 or within 60–604,800")?,
            )),
        };
        let on_failure = match get("DestinationConfig") {
            None => None,
            Some(config) => Some(failure_destination(config, resources)?),
        };
        let filters = match get("FilterCriteria") {
            None => Filters::default(),
            Some(criteria) => {
                let patterns = criteria["Filters"]
                    .as_sequence()
                    .ok_or("FilterCriteria has no Filters list")?
                    .iter()
                    .map(|f| {
                        f["Pattern"]
                            .as_str()
                            .ok_or(format!("a filter without a Pattern string: {f:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Filters::parse(patterns)?
            }
        };
        Ok(Self {
            function: function.to_owned(),
            batch_size,
            batching_window,
            starting_position,
            report_batch_item_failures,
            bisect_on_function_error: flag("BisectBatchOnFunctionError")?,
            maximum_retry_attempts,
            maximum_record_age,
            on_failure,
            filters,
        })
    }

    /// The mapping of this repository's template.yaml (the tests, the
    /// benchmark; `blog-admin stream-poller` reads the one of the directory
    /// it runs in).
    pub fn of_repository() -> Result<Self, String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        Self::from_template(&text)
    }

    /// Deliveries of one batch at most before it is given up: the first and
    /// the retries (`None`: no limit but the record's age).
    pub fn maximum_deliveries(&self) -> Option<u32> {
        self.maximum_retry_attempts.map(|r| r.saturating_add(1))
    }

    /// The same mapping without its filters: every record of the stream
    /// (tools and tests that read the stream as it is).
    #[must_use]
    pub fn unfiltered(mut self) -> Self {
        self.filters = Filters::default();
        self
    }
}

fn functions(resources: &Mapping) -> impl Iterator<Item = &Value> {
    resources
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::Serverless::Function"))
}

fn binary(function: &Value) -> Result<&str, String> {
    function["Metadata"]["BuildProperties"]["Binary"]
        .as_str()
        .ok_or_else(|| "a function names no Binary".to_owned())
}

/// `OnFailure: {Type: SQS, Destination: !GetAtt Queue.Arn}`, and the
/// function whose SQS event reads that queue.
fn failure_destination(config: &Value, resources: &Mapping) -> Result<FailureDestination, String> {
    let on_failure = &config["OnFailure"];
    if on_failure["Type"].as_str() != Some("SQS") {
        return Err(format!(
            "an OnFailure destination other than SQS is not emulated: {on_failure:?}"
        ));
    }
    let queue = arn_of(&on_failure["Destination"]).ok_or_else(|| {
        format!("OnFailure's Destination is not a !GetAtt Queue.Arn: {on_failure:?}")
    })?;
    let mut consumers = Vec::new();
    for function in functions(resources) {
        let Some(events) = function["Properties"]["Events"].as_mapping() else {
            continue;
        };
        for event in events.values() {
            if event["Type"].as_str() == Some("SQS")
                && arn_of(&event["Properties"]["Queue"]).as_deref() == Some(queue.as_str())
            {
                consumers.push(binary(function)?);
            }
        }
    }
    if consumers.len() > 1 {
        return Err(format!(
            "{} functions read the queue {queue}",
            consumers.len()
        ));
    }
    Ok(FailureDestination {
        consumer: consumers.first().map(|c| (*c).to_owned()),
        queue,
    })
}

/// The logical id of `!GetAtt Name.Arn` (or `!GetAtt [Name, Arn]`).
fn arn_of(value: &Value) -> Option<String> {
    let Value::Tagged(tagged) = value else {
        return None;
    };
    if tagged.tag != "GetAtt" {
        return None;
    }
    match &tagged.value {
        Value::String(text) => text.strip_suffix(".Arn").map(str::to_owned),
        Value::Sequence(parts) => match (parts.first(), parts.get(1)) {
            (Some(Value::String(name)), Some(Value::String(att))) if att == "Arn" => {
                Some(name.clone())
            }
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::{StartingPosition, StreamMapping};

    /// A template of one stream event with these properties, and a queue
    /// with its consumer.
    fn template(properties: &str) -> String {
        let properties: String = properties
            .lines()
            .map(|line| format!("            {line}\n"))
            .collect();
        format!(
            r#"Resources:
  Queue:
    Type: AWS::SQS::Queue
  Consumer:
    Type: AWS::Serverless::Function
    Metadata:
      BuildProperties:
        Binary: consumer
    Properties:
      Events:
        Notices:
          Type: SQS
          Properties:
            Queue: !GetAtt [Queue, Arn]
  Reader:
    Type: AWS::Serverless::Function
    Metadata:
      BuildProperties:
        Binary: reader
    Properties:
      Events:
        Stream:
          Type: DynamoDB
          Properties:
{properties}"#
        )
    }

    #[test]
    fn the_template_mapping_is_read_whole() {
        let mapping = StreamMapping::of_repository().expect("the template's mapping");
        assert_eq!(mapping.function, "fan-out");
        assert_eq!(mapping.batch_size, 1000);
        assert_eq!(mapping.batching_window, Duration::from_secs(1));
        assert_eq!(mapping.starting_position, StartingPosition::TrimHorizon);
        assert!(mapping.report_batch_item_failures);
        assert!(mapping.bisect_on_function_error);
        assert_eq!(mapping.maximum_retry_attempts, Some(10));
        assert_eq!(mapping.maximum_deliveries(), Some(11));
        assert_eq!(
            mapping.maximum_record_age,
            Some(Duration::from_secs(21_600))
        );
        let destination = mapping.on_failure.as_ref().expect("a failure destination");
        assert_eq!(destination.queue, "FanOutFailureQueue");
        assert_eq!(destination.consumer.as_deref(), Some("park-failures"));
        assert!(!mapping.filters.is_empty());
        assert!(mapping.filters.admits(&json!({
            "eventName": "INSERT", "dynamodb": {"NewImage": {"type": {"S": "post"}}}
        })));
        assert!(mapping.clone().unfiltered().filters.is_empty());
    }

    #[test]
    fn defaults_are_lambdas() {
        let mapping = StreamMapping::from_template(&template(
            "Stream: !GetAtt Table.StreamArn\nStartingPosition: TRIM_HORIZON",
        ))
        .expect("a minimal mapping");
        assert_eq!(mapping.function, "reader");
        assert_eq!(mapping.batch_size, 100);
        assert_eq!(mapping.batching_window, Duration::ZERO);
        assert_eq!(mapping.starting_position, StartingPosition::TrimHorizon);
        assert!(!mapping.report_batch_item_failures);
        assert!(!mapping.bisect_on_function_error);
        assert_eq!(mapping.maximum_deliveries(), None);
        assert_eq!(mapping.maximum_record_age, None);
        assert_eq!(mapping.on_failure, None);
        assert!(mapping.filters.is_empty());
    }

    #[test]
    fn a_queue_given_with_a_list_getatt_finds_its_consumer() {
        let mapping = StreamMapping::from_template(&template(
            "StartingPosition: TRIM_HORIZON\nDestinationConfig:\n  OnFailure:\n    Type: SQS\n    Destination: !GetAtt Queue.Arn",
        ))
        .expect("a mapping with a destination");
        let destination = mapping.on_failure.expect("a destination");
        assert_eq!(destination.queue, "Queue");
        assert_eq!(destination.consumer.as_deref(), Some("consumer"));
    }

    #[test]
    fn what_is_not_emulated_is_refused_by_name() {
        for (properties, named) in [
            (
                "StartingPosition: TRIM_HORIZON\nTumblingWindowInSeconds: 30",
                "TumblingWindowInSeconds",
            ),
            (
                "StartingPosition: TRIM_HORIZON\nParallelizationFactor: 2",
                "ParallelizationFactor",
            ),
            ("StartingPosition: AT_TIMESTAMP", "StartingPosition"),
            ("StartingPosition: LATEST", "StartingPosition"),
            ("StartingPosition: TRIM_HORIZON\nEnabled: false", "Enabled"),
            ("StartingPosition: TRIM_HORIZON\nBatchSize: 0", "BatchSize"),
            (
                "StartingPosition: TRIM_HORIZON\nMaximumRecordAgeInSeconds: 10",
                "MaximumRecordAgeInSeconds",
            ),
            (
                "StartingPosition: TRIM_HORIZON\nDestinationConfig:\n  OnFailure:\n    Type: SNS\n    Destination: !Ref Topic",
                "SNS",
            ),
            (
                "StartingPosition: TRIM_HORIZON\nFilterCriteria:\n  Filters:\n    - Pattern: '{\"eventName\": [{\"wildcard\": \"I*\"}]}'",
                "wildcard",
            ),
        ] {
            let refused =
                StreamMapping::from_template(&template(properties)).expect_err("refused at start");
            assert!(refused.contains(named), "{properties:?}: {refused}");
        }
    }
}
