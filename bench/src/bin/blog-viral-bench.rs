//! `blog-viral-bench`: one post liked by many users at rising rates, on a
//! DynamoDB that enforces its per-partition limits (the `hostile` proxy's,
//! scaled), through the like's request path (the store's `like_post` and the
//! API's status for its answer) with the stream fan-out running as the local
//! stack runs it. For each offered rate: the likes a second answered 2xx,
//! the share answered 503, p50 and p99, the units the partitions were
//! charged per like (as DynamoDB bills them: the proxy's charges), the
//! hottest partition's write units a second, and the time from the last like
//! until the post and its feed copy count every like the API accepted.
//!
//! ```text
//! blog-viral-bench --endpoint URL [--scale 0.1] [--seconds 20]
//!     [--rates 50,100,200,500,1000,2000]
//! ```
//!
//! Rates are DynamoDB's real ones: at `--scale 0.1` a rate of 1,000 likes a
//! second is offered as 100 against partitions that take 100 WCU a second.
//! `infra/bench.sh --viral` runs it against its own DynamoDB Local.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use bench::{
    measure::{Clients, POLL_IDLE, fan_out_mapping},
    naive::Error,
};
use blog::{
    api::ApiError,
    fanout,
    ids::{PostId, UserId},
    store::{Store, bulk, likes::Liked, table, users::UserItem},
    text::Username,
    timestamp,
};
use hostile::{Faults, PartitionLimits, Proxy};
use local::stream_poller::StreamPoller;

struct Row {
    offered: f64,
    /// From the first like sent to the last answered.
    span: f64,
    accepted: usize,
    unavailable: usize,
    other: usize,
    p50: f64,
    p99: f64,
    write_units_per_like: f64,
    hottest: String,
    hottest_per_second: f64,
    exact_after: Option<f64>,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default();
    let mut scale = 0.1;
    let mut seconds = 20.0_f64;
    let mut rates = vec![50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0];
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
    let requests = Store::new(limited.plain.clone(), &name);
    let fan_out = Store::new(limited.fanout.clone(), &name);

    let author = UserId::parse("viral-author")?;
    setup
        .create_user(&author, &Username::parse("author")?)
        .await?;
    let likers_needed: usize = rates
        .iter()
        .map(|rate| (rate * scale * seconds).ceil() as usize)
        .sum();
    let likers = load_likers(&direct, &name, likers_needed).await?;
    println!("{likers_needed} likers loaded into {name}");

    // The fan-out, as the local stack runs it, through the limits too.
    let poller = StreamPoller::new(
        fan_out.clone(),
        limited.streams.clone(),
        fan_out_mapping()?,
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
    for rate in &rates {
        let post = setup
            .create_post(
                &author,
                &format!("viral at {rate}/s"),
                "a post everyone likes",
            )
            .await?
            .post_id;
        // In the feed before the likes come.
        settle(&requests, &post, 0).await;
        let count = (rate * scale * seconds).ceil() as usize;
        let mine = likers[next_liker..next_liker + count].to_vec();
        next_liker += count;
        proxy.take_charged();
        let started = Instant::now();
        let answers = offer(&requests, post, mine, rate * scale).await;
        let span = started.elapsed().as_secs_f64();
        let accepted = answers.iter().filter(|(s, _)| *s < 300).count();
        let unavailable = answers.iter().filter(|(s, _)| *s == 503).count();
        let mut latencies: Vec<f64> = answers.iter().map(|(_, l)| *l).collect();
        latencies.sort_by(f64::total_cmp);
        let settled = Instant::now();
        let exact = settle(&requests, &post, accepted).await;
        // The likes' writes and the fan-out's for them.
        let charged = proxy.take_charged().unwrap_or_default();
        let (hottest, units) = charged.hottest_write.unwrap_or_default();
        let row = Row {
            offered: *rate,
            span,
            accepted,
            unavailable,
            other: answers.len() - accepted - unavailable,
            p50: percentile(&latencies, 0.5),
            p99: percentile(&latencies, 0.99),
            write_units_per_like: if accepted > 0 {
                charged.write_units / accepted as f64
            } else {
                0.0
            },
            hottest: hottest.split('/').skip(1).collect::<Vec<_>>().join("/"),
            hottest_per_second: units / span / scale,
            exact_after: exact.then(|| settled.elapsed().as_secs_f64()),
        };
        println!("  {}", table_row(&row, scale));
        rows.push(row);
    }
    let _ = stop.send(());
    running.await?;
    println!();
    println!(
        "| offered likes/s | answered 2xx /s | 503 | other | p50 ms | p99 ms | WCU billed per like | hottest partition | its WCU/s | counts exact after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{}", table_row(row, scale));
    }
    println!(
        "(rates at DynamoDB's real limits: measured at {scale} of them, divided by {scale}; a rate is per second from the first like sent to the last answered)"
    );
    Ok(())
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

/// Each liker likes `post` once, `per_second` a second (each on its tick,
/// whatever the others' latency); each answer's status and seconds.
async fn offer(
    store: &Store,
    post: PostId,
    likers: Vec<UserId>,
    per_second: f64,
) -> Vec<(u16, f64)> {
    let answers = Arc::new(Mutex::new(Vec::with_capacity(likers.len())));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = tokio::task::JoinSet::new();
    for liker in likers {
        tick.tick().await;
        let store = store.clone();
        let answers = answers.clone();
        sent.spawn(async move {
            let started = Instant::now();
            let status = match store.like_post(&post, &liker).await {
                Ok(Liked::New(_)) => 201,
                Ok(Liked::Already(_)) => 200,
                Err(err) => ApiError::from(err).status().as_u16(),
            };
            if let Ok(mut answers) = answers.lock() {
                answers.push((status, started.elapsed().as_secs_f64()));
            }
        });
    }
    while sent.join_next().await.is_some() {}
    Arc::try_unwrap(answers)
        .ok()
        .and_then(|m| m.into_inner().ok())
        .unwrap_or_default()
}

/// Waits (at most 60 s) until the post and its feed copy both count `likes`;
/// whether they came to.
async fn settle(store: &Store, post: &PostId, likes: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let counted = store
            .get_post(post)
            .await
            .ok()
            .flatten()
            .map(|p| p.like_count);
        let copied = store.feed(100).await.ok().and_then(|feed| {
            feed.into_iter()
                .find(|entry| &entry.post_id == post)
                .map(|entry| entry.like_count)
        });
        if counted == Some(likes as u64) && copied == Some(likes as u64) {
            return true;
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
        "| {:.0} | {:.0} | {:.0} % | {} | {:.0} | {:.0} | {:.1} | `{}` | {:.0} | {} |",
        row.offered,
        row.accepted as f64 / row.span / scale,
        100.0 * row.unavailable as f64 / (row.accepted + row.unavailable + row.other).max(1) as f64,
        row.other,
        row.p50 * 1000.0,
        row.p99 * 1000.0,
        row.write_units_per_like,
        row.hottest,
        row.hottest_per_second,
        row.exact_after
            .map_or_else(|| "not within 60 s".to_owned(), |s| format!("{s:.1} s")),
    )
}
