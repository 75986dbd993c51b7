//! C3 comment on a post, Q4 list a post's comments.

use futures::future::join_all;
use serde_json::{Value, json};

use crate::{
    scene::{Cast, Scene},
    support::{TestApi, table_snapshot},
};

#[tokio::test]
async fn comments_count_on_the_post_and_list_oldest_first() {
    let api = TestApi::start().await;
    let author = api.user("poster").await;
    let reader = api.user("reader").await;
    let post = api.post(&author, "Discuss", "…").await;

    let mut ids = Vec::new();
    for (i, who) in [&reader, &author, &reader].into_iter().enumerate() {
        let (status, comment) = api.comment_on(who, &post, format!("c{i}")).await;
        assert_eq!(status, 201, "{comment}");
        assert_eq!(comment["postId"], json!(post));
        assert_eq!(comment["userId"], json!(who));
        assert_eq!(
            comment["username"],
            if who == &reader { "reader" } else { "poster" }
        );
        ids.push(comment["commentId"].clone());
    }
    assert_eq!(api.get_post(&post).await.1["commentCount"], 3);

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
    let (status, body) = api.comment_on(&user, &missing.to_string(), "hello?").await;
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
    let (status, _) = api.comment_on("ghost", &post, "boo").await;
    assert_eq!(status, 403);
    for bad in [
        json!(""),
        json!("x".repeat(5_001)),
        json!("nul\u{0}"),
        json!(["list"]),
    ] {
        let (status, _) = api.comment_on(&author, &post, bad.clone()).await;
        assert_eq!(status, 400, "{bad}");
    }
    assert_eq!(table_snapshot(&api).await, before);
    let (status, _) = api.comment_on(&author, &post, "x".repeat(5_000)).await;
    assert_eq!(status, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_comments_are_all_counted() {
    let api = TestApi::start().await;
    let cast = Cast {
        author: "popular",
        title: "Hot",
        content: "take",
        crowd: "commenter",
        width: 1,
    };
    let Scene {
        post,
        users: commenters,
        ..
    } = Scene::new(&api, 20, cast).await;
    let path = format!("/posts/{post}/comments");
    let statuses = join_all(
        commenters
            .iter()
            .map(|who| async { api.comment_on(who, &post, "me too").await.0 }),
    )
    .await;
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    assert_eq!(api.get_post(&post).await.1["commentCount"], 20);
    let (_, page) = api.get(&format!("{path}?limit=100")).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(20));
}

#[tokio::test]
async fn a_comment_is_deleted_by_its_author_or_the_posts_and_by_no_one_else() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let commenter = api.user("commenter").await;
    let other = api.user("other").await;
    let post = api.post(&author, "Talk", "about it").await;
    let path = format!("/posts/{post}/comments");
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(api.comment(&commenter, &post, &format!("c{i}")).await);
    }
    api.settle(&mut poller).await;
    assert_eq!(api.get_feed().await.1["items"][0]["commentCount"], 3);

    // Someone else: 403, and nothing changes.
    let before = table_snapshot(&api).await;
    let first = format!("{path}/{}", ids[0]);
    for (who, expected) in [
        (Some(other.as_str()), 403),
        (Some("no-profile"), 403),
        (None, 401),
    ] {
        let (status, body) = api.call("DELETE", &first, who, None).await;
        assert_eq!(status, expected, "{who:?}: {body}");
        assert!(body["error"]["code"].is_string(), "{body}");
    }
    assert_eq!(table_snapshot(&api).await, before);

    // Its author, then the post's author.
    let (status, body) = api.take_back_comment(&commenter, &post, &ids[0]).await;
    assert_eq!((status, &body), (204, &Value::Null));
    assert_eq!(api.take_back_comment(&author, &post, &ids[1]).await.0, 204);
    // Gone: a second deletion is a 404.
    let (status, body) = api.take_back_comment(&commenter, &post, &ids[0]).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );

    api.settle(&mut poller).await;
    assert_eq!(api.get_post(&post).await.1["commentCount"], 1);
    let listed = api.get(&path).await.1;
    let left: Vec<&str> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["commentId"].as_str())
        .collect();
    assert_eq!(left, [ids[2].as_str()]);
    assert_eq!(api.get_feed().await.1["items"][0]["commentCount"], 1);
    assert_eq!(
        api.user_posts(&author).await.1["items"][0]["commentCount"],
        1
    );
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

#[tokio::test]
async fn deleting_a_comment_that_is_not_there_is_a_404_and_bad_ids_a_400() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let post = api.post(&author, "Talk", "about it").await;
    let before = table_snapshot(&api).await;
    let missing = blog::ids::CommentId::generate();
    let nowhere = blog::ids::PostId::generate();
    let (missing, nowhere) = (missing.to_string(), nowhere.to_string());
    for (on, comment, expected) in [
        (post.as_str(), missing.as_str(), 404),
        (&nowhere, &missing, 404),
        (&post, "not-an-id", 400),
        ("not-an-id", &missing, 400),
    ] {
        let (status, body) = api.take_back_comment(&author, on, comment).await;
        assert_eq!(status, expected, "{on}/comments/{comment}: {body}");
    }
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn concurrent_comments_and_deletions_leave_the_count_exact() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let commenter = api.user("commenter").await;
    let post = api.post(&author, "Busy", "thread").await;
    let path = format!("/posts/{post}/comments");
    let ids: Vec<String> = join_all((0..10).map(|i| {
        let (api, commenter, post) = (&api, &commenter, &post);
        async move { api.comment(commenter, post, &format!("c{i}")).await }
    }))
    .await;
    // Each of the first five deleted twice at once (by both who may), while
    // five more comments are made.
    let deletions = ids[..5].iter().flat_map(|one| {
        [
            api.take_back_comment(&commenter, &post, one),
            api.take_back_comment(&author, &post, one),
        ]
    });
    let more = (0..5).map(|i| api.comment_on(&commenter, &post, format!("m{i}")));
    let (deleted, made) = futures::join!(join_all(deletions), join_all(more));
    let statuses: Vec<u16> = deleted.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 204).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 404).count(),
        5,
        "{statuses:?}"
    );
    assert!(made.iter().all(|(s, _)| *s == 201));
    assert_eq!(api.get_post(&post).await.1["commentCount"], 10);
    let listed = api.get(&format!("{path}?limit=100")).await.1;
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(10));
}
