//! A viral post on a DynamoDB that enforces its per-partition limits (the
//! `hostile` proxy's, scaled): likes and comments offered at several times
//! what one post's partition takes are all answered, and every count ends
//! exact. `infra/bench.sh --viral` measures the same at higher rates.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use blog::{keys::PK, store::Backoff};
use hostile::PartitionLimits;
use serde_json::json;

use crate::{
    scene::{Cast, Scene},
    support::{behind_proxy, table_snapshot},
};

/// 50 WCU and 150 RCU a second per partition key value: a quiet post's
/// partition takes about 8 likes a second (6 WCU each).
pub(crate) const SCALE: f64 = 0.05;
/// Offered: 30 likes a second (3.6 times what the quiet post takes) and 6
/// comments a second, for 5 seconds.
const LIKES_PER_SECOND: f64 = 30.0;
const SECONDS: f64 = 5.0;
pub(crate) const COMMENT_EVERY: usize = 5;
const UNLIKE_EVERY: usize = 10;

#[derive(Default)]
pub(crate) struct Answers {
    pub(crate) statuses: Vec<(&'static str, u16)>,
    pub(crate) unliked: usize,
}

impl Answers {
    /// What every task recorded, once they are all done.
    pub(crate) fn all(answers: Arc<Mutex<Answers>>) -> Answers {
        Arc::try_unwrap(answers)
            .ok()
            .expect("every task done")
            .into_inner()
            .expect("lock")
    }

    /// The answers the contract does not give: an unlike's but 204, a
    /// like's or a comment's but 201.
    pub(crate) fn refused(&self) -> Vec<(&'static str, u16)> {
        self.statuses
            .iter()
            .filter(|(what, status)| match *what {
                "unlike" => *status != 204,
                _ => *status != 201,
            })
            .copied()
            .collect()
    }
}

/// The `i`-th user's requests in a run: a like, a comment every
/// [`COMMENT_EVERY`]th, an unlike every [`UNLIKE_EVERY`]th, each answer
/// recorded in `answers`.
pub(crate) async fn like_and_more(
    api: &crate::support::TestApi,
    answers: &Mutex<Answers>,
    user: &str,
    post: &str,
    i: usize,
) {
    let record = |what, status| answers.lock().expect("lock").statuses.push((what, status));
    record("like", api.like_post(user, post).await.0);
    if i.is_multiple_of(COMMENT_EVERY) {
        record(
            "comment",
            api.comment_on(user, post, format!("comment {i}")).await.0,
        );
    }
    if i.is_multiple_of(UNLIKE_EVERY) {
        record("unlike", api.unlike(user, post).await.0);
        answers.lock().expect("lock").unliked += 1;
    }
}

/// How many items `post` has in its shards' partitions (`POST#p#k`).
pub(crate) async fn in_shards(api: &crate::support::TestApi, post: &str) -> usize {
    table_snapshot(api)
        .await
        .iter()
        .filter_map(|item| item.get(PK).and_then(|pk| pk.as_s().ok()).cloned())
        .filter(|pk| pk.starts_with(&format!("POST#{post}#")))
        .count()
}

/// The shards `post`'s item says it has (`None`: quiet).
pub(crate) async fn shards_of(api: &crate::support::TestApi, post: &str) -> Option<u8> {
    table_snapshot(api)
        .await
        .into_iter()
        .find(|item| {
            item.get(PK).and_then(|v| v.as_s().ok()) == Some(&format!("POST#{post}"))
                && item.get("type").and_then(|v| v.as_s().ok()) == Some(&"post".to_owned())
        })
        .and_then(|item| item.get("shards")?.as_n().ok()?.parse::<u8>().ok())
}

#[tokio::test]
async fn a_post_liked_past_its_partitions_limit_answers_every_like_and_counts_it_exactly() {
    // The deployed retry policy: what decides whether a request answers 503.
    let (proxy, api) = behind_proxy(Backoff::default()).await;
    let api = Arc::new(api);
    let likes = (LIKES_PER_SECOND * SECONDS) as usize;
    let cast = Cast {
        author: "viral",
        title: "Everyone's talking",
        content: "about this",
        crowd: "fan",
        width: 4,
    };
    let Scene {
        author,
        post,
        users,
        poller,
    } = Scene::new(&api, likes, cast).await;
    let running = api.run_fan_out(poller);
    proxy.set_partition_limits(Some(PartitionLimits::scaled(SCALE).expect("scale")));

    let answers = Arc::new(Mutex::new(Answers::default()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, user) in users.into_iter().enumerate() {
        let at = Duration::from_secs_f64(i as f64 / LIKES_PER_SECOND);
        tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
        let (api, answers, post) = (api.clone(), answers.clone(), post.clone());
        tasks.push(tokio::spawn(async move {
            like_and_more(&api, &answers, &user, &post, i).await;
        }));
    }
    for task in tasks {
        task.await.expect("a request task");
    }
    let throttled = proxy.stats().partition_throttle;
    proxy.set_partition_limits(None);

    let answers = Answers::all(answers);
    let refused = answers.refused();
    assert!(
        refused.is_empty(),
        "every request answered as the contract says: {refused:?}"
    );
    assert!(
        throttled > 0,
        "the load went past the quiet post's partition (it was throttled)"
    );
    assert!(
        in_shards(&api, &post).await > 0,
        "the post went hot: its likes are in shards"
    );

    // Every count exact on every copy once the fan-out has caught up.
    running.stop().await;
    api.settle(&mut api.poller()).await;
    let expected_likes = likes - answers.unliked;
    let expected_comments = likes.div_ceil(COMMENT_EVERY);
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(expected_likes), json!(expected_comments)),
        "{got}"
    );
    let (_, feed) = api.get_feed().await;
    assert_eq!(feed["items"][0]["likeCount"], json!(expected_likes));
    let (_, listed) = api.user_posts(&author).await;
    assert_eq!(listed["items"][0]["likeCount"], json!(expected_likes));
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");
}

/// 160 posts by one author, each liked once, 20 likes a second for 8
/// seconds (by 20 users), through a proxy enforcing `limits` with 5 seconds
/// of burst capacity; returns the like answers, how many requests the proxy
/// throttled, and how many posts turned hot. One like a post: no post's own
/// partition takes more than one like's 6 WCU (and its retries'), so a post
/// that turns hot was turned by another partition's throttle.
async fn posts_liked_once(limits: PartitionLimits) -> (Vec<u16>, u64, usize) {
    const POSTS: usize = 160;
    const USERS: usize = 20;
    const PER_SECOND: f64 = 20.0;
    let (proxy, api) = behind_proxy(Backoff::default()).await;
    let api = Arc::new(api);
    let author = api.user("prolific").await;
    let mut posts = Vec::new();
    for i in 0..POSTS {
        posts.push(api.post(&author, format!("Post {i}"), "liked").await);
    }
    let mut users = Vec::new();
    for i in 0..USERS {
        users.push(api.user_named(format!("liker{i:02}")).await);
    }
    let limits = PartitionLimits {
        burst_seconds: 5.0,
        ..limits
    };
    proxy.set_partition_limits(Some(limits));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, post) in posts.iter().enumerate() {
        let at = Duration::from_secs_f64(i as f64 / PER_SECOND);
        tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
        let (api, post, user) = (api.clone(), post.clone(), users[i % USERS].clone());
        tasks.push(tokio::spawn(
            async move { api.like_post(&user, &post).await.0 },
        ));
    }
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.expect("a like"));
    }
    let throttled = proxy.stats().partition_throttle;
    proxy.set_partition_limits(None);
    let hot = table_snapshot(&api)
        .await
        .iter()
        .filter(|item| item.get("type").and_then(|t| t.as_s().ok()) == Some(&"post".to_owned()))
        .filter(|item| item.contains_key("shards"))
        .count();
    (statuses, throttled, hot)
}

#[tokio::test]
async fn the_tables_ceiling_turns_no_post_hot() {
    // Each post's partition takes 50 WCU a second; the table as a whole
    // 60: 20 likes a second (120 WCU a second in all), each post liked once,
    // stay far below each post's own partition's limit.
    let ceiling = hostile::TableCeiling {
        write_units_per_second: 60.0,
        read_units_per_second: 10_000.0,
    };
    let limits = PartitionLimits::scaled(SCALE)
        .expect("scale")
        .with_table_ceiling(ceiling);
    throttled_elsewhere_turns_no_post_hot(limits, "the table's ceiling").await;
}

#[tokio::test]
async fn an_authors_index_partition_throttled_turns_no_post_hot() {
    // 10 WCU a second a partition: each post takes one like (6 WCU in its
    // own partition), but every like changes the count its author's GSI1
    // partition lists: 20 WCU a second there.
    let limits = PartitionLimits::scaled(0.01).expect("scale");
    throttled_elsewhere_turns_no_post_hot(limits, "the author's index partition").await;
}

/// [`posts_liked_once`] under `limits`, which `what` (not a post's own
/// partition) reaches: some requests throttled, each like answered 201 or
/// 503, no post hot.
async fn throttled_elsewhere_turns_no_post_hot(limits: PartitionLimits, what: &str) {
    let (statuses, throttled, hot) = posts_liked_once(limits).await;
    assert!(throttled > 0, "{what} was reached");
    assert!(
        statuses.iter().all(|s| [201, 503].contains(s)),
        "{statuses:?}"
    );
    assert_eq!(hot, 0, "{what} turned posts hot");
}

#[tokio::test]
async fn a_probe_says_which_limit_refused_a_write_and_changes_nothing() {
    use blog::store::table::{Room, Throttle};
    let (proxy, api) = behind_proxy(Backoff::default()).await;
    let author = api.user("probed").await;
    let post = api.post(&author, "Probed", "p").await;
    let other = api.post(&author, "Other", "o").await;
    let key = |post: &str| blog::keys::post_item(&crate::support::post_id(post)).item();
    let probe = |post: &str| {
        let (api, key) = (&api, key(post));
        async move { api.app.store.db().probe_write(key).await.expect("probe") }
    };
    // A probe changes nothing, whatever it is answered.
    let before = table_snapshot(&api).await;
    assert_eq!(probe(&post).await, Room::Now, "a quiet partition has room");
    assert_eq!(table_snapshot(&api).await, before);

    // One unit a second a partition: a like spends the post's. (An earlier
    // like first, without limits: the process learns the post's author,
    // which a like reads once per post, whom blocks refuse.)
    // The fan signs up before the limits too: a like checks the block
    // mark in the liker's partition, which the sign-up has spent.
    let early = api.user("early").await;
    api.like(&early, &post).await;
    let fan = api.user("fan").await;
    proxy.set_partition_limits(Some(PartitionLimits::scaled(0.001).expect("scale")));
    let _ = api.like_post(&fan, &post).await;
    let before = table_snapshot(&api).await;
    assert_eq!(probe(&post).await, Room::Refused(Throttle::KeyRange));
    assert_eq!(table_snapshot(&api).await, before);
    proxy.set_partition_limits(None);

    // Each partition takes 1,000 units a second, the table 1: a like of one
    // post leaves the other's partition room, but not the table.
    let ceiling = hostile::TableCeiling {
        write_units_per_second: 1.0,
        read_units_per_second: 10_000.0,
    };
    let limits = PartitionLimits::scaled(1.0)
        .expect("scale")
        .with_table_ceiling(ceiling);
    proxy.set_partition_limits(Some(limits));
    let _ = api.like_post(&author, &post).await;
    let before = table_snapshot(&api).await;
    assert_eq!(probe(&other).await, Room::Refused(Throttle::Table));
    assert_eq!(table_snapshot(&api).await, before);
    proxy.set_partition_limits(None);
}

/// What one write sent while a hot post was deleted answered, and when it
/// was sent.
struct Sent {
    at: Instant,
    what: &'static str,
    status: u16,
}

#[tokio::test]
async fn a_hot_post_is_deleted_under_its_load_and_takes_nothing_after() {
    // 20 WCU a second a partition: the hot post's likes (about 14 a
    // second) and comments (about 5) spread over its shards, its comments
    // in its own partition.
    const USERS: usize = 60;
    const PER_SECOND: f64 = 20.0;
    let (proxy, api) = behind_proxy(Backoff::default()).await;
    let api = Arc::new(api);
    // 30 KB of content: deleting it costs 30 WCU, more than its partition
    // takes in a second (60 in a transaction).
    let content = "x".repeat(30_000);
    let cast = Cast {
        author: "viral_author",
        title: "Viral, then gone",
        content: &content,
        crowd: "crowd",
        width: 2,
    };
    let Scene {
        author,
        post,
        users,
        mut poller,
    } = Scene::new(&api, USERS, cast).await;
    // One like given while it was quiet, whose liker likes again later.
    api.like(&users[0], &post).await;
    api.make_hot(&post).await;
    proxy.set_partition_limits(Some(PartitionLimits::scaled(0.02).expect("scale")));

    let sent = Arc::new(Mutex::new(Vec::<Sent>::new()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut deleted_at = None;
    for i in 0..USERS * 2 {
        let at = Duration::from_secs_f64(i as f64 / PER_SECOND);
        tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
        if i == USERS {
            // Half way: the author deletes it.
            let (status, body) = api.delete_post(&author, &post).await;
            assert_eq!(status, 204, "{body}");
            deleted_at = Some(Instant::now());
        }
        let (api, sent, post) = (api.clone(), sent.clone(), post.clone());
        let user = users[i % USERS].clone();
        tasks.push(tokio::spawn(async move {
            let at = Instant::now();
            let (what, status) = if i % 4 == 3 {
                let comment = format!("comment {i}");
                ("comment", api.comment_on(&user, &post, comment).await.0)
            } else {
                ("like", api.like_post(&user, &post).await.0)
            };
            sent.lock().expect("lock").push(Sent { at, what, status });
        }));
    }
    for task in tasks {
        task.await.expect("a write");
    }
    proxy.set_partition_limits(None);
    let deleted_at = deleted_at.expect("deleted");
    let sent = Arc::try_unwrap(sent)
        .ok()
        .expect("every task done")
        .into_inner()
        .expect("lock");
    for Sent { at, what, status } in &sent {
        if *at > deleted_at {
            assert_eq!(*status, 404, "a {what} sent after the 204");
        } else {
            assert!([200, 201, 404].contains(status), "a {what}: {status}");
        }
    }
    assert!(sent.iter().any(|s| s.at < deleted_at && s.status == 201));

    // Once the fan-out has walked it, nothing of the post is left, and no
    // export holds anything of it.
    api.settle(&mut poller).await;
    let left: Vec<_> = table_snapshot(&api)
        .await
        .into_iter()
        .filter(|item| {
            let pk = item.get(PK).and_then(|pk| pk.as_s().ok());
            pk.is_some_and(|pk| pk.starts_with(&format!("POST#{post}")))
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    for user in users.iter().take(8) {
        let (status, export) = api.export_as(user, user, "limit=25").await;
        assert_eq!(status, 200, "{export}");
        assert!(!export.to_string().contains(&post), "{export}");
    }
    assert_eq!(api.audit(false).await.findings, vec![]);
}

/// A hot post liked past what its 16 shards take (at 0.01 of the limits:
/// 10 WCU a second a partition; 50 likes a second offered for 3 seconds, a
/// comment for every third like, an unlike for every tenth, 4 WCU each in
/// a shard: about 290 WCU a second where 16 shards take 160): its shards are
/// throttled, it widens (`Requests::widen`) until they take the rate, its
/// comments go to its shards (17 a second would be 34 WCU in its own
/// partition, three times what it takes), and every request is answered as
/// the contract says and counted once.
#[tokio::test]
async fn a_hot_post_liked_past_its_shards_widens_and_answers_every_like() {
    const PER_SECOND: f64 = 50.0;
    const LIKES: usize = 150;
    const QUIET: usize = 20;
    const COMMENT_EVERY: usize = 3;
    const UNLIKE_EVERY: usize = 10;
    let (proxy, api) = behind_proxy(Backoff::default()).await;
    let api = Arc::new(api);
    let author = api.user("widening").await;
    let post = api.post(&author, "Past sixteen", "shards").await;
    let users: Vec<String> =
        futures::future::join_all((0..LIKES).map(|i| api.user_named(format!("wide{i:04}")))).await;
    // Liked while quiet by the first 20: the switch moves their marks to
    // their partitions, and their likes again answer 200.
    for user in &users[..QUIET] {
        api.like(user, &post).await;
    }
    api.make_hot(&post).await;
    // The fan-out adds the shards' counts onto the post once a batch, and
    // batches as Lambda would (a batch every second per stream shard): the
    // post's own partition, which the widening writes, stays within its 10
    // WCU a second.
    let running = api.run_fan_out(api.poller_as_deployed());
    proxy.set_partition_limits(Some(PartitionLimits::scaled(0.01).expect("scale")));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, user) in users.into_iter().enumerate() {
        let at = Duration::from_secs_f64(i as f64 / PER_SECOND);
        tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
        let (api, post) = (api.clone(), post.clone());
        tasks.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            let (status, body) = api.like_post(&user, &post).await;
            // The first 20 liked while the post was quiet: 200, the like
            // they gave.
            answers.push(("like", status, if i < QUIET { 200 } else { 201 }, body));
            if i.is_multiple_of(COMMENT_EVERY) {
                let comment = format!("comment {i}");
                let (status, body) = api.comment_on(&user, &post, comment).await;
                answers.push(("comment", status, 201, body));
            }
            // Likes given while the post was quiet are taken back in its own
            // partition (10 WCU a second here, which the widenings and the
            // fan-out's count adds share): only hot likes are.
            if i % UNLIKE_EVERY == 0 && i >= QUIET {
                let (status, body) = api.unlike(&user, &post).await;
                answers.push(("unlike", status, 204, body));
            }
            (i, answers)
        }));
    }
    let mut refused = Vec::new();
    for task in tasks {
        let (i, answers) = task.await.expect("a user's requests");
        for (what, status, expected, body) in answers {
            if status != expected {
                refused.push((i, what, status, body));
            }
        }
    }
    let throttled = proxy.stats().partition_throttle;
    proxy.set_partition_limits(None);
    assert_eq!(
        refused,
        vec![],
        "every request answered as the contract says"
    );
    assert!(throttled > 0, "the shards were throttled");

    running.stop().await;
    api.settle(&mut api.poller()).await;
    let shards = shards_of(&api, &post).await;
    assert!(
        shards.is_some_and(|n| n > blog::store::items::counter::HOT_SHARDS),
        "widened: {shards:?}"
    );
    let comments = LIKES.div_ceil(COMMENT_EVERY);
    let likes = LIKES - (LIKES - QUIET).div_ceil(UNLIKE_EVERY);
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(likes), json!(comments)),
        "{got}"
    );
    let own_comments = table_snapshot(&api)
        .await
        .iter()
        .filter(|item| item.get(PK).and_then(|v| v.as_s().ok()) == Some(&format!("POST#{post}")))
        .filter(|item| item.get("type").and_then(|v| v.as_s().ok()) == Some(&"comment".to_owned()))
        .count();
    assert_eq!(own_comments, 0, "no comment in the post's own partition");
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");
}

/// Six likers whose likes all hash to one shard of a 128-shard post, at
/// once, at 0.01 of DynamoDB's limits (a shard takes 10 WCU a second: two
/// likes and a half): the shard takes two, and each throttled like tries
/// another shard (`items::counter::like_shard`: its mark says where it is),
/// so every like is answered 201, the six end in more than one shard, and
/// each is counted once.
#[tokio::test]
async fn likes_throttled_on_their_shard_go_to_another() {
    use blog::{
        ids::UserId,
        store::items::counter::{HOT_SHARDS, MAX_SHARDS, liker_shard},
    };
    let (proxy, api) = behind_proxy(Backoff::default()).await;
    let author = api.user("crowded").await;
    let post = api.post(&author, "One shard", "crowded").await;
    api.make_hot(&post).await;
    let id = crate::support::post_id(&post);
    let widened = api.app.store.requests().widen(&id, HOT_SHARDS).await;
    assert_eq!(widened.expect("widened"), MAX_SHARDS);
    // Users until six of them share a shard (400 over 128 shards: the
    // fullest holds about 8).
    let mut by_shard: std::collections::HashMap<u8, Vec<String>> = Default::default();
    for chunk in 0..10 {
        let users = futures::future::join_all(
            (0..40).map(|i| api.user_named(format!("crowd{chunk}{i:02}"))),
        )
        .await;
        for user in users {
            let shard = liker_shard(&UserId::parse(&user).expect("an id"), MAX_SHARDS);
            by_shard.entry(shard).or_default().push(user);
        }
    }
    let (crowded, likers) = by_shard
        .into_iter()
        .max_by_key(|(_, users)| users.len())
        .expect("users");
    let likers: Vec<String> = likers.into_iter().take(6).collect();
    assert_eq!(likers.len(), 6, "six likers of shard {crowded}");

    proxy.set_partition_limits(Some(PartitionLimits::scaled(0.01).expect("scale")));
    let statuses =
        futures::future::join_all(likers.iter().map(|user| api.like_post(user, &post))).await;
    let throttled = proxy.stats().partition_throttle;
    proxy.set_partition_limits(None);
    assert!(
        statuses.iter().all(|(status, _)| *status == 201),
        "{statuses:?}"
    );
    assert!(throttled > 0, "the crowded shard was throttled");
    let shards: std::collections::HashSet<String> = crate::support::table_snapshot(&api)
        .await
        .into_iter()
        .filter(|item| item.get("type").and_then(|v| v.as_s().ok()) == Some(&"like".to_owned()))
        .filter(|item| {
            item.get("userId")
                .and_then(|v| v.as_s().ok())
                .is_some_and(|user| likers.contains(user))
        })
        .filter_map(|item| item.get(PK).and_then(|pk| pk.as_s().ok()).cloned())
        .collect();
    assert!(
        shards.len() > 1,
        "the likes went to other shards: {shards:?}"
    );
    assert!(
        shards.contains(&format!("POST#{post}#{crowded:02}")),
        "{shards:?}"
    );

    api.settle(&mut api.poller()).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["likeCount"], json!(6), "{got}");
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");
}
