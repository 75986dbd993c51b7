//! `GET /users/{userId}/export`: everything a user wrote, page by page, in
//! full, for the user alone, in a bounded number of calls per page.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::TestApi;

/// Follows `nextCursor` from the first page to the last, `limit` at a time,
/// and returns each page's body (every one asserted 200).
async fn all_pages(api: &TestApi, user: &str, limit: usize) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/users/{user}/export?limit={limit}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, body) = api.call("GET", &path, Some(user), None).await;
        assert_eq!(status, 200, "{path}: {body}");
        cursor = body["nextCursor"].as_str().map(str::to_owned);
        pages.push(body);
        if cursor.is_none() {
            return pages;
        }
        assert!(pages.len() < 100, "the export never ends");
    }
}

#[tokio::test]
async fn an_export_holds_everything_the_user_wrote_in_full_and_nothing_else() {
    let api = TestApi::start().await;
    let me = api.user("exporter").await;
    let other = api.user("bystander").await;
    let long = "x".repeat(30_000);
    let mine = [
        api.post(&me, "first", &long).await,
        api.post(&me, "second", "short").await,
        api.post(&me, "third", "more").await,
    ];
    let theirs = api.post(&other, "theirs", "not mine").await;
    let my_comment = api.comment(&me, &theirs, "my comment").await;
    api.comment(&other, &mine[0], "their comment").await;
    api.like(&me, &theirs).await;
    api.like(&me, &mine[1]).await;
    api.like(&other, &mine[0]).await;

    for limit in [1, 2, 25] {
        let pages = all_pages(&api, &me, limit).await;
        assert_eq!(pages.len(), 6_usize.div_ceil(limit), "limit {limit}");
        let mut posts = BTreeSet::new();
        let mut comments = Vec::new();
        let mut likes = BTreeSet::new();
        for page in &pages {
            assert_eq!(page["profile"]["userId"], json!(me));
            assert_eq!(page["profile"]["username"], json!("exporter"));
            let items = page["items"].as_array().expect("items");
            assert!(items.len() <= limit);
            for item in items {
                if let Some(post) = item.get("post") {
                    assert_eq!(post["userId"], json!(me));
                    posts.insert(post["postId"].as_str().expect("id").to_owned());
                    if post["postId"] == json!(mine[0]) {
                        assert_eq!(post["content"], json!(long), "the full content");
                        assert_eq!(
                            (post["commentCount"].clone(), post["likeCount"].clone()),
                            (json!(1), json!(1))
                        );
                    }
                } else if let Some(comment) = item.get("comment") {
                    comments.push((
                        comment["commentId"].clone(),
                        comment["postId"].clone(),
                        comment["content"].clone(),
                    ));
                } else if let Some(like) = item.get("like") {
                    assert_eq!(like["userId"], json!(me));
                    likes.insert(like["postId"].as_str().expect("id").to_owned());
                } else {
                    panic!("unknown item {item}");
                }
            }
        }
        assert_eq!(posts, mine.iter().cloned().collect::<BTreeSet<_>>());
        assert_eq!(
            comments,
            vec![(json!(my_comment), json!(theirs), json!("my comment"))]
        );
        assert_eq!(likes, BTreeSet::from([theirs.clone(), mine[1].clone()]));
    }
}

#[tokio::test]
async fn only_the_user_may_export_and_a_page_is_three_calls() {
    let api = TestApi::start().await;
    let me = api.user("private").await;
    let other = api.user("nosy").await;
    let post = api.post(&me, "p", "c").await;
    api.comment(&me, &post, "c").await;
    let path = format!("/users/{me}/export");
    assert_eq!(api.call("GET", &path, None, None).await.0, 401);
    assert_eq!(api.call("GET", &path, Some(&other), None).await.0, 403);
    let nobody = "user-without-a-profile";
    let (status, _) = api
        .call(
            "GET",
            &format!("/users/{nobody}/export"),
            Some(nobody),
            None,
        )
        .await;
    assert_eq!(status, 404);
    for bad in ["limit=0", "limit=26", "limit=x", "cursor=garbage"] {
        let (status, body) = api
            .call("GET", &format!("{path}?{bad}"), Some(&me), None)
            .await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // A cursor of another user's export is refused.
    for i in 0..2 {
        api.post(&other, format!("theirs {i}"), "c").await;
    }
    let (_, first) = api
        .call(
            "GET",
            &format!("/users/{other}/export?limit=1"),
            Some(&other),
            None,
        )
        .await;
    let cursor = first["nextCursor"].as_str().expect("a second page");
    let (status, _) = api
        .call("GET", &format!("{path}?cursor={cursor}"), Some(&me), None)
        .await;
    assert_eq!(status, 400);

    // A page: GetItem the profile, Query GSI1, one BatchGetItem.
    api.meter.take();
    let (status, body) = api
        .call("GET", &format!("{path}?limit=25"), Some(&me), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["items"].as_array().map(Vec::len), Some(2));
    let operations: Vec<String> = api.meter.take().into_iter().map(|c| c.operation).collect();
    assert_eq!(operations, ["GetItem", "Query", "BatchGetItem"]);
}
