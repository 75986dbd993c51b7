//! Notifications: a post's likes and a user's new followers grouped with
//! their newest actors, a comment one of its own; what is taken back leaves
//! them; the caller's own actions tell them nothing; the read mark; the
//! list is the caller's own and pages.

use serde_json::{Value, json};

use crate::support::TestApi;

/// The caller's notifications, first page (20), as the list answers them.
async fn told(api: &TestApi, user: &str) -> Value {
    let (status, body) = api.notifications(user, "").await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Its items of `kind`.
fn of_kind(page: &Value, kind: &str) -> Vec<Value> {
    page["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n["kind"] == kind)
        .collect()
}

/// The usernames a notification names, newest first.
fn names(notification: &Value) -> Vec<String> {
    notification["actors"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|a| a["username"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_posts_likes_are_one_group_and_what_is_taken_back_leaves_it() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("writer").await;
    let post = api.post(&author, "Hello", "text").await;
    let mut fans = Vec::new();
    for name in ["ann", "bob", "cat", "dan"] {
        let fan = api.user(name).await;
        api.like(&fan, &post).await;
        fans.push(fan);
    }
    // The author's own like is in the post's count, not in what tells them.
    api.like(&author, &post).await;
    api.settle(&mut poller).await;
    let page = told(&api, &author).await;
    let likes = of_kind(&page, "like");
    assert_eq!(likes.len(), 1, "one group a post: {page}");
    let group = &likes[0];
    assert_eq!(group["grouped"], true);
    assert_eq!(group["postId"], post.as_str());
    assert_eq!(group["count"], 4, "{group}");
    assert_eq!(names(group), ["dan", "cat", "bob"], "newest three others");
    assert_eq!(group["read"], false);
    assert_eq!(page["unreadCount"], 1);
    assert!(
        group["firstAt"].as_str() <= group["lastAt"].as_str(),
        "{group}"
    );

    // An unlike takes the actor out and the count down; the next newest
    // shows in their place.
    let (status, body) = api.unlike(&fans[3], &post).await;
    assert_eq!(status, 204, "{body}");
    api.settle(&mut poller).await;
    let group = &of_kind(&told(&api, &author).await, "like")[0];
    assert_eq!(group["count"], 3, "{group}");
    assert_eq!(names(group), ["cat", "bob", "ann"], "{group}");

    // The author taking back their own like changes nothing shown.
    let (status, _) = api.unlike(&author, &post).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    assert_eq!(of_kind(&told(&api, &author).await, "like")[0]["count"], 3);

    // An erased liker leaves the count, and their name never shows.
    let (status, body) = api.erase(&fans[2]).await;
    assert!(status == 200 || status == 202 || status == 204, "{body}");
    api.settle(&mut poller).await;
    let group = &of_kind(&told(&api, &author).await, "like")[0];
    assert_eq!(group["count"], 2, "{group}");
    assert!(!names(group).contains(&"cat".to_owned()), "{group}");

    // The post deleted: its group goes.
    let (status, body) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204, "{body}");
    api.settle(&mut poller).await;
    assert!(of_kind(&told(&api, &author).await, "like").is_empty());
}

#[tokio::test]
async fn a_comment_is_one_notification_and_leaves_with_the_comment() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("writer").await;
    let post = api.post(&author, "Hello", "text").await;
    let fan = api.user("ann").await;
    let text = format!("<b>hi</b> & {}", "long ".repeat(60));
    let comment = api.comment(&fan, &post, &text).await;
    let second = api.comment(&fan, &post, "again").await;
    // The author's own comment tells them nothing.
    api.comment(&author, &post, "thanks").await;
    api.settle(&mut poller).await;
    let page = told(&api, &author).await;
    let comments = of_kind(&page, "comment");
    assert_eq!(comments.len(), 2, "one each: {page}");
    assert_eq!(comments[0]["commentId"], second.as_str(), "newest first");
    let first = &comments[1];
    assert_eq!(first["grouped"], false);
    assert_eq!(first["count"], 1);
    assert_eq!(names(first), ["ann"]);
    let preview = first["preview"].as_str().unwrap_or_default();
    assert!(
        text.starts_with(preview) && preview.chars().count() == 140,
        "{first}"
    );

    let (status, body) = api.take_back_comment(&fan, &post, &comment).await;
    assert_eq!(status, 204, "{body}");
    api.settle(&mut poller).await;
    let comments = of_kind(&told(&api, &author).await, "comment");
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0]["commentId"], second.as_str());
}

#[tokio::test]
async fn new_followers_are_one_group_and_an_unfollow_leaves_it() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let star = api.user("star").await;
    let ann = api.user("ann").await;
    let bob = api.user("bob").await;
    api.follow(&ann, &star).await;
    api.follow(&bob, &star).await;
    api.settle(&mut poller).await;
    let follows = of_kind(&told(&api, &star).await, "follow");
    assert_eq!(follows.len(), 1);
    assert_eq!(follows[0]["count"], 2, "{}", follows[0]);
    assert_eq!(names(&follows[0]), ["bob", "ann"]);
    assert!(follows[0].get("postId").is_none());

    let (status, _) = api.unfollow(&bob, &star).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    let follows = of_kind(&told(&api, &star).await, "follow");
    assert_eq!(follows[0]["count"], 1, "{}", follows[0]);
    assert_eq!(names(&follows[0]), ["ann"]);
    // Nobody told the followers anything.
    assert_eq!(told(&api, &ann).await["items"], json!([]));
}

#[tokio::test]
async fn what_is_read_stays_read_and_new_activity_is_unread_again() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("writer").await;
    let post = api.post(&author, "Hello", "text").await;
    let ann = api.user("ann").await;
    let bob = api.user("bob").await;
    api.like(&ann, &post).await;
    api.settle(&mut poller).await;
    let page = told(&api, &author).await;
    assert_eq!(
        (page["unreadCount"].clone(), page["seenAt"].clone()),
        (json!(1), Value::Null)
    );

    let (status, seen) = api.mark_seen(&author, None).await;
    assert_eq!(status, 200, "{seen}");
    let page = told(&api, &author).await;
    assert_eq!(page["unreadCount"], 0, "{page}");
    assert_eq!(page["seenAt"], seen["seenAt"]);
    assert_eq!(of_kind(&page, "like")[0]["read"], true);

    // An earlier mark moves nothing back; a malformed one changes nothing.
    let (status, held) = api.mark_seen(&author, Some("2020-01-01T00:00:00Z")).await;
    assert_eq!((status, &held["seenAt"]), (200, &seen["seenAt"]));
    for bad in [
        json!({"seenAt": "yesterday"}),
        json!({"seenAt": 5}),
        json!({"seenAt": null}),
        json!({"other": 1}),
    ] {
        let (status, body) = api
            .call("POST", "/notifications/seen", Some(&author), Some(bad))
            .await;
        assert_eq!(status, 400, "{body}");
    }

    // A like after the mark brings the group back unread, at the top.
    api.like(&bob, &post).await;
    api.settle(&mut poller).await;
    let page = told(&api, &author).await;
    assert_eq!(page["unreadCount"], 1, "{page}");
    let group = &of_kind(&page, "like")[0];
    assert_eq!(
        (group["read"].clone(), group["count"].clone()),
        (json!(false), json!(2))
    );
    assert_eq!(names(group), ["bob", "ann"]);
}

#[tokio::test]
async fn the_list_is_the_callers_own_and_pages_newest_first() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("writer").await;
    let mut posts = Vec::new();
    for title in ["one", "two", "three"] {
        posts.push(api.post(&author, title, "text").await);
    }
    let fan = api.user("ann").await;
    for post in &posts {
        api.like(&fan, post).await;
    }
    api.settle(&mut poller).await;
    let pages = api.list("/notifications?limit=1").by(&author).pages().await;
    let listed: Vec<Value> = pages
        .iter()
        .flat_map(|p| p["items"].as_array().cloned().unwrap_or_default())
        .map(|n| n["postId"].clone())
        .collect();
    let newest_first: Vec<Value> = posts.iter().rev().map(|p| json!(p)).collect();
    assert_eq!(listed, newest_first);

    // Without a token: 401; a cursor not of this list, a bad limit: 400.
    let (status, _) = api.call("GET", "/notifications", None, None).await;
    assert_eq!(status, 401);
    let (status, _) = api.call("POST", "/notifications/seen", None, None).await;
    assert_eq!(status, 401);
    let (_, first) = api.notifications(&author, "limit=1").await;
    let cursor = first["nextCursor"].as_str().unwrap_or_default().to_owned();
    let (status, body) = api.notifications(&fan, &format!("cursor={cursor}")).await;
    assert_eq!(status, 400, "another's cursor: {body}");
    for query in [
        "limit=0",
        "limit=101",
        "cursor=%00%00",
        "cursor=eyJsIjoieCJ9",
    ] {
        let (status, body) = api.notifications(&author, query).await;
        assert_eq!(status, 400, "{query}: {body}");
    }
}

#[tokio::test]
async fn a_hot_posts_comments_are_grouped_and_posts_taken_back_take_their_groups() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("writer").await;
    let post = api.post(&author, "Hello", "text").await;
    let ann = api.user("ann").await;
    let bob = api.user("bob").await;
    api.make_hot(&post).await;
    api.comment(&ann, &post, "first").await;
    api.comment(&bob, &post, "second").await;
    api.comment(&author, &post, "mine").await;
    api.like(&ann, &post).await;
    api.settle(&mut poller).await;
    let page = told(&api, &author).await;
    let comments = of_kind(&page, "comment");
    assert_eq!(comments.len(), 1, "grouped on a hot post: {page}");
    assert_eq!(comments[0]["grouped"], true);
    assert_eq!(comments[0]["count"], 2, "the author's own left out: {page}");
    assert_eq!(names(&comments[0]), ["bob", "ann"]);
    assert_eq!(of_kind(&page, "like")[0]["count"], 1, "{page}");

    // A quiet post taken back to a draft takes its group; the hot one
    // deleted, its groups go.
    let quiet = api.post(&author, "Quiet", "text").await;
    api.like(&bob, &quiet).await;
    api.settle(&mut poller).await;
    assert_eq!(of_kind(&told(&api, &author).await, "like").len(), 2);
    let (status, body) = api
        .edit_post(&author, &quiet, json!({ "status": "draft" }))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204, "{body}");
    api.settle(&mut poller).await;
    assert_eq!(told(&api, &author).await["items"], json!([]));
}

#[tokio::test]
async fn a_mention_is_one_notification_once_published_and_leaves_with_its_post_or_comment() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("writer").await;
    let ann = api.user("ann").await;
    let bob = api.user("bob").await;
    let (status, draft) = api
        .create_post(
            &author,
            json!({"title": "Thanks", "content": "hello @Ann and @nobody", "status": "draft"}),
        )
        .await;
    assert_eq!(status, 201, "{draft}");
    let post = draft["postId"].as_str().unwrap_or_default().to_owned();
    api.settle(&mut poller).await;
    assert_eq!(
        told(&api, &ann).await["items"],
        json!([]),
        "a draft tells no one"
    );

    let (status, body) = api
        .edit_post(&author, &post, json!({ "status": "published" }))
        .await;
    assert_eq!(status, 200, "{body}");
    let comment = api.comment(&bob, &post, "see @ann, and @writer").await;
    api.settle(&mut poller).await;
    let mentions = of_kind(&told(&api, &ann).await, "mention");
    assert_eq!(mentions.len(), 2, "the post and the comment");
    assert_eq!(mentions[0]["commentId"], comment.as_str());
    assert_eq!(names(&mentions[0]), ["bob"]);
    assert_eq!(mentions[1]["preview"], "Thanks");
    assert_eq!(names(&mentions[1]), ["writer"]);
    let author_page = told(&api, &author).await;
    assert_eq!(of_kind(&author_page, "mention").len(), 1, "{author_page}");
    assert_eq!(of_kind(&author_page, "comment").len(), 1, "{author_page}");

    // An edit that drops the mention takes its note; the comment taken
    // back takes its own.
    let (status, body) = api
        .edit_post(&author, &post, json!({ "content": "hello all" }))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = api.take_back_comment(&bob, &post, &comment).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    assert_eq!(told(&api, &ann).await["items"], json!([]));
    assert_eq!(of_kind(&told(&api, &author).await, "mention").len(), 0);
}

#[tokio::test]
async fn someone_blocked_tells_the_blocker_nothing() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("writer").await;
    let post = api.post(&author, "Hello", "text").await;
    let ann = api.user("ann").await;
    let troll = api.user("troll").await;
    api.like(&ann, &post).await;
    api.like(&troll, &post).await;
    api.comment(&troll, &post, "mean words").await;
    api.settle(&mut poller).await;
    assert_eq!(
        names(&of_kind(&told(&api, &author).await, "like")[0]),
        ["troll", "ann"]
    );

    let (status, body) = api.block(&author, &troll).await;
    assert_eq!(status, 201, "{body}");
    let page = told(&api, &author).await;
    assert_eq!(names(&of_kind(&page, "like")[0]), ["ann"], "{page}");
    assert!(of_kind(&page, "comment").is_empty(), "{page}");
    // Blocked, they cannot follow or mention the blocker: nothing new to
    // tell, nothing written.
    let (status, _) = api.follow_user(&troll, &author).await;
    assert_eq!(status, 403);
    let (status, body) = api
        .create_post(&troll, json!({"title": "t", "content": "hey @writer"}))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("blocked")),
        "{body}"
    );
    let (status, body) = api.comment_on(&troll, &post, "cc @writer").await;
    assert_eq!(status, 403, "{body}");
    let other = api.post(&ann, "Ann's", "text").await;
    let (status, body) = api.comment_on(&troll, &other, "cc @Writer").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("blocked")),
        "{body}"
    );
    api.settle(&mut poller).await;
    assert!(of_kind(&told(&api, &author).await, "mention").is_empty());
    let (_, posts) = api.user_posts(&troll).await;
    assert_eq!(posts["items"], json!([]), "nothing written");
}
