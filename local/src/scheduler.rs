//! The stand-in for EventBridge's schedules (`blog-admin scheduler`): the
//! template's `Schedule` events, each function invoked at its rate with the
//! event EventBridge sends, through `cargo lambda watch`'s Invoke API, as
//! deployed.

use std::time::Duration;

use serde_yaml_ng::Value;

/// One function a schedule runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The function's binary (its `BuildProperties.Binary`).
    pub function: String,
    /// Its event's name in the template (the rule's name).
    pub event: String,
    pub every: Duration,
}

/// Every `Schedule` event of template.yaml's functions.
pub fn from_template(text: &str) -> Result<Vec<Schedule>, String> {
    let template: Value =
        serde_yaml_ng::from_str(text).map_err(|e| format!("template.yaml: {e}"))?;
    let resources = template["Resources"]
        .as_mapping()
        .ok_or("template.yaml has no Resources")?;
    let mut schedules = Vec::new();
    for resource in resources.values() {
        let Some(events) = resource["Properties"]["Events"].as_mapping() else {
            continue;
        };
        for (name, event) in events {
            if event["Type"].as_str() != Some("Schedule") {
                continue;
            }
            let expression = event["Properties"]["Schedule"]
                .as_str()
                .ok_or("a Schedule event without its Schedule")?;
            let function = resource["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .ok_or("a scheduled function without its Binary")?;
            schedules.push(Schedule {
                function: function.to_owned(),
                event: name.as_str().unwrap_or_default().to_owned(),
                every: rate(expression)?,
            });
        }
    }
    Ok(schedules)
}

/// EventBridge's `rate(value unit)`: minutes, hours or days (a minute at
/// least, as EventBridge has it). Cron expressions are not used here.
pub fn rate(expression: &str) -> Result<Duration, String> {
    let bad = || format!("unsupported schedule {expression:?}: rate(N minutes|hours|days)");
    let inner = expression
        .strip_prefix("rate(")
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(bad)?;
    let (value, unit) = inner.trim().split_once(' ').ok_or_else(bad)?;
    let value: u64 = value.parse().map_err(|_| bad())?;
    let seconds = match (value, unit) {
        (1, "minute") | (2.., "minutes") => 60,
        (1, "hour") | (2.., "hours") => 3_600,
        (1, "day") | (2.., "days") => 86_400,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs(value * seconds))
}

/// The event EventBridge sends a scheduled function.
pub fn event(schedule: &Schedule) -> serde_json::Value {
    let now = time::OffsetDateTime::now_utc();
    let at = now
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    serde_json::json!({
        "version": "0",
        "id": ulid::Ulid::generate().to_string(),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": at,
        "region": "us-east-1",
        "resources": [format!("arn:aws:events:us-east-1:123456789012:rule/{}", schedule.event)],
        "detail": {}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_read_as_eventbridge_has_them() {
        assert_eq!(rate("rate(1 minute)"), Ok(Duration::from_secs(60)));
        assert_eq!(rate("rate(5 minutes)"), Ok(Duration::from_secs(300)));
        assert_eq!(rate("rate(2 hours)"), Ok(Duration::from_secs(7_200)));
        assert!(rate("rate(1 minutes)").is_err());
        assert!(rate("rate(0 minutes)").is_err());
        assert!(rate("cron(0 * * * ? *)").is_err());
    }

    #[test]
    fn the_template_schedules_the_publisher_every_minute() {
        let template = std::fs::read_to_string("../template.yaml").expect("template.yaml");
        let schedules = from_template(&template).expect("schedules");
        assert_eq!(
            schedules,
            [Schedule {
                function: "publish-scheduled".to_owned(),
                event: "EveryMinute".to_owned(),
                every: Duration::from_secs(60),
            }]
        );
    }
}
