//! No request the code builds passes one of DynamoDB's own limits (an
//! expression over 4 KB, a transaction over 100 items, a batch write over
//! 25, a batch get over 100 keys), at the widest case of each request whose
//! size grows with the data: a hot post widened to its 128 shards, liked,
//! commented, its liker erased, then deleted; an account whose followers
//! fill all 16 follower shards, followed, posting, then erased. The table
//! layer refuses such a request before sending it (DynamoDB Local takes
//! some); here it must never have had to, and the largest request of each
//! kind it sent is within the limit.

use blog::keys::FOLLOWER_SHARDS;
use blog::store::{
    Limit, Sizes,
    items::counter::{HOT_SHARDS, MAX_SHARDS},
};
use serde_json::json;

use crate::support::{TestApi, post_id};

/// Every kind of request within its limit, and none refused; the peaks, for
/// the test's output.
fn within_limits(sizes: &Sizes) -> Vec<(Limit, usize)> {
    let peaks: Vec<(Limit, usize)> = Limit::ALL.iter().map(|&l| (l, sizes.peak(l))).collect();
    eprintln!("largest requests: {peaks:?}");
    assert_eq!(sizes.refused(), 0, "requests refused: {peaks:?}");
    for (limit, peak) in &peaks {
        assert!(*peak <= limit.max(), "{limit:?}: {peak}");
    }
    peaks
}

fn peak(peaks: &[(Limit, usize)], limit: Limit) -> usize {
    peaks
        .iter()
        .find(|(l, _)| *l == limit)
        .map_or(0, |(_, p)| *p)
}

/// The widest hot post (128 shards) through its whole life: made hot,
/// widened 16 → 128 (the counters of the widening put at once), liked
/// and commented in its shards, its counts added by the fan-out (128
/// shards' counters onto their 8 groups, those onto the post), one of its
/// likers erased, then deleted (every shard's
/// counter closed and every shard emptied, its notifications dropped).
#[tokio::test]
async fn the_widest_hot_post_lives_and_goes_within_dynamodbs_limits() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("viral").await;
    let post = api.post(&author, "Widest", "everyone").await;
    let early = api.user("early").await;
    api.like(&early, &post).await;
    api.comment(&early, &post, "first").await;
    api.make_hot(&post).await;
    let id = post_id(&post);
    let requests = api.app.store.requests();
    assert_eq!(
        requests.widen(&id, HOT_SHARDS).await.expect("widen"),
        MAX_SHARDS
    );
    assert_eq!(
        requests.widen(&id, MAX_SHARDS).await.expect("no wider"),
        MAX_SHARDS
    );
    let fans: Vec<String> =
        futures::future::join_all((0..60).map(|i| api.user_named(format!("fan{i:02}")))).await;
    for (i, fan) in fans.iter().enumerate() {
        api.like(fan, &post).await;
        if i % 3 == 0 {
            api.comment(fan, &post, "wow").await;
        }
    }
    api.settle(&mut poller).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(61), json!(21)),
        "{got}"
    );

    let (status, _) = api.erase(&fans[0]).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(60), json!(20)),
        "{got}"
    );

    let (status, _) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    let left: Vec<_> = crate::support::table_snapshot(&api)
        .await
        .into_iter()
        .filter_map(|item| item.get("PK").and_then(|pk| pk.as_s().ok()).cloned())
        .filter(|pk| pk.starts_with(&format!("POST#{post}")))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "every shard emptied");
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");

    let peaks = within_limits(api.app.store.db().sizes());
    // The 128 shards' count adds go through their 8 groups (16 shards an
    // add at most), the groups' onto the post: no expression near the
    // 1.3 KB that 32 shards onto the post made.
    assert!(
        peak(&peaks, Limit::ExpressionBytes) < 1024,
        "the 128 shards' count adds: {peaks:?}"
    );
}

/// An account whose followers fill every follower shard (8 push shards,
/// then 8 pull shards past the pull threshold), posting (a delivery per
/// push shard), its follower counts added by the fan-out (16 shards'
/// counts onto one profile), then erased (every shard walked, its follower
/// entries, windows and counts taken back in batches).
#[tokio::test]
async fn an_account_with_every_follower_shard_is_erased_within_dynamodbs_limits() {
    let api = TestApi::start_with(|store| store.with_pull_threshold(40)).await;
    let mut poller = api.poller();
    let famous = api.user("famous").await;
    let followers: Vec<String> =
        futures::future::join_all((0..100).map(|i| api.user_named(format!("follower{i:03}"))))
            .await;
    // The pull threshold reads the count the fan-out keeps: the first 50
    // are push follows, the others pull follows once it has counted them.
    for (i, follower) in followers.iter().enumerate() {
        if i == 50 {
            api.settle(&mut poller).await;
        }
        api.follow(follower, &famous).await;
    }
    api.post(&famous, "Hello", "all of you").await;
    api.settle(&mut poller).await;
    let profile = api.profile(&famous).await;
    assert_eq!(profile.follower_count(), 100);
    let shards: std::collections::BTreeSet<String> = crate::support::table_snapshot(&api)
        .await
        .into_iter()
        .filter_map(|item| item.get("PK").and_then(|pk| pk.as_s().ok()).cloned())
        .filter(|pk| pk.starts_with(&format!("FOLLOWERS#{famous}#")))
        .collect();
    assert_eq!(shards.len(), usize::from(FOLLOWER_SHARDS), "{shards:?}");

    let (status, _) = api.erase(&famous).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    // What is left of its followers: each shard's count, closed at 0 (kept
    // a day, so that a follow that read the profile before cannot land).
    let left: Vec<(String, String, String)> = crate::support::table_snapshot(&api)
        .await
        .into_iter()
        .filter(|item| {
            item.get("PK")
                .and_then(|pk| pk.as_s().ok())
                .is_some_and(|pk| {
                    pk.starts_with(&format!("FOLLOWERS#{famous}#"))
                        || pk == &format!("FOLLOWED#{famous}")
                })
        })
        .map(|item| {
            let text = |name: &str| match item.get(name) {
                Some(aws_sdk_dynamodb::types::AttributeValue::S(s)) => s.clone(),
                Some(aws_sdk_dynamodb::types::AttributeValue::N(n)) => n.clone(),
                _ => String::new(),
            };
            (text("PK"), text("type"), text("count"))
        })
        .collect();
    assert_eq!(left.len(), usize::from(FOLLOWER_SHARDS), "{left:?}");
    assert!(
        left.iter()
            .all(|(_, kind, count)| kind == "followerCount" && count == "0"),
        "{left:?}"
    );
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");

    // Batched, never past DynamoDB's 25 (how full the largest batch is
    // depends on where the walk's pages and pauses fall).
    let peaks = within_limits(api.app.store.db().sizes());
    let batch = peak(&peaks, Limit::BatchWriteItems);
    assert!(
        (2..=Limit::BatchWriteItems.max()).contains(&batch),
        "100 followers' entries go in batches of up to 25: {peaks:?}"
    );
}

/// A quiet post's comments each leave a note in its author's notifications:
/// deleting the post takes 40 of them out in full batch writes of 25 (a
/// page of keys at a time), and erasing the author takes out the rest.
#[tokio::test]
async fn a_posts_notifications_go_in_batches_within_dynamodbs_limits() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let post = api.post(&author, "Talked about", "a lot").await;
    let kept = api.post(&author, "Also talked about", "a bit").await;
    let readers: Vec<String> =
        futures::future::join_all((0..40).map(|i| api.user_named(format!("reader{i:02}")))).await;
    for reader in &readers {
        api.comment(reader, &post, "a thought").await;
    }
    for reader in &readers[..30] {
        api.comment(reader, &kept, "another").await;
        api.like(reader, &kept).await;
    }
    api.settle(&mut poller).await;
    let notes = || async {
        crate::support::table_snapshot(&api)
            .await
            .into_iter()
            .filter(|item| {
                item.get("PK").and_then(|pk| pk.as_s().ok()) == Some(&format!("NOTIFY#{author}"))
            })
            .count()
    };
    // 70 comment notes and the likes' group.
    assert_eq!(notes().await, 71);

    let (status, _) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    assert_eq!(notes().await, 31, "the deleted post's 40 notes out");
    let (status, _) = api.erase(&author).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    assert_eq!(notes().await, 0, "the erased author's notifications out");

    let peaks = within_limits(api.app.store.db().sizes());
    assert_eq!(
        peak(&peaks, Limit::BatchWriteItems),
        Limit::BatchWriteItems.max(),
        "full batches: {peaks:?}"
    );
}
