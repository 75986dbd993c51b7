//! Eventually consistent index reads. DynamoDB copies a write into a global
//! secondary index asynchronously, usually within a second; DynamoDB Local
//! does it before the write returns. Hiding the recent items from an index
//! Query's answer makes code that reads its own writes through a GSI fail
//! locally as it would in AWS.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

/// The attribute that dates an item: RFC 3339 UTC, as the blog writes it.
const CREATED_AT: &str = "createdAt";

/// Whether a Query request reads an index (the only reads a GSI lag affects).
pub(crate) fn queries_an_index(request: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Query {
        #[serde(rename = "IndexName")]
        index_name: Option<String>,
    }
    serde_json::from_slice::<Query>(request).is_ok_and(|q| q.index_name.is_some())
}

/// Removes from a Query answer the items created less than `lag` before
/// `now`, and lowers `Count` and `ScannedCount` to match. Returns the new body
/// and how many items it hid, or `None` when it hid nothing (or cannot read
/// the body), so the upstream body goes back byte for byte. Items without a
/// readable `createdAt` stay: the proxy cannot tell their age.
pub(crate) fn hide_recent(
    response: &[u8],
    lag: Duration,
    now: OffsetDateTime,
) -> Option<(Vec<u8>, u64)> {
    let mut body: Value = serde_json::from_slice(response).ok()?;
    let items = body.get_mut("Items")?.as_array_mut()?;
    let before = items.len();
    items.retain(|item| !is_recent(item, lag, now));
    let kept = items.len();
    let hidden = before - kept;
    if hidden == 0 {
        return None;
    }
    body["Count"] = kept.into();
    if let Some(scanned) = body.get("ScannedCount").and_then(Value::as_u64) {
        body["ScannedCount"] = scanned.saturating_sub(hidden as u64).into();
    }
    Some((serde_json::to_vec(&body).ok()?, hidden as u64))
}

fn is_recent(item: &Value, lag: Duration, now: OffsetDateTime) -> bool {
    let Some(created) = item
        .get(CREATED_AT)
        .and_then(|attribute| attribute.get("S"))
        .and_then(Value::as_str)
        .and_then(|s| OffsetDateTime::parse(s, &Rfc3339).ok())
    else {
        return false;
    };
    // An item from the future (another clock) is as unseen as a recent one.
    now - created < lag
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::format_description::well_known::Rfc3339;

    use super::*;

    fn item(id: &str, created: Option<OffsetDateTime>) -> Value {
        let mut item = json!({ "pk": { "S": id } });
        if let Some(created) = created {
            item[CREATED_AT] = json!({ "S": created.format(&Rfc3339).expect("format") });
        }
        item
    }

    #[test]
    fn only_recent_items_are_hidden_and_counts_follow() {
        let now = OffsetDateTime::parse("2026-11-22T10:54:08.123Z", &Rfc3339).expect("now");
        let ms = time::Duration::milliseconds;
        let answer = json!({
            "Items": [
                item("old", Some(now - ms(5_000))),
                item("just-old-enough", Some(now - ms(1_000))),
                item("fresh", Some(now - ms(999))),
                item("undated", None),
                item("future", Some(now + ms(10))),
                { "pk": { "S": "odd" }, "createdAt": { "S": "yesterday" } },
            ],
            "Count": 6,
            "ScannedCount": 9,
            "LastEvaluatedKey": { "pk": { "S": "odd" } },
        });
        let (body, hidden) =
            hide_recent(answer.to_string().as_bytes(), Duration::from_secs(1), now)
                .expect("hid some");
        let body: Value = serde_json::from_slice(&body).expect("json");
        let ids: Vec<&str> = body["Items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| i["pk"]["S"].as_str().expect("id"))
            .collect();
        assert_eq!(ids, ["old", "just-old-enough", "undated", "odd"]);
        assert_eq!(hidden, 2);
        assert_eq!(body["Count"], 4);
        assert_eq!(body["ScannedCount"], 7);
        assert_eq!(body["LastEvaluatedKey"], answer["LastEvaluatedKey"]);
    }

    #[test]
    fn nothing_to_hide_leaves_the_body_alone() {
        let now = OffsetDateTime::now_utc();
        let old = json!({ "Items": [item("a", Some(now - time::Duration::hours(1)))], "Count": 1 });
        let lag = Duration::from_secs(1);
        assert_eq!(hide_recent(old.to_string().as_bytes(), lag, now), None);
        assert_eq!(hide_recent(br#"{"Count":3}"#, lag, now), None);
        assert_eq!(hide_recent(b"not json", lag, now), None);
    }

    #[test]
    fn index_queries_are_recognised() {
        assert!(queries_an_index(
            br#"{"TableName":"t","IndexName":"GSI1","KeyConditionExpression":"x"}"#
        ));
        assert!(!queries_an_index(br#"{"TableName":"t"}"#));
        assert!(!queries_an_index(b"garbage"));
    }
}
