//! What a like and a comment cost as DynamoDB bills them, fan-out included,
//! computed from the items they write by the published rules: a write costs
//! 1 WCU per KB (rounded up) of the larger of the item before and after, on
//! the table and again on each index whose entry it writes; a transactional
//! write costs twice that on the table (`local::billing`). DynamoDB Local's
//! own figures for transactions follow other rules; they are printed beside.
//!
//! The point of splitting the post from its content: the cost of a like does
//! not grow with the post, because no like or comment rewrites the text.

use aws_sdk_dynamodb::types::AttributeValue;
use blog::{
    keys::{self, FEED_PK, PK},
    store::{
        Item,
        meter::Call,
        size::{item_size, read_units},
    },
};
use local::billing::{Rate, Shape, Snapshot, billed_writes};

use crate::support::{TestApi, post_id, table_snapshot};

async fn snapshot(api: &TestApi) -> Snapshot {
    Snapshot::new(&Shape::single_table(), table_snapshot(api).await)
}

/// Billed write units of a request (its transaction) and its fan-out (plain
/// writes, and 1 WCU for each write its condition refused), from snapshots
/// before the request, after it, and after the fan-out.
fn billed(before: &Snapshot, answered: &Snapshot, settled: &Snapshot, fanout: &[Call]) -> u64 {
    let shape = Shape::single_table();
    let refused = fanout.iter().filter(|c| c.failed_condition()).count() as u64;
    billed_writes(&shape, before, answered, Rate::Transactional)
        + billed_writes(&shape, answered, settled, Rate::Standard)
        + refused
}

/// DynamoDB Local's own figure for the writes among `calls`.
fn local_writes(calls: &[Call]) -> f64 {
    calls
        .iter()
        .filter(|c| !["DescribeTable", "Scan", "Query"].contains(&c.operation.as_str()))
        .filter(|c| !c.operation.starts_with("Get"))
        .map(Call::total)
        .sum()
}

/// A like and a comment on a post of `length` characters: billed units, and
/// what DynamoDB Local reported, fan-out included.
async fn costs(length: usize) -> [(u64, f64); 2] {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "a post", &"本".repeat(length)).await;
    api.settle(&mut poller).await;
    let mut out = [(0, 0.0); 2];
    for (i, what) in ["like", "comment"].into_iter().enumerate() {
        let before = snapshot(&api).await;
        api.meter.take();
        let (status, reply) = match what {
            "like" => api.like_post(&fan, &post).await,
            _ => api.comment_on(&fan, &post, "nice post").await,
        };
        assert_eq!(status, 201, "{reply}");
        let request = api.meter.take();
        let answered = snapshot(&api).await;
        api.meter.take();
        api.settle(&mut poller).await;
        let fanout = api.meter.take();
        let settled = snapshot(&api).await;
        let local = local_writes(&request) + local_writes(&fanout);
        out[i] = (billed(&before, &answered, &settled, &fanout), local);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_like_and_a_comment_cost_the_same_at_any_post_length() {
    let (short, long) = tokio::join!(costs(20), costs(40 * 1024 / 3));
    for (what, short, long) in [("like", short[0], long[0]), ("comment", short[1], long[1])] {
        println!(
            "{what}: {} WCU billed on a short post, {} on a 40 KB one \
             (DynamoDB Local reports {} and {} write units)",
            short.0, long.0, short.1, long.1
        );
        assert_eq!(short.0, long.0, "{what}: the post's length costs nothing");
        assert!(short.0 <= 11, "{what}: {} WCU billed", short.0);
    }
    // The floor of this design: a like writes its mark (in its liker's
    // partition), itself and the post's count in one transaction (2 × 3),
    // GSI1 entries of the like and the post (2), and the feed copy (1); and
    // the author's notification
    // (2: its likes group and its GSI1 place, or the comment's note and its
    // GSI1 entry).
    assert_eq!(short[0].0, 11, "like");
    assert_eq!(short[1].0, 9, "comment");
}

/// The fan-out of a new post once the feed is full: its entry, the feed's
/// count, and its share of the trim that runs once every 20 posts (a read of
/// the feed's keys, the floor, 20 deletes). Billed from the feed partition's
/// items before and after each post.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_posts_fan_out_costs_at_most_four_units_with_a_full_feed() {
    const MEASURED: usize = 20;
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let authors =
        futures::future::join_all((0..5).map(|i| api.user_named(format!("writer{i}")))).await;
    for round in 0..25 {
        futures::future::join_all(authors.iter().map(|a| api.post(a, "filler", "text"))).await;
        if round % 5 == 4 {
            api.settle(&mut poller).await;
        }
    }
    api.settle(&mut poller).await;
    let feed = |items: Vec<Item>| {
        Snapshot::new(
            &Shape::single_table(),
            items
                .into_iter()
                .filter(|i| i.get(PK) == Some(&AttributeValue::S(FEED_PK.into()))),
        )
    };
    let mut units = 0;
    let mut local = 0.0;
    for i in 0..MEASURED {
        let before = feed(table_snapshot(&api).await);
        api.post(&authors[i % authors.len()], format!("measured {i}"), "本文")
            .await;
        api.meter.take();
        api.settle(&mut poller).await;
        let fanout = api.meter.take();
        local += local_writes(&fanout);
        let refused = fanout.iter().filter(|c| c.failed_condition()).count() as u64;
        let after = feed(table_snapshot(&api).await);
        units += billed_writes(&Shape::single_table(), &before, &after, Rate::Standard) + refused;
    }
    let per_post = units as f64 / MEASURED as f64;
    println!(
        "a new post's fan-out with a full feed: {per_post} WCU billed on average over \
         {MEASURED} posts ({units} in all; DynamoDB Local reports {local} write units)"
    );
    assert!(per_post <= 4.0, "{per_post} WCU a post");
}

/// Q2 of a 4 KB post: one Query returns the post item and its content, and
/// DynamoDB rounds their total size up to 4 KB once: 1 read unit eventually
/// consistent, where two GetItems would round each item up on its own.
#[tokio::test]
async fn a_4_kb_post_reads_in_one_call_for_at_most_2_units() {
    let api = TestApi::start().await;
    let author = api.user("reader").await;
    let post = api.post(&author, "four KB", &"x".repeat(4096)).await;
    let pk = AttributeValue::S(keys::post_pk(&post_id(&post)));
    let both: usize = table_snapshot(&api)
        .await
        .iter()
        .filter(|item| item.get(PK) == Some(&pk))
        .map(item_size)
        .sum();
    api.meter.take();
    let (status, got) = api.get_post(&post).await;
    assert_eq!(status, 200, "{got}");
    let calls = api.meter.take();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].operation, "Query");
    let units = calls[0].total();
    println!("Q2 of a 4 KB post: {both} bytes in two items, {units} read units");
    assert_eq!(units, read_units(both, false));
    assert!(units <= 2.0, "{units}");
}
