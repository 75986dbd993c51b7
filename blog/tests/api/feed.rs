//! Q6 the feed. The stream fan-out fills the feed partition; these tests put
//! feed entries in place as it does and check the read path and its limits.

use serde_json::{Value, json};

use crate::support::TestApi;

async fn put_feed_entry(api: &TestApi, post_id: &str, title: &str) {
    let store = &api.app.store;
    let entry = json!({
        "PK": "FEED", "SK": format!("POST#{post_id}"), "type": "feedEntry",
        "postId": post_id, "userId": "u1", "username": "writer", "title": title,
        "summary": "s", "commentCount": 2, "likeCount": 3,
        "createdAt": "2026-01-01T00:00:00.000Z", "version": 1,
    });
    let item = serde_dynamo::to_item(entry).expect("item");
    store
        .client()
        .put_item()
        .table_name(store.table())
        .set_item(Some(item))
        .send()
        .await
        .expect("put feed entry");
}

#[tokio::test]
async fn an_empty_feed_is_an_empty_list() {
    let api = TestApi::start().await;
    assert_eq!(api.get("/feed").await, (200, json!({ "items": [] })));
}

#[tokio::test]
async fn the_feed_lists_newest_first_up_to_the_limit() {
    let api = TestApi::start().await;
    let mut ids: Vec<String> = (0..25)
        .map(|_| ulid::Ulid::generate().to_string())
        .collect();
    ids.sort();
    for (i, id) in ids.iter().enumerate() {
        put_feed_entry(&api, id, &format!("title {i}")).await;
    }
    ids.reverse();
    let listed = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["postId"].as_str().map(String::from))
            .collect()
    };
    let (status, page) = api.get("/feed").await;
    assert_eq!(status, 200);
    assert_eq!(listed(&page), ids[..20], "default limit 20");
    assert_eq!(page["items"][0]["title"], "title 24");
    assert_eq!(page["items"][0]["likeCount"], 3);
    assert!(page["items"][0].get("content").is_none(), "short form only");
    assert_eq!(listed(&api.get("/feed?limit=5").await.1), ids[..5]);
    assert_eq!(listed(&api.get("/feed?limit=100").await.1), ids);
}

#[tokio::test]
async fn the_feed_refuses_bad_limits_and_cursors() {
    let api = TestApi::start().await;
    for bad in [
        "limit=0",
        "limit=101",
        "limit=-1",
        "limit=abc",
        "limit=",
        "cursor=abc",
    ] {
        let (status, body) = api.get(&format!("/feed?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
}
