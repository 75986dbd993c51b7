//! C4 like a post, Q5 list a post's likes.

use futures::future::join_all;
use serde_json::{Value, json};

use crate::support::{TestApi, table_snapshot};

#[tokio::test]
async fn a_like_is_unique_per_user_and_counted_once() {
    let api = TestApi::start().await;
    let author = api.user("liked").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "Like me", "please").await;
    let path = format!("/posts/{post}/likes");

    let (status, like) = api.call("POST", &path, Some(&fan), None).await;
    assert_eq!(status, 201, "{like}");
    assert_eq!(like["postId"], json!(post));
    assert_eq!(
        (like["userId"].as_str(), like["username"].as_str()),
        (Some(fan.as_str()), Some("fan"))
    );

    let before = table_snapshot(&api).await;
    let (status, again) = api.call("POST", &path, Some(&fan), Some(json!({}))).await;
    assert_eq!(status, 200, "liking twice returns the existing like");
    assert_eq!(again, like);
    assert_eq!(table_snapshot(&api).await, before, "and writes nothing");
    assert_eq!(api.get(&format!("/posts/{post}")).await.1["likeCount"], 1);
}

#[tokio::test]
async fn likes_list_newest_first_page_by_page() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let post = api.post(&author, "t", "c").await;
    let path = format!("/posts/{post}/likes");
    let mut likers = Vec::new();
    for i in 0..5 {
        let who = api.user(&format!("liker{i}")).await;
        assert_eq!(api.call("POST", &path, Some(&who), None).await.0, 201);
        likers.push(json!(who));
    }
    likers.reverse();

    let mut seen = Vec::new();
    let mut query = String::from("?limit=2");
    loop {
        let (status, page) = api.get(&format!("{path}{query}")).await;
        assert_eq!(status, 200);
        seen.extend(
            page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| l["userId"].clone()),
        );
        match &page["nextCursor"] {
            Value::String(c) => query = format!("?limit=2&cursor={c}"),
            _ => break,
        }
    }
    assert_eq!(seen, likers, "newest first, each once");
    assert_eq!(api.get(&format!("/posts/{post}")).await.1["likeCount"], 5);

    // A cursor of this post's likes means nothing for its comments.
    let (_, page) = api.get(&format!("{path}?limit=1")).await;
    let cursor = page["nextCursor"].as_str().unwrap_or_default();
    let (status, _) = api
        .get(&format!("/posts/{post}/comments?cursor={cursor}"))
        .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn liking_a_missing_post_writes_nothing() {
    let api = TestApi::start().await;
    let fan = api.user("eager").await;
    let before = table_snapshot(&api).await;
    let (status, _) = api
        .call(
            "POST",
            &format!("/posts/{}/likes", ulid::Ulid::generate()),
            Some(&fan),
            None,
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = api
        .call("POST", "/posts/not-a-ulid/likes", Some(&fan), None)
        .await;
    assert_eq!(status, 400);
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn liking_needs_an_identity_a_profile_and_no_stray_fields() {
    let api = TestApi::start().await;
    let author = api.user("someone").await;
    let post = api.post(&author, "t", "c").await;
    let path = format!("/posts/{post}/likes");
    let before = table_snapshot(&api).await;
    assert_eq!(api.call("POST", &path, None, None).await.0, 401);
    assert_eq!(
        api.call("POST", &path, Some("no-profile"), None).await.0,
        403
    );
    assert_eq!(
        api.call("POST", &path, Some(&author), Some(json!({ "stars": 5 })))
            .await
            .0,
        400
    );
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_likes_and_repeats_are_counted_exactly() {
    let api = TestApi::start().await;
    let author = api.user("hot").await;
    let post = api.post(&author, "Hot post", "everyone likes it").await;
    let path = format!("/posts/{post}/likes");
    let fans = join_all((0..30).map(|i| api.user_named(format!("fan{i}")))).await;
    // Every fan likes twice, all at once.
    let results = join_all(
        fans.iter()
            .chain(fans.iter())
            .map(|who| async { api.call("POST", &path, Some(who), None).await.0 }),
    )
    .await;
    assert_eq!(
        results.iter().filter(|s| **s == 201).count(),
        30,
        "{results:?}"
    );
    assert_eq!(
        results.iter().filter(|s| **s == 200).count(),
        30,
        "{results:?}"
    );
    assert_eq!(api.get(&format!("/posts/{post}")).await.1["likeCount"], 30);
    let (_, page) = api.get(&format!("{path}?limit=100")).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(30));
}
