//! The audit finds every denormalised value that disagrees with its source,
//! repairs it, and then finds nothing: over the whole table (a parallel Scan,
//! whatever its segments and pages), for one user, and for one post.

use aws_sdk_dynamodb::types::AttributeValue;
use blog::{
    audit::{AuditOptions, Finding, Report},
    ids::{PostId, UserId},
    keys::{self, Counter, FEED_FLOOR_SK, FEED_PK, PK, POST_SK, SK},
    store::items::feed::feed_slack,
};
use serde_json::{Value, json};

use crate::support::{TestApi, comment_id, post_id, table_snapshot};

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

/// Writes straight to the table, as a bug or a lost stream record would.
async fn corrupt(api: &TestApi, pk: &str, sk: &str, set: &str, value: AttributeValue) {
    let store = &api.app.store;
    store
        .client()
        .update_item()
        .table_name(store.table())
        .key(PK, s(pk))
        .key(SK, s(sk))
        .update_expression(format!("SET {set} = :v"))
        .expression_attribute_values(":v", value)
        .send()
        .await
        .expect("corrupt");
}

#[tokio::test]
async fn the_audit_finds_and_repairs_every_stale_copy() {
    let api = TestApi::start_with_feed_capacity(3).await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let mut posts = Vec::new();
    for i in 0..5 {
        posts.push(api.post(&author, format!("post {i}"), "text").await);
    }
    let newest = posts[4].clone();
    api.like(&fan, &newest).await;
    let comment = api.comment(&fan, &newest, "hi").await;
    api.settle(&mut poller).await;
    let clean = api.audit(false).await;
    assert_eq!(
        clean.findings,
        vec![],
        "a settled table has nothing to repair"
    );
    assert!(clean.items_read > 10);

    // Six kinds of damage.
    let comment_sk = keys::comment_sk(&comment_id(&comment));
    let newest_pk = keys::post_pk(&post_id(&newest));
    corrupt(
        &api,
        &newest_pk,
        POST_SK,
        "likeCount",
        AttributeValue::N("7".into()),
    )
    .await;
    corrupt(&api, &newest_pk, &comment_sk, "username", s("ghost")).await;
    corrupt(
        &api,
        FEED_PK,
        &keys::feed_sk(&post_id(&posts[3])),
        "title",
        s("tampered"),
    )
    .await;
    let store = &api.app.store;
    store
        .client()
        .delete_item()
        .table_name(store.table())
        .key(PK, s(FEED_PK))
        .key(SK, s(&keys::feed_sk(&post_id(&posts[2]))))
        .send()
        .await
        .expect("delete");
    // An old post back in the feed.
    let old = &posts[0];
    let entry = json!({
        PK: FEED_PK, SK: keys::feed_sk(&post_id(old)), "type": "feedEntry", "postId": old, "userId": author,
        "username": "author", "title": "post 0", "summary": "text", "commentCount": 0, "likeCount": 0,
        "createdAt": "2026-01-01T00:00:00.000Z", "version": 1,
    });
    let put = store.client().put_item().table_name(store.table());
    put.set_item(Some(serde_dynamo::to_item(entry).expect("item")))
        .send()
        .await
        .expect("put");
    // And a floor above a post the feed shows: it could keep a post out.
    corrupt(&api, FEED_PK, FEED_FLOOR_SK, "floorPostId", s(&posts[3])).await;

    let found = api.audit(false).await.findings;
    let kinds: Vec<String> = found
        .iter()
        .map(|f| {
            format!("{f:?}")
                .split([' ', '{'])
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(found.len(), 6, "{found:#?}");
    for kind in [
        "Count",
        "Username",
        "StaleFeedEntry",
        "MissingFeedEntry",
        "ExtraFeedEntry",
        "Floor",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    assert!(found.iter().any(|f| matches!(
        f,
        Finding::Count {
            stored: 7,
            actual: 1,
            ..
        }
    )));
    // The same findings whatever the segments and pages: one segment, and
    // partitions split across segments' pages of a few items, or of one.
    let sorted = |findings: &[Finding]| {
        let mut all: Vec<String> = findings.iter().map(|f| format!("{f:?}")).collect();
        all.sort();
        all
    };
    for (segments, page_size) in [(1, None), (3, Some(2)), (8, Some(1))] {
        let options = AuditOptions {
            segments,
            page_size,
            ..AuditOptions::default()
        };
        let again = api.audit_with(&options).await;
        assert_eq!(
            sorted(&again.findings),
            sorted(&found),
            "{segments} segments, pages of {page_size:?}"
        );
        assert_eq!(again.found, 6);
    }

    let repaired = api.audit(true).await;
    assert_eq!(repaired.repaired, 6);
    let after = api.audit(true).await;
    assert_eq!(
        (after.findings, after.repaired),
        (vec![], 0),
        "repairing is idempotent"
    );

    // And the API shows the truth again, after the fan-out has seen the repairs.
    api.settle(&mut poller).await;
    assert_eq!(api.audit(false).await.findings, vec![]);
    assert_eq!(api.get_post(&newest).await.1["likeCount"], 1);
    let (_, comments) = api.post_comments(&newest).await;
    assert_eq!(comments["items"][0]["username"], "fan");
    let (_, feed) = api.get_feed().await;
    let listed: Vec<&Value> = feed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| &p["postId"])
        .collect();
    assert_eq!(
        listed,
        [&json!(posts[4]), &json!(posts[3]), &json!(posts[2])]
    );
    assert_eq!(feed["items"][1]["title"], "post 3");
}

/// The tail of a finding's `Debug`: which kind it is.
fn kinds(report: &Report) -> Vec<String> {
    let mut kinds: Vec<String> = report
        .findings
        .iter()
        .map(|f| {
            format!("{f:?}")
                .split([' ', '{'])
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    kinds.sort();
    kinds
}

#[tokio::test]
async fn a_post_whose_replies_span_many_pages_is_counted_right_in_bounded_memory() {
    let capacity = 3;
    let api = TestApi::start_with_feed_capacity(capacity).await;
    let mut poller = api.poller();
    let author = api.user("busy_author").await;
    let mut posts = Vec::new();
    for i in 0..8 {
        posts.push(api.post(&author, format!("post {i}"), "text").await);
    }
    // The oldest post gets 30 likes and 20 comments from 30 users.
    let busy = posts[0].clone();
    for i in 0..30 {
        let fan = api.user_named(format!("fan_{i:02}")).await;
        api.like(&fan, &busy).await;
        if i < 20 {
            api.comment(&fan, &busy, &format!("comment {i}")).await;
        }
    }
    api.settle(&mut poller).await;

    // Pages of 1, 4 and 7 items (the post's 30 likes, 30 markers and 20
    // comments span many), in 1, 2 and 4 segments.
    let newest_kept = capacity + feed_slack(capacity) + 1;
    for (segments, page_size) in [(1, Some(1)), (2, Some(4)), (4, Some(7)), (4, None)] {
        let options = AuditOptions {
            segments,
            page_size,
            ..AuditOptions::default()
        };
        let report = api.audit_with(&options).await;
        assert_eq!(
            report.findings,
            vec![],
            "{segments} segments, {page_size:?}"
        );
        assert_eq!(report.users_held, 31, "one entry per user");
        // Eight posts, 50 replies and 30 markers, but a segment held at most the newest
        // posts the feed's checks need and the post being read.
        assert!(
            report.max_held <= newest_kept + 1,
            "held {} posts at once",
            report.max_held
        );
        assert!(report.items_read > 8 + 80);
        if page_size == Some(1) {
            assert!(report.pages >= report.items_read, "one item a page");
        }
    }

    // A wrong count of the busy post: the counts are of every page.
    corrupt(
        &api,
        &keys::post_pk(&post_id(&busy)),
        POST_SK,
        "likeCount",
        AttributeValue::N("3".into()),
    )
    .await;
    let options = AuditOptions {
        segments: 2,
        page_size: Some(3),
        ..AuditOptions::default()
    };
    let report = api.audit_with(&options).await;
    assert_eq!(report.found, 1, "{:#?}", report.findings);
    assert!(matches!(
        report.findings[0],
        Finding::Count {
            counter: Counter::Likes,
            stored: 3,
            actual: 30,
            ..
        }
    ));
    // The report keeps the first findings only, and counts them all.
    let kept_none = AuditOptions {
        keep: 0,
        ..options.clone()
    };
    let report = api.audit_with(&kept_none).await;
    assert_eq!((report.found, report.findings.len()), (1, 0));
    let repair = AuditOptions {
        repair: true,
        ..options
    };
    let report = api.audit_with(&repair).await;
    assert_eq!((report.found, report.repaired), (1, 1));
    assert_eq!(api.audit(false).await.found, 0);
}

#[tokio::test]
async fn one_users_audit_repairs_their_copies_and_nothing_of_anyone_else() {
    let api = TestApi::start_with_feed_capacity(3).await;
    let mut poller = api.poller();
    let alice = api.user("alice").await;
    let bob = api.user("bob").await;
    let alices = api.post(&alice, "alice's", "text").await;
    let bobs = api.post(&bob, "bob's", "text").await;
    let alice_comment = api.comment(&alice, &bobs, "hi bob").await;
    api.like(&alice, &bobs).await;
    let bob_comment = api.comment(&bob, &alices, "hi alice").await;
    api.settle(&mut poller).await;
    // A like's id is not in the response: its key, from the table.
    let like_sk = table_snapshot(&api)
        .await
        .into_iter()
        .find(|item| item.get("type") == Some(&s("like")))
        .and_then(|item| item.get(SK).and_then(|sk| sk.as_s().ok()).cloned())
        .expect("alice's like");

    // Alice's post, comment and like, and Bob's comment, show stale names.
    let (alices_pk, bobs_pk) = (
        keys::post_pk(&post_id(&alices)),
        keys::post_pk(&post_id(&bobs)),
    );
    let alice_copies = [
        (alices_pk.clone(), POST_SK.to_owned()),
        (
            bobs_pk.clone(),
            keys::comment_sk(&comment_id(&alice_comment)),
        ),
        (bobs_pk, like_sk),
    ];
    for (pk, sk) in &alice_copies {
        corrupt(&api, pk, sk, "username", s("old_alice")).await;
    }
    let bob_sk = keys::comment_sk(&comment_id(&bob_comment));
    corrupt(&api, &alices_pk, &bob_sk, "username", s("old_bob")).await;

    let store = &api.app.store;
    let alice_id = UserId::parse(&alice).expect("user id");
    let found = store
        .admin()
        .audit_user(&alice_id, &AuditOptions::default())
        .await
        .expect("audit alice");
    assert_eq!(found.found, 3, "{:#?}", found.findings);
    let mut named: Vec<(String, String)> = found
        .findings
        .iter()
        .map(|f| match f {
            Finding::Username {
                pk,
                sk,
                user,
                stored,
                current,
                ..
            } => {
                assert_eq!(
                    (user, stored.as_str(), current.as_str()),
                    (&alice_id, "old_alice", "alice")
                );
                (pk.clone(), sk.clone())
            }
            other => panic!("not a username finding: {other:?}"),
        })
        .collect();
    named.sort();
    let mut expected = alice_copies.to_vec();
    expected.sort();
    assert_eq!(named, expected);
    assert!(found.items_read >= 4, "the profile and three items");

    let repaired = store
        .admin()
        .audit_user(&alice_id, &AuditOptions::repairing(true))
        .await
        .expect("repair alice");
    assert_eq!((repaired.found, repaired.repaired), (3, 3));
    let again = store
        .admin()
        .audit_user(&alice_id, &AuditOptions::repairing(true))
        .await
        .expect("audit alice again");
    assert_eq!((again.found, again.repaired), (0, 0));

    // Bob's stale comment is still there: the full audit finds it alone.
    let full = store.admin().audit(false).await.expect("audit");
    assert_eq!(full.found, 1, "{:#?}", full.findings);
    assert!(matches!(
        &full.findings[0],
        Finding::Username { sk, stored, .. } if *sk == bob_sk && stored == "old_bob"
    ));
    let bob_id = UserId::parse(&bob).expect("user id");
    let bobs_audit = store
        .admin()
        .audit_user(&bob_id, &AuditOptions::repairing(true))
        .await
        .expect("repair bob");
    assert_eq!((bobs_audit.found, bobs_audit.repaired), (1, 1));
    // Alice's post's feed entry took the stale name from nothing: it kept
    // "alice" throughout, so after the fan-out the whole table is clean.
    api.settle(&mut poller).await;
    assert_eq!(store.admin().audit(false).await.expect("audit").found, 0);
}

#[tokio::test]
async fn one_posts_audit_repairs_its_count_names_and_feed_entry_only() {
    let api = TestApi::start_with_feed_capacity(3).await;
    let mut poller = api.poller();
    let author = api.user("writer").await;
    let fan = api.user("reader").await;
    let first = api.post(&author, "first", "text").await;
    let second = api.post(&author, "second", "text").await;
    for post in [&first, &second] {
        api.like(&fan, post).await;
    }
    let comment = api.comment(&fan, &first, "nice").await;
    api.settle(&mut poller).await;
    let store = &api.app.store;
    let first_id = PostId::parse(&first).expect("post id");
    let second_id = PostId::parse(&second).expect("post id");
    let clean = store
        .admin()
        .audit_post(&first_id, &AuditOptions::default())
        .await
        .expect("audit");
    assert_eq!(clean.findings, vec![]);

    // The first post: a wrong count, a stale name on its comment, a tampered
    // feed entry. The second: a wrong count.
    corrupt(
        &api,
        &keys::post_pk(&first_id),
        POST_SK,
        "commentCount",
        AttributeValue::N("9".into()),
    )
    .await;
    let comment_sk = keys::comment_sk(&comment_id(&comment));
    corrupt(
        &api,
        &keys::post_pk(&first_id),
        &comment_sk,
        "username",
        s("someone"),
    )
    .await;
    corrupt(
        &api,
        FEED_PK,
        &keys::feed_sk(&first_id),
        "title",
        s("tampered"),
    )
    .await;
    corrupt(
        &api,
        &keys::post_pk(&second_id),
        POST_SK,
        "likeCount",
        AttributeValue::N("0".into()),
    )
    .await;

    let options = AuditOptions {
        page_size: Some(1),
        ..AuditOptions::default()
    };
    let found = store
        .admin()
        .audit_post(&first_id, &options)
        .await
        .expect("audit");
    assert_eq!(
        kinds(&found),
        ["Count", "StaleFeedEntry", "Username"],
        "{:#?}",
        found.findings
    );
    assert!(found.findings.iter().any(|f| matches!(
        f,
        Finding::Count {
            counter: Counter::Comments,
            stored: 9,
            actual: 1,
            ..
        }
    )));
    let repair = AuditOptions {
        repair: true,
        ..options
    };
    let repaired = store
        .admin()
        .audit_post(&first_id, &repair)
        .await
        .expect("repair");
    assert_eq!((repaired.found, repaired.repaired), (3, 3));
    let again = store
        .admin()
        .audit_post(&first_id, &repair)
        .await
        .expect("again");
    assert_eq!(
        (again.found, again.repaired),
        (0, 0),
        "{:#?}",
        again.findings
    );

    // The second post's count is left for its own audit (or the full one).
    let full = store.admin().audit(false).await.expect("audit");
    assert_eq!(kinds(&full), ["Count"], "{:#?}", full.findings);
    assert!(matches!(
        full.findings[0],
        Finding::Count { post, counter: Counter::Likes, stored: 0, actual: 1, .. } if post == second_id
    ));
    let second_audit = store
        .admin()
        .audit_post(&second_id, &repair)
        .await
        .expect("repair");
    assert_eq!((second_audit.found, second_audit.repaired), (1, 1));
    api.settle(&mut poller).await;
    assert_eq!(store.admin().audit(false).await.expect("audit").found, 0);
    let (_, feed) = api.get_feed().await;
    assert_eq!(feed["items"][1]["title"], "first");
    assert_eq!(feed["items"][1]["commentCount"], 1);
}
