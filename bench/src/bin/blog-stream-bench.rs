//! `blog-stream-bench`: how fast the local stream poller and the fan-out
//! drain a viral post's stream. Loads `--likes` likes of one post (made hot
//! first, as a viral post is; `--quiet` keeps it unsharded) into a fresh
//! table, then times the template's mapping (its filters and batch size;
//! without its 1 s batching window, which holds back only the last, partial
//! batch, as the other benchmarks run it) delivering the backlog to
//! `fanout::handle` until the stream is empty, the fan-out's own records
//! included. Prints the records read and
//! delivered a second, the batches, the time spent in the fan-out, and
//! whether the post and its feed copy count every like at the end.
//!
//! ```text
//! blog-stream-bench --endpoint URL [--likes 3000] [--quiet]
//! ```
//!
//! `infra/bench.sh --stream` runs it against its own DynamoDB Local.

use std::{
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use bench::{
    measure::{Clients, fan_out_mapping},
    naive::Error,
};
use blog::{
    fanout,
    ids::UserId,
    store::{Store, bulk, items::user::UserItem, table},
    text::Username,
    timestamp,
};
use futures::{StreamExt, TryStreamExt};
use local::stream_poller::StreamPoller;

/// Likes in flight while the backlog is loaded.
const LOADERS: usize = 32;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default();
    let mut likes = 3000_usize;
    let mut hot = true;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => endpoint = value()?,
            "--likes" => likes = value()?.parse()?,
            "--quiet" => hot = false,
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    let clients = Clients::local(&endpoint).await;
    let name = format!(
        "stream-bench-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    table::create_if_missing(&clients.plain, &name).await?;
    // The post stays quiet or hot as asked, however fast it is liked.
    let store = Store::new(clients.plain.clone(), &name).with_hot_rate(None);
    let author = UserId::parse("stream-author")?;
    store
        .requests()
        .create_user(&author, &Username::parse("author")?)
        .await?;
    let post = store
        .requests()
        .create_post(&author, "viral", "a post everyone likes")
        .await?
        .post_id;
    if hot {
        store.requests().make_hot(&post).await?;
    }
    let likers = load_likers(&clients, &name, likes).await?;

    let mapping = fan_out_mapping()?;
    let mut poller = StreamPoller::new(store.clone(), clients.streams.clone(), mapping, None);
    // What came before the likes (the post, its feed entry, the profiles),
    // applied before the clock starts.
    drain(&mut poller, &store, &Counters::default()).await?;

    futures::stream::iter(likers)
        .map(|liker| {
            let store = store.clone();
            async move { store.requests().like_post(&post, &liker).await.map(|_| ()) }
        })
        .buffer_unordered(LOADERS)
        .try_collect::<()>()
        .await?;
    // DynamoDB Local appends a write to its stream a moment after it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shards = shard_count(&clients, &store).await?;
    println!(
        "{likes} likes of a {} post in {name}; its stream has {shards} shard(s)",
        if hot { "hot" } else { "quiet" }
    );

    let counters = Counters::default();
    let started = Instant::now();
    let (read, elapsed) = drain(&mut poller, &store, &counters).await?;
    let seconds = elapsed.as_secs_f64();
    let delivered = counters.records.load(Ordering::Relaxed);
    let batches = counters.batches.load(Ordering::Relaxed);
    let in_fan_out = Duration::from_nanos(counters.fan_out_nanos.load(Ordering::Relaxed));
    let exact = counted(&store, &post, likes).await?;
    println!(
        "read {read} records ({:.0}/s), delivered {delivered} ({:.0}/s) in {batches} batches, in {seconds:.2} s",
        read as f64 / seconds,
        delivered as f64 / seconds,
    );
    println!(
        "fan-out busy {:.2} s in all (summed over batches in flight); mean batch {:.0} ms",
        in_fan_out.as_secs_f64(),
        in_fan_out.as_secs_f64() * 1000.0 / batches.max(1) as f64,
    );
    println!(
        "post and feed entry count every like: {} (checked {:.1} s after the clock started)",
        if exact { "yes" } else { "NO" },
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[derive(Default)]
struct Counters {
    batches: AtomicUsize,
    records: AtomicUsize,
    fan_out_nanos: AtomicU64,
}

/// Polls until the stream is empty twice, a short pause apart; the records
/// read and the time until the last poll that read any.
async fn drain(
    poller: &mut StreamPoller,
    store: &Store,
    counters: &Counters,
) -> Result<(usize, Duration), Error> {
    let deliver = |event: aws_lambda_events::event::dynamodb::Event| async move {
        let started = Instant::now();
        counters.batches.fetch_add(1, Ordering::Relaxed);
        counters
            .records
            .fetch_add(event.records.len(), Ordering::Relaxed);
        let response = fanout::handle(store, event).await;
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        counters.fan_out_nanos.fetch_add(nanos, Ordering::Relaxed);
        Ok(response)
    };
    let started = Instant::now();
    let (mut read, mut last, mut quiet) = (0, Duration::ZERO, 0);
    while quiet < 2 {
        let count = poller.poll_once(&deliver).await?;
        if count > 0 {
            read += count;
            last = started.elapsed();
            quiet = 0;
        } else {
            quiet += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok((read, last))
}

/// `count` users with profiles, loaded in bulk.
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

/// The shards of the table's stream.
async fn shard_count(clients: &Clients, store: &Store) -> Result<usize, Error> {
    let table = store
        .client()
        .describe_table()
        .table_name(store.table())
        .send()
        .await?;
    let arn = table
        .table
        .and_then(|t| t.latest_stream_arn)
        .ok_or("the table has no stream")?;
    let stream = clients
        .streams
        .describe_stream()
        .stream_arn(arn)
        .send()
        .await?;
    Ok(stream
        .stream_description
        .and_then(|d| d.shards)
        .map_or(0, |s| s.len()))
}

/// Whether the post and its feed entry both count `likes`.
async fn counted(store: &Store, post: &blog::ids::PostId, likes: usize) -> Result<bool, Error> {
    let on_post = store.requests().get_post(post).await?.map(|p| p.like_count);
    let in_feed = store
        .requests()
        .feed(100)
        .await?
        .into_iter()
        .find(|entry| &entry.post_id == post)
        .map(|entry| entry.like_count);
    Ok(on_post == Some(likes as u64) && in_feed == Some(likes as u64))
}
