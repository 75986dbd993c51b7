//! `blog-home-bench`: a post delivered to its author's followers' homes, and
//! home reads, on DynamoDB Local.
//!
//! For each follower count (`--followers 10,1000,100000` by default), a
//! fresh table gets the author, their follower entries and counts (loaded in
//! bulk, as follows leave them) and one published post; then the fan-out's
//! delivery runs as deployed: the post's deliveries started, then the eight
//! walked side by side (as eight stream shards would), each in invocations of
//! Lambda's 60 s timeout, until every follower's home holds the post.
//! Printed: the time until the last home has it, the calls and units
//! (DynamoDB Local's figures; a home entry is under 1 KB, so 1 WCU is also
//! the billed figure), the busiest partition's writes a second, and the CPU
//! the walk took (this process's user + system time; under the fan-out's
//! share, 512 MB = 0.29 vCPU, divide the share into it).
//!
//! Then home reads: a reader following `--follows 10,500,5000` authors, each
//! of whom has posts in the reader's home (800 entries in all, or one per
//! author past 800); the calls, units and latency of a first page of 20.
//!
//! ```text
//! blog-home-bench --endpoint URL [--followers 10,1000,100000] [--follows 10,500,5000] [--reads 50]
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
        Store, bulk,
        follows::{FollowItem, FollowerItem, follower_shard},
        home::{Delivering, HomeEntryItem},
        posts::PostItem,
        rename::Deadline,
        table,
        users::UserItem,
    },
    text::Username,
    timestamp,
};

fn numbers(raw: &str) -> Result<Vec<usize>, Error> {
    raw.split(',')
        .map(|n| n.trim().parse::<usize>().map_err(Error::from))
        .collect()
}

/// This process's CPU time so far (user + system), from /proc.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is the 12th,
    // stime the 13th, in clock ticks (100 a second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
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

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default();
    let mut followers = vec![10, 1_000, 100_000];
    let mut follows = vec![10, 500, 5_000];
    let mut reads = 50_usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => endpoint = value()?,
            "--followers" => followers = numbers(&value()?)?,
            "--follows" => follows = numbers(&value()?)?,
            "--reads" => reads = value()?.parse()?,
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    let clients = Clients::local(&endpoint).await;
    println!(
        "| followers | load (s) | delivered in (s) | entries a second | calls | WCU (Local) | WCU a follower | busiest partition, WCU/s | walk CPU (s) | CPU a 1,000 followers (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &count in &followers {
        deliver(&clients, count).await?;
    }
    println!();
    println!("| follows | home entries | calls a page of 20 | RCU (Local) | p50 (ms) | p99 (ms) |");
    println!("|---|---|---|---|---|---|");
    for &count in &follows {
        home_reads(&clients, count, reads).await?;
    }
    Ok(())
}

/// One post delivered to `count` followers; prints its row.
async fn deliver(clients: &Clients, count: usize) -> Result<(), Error> {
    let name = new_table(clients, "deliver").await?;
    let now = timestamp::now();
    let author = UserItem::new(&user(0, "author")?, &Username::parse("author")?, &now);
    let loading = Instant::now();
    let mut items = bulk::user_items(&author)?;
    let mut per_shard: BTreeMap<u8, usize> = BTreeMap::new();
    for n in 0..count {
        let follower = user(n, "follower")?;
        let entry = FollowerItem {
            user_id: author.user_id.clone(),
            follower_id: follower.clone(),
            follow_id: FollowId::generate(),
            created_at: now.clone(),
            pull: false,
        };
        *per_shard
            .entry(follower_shard(&follower, false))
            .or_default() += 1;
        items.push(entry.to_item()?);
    }
    for (shard, n) in &per_shard {
        items.push(count_item(&author.user_id, *shard, *n));
    }
    let post = PostItem::new(
        PostId::generate(),
        &author,
        "delivered",
        "to every follower",
        &[],
        Status::Published,
        &now,
    );
    items.push(post.to_item()?);
    bulk::put_items(&clients.plain, &name, items).await?;
    let loaded = loading.elapsed();

    let store = Store::new(clients.fanout.clone(), &name);
    clients.fanout_meter.take();
    let cpu = cpu_time();
    let started = Instant::now();
    store.fanout().start_deliveries(&post).await?;
    let walks = (0..PUSH_SHARDS).map(|shard| {
        let store = store.clone();
        let post = post.post_id;
        async move {
            let mut invocations = 0;
            loop {
                invocations += 1;
                let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
                match store.fanout().deliver(&post, shard, &deadline).await? {
                    Delivering::Paused { .. } => continue,
                    Delivering::Done { .. } | Delivering::Stale => {
                        return Ok::<usize, Error>(invocations);
                    }
                }
            }
        }
    });
    futures::future::try_join_all(walks).await?;
    let took = started.elapsed();
    let walk_cpu = cpu_time().saturating_sub(cpu);
    let calls = clients.fanout_meter.take();
    let units: f64 = calls.iter().map(|c| c.table + c.indexes).sum();
    let writes: f64 = calls
        .iter()
        .filter(|c| c.operation == "BatchWriteItem")
        .map(|c| c.table)
        .sum();
    // Every home entry goes to its own partition (1 WCU each); the busiest
    // partitions are the deliveries' own (a place saved a page) and the
    // follower shards read.
    let largest_shard = per_shard.values().copied().max().unwrap_or(0);
    let pages = largest_shard.div_ceil(blog::store::home::PAGE) + 1;
    let busiest = pages as f64 / took.as_secs_f64().max(0.001);
    println!(
        "| {count} | {:.1} | {:.2} | {:.0} | {} | {units:.0} | {:.3} | {busiest:.1} | {:.2} | {:.1} |",
        loaded.as_secs_f64(),
        took.as_secs_f64(),
        count as f64 / took.as_secs_f64().max(0.001),
        calls.len(),
        (units / count.max(1) as f64),
        walk_cpu.as_secs_f64(),
        walk_cpu.as_secs_f64() * 1_000_000.0 / count.max(1) as f64,
    );
    let _ = writes;
    Ok(())
}

/// Home reads of a reader following `count` authors; prints its row.
async fn home_reads(clients: &Clients, count: usize, reads: usize) -> Result<(), Error> {
    let name = new_table(clients, "read").await?;
    let now = timestamp::now();
    let reader = UserItem::new(&user(0, "reader")?, &Username::parse("reader")?, &now);
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
        let follow_id = FollowId::generate();
        items.push(
            FollowItem {
                user_id: reader.user_id.clone(),
                followed_id: author.user_id.clone(),
                follow_id,
                created_at: now.clone(),
                pull: false,
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
        "| {count} | {written} | {calls} | {units:.1} | {:.1} | {:.1} |",
        at(0.5),
        at(0.99)
    );
    Ok(())
}
