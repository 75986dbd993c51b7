//! `blog-viral-bench`: one post liked, unliked and commented on by many
//! users at rising rates, on a DynamoDB that enforces its per-partition
//! limits (the `hostile` proxy's, scaled), through the requests' store calls
//! (`like_post`, `unlike_post`, `create_comment`, and the API's status for
//! each answer), while a reader reads its Q2, Q4 and Q5, with the stream
//! fan-out running as the local stack runs it (template.yaml's mapping, its
//! 1 s batching window included). Two designs: `today` (a post
//! stays in its partition, as before hot posts: `Store::never_hot`) and `hot`
//! (a throttled post spreads over shards: `blog::store::hot`).
//!
//! For each design and offered like rate: requests a second answered 2xx,
//! the share answered 503, p50 and p99, the write units the partitions were
//! charged per request (as DynamoDB bills them: the proxy's charges), the
//! hottest partition's write units a second (and the hottest for reads, its
//! read units a second), and the time from the last
//! request until the post and its feed copy count every like and comment the
//! API accepted.
//!
//! Each liker likes once; one in ten takes the like back at once; three in
//! ten also comment (300 comments a second at 1,000 likes).
//!
//! ```text
//! blog-viral-bench --endpoint URL [--scale 0.1] [--seconds 20]
//!     [--rates 50,100,200,500,1000,2000] [--designs today,hot] [--tags N]
//! ```
//!
//! With `--tags N` the post has N tags (0–5), and settled means its entry in
//! each tag's list counts every like and comment too.
//!
//! With `--notifications` each row also says what the author's notifications
//! partition (`NOTIFY#<author>`, table and GSI1) was charged a second, and
//! whether the author's list shows the post's likes group with its exact
//! count once settled; then, without limits, how long a like of a quiet post
//! takes to show in its author's list (its liker first in the group), p50
//! and p99 over 30 likes, the fan-out running as the local stack runs it.
//!
//! Rates are DynamoDB's real ones: at `--scale 0.1` a rate of 1,000 likes a
//! second is offered as 100 against partitions that take 100 WCU a second.
//! `infra/bench.sh --viral` runs it against its own DynamoDB Local.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use bench::{
    measure::{Clients, POLL_IDLE},
    naive::Error,
};
use blog::{
    api::ApiError,
    fanout,
    ids::{PostId, UserId},
    keys,
    store::{
        Store, StoreError, bulk, idempotency::Answer, items::user::UserItem, likes::Liked,
        posts::NewPost, table,
    },
    text::{Tag, Username},
    timestamp,
};
use hostile::{Faults, PartitionLimits, Proxy};
use local::stream_poller::{StreamPoller, mapping::StreamMapping};

/// One in this many likers takes the like back at once.
const UNLIKE_EVERY: usize = 10;
/// This many in ten likers also comment.
const COMMENTS_IN_TEN: usize = 3;

struct Row {
    design: &'static str,
    offered: f64,
    /// From the first like sent to the last answered.
    span: f64,
    /// Requests answered 2xx (likes, unlikes, comments).
    accepted: usize,
    unavailable: usize,
    other: usize,
    /// Reads (Q2, Q4, Q5) made meanwhile, and how many were not answered.
    reads: usize,
    reads_refused: usize,
    p50: f64,
    p99: f64,
    write_units_per_request: f64,
    hottest: String,
    hottest_per_second: f64,
    /// The partition charged the most read units, and its units a second.
    hottest_read: String,
    hottest_read_per_second: f64,
    exact_after: Option<f64>,
    /// With `--notifications`: the author's notifications partition's write
    /// units a second (table and GSI1), whether their list showed the
    /// likes group at the post's exact count, and its units per request
    /// answered 2xx (what the notifications add to each).
    notified: Option<(f64, bool, f64)>,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // Quiet unless RUST_LOG asks (the store's switches and widenings).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    let mut endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default();
    let mut scale = 0.1;
    let mut seconds = 20.0_f64;
    let mut rates = vec![50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0];
    let mut designs = vec!["today", "hot"];
    let mut tag_count = 0usize;
    let mut notifications = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => endpoint = value()?,
            "--scale" => scale = value()?.parse()?,
            "--seconds" => seconds = value()?.parse()?,
            "--rates" => {
                rates = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--tags" => tag_count = value()?.parse()?,
            "--notifications" => notifications = true,
            "--designs" => {
                let given = value()?;
                designs = ["today", "hot"]
                    .into_iter()
                    .filter(|d| given.split(',').any(|g| g == *d))
                    .collect();
            }
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let proxy = Proxy::start(listener, endpoint.as_str(), Faults::none()).await?;
    let direct = Clients::local(&endpoint).await;
    let limited = Clients::local(&proxy.url()).await;
    let name = format!(
        "viral-bench-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    table::create_if_missing(&direct.plain, &name).await?;
    let setup = Store::new(direct.plain.clone(), &name);
    // One process sends every request: it sees the post's whole rate, and
    // turns it hot at the rate a deployed instance would, scaled.
    let hot = Store::new(limited.plain.clone(), &name)
        .with_hot_rate(Some(blog::store::memory::HOT_WRITES_PER_SECOND * scale));
    let today = hot.clone().never_hot();
    let fan_out = Store::new(limited.fanout.clone(), &name);

    let tags = (0..tag_count)
        .map(|i| Tag::parse(&format!("viral-{i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let author = UserId::parse("viral-author")?;
    setup
        .requests()
        .create_user(&author, &Username::parse("author")?)
        .await?;
    let likers_needed: usize = designs.len()
        * rates
            .iter()
            .map(|rate| (rate * scale * seconds).ceil() as usize)
            .sum::<usize>()
        + QUIET_LIKES;
    let likers = load_likers(&direct, &name, likers_needed).await?;
    println!("{likers_needed} likers loaded into {name}");

    // The fan-out, as the local stack runs it, through the limits too.
    let poller = StreamPoller::new(
        fan_out.clone(),
        limited.streams.clone(),
        // The template's mapping, its 1 s batching window included: a hot
        // post's counts reach it once a batch, and a batch a second is what
        // its own partition takes of those writes.
        StreamMapping::of_repository()?,
        None,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let store = fan_out.clone();
        async move {
            let deliver = move |event| {
                let store = store.clone();
                async move { Ok(fanout::handle(&store, event).await) }
            };
            poller
                .run(deliver, POLL_IDLE, async {
                    let _ = stopped.await;
                })
                .await;
        }
    });

    proxy.set_partition_limits(Some(PartitionLimits::scaled(scale)?));
    let mut rows = Vec::new();
    let mut next_liker = 0;
    for design in &designs {
        let requests = if *design == "hot" { &hot } else { &today };
        for rate in &rates {
            let title = format!("viral at {rate}/s ({design})");
            let new = NewPost {
                title: &title,
                content: "a post everyone likes",
                tags: &tags,
                status: blog::model::Status::Published,
                publish_at: None,
            };
            let post = match setup
                .requests()
                .create_post_keyed(&author, new, None)
                .await?
            {
                Answer::New(post) => post.post_id,
                Answer::Replayed(_) => return Err("a replay without a key".into()),
            };
            // In the feed before the likes come.
            settle(requests, &post, &tags, Counts::default()).await;
            let count = (rate * scale * seconds).ceil() as usize;
            let mine = likers[next_liker..next_liker + count].to_vec();
            next_liker += count;
            proxy.take_charged();
            let reading = Arc::new(AtomicBool::new(true));
            let reader = tokio::spawn(read_meanwhile(
                requests.clone(),
                post,
                reading.clone(),
                scale,
            ));
            let started = Instant::now();
            let offered = offer(requests, post, mine, rate * scale).await;
            let span = started.elapsed().as_secs_f64();
            reading.store(false, Ordering::Relaxed);
            let (reads, reads_refused) = reader.await.unwrap_or_default();
            let answers = &offered.answers;
            let accepted = answers.iter().filter(|(s, _)| *s < 300).count();
            let unavailable = answers.iter().filter(|(s, _)| *s == 503).count();
            let mut latencies: Vec<f64> = answers.iter().map(|(_, l)| *l).collect();
            latencies.sort_by(f64::total_cmp);
            let settled = Instant::now();
            let exact = settle(requests, &post, &tags, offered.counts).await;
            // The requests' writes and the fan-out's for them.
            let charged = proxy.take_charged().unwrap_or_default();
            let (hottest, units) = charged.hottest_write.clone().unwrap_or_default();
            let (hottest_read, read_units) = charged.hottest_read.clone().unwrap_or_default();
            let notified = if notifications {
                let units: f64 = charged
                    .writes
                    .iter()
                    .filter(|(name, _)| name.contains(&keys::notify_pk(&author)))
                    .map(|(_, units)| units)
                    .sum();
                let shown = likes_shown(&setup, &author, &post).await;
                let likes = offered.counts.likes;
                let per_request = if accepted > 0 {
                    units / accepted as f64
                } else {
                    0.0
                };
                Some((units / span / scale, shown == Some(likes), per_request))
            } else {
                None
            };
            let row = Row {
                design,
                offered: *rate,
                span,
                accepted,
                unavailable,
                other: answers.len() - accepted - unavailable,
                reads,
                reads_refused,
                p50: percentile(&latencies, 0.5),
                p99: percentile(&latencies, 0.99),
                write_units_per_request: if accepted > 0 {
                    charged.write_units / accepted as f64
                } else {
                    0.0
                },
                hottest: hottest.split('/').skip(1).collect::<Vec<_>>().join("/"),
                hottest_per_second: units / span / scale,
                hottest_read: hottest_read
                    .split('/')
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join("/"),
                hottest_read_per_second: read_units / span / scale,
                exact_after: exact.then(|| settled.elapsed().as_secs_f64()),
                notified,
            };
            println!("  {}", table_row(&row, scale));
            rows.push(row);
        }
    }
    let quiet = if notifications {
        proxy.set_partition_limits(None);
        Some(quiet_latency(&setup, &author, &likers[next_liker..]).await?)
    } else {
        None
    };
    let _ = stop.send(());
    running.await?;
    println!();
    println!(
        "| design | offered likes/s (+ 30 % comments, 10 % unlikes) | requests answered 2xx /s | 503 | other | reads (refused) | p50 ms | p99 ms | WCU billed per request | hottest partition | its WCU/s | hottest for reads | its RCU/s | counts exact after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{}", table_row(row, scale));
    }
    println!(
        "(rates at DynamoDB's real limits: measured at {scale} of them, divided by {scale}; a rate is per second from the first like sent to the last answered)"
    );
    if notifications {
        println!();
        println!(
            "| design | offered likes/s | the author's notifications partition, WCU/s (table and GSI1) | the likes group at the post's exact count once settled | WCU billed per request | of them the notifications' | without them |"
        );
        println!("|---|---|---|---|---|---|---|");
        for row in &rows {
            if let Some((units, exact, per_request)) = row.notified {
                println!(
                    "| {} | {:.0} | {units:.1} | {} | {:.2} | {per_request:.2} | {:.2} |",
                    row.design,
                    row.offered,
                    if exact { "yes" } else { "no" },
                    row.write_units_per_request,
                    row.write_units_per_request - per_request
                );
            }
        }
    }
    if let Some((p50, p99)) = quiet {
        println!(
            "a quiet post's like in its author's notifications (its liker first in the group), over {QUIET_LIKES} likes: p50 {:.0} ms, p99 {:.0} ms",
            p50 * 1000.0,
            p99 * 1000.0
        );
    }
    Ok(())
}

/// How many likes of a quiet post the notification latency is taken over.
const QUIET_LIKES: usize = 30;

/// The count the author's list shows for `post`'s likes group, if it lists
/// one (its first page of 100).
async fn likes_shown(store: &Store, author: &UserId, post: &PostId) -> Option<u64> {
    let page = store
        .requests()
        .notifications(author, 100, None)
        .await
        .ok()?;
    page.items
        .iter()
        .find(|n| {
            n.post_id == Some(*post)
                && n.kind == blog::store::items::notification::NotificationKind::Like
        })
        .map(|n| n.count)
}

/// Each of `likers` (the first [`QUIET_LIKES`]) likes a new quiet post in
/// turn; the seconds until the author's list shows them first in its likes
/// group (polled every 20 ms, 10 s at most each): p50 and p99.
async fn quiet_latency(
    store: &Store,
    author: &UserId,
    likers: &[UserId],
) -> Result<(f64, f64), Error> {
    let new = NewPost {
        title: "quiet",
        content: "a post a few like",
        tags: &[],
        status: blog::model::Status::Published,
        publish_at: None,
    };
    let post = match store
        .requests()
        .create_post_keyed(author, new, None)
        .await?
    {
        Answer::New(post) => post.post_id,
        Answer::Replayed(_) => return Err("a replay without a key".into()),
    };
    let mut seconds = Vec::with_capacity(QUIET_LIKES);
    for liker in likers.iter().take(QUIET_LIKES) {
        store.requests().like_post(&post, liker).await?;
        let liked = Instant::now();
        while liked.elapsed() < Duration::from_secs(10) {
            let page = store.requests().notifications(author, 20, None).await?;
            let first = page
                .items
                .iter()
                .find(|n| n.post_id == Some(post))
                .and_then(|n| n.actors.first())
                .map(|a| a.user_id.clone());
            if first.as_ref() == Some(liker) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        seconds.push(liked.elapsed().as_secs_f64());
    }
    seconds.sort_by(f64::total_cmp);
    Ok((percentile(&seconds, 0.5), percentile(&seconds, 0.99)))
}

/// `count` users with profiles, loaded in bulk past the proxy.
async fn load_likers(clients: &Clients, table: &str, count: usize) -> Result<Vec<UserId>, Error> {
    let now = timestamp::now();
    let mut items = Vec::new();
    let mut ids = Vec::new();
    for i in 0..count {
        let id = UserId::parse(&format!("liker-{i:06}"))?;
        let user = UserItem::new(&id, &Username::parse(&format!("liker_{i:06}"))?, &now);
        items.extend(bulk::user_items(&user)?);
        ids.push(id);
    }
    bulk::put_items(&clients.plain, table, items).await?;
    Ok(ids)
}

/// What the post should count once every accepted request is counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    likes: u64,
    comments: u64,
}

/// The answers to a rate's requests, and the counts they leave.
struct Offered {
    /// Each request's status and seconds.
    answers: Vec<(u16, f64)>,
    counts: Counts,
}

/// The status the API answers for a store call's result, and whether it
/// took effect.
fn status<T>(result: Result<T, StoreError>, ok: u16) -> (u16, Option<T>) {
    match result {
        Ok(done) => (ok, Some(done)),
        Err(err) => {
            tracing::debug!(error = %err, "a request refused");
            (ApiError::from(err).status().as_u16(), None)
        }
    }
}

/// Each liker likes `post` once, `per_second` a second (each on its tick,
/// whatever the others' latency); some take it back at once, some comment.
async fn offer(store: &Store, post: PostId, likers: Vec<UserId>, per_second: f64) -> Offered {
    let answers = Arc::new(Mutex::new(Vec::with_capacity(likers.len() * 2)));
    let likes = Arc::new(AtomicUsize::new(0));
    let comments = Arc::new(AtomicUsize::new(0));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = tokio::task::JoinSet::new();
    for (i, liker) in likers.into_iter().enumerate() {
        tick.tick().await;
        let (store, answers) = (store.clone(), answers.clone());
        let (likes, comments) = (likes.clone(), comments.clone());
        sent.spawn(async move {
            let timed = |status: u16, started: Instant| {
                if let Ok(mut answers) = answers.lock() {
                    answers.push((status, started.elapsed().as_secs_f64()));
                }
            };
            let started = Instant::now();
            let (code, liked) = status(store.requests().like_post(&post, &liker).await, 201);
            let new = matches!(liked, Some(Liked::New(_)));
            timed(if new || liked.is_none() { code } else { 200 }, started);
            if new {
                likes.fetch_add(1, Ordering::Relaxed);
                if i % UNLIKE_EVERY == 0 {
                    let started = Instant::now();
                    let (code, unliked) =
                        status(store.requests().unlike_post(&post, &liker).await, 204);
                    timed(code, started);
                    if unliked == Some(true) {
                        likes.fetch_sub(1, Ordering::Relaxed);
                    }
                }
            }
            if i % 10 < COMMENTS_IN_TEN {
                let started = Instant::now();
                let (code, commented) = status(
                    store
                        .requests()
                        .create_comment(&post, &liker, "me too")
                        .await,
                    201,
                );
                timed(code, started);
                if commented.is_some() {
                    comments.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while sent.join_next().await.is_some() {}
    let answers = Arc::try_unwrap(answers)
        .ok()
        .and_then(|m| m.into_inner().ok())
        .unwrap_or_default();
    Offered {
        answers,
        counts: Counts {
            likes: likes.load(Ordering::Relaxed) as u64,
            comments: comments.load(Ordering::Relaxed) as u64,
        },
    }
}

/// Q2, Q4 and Q5 of `post`, one after another, about 200 times a second at
/// DynamoDB's real limits (every 50 ms at `scale` 0.1, every 500 ms at
/// 0.01: the partitions' read units are scaled, so the reads are too)
/// while `reading`; the reads made and those not answered.
async fn read_meanwhile(
    store: Store,
    post: PostId,
    reading: Arc<AtomicBool>,
    scale: f64,
) -> (usize, usize) {
    let pause = Duration::from_secs_f64(0.005 / scale.max(0.001));
    let (mut reads, mut refused) = (0, 0);
    while reading.load(Ordering::Relaxed) {
        let results = [
            store.requests().get_post(&post).await.map(|_| ()),
            store
                .requests()
                .list_comments(&post, 20, None)
                .await
                .map(|_| ()),
            store
                .requests()
                .list_likes(&post, 20, None)
                .await
                .map(|_| ()),
        ];
        reads += results.len();
        refused += results.iter().filter(|r| r.is_err()).count();
        tokio::time::sleep(pause).await;
    }
    (reads, refused)
}

/// Waits (at most 60 s) until the post and its feed copy both count
/// `expected`; whether they came to.
async fn settle(store: &Store, post: &PostId, tags: &[Tag], expected: Counts) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let counted = store
            .requests()
            .get_post(post)
            .await
            .ok()
            .flatten()
            .map(|p| Counts {
                likes: p.like_count,
                comments: p.comment_count,
            });
        let copied = store.requests().feed(100).await.ok().and_then(|feed| {
            feed.into_iter()
                .find(|entry| &entry.post_id == post)
                .map(|entry| Counts {
                    likes: entry.like_count,
                    comments: entry.comment_count,
                })
        });
        let mut listed = Vec::new();
        for tag in tags {
            let page = store.requests().tag_posts(tag, 100, None).await.ok();
            listed.push(page.and_then(|page| {
                page.items
                    .into_iter()
                    .find(|entry| &entry.post_id == post)
                    .map(|entry| Counts {
                        likes: entry.like_count,
                        comments: entry.comment_count,
                    })
            }));
        }
        let tags_copied = listed.iter().all(|copy| *copy == Some(expected));
        if counted == Some(expected) && copied == Some(expected) && tags_copied {
            return true;
        }
        if Instant::now() + Duration::from_millis(100) >= deadline {
            eprintln!(
                "  not settled: the API accepted {expected:?}; the post counts {counted:?}, its feed copy {copied:?}, its tag copies {listed:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// The row as docs/benchmarks.md's table shows it.
fn table_row(row: &Row, scale: f64) -> String {
    format!(
        "| {} | {:.0} | {:.0} | {:.0} % | {} | {} ({}) | {:.0} | {:.0} | {:.1} | `{}` | {:.0} | `{}` | {:.0} | {} |",
        row.design,
        row.offered,
        row.accepted as f64 / row.span / scale,
        100.0 * row.unavailable as f64 / (row.accepted + row.unavailable + row.other).max(1) as f64,
        row.other,
        row.reads,
        row.reads_refused,
        row.p50 * 1000.0,
        row.p99 * 1000.0,
        row.write_units_per_request,
        row.hottest,
        row.hottest_per_second,
        row.hottest_read,
        row.hottest_read_per_second,
        row.exact_after
            .map_or_else(|| "not within 60 s".to_owned(), |s| format!("{s:.1} s")),
    )
}
