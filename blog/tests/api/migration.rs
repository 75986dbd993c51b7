//! `blog-admin migrate` on a table whose posts are in the shape before the
//! split (the content on the post item): reads and writes serve both shapes
//! until it runs; it runs while the API serves likes and edits; it moves every
//! post exactly once, and running it again finds nothing.

use aws_sdk_dynamodb::types::AttributeValue;
use blog::{
    ids::PostId,
    keys::{self, PK, POST_CONTENT_SK, POST_SK, SK},
    store::{Item, migrate::Migrated},
};
use futures::future::join_all;
use hostile::Faults;
use serde_json::json;

use crate::{
    requests::until_answered,
    support::{TestApi, behind_proxy, fast_full_backoff, table_snapshot},
};

fn key(pk: String, sk: &str) -> Item {
    Item::from([
        (PK.to_owned(), AttributeValue::S(pk)),
        (SK.to_owned(), AttributeValue::S(sk.to_owned())),
    ])
}

/// Rewrites a post written by the API into the old shape: its content back
/// on the post item, no content item.
async fn into_old_shape(api: &TestApi, post: &str) {
    let store = &api.app.store;
    let pk = keys::post_pk(&PostId::parse(post).expect("post id"));
    let content = store
        .client()
        .get_item()
        .table_name(store.table())
        .set_key(Some(key(pk.clone(), POST_CONTENT_SK)))
        .consistent_read(true)
        .send()
        .await
        .expect("get content")
        .item
        .and_then(|item| item.get("content").cloned())
        .expect("a content item");
    store
        .client()
        .update_item()
        .table_name(store.table())
        .set_key(Some(key(pk.clone(), POST_SK)))
        .update_expression("SET content = :content")
        .expression_attribute_values(":content", content)
        .send()
        .await
        .expect("old shape");
    store
        .client()
        .delete_item()
        .table_name(store.table())
        .set_key(Some(key(pk, POST_CONTENT_SK)))
        .send()
        .await
        .expect("drop content item");
}

fn shape(items: &[Item]) -> (usize, usize) {
    let is = |item: &Item, kind: &str| item.get("type") == Some(&AttributeValue::S(kind.into()));
    let old = items
        .iter()
        .filter(|i| is(i, "post") && i.contains_key("content"))
        .count();
    let content_items = items.iter().filter(|i| is(i, "postContent")).count();
    (old, content_items)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn old_shape_posts_are_served_then_migrated_while_the_api_serves() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("old_timer").await;
    let fans = join_all((0..6).map(|i| api.user_named(format!("fan{i}")))).await;
    let mut posts = Vec::new();
    for i in 0..10 {
        let post = api
            .post(
                &author,
                format!("post {i}"),
                &format!("本文 {i} ").repeat(50),
            )
            .await;
        into_old_shape(&api, &post).await;
        posts.push(post);
    }
    assert_eq!(shape(&table_snapshot(&api).await), (10, 0), "all old");

    // Both shapes serve: reads, likes, comments and edits.
    let (status, got) = api.get_post(&posts[0]).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["content"], json!("本文 0 ".repeat(50)));
    api.like(&fans[0], &posts[0]).await;
    let edit = json!({ "title": "renamed post" });
    let (status, edited) = api.edit_post(&author, &posts[1], edit).await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(
        edited["content"],
        json!("本文 1 ".repeat(50)),
        "content kept"
    );
    assert_eq!(
        shape(&table_snapshot(&api).await),
        (9, 1),
        "an edit leaves the new shape"
    );

    // The migration runs while likes and content edits go on (a 503, the
    // store's retries run out under the contention, is sent again).
    let store = api.app.store.clone();
    let migration = tokio::spawn(async move { store.admin().migrate().await });
    let traffic = join_all(posts.iter().enumerate().flat_map(|(i, post)| {
        let api = &api;
        let author = &author;
        let fans = &fans;
        (0..fans.len()).map(move |f| async move {
            if f == 0 && i % 3 == 2 {
                let body = json!({ "content": format!("edited {i}") });
                until_answered(|| api.edit_post(author, post, body.clone())).await
            } else {
                until_answered(|| api.like_post(&fans[f], post)).await
            }
        })
    }))
    .await;
    for (status, reply) in &traffic {
        assert!(*status == 200 || *status == 201, "{status}: {reply}");
    }
    // A post DynamoDB stayed busy on is left (counted) for the next run, as
    // the operator runs `blog-admin migrate` again; the traffic is over, so
    // the next run moves it.
    let first = migration.await.expect("task").expect("migrate");
    assert!(
        first.found <= 9 && first.moved + first.busy <= first.found,
        "{first:?}"
    );
    if first.busy > 0 {
        let second = api
            .app
            .store
            .admin()
            .migrate()
            .await
            .expect("migrate the busy ones");
        assert!(
            second.found <= first.busy && second.moved == second.found && second.busy == 0,
            "the posts left busy (those an edit did not move since) moved by the next run: {first:?} then {second:?}"
        );
    }
    let again = api
        .app
        .store
        .admin()
        .migrate()
        .await
        .expect("migrate again");
    assert_eq!(again, Migrated::default(), "nothing left");
    assert_eq!(shape(&table_snapshot(&api).await), (0, 10), "all new");

    for (i, post) in posts.iter().enumerate() {
        let (status, got) = api.get_post(post).await;
        assert_eq!(status, 200);
        let text = if i % 3 == 2 {
            format!("edited {i}")
        } else {
            format!("本文 {i} ").repeat(50)
        };
        assert_eq!(got["content"], json!(text), "post {i}");
        // Every fan liked it (fan 0 twice on post 0: once counted), except
        // where fan 0 edited instead.
        let likes = fans.len() - usize::from(i % 3 == 2);
        assert_eq!(got["likeCount"], json!(likes), "post {i}");
    }
    api.settle(&mut poller).await;
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

/// A post whose move DynamoDB keeps cancelling (every transaction cancelled,
/// as under a storm of conflicts) does not stop the run: each is sent 8
/// times, counted `busy` and left in the old shape, where it is still served;
/// the next run, DynamoDB calm again, moves them all.
#[tokio::test]
async fn posts_dynamodb_stays_busy_on_are_left_for_the_next_run() {
    let (proxy, api) = behind_proxy(fast_full_backoff()).await;
    let author = api.user("stormy").await;
    let mut posts = Vec::new();
    for i in 0..3 {
        let post = api.post(&author, format!("post {i}"), "old text").await;
        into_old_shape(&api, &post).await;
        posts.push(post);
    }

    proxy.set_faults(Faults {
        transaction_cancel: 1.0,
        ..Faults::none()
    });
    let before = proxy.stats();
    let stormy = api
        .app
        .store
        .admin()
        .migrate()
        .await
        .expect("a run that finishes");
    assert_eq!(
        stormy,
        Migrated {
            found: 3,
            moved: 0,
            busy: 3,
            likers_moved: 0,
            followers_copied: 0
        }
    );
    let after = proxy.stats();
    assert_eq!(
        after.transaction_cancel - before.transaction_cancel,
        3 * 8,
        "each post's move sent 8 times, no more"
    );
    assert_eq!(
        after.forwarded("TransactWriteItems"),
        before.forwarded("TransactWriteItems"),
        "none reached DynamoDB"
    );
    assert_eq!(shape(&table_snapshot(&api).await), (3, 0), "all still old");
    let (status, got) = api.get_post(&posts[2]).await;
    assert_eq!(
        (status, &got["content"]),
        (200, &json!("old text")),
        "{got}"
    );

    proxy.set_faults(Faults::none());
    let calm = api.app.store.admin().migrate().await.expect("migrate");
    assert_eq!(
        calm,
        Migrated {
            found: 3,
            moved: 3,
            busy: 0,
            likers_moved: 0,
            followers_copied: 0
        }
    );
    assert_eq!(shape(&table_snapshot(&api).await), (0, 3), "all new");
}

/// Follower entries written before the followers list had its copy by
/// time (no fan-out ran for them here) are copied by the migration, each
/// once, and a follow taken back meanwhile is not: the list then shows
/// exactly the followers there are.
#[tokio::test]
async fn the_migration_copies_earlier_follower_entries_into_the_list() {
    let api = TestApi::start().await;
    let star = api.user("migrated_star").await;
    let (fan, gone) = (
        api.user("migrated_fan").await,
        api.user("migrated_gone").await,
    );
    api.follow(&fan, &star).await;
    api.follow(&gone, &star).await;
    let (status, _) = api.unfollow(&gone, &star).await;
    assert_eq!(status, 204);
    let (_, before) = api.followers(&star).await;
    assert_eq!(before["items"], json!([]), "not copied yet: {before}");

    let done = api.app.store.admin().migrate().await.expect("migrate");
    assert_eq!(done.followers_copied, 1);
    let (_, after) = api.followers(&star).await;
    let shown: Vec<&str> = after["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["userId"].as_str())
        .collect();
    assert_eq!(shown, [fan.as_str()]);
    // Again: the same copy, nothing more.
    let again = api.app.store.admin().migrate().await.expect("migrate");
    assert_eq!(again.followers_copied, 1);
    assert_eq!(api.followers(&star).await.1, after);
}
