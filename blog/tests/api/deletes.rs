//! Deleting a post (C2 taken back): it disappears everywhere, its items go
//! page by page in the fan-out (resumably), the feed still shows its full
//! count, and no late stream record brings anything back.

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use futures::StreamExt;

use blog::{
    fanout,
    ids::{PostId, UserId},
    keys,
    store::deadline::Deadline,
};
use serde_json::{Value, json};

use crate::support::{TestApi, post_id, table_snapshot};

fn event(records: Vec<EventRecord>) -> Event {
    let mut event = Event::default();
    event.records = records;
    event
}

/// Every item of the post's partition.
async fn partition(api: &TestApi, post: &str) -> usize {
    let pk = keys::post_pk(&post_id(post));
    table_snapshot(api)
        .await
        .iter()
        .filter(|i| i.get(keys::PK).and_then(|v| v.as_s().ok()) == Some(&pk))
        .count()
}

#[tokio::test]
async fn a_deleted_post_disappears_everywhere() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let kept = api.post(&author, "Kept", "stays").await;
    let post = api.post(&author, "Deleted", "goes").await;
    api.like(&fan, &post).await;
    api.comment(&fan, &post, "soon gone").await;
    api.settle(&mut poller).await;
    assert_eq!(api.get_feed().await.1["items"][0]["postId"], json!(post));

    // Nobody else, and nobody unnamed, may; nothing changes.
    let before = table_snapshot(&api).await;
    let path = format!("/posts/{post}");
    for (who, expected) in [(Some(fan.as_str()), 403), (None, 401)] {
        let (status, body) = api.call("DELETE", &path, who, None).await;
        assert_eq!(status, expected, "{who:?}: {body}");
    }
    assert_eq!(table_snapshot(&api).await, before);

    let (status, body) = api.delete_post(&author, &post).await;
    assert_eq!((status, &body), (204, &Value::Null));
    assert_eq!(api.get_post(&post).await.0, 404);
    // Nothing more can be added to it.
    assert_eq!(api.like_post(&fan, &post).await.0, 404, "likes");
    assert_eq!(api.comment_on(&fan, &post, "late").await.0, 404, "comments");
    api.settle(&mut poller).await;

    let ids = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["postId"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(ids(&api.get_feed().await.1), std::slice::from_ref(&kept));
    assert_eq!(ids(&api.user_posts(&author).await.1), [kept]);
    assert_eq!(api.post_comments(&post).await.1["items"], json!([]));
    assert_eq!(api.post_likes(&post).await.1["items"], json!([]));
    assert_eq!(partition(&api, &post).await, 0, "nothing of it is left");
    let (status, body) = api.delete_post(&author, &post).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

#[tokio::test]
async fn deleting_posts_needs_a_post_and_a_valid_id() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let before = table_snapshot(&api).await;
    for (post, expected) in [
        (PostId::generate().to_string(), 404),
        ("not-an-id".to_owned(), 400),
    ] {
        let (status, body) = api.delete_post(&author, &post).await;
        assert_eq!(status, expected, "{post}: {body}");
    }
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn the_feed_still_shows_its_full_count_after_a_deletion() {
    // A feed of 10 keeps 2 in reserve and trims past 14.
    let api = TestApi::start_with_feed_capacity(10).await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let mut posts = Vec::new();
    for i in 0..15 {
        posts.push(api.post(&author, format!("post {i}"), "text").await);
        api.settle(&mut poller).await;
    }
    let newest = posts.pop().unwrap_or_default();
    assert_eq!(api.delete_post(&author, &newest).await.0, 204);
    api.settle(&mut poller).await;
    let feed = api.get_feed().await.1;
    let shown: Vec<&str> = feed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["postId"].as_str())
        .collect();
    let expected: Vec<&str> = posts.iter().rev().take(10).map(String::as_str).collect();
    assert_eq!(shown, expected, "the ten newest that exist");
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

#[tokio::test]
async fn thousands_of_items_go_over_several_short_invocations_and_nothing_comes_back() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let post = api.post(&author, "Popular", "text").await;
    api.settle(&mut poller).await;
    let post_id = PostId::parse(&post).expect("post id");
    let writer = UserId::parse(&author).expect("user id");
    let store = &api.app.store;
    futures::stream::iter(0..600)
        .for_each_concurrent(16, |i| {
            let (post_id, writer) = (&post_id, &writer);
            async move {
                store
                    .requests()
                    .create_comment(post_id, writer, &format!("comment {i}"))
                    .await
                    .expect("comment");
            }
        })
        .await;
    // What the fan-out has not seen yet: the comments' and the count's records.
    let late = api.stream_records().await;
    api.settle(&mut poller).await;

    assert_eq!(api.delete_post(&author, &post).await.0, 204);
    let records = api.stream_records().await;
    let removal: Vec<EventRecord> = records
        .into_iter()
        .filter(|r| r.event_name == "REMOVE" && fanout::applies_to(r))
        .collect();
    assert_eq!(removal.len(), 1, "the post's REMOVE");
    // Each invocation's deadline comes after two pages of 100: the walk
    // pauses, reports the record, and goes on from what is left when it
    // comes again. The post's content is left to the walk too: 601 items.
    let mut invocations = 0;
    loop {
        invocations += 1;
        assert!(invocations < 200, "the walk never finished");
        let deadline = Deadline::after_checks(1);
        let response = fanout::handle_until(&api.app.store, event(removal.clone()), deadline).await;
        let left = partition(&api, &post).await;
        if response.batch_item_failures.is_empty() {
            assert_eq!(left, 0);
            break;
        }
        assert_eq!(left, 601 - 200 * invocations.min(3), "two pages a time");
    }
    // Three invocations of 200, and a fourth that deletes the last one.
    assert_eq!(invocations, 4);
    assert_eq!(partition(&api, &post).await, 0);

    // Every record from before the deletion, delivered late and again, and
    // the REMOVE again: nothing comes back.
    let response = fanout::handle(&api.app.store, event(late)).await;
    assert!(response.batch_item_failures.is_empty());
    let response = fanout::handle(&api.app.store, event(removal)).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(partition(&api, &post).await, 0);
    assert_eq!(api.get_feed().await.1["items"], json!([]));
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

#[tokio::test]
async fn a_late_insert_of_a_deleted_post_does_not_put_it_back_in_the_feed() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let post = api.post(&author, "Gone before its fan-out", "text").await;
    let records = api.stream_records().await;
    assert_eq!(api.delete_post(&author, &post).await.0, 204);
    // The INSERT comes only now (a replay of a parked record, say).
    let response = fanout::handle(&api.app.store, event(records)).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(api.get_feed().await.1["items"], json!([]));
    let mut poller = api.poller();
    api.settle(&mut poller).await;
    assert_eq!(api.get_feed().await.1["items"], json!([]));
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

#[tokio::test]
async fn the_audit_finds_and_removes_what_a_deleted_post_left() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "Leftovers", "text").await;
    api.like(&fan, &post).await;
    // The post deleted, and its fan-out never run.
    assert_eq!(api.delete_post(&author, &post).await.0, 204);
    assert_eq!(
        partition(&api, &post).await,
        2,
        "the content and the like (its mark is in its liker's partition)"
    );
    assert!(crate::hot::marks_of(&api, &post).await.contains_key(&fan));
    let found = api.audit(false).await.findings;
    assert!(
        found
            .iter()
            .any(|f| matches!(f, blog::audit::Finding::Orphans { items: 2, .. })),
        "{found:#?}"
    );
    api.audit(true).await;
    assert_eq!(partition(&api, &post).await, 0);
    assert!(
        crate::hot::marks_of(&api, &post).await.is_empty(),
        "the like's mark went with it"
    );
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}
