//! C3 comment on a post, Q4 list a post's comments.

use futures::future::join_all;
use serde_json::{Value, json};

use crate::support::{TestApi, table_snapshot};

#[tokio::test]
async fn comments_count_on_the_post_and_list_oldest_first() {
    let api = TestApi::start().await;
    let author = api.user("poster").await;
    let reader = api.user("reader").await;
    let post = api.post(&author, "Discuss", "…").await;

    let mut ids = Vec::new();
    for (i, who) in [&reader, &author, &reader].into_iter().enumerate() {
        let (status, comment) = api
            .call(
                "POST",
                &format!("/posts/{post}/comments"),
                Some(who),
                Some(json!({ "content": format!("c{i}") })),
            )
            .await;
        assert_eq!(status, 201, "{comment}");
        assert_eq!(comment["postId"], json!(post));
        assert_eq!(comment["userId"], json!(who));
        assert_eq!(
            comment["username"],
            if who == &reader { "reader" } else { "poster" }
        );
        ids.push(comment["commentId"].clone());
    }
    assert_eq!(
        api.get(&format!("/posts/{post}")).await.1["commentCount"],
        3
    );

    let (status, first) = api.get(&format!("/posts/{post}/comments?limit=2")).await;
    assert_eq!(status, 200);
    let cursor = first["nextCursor"].as_str().unwrap_or_default().to_owned();
    let (_, second) = api
        .get(&format!("/posts/{post}/comments?limit=2&cursor={cursor}"))
        .await;
    assert_eq!(second["nextCursor"], Value::Null);
    let listed: Vec<Value> = [&first, &second]
        .iter()
        .flat_map(|page| page["items"].as_array().cloned().unwrap_or_default())
        .map(|c| c["commentId"].clone())
        .collect();
    assert_eq!(listed, ids, "oldest first");
    assert_eq!(first["items"][0]["content"], "c0");
}

#[tokio::test]
async fn a_comment_on_a_missing_post_writes_nothing() {
    let api = TestApi::start().await;
    let user = api.user("lost").await;
    let before = table_snapshot(&api).await;
    let missing = ulid::Ulid::generate();
    let (status, body) = api
        .call(
            "POST",
            &format!("/posts/{missing}/comments"),
            Some(&user),
            Some(json!({ "content": "hello?" })),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn commenting_needs_a_profile_and_valid_content() {
    let api = TestApi::start().await;
    let author = api.user("strict").await;
    let post = api.post(&author, "t", "c").await;
    let before = table_snapshot(&api).await;
    let path = format!("/posts/{post}/comments");
    let (status, _) = api
        .call(
            "POST",
            &path,
            Some("ghost"),
            Some(json!({ "content": "boo" })),
        )
        .await;
    assert_eq!(status, 403);
    for bad in [
        json!(""),
        json!("x".repeat(5_001)),
        json!("nul\u{0}"),
        json!(["list"]),
    ] {
        let (status, _) = api
            .call(
                "POST",
                &path,
                Some(&author),
                Some(json!({ "content": bad })),
            )
            .await;
        assert_eq!(status, 400, "{bad}");
    }
    assert_eq!(table_snapshot(&api).await, before);
    let (status, _) = api
        .call(
            "POST",
            &path,
            Some(&author),
            Some(json!({ "content": "x".repeat(5_000) })),
        )
        .await;
    assert_eq!(status, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_comments_are_all_counted() {
    let api = TestApi::start().await;
    let author = api.user("popular").await;
    let post = api.post(&author, "Hot", "take").await;
    let commenters = join_all((0..20).map(|i| api.user_named(format!("commenter{i}")))).await;
    let path = format!("/posts/{post}/comments");
    let statuses = join_all(commenters.iter().map(|who| async {
        api.call(
            "POST",
            &path,
            Some(who),
            Some(json!({ "content": "me too" })),
        )
        .await
        .0
    }))
    .await;
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    assert_eq!(
        api.get(&format!("/posts/{post}")).await.1["commentCount"],
        20
    );
    let (_, page) = api.get(&format!("{path}?limit=100")).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(20));
}
