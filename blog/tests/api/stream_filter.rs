//! template.yaml's `FilterCriteria` and the fan-out's rules agree: Lambda
//! hands the fan-out a record exactly when `fanout::applies_to` says the
//! fan-out changes something for it. A pattern too narrow loses copies,
//! counts or erasures in AWS with nothing parked (a filtered record is no
//! failure); one too wide wakes the function for nothing.
//!
//! Checked twice: on every item type the table knows (`ItemType::ALL`, so a
//! new type is checked as soon as it exists; `Rule::of` in `fanout/rules.rs`
//! makes it decide at compile time) with every event kind, and on the records a real
//! workload writes to DynamoDB Local's stream, with their images as the
//! stream writes them.

use std::collections::BTreeSet;

use aws_lambda_events::event::dynamodb::EventRecord;
use blog::{fanout, keys::ItemType, store::items::parked::ParkedRecordItem};
use local::stream_poller::mapping::StreamMapping;
use serde_json::{Value, json};

use crate::support::TestApi;

fn deployed() -> StreamMapping {
    StreamMapping::of_repository().expect("template.yaml's stream mapping")
}

/// Whether the filters and the rules agree on `record` (JSON as Lambda's
/// event carries it); a description of the disagreement otherwise.
fn disagreement(mapping: &StreamMapping, record: &Value) -> Option<String> {
    let passes = mapping.filters.admits(record);
    let parsed: EventRecord = serde_json::from_value(record.clone()).expect("a stream record");
    let applies = fanout::applies_to(&parsed);
    (passes != applies).then(|| {
        format!(
            "{} of a {}: the filters {} it, the fan-out's rules {}",
            record["eventName"],
            kind(record),
            if passes { "let through" } else { "drop" },
            if applies { "apply" } else { "do not apply" },
        )
    })
}

/// The record's item type as its image says (the old one for a REMOVE).
fn kind(record: &Value) -> String {
    let image = if record["eventName"] == "REMOVE" {
        "OldImage"
    } else {
        "NewImage"
    };
    record["dynamodb"][image]["type"]["S"]
        .as_str()
        .unwrap_or("(untyped)")
        .to_owned()
}

/// A record of `event` on an item of type `kind`, with the images a
/// NEW_AND_OLD_IMAGES stream carries for it.
fn synthetic(kind: ItemType, event: &str) -> Value {
    let name = serde_json::to_value(kind).expect("a type name");
    let mut image = json!({
        "PK": {"S": "X#1"}, "SK": {"S": "Y"}, "type": {"S": name}, "version": {"N": "2"}
    });
    // A delivery's MODIFY goes on only where it handed off: its other saves
    // are checked by `a_delivery_is_walked_from_its_insert_and_its_handoffs_only`.
    if kind == ItemType::Delivery && event == "MODIFY" {
        image["handoff"] = json!({"N": "1700000000"});
    }
    // A hot post's first-page copy comes back only where a rebuild is due:
    // `a_first_page_copy_comes_back_only_with_a_rebuild_due`.
    if kind == ItemType::FirstPage && event != "REMOVE" {
        image["due"] = json!({"N": "1700000000000"});
    }
    let mut change = json!({
        "ApproximateCreationDateTime": 1_700_000_000.0,
        "Keys": {"PK": {"S": "X#1"}, "SK": {"S": "Y"}},
        "SequenceNumber": "100",
        "SizeBytes": 80,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    });
    if event != "REMOVE" {
        change["NewImage"] = image.clone();
    }
    if event != "INSERT" {
        change["OldImage"] = image;
    }
    json!({
        "eventID": "1",
        "eventName": event,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": change,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/now",
    })
}

#[test]
fn every_item_type_and_event_kind_is_filtered_as_the_rules_decide() {
    let mapping = deployed();
    let mut disagreements = Vec::new();
    let mut delivered = 0;
    for &kind in ItemType::ALL {
        for event in ["INSERT", "MODIFY", "REMOVE"] {
            let record = synthetic(kind, event);
            delivered += usize::from(mapping.filters.admits(&record));
            disagreements.extend(disagreement(&mapping, &record));
        }
    }
    assert_eq!(disagreements, Vec::<String>::new());
    // A filter that let nothing through would agree with rules that apply to
    // nothing: the fan-out has its rules.
    assert_eq!(
        delivered, 19,
        "a post's three changes, a profile's change and removal, comments and likes made \
         and taken back (their notifications), \
         a hot post's shard and group counter changes, a follower shard's count made and changed, \
         a follower's entry made and deleted, a delivery started and handed off, \
         a hot post's first-page copy made or marked with a rebuild due"
    );
}

/// The check above fails when a pattern goes: the template without any one
/// of its filters disagrees with the rules.
#[test]
fn each_of_the_templates_filters_is_needed() {
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
            .expect("template.yaml");
    let patterns: Vec<&str> = template
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- Pattern: "))
        .collect();
    assert_eq!(patterns.len(), 5, "{patterns:?}");
    for dropped in &patterns {
        let narrower = template.replace(&format!("- Pattern: {dropped}"), "");
        let mapping = StreamMapping::from_template(&narrower).expect("a narrower mapping");
        let disagree = ItemType::ALL.iter().any(|&kind| {
            ["INSERT", "MODIFY", "REMOVE"]
                .iter()
                .any(|event| disagreement(&mapping, &synthetic(kind, event)).is_some())
        });
        assert!(disagree, "nothing notices the filter {dropped} gone");
    }
}

/// A delivery's MODIFY that saved its place after a page (no `handoff`)
/// wakes nothing: the walk that wrote it is still going; one that handed
/// off at its deadline goes on.
#[test]
fn a_delivery_is_walked_from_its_insert_and_its_handoffs_only() {
    let mapping = deployed();
    let mut saved = synthetic(ItemType::Delivery, "MODIFY");
    assert!(mapping.filters.admits(&saved));
    assert_eq!(disagreement(&mapping, &saved), None);
    if let Some(image) = saved["dynamodb"]["NewImage"].as_object_mut() {
        image.remove("handoff");
    }
    assert!(!mapping.filters.admits(&saved));
    assert_eq!(disagreement(&mapping, &saved), None);
}

/// A hot post's first-page copy put or changed without `due` (a rebuild
/// that covers what it was asked to) wakes nothing; with it, the fan-out
/// comes back to rebuild it ([`blog::store::first_pages`]).
#[test]
fn a_first_page_copy_comes_back_only_with_a_rebuild_due() {
    let mapping = deployed();
    for event in ["INSERT", "MODIFY"] {
        let mut due = synthetic(ItemType::FirstPage, event);
        assert!(mapping.filters.admits(&due), "{event}");
        assert_eq!(disagreement(&mapping, &due), None);
        if let Some(image) = due["dynamodb"]["NewImage"].as_object_mut() {
            image.remove("due");
        }
        assert!(!mapping.filters.admits(&due), "{event}");
        assert_eq!(disagreement(&mapping, &due), None);
    }
}

/// Every record a workload of every write leaves in the stream, with its
/// images as DynamoDB writes them: profiles created, renamed and erased;
/// posts written, edited, liked, commented and deleted; comments and likes
/// taken back; the fan-out's own copies, feed entries, rename progress and
/// erasure mark; parked records kept and replayed.
#[tokio::test]
async fn the_records_a_real_workload_streams_are_filtered_as_the_rules_decide() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let leaver = api.user("leaver").await;
    let post = api.post(&author, "kept", "text").await;
    let gone = api.post(&author, "deleted", "text").await;
    api.like(&fan, &post).await;
    api.like(&leaver, &post).await;
    let comment = api.comment(&fan, &post, "hello").await;
    api.comment(&leaver, &post, "bye").await;
    api.comment(&fan, &gone, "soon gone").await;
    api.settle(&mut poller).await;
    for (method, path, who, body) in [
        (
            "PUT",
            format!("/posts/{post}"),
            &author,
            Some(json!({"title": "edited", "content": "new text"})),
        ),
        ("DELETE", format!("/posts/{post}/likes"), &fan, None),
        (
            "DELETE",
            format!("/posts/{post}/comments/{comment}"),
            &fan,
            None,
        ),
        ("DELETE", format!("/posts/{gone}"), &author, None),
        ("DELETE", format!("/users/{leaver}"), &leaver, None),
    ] {
        let (status, answer) = api.call(method, &path, Some(who), body).await;
        assert!(status < 300, "{method} {path}: {status} {answer}");
    }
    api.rename(&fan, "fan_renamed").await;
    api.settle(&mut poller).await;

    // A parked record, kept and then taken back as replay does.
    let records = api.stream_records().await;
    let parked = ParkedRecordItem::new("shard", &records[0], "2026-01-01T00:00:00Z".into())
        .expect("a parked record");
    api.app.store.fanout().park(&parked).await.expect("park");
    api.app.store.admin().unpark(&parked).await.expect("unpark");
    api.settle(&mut poller).await;

    let records = api.stream_records().await;
    let mapping = deployed();
    let mut seen = BTreeSet::new();
    let mut disagreements = Vec::new();
    for record in &records {
        let json = serde_json::to_value(record).expect("a record as JSON");
        seen.insert((
            kind(&json),
            json["eventName"].as_str().unwrap_or_default().to_owned(),
        ));
        disagreements.extend(disagreement(&mapping, &json));
    }
    assert_eq!(disagreements, Vec::<String>::new());
    // The workload reached what it set out to: every kind of item and change
    // the product writes (comments and likes are never modified).
    let expected = [
        ("user", "INSERT"),
        ("user", "MODIFY"),
        ("user", "REMOVE"),
        ("username", "INSERT"),
        ("username", "REMOVE"),
        ("post", "INSERT"),
        ("post", "MODIFY"),
        ("post", "REMOVE"),
        ("postContent", "INSERT"),
        ("postContent", "MODIFY"),
        ("postContent", "REMOVE"),
        ("comment", "INSERT"),
        ("comment", "REMOVE"),
        ("like", "INSERT"),
        ("like", "REMOVE"),
        ("liked", "INSERT"),
        ("liked", "REMOVE"),
        ("feedEntry", "INSERT"),
        ("feedEntry", "MODIFY"),
        ("feedEntry", "REMOVE"),
        ("feedFloor", "INSERT"),
        ("feedFloor", "MODIFY"),
        ("renameProgress", "INSERT"),
        ("erasure", "INSERT"),
        ("erasure", "MODIFY"),
        ("parkedRecord", "INSERT"),
        ("parkedRecord", "REMOVE"),
    ];
    let missing: Vec<_> = expected
        .iter()
        .filter(|(k, e)| !seen.contains(&((*k).to_owned(), (*e).to_owned())))
        .collect();
    assert!(
        missing.is_empty(),
        "not in the stream: {missing:?}; seen {seen:?}"
    );
    assert!(
        !seen.iter().any(|(kind, _)| kind == "(untyped)"),
        "every image read as DynamoDB JSON, as the filters see it: {seen:?}"
    );
}

/// Parked records' own stream records wake nothing in whichever partition
/// they are (`PARKED#00`..`PARKED#15`, and the earlier version's single
/// `PARKED`): the filters and the rules read the item's type, never its key.
#[tokio::test]
async fn parked_records_are_ignored_in_every_partition() {
    use blog::keys::{PARKED_PARTITIONS, ParkedPartition};

    let api = TestApi::start().await;
    let author = api.user("author").await;
    api.post(&author, "parked", "text").await;
    let records = api.stream_records().await;
    let insert = records
        .iter()
        .find(|r| fanout::applies_to(r))
        .expect("the post's INSERT");
    // One record in each partition: sequence numbers tried until each
    // partition has one.
    let mut items: Vec<ParkedRecordItem> = Vec::new();
    let mut covered = BTreeSet::new();
    for n in 1_000_u64.. {
        if covered.len() == usize::from(PARKED_PARTITIONS) {
            break;
        }
        let mut record = insert.clone();
        record.change.sequence_number = Some(n.to_string());
        let item = ParkedRecordItem::new("shard", &record, "2026-01-01T00:00:00Z".into())
            .expect("a parked record");
        if covered.insert(item.partition()) {
            items.push(item);
        }
    }
    let legacy = ParkedRecordItem {
        legacy: true,
        ..items[0].clone()
    };
    assert_eq!(legacy.partition(), ParkedPartition::Legacy);
    let fanout_store = api.app.store.fanout();
    fanout_store.park_all(&items).await.expect("park");
    fanout_store
        .park(&legacy)
        .await
        .expect("park the legacy one");
    for item in items.iter().chain([&legacy]) {
        api.app.store.admin().unpark(item).await.expect("unpark");
    }

    let mapping = deployed();
    let mut seen = BTreeSet::new();
    for record in api.stream_records().await {
        let json = serde_json::to_value(&record).expect("a record as JSON");
        if kind(&json) != "parkedRecord" {
            continue;
        }
        let pk = json["dynamodb"]["Keys"]["PK"]["S"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let partition = ParkedPartition::of_pk(&pk).expect("a parked partition's key");
        assert!(
            !mapping.filters.admits(&json),
            "{pk}: the filters let it through"
        );
        assert!(!fanout::applies_to(&record), "{pk}: the rules apply to it");
        seen.insert((partition, record.event_name.clone()));
    }
    let expected: BTreeSet<_> = ParkedPartition::all()
        .flat_map(|p| [(p, "INSERT".to_owned()), (p, "REMOVE".to_owned())])
        .collect();
    assert_eq!(seen, expected, "every partition's put and delete, ignored");
}
