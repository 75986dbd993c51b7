//! The stream fan-out, end to end: HTTP writes → DynamoDB Local's stream → the
//! fan-out handler → HTTP reads.

use std::collections::BTreeSet;

use blog::keys::{self, FEED_FLOOR_SK, FEED_PK, PK, SK};
use futures::{FutureExt, StreamExt, future::join_all};
use serde_json::{Value, json};

use crate::{
    scene::{Cast, Scene},
    support::{TestApi, post_id},
};

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["postId"].as_str().map(str::to_owned))
        .collect()
}

fn usernames(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| item["username"].as_str().unwrap_or("<missing>").to_owned())
        .collect()
}

/// The feed partition's entries and floor, read straight from the table.
async fn feed_partition(api: &TestApi) -> (usize, Option<String>) {
    let store = &api.app.store;
    let items = store
        .client()
        .query()
        .table_name(store.table())
        .key_condition_expression(format!("{PK} = :feed"))
        .expression_attribute_values(
            ":feed",
            aws_sdk_dynamodb::types::AttributeValue::S(FEED_PK.into()),
        )
        .consistent_read(true)
        .send()
        .await
        .expect("query feed")
        .items
        .unwrap_or_default();
    let head = items.iter().find(|i| {
        i.get(SK)
            .and_then(|s| s.as_s().ok())
            .is_some_and(|s| s == FEED_FLOOR_SK)
    });
    let floor = head.and_then(|i| i.get("floorPostId").and_then(|v| v.as_s().ok()).cloned());
    (items.len() - usize::from(head.is_some()), floor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_feed_holds_exactly_the_newest_hundred_posts() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let writers = join_all((0..3).map(|i| api.user_named(format!("writer{i}")))).await;
    let mut all = Vec::new();
    for round in 0..50 {
        // Three authors post at once, and the fan-out runs now and then, so
        // posts reach the feed in mixed order and batches.
        let posts = join_all(
            writers
                .iter()
                .map(|w| api.post(w, format!("post {round}"), "content")),
        )
        .await;
        all.extend(posts);
        if round % 7 == 0 {
            api.settle(&mut poller).await;
        }
    }
    api.settle(&mut poller).await;
    all.sort();
    all.reverse();
    assert_eq!(all.len(), 150);

    let (status, page) = api.get("/feed?limit=100").await;
    assert_eq!(status, 200);
    assert_eq!(ids(&page), all[..100]);
    assert_eq!(ids(&api.get("/feed?limit=5").await.1), all[..5]);
    assert_eq!(ids(&api.get_feed().await.1), all[..20]);
    // 150 posts: trimmed to 120 (100 shown and a reserve of 20) when the
    // count passed 140, then 10 more (some reach the feed in batches, so the
    // floor is the newest trimmed).
    let (entries, floor) = feed_partition(&api).await;
    assert!(
        (120..=140).contains(&entries),
        "{entries} entries: capped with reserve and slack"
    );
    let floor = floor.expect("trimmed once");
    assert!(floor < all[99], "the floor is below every post shown");
    assert!(all[entries..].contains(&floor), "and is a trimmed post");

    // A post that left the feed never comes back through an update of it.
    let oldest = all.last().cloned().unwrap_or_default();
    let fan = api.user("latefan").await;
    api.like(&fan, &oldest).await;
    let author = api.get_post(&oldest).await.1["userId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (status, _) = api
        .edit_post(&author, &oldest, json!({ "title": "edited" }))
        .await;
    assert_eq!(status, 200);
    api.settle(&mut poller).await;
    assert_eq!(ids(&api.get("/feed?limit=100").await.1), all[..100]);
    assert_eq!(feed_partition(&api).await.0, entries, "nothing came back");
}

#[tokio::test]
async fn edits_and_counts_reach_the_feed_copy() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "Original", "first version").await;
    api.settle(&mut poller).await;
    assert_eq!(api.get_feed().await.1["items"][0]["title"], "Original");

    let (status, edited) = api
        .edit_post(
            &author,
            &post,
            json!({ "title": "Edited", "content": "second" }),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    api.like(&fan, &post).await;
    api.comment(&fan, &post, "hi").await;
    api.settle(&mut poller).await;
    let (_, feed) = api.get_feed().await;
    let entry = &feed["items"][0];
    assert_eq!(
        (
            entry["title"].as_str(),
            entry["summary"].as_str(),
            entry["likeCount"].as_u64(),
            entry["commentCount"].as_u64()
        ),
        (Some("Edited"), Some("second"), Some(1), Some(1))
    );
    // The feed copy equals the post's own short form in Q3.
    let (_, mine) = api.user_posts(&author).await;
    assert_eq!(mine["items"][0], *entry);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_likes_and_comments_are_exact_on_every_copy() {
    let api = TestApi::start().await;
    // Profiles first, 20 at a time (set-up, not the point of the test).
    let cast = Cast {
        author: "star",
        title: "Viral",
        content: "everyone reacts",
        crowd: "liker",
        width: 3,
    };
    let Scene {
        author,
        post,
        users: likers,
        mut poller,
    } = Scene::new(&api, 200, cast).await;
    let commenters = &likers[..50];
    // All 250 writes in flight together, up to 32 requests at a time (what
    // one DynamoDB Local on two cores, beside the other tests' instances,
    // serves within the store's retry budget: at 64, one like in 250 ran
    // out of it and answered 503).
    let like = |who: &String| {
        let (api, post, who) = (&api, &post, who.clone());
        async move { api.like_post(&who, post).await.0 }
    };
    let comment = |who: &String| {
        let (api, post, who) = (&api, &post, who.clone());
        async move { api.comment_on(&who, post, "wow").await.0 }
    };
    let writes = likers
        .iter()
        .map(|w| like(w).boxed())
        .chain(commenters.iter().map(|w| comment(w).boxed()));
    let statuses: Vec<u16> = futures::stream::iter(writes)
        .buffer_unordered(32)
        .collect()
        .await;
    assert_eq!(statuses.len(), 250);
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    // A repeated like changes nothing.
    assert_eq!(api.like_post(&likers[7], &post).await.0, 200);
    api.settle(&mut poller).await;

    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].as_u64(), got["commentCount"].as_u64()),
        (Some(200), Some(50))
    );
    let (_, feed) = api.get_feed().await;
    assert_eq!(
        (
            feed["items"][0]["likeCount"].as_u64(),
            feed["items"][0]["commentCount"].as_u64()
        ),
        (Some(200), Some(50))
    );
    let (_, mine) = api.user_posts(&author).await;
    assert_eq!(mine["items"][0]["likeCount"], 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rename_reaches_everything_the_user_wrote() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let host = api.user("host").await;
    let user = api.user("oldname").await;
    // 45 posts, 45 comments and 45 likes: more than one page (100) of the
    // user's GSI1 partition.
    let own: Vec<String> =
        join_all((0..45).map(|i| api.post(&user, format!("mine {i}"), "text"))).await;
    let hosted: Vec<String> =
        join_all((0..45).map(|i| api.post(&host, format!("host {i}"), "text"))).await;
    let (api_ref, user_ref) = (&api, &user);
    join_all(hosted.iter().map(|p| async move {
        let (api, user) = (api_ref, user_ref);
        api.comment(user, p, "c").await;
        api.like(user, p).await;
    }))
    .await;
    api.settle(&mut poller).await;

    api.rename(&user, "newname").await;
    api.settle(&mut poller).await;

    // Every copy of the name, read through the API: Q2 of each own post, Q4
    // and Q5 of each hosted post, Q3 page by page, and the feed.
    let mut names: Vec<String> = Vec::new();
    for post in &own {
        names.extend(usernames(&json!({ "items": [api.get_post(post).await.1] })));
    }
    for post in &hosted {
        names.extend(usernames(&api.post_comments(post).await.1));
        names.extend(usernames(&api.post_likes(post).await.1));
    }
    for page in api
        .list(format!("/users/{user}/posts?limit=30"))
        .pages()
        .await
    {
        names.extend(usernames(&page));
    }
    let (_, feed) = api.get("/feed?limit=100").await;
    let in_feed: Vec<Value> = feed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["userId"] == json!(user))
        .cloned()
        .collect();
    assert_eq!(
        in_feed.len(),
        45,
        "all 45 of the user's posts are among the 90 in the feed"
    );
    names.extend(usernames(&json!({ "items": in_feed })));
    assert_eq!(names.len(), 45 * 5);
    assert_eq!(
        names.iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([&"newname".to_owned()])
    );

    // The old name is free for someone else.
    let (status, _) = api.sign_up("successor", "OldName").await;
    assert_eq!(status, 201);
}

/// A first delivery of a post's INSERT that entered the feed and then failed
/// before trimming it: the redelivery finds the entry there already, and must
/// still trim.
#[tokio::test]
async fn a_redelivered_post_insert_still_trims_the_feed() {
    let api = TestApi::start_with_feed_capacity(1).await;
    let mut poller = api.poller();
    let author = api.user("trimmer").await;
    let first = api.post(&author, "first", "c").await;
    api.settle(&mut poller).await;
    let second = api.post(&author, "second", "c").await;
    api.wait_for_stream(1).await;
    let insert = api
        .stream_records()
        .await
        .into_iter()
        .find(|r| r.event_name == "INSERT" && format!("{:?}", r.change.keys).contains(&second))
        .expect("the second post's INSERT");
    // The first delivery: the entry went in, the function died before the trim.
    let post: blog::store::items::post::PostItem =
        serde_dynamo::from_item(insert.change.new_image.clone()).expect("post image");
    api.app
        .store
        .fanout()
        .enter_feed(&post)
        .await
        .expect("enter");
    assert_eq!(
        feed_partition(&api).await.0,
        2,
        "over capacity until trimmed"
    );

    let mut event = aws_lambda_events::event::dynamodb::Event::default();
    event.records = vec![insert];
    let response = blog::fanout::handle(&api.app.store, event).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(
        feed_partition(&api).await,
        (1, Some(first)),
        "trimmed, floor raised"
    );
    let (_, feed) = api.get_feed().await;
    assert_eq!(ids(&feed), vec![second]);
}

/// A feed entry written before entries carried `userVersion` still takes its
/// author's rename (renames no longer raise the post's own `version`).
#[tokio::test]
async fn an_entry_from_before_user_versions_takes_a_rename() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("veteran").await;
    let post = api.post(&author, "old entry", "text").await;
    api.settle(&mut poller).await;
    let store = &api.app.store;
    store
        .client()
        .update_item()
        .table_name(store.table())
        .key(
            PK,
            aws_sdk_dynamodb::types::AttributeValue::S(FEED_PK.into()),
        )
        .key(
            SK,
            aws_sdk_dynamodb::types::AttributeValue::S(keys::feed_sk(&post_id(&post))),
        )
        .update_expression("REMOVE userVersion")
        .send()
        .await
        .expect("an entry of the old shape");
    api.rename(&author, "veteran2").await;
    api.settle(&mut poller).await;
    let (_, feed) = api.get_feed().await;
    assert_eq!(usernames(&feed), vec!["veteran2".to_owned()]);
}

/// A batch refreshes each post's feed copy once, however many of its counts
/// changed in it: 1,000 likes on 10 posts of the feed, their records
/// delivered as one batch, write 10 feed entries (one per post, with its
/// last count), where each like used to write one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_refreshes_each_feed_copy_once_however_many_counts_changed() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let mut posts = Vec::new();
    for i in 0..10 {
        posts.push(api.post(&author, format!("post {i}"), "text").await);
    }
    let fans = join_all((0..100).map(|i| api.user_named(format!("fan{i:03}")))).await;
    api.settle(&mut poller).await;
    // Everything the likes stream, as one batch of the deployed mapping (its
    // filters), but for its size: a batch gathers for a second, past
    // GetRecords' pages of 1,000.
    let mut mapping = crate::support::stream_mapping();
    mapping.batch_size = 10_000;
    mapping.batching_window = std::time::Duration::from_secs(1);
    let mut one_batch = api.poller_with(mapping, &crate::support::endpoint(), None);
    api.pass_over(&mut one_batch).await;
    for fan in &fans {
        let likes = posts.iter().map(|post| api.like(fan, post));
        join_all(likes).await;
    }
    let batches = std::sync::Mutex::new(Vec::new());
    let collect = |event: aws_lambda_events::event::dynamodb::Event| {
        batches.lock().expect("lock").push(event);
        async { Ok(Default::default()) }
    };
    while one_batch.poll_once(&collect).await.expect("poll") > 0 {}
    let mut batches = batches.into_inner().expect("lock");
    assert_eq!(batches.len(), 1, "one batch");
    let batch = batches.remove(0);
    let modifies = batch
        .records
        .iter()
        .filter(|r| r.event_name == "MODIFY")
        .count();
    assert_eq!(modifies, 1_000, "a post MODIFY per like");

    api.meter.take();
    let response = blog::fanout::handle(&api.app.store, batch).await;
    assert!(response.batch_item_failures.is_empty());
    let calls = api.meter.take();
    // The likes' authors (100 fans) read together: one BatchGetItem, not a
    // GetItem a like; the rest are the notifications' reads of the posts
    // and of their groups.
    let reads = |operation: &str| calls.iter().filter(|c| c.operation == operation).count();
    assert_eq!(reads("BatchGetItem"), 1, "{calls:?}");
    assert_eq!(reads("GetItem"), 20, "{calls:?}");
    let writes: Vec<_> = calls.into_iter().filter(|call| !call.reads()).collect();
    assert_eq!(
        writes.len(),
        20,
        "one feed entry write per post, and one of its author's likes group \
         (its actors): {:?}",
        writes
    );
    let (_, feed) = api.get_feed().await;
    let counts: Vec<_> = feed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|entry| entry["likeCount"].as_u64())
        .collect();
    assert_eq!(
        counts,
        vec![Some(100); 10],
        "each copy has its post's last count"
    );
}

/// A coalesced MODIFY comes again when the MODIFY that carries it is not
/// applied: a like's count change (M1) coalesced into a later MODIFY of the
/// post whose own two images show the same short form (M2: a version bump,
/// as the audit's repair of a right count writes) is reported with M2 when
/// M2's refresh fails, so that Lambda delivers both again and the feed copy
/// gets the count.
#[tokio::test]
async fn a_coalesced_change_comes_again_when_its_carrier_is_not_applied() {
    let (proxy, api) = crate::support::behind_proxy(crate::support::fast_full_backoff()).await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "liked", "text").await;
    api.settle(&mut poller).await;
    api.like(&fan, &post).await;
    let mut like = None;
    for _ in 0..200 {
        like = api.stream_records().await.into_iter().find(|r| {
            r.event_name == "MODIFY"
                && r.change.new_image.get("likeCount")
                    == Some(&serde_dynamo::AttributeValue::N("1".into()))
        });
        if like.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let like = like.expect("the like's post MODIFY");
    // M2: the post as M1 left it, its version one up.
    let mut bump = like.clone();
    bump.change.old_image = like.change.new_image.clone();
    let version: u64 = match like.change.new_image.get("version") {
        Some(serde_dynamo::AttributeValue::N(v)) => v.parse().expect("a version"),
        other => panic!("no version: {other:?}"),
    };
    bump.change.new_image.insert(
        "version".into(),
        serde_dynamo::AttributeValue::N((version + 1).to_string()),
    );
    bump.change.sequence_number = Some(format!(
        "{}9",
        like.change.sequence_number.clone().expect("seq")
    ));
    bump.event_id = format!("{}-bump", like.event_id);
    let batch = vec![like.clone(), bump.clone()];
    let event = || {
        let mut event = aws_lambda_events::event::dynamodb::Event::default();
        event.records = batch.clone();
        event
    };

    // M2's feed refresh is throttled through its retries: both are reported.
    proxy.set_faults(hostile::Faults {
        throttle: 1.0,
        ..hostile::Faults::none()
    });
    let response = blog::fanout::handle(&api.app.store, event()).await;
    proxy.set_faults(hostile::Faults::none());
    let reported: BTreeSet<_> = response
        .batch_item_failures
        .iter()
        .filter_map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(
        reported,
        BTreeSet::from([
            like.change.sequence_number.clone().expect("seq"),
            bump.change.sequence_number.clone().expect("seq"),
        ])
    );
    assert_eq!(api.get_feed().await.1["items"][0]["likeCount"], 0);

    // Lambda delivers again from the lowest reported: both, and the copy
    // counts the like. (Had only M2 come again, its equal short forms would
    // have refreshed nothing.)
    let response = blog::fanout::handle(&api.app.store, event()).await;
    assert!(response.batch_item_failures.is_empty());
    let (_, feed) = api.get_feed().await;
    assert_eq!(feed["items"][0]["likeCount"], 1, "{feed}");
}
