//! The route table and the function binaries describe the same API, and
//! nothing else lists routes (template.yaml's are held to the table by
//! template.rs).

use std::collections::{BTreeMap, BTreeSet};

use blog::{
    api::ErrorCode,
    routes::{ROUTES, Route},
};
use serde_json::Value;

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
    let (_, feed) = api.get_feed().await;
    assert_eq!(
        feed["items"][0]["likeCount"], 1,
        "the INSERT entered the feed, the MODIFY refreshed it"
    );
}

/// The error codes each route's function can answer, by function: what its
/// handler and the store calls it makes can fail with (`api::error` maps
/// each to its code), besides [`EVERY_ROUTE`]. Held to the code from both
/// sides: every error answer the API suite receives through
/// [`crate::support::TestApi`] is checked against it
/// ([`check_answer`]), and the test command fuzzes the running stack with
/// openapi.yaml (schemathesis: every status and body as documented). The
/// test below holds openapi.yaml to it.
fn route_codes(function: &str) -> &'static [ErrorCode] {
    use ErrorCode::*;
    match function {
        "create-user" => &[
            Unauthorized,
            BadJson,
            PayloadTooLarge,
            InvalidField,
            BadIdempotencyKey,
            UsernameTaken,
            ProfileExists,
            BeingErased,
            IdempotencyKeyInFlight,
            IdempotencyKeyReused,
            OutcomeUnknown,
        ],
        "update-user" => &[
            Unauthorized,
            BadId,
            Forbidden,
            BadJson,
            PayloadTooLarge,
            InvalidField,
            BadPrecondition,
            AccountErased,
            NotFound,
            PreconditionFailed,
            UsernameTaken,
            OutcomeUnknown,
        ],
        "get-user" | "get-post" => &[BadId, NotFound, BadPrecondition],
        "delete-user" => &[
            Unauthorized,
            BadId,
            Forbidden,
            BadJson,
            PayloadTooLarge,
            NotFound,
            OutcomeUnknown,
        ],
        "find-user" => &[MissingUsername, InvalidField, NotFound],
        "export-user" | "list-drafts" => &[
            Unauthorized,
            BadId,
            Forbidden,
            BadLimit,
            BadCursor,
            NotFound,
        ],
        "create-post" => &[
            Unauthorized,
            BadJson,
            PayloadTooLarge,
            InvalidField,
            BadIdempotencyKey,
            Forbidden,
            AccountErased,
            // Mentioning someone who blocks the author.
            Blocked,
            // A create sent again with its key after the post was deleted.
            NotFound,
            IdempotencyKeyInFlight,
            IdempotencyKeyReused,
            OutcomeUnknown,
        ],
        "update-post" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            InvalidField,
            BadPrecondition,
            AccountErased,
            Forbidden,
            Blocked,
            NotFound,
            PreconditionFailed,
            PostIsHot,
            OutcomeUnknown,
        ],
        "delete-post" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            BadPrecondition,
            AccountErased,
            Forbidden,
            NotFound,
            PreconditionFailed,
            OutcomeUnknown,
        ],
        // A user or tag with no posts (or no profile) has an empty list.
        "list-user-posts" | "list-tag-posts" => &[BadId, BadLimit, BadCursor],
        // The feed takes no cursor (400 `bad_cursor`).
        "get-feed" => &[BadLimit, BadCursor],
        "get-home" | "list-notifications" => &[Unauthorized, BadLimit, BadCursor],
        "mark-notifications-seen" => &[Unauthorized, BadJson, PayloadTooLarge, InvalidField],
        "create-comment" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            InvalidField,
            BadIdempotencyKey,
            Forbidden,
            AccountErased,
            // The post's author blocks the caller.
            Blocked,
            NotFound,
            IdempotencyKeyInFlight,
            IdempotencyKeyReused,
            OutcomeUnknown,
        ],
        // Not the comment's or the post's author; no profile (a like).
        "delete-comment" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            Forbidden,
            AccountErased,
            NotFound,
            OutcomeUnknown,
        ],
        // No profile; the post's author blocks the caller.
        "like-post" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            Forbidden,
            AccountErased,
            Blocked,
            NotFound,
            OutcomeUnknown,
        ],
        "unlike-post" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            AccountErased,
            NotFound,
            OutcomeUnknown,
        ],
        // A post's lists: 404 once it went back to a draft (a post that
        // does not exist has empty ones); a user's follows: 404 for no
        // such user.
        "list-comments" | "list-likes" | "list-followers" | "list-following" => {
            &[BadId, BadLimit, BadCursor, NotFound]
        }
        "get-feed-atom" => &[BadPrecondition],
        "list-user-posts-atom" | "list-tag-posts-atom" => {
            &[BadId, BadLimit, BadCursor, BadPrecondition]
        }
        "block-user" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            // Blocking yourself.
            InvalidField,
            Forbidden,
            AccountErased,
            NotFound,
            BlockLimit,
            OutcomeUnknown,
        ],
        "unblock-user" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            Forbidden,
            AccountErased,
            OutcomeUnknown,
        ],
        // The caller's own list: 404 without a profile.
        "list-blocks" => &[Unauthorized, BadLimit, BadCursor, NotFound],
        "follow-user" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            // Following yourself.
            InvalidField,
            Forbidden,
            AccountErased,
            NotFound,
            FollowingLimit,
            // The followed user blocks the caller.
            Blocked,
            OutcomeUnknown,
        ],
        "unfollow-user" => &[
            Unauthorized,
            BadId,
            BadJson,
            PayloadTooLarge,
            Forbidden,
            AccountErased,
            OutcomeUnknown,
        ],
        _ => &[],
    }
}

/// What every route can answer: each reads DynamoDB, which may stay busy
/// (503) or answer what the store cannot read (500).
const EVERY_ROUTE: [ErrorCode; 2] = [ErrorCode::Unavailable, ErrorCode::Internal];

/// Whether `route`'s function can answer `code`.
fn can_answer(route: &Route, code: ErrorCode) -> bool {
    EVERY_ROUTE.contains(&code) || route_codes(route.function).contains(&code)
}

/// An answer the API suite received, held to the table above: an error body
/// from a route's function has a code that route can answer, with that
/// code's status. (The gateway's own answers, `{"message"}`, have no code.)
pub fn check_answer(method: &str, path: &str, status: u16, body: &Value) {
    let Some(code) = body["error"]["code"].as_str() else {
        return;
    };
    let path = path.split('?').next().unwrap_or_default();
    let Some(route) = ROUTES
        .iter()
        .find(|r| r.method == method && local::local_gateway::path_params(r.path, path).is_some())
    else {
        return;
    };
    let known = ErrorCode::ALL.iter().find(|c| c.as_str() == code);
    let Some(&known) = known else {
        panic!("{method} {path} answered {status} with code {code:?}, which ErrorCode lacks");
    };
    assert_eq!(
        known.status().as_u16(),
        status,
        "{method} {path}: {code} has the status ErrorCode::status gives it"
    );
    assert!(
        can_answer(route, known),
        "{method} {path} ({}) answered {status} {code}, which contract.rs's route_codes \
         does not list for it: add it there, and its status to the route's responses in \
         openapi.yaml",
        route.function
    );
}

fn openapi() -> serde_yaml_ng::Value {
    let path = format!("{}/../openapi.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml_ng::from_str(&text).expect("openapi.yaml is YAML")
}

/// `value`, or what its `$ref` (`#/components/...`) names.
fn resolve<'a>(
    document: &'a serde_yaml_ng::Value,
    value: &'a serde_yaml_ng::Value,
) -> &'a serde_yaml_ng::Value {
    let Some(reference) = value.get("$ref").and_then(serde_yaml_ng::Value::as_str) else {
        return value;
    };
    let pointer = reference
        .strip_prefix("#/")
        .unwrap_or_else(|| panic!("a local $ref: {reference}"));
    let target = pointer.split('/').fold(document, |node, key| &node[key]);
    assert!(!target.is_null(), "{reference} names nothing");
    resolve(document, target)
}

/// Whether the response's JSON schema is the `Error` body, or one of its
/// `oneOf`s is.
fn carries_error_body(document: &serde_yaml_ng::Value, response: &serde_yaml_ng::Value) -> bool {
    const ERROR: &str = "#/components/schemas/Error";
    let schema = &resolve(document, response)["content"]["application/json"]["schema"];
    schema["$ref"].as_str() == Some(ERROR)
        || schema["oneOf"]
            .as_sequence()
            .is_some_and(|options| options.iter().any(|o| o["$ref"].as_str() == Some(ERROR)))
}

/// A generated client decodes every code the functions answer: openapi.yaml's
/// `Error.code` enum is exactly [`ErrorCode::ALL`] (whose macro names every
/// variant).
#[test]
fn openapi_lists_exactly_the_error_codes() {
    let document = openapi();
    let listed: Vec<&str> = document["components"]["schemas"]["Error"]["properties"]["error"]
        ["properties"]["code"]["enum"]
        .as_sequence()
        .expect("Error.code's enum")
        .iter()
        .map(|c| c.as_str().expect("a string"))
        .collect();
    let documented: BTreeSet<&str> = listed.iter().copied().collect();
    assert_eq!(documented.len(), listed.len(), "no code listed twice");
    let answered: BTreeSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        answered.len(),
        ErrorCode::ALL.len(),
        "no code's string twice"
    );
    assert_eq!(
        answered.difference(&documented).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "answered by the functions, missing from openapi.yaml's Error.code"
    );
    assert_eq!(
        documented.difference(&answered).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "in openapi.yaml's Error.code, answered by no function"
    );
}

/// Every route documents, with the `Error` body, the status of every code
/// it can answer; and every error status it documents is one it can answer.
#[test]
fn every_route_documents_the_status_of_every_code_it_answers() {
    let document = openapi();
    let mut missing = Vec::new();
    let mut unanswered = Vec::new();
    for route in &ROUTES {
        assert!(
            !route_codes(route.function).is_empty(),
            "{}: route_codes names what it can answer",
            route.function
        );
        let operation = &document["paths"][route.path][route.method.to_lowercase().as_str()];
        let responses = operation["responses"]
            .as_mapping()
            .unwrap_or_else(|| panic!("{} {}: responses", route.method, route.path));
        let documented: BTreeMap<u16, &serde_yaml_ng::Value> = responses
            .iter()
            .filter_map(|(status, response)| {
                let status = status.as_str()?.parse().ok()?;
                Some((status, response))
            })
            .collect();
        let codes = EVERY_ROUTE
            .iter()
            .chain(route_codes(route.function))
            .copied();
        let mut answerable = BTreeSet::new();
        for code in codes {
            let status = code.status().as_u16();
            answerable.insert(status);
            match documented.get(&status) {
                Some(response) if carries_error_body(&document, response) => {}
                _ => missing.push(format!(
                    "{} {}: {status} ({code})",
                    route.method, route.path
                )),
            }
        }
        for (status, response) in &documented {
            if *status >= 400
                && carries_error_body(&document, response)
                && !answerable.contains(status)
            {
                unanswered.push(format!("{} {}: {status}", route.method, route.path));
            }
        }
    }
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "codes a route answers whose status openapi.yaml does not document for it (with the Error body)"
    );
    assert_eq!(
        unanswered,
        Vec::<String>::new(),
        "error statuses openapi.yaml documents for a route that answers no code with it"
    );
}

/// docs/api.md's Errors paragraph names every code, with its status.
#[test]
fn the_api_page_names_every_error_code_with_its_status() {
    let path = format!("{}/../docs/api.md", env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let start = page
        .find("- **Errors**:")
        .expect("docs/api.md's Errors paragraph");
    let paragraph = &page[start..];
    let paragraph = &paragraph[..paragraph[2..]
        .find("\n- ")
        .map_or(paragraph.len(), |i| i + 2)];
    let words = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    for code in ErrorCode::ALL {
        let named = format!("`{}`", code.as_str());
        let at = words
            .find(&named)
            .unwrap_or_else(|| panic!("docs/api.md's Errors paragraph does not name {named}"));
        // The status is the last one named before it.
        let status = words[..at]
            .split(|c: char| !c.is_ascii_digit())
            .rfind(|n| n.len() == 3)
            .and_then(|n| n.parse::<u16>().ok());
        assert_eq!(
            status,
            Some(code.status().as_u16()),
            "docs/api.md names {named} after another status"
        );
    }
}
