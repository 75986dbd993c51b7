//! The route table and the function binaries describe the same API, and
//! nothing else lists routes (template.yaml's are held to the table by
//! template.rs).

use std::collections::BTreeSet;

use blog::routes::ROUTES;

fn manifest(path: &str) -> toml::Table {
    let text = std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR")))
        .expect("read manifest");
    text.parse().expect("parse manifest")
}

/// template.yaml is the one list of routes: the local API Gateway reads it,
/// and `cargo lambda watch` routes nothing (a router in Cargo.toml would be
/// one more list to keep equal, and watch would serve requests without the
/// authorizer).
#[test]
fn no_second_list_of_routes_for_watch() {
    let root = manifest("Cargo.toml");
    let metadata = root["workspace"].get("metadata");
    assert!(
        metadata
            .and_then(|m| m.get("lambda"))
            .and_then(|l| l.get("watch"))
            .and_then(|w| w.get("router"))
            .is_none(),
        "Cargo.toml has a watch router"
    );
}

#[test]
fn every_function_has_a_binary() {
    let functions = manifest("functions/Cargo.toml");
    let bins: BTreeSet<&str> = functions["bin"]
        .as_array()
        .expect("bins")
        .iter()
        .filter_map(|b| b["name"].as_str())
        .collect();
    let functions: BTreeSet<&str> = blog::routes::functions().collect();
    assert_eq!(bins, functions);
}

#[test]
fn every_function_has_a_sample_event_for_its_route() {
    for route in ROUTES {
        let path = format!(
            "{}/../events/{}.json",
            env!("CARGO_MANIFEST_DIR"),
            route.function
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let event: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            event["routeKey"],
            format!("{} {}", route.method, route.path),
            "{path}"
        );
        let sub = &event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"];
        assert_eq!(
            sub.is_string(),
            route.needs_identity,
            "{path}: JWT claims on write routes only"
        );
        let request =
            lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(request.method().as_str(), route.method, "{path}");
    }
}

#[tokio::test]
async fn the_fan_out_sample_event_is_a_stream_batch_it_applies() {
    let path = format!("{}/../events/fan-out.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("events/fan-out.json");
    let event: aws_lambda_events::event::dynamodb::Event =
        serde_json::from_str(&text).expect("a DynamoDB stream event");
    assert!(
        event
            .records
            .iter()
            .all(|r| r.change.sequence_number.is_some())
    );
    let api = crate::support::TestApi::start().await;
    // The post it names, as create-post wrote it: the fan-out enters only a
    // post that exists.
    let store = &api.app.store;
    let post: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> =
        event.records[0].change.new_image.clone().into();
    store
        .client()
        .put_item()
        .table_name(store.table())
        .set_item(Some(post))
        .send()
        .await
        .expect("seed the post");
    let response = blog::fanout::handle(&api.app.store, event).await;
    assert!(response.batch_item_failures.is_empty());
    let (_, feed) = api.get("/feed").await;
    assert_eq!(
        feed["items"][0]["likeCount"], 1,
        "the INSERT entered the feed, the MODIFY refreshed it"
    );
}
