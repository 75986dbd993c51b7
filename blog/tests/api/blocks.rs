//! Blocks: blocking is once a pair and unblocking idempotent; the list is the
//! caller's own, newest first, paged; a blocked user can neither follow the
//! blocker nor like or comment on their posts (quiet or hot), and nothing is
//! written when they try; a block ends the follows both ways with every
//! count right; the blocked user's comments leave the blocker's posts' lists
//! and come back with the unblock; an erasure takes the blocks the account
//! made, and its export lists them.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};

use blog::{
    keys::{self, PK, SK},
    store::{items::block::MAX_BLOCKS, table::Expr, table::Landed, table::Write},
};

use crate::support::{TestApi, table_snapshot, user_id};

/// The error code of an answer.
fn code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

/// The user ids a page of blocks (or any list) names, in order.
fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| item["userId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The sort keys of the table's items in `user`'s partition that begin
/// with `prefix`.
async fn user_items(api: &TestApi, user: &str, prefix: &str) -> Vec<String> {
    let pk = keys::user_pk(&user_id(user));
    table_snapshot(api)
        .await
        .iter()
        .filter(|item| item.get(PK).and_then(|v| v.as_s().ok()) == Some(&pk))
        .filter_map(|item| item.get(SK).and_then(|v| v.as_s().ok()).cloned())
        .filter(|sk| sk.starts_with(prefix))
        .collect()
}

/// The ids of a page of comments, in order.
fn comment_ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["commentId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Every comment `post`'s list shows, one a page, to its end.
async fn every_comment(api: &TestApi, post: &str) -> Vec<String> {
    let path = format!("/posts/{post}/comments?limit=1");
    let items = api.list(path).items().await;
    comment_ids(&json!({ "items": items }))
}

async fn counts(api: &TestApi, user: &str) -> (u64, u64) {
    let (status, profile) = api.get_user(user).await;
    assert_eq!(status, 200, "{profile}");
    (
        profile["followerCount"].as_u64().unwrap_or(u64::MAX),
        profile["followingCount"].as_u64().unwrap_or(u64::MAX),
    )
}

#[tokio::test]
async fn blocking_is_once_a_pair_and_unblocking_is_idempotent() {
    let api = TestApi::start().await;
    let alice = api.user("block_alice").await;
    let bob = api.user("block_bob").await;

    let (status, first) = api.block(&alice, &bob).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(
        (&first["userId"], &first["username"]),
        (&json!(bob), &json!("block_bob"))
    );
    assert!(first["blockedAt"].is_string(), "{first}");
    // Twice is once: the same block, 200, and one on the count.
    let (status, again) = api.block(&alice, &bob).await;
    assert_eq!((status, &again), (200, &first));
    assert_eq!(api.profile(&alice).await.block_count, 1);
    let (status, page) = api.blocks(&alice).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["items"], json!([first]));
    assert_eq!(page["nextCursor"], Value::Null);

    // Unblocking twice is unblocking once: 204 both times, the count back.
    assert_eq!(api.unblock(&alice, &bob).await.0, 204);
    assert_eq!(api.unblock(&alice, &bob).await.0, 204);
    assert_eq!(api.profile(&alice).await.block_count, 0);
    assert_eq!(api.blocks(&alice).await.1["items"], json!([]));
    assert!(
        user_items(&api, &alice, keys::BLOCKS_PREFIX)
            .await
            .is_empty()
    );
    assert!(
        user_items(&api, &bob, keys::BLOCKED_BY_PREFIX)
            .await
            .is_empty()
    );
    // And blocking again is a new block.
    assert_eq!(api.block(&alice, &bob).await.0, 201);
}

#[tokio::test]
async fn bad_blocks_are_refused_and_change_nothing() {
    let api = TestApi::start().await;
    let alice = api.user("bad_block_alice").await;
    let before = table_snapshot(&api).await;
    // Yourself: 400, before anything is read.
    let (status, body) = api.block(&alice, &alice).await;
    assert_eq!(
        (status, code(&body)),
        (400, Some("invalid_field")),
        "{body}"
    );
    // No such user: 404.
    let (status, body) = api.block(&alice, "no-such-user").await;
    assert_eq!((status, code(&body)), (404, Some("not_found")), "{body}");
    // Ids no user can have: 400 `bad_id`, never a key.
    for hostile in ["USER%23x", "a%23b", "with%20space", "%C3%BC", "a%2Fb"] {
        for method in ["PUT", "DELETE"] {
            let path = format!("/blocks/{hostile}");
            let (status, body) = api.call(method, &path, Some(&alice), None).await;
            assert_eq!(
                (status, code(&body)),
                (400, Some("bad_id")),
                "{method} {path}: {body}"
            );
        }
    }
    // A body: refused as every bodiless write's.
    let (status, _) = api
        .call(
            "PUT",
            &format!("/blocks/{}", api.user("bad_block_bob").await),
            Some(&alice),
            Some(json!({ "userId": "someone" })),
        )
        .await;
    assert_eq!(status, 400);
    // A caller without a profile can block no one.
    let bob = api.user("bad_block_carol").await;
    let before_stranger = table_snapshot(&api).await;
    let (status, body) = api.block("stranger-sub", &bob).await;
    assert_eq!((status, code(&body)), (403, Some("forbidden")), "{body}");
    assert_eq!(table_snapshot(&api).await, before_stranger);
    // Only the users made since: no block, no mark, no count.
    let after = table_snapshot(&api).await;
    assert!(
        after.iter().all(|item| {
            let sk = item.get(SK).and_then(|v| v.as_s().ok()).cloned();
            !sk.is_some_and(|sk| sk.starts_with("~BLOCK"))
        }),
        "a block was written"
    );
    assert!(after.len() > before.len());
    assert_eq!(api.profile(&alice).await.block_count, 0);
}

#[tokio::test]
async fn at_the_limit_a_block_is_refused() {
    let api = TestApi::start().await;
    let alice = api.user("limit_alice").await;
    let bob = api.user("limit_bob").await;
    // As if alice had blocked MAX_BLOCKS users.
    let full = Write::update(
        keys::profile(&user_id(&alice)).item(),
        Expr::new("SET blockCount = :n").value(":n", AttributeValue::N(MAX_BLOCKS.to_string())),
        Landed::Untold,
    );
    api.app
        .store
        .db()
        .write("a full block count", &full)
        .await
        .expect("count set");
    let before = table_snapshot(&api).await;
    let (status, body) = api.block(&alice, &bob).await;
    assert_eq!((status, code(&body)), (422, Some("block_limit")), "{body}");
    assert_eq!(table_snapshot(&api).await, before);
    // Unblocking someone makes room.
    let full_less_one = Write::update(
        keys::profile(&user_id(&alice)).item(),
        Expr::new("SET blockCount = :n")
            .value(":n", AttributeValue::N((MAX_BLOCKS - 1).to_string())),
        Landed::Untold,
    );
    api.app
        .store
        .db()
        .write("a block count one below", &full_less_one)
        .await
        .expect("count set");
    assert_eq!(api.block(&alice, &bob).await.0, 201);
    assert_eq!(api.profile(&alice).await.block_count, MAX_BLOCKS);
}

#[tokio::test]
async fn the_list_is_the_callers_own_newest_first_and_paged() {
    let api = TestApi::start().await;
    let alice = api.user("list_alice").await;
    let other = api.user("list_other").await;
    let mut blocked = Vec::new();
    for n in 0..5 {
        let user = api.user(&format!("list_blocked_{n}")).await;
        assert_eq!(api.block(&alice, &user).await.0, 201);
        blocked.push(user);
    }
    blocked.reverse();
    // No token: 401; another caller sees their own list, never alice's.
    let (status, _) = api.call("GET", "/blocks", None, None).await;
    assert_eq!(status, 401);
    let (status, theirs) = api.blocks(&other).await;
    assert_eq!((status, &theirs["items"]), (200, &json!([])));
    // Two at a time, newest first, to the end.
    let mut seen = Vec::new();
    let pages = api
        .list("/blocks?limit=2")
        .by(&alice)
        .each_page(|page| {
            let page_ids = ids(page);
            assert!(page_ids.len() <= 2, "{page}");
            seen.extend(page_ids);
        })
        .await;
    assert_eq!(pages, 3);
    assert_eq!(seen, blocked);
    // A cursor of another list, a bad limit: 400.
    let (_, followers) = api.followers(&alice).await;
    assert_eq!(followers["nextCursor"], Value::Null);
    for query in ["limit=0", "limit=101", "cursor=not-a-cursor"] {
        let path = format!("/blocks?{query}");
        let (status, body) = api.call("GET", &path, Some(&alice), None).await;
        assert_eq!(status, 400, "{path}: {body}");
    }
    let (_, first) = api.call("GET", "/blocks?limit=2", Some(&alice), None).await;
    let cursor = first["nextCursor"].as_str().unwrap_or_default().to_owned();
    // Alice's cursor is no one else's: it names her list.
    let path = format!("/blocks?cursor={cursor}");
    let (status, body) = api.call("GET", &path, Some(&other), None).await;
    assert_eq!((status, code(&body)), (400, Some("bad_cursor")), "{body}");
    // A blocked user's account erased: left out of the list (the block stays).
    let gone = blocked[0].clone();
    assert_eq!(api.erase(&gone).await.0, 204);
    let listed = api.list("/blocks").by(&alice).items().await;
    assert_eq!(listed.len(), 4);
    assert!(listed.iter().all(|b| b["userId"] != json!(gone)));
}

#[tokio::test]
async fn a_blocked_user_can_neither_follow_nor_like_nor_comment_and_writes_nothing() {
    let api = TestApi::start().await;
    let alice = api.user("refuse_alice").await;
    let bob = api.user("refuse_bob").await;
    let carol = api.user("refuse_carol").await;
    let quiet = api.post(&alice, "quiet", "a quiet post").await;
    let hot = api.post(&alice, "hot", "a hot post").await;
    // Bob knows both posts' authors before the block (this process's memory).
    api.like(&bob, &hot).await;
    assert_eq!(api.unlike(&bob, &hot).await.0, 204);
    assert_eq!(api.block(&alice, &bob).await.0, 201);
    api.make_hot(&hot).await;

    let refused = |what: &'static str, (status, body): (u16, Value)| {
        assert_eq!(
            (status, code(&body)),
            (403, Some("blocked")),
            "{what}: {body}"
        );
    };
    let before = table_snapshot(&api).await;
    refused("follow", api.follow_user(&bob, &alice).await);
    refused("like a quiet post", api.like_post(&bob, &quiet).await);
    refused(
        "comment on a quiet post",
        api.comment_on(&bob, &quiet, "hi").await,
    );
    refused("like a hot post", api.like_post(&bob, &hot).await);
    refused(
        "comment on a hot post",
        api.comment_on(&bob, &hot, "hi").await,
    );
    assert_eq!(table_snapshot(&api).await, before, "a refused write wrote");

    // Others may; and the blocker may still follow, like and comment.
    assert_eq!(api.like_post(&carol, &quiet).await.0, 201);
    assert_eq!(api.like_post(&carol, &hot).await.0, 201);
    let bobs = api.post(&bob, "bob's", "by bob").await;
    assert_eq!(api.like_post(&alice, &bobs).await.0, 201);
    assert_eq!(api.follow_user(&alice, &bob).await.0, 201);

    // Unblocked: all of it goes through again.
    assert_eq!(api.unblock(&alice, &bob).await.0, 204);
    assert_eq!(api.follow_user(&bob, &alice).await.0, 201);
    assert_eq!(api.like_post(&bob, &quiet).await.0, 201);
    assert_eq!(api.like_post(&bob, &hot).await.0, 201);
    assert_eq!(api.comment_on(&bob, &quiet, "back").await.0, 201);
    assert_eq!(api.comment_on(&bob, &hot, "back").await.0, 201);
}

#[tokio::test]
async fn a_block_of_a_post_whose_author_this_process_has_not_met_is_refused_too() {
    let api = TestApi::start().await;
    let alice = api.user("unmet_alice").await;
    let bob = api.user("unmet_bob").await;
    assert_eq!(api.block(&alice, &bob).await.0, 201);
    // Posts made after the block: their authors are read on the first like.
    let quiet = api.post(&alice, "quiet", "new").await;
    let hot = api.post(&alice, "hot", "new").await;
    api.make_hot(&hot).await;
    let before = table_snapshot(&api).await;
    for post in [&quiet, &hot] {
        let (status, body) = api.like_post(&bob, post).await;
        assert_eq!((status, code(&body)), (403, Some("blocked")), "{body}");
        let (status, body) = api.comment_on(&bob, post, "x").await;
        assert_eq!((status, code(&body)), (403, Some("blocked")), "{body}");
    }
    assert_eq!(table_snapshot(&api).await, before);
    // A post that does not exist is still a 404.
    let (status, _) = api.like_post(&bob, "01J00000000000000000000000").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn blocking_ends_the_follows_both_ways_with_every_count_right() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let alice = api.user("ends_alice").await;
    let bob = api.user("ends_bob").await;
    let carol = api.user("ends_carol").await;
    api.follow(&alice, &bob).await;
    api.follow(&bob, &alice).await;
    api.follow(&carol, &alice).await;
    let post = api.post(&alice, "before", "the block").await;
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &alice).await, (2, 1));
    assert_eq!(counts(&api, &bob).await, (1, 1));

    assert_eq!(api.block(&alice, &bob).await.0, 201);
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &alice).await, (1, 0));
    assert_eq!(counts(&api, &bob).await, (0, 0));
    let followers: Vec<String> = ids(&api.followers(&alice).await.1);
    assert_eq!(followers, vec![carol.clone()]);
    assert_eq!(ids(&api.following(&bob).await.1), Vec::<String>::new());
    assert_eq!(ids(&api.following(&alice).await.1), Vec::<String>::new());
    // Bob's home no longer shows alice's posts.
    let (_, home) = api.home(&bob).await;
    assert!(
        home["items"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|p| p["postId"] != json!(post)),
        "{home}"
    );
    // Blocked again (an answer lost): nothing left to end, the counts hold.
    assert_eq!(api.block(&alice, &bob).await.0, 200);
    api.settle(&mut poller).await;
    assert_eq!(counts(&api, &alice).await, (1, 0));
    assert_eq!(counts(&api, &bob).await, (0, 0));
    assert_eq!(api.audit(false).await.findings.len(), 0);
}

#[tokio::test]
async fn the_blocked_users_comments_leave_the_blockers_posts_and_come_back() {
    let api = TestApi::start().await;
    let alice = api.user("hide_alice").await;
    let bob = api.user("hide_bob").await;
    let carol = api.user("hide_carol").await;
    let post = api.post(&alice, "mine", "comments welcome").await;
    let others = api.post(&carol, "carol's", "comments welcome").await;
    let first = api.comment(&bob, &post, "from bob").await;
    let second = api.comment(&carol, &post, "from carol").await;
    let third = api.comment(&bob, &post, "bob again").await;
    let own = api.comment(&alice, &post, "from alice").await;
    let elsewhere = api.comment(&bob, &others, "bob on carol's").await;
    assert_eq!(
        every_comment(&api, &post).await,
        vec![first.clone(), second.clone(), third.clone(), own.clone()]
    );

    assert_eq!(api.block(&alice, &bob).await.0, 201);
    // At once, on every page (one at a time: a page of bob's is empty, its
    // cursor going on), and only on alice's posts.
    assert_eq!(
        every_comment(&api, &post).await,
        vec![second.clone(), own.clone()]
    );
    let (status, page) = api.post_comments(&post).await;
    assert_eq!(status, 200);
    assert_eq!(comment_ids(&page), vec![second.clone(), own.clone()]);
    assert_eq!(
        comment_ids(&api.post_comments(&others).await.1),
        vec![elsewhere.clone()]
    );
    // The comments are still there: the post's count and bob's export.
    assert_eq!(api.get_post(&post).await.1["commentCount"], json!(4));

    assert_eq!(api.unblock(&alice, &bob).await.0, 204);
    assert_eq!(
        every_comment(&api, &post).await,
        vec![first, second, third, own]
    );
}

#[tokio::test]
async fn an_erasure_takes_the_blocks_the_account_made_and_the_export_lists_them() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let alice = api.user("erase_alice").await;
    let bob = api.user("erase_bob").await;
    let carol = api.user("erase_carol").await;
    let dave = api.user("erase_dave").await;
    assert_eq!(api.block(&alice, &bob).await.0, 201);
    let (_, second) = api.block(&alice, &carol).await;
    assert_eq!(api.block(&dave, &alice).await.0, 201);

    // The export lists whom she blocks, with when.
    let exported = api
        .list(format!("/users/{alice}/export"))
        .by(&alice)
        .items()
        .await;
    let blocks: Vec<&Value> = exported.iter().filter_map(|i| i.get("block")).collect();
    assert_eq!(blocks.len(), 2, "{exported:?}");
    assert!(
        blocks.contains(&&json!({ "userId": carol, "blockedAt": second["blockedAt"] })),
        "{blocks:?}"
    );
    // No one else may ask for it.
    assert_eq!(api.export_as(&bob, &alice, "").await.0, 403);

    assert_eq!(api.erase(&alice).await.0, 204);
    api.settle(&mut poller).await;
    // Her blocks and their marks are gone.
    assert!(
        user_items(&api, &alice, keys::BLOCKS_PREFIX)
            .await
            .is_empty()
    );
    for blocked in [&bob, &carol] {
        assert!(
            user_items(&api, blocked, keys::BLOCKED_BY_PREFIX)
                .await
                .is_empty()
        );
    }
    // Dave's block of her is dave's: it stays (his list leaves her out while
    // she has no profile), and holds against her identity's new account.
    assert_eq!(
        user_items(&api, &dave, keys::BLOCKS_PREFIX).await,
        vec![format!("{}{alice}", keys::BLOCKS_PREFIX)]
    );
    assert_eq!(api.blocks(&dave).await.1["items"], json!([]));
    let (status, body) = api.sign_up(&alice, "erase_alice_again").await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = api.follow_user(&alice, &dave).await;
    assert_eq!((status, code(&body)), (403, Some("blocked")), "{body}");
    // And bob, no longer blocked, may follow her new account.
    assert_eq!(api.follow_user(&bob, &alice).await.0, 201);
}
