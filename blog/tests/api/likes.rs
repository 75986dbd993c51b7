//! C4 like a post, Q5 list a post's likes.

use blog::keys::{FEED_PK, PK};
use futures::future::join_all;
use serde_json::{Value, json};

use crate::{
    requests::until_answered,
    scene::{Cast, Scene},
    support::{TestApi, table_snapshot},
};

#[tokio::test]
async fn a_like_is_unique_per_user_and_counted_once() {
    let api = TestApi::start().await;
    let author = api.user("liked").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "Like me", "please").await;
    let path = format!("/posts/{post}/likes");

    let (status, like) = api.like_post(&fan, &post).await;
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
    assert_eq!(api.get_post(&post).await.1["likeCount"], 1);
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
        api.like(&who, &post).await;
        likers.push(json!(who));
    }
    likers.reverse();

    let listed = api.list(format!("{path}?limit=2")).items().await;
    let seen: Vec<Value> = listed.iter().map(|l| l["userId"].clone()).collect();
    assert_eq!(seen, likers, "newest first, each once");
    assert_eq!(api.get_post(&post).await.1["likeCount"], 5);

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
        .like_post(&fan, &ulid::Ulid::generate().to_string())
        .await;
    assert_eq!(status, 404);
    let (status, _) = api.like_post(&fan, "not-a-ulid").await;
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
    assert_eq!(api.like_post("no-profile", &post).await.0, 403);
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
    let cast = Cast {
        author: "hot",
        title: "Hot post",
        content: "everyone likes it",
        crowd: "fan",
        width: 1,
    };
    let Scene {
        post, users: fans, ..
    } = Scene::new(&api, 30, cast).await;
    let path = format!("/posts/{post}/likes");
    // Every fan likes twice, all at once: 60 transactions on one post item.
    // Under that much conflict a like may run out of the store's retries and
    // answer 503 (nothing written), as on DynamoDB; its client then sends it
    // again, as a client does.
    let results = join_all(
        fans.iter()
            .chain(fans.iter())
            .map(|who| async { until_answered(|| api.like_post(who, &post)).await.0 }),
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
    assert_eq!(api.get_post(&post).await.1["likeCount"], 30);
    let (_, page) = api.get(&format!("{path}?limit=100")).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(30));
}

#[tokio::test]
async fn a_like_taken_back_is_gone_everywhere_and_a_like_again_counts_again() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "Like me", "please").await;
    let path = format!("/posts/{post}/likes");
    let before_like = table_snapshot(&api).await;
    api.like(&fan, &post).await;
    api.settle(&mut poller).await;
    assert_eq!(api.get_feed().await.1["items"][0]["likeCount"], 1);

    let (status, body) = api.unlike(&fan, &post).await;
    assert_eq!((status, &body), (204, &Value::Null));
    api.settle(&mut poller).await;
    assert_eq!(api.get_post(&post).await.1["likeCount"], 0);
    assert_eq!(api.get(&path).await.1["items"], json!([]));
    assert_eq!(api.get_feed().await.1["items"][0]["likeCount"], 0);
    assert_eq!(api.user_posts(&author).await.1["items"][0]["likeCount"], 0);
    // Nothing of the like is left: the table differs from before the like
    // only by the post's version and the feed's copy of it.
    let strip =
        |rows: Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>| {
            rows.into_iter()
                .filter(|r| {
                    r.get(PK)
                        .and_then(|v| v.as_s().ok())
                        .is_none_or(|pk| pk != FEED_PK)
                })
                .map(|mut r| {
                    r.remove("version");
                    r
                })
                .collect::<Vec<_>>()
        };
    assert_eq!(strip(table_snapshot(&api).await), strip(before_like));

    // Taking back twice is taking back once.
    let settled = table_snapshot(&api).await;
    assert_eq!(api.unlike(&fan, &post).await.0, 204);
    assert_eq!(table_snapshot(&api).await, settled, "and writes nothing");

    // A like after taking back counts again.
    assert_eq!(api.like_post(&fan, &post).await.0, 201);
    assert_eq!(api.get_post(&post).await.1["likeCount"], 1);
}

#[tokio::test]
async fn taking_back_touches_only_the_callers_like_and_needs_a_post_and_an_identity() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let other = api.user("other").await;
    let post = api.post(&author, "Like me", "please").await;
    let path = format!("/posts/{post}/likes");
    api.like(&fan, &post).await;
    let before = table_snapshot(&api).await;
    for (who, path, expected) in [
        (Some(other.as_str()), path.clone(), 204),
        (Some("no-profile"), path.clone(), 204),
        (None, path.clone(), 401),
        (
            Some(fan.as_str()),
            format!("/posts/{}/likes", blog::ids::PostId::generate()),
            404,
        ),
        (Some(fan.as_str()), "/posts/not-an-id/likes".to_owned(), 400),
    ] {
        let (status, body) = api.call("DELETE", &path, who, None).await;
        assert_eq!(status, expected, "{who:?} {path}: {body}");
    }
    let (status, _) = api
        .call("DELETE", &path, Some(&fan), Some(json!({ "extra": 1 })))
        .await;
    assert_eq!(status, 400, "a body with fields");
    assert_eq!(
        table_snapshot(&api).await,
        before,
        "the fan's like is untouched"
    );
}

#[tokio::test]
async fn concurrent_likes_and_unlikes_leave_the_count_exact() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let post = api.post(&author, "Busy", "post").await;
    let path = format!("/posts/{post}/likes");
    let mut fans = Vec::new();
    for i in 0..12 {
        fans.push(api.user_named(format!("fan_{i:02}")).await);
    }
    join_all(fans.iter().map(|f| api.like(f, &post))).await;
    // Half take back, each twice at once; the other half like again at once.
    let takes = fans[..6]
        .iter()
        .flat_map(|f| [f, f])
        .map(|f| api.unlike(f, &post));
    let likes = fans[6..].iter().map(|f| api.like_post(f, &post));
    let (taken, liked) = futures::join!(join_all(takes), join_all(likes));
    assert!(taken.iter().all(|(s, _)| *s == 204), "{taken:?}");
    assert!(liked.iter().all(|(s, _)| *s == 200), "{liked:?}");
    assert_eq!(api.get_post(&post).await.1["likeCount"], 6);
    let listed = api.get(&format!("{path}?limit=100")).await.1;
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(6));
}
