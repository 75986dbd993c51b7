//! `blog-rename-bench`: the rename fan-out of one user who wrote `--items`
//! posts and comments (100,000 by default), as the deployed fan-out runs it:
//! invocations with Lambda's 60 s timeout, each stopping before its deadline
//! and resumed by the next, until every copy carries the new name. Prints the
//! time, the invocations, and the write units per item (DynamoDB Local's
//! figure, and the billed one from the items' sizes).
//!
//! ```text
//! blog-rename-bench --endpoint URL [--items N] [--timeout-seconds S]
//! ```
//!
//! `infra/bench.sh --rename` runs it against its own DynamoDB Local.

use std::time::{Duration, Instant};

use bench::{measure::Clients, naive::Error};
use blog::{
    ids::{CommentId, PostId, UserId},
    store::{
        Store, bulk,
        feed::FEED_CAPACITY,
        items::comment::CommentItem,
        items::post::{PostContentItem, PostItem},
        items::user::UserItem,
        table,
        {deadline::Deadline, rename::RenameStep},
    },
    text::Username,
    timestamp,
};

/// Comments each post gets from its own author (so a post and its comments
/// are 100 items under the author's GSI1 partition).
const COMMENTS_PER_POST: usize = 99;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default();
    let mut items = 100_000_usize;
    let mut timeout = Duration::from_secs(60);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => endpoint = value()?,
            "--items" => items = value()?.parse()?,
            "--timeout-seconds" => timeout = Duration::from_secs(value()?.parse()?),
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    let clients = Clients::local(&endpoint).await;
    let name = format!(
        "rename-bench-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    table::create_if_missing(&clients.plain, &name).await?;

    // The user and everything they wrote, in its final state.
    let user_id = UserId::parse("prolific-writer")?;
    let now = timestamp::now();
    let mut author = UserItem::new(&user_id, &Username::parse("prolific")?, &now);
    let loading = Instant::now();
    let mut loaded = 0;
    let mut all = bulk::user_items(&author)?;
    let mut posts = Vec::new();
    while loaded < items {
        let post_id = PostId::parse(&ulid::Ulid::generate().to_string())?;
        let post = PostItem::new(
            post_id,
            &author,
            "a post",
            "text",
            &[],
            blog::model::Status::Published,
            &now,
        );
        let content = PostContentItem::new(post_id, "text", &now);
        let comments = (0..COMMENTS_PER_POST.min(items - loaded - 1))
            .map(|_| {
                let id = CommentId::parse(&ulid::Ulid::generate().to_string())?;
                Ok(CommentItem::new(post_id, id, &author, "a comment"))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        loaded += 1 + comments.len();
        let thread = bulk::PostWithReplies::new(post, content, comments, Vec::new());
        all.extend(bulk::post_items(&thread)?);
        posts.push(thread.post);
    }
    let newest: Vec<&PostItem> = posts.iter().rev().take(FEED_CAPACITY).collect();
    all.extend(bulk::feed_items(&newest, FEED_CAPACITY)?);
    bulk::put_items(&clients.plain, &name, all).await?;
    println!(
        "loaded {loaded} items of one user in {:.0} s",
        loading.elapsed().as_secs_f64()
    );

    // The rename, as the API commits it; then its fan-out, invocation by
    // invocation, as Lambda would run it.
    let store = Store::new(clients.fanout.clone(), &name);
    let renamed = Username::parse("renamed_prolific")?;
    store
        .requests()
        .rename_user(&user_id, &renamed, &blog::revision::Expected::Any)
        .await?;
    author.username = renamed;
    author.version = 2;
    author.updated_at = timestamp::now();
    clients.fanout_meter.take();
    let started = Instant::now();
    let mut invocations = 0;
    let mut copied = 0;
    loop {
        invocations += 1;
        let deadline = Deadline::at(Instant::now() + timeout);
        let step = store.fanout().copy_username(&author, &deadline).await?;
        let (done, finished) = match step {
            RenameStep::Paused(done) => (done, false),
            RenameStep::Done(done) => (done, true),
            RenameStep::Superseded(_) => return Err("superseded: nothing renamed it".into()),
        };
        copied += done.written;
        println!(
            "  invocation {invocations}: {} copies, {} at {:.0} s",
            done.written,
            if finished { "done" } else { "paused" },
            started.elapsed().as_secs_f64()
        );
        if finished {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let calls = clients.fanout_meter.take();
    let writes: f64 = calls
        .iter()
        .filter(|c| !matches!(c.operation.as_str(), "GetItem" | "Query"))
        .map(|c| c.total())
        .sum();
    let reads: f64 = calls
        .iter()
        .filter(|c| matches!(c.operation.as_str(), "GetItem" | "Query"))
        .map(|c| c.total())
        .sum();
    let pages = calls.iter().filter(|c| c.operation == "Query").count();
    println!(
        "rename of {loaded} items: {copied} copies in {seconds:.0} s ({:.0} items a second), \
         {invocations} invocations of at most {} s, {pages} pages; \
         DynamoDB Local reports {:.2} write units and {:.3} read units per item",
        copied as f64 / seconds,
        timeout.as_secs(),
        writes / loaded as f64,
        reads / loaded as f64,
    );
    Ok(())
}
