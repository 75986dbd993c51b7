//! Q6 the feed. The stream fan-out fills the feed partition; these tests put
//! feed entries in place as it does and check the read path and its limits.

use std::time::Duration;

use blog::{
    api::feed::{Clock, FeedCache},
    keys::{self, FEED_PK, PK, SK},
};
use serde_json::{Value, json};

use crate::support::{TestApi, post_id};

async fn put_feed_entry(api: &TestApi, post: &str, title: &str) {
    let store = &api.app.store;
    let entry = json!({
        PK: FEED_PK, SK: keys::feed_sk(&post_id(post)), "type": "feedEntry",
        "postId": post, "userId": "u1", "username": "writer", "title": title,
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
    assert_eq!(api.get_feed().await, (200, json!({ "items": [] })));
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
    let (status, page) = api.get_feed().await;
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

/// What a deployed `get-feed` instance does: one Query of the whole feed,
/// then every request for the cache's time to live (any limit) from what it
/// read, then one Query again. Every answer may be cached 5 s.
#[tokio::test]
async fn an_instance_serves_the_feed_it_read_until_its_time_to_live_passes() {
    let ttl = Duration::from_secs(3);
    let clock = Clock::manual();
    let api = TestApi::start_with_feed_cache(FeedCache::on(ttl, clock.clone())).await;
    let first = ulid::Ulid::generate().to_string();
    put_feed_entry(&api, &first, "first").await;
    api.meter.take();

    let get = |limit: u32| {
        let request = api.http.get(api.url(&format!("/feed?limit={limit}")));
        async move {
            let response = request.send().await.expect("send");
            let cache_control = response.headers()["cache-control"]
                .to_str()
                .expect("ascii")
                .to_owned();
            let body: Value = response.json().await.expect("json");
            let ids: Vec<String> = body["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["postId"].as_str().map(String::from))
                .collect();
            (ids, cache_control)
        }
    };
    let (ids, cache_control) = get(1).await;
    assert_eq!(ids, std::slice::from_ref(&first));
    assert_eq!(cache_control, "public, max-age=5");
    let read = api.meter.take();
    assert_eq!(read.len(), 1, "one Query: {read:?}");
    assert_eq!(read[0].operation, "Query");

    let second = ulid::Ulid::generate().to_string();
    put_feed_entry(&api, &second, "second").await;
    api.meter.take();
    // Within the time to live (its last millisecond): what the instance
    // read, at every limit, and no call to DynamoDB.
    clock.advance(ttl - Duration::from_millis(1));
    let (cached, _) = get(100).await;
    assert_eq!(
        cached,
        std::slice::from_ref(&first),
        "served from the cache"
    );
    assert_eq!(api.meter.count(), 0, "no call within the time to live");

    clock.advance(Duration::from_millis(1));
    assert_eq!(get(100).await.0, [second, first]);
    assert_eq!(api.meter.take().len(), 1, "one Query once it expired");
}

#[tokio::test]
async fn public_reads_may_be_cached_briefly_and_writes_and_errors_never() {
    let api = TestApi::start().await;
    let user = api.user("cache_reader").await;
    let post = api.post(&user, "cached", "content").await;
    let header = |method: &'static str, path: String, who: Option<String>| {
        let mut request = api
            .http
            .request(method.parse().expect("method"), api.url(&path));
        if let Some(who) = who {
            request = request
                .header(crate::support::JWT_SUB, who)
                .body(r#"{"content":"hi"}"#);
        }
        async move {
            let response = request.send().await.expect("send");
            (
                response.status().as_u16(),
                response.headers()["cache-control"]
                    .to_str()
                    .expect("ascii")
                    .to_owned(),
            )
        }
    };
    let shared = "public, max-age=0, s-maxage=5";
    for path in [
        format!("/users/{user}"),
        format!("/posts/{post}"),
        format!("/users/{user}/posts"),
        format!("/posts/{post}/comments"),
        format!("/posts/{post}/likes"),
    ] {
        assert_eq!(
            header("GET", path.clone(), None).await,
            (200, shared.into()),
            "{path}"
        );
    }
    assert_eq!(
        header("GET", "/feed".into(), None).await,
        (200, "public, max-age=5".into())
    );
    assert_eq!(
        header("POST", format!("/posts/{post}/comments"), Some(user)).await,
        (201, "no-store".into())
    );
    assert_eq!(
        header("GET", "/posts/01ARZ3NDEKTSV4RRFFQ69G5FAV".into(), None).await,
        (404, "no-store".into())
    );
}
