//! `GET /users/{userId}/export`: everything a user wrote, page by page, in
//! full, for the user alone, in a bounded number of calls per page.

use std::collections::BTreeSet;

use blog::{
    ids::{CommentId, LikeId, PostId},
    store::{
        bulk,
        feed::FEED_CAPACITY,
        items::comment::CommentItem,
        items::user::UserItem,
        items::{like::LikeItem, post::PostItem},
    },
};
use serde_json::json;

use crate::support::{TestApi, thread};

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
    // Whom I follow is mine; who follows me is theirs.
    let followed = api.follow(&me, &other).await;
    api.follow(&other, &me).await;

    for limit in [1, 2, 25] {
        let pages = api
            .list(format!("/users/{me}/export?limit={limit}"))
            .by(&me)
            .pages()
            .await;
        assert_eq!(pages.len(), 7_usize.div_ceil(limit), "limit {limit}");
        let mut posts = BTreeSet::new();
        let mut comments = Vec::new();
        let mut likes = BTreeSet::new();
        let mut follows = Vec::new();
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
                } else if let Some(follow) = item.get("follow") {
                    follows.push(follow.clone());
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
        assert_eq!(
            follows,
            vec![json!({ "userId": other, "followedAt": followed["followedAt"] })]
        );
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
    assert_eq!(api.export_as(&other, &me, "").await.0, 403);
    let nobody = "user-without-a-profile";
    let (status, _) = api.export(nobody).await;
    assert_eq!(status, 404);
    for bad in ["limit=0", "limit=26", "limit=x", "cursor=garbage"] {
        let (status, body) = api.export_as(&me, &me, bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // A cursor of another user's export is refused.
    for i in 0..2 {
        api.post(&other, format!("theirs {i}"), "c").await;
    }
    let (_, first) = api.export_as(&other, &other, "limit=1").await;
    let cursor = first["nextCursor"].as_str().expect("a second page");
    let (status, _) = api.export_as(&me, &me, &format!("cursor={cursor}")).await;
    assert_eq!(status, 400);

    // A page: GetItem the profile, Query GSI1, one BatchGetItem.
    api.meter.take();
    let (status, body) = api.export_as(&me, &me, "limit=25").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["items"].as_array().map(Vec::len), Some(2));
    let operations: Vec<String> = api.meter.take().into_iter().map(|c| c.operation).collect();
    assert_eq!(operations, ["GetItem", "Query", "BatchGetItem"]);
}

/// 1,000 things by `me`, loaded in bulk: 400 posts of 2,000 characters, and
/// on each of 100 posts by `others` 5 comments and a like. Returns the ids
/// the export must list: posts, comments, likes.
async fn a_thousand(api: &TestApi, me: &UserItem, others: &[UserItem]) -> [BTreeSet<String>; 3] {
    let new_post = |author: &UserItem, n: usize, content: &str| {
        let id = PostId::generate();
        PostItem::new(
            id,
            author,
            &format!("post {n}"),
            content,
            &[],
            blog::model::Status::Published,
            &id.created_at(),
        )
    };
    let long = "y".repeat(2_000);
    let mut threads = Vec::new();
    let mut ids: [BTreeSet<String>; 3] = Default::default();
    for n in 0..400 {
        let post = new_post(me, n, &long);
        ids[0].insert(post.post_id.to_string());
        threads.push(thread(post, &long, Vec::new(), Vec::new()));
    }
    for n in 0..100 {
        let post = new_post(&others[n % others.len()], n, "theirs");
        let comments: Vec<CommentItem> = (0..5)
            .map(|_| CommentItem::new(post.post_id, CommentId::generate(), me, "mine"))
            .collect();
        let like = LikeItem::new(
            blog::keys::PostPartition::own(post.post_id),
            LikeId::generate(),
            me,
        );
        ids[1].extend(comments.iter().map(|c| c.comment_id.to_string()));
        ids[2].insert(post.post_id.to_string());
        threads.push(thread(post, "theirs", comments, vec![like]));
    }
    let mut items = Vec::new();
    for thread in &threads {
        items.extend(bulk::post_items(thread).expect("items"));
    }
    let posts: Vec<&PostItem> = threads.iter().map(|t| &t.post).collect();
    items.extend(bulk::feed_items(&posts, FEED_CAPACITY).expect("feed"));
    crate::support::load(api, items).await;
    ids
}

#[tokio::test]
async fn an_export_of_a_thousand_items_lists_each_once_within_three_calls_a_page() {
    let api = TestApi::start().await;
    let me = api.user("archivist").await;
    let mut others = Vec::new();
    for i in 0..5 {
        let other = api.user(&format!("reader_{i}")).await;
        others.push(api.profile(&other).await);
    }
    let expected = a_thousand(&api, &api.profile(&me).await, &others).await;

    let mut seen: [Vec<String>; 3] = Default::default();
    let mut pages = 0;
    // Each page's calls are metered alone: none are left before the first,
    // and each page takes its own.
    api.meter.take();
    let listing = api.list(format!("/users/{me}/export?limit=25")).by(&me);
    let read = listing.at_most(40).each_page(|body| {
        pages += 1;
        let items = body["items"].as_array().expect("items");
        assert_eq!(items.len(), 25, "page {pages}: every page is full");
        // What the page read from the table: a post is its item and its
        // content, a comment or a like one item, each under 4 KB.
        let mut table_items = 0.0;
        for item in items {
            if let Some(post) = item.get("post") {
                assert_eq!(post["content"].as_str().map(str::len), Some(2_000));
                seen[0].push(post["postId"].as_str().expect("id").to_owned());
                table_items += 2.0;
            } else if let Some(comment) = item.get("comment") {
                assert_eq!(comment["content"], json!("mine"));
                seen[1].push(comment["commentId"].as_str().expect("id").to_owned());
                table_items += 1.0;
            } else if let Some(like) = item.get("like") {
                seen[2].push(like["postId"].as_str().expect("id").to_owned());
                table_items += 1.0;
            } else {
                panic!("unknown item {item}");
            }
        }
        // docs/data-model.md: GetItem the profile (1 unit, strong), Query
        // GSI1 (0.5 per 4 KB: 26 entries of at most 2,331 bytes, 7.5 at most;
        // here the posts' summaries fill most of it), BatchGetItem (strong:
        // 1 per 4 KB of each item).
        let calls = api.meter.take();
        let operations: Vec<&str> = calls.iter().map(|c| c.operation.as_str()).collect();
        assert_eq!(
            operations,
            ["GetItem", "Query", "BatchGetItem"],
            "page {pages}"
        );
        assert_eq!(calls[0].total(), 1.0, "page {pages}: the profile");
        assert!(calls[1].total() <= 7.5, "page {pages}: {:?}", calls[1]);
        assert_eq!(calls[2].total(), table_items, "page {pages}: the items");
    });
    assert_eq!(read.await, 40, "no 41st page");
    assert_eq!(pages, 40);
    for (kind, (seen, expected)) in ["posts", "comments", "likes"]
        .iter()
        .zip(seen.iter_mut().zip(&expected))
    {
        let listed = seen.len();
        let unique: BTreeSet<String> = seen.drain(..).collect();
        assert_eq!(listed, unique.len(), "{kind}: each listed once");
        assert_eq!(&unique, expected, "{kind}");
    }
}
