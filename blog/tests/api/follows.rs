//! Follows: following is idempotent, the lists are newest first, the
//! counts on the profiles are exact once the fan-out has caught up, also
//! under concurrent follows; bad follows change nothing.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::support::{TestApi, user_id};

async fn counts(api: &TestApi, user: &str) -> (u64, u64) {
    let (status, profile) = api.get_user(user).await;
    assert_eq!(status, 200, "{profile}");
    (
        profile["followerCount"].as_u64().unwrap_or(u64::MAX),
        profile["followingCount"].as_u64().unwrap_or(u64::MAX),
    )
}

/// The user ids a follow list shows, following its cursors `page` at a time.
async fn listed(api: &TestApi, path: &str, page: usize) -> Vec<String> {
    let mut ids = Vec::new();
    api.list(format!("{path}?limit={page}"))
        .each_page(|body| {
            let items = body["items"].as_array().cloned().unwrap_or_default();
            assert!(items.len() <= page, "{body}");
            ids.extend(
                items
                    .iter()
                    .map(|f| f["userId"].as_str().unwrap_or_default().to_owned()),
            );
        })
        .await;
    ids
}

#[tokio::test]
async fn following_is_once_a_user_and_the_lists_and_counts_say_so() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let alice = api.user("follow_alice").await;
    let bob = api.user("follow_bob").await;
    let carol = api.user("follow_carol").await;

    let path = format!("/users/{bob}/followers");
    let (status, first) = api.follow_user(&alice, &bob).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(
        (&first["userId"], &first["username"]),
        (&json!(bob), &json!("follow_bob"))
    );
    // Twice is once: the same follow, 200.
    let (status, again) = api.follow_user(&alice, &bob).await;
    assert_eq!((status, &again), (200, &first));
    api.follow(&carol, &bob).await;
    api.follow(&alice, &carol).await;
    api.settle(&mut poller).await;

    assert_eq!(counts(&api, &bob).await, (2, 0));
    assert_eq!(counts(&api, &alice).await, (0, 2));
    assert_eq!(counts(&api, &carol).await, (1, 1));
    // Newest first, named as they are now.
    assert_eq!(listed(&api, &path, 1).await, [carol.clone(), alice.clone()]);
    assert_eq!(
        listed(&api, &format!("/users/{alice}/following"), 1).await,
        [carol.clone(), bob.clone()]
    );
    let (_, by_name) = api.get("/users?username=FOLLOW_BOB").await;
    assert_eq!(
        (&by_name["followerCount"], &by_name["followingCount"]),
        (&json!(2), &json!(0))
    );

    // Taken back twice is taken back once.
    for _ in 0..2 {
        let (status, body) = api.unfollow(&alice, &bob).await;
        assert_eq!(status, 204, "{body}");
    }
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &bob).await, (1, 0));
    assert_eq!(counts(&api, &alice).await, (0, 1));
    assert_eq!(listed(&api, &path, 10).await, vec![carol.clone()]);
    assert_eq!(
        listed(&api, &format!("/users/{alice}/following"), 10).await,
        vec![carol.clone()]
    );
    // A rename shows in the lists at once: they name from the profiles.
    api.rename(&carol, "follow_caroline").await;
    let (_, page) = api.following(&alice).await;
    assert_eq!(page["items"][0]["username"], "follow_caroline");
}

#[tokio::test]
async fn a_bad_follow_is_a_clear_error_and_writes_nothing() {
    let api = TestApi::start().await;
    let alice = api.user("bad_follow_alice").await;
    let bob = api.user("bad_follow_bob").await;
    let before = crate::support::table_snapshot(&api).await;

    let cases = [
        (&alice, alice.as_str(), 400, "invalid_field"),
        (&alice, "user-nobody", 404, "not_found"),
        (&alice, "a%23b", 400, "bad_id"),
    ];
    for (caller, followed, want, code) in cases {
        let (status, body) = api.follow_user(caller, followed).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (want, &json!(code)),
            "{followed}: {body}"
        );
    }
    // Without a profile: 403; without a token: 401.
    let (status, _) = api.follow_user("user-no-profile", &bob).await;
    assert_eq!(status, 403);
    let (status, _) = api
        .call("POST", &format!("/users/{bob}/followers"), None, None)
        .await;
    assert_eq!(status, 401);
    // Lists of no one: 404; a bad cursor: 400.
    assert_eq!(api.get("/users/user-nobody/followers").await.0, 404);
    assert_eq!(api.get("/users/user-nobody/following").await.0, 404);
    let (status, body) = api
        .get(&format!("/users/{bob}/followers?cursor=not-a-cursor"))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("bad_cursor"))
    );
    assert_eq!(crate::support::table_snapshot(&api).await, before);

    // At the limit, a new follow is 422 and changes nothing.
    let limit = blog::store::follows::FOLLOWING_LIMIT;
    let key = blog::keys::profile(&user_id(&alice)).item();
    let set = api
        .app
        .store
        .client()
        .update_item()
        .table_name(api.app.store.table())
        .set_key(Some(key))
        .update_expression("SET followingCount = :n")
        .expression_attribute_values(
            ":n",
            aws_sdk_dynamodb::types::AttributeValue::N(limit.to_string()),
        );
    set.send().await.expect("set the count");
    let at_limit = crate::support::table_snapshot(&api).await;
    let (status, body) = api.follow_user(&alice, &bob).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("following_limit")),
        "{body}"
    );
    assert_eq!(crate::support::table_snapshot(&api).await, at_limit);
}

/// Many followers at once: every follow lands once, the shards' counts add
/// up to the profile's exactly, and the followers list pages through all of
/// them, newest first, each once.
#[tokio::test]
async fn concurrent_follows_are_each_counted_once() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let star = api.user("follow_star").await;
    let mut fans = Vec::new();
    for i in 0..40 {
        fans.push(api.user_named(format!("fan_{i:02}")).await);
    }
    // Each fan follows twice, concurrently with everyone else.
    let follows = fans.iter().flat_map(|fan| {
        let (api, star) = (&api, &star);
        [0, 1].map(move |_| async move { api.follow_user(fan, star).await.0 })
    });
    let statuses = futures::future::join_all(follows).await;
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        40,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 200),
        "{statuses:?}"
    );
    // Ten take it back, concurrently.
    let unfollows = fans[..10]
        .iter()
        .map(|fan| async { api.unfollow(fan, &star).await.0 });
    assert!(
        futures::future::join_all(unfollows)
            .await
            .iter()
            .all(|s| *s == 204)
    );
    api.settle(&mut poller).await;

    assert_eq!(counts(&api, &star).await, (30, 0));
    let listed = listed(&api, &format!("/users/{star}/followers"), 7).await;
    let unique: HashSet<&String> = listed.iter().collect();
    assert_eq!((listed.len(), unique.len()), (30, 30));
    let expected: HashSet<&String> = fans[10..].iter().collect();
    assert_eq!(unique, expected);
    // Newest first: the order the follows' times say.
    let (_, page) = api.get(&format!("/users/{star}/followers?limit=30")).await;
    let times: Vec<&str> = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["followedAt"].as_str().unwrap_or_default())
        .collect();
    let mut sorted = times.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted);
    // And the audit of the counts agrees: nothing to repair.
    let report = api.audit(false).await;
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let _: Value = page;
}

/// A follower shard's count that drifted from its entries is found by the
/// audit and repaired; the fan-out then copies the repaired count onto the
/// profile.
#[tokio::test]
async fn the_audit_finds_and_repairs_a_follower_count() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let star = api.user("audited_star").await;
    let fan = api.user("audited_fan").await;
    api.follow(&fan, &star).await;
    api.settle(&mut poller).await;
    assert!(api.audit(false).await.findings.is_empty());

    let shard = blog::store::items::follow::follower_shard(&user_id(&fan), false);
    let key = blog::keys::Key::new(
        blog::keys::followers_pk(&user_id(&star), shard),
        blog::keys::FOLLOWER_COUNT_SK,
    );
    let drift = api
        .app
        .store
        .client()
        .update_item()
        .table_name(api.app.store.table())
        .set_key(Some(key.item()))
        .update_expression("SET #c = :n, version = version + :one")
        .expression_attribute_names("#c", "count")
        .expression_attribute_values(":n", aws_sdk_dynamodb::types::AttributeValue::N("7".into()))
        .expression_attribute_values(
            ":one",
            aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
        );
    drift.send().await.expect("drift");
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &star).await, (7, 0));

    let found = api.audit(true).await;
    assert_eq!(
        found.findings,
        vec![blog::audit::Finding::FollowerCount {
            user: user_id(&star),
            shard,
            stored: 7,
            actual: 1,
        }]
    );
    assert_eq!(found.repaired, 1);
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &star).await, (1, 0));
    assert!(api.audit(false).await.findings.is_empty());
}

/// An erased account's followers go with it (their counts down, its
/// shards' entries gone, their counts emptied and left closed for a day), a
/// follow that read the profile before the erasure and commits after the
/// whole walk fails and writes nothing, and the same person's new account
/// is followed afresh: its first version is past the one its old counts
/// were closed at.
#[tokio::test]
async fn an_erased_accounts_followers_go_and_its_new_account_is_followed_anew() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let star = api.user("erased_star").await;
    let fan = api.user("erased_fan").await;
    let late = api.user("erased_late_fan").await;
    api.follow(&fan, &star).await;
    api.settle(&mut poller).await;
    // A follow that has made its reads, its writes held until after the
    // erasure.
    let (stalled, star_as_read) = (api.profile(&late).await, api.profile(&star).await);
    let (status, _) = api.erase(&star).await;
    assert_eq!(status, 204);
    // The profile is gone at once: a follow now is a 404, writing nothing.
    let before = crate::support::table_snapshot(&api).await;
    let (status, _) = api.follow_user(&fan, &star).await;
    assert_eq!(status, 404);
    assert_eq!(crate::support::table_snapshot(&api).await, before);
    api.settle(&mut poller).await;
    assert_eq!(api.profile(&fan).await.following_count, 0);
    // The stalled follow commits now, after the whole walk: refused, nothing written.
    let before = crate::support::table_snapshot(&api).await;
    let refused = api
        .app
        .store
        .requests()
        .follow_as_read(stalled, &star_as_read)
        .await;
    assert!(
        matches!(refused, Err(blog::store::StoreError::UserNotFound)),
        "{refused:?}"
    );
    assert_eq!(crate::support::table_snapshot(&api).await, before);
    let left = crate::support::partition_items(&api, &format!("FOLLOWERS#{star}#")).await;
    // Its followers list's copy is gone too.
    let windows = crate::support::partition_items(&api, &format!("FOLLOWED#{star}")).await;
    assert_eq!(windows, vec![]);
    // Nothing but the sixteen counts, emptied, closed, expiring.
    assert_eq!(left.len(), 16, "{left:?}");
    for count in &left {
        let number = |name: &str| count.get(name).and_then(|v| v.as_n().ok()).cloned();
        assert_eq!(count["SK"].as_s().ok().map(String::as_str), Some("COUNT"));
        assert_eq!(number("count").as_deref(), Some("0"), "{count:?}");
        assert!(
            number("closed").is_some() && number("expiresAt").is_some(),
            "{count:?}"
        );
    }

    let (status, body) = api.sign_up(&star, "back_star").await;
    assert_eq!(status, 201, "{body}");
    api.follow(&fan, &star).await;
    api.settle(&mut poller).await;
    let (_, profile) = api.get_user(&star).await;
    assert_eq!(profile["followerCount"], json!(1), "{profile}");
    let audit = api.audit(false).await;
    assert!(audit.findings.is_empty(), "{:#?}", audit.findings);
    // Open again: the count the follow made has no expiry.
    let opened: Vec<_> = crate::support::partition_items(&api, &format!("FOLLOWERS#{star}#"))
        .await
        .into_iter()
        .filter(|item| {
            item.get("count")
                .and_then(|c| c.as_n().ok())
                .map(String::as_str)
                == Some("1")
        })
        .collect();
    assert_eq!(opened.len(), 1, "{opened:?}");
    assert!(!opened[0].contains_key("expiresAt"), "{opened:?}");
}

/// A page of followers is a few calls whatever the shard count: the
/// fan-out's copy of the entries by time, read newest first (at most three
/// Queries of one partition), and one BatchGetItem of the names; every
/// follower once, in follow order, across push and pull shards alike; an
/// erased follower is gone at once.
#[tokio::test]
async fn a_followers_page_costs_a_few_calls_whatever_the_shards() {
    let api = TestApi::start_with(|store| store.with_pull_threshold(20)).await;
    let mut poller = api.poller();
    let star = api.user("paged_star").await;
    let mut fans = Vec::new();
    for i in 0..45 {
        let fan = api.user_named(format!("paged_fan_{i:02}")).await;
        api.follow(&fan, &star).await;
        fans.push(fan);
        // The count the pull threshold reads is the fan-out's copy.
        if i % 10 == 9 {
            api.settle(&mut poller).await;
        }
    }
    api.settle(&mut poller).await;
    let shards: HashSet<String> = crate::support::table_snapshot(&api)
        .await
        .into_iter()
        .filter_map(|item| {
            let pk = item.get("PK")?.as_s().ok()?.clone();
            let sk = item.get("SK")?.as_s().ok()?;
            (pk.starts_with(&format!("FOLLOWERS#{star}#")) && sk.starts_with("FOLLOWER#"))
                .then_some(pk)
        })
        .collect();
    assert!(
        shards
            .iter()
            .any(|pk| pk.ends_with("#08") || pk > &format!("FOLLOWERS#{star}#08")),
        "pull shards hold some: {shards:?}"
    );
    assert!(shards.len() > 8, "{shards:?}");

    api.meter.take();
    let (status, page) = api.get(&format!("/users/{star}/followers?limit=25")).await;
    let made = api.meter.take();
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["items"].as_array().map(Vec::len), Some(25));
    let queries: Vec<_> = made.iter().filter(|c| c.operation == "Query").collect();
    let batches = made
        .iter()
        .filter(|c| c.operation == "BatchGetItem")
        .count();
    assert!((1..=3).contains(&queries.len()), "{made:?}");
    assert_eq!((batches, made.len()), (1, queries.len() + 1), "{made:?}");
    // The windows read are a few KB: the page's 25 names (12.5 units and
    // the user's own profile) are most of what it costs.
    let window_units: f64 = queries.iter().map(|c| c.table).sum();
    assert!(window_units <= 1.5, "{made:?}");

    let mut newest_first = fans.clone();
    newest_first.reverse();
    for size in [1, 7, 25] {
        let path = format!("/users/{star}/followers");
        assert_eq!(
            listed(&api, &path, size).await,
            newest_first,
            "pages of {size}"
        );
    }
    // An erased follower: gone at once (their profile is), and after the
    // fan-out too (their follow and its copy are).
    let gone = fans[44].clone();
    let (status, _) = api.erase(&gone).await;
    assert_eq!(status, 204);
    let path = format!("/users/{star}/followers");
    assert_eq!(listed(&api, &path, 25).await, newest_first[1..].to_vec());
    api.settle(&mut poller).await;
    assert_eq!(listed(&api, &path, 25).await, newest_first[1..].to_vec());
    assert_eq!(counts(&api, &star).await, (44, 0));
    // Unfollowed by all but one: the emptied windows are deleted, the list
    // holds the one left; no window of the list is empty.
    for fan in &fans[1..44] {
        let (status, _) = api.unfollow(fan, &star).await;
        assert_eq!(status, 204);
    }
    api.settle(&mut poller).await;
    assert_eq!(listed(&api, &path, 25).await, [fans[0].clone()]);
    let windows = crate::support::partition_items(&api, &format!("FOLLOWED#{star}")).await;
    assert_eq!(windows.len(), 1, "{windows:?}");
}

/// A followers page is full however the follows fell into windows: two
/// dense windows first (three followers each), then windows of one (a slow
/// stream of follows), which a page's estimate from the first windows reads
/// too few of, and its last Query reads as many windows as it still needs.
#[tokio::test]
async fn a_followers_page_is_full_whatever_the_windows_hold() {
    use blog::{
        ids::FollowId,
        keys::{self, ItemType},
        store::items::follow::{WINDOW_OWNER, WINDOW_VERSION},
    };

    let api = TestApi::start().await;
    let star = api.user("window_star").await;
    let mut fans = Vec::new();
    for i in 0..30 {
        fans.push(api.user_named(format!("window_fan_{i:02}")).await);
    }
    let start_ms = 1_790_000_000_000_u64;
    // Window w (one a second, oldest first): the first 24 hold one fan
    // each, the newest two three each.
    let mut windows: Vec<Vec<&String>> = fans[..24].iter().map(|fan| vec![fan]).collect();
    windows.push(fans[24..27].iter().collect());
    windows.push(fans[27..].iter().collect());
    let mut items = Vec::new();
    let mut newest_first = Vec::new();
    for (w, held) in windows.iter().enumerate() {
        let mut item = blog::store::Item::new();
        let mut key = None;
        for (k, fan) in held.iter().enumerate() {
            let ms = start_ms + 1_000 * w as u64 + k as u64;
            let follow = FollowId::parse(&ulid::Ulid::from_parts(ms, 7).to_string()).expect("id");
            key = Some(keys::follower_window(&user_id(&star), &follow));
            item.insert(keys::follower_attribute(&follow), s(fan));
            newest_first.push((ms, (*fan).clone()));
        }
        let key = key.expect("a window holds one at least");
        item.insert(keys::PK.to_owned(), s(&key.pk));
        item.insert(keys::SK.to_owned(), s(&key.sk));
        item.insert(
            keys::TYPE.to_owned(),
            ItemType::FollowerWindow.attribute().expect("type"),
        );
        item.insert(WINDOW_OWNER.to_owned(), s(&star));
        item.insert(WINDOW_VERSION.to_owned(), n(1));
        items.push(item);
    }
    crate::support::load(&api, items).await;
    newest_first.sort();
    let newest_first: Vec<String> = newest_first.into_iter().rev().map(|(_, fan)| fan).collect();

    api.meter.take();
    let (status, page) = api.get(&format!("/users/{star}/followers?limit=25")).await;
    let made = api.meter.take();
    assert_eq!(status, 200, "{page}");
    let shown: Vec<String> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|f| f["userId"].as_str().expect("a follower").to_owned())
        .collect();
    assert_eq!(shown, newest_first[..25], "a full page, newest first");
    let queries = made.iter().filter(|c| c.operation == "Query").count();
    assert!((1..=3).contains(&queries), "{made:?}");
    // The rest on the next page.
    let next = page["nextCursor"].as_str().expect("a next page");
    let (status, rest) = api
        .get(&format!("/users/{star}/followers?limit=25&cursor={next}"))
        .await;
    assert_eq!(status, 200, "{rest}");
    let rest: Vec<&str> = rest["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|f| f["userId"].as_str())
        .collect();
    assert_eq!(rest, newest_first[25..]);
}

fn s(text: &str) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::S(text.to_owned())
}

fn n(number: u64) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::N(number.to_string())
}
