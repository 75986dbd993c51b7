//! Erasing an account (`DELETE /users/{userId}`): the profile and the name go
//! at once; everything the user wrote follows in the fan-out, resumably, with
//! every count on other users' posts and their copies exact; what was in
//! flight is taken out too; the same person may start again, empty.

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};

use blog::{
    fanout,
    ids::{CommentId, IdempotencyKey, LikeId, PostId},
    keys::{self, Counter, ItemType},
    store::{
        Item, bulk,
        counts::post as counts,
        deadline::Deadline,
        feed::FEED_CAPACITY,
        idempotency::Idempotency,
        items::comment::CommentItem,
        items::feed::feed_reserve,
        items::request_record::Created,
        items::user::UserItem,
        items::{
            like::LikeItem,
            post::{PostContentItem, PostItem},
        },
        table::Write,
    },
};

use crate::support::{TestApi, post_id, table_snapshot, thread, user_id};

fn event(records: Vec<EventRecord>) -> Event {
    let mut event = Event::default();
    event.records = records;
    event
}

fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

/// Every item that names `user`: its own partition (`USER#u`), and anything
/// whose `userId` is theirs.
async fn items_of(api: &TestApi, user: &str) -> Vec<Item> {
    let pk = keys::user_pk(&user_id(user));
    table_snapshot(api)
        .await
        .into_iter()
        .filter(|i| text(i, keys::PK) == Some(&pk) || text(i, "userId") == Some(user))
        .collect()
}

/// The only things an erased account leaves: its mark, and its follower
/// counts emptied and closed to follows made before the erasure, until
/// they expire (a day: `store::follows`).
async fn assert_only_the_mark_is_left(api: &TestApi, user: &str) {
    let (counts, left): (Vec<Item>, Vec<Item>) = items_of(api, user)
        .await
        .into_iter()
        .partition(|i| ItemType::of(i) == Some(ItemType::FollowerCount));
    for count in &counts {
        let number = |name: &str| count.get(name).and_then(|v| v.as_n().ok()).cloned();
        assert_eq!(number("count").as_deref(), Some("0"), "{count:#?}");
        assert!(
            number("closed").is_some() && number(keys::EXPIRES_AT).is_some(),
            "{count:#?}"
        );
    }
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(ItemType::of(&left[0]), Some(ItemType::Erasure), "{left:#?}");
    assert_eq!(left[0].get("done"), Some(&AttributeValue::Bool(true)));
}

/// A post's counts as Q2 and the feed show them.
async fn counts(api: &TestApi, post: &str) -> (Value, Value) {
    let (status, body) = api.get_post(post).await;
    assert_eq!(status, 200, "{body}");
    (body["likeCount"].clone(), body["commentCount"].clone())
}

async fn feed_counts(api: &TestApi, post: &str) -> Option<(Value, Value)> {
    let feed = api.get_feed().await.1;
    let items = feed["items"].as_array().expect("feed items").clone();
    items
        .into_iter()
        .find(|i| i["postId"] == json!(post))
        .map(|i| (i["likeCount"].clone(), i["commentCount"].clone()))
}

async fn erase(api: &TestApi, user: &str) {
    let (status, body) = api.erase(user).await;
    assert_eq!((status, &body), (204, &Value::Null), "erase {user}");
}

/// Signing up again while the erasure's walk runs: 409 `being_erased`,
/// nothing written.
async fn assert_too_soon_to_sign_up(api: &TestApi, user: &str) {
    let before = table_snapshot(api).await;
    let (status, body) = api.sign_up(user, "too_soon").await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (409, json!("being_erased"))
    );
    assert_eq!(table_snapshot(api).await, before);
}

/// Erasing an erased account again: 204, nothing written.
async fn assert_erased_again_changes_nothing(api: &TestApi, user: &str) {
    let before = table_snapshot(api).await;
    erase(api, user).await;
    assert_eq!(table_snapshot(api).await, before);
}

async fn audit_is_clean(api: &TestApi) {
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

#[tokio::test]
async fn an_erased_user_leaves_only_a_mark_and_every_count_stays_exact() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let gone = api.user("leaving").await;
    let alice = api.user("alice").await;
    let bob = api.user("bob").await;
    let theirs = api.post(&gone, "Mine", "soon gone").await;
    let other = api.post(&gone, "Also mine", "also gone").await;
    let kept = api.post(&alice, "Alice's", "stays").await;
    // Others on the erased user's posts, and the erased user on others'.
    api.like(&alice, &theirs).await;
    api.comment(&bob, &theirs, "reply to a post that goes")
        .await;
    api.like(&gone, &kept).await;
    api.comment(&gone, &kept, "goes").await;
    api.comment(&gone, &kept, "goes too").await;
    api.like(&bob, &kept).await;
    api.comment(&bob, &kept, "stays").await;
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &kept).await, (json!(2), json!(3)));

    // Nobody else, and nobody unnamed, may; nothing changes.
    let before = table_snapshot(&api).await;
    let path = format!("/users/{gone}");
    for (who, expected) in [(Some(bob.as_str()), 403), (None, 401)] {
        let (status, body) = api.call("DELETE", &path, who, None).await;
        assert_eq!(status, expected, "{who:?}: {body}");
    }
    let (status, _) = api.erase("nobody-here").await;
    assert_eq!(status, 404, "no profile, no erasure");
    assert_eq!(table_snapshot(&api).await, before);

    erase(&api, &gone).await;
    // At once: no profile, no name, nothing new accepted.
    assert_eq!(api.get(&path).await.0, 404);
    assert_eq!(api.get("/users?username=LEAVING").await.0, 404);
    let (status, body) = api
        .create_post(&gone, json!({"title": "t", "content": "c"}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (403, json!("account_erased"))
    );
    let (status, body) = api.like_post(&gone, &kept).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (403, json!("account_erased"))
    );
    // The name is anyone's now.
    let newcomer = api.user("Leaving").await;

    api.settle(&mut poller).await;
    // Everything the user wrote is gone, on their posts and others'.
    for post in [&theirs, &other] {
        assert_eq!(api.get_post(post).await.0, 404);
    }
    assert_eq!(counts(&api, &kept).await, (json!(1), json!(1)));
    assert_eq!(feed_counts(&api, &kept).await, Some((json!(1), json!(1))));
    let comments = api.post_comments(&kept).await.1;
    assert_eq!(comments["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(comments["items"][0]["userId"], json!(bob));
    let likes = api.post_likes(&kept).await.1;
    assert_eq!(likes["items"][0]["userId"], json!(bob));
    let feed = api.get_feed().await.1;
    let shown: Vec<&Value> = feed["items"].as_array().expect("items").iter().collect();
    assert_eq!(shown.len(), 1, "only Alice's post is left: {feed}");
    // Alice's like and Bob's comment went with the erased user's post.
    let partitions: Vec<String> = [&theirs, &other]
        .iter()
        .map(|p| keys::post_pk(&post_id(p)))
        .collect();
    let snapshot = table_snapshot(&api).await;
    assert!(
        !snapshot
            .iter()
            .any(|i| partitions.iter().any(|p| text(i, keys::PK) == Some(p))),
        "nothing of the erased posts' partitions is left"
    );
    assert_only_the_mark_is_left(&api, &gone).await;
    audit_is_clean(&api).await;

    // Again: a no-op.
    assert_erased_again_changes_nothing(&api, &gone).await;

    // The same person starts again, empty; the newcomer keeps the old name.
    let (status, body) = api.sign_up(&gone, "back_again").await;
    assert_eq!(status, 201, "{body}");
    let posts = api.user_posts(&gone).await.1;
    assert_eq!(posts["items"], json!([]));
    let (status, export) = api.export(&gone).await;
    assert_eq!((status, export["items"].clone()), (200, json!([])));
    assert_eq!(
        api.get("/users?username=leaving").await.1["userId"],
        json!(newcomer)
    );
    api.settle(&mut poller).await;
    audit_is_clean(&api).await;
}

/// A write request: its method, path and body.
type Attempt = (&'static str, String, Option<Value>);

/// Every write route but the erasure's, as `user` (whose post is `mine`,
/// whose comment on Alice's post `hers` is `my_comment`, who liked `hers`)
/// may try it: on their own things, on Alice's (`her_comment`), and on
/// things that do not exist.
fn every_write(
    user: &str,
    mine: &str,
    hers: &str,
    my_comment: &str,
    her_comment: &str,
) -> Vec<Attempt> {
    let missing_post = PostId::generate();
    let missing_comment = CommentId::generate();
    let new_post = json!({ "title": "t", "content": "c" });
    let edit = json!({ "title": "edited" });
    let comment = json!({ "content": "c" });
    vec![
        ("POST", "/posts".into(), Some(new_post)),
        ("PUT", format!("/posts/{mine}"), Some(edit.clone())),
        ("PUT", format!("/posts/{hers}"), Some(edit)),
        ("DELETE", format!("/posts/{mine}"), None),
        ("DELETE", format!("/posts/{missing_post}"), None),
        ("DELETE", format!("/posts/{hers}"), None),
        (
            "POST",
            format!("/posts/{hers}/comments"),
            Some(comment.clone()),
        ),
        (
            "POST",
            format!("/posts/{missing_post}/comments"),
            Some(comment),
        ),
        (
            "DELETE",
            format!("/posts/{hers}/comments/{my_comment}"),
            None,
        ),
        (
            "DELETE",
            format!("/posts/{hers}/comments/{missing_comment}"),
            None,
        ),
        (
            "DELETE",
            format!("/posts/{hers}/comments/{her_comment}"),
            None,
        ),
        ("POST", format!("/posts/{hers}/likes"), None),
        ("POST", format!("/posts/{missing_post}/likes"), None),
        ("DELETE", format!("/posts/{hers}/likes"), None),
        ("DELETE", format!("/posts/{missing_post}/likes"), None),
        (
            "PUT",
            format!("/users/{user}"),
            Some(json!({ "username": "renamed" })),
        ),
    ]
}

/// Each of `attempts` as `user` answers 403 `account_erased` and leaves the
/// table as it was.
async fn assert_refused(api: &TestApi, user: &str, attempts: &[Attempt], when: &str) {
    let before = table_snapshot(api).await;
    for (method, path, body) in attempts {
        let (status, reply) = api.call(method, path, Some(user), body.clone()).await;
        assert_eq!(
            (status, reply["error"]["code"].clone()),
            (403, json!("account_erased")),
            "{when}: {method} {path}: {reply}"
        );
        assert_eq!(
            table_snapshot(api).await,
            before,
            "{when}: {method} {path} changed the table"
        );
    }
}

#[tokio::test]
async fn every_write_of_an_erased_account_answers_403_whatever_its_target() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let gone = api.user("leaving").await;
    let alice = api.user("alice").await;
    let mine = api.post(&gone, "Mine", "soon gone").await;
    let hers = api.post(&alice, "Alice's", "stays").await;
    let my_comment = api.comment(&gone, &hers, "mine").await;
    let her_comment = api.comment(&alice, &hers, "hers").await;
    api.like(&gone, &hers).await;
    api.settle(&mut poller).await;
    let attempts = every_write(&gone, &mine, &hers, &my_comment, &her_comment);

    erase(&api, &gone).await;
    // The walk has not started (the erasure's records are not applied):
    // their post, comment and like are all still there.
    assert_eq!(api.get_post(&mine).await.0, 200);
    assert_eq!(counts(&api, &hers).await, (json!(1), json!(2)));
    assert_refused(&api, &gone, &attempts, "before the walk").await;
    // The erasure again answers 204, and signing up again 409, changing
    // nothing.
    assert_erased_again_changes_nothing(&api, &gone).await;
    assert_too_soon_to_sign_up(&api, &gone).await;

    // The walk done: their post, comment and like are gone, and the answers
    // stay the same.
    api.settle(&mut poller).await;
    assert_eq!(api.get_post(&mine).await.0, 404);
    assert_eq!(counts(&api, &hers).await, (json!(0), json!(1)));
    assert_only_the_mark_is_left(&api, &gone).await;
    assert_refused(&api, &gone, &attempts, "after the walk").await;
    assert_erased_again_changes_nothing(&api, &gone).await;

    // Signed up again, the same person is no longer erased: their old post
    // is simply not there, and they write again.
    let (status, body) = api.sign_up(&gone, "back_again").await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = api.delete_post(&gone, &mine).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found"))
    );
    let again = api.post(&gone, "Back", "again").await;
    api.comment(&gone, &hers, "back").await;
    api.like(&gone, &hers).await;
    api.rename(&gone, "back_once_more").await;
    let (status, body) = api.delete_post(&gone, &again).await;
    assert_eq!(status, 204, "{body}");
    api.settle(&mut poller).await;
    audit_is_clean(&api).await;
}

#[tokio::test]
async fn a_caller_who_never_made_a_profile_keeps_the_documented_answers() {
    let api = TestApi::start().await;
    let alice = api.user("alice").await;
    let hers = api.post(&alice, "Alice's", "stays").await;
    let her_comment = api.comment(&alice, &hers, "hers").await;
    let stranger = "never-signed-up";
    let missing = PostId::generate();
    let before = table_snapshot(&api).await;
    let cases: [(&str, String, Option<Value>, u16, Value); 9] = [
        (
            "POST",
            "/posts".into(),
            Some(json!({ "title": "t", "content": "c" })),
            403,
            json!("forbidden"),
        ),
        (
            "PUT",
            format!("/posts/{hers}"),
            Some(json!({ "title": "defaced" })),
            403,
            json!("forbidden"),
        ),
        (
            "PUT",
            format!("/posts/{missing}"),
            Some(json!({ "title": "t" })),
            404,
            json!("not_found"),
        ),
        (
            "DELETE",
            format!("/posts/{hers}"),
            None,
            403,
            json!("forbidden"),
        ),
        (
            "DELETE",
            format!("/posts/{missing}"),
            None,
            404,
            json!("not_found"),
        ),
        (
            "DELETE",
            format!("/posts/{hers}/comments/{her_comment}"),
            None,
            403,
            json!("forbidden"),
        ),
        // Nothing to take back: 204, as for anyone.
        (
            "DELETE",
            format!("/posts/{hers}/likes"),
            None,
            204,
            Value::Null,
        ),
        (
            "PUT",
            format!("/users/{stranger}"),
            Some(json!({ "username": "someone" })),
            404,
            json!("not_found"),
        ),
        (
            "DELETE",
            format!("/users/{stranger}"),
            None,
            404,
            json!("not_found"),
        ),
    ];
    for (method, path, body, status, code) in cases {
        let (got, reply) = api.call(method, &path, Some(stranger), body).await;
        let got_code = if got == 204 {
            Value::Null
        } else {
            reply["error"]["code"].clone()
        };
        assert_eq!((got, got_code), (status, code), "{method} {path}: {reply}");
        assert_eq!(table_snapshot(&api).await, before, "{method} {path}");
    }
}

/// The transactions a like, a comment and a post commit after reading
/// `profile`: what a request that read the profile just before the erasure
/// commits just after it.
async fn in_flight(api: &TestApi, profile: &UserItem, on: &PostId) -> (LikeId, CommentId, PostId) {
    let db = api.app.store.db();
    let like = LikeItem::new(
        blog::keys::PostPartition::own(*on),
        LikeId::generate(),
        profile,
    );
    let mut tx = db.transaction("a like in flight");
    tx.add("like", Write::create(&like).expect("like"));
    tx.add("post", counts::counted_up(on, None, Counter::Likes));
    tx.commit().await.expect("like committed");
    let comment = CommentItem::new(*on, CommentId::generate(), profile, "in flight");
    let mut tx = db.transaction("a comment in flight");
    tx.add("comment", Write::create(&comment).expect("comment"));
    tx.add("post", counts::counted_up(on, None, Counter::Comments));
    tx.commit().await.expect("comment committed");
    let post = PostId::generate();
    let at = post.created_at();
    let mut tx = db.transaction("a post in flight");
    let item = PostItem::new(
        post,
        profile,
        "In flight",
        "text",
        &[],
        blog::model::Status::Published,
        &at,
    );
    tx.add("post", Write::create(&item).expect("post"));
    let content = PostContentItem::new(post, "text", &at);
    tx.add("content", Write::create(&content).expect("content"));
    tx.commit().await.expect("post committed");
    (like.like_id, comment.comment_id, post)
}

#[tokio::test]
async fn what_was_in_flight_when_the_erasure_committed_is_taken_out_with_its_counts() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let gone = api.user("leaving").await;
    let alice = api.user("alice").await;
    let kept = api.post(&alice, "Alice's", "stays").await;
    api.comment(&alice, &kept, "her own").await;
    api.settle(&mut poller).await;
    let old = api.profile(&gone).await;

    erase(&api, &gone).await;
    api.settle(&mut poller).await;
    assert_only_the_mark_is_left(&api, &gone).await;
    // Writes that read the profile before the erasure land after its walk.
    in_flight(&api, &old, &post_id(&kept)).await;
    assert_eq!(counts(&api, &kept).await, (json!(1), json!(2)));
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &kept).await, (json!(0), json!(1)));
    assert_eq!(feed_counts(&api, &kept).await, Some((json!(0), json!(1))));
    assert_eq!(
        api.get_feed().await.1["items"].as_array().map(Vec::len),
        Some(1)
    );
    assert_only_the_mark_is_left(&api, &gone).await;

    // Back with a new profile, which starts past the erased one: a late write
    // of the old account still goes, the new account's stay.
    let (status, body) = api.sign_up(&gone, "returned").await;
    assert_eq!(status, 201, "{body}");
    let new = api.profile(&gone).await;
    assert_eq!(
        (new.version, new.first_version),
        (old.version + 1, old.version + 1)
    );
    api.like(&gone, &kept).await;
    let (_, _, late_post) = in_flight(&api, &old, &post_id(&kept)).await;
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &kept).await, (json!(1), json!(1)));
    assert_eq!(api.get_post(&late_post.to_string()).await.0, 404);
    let likes = api.post_likes(&kept).await.1;
    assert_eq!(likes["items"][0]["username"], json!("returned"));
    // A rename of the new account reaches none of the old one's items.
    api.rename(&gone, "returned_2").await;
    api.settle(&mut poller).await;
    let old_items = table_snapshot(&api)
        .await
        .into_iter()
        .filter(|i| text(i, "userId") == Some(gone.as_str()))
        .filter(|i| {
            i.get("userVersion")
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|v| v < new.first_version)
        })
        .count();
    assert_eq!(old_items, 0);
    audit_is_clean(&api).await;
}

/// The REMOVE record of `user`'s profile, as the fan-out receives it.
async fn profile_removal(api: &TestApi) -> Vec<EventRecord> {
    let records = api.stream_records().await;
    let removal: Vec<EventRecord> = records
        .into_iter()
        .filter(|r| r.event_name == "REMOVE" && fanout::applies_to(r))
        .filter(|r| serde_dynamo::from_item::<_, UserItem>(r.change.old_image.clone()).is_ok())
        .collect();
    assert_eq!(removal.len(), 1, "the profile's REMOVE");
    removal
}

#[tokio::test]
async fn a_long_walk_goes_on_over_short_invocations_while_others_keep_writing() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let gone = api.user("prolific").await;
    let alice = api.user("alice").await;
    let bob = api.user("bob").await;
    let hers = api.post(&alice, "Alice's", "stays").await;
    let mine = api.post(&gone, "Prolific's", "goes").await;
    // 250 comments and a like on Alice's post, and a post: three pages.
    let store = &api.app.store;
    let (on, writer) = (post_id(&hers), user_id(&gone));
    for i in 0..250 {
        store
            .requests()
            .create_comment(&on, &writer, &format!("comment {i}"))
            .await
            .expect("comment");
    }
    api.like(&gone, &hers).await;
    api.comment(&bob, &hers, "Bob's stays").await;
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &hers).await, (json!(1), json!(251)));

    erase(&api, &gone).await;
    let removal = profile_removal(&api).await;
    // One page per invocation.
    let invoke = || async {
        let response = fanout::handle_until(
            &api.app.store,
            event(removal.clone()),
            Deadline::after_checks(0),
        )
        .await;
        !response.batch_item_failures.is_empty()
    };
    assert!(invoke().await, "the first invocation pauses after one page");
    // Meanwhile: the same person may not start again yet; a second erasure
    // changes nothing; others reply to the erased user's post.
    assert_too_soon_to_sign_up(&api, &gone).await;
    assert_erased_again_changes_nothing(&api, &gone).await;
    if api.get_post(&mine).await.0 == 200 {
        api.like(&bob, &mine).await;
        api.comment(&alice, &mine, "to a post on its way out").await;
    }

    let mut invocations = 1;
    while invoke().await {
        invocations += 1;
        assert!(invocations < 20, "the walk never finished");
    }
    assert!(
        invocations >= 3,
        "{invocations} invocations for three pages"
    );
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &hers).await, (json!(0), json!(1)));
    assert_eq!(feed_counts(&api, &hers).await, Some((json!(0), json!(1))));
    assert_eq!(api.get_post(&mine).await.0, 404);
    let partition = keys::post_pk(&post_id(&mine));
    assert!(
        !table_snapshot(&api)
            .await
            .iter()
            .any(|i| text(i, keys::PK) == Some(&partition)),
        "nothing is left of the erased user's post"
    );
    assert_only_the_mark_is_left(&api, &gone).await;
    // Its record again, late: nothing changes.
    let before = table_snapshot(&api).await;
    assert!(!invoke().await);
    assert_eq!(table_snapshot(&api).await, before);
    let (status, body) = api.sign_up(&gone, "now_then").await;
    assert_eq!(status, 201, "{body}");
    audit_is_clean(&api).await;
}

#[tokio::test]
async fn the_audit_finds_an_erasure_left_undone_and_finishes_it() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let gone = api.user("leaving").await;
    let alice = api.user("alice").await;
    let bob = api.user("bob").await;
    let hers = api.post(&alice, "Alice's", "stays").await;
    let mine = api.post(&gone, "Mine", "goes").await;
    for text in ["one", "two", "three"] {
        api.comment(&gone, &hers, text).await;
    }
    api.like(&bob, &mine).await;
    api.settle(&mut poller).await;
    erase(&api, &gone).await;
    // The fan-out never ran (its records were lost, say): the audit finds
    // the four items the user wrote and the walk not done.
    let found = api.audit(false).await;
    let unerased: Vec<String> = found.findings.iter().map(ToString::to_string).collect();
    assert_eq!(
        unerased,
        vec![format!(
            "user {gone} was erased, but 4 of their items are left"
        )]
    );
    let repaired = api.audit(true).await;
    assert_eq!(repaired.repaired, 1, "{:#?}", repaired.findings);
    // The deleted post's REMOVE clears its partition, as it would have.
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &hers).await, (json!(0), json!(0)));
    assert_eq!(api.get_post(&mine).await.0, 404);
    assert_only_the_mark_is_left(&api, &gone).await;
    audit_is_clean(&api).await;
}

/// Posts and replies for the 2,500-item erasure, loaded in bulk: the leaver
/// wrote 50 posts with 25 comments of their own each (1,300 items), and on
/// each of 200 posts by 20 other users a like and 5 comments (1,200); the
/// others wrote a comment and a like on each of the leaver's posts and of
/// each other's. The 15 newest posts are the leaver's, so the erasure takes
/// them out of the feed's top and its reserve (20) must show the next.
async fn thousands(
    api: &TestApi,
    leaver: &UserItem,
    others: &[UserItem],
) -> (Vec<PostId>, Vec<PostId>) {
    let new_post = |author: &UserItem, n: usize| {
        let id = PostId::generate();
        PostItem::new(
            id,
            author,
            &format!("post {n}"),
            "text",
            &[],
            blog::model::Status::Published,
            &id.created_at(),
        )
    };
    let comment = |on: PostId, by: &UserItem| CommentItem::new(on, CommentId::generate(), by, "hi");
    let like = |on: PostId, by: &UserItem| {
        LikeItem::new(blog::keys::PostPartition::own(on), LikeId::generate(), by)
    };
    let mut threads = Vec::new();
    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
    // Ids are time-ordered: 35 of the leaver's posts, the others' 200, then
    // the leaver's 15 newest.
    let mut leavers = |threads: &mut Vec<bulk::PostWithReplies>, range: std::ops::Range<usize>| {
        for n in range {
            let post = new_post(leaver, n);
            let reader = &others[n % others.len()];
            let mut comments: Vec<CommentItem> =
                (0..25).map(|_| comment(post.post_id, leaver)).collect();
            comments.push(comment(post.post_id, reader));
            let likes = vec![like(post.post_id, reader)];
            mine.push(post.post_id);
            threads.push(thread(post, "text", comments, likes));
        }
    };
    // A few milliseconds apart: ids made in the same millisecond are in no
    // particular order.
    let apart = || tokio::time::sleep(std::time::Duration::from_millis(3));
    leavers(&mut threads, 0..35);
    apart().await;
    for n in 0..200 {
        let author = &others[n % others.len()];
        let reader = &others[(n + 1) % others.len()];
        let post = new_post(author, n);
        let mut comments: Vec<CommentItem> =
            (0..5).map(|_| comment(post.post_id, leaver)).collect();
        comments.push(comment(post.post_id, reader));
        let likes = vec![like(post.post_id, leaver), like(post.post_id, reader)];
        theirs.push(post.post_id);
        threads.push(thread(post, "text", comments, likes));
    }
    apart().await;
    leavers(&mut threads, 35..50);
    let mut items = Vec::new();
    for thread in &threads {
        items.extend(bulk::post_items(thread).expect("items"));
    }
    let posts: Vec<&PostItem> = threads.iter().map(|t| &t.post).collect();
    let capacity = FEED_CAPACITY + feed_reserve(FEED_CAPACITY);
    items.extend(bulk::feed_items(&posts, capacity).expect("feed"));
    crate::support::load(api, items).await;
    (mine, theirs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousands_of_items_go_over_many_short_invocations_while_others_write() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let leaving = api.user("prolific").await;
    let mut others = Vec::new();
    for i in 0..20 {
        others.push(api.user(&format!("other_{i:02}")).await);
    }
    api.settle(&mut poller).await;
    let leaver = api.profile(&leaving).await;
    let mut other_profiles = Vec::new();
    for other in &others {
        other_profiles.push(api.profile(other).await);
    }
    let (mine, theirs) = thousands(&api, &leaver, &other_profiles).await;
    // Loaded as the fan-out would have left it: its records are not news.
    api.pass_over(&mut poller).await;
    let listed = keys::user_items_pk(&user_id(&leaving));
    let written = table_snapshot(&api)
        .await
        .iter()
        .filter(|i| text(i, keys::GSI1PK) == Some(&listed))
        .count();
    assert_eq!(written, 2_500);

    erase(&api, &leaving).await;
    let removal = profile_removal(&api).await;
    // Others keep liking and commenting, on the leaver's posts too, while the
    // walk goes on in invocations of two pages each.
    let writers = {
        let api = &api;
        let others = &others;
        let (mine, theirs) = (&mine, &theirs);
        async move {
            let mut made = Vec::new();
            for round in 0..40 {
                let who = &others[round % others.len()];
                let on = if round % 4 == 0 {
                    mine[round]
                } else {
                    theirs[round * 4]
                };
                let (comment, on) = (format!("during the walk {round}"), on.to_string());
                let (status, _) = api.comment_on(who, &on, comment).await;
                assert!(status == 201 || status == 404, "{status}");
                let (status, _) = api.like_post(who, &on).await;
                assert!([200, 201, 404].contains(&status), "{status}");
                made.push(on);
            }
            made
        }
    };
    let walk = async {
        let mut invocations = 0;
        loop {
            invocations += 1;
            assert!(invocations < 200, "the walk never finished");
            let response = fanout::handle_until(
                &api.app.store,
                event(removal.clone()),
                Deadline::after_checks(1),
            )
            .await;
            if response.batch_item_failures.is_empty() {
                return invocations;
            }
        }
    };
    let (_, invocations) = tokio::join!(writers, walk);
    assert!(invocations >= 10, "{invocations} invocations for 25 pages");
    api.settle(&mut poller).await;

    assert_only_the_mark_is_left(&api, &leaving).await;
    for post in &mine {
        assert_eq!(api.get_post(&post.to_string()).await.0, 404);
    }
    // Every remaining post's counts, on the post and its feed copy, are
    // what its partition holds (the audit's count check), and the feed is
    // the newest 100 of the others' posts.
    audit_is_clean(&api).await;
    let feed = api.get("/feed?limit=100").await.1;
    let shown: Vec<String> = feed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["postId"].as_str().unwrap_or_default().to_owned())
        .collect();
    let mut newest: Vec<String> = theirs.iter().map(ToString::to_string).collect();
    newest.sort_unstable_by(|a, b| b.cmp(a));
    newest.truncate(100);
    assert_eq!(shown, newest);
    let sample = theirs[7].to_string();
    let (status, body) = api.get_post(&sample).await;
    assert_eq!(status, 200);
    let comments = api
        .get(&format!("/posts/{sample}/comments?limit=100"))
        .await
        .1;
    let likes = api.get(&format!("/posts/{sample}/likes?limit=100")).await.1;
    assert_eq!(
        body["commentCount"],
        json!(comments["items"].as_array().map(Vec::len))
    );
    assert_eq!(
        body["likeCount"],
        json!(likes["items"].as_array().map(Vec::len))
    );
    assert!(
        comments["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|c| c["userId"] != json!(leaving))
    );
}

/// What a keyed `POST /posts` with `body` that read `profile` just before
/// its account's erasure commits after it: the post, its content and the
/// key's request record, in one transaction.
async fn keyed_post_in_flight(api: &TestApi, profile: &UserItem, key: &str, body: &Value) {
    let (title, text) = (
        body["title"].as_str().expect("title"),
        body["content"].as_str().expect("content"),
    );
    let post = PostId::generate();
    let at = post.created_at();
    let keyed = Idempotency::new(
        IdempotencyKey::parse(key).expect("key"),
        "POST /posts",
        body.to_string().as_bytes(),
    );
    let answer = json!({ "postId": post, "title": title });
    let record = keyed
        .record_item(
            profile.account(),
            201,
            &answer,
            Created::Post { post_id: post },
        )
        .expect("record");
    let mut tx = api.app.store.db().transaction("a keyed post in flight");
    let item = PostItem::new(
        post,
        profile,
        title,
        text,
        &[],
        blog::model::Status::Published,
        &at,
    );
    tx.add("post", Write::create(&item).expect("post"));
    let content = PostContentItem::new(post, text, &at);
    tx.add("content", Write::create(&content).expect("content"));
    tx.add("record", Write::create(&record).expect("record"));
    tx.commit().await.expect("committed");
}

/// `user`'s request records: their keys, below profile version `below`.
async fn records_below(api: &TestApi, user: &str, below: u64) -> Vec<String> {
    items_of(api, user)
        .await
        .into_iter()
        .filter(|i| ItemType::of(i) == Some(ItemType::RequestRecord))
        .filter(|i| {
            let version = i.get("userVersion").and_then(|v| v.as_n().ok());
            version.and_then(|n| n.parse::<u64>().ok()).unwrap_or(1) < below
        })
        .filter_map(|i| text(&i, "key").map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_keyed_create_in_flight_at_the_erasure_leaves_no_record_and_never_answers_the_person_back()
 {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let gone = api.user("keyed_leaver").await;
    let old = api.profile(&gone).await;
    let body = json!({ "title": "Late", "content": "in flight" });
    let keyed = |key: &'static str| {
        let (api, gone, body) = (&api, &gone, &body);
        async move { api.create_post_keyed(gone, key, body).await }
    };
    let (status, _, _) = keyed("answered").await;
    assert_eq!(status, 201);
    erase(&api, &gone).await;
    api.settle(&mut poller).await;
    assert_only_the_mark_is_left(&api, &gone).await;

    // A keyed create that read the profile before the erasure lands after
    // its walk: its post and its record go.
    keyed_post_in_flight(&api, &old, "late", &body).await;
    api.settle(&mut poller).await;
    assert_only_the_mark_is_left(&api, &gone).await;

    // The same person back, sending the late request again: a new post,
    // not the erased account's answer.
    let (status, reply) = api.sign_up(&gone, "keyed_back").await;
    assert_eq!(status, 201, "{reply}");
    let new = api.profile(&gone).await;
    let (status, first, replayed) = keyed("late").await;
    assert_eq!((status, replayed), (201, false), "{first}");

    // An erased account's record landing after the sign-up answers nothing
    // for the new account: its key makes a new post; the fan-out takes the
    // old record out and keeps the new account's own.
    keyed_post_in_flight(&api, &old, "later", &body).await;
    let (status, later, replayed) = keyed("later").await;
    assert_eq!((status, replayed), (201, false), "{later}");
    keyed_post_in_flight(&api, &old, "latest", &body).await;
    assert_eq!(
        records_below(&api, &gone, new.first_version).await,
        ["latest"]
    );
    api.settle(&mut poller).await;
    assert_eq!(
        records_below(&api, &gone, new.first_version).await,
        Vec::<String>::new()
    );
    for (key, answer) in [("late", &first), ("later", &later)] {
        let (status, again, replayed) = keyed(key).await;
        assert_eq!((status, replayed), (201, true), "{key}: {again}");
        assert_eq!(again["postId"], answer["postId"], "{key}");
    }
    let posts = api.user_posts(&gone).await.1;
    assert_eq!(posts["items"].as_array().map(Vec::len), Some(2), "{posts}");
    audit_is_clean(&api).await;
}
