//! The audit finds every denormalised value that disagrees with its source,
//! repairs it, and then finds nothing.

use aws_sdk_dynamodb::types::AttributeValue;
use blog::audit::Finding;
use serde_json::{Value, json};

use crate::support::TestApi;

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

/// Writes straight to the table, as a bug or a lost stream record would.
async fn corrupt(api: &TestApi, pk: &str, sk: &str, set: &str, value: AttributeValue) {
    let store = &api.app.store;
    store
        .client()
        .update_item()
        .table_name(store.table())
        .key("PK", s(pk))
        .key("SK", s(sk))
        .update_expression(format!("SET {set} = :v"))
        .expression_attribute_values(":v", value)
        .send()
        .await
        .expect("corrupt");
}

#[tokio::test]
async fn the_audit_finds_and_repairs_every_stale_copy() {
    let api = TestApi::start_with_feed_capacity(3).await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let mut posts = Vec::new();
    for i in 0..5 {
        posts.push(api.post(&author, format!("post {i}"), "text").await);
    }
    let newest = posts[4].clone();
    api.call("POST", &format!("/posts/{newest}/likes"), Some(&fan), None)
        .await;
    let (_, comment) = api
        .call(
            "POST",
            &format!("/posts/{newest}/comments"),
            Some(&fan),
            Some(json!({ "content": "hi" })),
        )
        .await;
    api.settle(&mut poller).await;
    let clean = api.app.store.audit(false).await.expect("audit");
    assert_eq!(
        clean.findings,
        vec![],
        "a settled table has nothing to repair"
    );
    assert!(clean.items_read > 10);

    // Six kinds of damage.
    let comment_sk = format!(
        "COMMENT#{}",
        comment["commentId"].as_str().unwrap_or_default()
    );
    corrupt(
        &api,
        &format!("POST#{newest}"),
        "POST",
        "likeCount",
        AttributeValue::N("7".into()),
    )
    .await;
    corrupt(
        &api,
        &format!("POST#{newest}"),
        &comment_sk,
        "username",
        s("ghost"),
    )
    .await;
    corrupt(
        &api,
        "FEED",
        &format!("POST#{}", posts[3]),
        "title",
        s("tampered"),
    )
    .await;
    let store = &api.app.store;
    store
        .client()
        .delete_item()
        .table_name(store.table())
        .key("PK", s("FEED"))
        .key("SK", s(&format!("POST#{}", posts[2])))
        .send()
        .await
        .expect("delete");
    // An old post back in the feed.
    let old = &posts[0];
    let entry = json!({
        "PK": "FEED", "SK": format!("POST#{old}"), "type": "feedEntry", "postId": old, "userId": author,
        "username": "author", "title": "post 0", "summary": "text", "commentCount": 0, "likeCount": 0,
        "createdAt": "2026-01-01T00:00:00.000Z", "version": 1,
    });
    let put = store.client().put_item().table_name(store.table());
    put.set_item(Some(serde_dynamo::to_item(entry).expect("item")))
        .send()
        .await
        .expect("put");
    // And a floor above a post the feed shows: it could keep a post out.
    corrupt(&api, "FEED", "FLOOR", "floorPostId", s(&posts[3])).await;

    let found = api.app.store.audit(false).await.expect("audit").findings;
    let kinds: Vec<String> = found
        .iter()
        .map(|f| {
            format!("{f:?}")
                .split([' ', '{'])
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(found.len(), 6, "{found:#?}");
    for kind in [
        "Count",
        "Username",
        "StaleFeedEntry",
        "MissingFeedEntry",
        "ExtraFeedEntry",
        "Floor",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    assert!(found.iter().any(|f| matches!(
        f,
        Finding::Count {
            stored: 7,
            actual: 1,
            ..
        }
    )));

    let repaired = api.app.store.audit(true).await.expect("repair");
    assert_eq!(repaired.repaired, 6);
    let after = api.app.store.audit(true).await.expect("audit again");
    assert_eq!(
        (after.findings, after.repaired),
        (vec![], 0),
        "repairing is idempotent"
    );

    // And the API shows the truth again, after the fan-out has seen the repairs.
    api.settle(&mut poller).await;
    assert_eq!(
        api.app.store.audit(false).await.expect("audit").findings,
        vec![]
    );
    assert_eq!(api.get(&format!("/posts/{newest}")).await.1["likeCount"], 1);
    let (_, comments) = api.get(&format!("/posts/{newest}/comments")).await;
    assert_eq!(comments["items"][0]["username"], "fan");
    let (_, feed) = api.get("/feed").await;
    let listed: Vec<&Value> = feed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| &p["postId"])
        .collect();
    assert_eq!(
        listed,
        [&json!(posts[4]), &json!(posts[3]), &json!(posts[2])]
    );
    assert_eq!(feed["items"][1]["title"], "post 3");
}
