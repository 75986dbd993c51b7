//! Posts turned hot by the rate their likes and comments come at, before
//! their partition refuses anything (`store::memory::WriteRates`, and the
//! fan-out's view of every instance's likes, `fanout::rate`), on a DynamoDB
//! that enforces its per-partition limits (the `hostile` proxy's, scaled).
//! The throttle that turns a post hot when the rate did not is `viral.rs`'.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use blog::store::Backoff;
use hostile::PartitionLimits;
use serde_json::json;

use crate::{
    scene::{Cast, Scene},
    support::behind_proxy_with,
    viral::{Answers, COMMENT_EVERY, SCALE, in_shards, like_and_more, shards_of},
};

/// A post whose likes come faster and faster, from half a like a second to
/// 30 (3.6 times what its quiet partition takes at 0.05 of DynamoDB's
/// limits) in 4 seconds, then 30 a second for 2 more, with a comment every
/// fifth like and an unlike every tenth: the store sees the rate its likes
/// and comments come at, turns the post hot while its partition still has
/// room and widens it past 16 shards at 16 times that rate
/// ([`blog::store::memory::WriteRates`], scaled with the limits), so no
/// request meets a throttle, none answers 503, and every count ends exact.
/// (Without the rate, the same run meets the partition's limit and turns
/// the post hot at its first throttle.)
#[tokio::test]
async fn a_post_liked_ever_faster_turns_hot_before_its_partition_refuses_anything() {
    const FROM: f64 = 0.5;
    const TO: f64 = 30.0;
    const RAMP: f64 = 4.0;
    const HOLD: f64 = 2.0;
    let hot_rate = blog::store::memory::HOT_WRITES_PER_SECOND * SCALE;
    let (proxy, api) = behind_proxy_with(Backoff::default(), |store| {
        store.with_hot_rate(Some(hot_rate))
    })
    .await;
    let api = Arc::new(api);
    let ramp_likes = (FROM + TO) / 2.0 * RAMP;
    let likes = (ramp_likes + TO * HOLD) as usize;
    let cast = Cast {
        author: "rising",
        title: "Catching on",
        content: "slowly, then all at once",
        crowd: "riser",
        width: 4,
    };
    let Scene {
        post,
        users,
        poller,
        ..
    } = Scene::new(&api, likes, cast).await;
    let running = api.run_fan_out(poller);
    proxy.set_partition_limits(Some(PartitionLimits::scaled(SCALE).expect("scale")));

    // The i-th like when the rate, rising in a line from FROM to TO over
    // RAMP, then TO, has given i likes.
    let slope = (TO - FROM) / RAMP;
    let at = |i: usize| match i as f64 {
        i if i < ramp_likes => (-FROM + (FROM * FROM + 2.0 * slope * i).sqrt()) / slope,
        i => RAMP + (i - ramp_likes) / TO,
    };
    let answers = Arc::new(Mutex::new(Answers::default()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, user) in users.into_iter().enumerate() {
        let due = Duration::from_secs_f64(at(i));
        tokio::time::sleep(due.saturating_sub(started.elapsed())).await;
        let (api, answers, post) = (api.clone(), answers.clone(), post.clone());
        tasks.push(tokio::spawn(async move {
            like_and_more(&api, &answers, &user, &post, i).await;
        }));
    }
    for task in tasks {
        task.await.expect("a request task");
    }
    let stats = proxy.stats();
    proxy.set_partition_limits(None);
    let answers = Answers::all(answers);
    let refused = answers.refused();
    assert_eq!(refused, vec![], "no request refused, none 503");
    assert_eq!(
        stats.partition_throttle, 0,
        "turned hot before any partition refused a request: {stats:?}"
    );
    assert!(
        in_shards(&api, &post).await > 0,
        "the post went hot: its likes are in shards"
    );

    running.stop().await;
    api.settle(&mut api.poller()).await;
    let shards = shards_of(&api, &post).await;
    assert!(
        shards.is_some_and(|n| n > blog::store::items::counter::HOT_SHARDS),
        "widened by its rate: {shards:?}"
    );
    counted_exactly(
        &api,
        &post,
        likes - answers.unliked,
        likes.div_ceil(COMMENT_EVERY),
    )
    .await;
}

/// A post liked 5 times a second (with a comment every fifth like), below
/// what its quiet partition takes at 0.05 of DynamoDB's limits (about 8),
/// by instances that each see too little of it to turn it hot (here: the
/// requests' store never does): the fan-out, which sees every like's count
/// in the post's MODIFY records, finds it written at its rate (twice the
/// instance's, scaled: 2.5 a second) and turns it hot
/// ([`blog::store::memory::WriteRates`], `fanout::rate`); every count exact.
#[tokio::test]
async fn a_post_liked_through_many_instances_is_turned_hot_by_the_fan_out() {
    const PER_SECOND: f64 = 5.0;
    const LIKES: usize = 25;
    let hot_rate = blog::store::memory::HOT_WRITES_PER_SECOND * SCALE;
    let (proxy, api) = behind_proxy_with(Backoff::default(), |store| store.never_hot()).await;
    let api = Arc::new(api);
    let cast = Cast {
        author: "spread",
        title: "Liked everywhere",
        content: "a little from each",
        crowd: "far",
        width: 4,
    };
    let Scene { post, users, .. } = Scene::new(&api, LIKES, cast).await;
    let fan_out = api.store().clone().with_hot_rate(Some(hot_rate));
    let running = api.run_fan_out_on(api.poller_as_deployed(), fan_out);
    proxy.set_partition_limits(Some(PartitionLimits::scaled(SCALE).expect("scale")));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, user) in users.into_iter().enumerate() {
        let due = Duration::from_secs_f64(i as f64 / PER_SECOND);
        tokio::time::sleep(due.saturating_sub(started.elapsed())).await;
        let (api, post) = (api.clone(), post.clone());
        tasks.push(tokio::spawn(async move {
            let mut answers = vec![("like", api.like_post(&user, &post).await.0)];
            if i.is_multiple_of(COMMENT_EVERY) {
                let comment = format!("comment {i}");
                answers.push(("comment", api.comment_on(&user, &post, comment).await.0));
            }
            answers
        }));
    }
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.extend(task.await.expect("a user's requests"));
    }
    proxy.set_partition_limits(None);
    assert!(
        statuses.iter().all(|(_, status)| *status == 201),
        "every like and comment made: {statuses:?}"
    );
    running.stop().await;
    api.settle(&mut api.poller()).await;
    let shards = shards_of(&api, &post).await;
    assert!(shards.is_some(), "turned hot by the fan-out");
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(LIKES), json!(LIKES.div_ceil(COMMENT_EVERY))),
        "{got}"
    );
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");
}

/// A hot post (16 shards) liked 80 times a second, with a comment every
/// fifth like and an unlike every tenth (about 100 writes a second, 6 a
/// shard, half of what a shard takes at 0.05 of DynamoDB's limits), by
/// instances that never widen a post themselves (here: the requests' store
/// never does; deployed, no instance sees that much of one post): the
/// fan-out, which sees every write's shard counter in their MODIFY records,
/// finds the post's shards written at its rate a shard (16 × 2.5 a second,
/// scaled) and widens it to 128 shards (`fanout::rate`,
/// `FanOut::widen_by_rate`); every request is answered as the contract
/// says, every count exact.
#[tokio::test]
async fn a_hot_post_liked_through_many_instances_is_widened_by_the_fan_out() {
    const PER_SECOND: f64 = 80.0;
    const LIKES: usize = 240;
    let hot_rate = blog::store::memory::HOT_WRITES_PER_SECOND * SCALE;
    let (proxy, api) = behind_proxy_with(Backoff::default(), |store| store.never_hot()).await;
    let api = Arc::new(api);
    let cast = Cast {
        author: "widely",
        title: "Liked everywhere, fast",
        content: "a little from each of many",
        crowd: "wide",
        width: 4,
    };
    let Scene { post, users, .. } = Scene::new(&api, LIKES, cast).await;
    api.make_hot(&post).await;
    let hot = blog::store::items::counter::HOT_SHARDS;
    assert_eq!(shards_of(&api, &post).await, Some(hot));
    let fan_out = api.store().clone().with_hot_rate(Some(hot_rate));
    let running = api.run_fan_out_on(api.poller_as_deployed(), fan_out);
    proxy.set_partition_limits(Some(PartitionLimits::scaled(SCALE).expect("scale")));
    let answers = Arc::new(Mutex::new(Answers::default()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, user) in users.into_iter().enumerate() {
        let due = Duration::from_secs_f64(i as f64 / PER_SECOND);
        tokio::time::sleep(due.saturating_sub(started.elapsed())).await;
        let (api, answers, post) = (api.clone(), answers.clone(), post.clone());
        tasks.push(tokio::spawn(async move {
            like_and_more(&api, &answers, &user, &post, i).await;
        }));
    }
    for task in tasks {
        task.await.expect("a request task");
    }
    proxy.set_partition_limits(None);
    let answers = Answers::all(answers);
    assert_eq!(answers.refused(), vec![], "every request answered");

    running.stop().await;
    api.settle(&mut api.poller()).await;
    assert_eq!(
        shards_of(&api, &post).await,
        Some(blog::store::items::counter::MAX_SHARDS),
        "widened by the fan-out (the requests never widen)"
    );
    counted_exactly(
        &api,
        &post,
        LIKES - answers.unliked,
        LIKES.div_ceil(COMMENT_EVERY),
    )
    .await;
}

/// `post` counts `likes` and `comments`, and the audit finds nothing.
async fn counted_exactly(api: &crate::support::TestApi, post: &str, likes: usize, comments: usize) {
    let (_, got) = api.get_post(post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(likes), json!(comments)),
        "{got}"
    );
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");
}
