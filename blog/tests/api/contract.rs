//! The route table, `cargo lambda watch`'s router and the function binaries
//! must describe the same API.

use std::collections::BTreeSet;

use blog::routes::ROUTES;

fn manifest(path: &str) -> toml::Table {
    let text = std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR")))
        .expect("read manifest");
    text.parse().expect("parse manifest")
}

#[test]
fn the_local_router_serves_exactly_the_contracts_routes() {
    let root = manifest("Cargo.toml");
    let router = root["workspace"]["metadata"]["lambda"]["watch"]["router"]
        .as_table()
        .expect("router");
    let mut local = BTreeSet::new();
    for (path, entries) in router {
        for entry in entries.as_array().expect("route list") {
            let method = entry["method"].as_str().expect("method");
            let function = entry["function"].as_str().expect("function");
            local.insert((method.to_owned(), path.clone(), function.to_owned()));
        }
    }
    let contract: BTreeSet<_> = ROUTES
        .iter()
        .map(|r| {
            (
                r.method.to_owned(),
                r.path.to_owned(),
                r.function.to_owned(),
            )
        })
        .collect();
    assert_eq!(local, contract);
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
