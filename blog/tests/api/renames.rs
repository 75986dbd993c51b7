//! Renames of users who wrote thousands of items: the fan-out's walk saves
//! its place, stops before the invocation's deadline and goes on when the
//! record comes again; a newer rename stops an older one's walk; a throttled
//! walk slows down and still finishes.

use std::time::Duration;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use blog::{
    fanout,
    ids::{CommentId, PostId, UserId},
    keys,
    store::{
        Backoff, bulk,
        deadline::Deadline,
        feed::FEED_CAPACITY,
        items::comment::CommentItem,
        items::post::{PostContentItem, PostItem},
        items::user::UserItem,
    },
    text::Username,
    timestamp,
};
use hostile::Faults;

use crate::support::{TestApi, behind_proxy, fast_full_backoff, user_id};

/// A user (made through the API) who wrote `posts` posts with `comments`
/// comments of their own on each, loaded in bulk as the API and the fan-out
/// would have left them: `posts × (1 + comments)` items under GSI1 `USER#u`.
async fn prolific(api: &TestApi, username: &str, posts: usize, comments: usize) -> String {
    let user = api.user(username).await;
    let now = timestamp::now();
    let author = UserItem::new(
        &UserId::parse(&user).expect("user id"),
        &Username::parse(username).expect("username"),
        &now,
    );
    let new_id = || ulid::Ulid::generate().to_string();
    let mut items = Vec::new();
    let mut post_items = Vec::new();
    for p in 0..posts {
        let post_id = PostId::parse(&new_id()).expect("post id");
        let post = PostItem::new(
            post_id,
            &author,
            &format!("post {p}"),
            "text",
            &[],
            blog::model::Status::Published,
            &now,
        );
        let content = PostContentItem::new(post_id, "text", &now);
        let replies = (0..comments)
            .map(|_| {
                let id = CommentId::parse(&new_id()).expect("comment id");
                CommentItem::new(post_id, id, &author, "a comment")
            })
            .collect();
        let thread = bulk::PostWithReplies::new(post, content, replies, Vec::new());
        items.extend(bulk::post_items(&thread).expect("items"));
        post_items.push(thread.post);
    }
    let newest: Vec<&PostItem> = post_items.iter().collect();
    items.extend(bulk::feed_items(&newest, FEED_CAPACITY).expect("feed"));
    crate::support::load(api, items).await;
    user
}

/// The stream record of the profile's change to `username`.
async fn rename_record(api: &TestApi, username: &str) -> EventRecord {
    for _ in 0..100 {
        let found = api.stream_records().await.into_iter().find(|r| {
            r.event_name == "MODIFY"
                && r.change.new_image.get("username")
                    == Some(&serde_dynamo::AttributeValue::S(username.to_owned()))
        });
        if let Some(record) = found {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no stream record of the rename to {username}");
}

fn event(record: &EventRecord) -> Event {
    let mut event = Event::default();
    event.records = vec![record.clone()];
    event
}

/// The usernames on every item under GSI1 `USER#u`, as (name, how many).
async fn copies(api: &TestApi, user: &str) -> Vec<(String, usize)> {
    let store = &api.app.store;
    let mut names = std::collections::BTreeMap::new();
    let mut start = None;
    loop {
        let page = store
            .client()
            .query()
            .table_name(store.table())
            .index_name(keys::GSI1)
            .key_condition_expression(format!("{} = :pk", keys::GSI1PK))
            .expression_attribute_values(
                ":pk",
                aws_sdk_dynamodb::types::AttributeValue::S(keys::user_items_pk(&user_id(user))),
            )
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("query GSI1");
        for item in page.items() {
            let name = item
                .get("username")
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default();
            *names.entry(name).or_insert(0) += 1;
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            return names.into_iter().collect();
        }
    }
}

/// What the walk has saved: (profile version, items written so far, phase).
async fn progress(api: &TestApi, user: &str) -> Option<(u64, u64, String)> {
    let store = &api.app.store;
    let item = store
        .client()
        .get_item()
        .table_name(store.table())
        .key(
            keys::PK,
            aws_sdk_dynamodb::types::AttributeValue::S(keys::user_pk(&user_id(user))),
        )
        .key(
            keys::SK,
            aws_sdk_dynamodb::types::AttributeValue::S(keys::RENAME_SK.into()),
        )
        .consistent_read(true)
        .send()
        .await
        .expect("read progress")
        .item?;
    let number = |name: &str| {
        item.get(name)
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or_default()
    };
    let phase = item
        .get("phase")
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default();
    Some((number("version"), number("written"), phase))
}

/// Applies the records of the posts the walk renamed: their feed entries
/// follow a post's username through its own change (the fan-out's post
/// MODIFY rule).
async fn refresh_feed_copies(api: &TestApi) {
    let modified: Vec<EventRecord> = api
        .stream_records()
        .await
        .into_iter()
        .filter(|r| {
            r.event_name == "MODIFY"
                && r.change.new_image.get("type")
                    == Some(&serde_dynamo::AttributeValue::S("post".to_owned()))
        })
        .collect();
    for chunk in modified.chunks(100) {
        let mut batch = Event::default();
        batch.records = chunk.to_vec();
        let response = fanout::handle(&api.app.store, batch).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
}

#[tokio::test]
async fn a_rename_of_5000_items_goes_on_over_several_invocations_until_every_copy_is_right() {
    let api = TestApi::start().await;
    let user = prolific(&api, "prolific", 50, 99).await;
    assert_eq!(copies(&api, &user).await, [("prolific".to_owned(), 5_000)]);
    api.rename(&user, "renamed").await;
    let record = rename_record(&api, "renamed").await;

    // Each invocation's deadline comes after five pages of 100, as if
    // Lambda's were that close: the record fails (paused) and comes again, as
    // Lambda redelivers from the lowest failed record, until the walk is done.
    let mut invocations = 0;
    let mut written = 0;
    loop {
        invocations += 1;
        assert!(invocations <= 200, "no end in sight");
        let response =
            fanout::handle_until(&api.app.store, event(&record), Deadline::after_checks(4)).await;
        let (version, saved, phase) = progress(&api, &user).await.expect("progress saved");
        assert_eq!(version, 2);
        if response.batch_item_failures.is_empty() {
            assert_eq!(phase, "done");
            assert_eq!(
                saved, 5_000,
                "every item written once, over all invocations"
            );
            break;
        }
        assert_eq!(
            saved,
            written + 500,
            "each invocation went five pages further"
        );
        written = saved;
    }
    // Ten of 500, and an eleventh that finds the end: a full last page
    // still names a next one, as DynamoDB does when a page stops at its Limit.
    assert_eq!(invocations, 11, "5,000 items, 500 an invocation");
    assert_eq!(copies(&api, &user).await, [("renamed".to_owned(), 5_000)]);
    refresh_feed_copies(&api).await;
    let audit = api.audit(false).await;
    assert!(audit.findings.is_empty(), "{:?}", audit.findings);

    // Delivered again once done: nothing to do, nothing written.
    api.meter.take();
    let response = fanout::handle(&api.app.store, event(&record)).await;
    assert!(response.batch_item_failures.is_empty());
    let calls = api.meter.take();
    assert!(
        calls
            .iter()
            .all(|c| c.operation == "GetItem" || c.operation == "Query"),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_second_rename_during_the_first_stops_the_first_and_wins() {
    let api = TestApi::start().await;
    let user = prolific(&api, "original", 10, 49).await;
    api.rename(&user, "first").await;
    let first = rename_record(&api, "first").await;

    // The first rename's walk is cut short by its deadline after two pages.
    let response =
        fanout::handle_until(&api.app.store, event(&first), Deadline::after_checks(1)).await;
    assert_eq!(response.batch_item_failures.len(), 1, "paused");
    let partly = copies(&api, &user).await;
    assert_eq!(
        partly,
        [("first".to_owned(), 200), ("original".to_owned(), 300)]
    );

    // A second rename commits meanwhile. The first one's record comes again
    // and stops at once: it copies nothing more.
    api.rename(&user, "second").await;
    let second = rename_record(&api, "second").await;
    let response = fanout::handle(&api.app.store, event(&first)).await;
    assert!(response.batch_item_failures.is_empty(), "superseded, done");
    assert_eq!(copies(&api, &user).await, partly, "nothing more copied");

    let response = fanout::handle(&api.app.store, event(&second)).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(copies(&api, &user).await, [("second".to_owned(), 500)]);
    // The first rename's record, late once more, changes nothing.
    let response = fanout::handle(&api.app.store, event(&first)).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(copies(&api, &user).await, [("second".to_owned(), 500)]);
    assert_eq!(
        progress(&api, &user).await.map(|(v, _, phase)| (v, phase)),
        Some((3, "done".to_owned()))
    );
    refresh_feed_copies(&api).await;
    let audit = api.audit(false).await;
    assert!(audit.findings.is_empty(), "{:?}", audit.findings);
}

/// The walk's pacing shares the one retry budget: a username copy that stays
/// busy (every single-item write refused as held by a transaction) is sent 8
/// times in all, over the walk's rounds, before the record fails; nothing is
/// left half-done and the next delivery finishes the walk.
#[tokio::test]
async fn a_copy_that_stays_busy_is_sent_eight_times_at_most_before_the_record_fails() {
    let (proxy, api) = behind_proxy(fast_full_backoff()).await;
    // One post and two comments of their own: three copies to write.
    let user = prolific(&api, "held", 1, 2).await;
    api.rename(&user, "released").await;
    let record = rename_record(&api, "released").await;

    proxy.set_faults(Faults {
        write_conflict: 1.0,
        ..Faults::none()
    });
    let response = fanout::handle(&api.app.store, event(&record)).await;
    let refused = proxy.stats().write_conflict;
    proxy.set_faults(Faults::none());
    assert_eq!(response.batch_item_failures.len(), 1, "the record fails");
    assert_eq!(
        refused,
        3 * u64::from(Backoff::ATTEMPTS),
        "sends of 3 copies"
    );
    assert_eq!(copies(&api, &user).await, [("held".to_owned(), 3)]);

    let response = fanout::handle(&api.app.store, event(&record)).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(copies(&api, &user).await, [("released".to_owned(), 3)]);
}

#[tokio::test]
async fn a_throttled_walk_slows_down_and_goes_on_until_every_copy_is_right() {
    let patient = Backoff {
        attempts: 3,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(5),
        budget: Duration::from_secs(2),
        resolve: Duration::ZERO,
    };
    let (proxy, api) = behind_proxy(patient).await;
    let user = prolific(&api, "throttled", 4, 49).await;
    api.rename(&user, "paced").await;
    let record = rename_record(&api, "paced").await;

    // Half the calls throttled, as a partition over its share would be.
    let mut faults = Faults::none();
    faults.throttle = 0.5;
    faults.seed = 7;
    proxy.set_faults(faults);
    let mut deliveries = 0;
    loop {
        deliveries += 1;
        assert!(deliveries <= 100, "the walk never finished");
        let response = fanout::handle(&api.app.store, event(&record)).await;
        if response.batch_item_failures.is_empty() {
            break;
        }
    }
    let injected = proxy.stats().faults();
    proxy.set_faults(Faults::none());
    assert!(injected > 100, "{injected} throttles injected");
    assert_eq!(copies(&api, &user).await, [("paced".to_owned(), 200)]);
    refresh_feed_copies(&api).await;
    let audit = api.audit(false).await;
    assert!(audit.findings.is_empty(), "{:?}", audit.findings);
}
