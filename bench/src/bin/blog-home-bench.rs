//! `blog-home-bench`: a post delivered to its author's followers' homes,
//! under DynamoDB's limits scaled, and home reads, on DynamoDB Local.
//!
//! For each follower count (`--followers 10,1000,100000,1000000` by
//! default), a fresh table gets the author, their follower entries and
//! counts (loaded in bulk, as follows leave them) and one published post:
//! the first `PULL_FOLLOWERS` followers push followers (they followed before
//! the author had that many), the rest pull followers (`store::follows`),
//! one of whom reads their home. Everything is **scaled** by `--scale`
//! (default 0.1; a row that would load more than 10,000 entries at a smaller
//! one, its limits too): the followers loaded are the count times the scale, and the
//! delivery goes through the throttling proxy (the viral bench's) with
//! DynamoDB's partition limits times the scale (100 WCU and 300 RCU a second
//! a partition at 0.1) and the stack's on-demand table maximum
//! (`MaxWriteRequestUnits` 1,500, `MaxReadRequestUnits` 6,000) times the
//! scale: a delivery takes as long as the full-size one would on DynamoDB
//! when the table's limits are what binds, and DynamoDB Local's own pace is
//! above the scaled limits. Then the fan-out's delivery runs as deployed:
//! the post's deliveries started, then the eight push shards walked side by
//! side (as eight stream shards would), each in invocations of Lambda's 60 s
//! timeout (an invocation that fails, throttled past its retries, is
//! delivered again). Printed: the time until the last push follower's home
//! has it and until the pull follower's home read shows it, the units the
//! proxy charged (billed figures, from item sizes) per follower, the busiest
//! partition's writes a second (unscaled), and the CPU the walk took (this
//! process's user + system time without the proxy's thread; under the
//! fan-out's share, 512 MB = 0.29 vCPU, divide the share into it).
//!
//! Then home reads: a reader following `--follows 10,500,5000` authors, each
//! of whom has posts in the reader's home (800 entries in all, or one per
//! author past 800), and pulling `--pulls 8` of them (whose posts are in
//! their own lists, not the home); the calls, units and latency of a first
//! page of 20.
//!
//! ```text
//! blog-home-bench --endpoint URL [--followers 10,1000,100000,1000000] [--scale 0.1]
//!                 [--follows 10,500,5000] [--pulls 8] [--reads 50]
//! ```
//!
//! `infra/bench.sh --home` runs it against its own DynamoDB Local.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use bench::{measure::Clients, naive::Error};
use blog::{
    ids::{FollowId, PostId, UserId},
    keys::{self, Entity, FOLLOWER_COUNT_SK, Item, Key, PUSH_SHARDS},
    model::Status,
    store::{
        PULL_FOLLOWERS, Store, bulk,
        deadline::Deadline,
        follows::PULL_LIMIT,
        home::Delivering,
        items::follow::{FollowItem, FollowerItem},
        items::home::HomeEntryItem,
        items::post::PostItem,
        items::user::UserItem,
        table,
    },
    text::Username,
    timestamp,
};
use hostile::{Faults, PartitionLimits, Proxy, TableCeiling};

fn numbers(raw: &str) -> Result<Vec<usize>, Error> {
    raw.split(',')
        .map(|n| n.trim().parse::<usize>().map_err(Error::from))
        .collect()
}

/// This process's CPU time so far (user + system), from /proc, without the
/// thread `except` names (the proxy's).
fn cpu_time(except: Option<&str>) -> Duration {
    let ticks = |path: &str| -> u64 {
        let stat = std::fs::read_to_string(path).unwrap_or_default();
        // Fields after the command's closing parenthesis: utime is the 12th,
        // stime the 13th, in clock ticks (100 a second on Linux).
        let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<u64> = rest
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0)
    };
    let all = ticks("/proc/self/stat");
    let other = except.map_or(0, |tid| ticks(&format!("/proc/self/task/{tid}/stat")));
    Duration::from_millis(all.saturating_sub(other) * 10)
}

async fn new_table(clients: &Clients, what: &str) -> Result<String, Error> {
    let name = format!(
        "home-bench-{what}-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    table::create_if_missing(&clients.plain, &name).await?;
    Ok(name)
}

fn user(n: usize, prefix: &str) -> Result<UserId, Error> {
    Ok(UserId::parse(&format!("{prefix}-{n:07}"))?)
}

/// A follower shard's count item as follows leave it.
fn count_item(followed: &UserId, shard: u8, count: usize) -> Item {
    use aws_sdk_dynamodb::types::AttributeValue::{N, S};
    let mut item = Key::new(keys::followers_pk(followed, shard), FOLLOWER_COUNT_SK).item();
    item.insert("type".into(), S("followerCount".into()));
    item.insert("userId".into(), S(followed.to_string()));
    item.insert("shard".into(), N(shard.to_string()));
    item.insert("count".into(), N(count.to_string()));
    item.insert("version".into(), N(count.to_string()));
    item
}

/// The most follower entries a delivery row loads.
const MAX_LOADED: usize = 10_000;

/// The stack's on-demand table maximums (template.yaml's defaults).
const MAX_WRITE_UNITS: f64 = 1_500.0;
const MAX_READ_UNITS: f64 = 6_000.0;

/// The throttling proxy, on a thread and runtime of its own (so that its CPU
/// is not the walk's), and that thread's id.
fn proxy_thread(endpoint: &str) -> Result<(Proxy, String), Error> {
    let (sent, got) = std::sync::mpsc::channel();
    let endpoint = endpoint.to_owned();
    std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => {
                let _ = sent.send(Err(e.to_string()));
                return;
            }
        };
        runtime.block_on(async move {
            let thread = std::fs::read_link("/proc/thread-self")
                .map(|p| {
                    p.to_string_lossy()
                        .rsplit('/')
                        .next()
                        .unwrap_or("")
                        .to_owned()
                })
                .unwrap_or_default();
            let started = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                Ok(listener) => Proxy::start(listener, endpoint.as_str(), Faults::none())
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let _ = sent.send(started.map(|proxy| (proxy, thread)));
            std::future::pending::<()>().await;
        });
    });
    Ok(got.recv().map_err(|e| e.to_string())??)
}

/// A run measured through the proxy's limits: what it was charged and how
/// many of its calls were throttled.
struct Limited<'a> {
    proxy: &'a Proxy,
    throttled_before: u64,
}

impl<'a> Limited<'a> {
    /// Puts `limits` on and zeroes the charges.
    fn start(proxy: &'a Proxy, limits: PartitionLimits) -> Self {
        proxy.set_partition_limits(Some(limits));
        proxy.take_charged();
        Self {
            proxy,
            throttled_before: proxy.stats().partition_throttled(),
        }
    }

    /// Takes the limits off: the run's charges and its throttled calls.
    fn finish(self) -> (hostile::partitions::Charged, u64) {
        let charged = self.proxy.take_charged().unwrap_or_default();
        let throttled = self.proxy.stats().partition_throttled() - self.throttled_before;
        self.proxy.set_partition_limits(None);
        (charged, throttled)
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default();
    let mut followers = vec![10, 1_000, 100_000, 1_000_000];
    let mut scale = 0.1_f64;
    let mut follows = vec![10, 500, 5_000];
    let mut pulls = PULL_LIMIT;
    let mut follow_rate = 1_000.0_f64;
    let mut follow_seconds = 10.0_f64;
    let mut reads = 50_usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => endpoint = value()?,
            "--followers" => followers = numbers(&value()?)?,
            "--scale" => scale = value()?.parse()?,
            "--follows" => follows = numbers(&value()?)?,
            "--pulls" => pulls = value()?.parse::<usize>()?.min(PULL_LIMIT),
            "--follow-rate" => follow_rate = value()?.parse()?,
            "--follow-seconds" => follow_seconds = value()?.parse()?,
            "--reads" => reads = value()?.parse()?,
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    let (proxy, proxy_tid) = proxy_thread(&endpoint)?;
    let direct = Clients::local(&endpoint).await;
    let limited = Clients::local(&proxy.url()).await;
    let limits = PartitionLimits::scaled(scale)?.with_table_ceiling(TableCeiling {
        write_units_per_second: MAX_WRITE_UNITS * scale,
        read_units_per_second: MAX_READ_UNITS * scale,
    });
    println!(
        "Scale {scale}: followers loaded = followers × {scale}; partitions {:.0} WCU and {:.0} RCU a second, the table {:.0} WCU and {:.0} RCU a second.",
        limits.write_units_per_second(),
        limits.read_units_per_second(),
        MAX_WRITE_UNITS * scale,
        MAX_READ_UNITS * scale
    );
    println!();
    println!(
        "| followers | scale | push / pull (loaded) | load (s) | last push home has it (s) | pull follower's home shows it (s) | calls | WCU billed | WCU a push follower | WCU a follower | busiest partition, WCU/s (unscaled) | throttled calls | walk CPU (s) | CPU a 1,000 entries (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &count in &followers {
        // At most `MAX_LOADED` entries a row: DynamoDB Local in memory
        // slows as its tables grow (100,000 entries did not load in 13
        // minutes), so a larger row runs at a smaller scale, limits too.
        let row_scale = scale.min(MAX_LOADED as f64 / count.max(1) as f64);
        let row_limits = PartitionLimits::scaled(row_scale)?.with_table_ceiling(TableCeiling {
            write_units_per_second: MAX_WRITE_UNITS * row_scale,
            read_units_per_second: MAX_READ_UNITS * row_scale,
        });
        let shape = Shape::of(count, row_scale);
        deliver(&direct, &limited, &proxy, &proxy_tid, row_limits, shape).await?;
    }
    println!();
    println!(
        "| table's write maximum (unscaled) | follows a second (offered) | follows (scaled) | new | 503 | other | busiest partition | its WCU a second (unscaled) | throttled calls | followerCount after the copy |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    // At the stack's maximum, then at DynamoDB's default table quota.
    for ceiling in [MAX_WRITE_UNITS, 40_000.0] {
        let limits = limits.with_table_ceiling(TableCeiling {
            write_units_per_second: ceiling * scale,
            read_units_per_second: MAX_READ_UNITS * scale,
        });
        follows_at(
            &direct,
            &limited,
            &proxy,
            limits,
            follow_rate,
            follow_seconds,
        )
        .await?;
    }
    println!();
    println!(
        "| follows | of them pulled | posts (home entries and pulled lists) | calls a page of 20 | RCU (Local) | p50 (ms) | p99 (ms) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &count in &follows {
        home_reads(&direct, count, pulls.min(count), reads).await?;
    }
    Ok(())
}

/// An author's followers as a row loads them.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// The full-size follower count the row stands for.
    followers: usize,
    /// Push and pull followers loaded (scaled).
    push: usize,
    pull: usize,
    scale: f64,
}

impl Shape {
    fn of(followers: usize, scale: f64) -> Self {
        let push = followers.min(PULL_FOLLOWERS as usize);
        let scaled = |n: usize| (n as f64 * scale).ceil() as usize;
        Self {
            followers,
            push: scaled(push),
            pull: scaled(followers - push),
            scale,
        }
    }
}

/// One post delivered to `shape`'s followers through the limits; prints its
/// row.
async fn deliver(
    direct: &Clients,
    limited: &Clients,
    proxy: &Proxy,
    proxy_tid: &str,
    limits: PartitionLimits,
    shape: Shape,
) -> Result<(), Error> {
    let name = new_table(direct, "deliver").await?;
    let now = timestamp::now();
    let author = UserItem::new(&user(0, "author")?, &Username::parse("author")?, &now);
    let loading = Instant::now();
    let mut items = bulk::user_items(&author)?;
    let mut per_shard: BTreeMap<u8, usize> = BTreeMap::new();
    let mut last_push = None;
    for n in 0..shape.push + shape.pull {
        let pull = n >= shape.push;
        let follower = user(n, "follower")?;
        let entry = FollowerItem {
            user_id: author.user_id.clone(),
            follower_id: follower.clone(),
            follow_id: FollowId::generate(),
            created_at: now.clone(),
            pull,
        };
        *per_shard.entry(entry.shard()).or_default() += 1;
        items.push(entry.to_item()?);
        if !pull {
            last_push = Some(follower);
        }
    }
    for (shard, n) in &per_shard {
        items.push(count_item(&author.user_id, *shard, *n));
    }
    // The pull follower who reads: a profile pulling the author, the follow.
    let mut puller = UserItem::new(&user(0, "puller")?, &Username::parse("puller")?, &now);
    if shape.pull > 0 {
        puller.pulls = vec![author.user_id.clone()];
        items.extend(bulk::user_items(&puller)?);
        items.push(
            FollowItem {
                user_id: puller.user_id.clone(),
                followed_id: author.user_id.clone(),
                follow_id: FollowId::generate(),
                created_at: now.clone(),
                pull: true,
            }
            .to_item()?,
        );
    }
    bulk::put_items(&direct.plain, &name, items).await?;
    let loaded = loading.elapsed();

    // Published now, through the limits: the post's own writes are not the
    // delivery's.
    let post = PostItem::new(
        PostId::generate(),
        &author,
        "delivered",
        "to every follower",
        &[],
        Status::Published,
        &timestamp::now(),
    );
    bulk::put_items(&direct.plain, &name, vec![post.to_item()?]).await?;
    let store = Store::new(limited.fanout.clone(), &name);
    let reader = Store::new(limited.requests.clone(), &name);
    let measured = Limited::start(proxy, limits);
    limited.fanout_meter.take();
    let cpu = cpu_time(Some(proxy_tid));
    let started = Instant::now();
    // The pull follower reads their home until it shows the post.
    let pulled = {
        let reader = reader.clone();
        let puller = puller.user_id.clone();
        let wanted = post.post_id;
        let reads = shape.pull > 0;
        tokio::spawn(async move {
            while reads && started.elapsed() < Duration::from_secs(120) {
                if let Ok(page) = reader.requests().home(&puller, 20, None).await
                    && page.items.iter().any(|p| p.post_id == wanted)
                {
                    return Some(started.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            None
        })
    };
    let mut throttled_walks = 0;
    loop {
        match store.fanout().start_deliveries(&post).await {
            Ok(_) => break,
            Err(_) => throttled_walks += 1,
        }
    }
    let walks = (0..PUSH_SHARDS).map(|shard| {
        let store = store.clone();
        let key = blog::keys::delivery(
            &post.post_id,
            &post.listed_id().unwrap_or(post.post_id),
            shard,
        );
        async move {
            let mut failed = 0;
            loop {
                let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
                match store.fanout().deliver(&key, &deadline).await {
                    Ok(Delivering::Paused { .. }) => continue,
                    Ok(Delivering::Done { .. } | Delivering::Stale) => return failed,
                    // Throttled past its retries: the record again.
                    Err(_) => failed += 1,
                }
            }
        }
    });
    throttled_walks += futures::future::join_all(walks).await.iter().sum::<usize>();
    let took = started.elapsed();
    let walk_cpu = cpu_time(Some(proxy_tid)).saturating_sub(cpu);
    let pull_seen = pulled.await.ok().flatten();
    let calls = limited.fanout_meter.take();
    let (charged, throttled) = measured.finish();
    // The last push follower's home holds the post's entry.
    if let Some(last) = &last_push {
        let entry = Key::new(keys::home_pk(last), keys::home_sk(&post.post_id)).item();
        let found = table::Table::new(direct.plain.clone(), &name)
            .get("a home entry", entry, true)
            .await?;
        if found.is_none() {
            return Err("the last push follower's home lacks the post".into());
        }
    }
    let (hottest_key, hottest) = charged.hottest_write.clone().unwrap_or_default();
    // Without the table's name; a ULID or user id in it as its kind.
    let hottest_key = hottest_key
        .split('/')
        .skip(1)
        .collect::<Vec<_>>()
        .join("/")
        .split('#')
        .next()
        .unwrap_or_default()
        .to_owned();
    let busiest = hottest / took.as_secs_f64().max(0.001) / shape.scale;
    let entries = shape.push.max(1) as f64;
    println!(
        "| {} | {} | {} / {} | {:.1} | {:.2} | {} | {} | {:.0} | {:.3} | {:.4} | {busiest:.1} (`{hottest_key}#…`) | {throttled} (walks again: {throttled_walks}) | {:.2} | {:.1} |",
        shape.followers,
        shape.scale,
        shape.push,
        shape.pull,
        loaded.as_secs_f64(),
        took.as_secs_f64(),
        pull_seen.map_or("–".to_owned(), |d| format!("{:.2}", d.as_secs_f64())),
        calls.len(),
        charged.write_units,
        charged.write_units / entries,
        charged.write_units / (shape.push + shape.pull).max(1) as f64,
        walk_cpu.as_secs_f64(),
        walk_cpu.as_secs_f64() * 1_000_000.0 / entries,
    );
    Ok(())
}

/// An account with `PULL_FOLLOWERS` followers gaining `rate` new ones a
/// second for `seconds` (scaled: `rate` × the scale a second, through the
/// limits), each a follow request as deployed (the pull follows' path);
/// then each shard's count copied as the fan-out copies it. Prints the
/// answers, the busiest partition's write units a second (unscaled) and
/// whether the profile's `followerCount` is exact.
async fn follows_at(
    direct: &Clients,
    limited: &Clients,
    proxy: &Proxy,
    limits: PartitionLimits,
    rate: f64,
    seconds: f64,
) -> Result<(), Error> {
    let name = new_table(direct, "follows").await?;
    let now = timestamp::now();
    let scale = limits.scale;
    let count = (rate * scale * seconds).ceil() as usize;
    let mut star = UserItem::new(&user(0, "star")?, &Username::parse("star")?, &now);
    // Famous already: its count past the pull threshold.
    star.follower_total = Some(PULL_FOLLOWERS);
    let mut items = bulk::user_items(&star)?;
    let mut fans = Vec::with_capacity(count);
    for n in 0..count {
        let fan = UserItem::new(
            &user(n, "fan")?,
            &Username::parse(&format!("fan_{n:07}"))?,
            &now,
        );
        items.extend(bulk::user_items(&fan)?);
        fans.push(fan.user_id);
    }
    bulk::put_items(&direct.plain, &name, items).await?;
    let store = Store::new(limited.requests.clone(), &name);
    let measured = Limited::start(proxy, limits);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / (rate * scale)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = tokio::task::JoinSet::new();
    let started = Instant::now();
    for fan in fans {
        tick.tick().await;
        let (store, star) = (store.clone(), star.user_id.clone());
        sent.spawn(async move { store.requests().follow(&fan, &star).await });
    }
    let (mut new, mut unavailable, mut other) = (0_u64, 0, 0);
    while let Some(answer) = sent.join_next().await {
        match answer {
            Ok(Ok(blog::store::follows::Follows::New(_))) => new += 1,
            Ok(Err(blog::store::StoreError::Busy { .. })) => unavailable += 1,
            _ => other += 1,
        }
    }
    let span = started.elapsed().as_secs_f64();
    let (charged, throttled) = measured.finish();
    let (hottest_key, hottest) = charged.hottest_write.clone().unwrap_or_default();
    let hottest_key = hottest_key.split('/').skip(1).collect::<Vec<_>>().join("/");
    // The fan-out's add of the shards' counts, then the profile read.
    let fanout = Store::new(direct.fanout.clone(), &name);
    let table = table::Table::new(direct.plain.clone(), &name);
    let mut counts = Vec::new();
    for shard in 0..blog::keys::FOLLOWER_SHARDS {
        let key = Key::new(keys::followers_pk(&star.user_id, shard), FOLLOWER_COUNT_SK).item();
        if let Some(item) = table.get("a follower count", key, true).await? {
            let count: blog::store::items::follow::FollowerCountItem =
                serde_dynamo::from_item(item).map_err(|e| e.to_string())?;
            counts.push(count);
        }
    }
    fanout.fanout().add_shard_counts(&counts).await?;
    let profile: UserItem = table
        .get_entity(UserItem::key(&star.user_id), true)
        .await?
        .ok_or("the star's profile is gone")?;
    let shown = profile.follower_count();
    let ceiling = limits
        .table_ceiling
        .map_or(0.0, |c| c.write_units_per_second / scale);
    println!(
        "| {ceiling:.0} | {rate:.0} | {count} in {span:.1} s | {new} | {unavailable} | {other} | `{}` | {:.0} | {throttled} | {} (expected {}) |",
        hottest_key.split('#').take(3).collect::<Vec<_>>().join("#"),
        hottest / span.max(0.001) / scale,
        shown,
        PULL_FOLLOWERS + new,
    );
    Ok(())
}

/// Home reads of a reader following `count` authors and pulling `pulls` of
/// them (their posts in their own lists, not in the home); prints its row.
async fn home_reads(
    clients: &Clients,
    count: usize,
    pulls: usize,
    reads: usize,
) -> Result<(), Error> {
    let name = new_table(clients, "read").await?;
    let now = timestamp::now();
    let mut reader = UserItem::new(&user(0, "reader")?, &Username::parse("reader")?, &now);
    reader.pulls = (0..pulls)
        .map(|a| user(a, "author"))
        .collect::<Result<_, _>>()?;
    let mut items = bulk::user_items(&reader)?;
    let entries = count.max(800);
    let per_author = entries.div_ceil(count.max(1));
    let mut written = 0;
    for a in 0..count {
        let author = UserItem::new(
            &user(a, "author")?,
            &Username::parse(&format!("author_{a:05}"))?,
            &now,
        );
        items.extend(bulk::user_items(&author)?);
        let pulled = a < pulls;
        let follow_id = FollowId::generate();
        items.push(
            FollowItem {
                user_id: reader.user_id.clone(),
                followed_id: author.user_id.clone(),
                follow_id,
                created_at: now.clone(),
                pull: pulled,
            }
            .to_item()?,
        );
        for _ in 0..per_author {
            if written == entries {
                break;
            }
            written += 1;
            let post = PostItem::new(
                PostId::generate(),
                &author,
                "a post in a home",
                "read by the home",
                &[],
                Status::Published,
                &now,
            );
            items.push(post.to_item()?);
            if pulled {
                continue;
            }
            items.push(
                HomeEntryItem {
                    reader: reader.user_id.clone(),
                    post_id: post.post_id,
                    user_id: author.user_id.clone(),
                    listed_id: post.post_id,
                    expires_at: 4_000_000_000,
                }
                .to_item()?,
            );
        }
    }
    bulk::put_items(&clients.plain, &name, items).await?;
    let store = Store::new(clients.requests.clone(), &name);
    let mut latencies = Vec::with_capacity(reads);
    let mut calls = 0;
    let mut units = 0.0;
    for _ in 0..reads {
        clients.request_meter.take();
        let started = Instant::now();
        let page = store.requests().home(&reader.user_id, 20, None).await?;
        latencies.push(started.elapsed());
        if page.items.len() != 20 {
            return Err(format!("a home page of {} posts", page.items.len()).into());
        }
        let made = clients.request_meter.take();
        calls = made.len();
        units = made.iter().map(|c| c.table + c.indexes).sum();
    }
    latencies.sort();
    let at = |q: f64| {
        let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "| {count} | {pulls} | {written} | {calls} | {units:.1} | {:.1} | {:.1} |",
        at(0.5),
        at(0.99)
    );
    Ok(())
}
