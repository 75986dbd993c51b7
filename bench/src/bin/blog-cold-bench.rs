//! `blog-cold-bench`: every function's cold start as Lambda runs it (issue
//! 34): the process confined to the CPU share of its memory size (a cgroup v1
//! `cpu` quota of period × MB / 1,769: Lambda gives one vCPU at 1,769 MB) and
//! to that memory (`memory` cgroup), told its memory size, and reaching
//! DynamoDB over TLS as deployed: a TLS endpoint in front of DynamoDB Local
//! presenting an RSA 2048 certificate and its intermediate (DynamoDB's chain
//! has that shape), whose root is appended to this machine's whole trust
//! bundle (about 140 roots, as Lambda's) in the file the function is given as
//! `SSL_CERT_FILE` (where the SDK's HTTPS client, rustls with the platform's
//! roots, reads its trust roots). Each start serves the function's sample
//! event (`events/<name>.json`) twice, and every invocation takes the
//! function's success path: before each one (warm-up and `--warm`
//! invocations included) the table is emptied and the function's seed put
//! back (the user, post and comment the events name; see `seed`), so that
//! no invocation meets what the one before it wrote or deleted; each
//! function at each size runs on a table of its own, deleted after it
//! (`FreshTable`: DynamoDB Local slows as a table's stream grows). Each answer
//! is checked against the function's success status (201, 204 or 200; for
//! the fan-out and the failure queue's consumer, no `batchItemFailures`):
//! the tables' `failed` column counts those that missed it, and the run
//! exits non-zero after printing them if any did (or at once, if the
//! warm-up's did).
//!
//! ```text
//! blog-cold-bench --endpoint URL --functions DIR --events DIR
//!     [--baseline DIR] [--starts 5] [--memory 128,256,512,1024,0]
//!     [--only a,b] [--warm N] [--root-only] [--latency-ms 0]
//!     [--rename-items N | --batch-likes N]
//! ```
//!
//! `--memory 0` is the machine's whole CPU, unconfined. Before measuring, each
//! share is checked to be in force: a busy loop in its cgroup must run about
//! 1,769 / MB times slower than outside. `--baseline DIR` measures a second
//! build of the functions beside the first, start by start in turn, so that
//! both meet the same machine (rows labelled `baseline` and `candidate`).
//! `--warm N` (N ≥ 1) measures, instead of cold starts, N warm invocations
//! of one process at each size: their p50 and p99, and what a million of
//! them cost at arm64 prices (unconfined priced at 1,769 MB). `--root-only`
//! trusts the test root alone (what loading the platform's bundle costs
//! shows against a run without it). `--latency-ms` delays each of DynamoDB
//! Local's answers by that much, once per answer, as the network and
//! DynamoDB itself would. Needs root (cgroups); the cgroups and the scratch
//! directory (the test CA's keys) are removed however the run ends.
//! `--rename-items N` gives the fan-out a rename's walk to do instead of its
//! sample: its event only the sample's user MODIFY (a new username), its
//! seed N more comments by the user, whose copies of the name the walk
//! rewrites (rows labelled `fan-out, rename of N items`). `--batch-likes N`
//! gives it instead a batch of N like INSERTs, as a liked post's backlog
//! arrives (rows labelled `fan-out, N like INSERTs`).
//! `infra/measure.sh cold` runs it against a DynamoDB Local of its own;
//! `infra/measure.sh warm` runs `--warm` one function at one size at a time,
//! each against a fresh DynamoDB Local: through a whole run one Local slows
//! (fresh tables or not), and the later functions' figures measured that.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use bench::{
    lambda::{self, Answer, ColdFigures, Confinement, Environment, Expected, Invocations, Prepare},
    measure::{Clients, Stats},
    naive::Error,
};
use blog::{
    ids::{CommentId, LikeId, PostId, UserId},
    keys::{Entity, Key, PostPartition},
    store::{
        Item,
        bulk::{self, PostWithReplies},
        feed::FEED_CAPACITY,
        items::comment::CommentItem,
        items::user::UserItem,
        items::{
            like::LikeItem,
            post::{PostContentItem, PostItem},
        },
        table::{self, Deleted, Scan, Table, Write},
    },
    text::Username,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::{TlsAcceptor, rustls};

/// The CPU period of the quota, in microseconds.
const PERIOD_US: u64 = 100_000;
/// Lambda gives one vCPU at this memory size.
const ONE_VCPU_MB: u64 = 1_769;
/// Lambda's arm64 price in us-east-1: per GB-second (the first 6 billion a
/// month) and per request.
const ARM64_GB_SECOND_USD: f64 = 0.000_013_333_4;
const REQUEST_USD: f64 = 0.000_000_2;
/// The machine's trust bundle: the function trusts all of it, as deployed.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Invocations of each function, unconfined, before anything is measured:
/// DynamoDB Local's JVM compiles its hot paths in them, so the first
/// function measured does not pay for that.
const WARM_UP: usize = 40;

struct Options {
    endpoint: String,
    functions: PathBuf,
    baseline: Option<PathBuf>,
    events: PathBuf,
    starts: usize,
    memory: Vec<u32>,
    only: Vec<String>,
    warm: Option<usize>,
    /// Trust the test root alone, not the platform's bundle with it: what
    /// loading the platform's roots costs a start.
    root_only: bool,
    /// Added to each answer of DynamoDB Local's, which answers in well under
    /// a millisecond on loopback where DynamoDB takes a few from a Lambda
    /// function in its region.
    latency: Duration,
    /// What the fan-out is given instead of its sample, if anything.
    fan_out: FanOutLoad,
}

/// What the fan-out's invocations carry.
#[derive(Debug, Clone, Copy)]
enum FanOutLoad {
    /// Its sample event (`events/fan-out.json`).
    Sample,
    /// The sample's rename alone, of a user with this many more items.
    Rename(usize),
    /// This many like INSERTs in one batch.
    Likes(usize),
}

impl FanOutLoad {
    /// What a row of `function`'s says it measured.
    fn label(self, function: &str) -> String {
        match self {
            FanOutLoad::Rename(n) if function == "fan-out" => {
                format!("fan-out, rename of {n} items")
            }
            FanOutLoad::Likes(n) if function == "fan-out" => format!("fan-out, {n} like INSERTs"),
            _ => function.to_owned(),
        }
    }
}

fn options() -> Result<Options, Error> {
    let mut options = Options {
        endpoint: String::new(),
        functions: PathBuf::from("target/release"),
        baseline: None,
        events: PathBuf::from("events"),
        starts: 5,
        memory: vec![128, 256, 512, 1024, 0],
        only: Vec::new(),
        warm: None,
        root_only: false,
        latency: Duration::ZERO,
        fan_out: FanOutLoad::Sample,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => options.endpoint = value()?,
            "--functions" => options.functions = value()?.into(),
            "--baseline" => options.baseline = Some(value()?.into()),
            "--events" => options.events = value()?.into(),
            "--starts" => options.starts = value()?.parse()?,
            "--memory" => {
                options.memory = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--only" => options.only = value()?.split(',').map(str::to_owned).collect(),
            "--warm" => options.warm = Some(value()?.parse()?),
            "--root-only" => options.root_only = true,
            "--rename-items" => options.fan_out = FanOutLoad::Rename(value()?.parse()?),
            "--batch-likes" => options.fan_out = FanOutLoad::Likes(value()?.parse()?),
            "--latency-ms" => {
                options.latency = Duration::from_secs_f64(value()?.parse::<f64>()? / 1e3)
            }
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if options.endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    if options.warm == Some(0) {
        return Err("--warm needs at least one warm invocation".into());
    }
    Ok(options)
}

/// The builds measured: `(label, directory)`, labelled "baseline" and
/// "candidate" when there are two (two directories may well share a last
/// name, `release`).
fn builds(options: &Options) -> Vec<(String, PathBuf)> {
    match &options.baseline {
        Some(baseline) => vec![
            ("baseline".to_owned(), baseline.clone()),
            ("candidate".to_owned(), options.functions.clone()),
        ],
        None => vec![(String::new(), options.functions.clone())],
    }
}

/// The functions measured. The table is put back before each invocation
/// (see [`Reseed`]), so their order does not matter.
fn functions(options: &Options) -> Vec<&'static str> {
    blog::routes::functions()
        .filter(|name| options.only.is_empty() || options.only.iter().any(|o| o == name))
        .collect()
}

/// A directory removed when dropped, whichever way the run ends: it holds
/// the test CA's private keys.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let options = options()?;
    let scratch =
        Scratch(std::env::temp_dir().join(format!("blog-cold-{}", ulid::Ulid::generate())));
    std::fs::create_dir_all(&scratch.0)?;
    let scratch = &scratch.0;
    let mut bundle = test_ca(scratch)?;
    if options.root_only {
        bundle = scratch.join("root.pem");
    }
    let upstream = options
        .endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let tls = serve_tls(scratch, upstream, options.latency).await?;
    println!(
        "DynamoDB Local behind TLS at {tls}; trust bundle {}",
        bundle.display()
    );

    let clients = Clients::local(&options.endpoint).await;
    let names = functions(&options);
    let mut cases = Vec::new();
    for name in &names {
        let sample = std::fs::read_to_string(options.events.join(format!("{name}.json")))?;
        cases.push((*name, sample));
    }
    let builds = builds(&options);
    let load = options.fan_out;
    warm_up(&cases, &builds, &clients, &tls, &bundle, load).await?;

    let mut rows = Vec::new();
    let mut failed = 0;
    for memory in &options.memory {
        let confinement = confine(*memory, &bundle)?;
        for (name, sample) in &cases {
            let fresh = FreshTable::for_function(&clients, name, sample, load).await?;
            let label = load.label(name);
            let case = Case {
                name,
                label: &label,
                memory: *memory,
                builds: &builds,
                env: &Environment {
                    table: &fresh.name,
                    endpoint: &tls,
                },
                confinement: &confinement.confinement,
                event: &fresh.event,
                reseed: &fresh.reseed,
            };
            let measured = match options.warm {
                Some(invocations) => warm(&case, invocations).await,
                None => cold(&case, options.starts).await,
            };
            fresh.delete(&clients).await;
            for (row, row_failed) in measured? {
                println!("{row}");
                rows.push(row);
                failed += row_failed;
            }
        }
    }
    println!();
    if options.warm.is_some() {
        println!(
            "| function | memory (CPU share) | build | warm p50 / p99 ms | billed ms (mean) | USD per million | CPU ms per invocation | share used up above (/s) | failed |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
    } else {
        println!(
            "| function | memory (CPU share) | build | init p50 / max ms | first answer p50 / max ms | CPU to first answer p50 / max ms | held by the quota p50 / max ms | second answer p50 / max ms | peak memory MiB | failed |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
    }
    for row in rows {
        println!("{row}");
    }
    if options.warm.is_some() && options.memory.contains(&0) {
        println!();
        println!("Unconfined rows are priced at {ONE_VCPU_MB} MB (one vCPU).");
    }
    if failed > 0 {
        return Err(format!(
            "FAILED: {failed} measured invocations did not answer their success status \
             (the failed column): those figures measure error paths"
        )
        .into());
    }
    Ok(())
}

/// When the seed's items were made.
const SEEDED_AT: &str = "2026-11-22T09:00:00.000Z";

/// The ids the sample events (`events/*.json`) name: their caller, who
/// wrote the post and the comment.
const USER: &str = "0b3f1e2a-8c1d-4f5e-9a7b-2c3d4e5f6a7b";
const POST: &str = "01JD5Z8Q6N3W4X5Y6Z7A8B9C0D";
const COMMENT: &str = "01JD5Z9A1B2C3D4E5F6G7H8J9K";
/// The caller's like of the post, which unlike-post's event takes away.
const LIKE: &str = "01JD5Z9B1B2C3D4E5F6G7H8J9K";

/// What the table holds before each of `function`'s invocations, so that
/// its sample event takes the success path: the caller's profile and
/// username claim, their post (its content and one comment) and the feed
/// entry the fan-out would have written for it. Except: create-user's
/// caller has no profile or username claim yet (or it would answer 409);
/// find-user's username is "alice_2", the name its event looks up (the one
/// update-user's event gives); unlike-post's caller has liked the post; the
/// fan-out's, under `--rename-items` or `--batch-likes`, holds what its
/// event needs besides ([`FanOutLoad`]).
fn seed(function: &str, load: FanOutLoad) -> Result<Vec<Item>, Error> {
    let at = SEEDED_AT;
    let username = if function == "find-user" {
        "alice_2"
    } else {
        "alice"
    };
    let user = UserItem::new(&UserId::parse(USER)?, &Username::parse(username)?, at);
    let post_id = PostId::parse(POST)?;
    let content = "My first post.";
    let post = PostItem::new(
        post_id,
        &user,
        "Hello",
        content,
        &[],
        blog::model::Status::Published,
        at,
    );
    let mut comments = vec![CommentItem::new(
        post_id,
        CommentId::parse(COMMENT)?,
        &user,
        "Nice post!",
    )];
    if let ("fan-out", FanOutLoad::Rename(n)) = (function, load) {
        comments
            .extend((0..n).map(|i| {
                CommentItem::new(post_id, CommentId::generate(), &user, &format!("#{i}"))
            }));
    }
    // Under `--batch-likes`, the likers' profiles and their likes.
    let (likers, batch): (Vec<_>, Vec<_>) = match (function, load) {
        ("fan-out", FanOutLoad::Likes(n)) => batch_likes(n)?.into_iter().unzip(),
        _ => (Vec::new(), Vec::new()),
    };
    let likes = if function == "unlike-post" {
        let place = PostPartition::own(post_id);
        vec![LikeItem::new(place, LikeId::parse(LIKE)?, &user)]
    } else {
        batch
    };
    let thread = PostWithReplies::new(
        post,
        PostContentItem::new(post_id, content, at),
        comments,
        likes,
    );
    let mut items = bulk::post_items(&thread)?;
    items.extend(bulk::feed_items(&[&thread.post], FEED_CAPACITY)?);
    if function != "create-user" {
        items.extend(bulk::user_items(&user)?);
    }
    for liker in &likers {
        items.extend(bulk::user_items(liker)?);
    }
    Ok(items)
}

/// park-failures' sample event names a record of a deployed table's stream,
/// which DynamoDB Local has not: the event, pointed at the first record of
/// the bench table's stream instead (which stays there for 24 hours, whatever
/// the reseeds write after it), so that the function reads and parks it.
async fn park_failures_event(
    clients: &Clients,
    table: &str,
    sample: &str,
) -> Result<String, Error> {
    let described = clients
        .plain
        .describe_table()
        .table_name(table)
        .send()
        .await?;
    let stream_arn = described
        .table
        .and_then(|t| t.latest_stream_arn)
        .ok_or("the bench table has no stream")?;
    let stream = clients
        .streams
        .describe_stream()
        .stream_arn(&stream_arn)
        .send()
        .await?;
    let shard_id = stream
        .stream_description
        .and_then(|d| d.shards)
        .and_then(|shards| shards.into_iter().next())
        .and_then(|shard| shard.shard_id)
        .ok_or("the bench table's stream has no shard")?;
    let iterator = clients
        .streams
        .get_shard_iterator()
        .stream_arn(&stream_arn)
        .shard_id(&shard_id)
        .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
        .send()
        .await?
        .shard_iterator
        .ok_or("no shard iterator")?;
    let records = clients
        .streams
        .get_records()
        .shard_iterator(iterator)
        .limit(1)
        .send()
        .await?;
    let first = records
        .records
        .and_then(|records| records.into_iter().next())
        .and_then(|record| record.dynamodb)
        .and_then(|change| change.sequence_number)
        .ok_or("the bench table's stream has no record yet")?;
    let mut event: serde_json::Value = serde_json::from_str(sample)?;
    let records = event["Records"]
        .as_array_mut()
        .ok_or("park-failures' event has no Records")?;
    for record in records {
        let body = record["body"].as_str().ok_or("a record without a body")?;
        let mut body: serde_json::Value = serde_json::from_str(body)?;
        let info = &mut body["DDBStreamBatchInfo"];
        info["streamArn"] = stream_arn.clone().into();
        info["shardId"] = shard_id.clone().into();
        info["startSequenceNumber"] = first.clone().into();
        info["endSequenceNumber"] = first.clone().into();
        record["body"] = body.to_string().into();
    }
    Ok(event.to_string())
}

/// The likers of a `--batch-likes` batch and their likes of the seeded post,
/// ids fixed by their place in the batch (the seed holds both, and the
/// event carries the likes' INSERTs).
fn batch_likes(n: usize) -> Result<Vec<(UserItem, LikeItem)>, Error> {
    let place = PostPartition::own(PostId::parse(POST)?);
    (0..n)
        .map(|i| {
            let user_id = UserId::parse(&format!("00000000-0000-4000-8000-{i:012}"))?;
            let liker = UserItem::new(&user_id, &Username::parse(&format!("fan_{i}"))?, SEEDED_AT);
            let id = ulid::Ulid::from_parts(1_795_338_000_000 + i as u64, i as u128);
            let like = LikeItem::new(place, LikeId::parse(&id.to_string())?, &liker);
            Ok((liker, like))
        })
        .collect()
}

/// The fan-out's event for `--batch-likes n`: the INSERTs of
/// [`batch_likes`], in the sample's record shape.
fn likes_event(sample: &str, n: usize) -> Result<String, Error> {
    let sample: serde_json::Value = serde_json::from_str(sample)?;
    let source = sample["Records"][0]["eventSourceARN"].clone();
    let records = batch_likes(n)?
        .iter()
        .enumerate()
        .map(|(i, (_, like))| {
            let item = Entity::to_item(like)?;
            let keys = Key::of(&item)?.item();
            let image = |item: Item| serde_json::to_value(serde_dynamo::Item::from(item));
            Ok(serde_json::json!({
                "eventID": format!("batch-like-{i}"),
                "eventName": "INSERT",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "eu-west-1",
                "eventSourceARN": source,
                "dynamodb": {
                    "ApproximateCreationDateTime": 1_795_338_005,
                    "Keys": image(keys)?,
                    "SequenceNumber": format!("{}", 200_000_000_000_000_000_000_u128 + i as u128),
                    "SizeBytes": 300,
                    "StreamViewType": "NEW_AND_OLD_IMAGES",
                    "NewImage": image(item)?,
                },
            }))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(serde_json::json!({ "Records": records }).to_string())
}

/// The fan-out's sample event cut to its user MODIFY record, a rename: the
/// walk then rewrites every item the seed gave the user.
fn rename_event(sample: &str) -> Result<String, Error> {
    let mut event: serde_json::Value = serde_json::from_str(sample)?;
    let records = event["Records"]
        .as_array_mut()
        .ok_or("the fan-out's event has no Records")?;
    records.retain(|record| {
        record["eventName"] == "MODIFY" && record["dynamodb"]["NewImage"]["type"]["S"] == "user"
    });
    if records.len() != 1 {
        return Err("the fan-out's sample should hold one user MODIFY".into());
    }
    Ok(event.to_string())
}

/// The answer `function`'s sample event gets on its success path.
fn expected(function: &str) -> Expected {
    match function {
        "create-user" | "create-post" | "create-comment" | "like-post" => Expected::Status(201),
        "delete-user" | "delete-post" | "delete-comment" | "unlike-post" => Expected::Status(204),
        "fan-out" | "park-failures" => Expected::NoBatchFailures,
        _ => Expected::Status(200),
    }
}

/// Puts the table back to one function's [`seed`] before each invocation:
/// deletes every item in it (what the last invocation wrote: profiles,
/// claims, erasure marks, rename progress, posts, likes and their markers,
/// comments, feed entries, request records, parked failures, whatever it
/// was), then writes the seed. Through DynamoDB Local's plain endpoint,
/// outside every figure measured.
struct Reseed {
    table: Table,
    items: Vec<Item>,
}

impl Prepare for Reseed {
    async fn prepare(&self) -> Result<(), Error> {
        let what = "reseed the cold bench's table";
        let scan = Scan::default().consistent();
        let mut start = None;
        loop {
            let page = self.table.scan_page(what, &scan, start).await?;
            for item in page.items {
                let key = Key::of(&item)?.item();
                self.table
                    .write(what, &Write::delete(key, Deleted::IfGone))
                    .await?;
            }
            start = page.next;
            if start.is_none() {
                break;
            }
        }
        self.table.batch_put(self.items.clone()).await?;
        Ok(())
    }
}

/// A function measured: its name and its sample event.
type Function = (&'static str, String);

/// The table one function's invocations at one size run on, made for them
/// and deleted after: DynamoDB Local keeps a table's stream, which the
/// reseeds fill (about 16 records an invocation), and slows as it grows; a
/// table shared by a whole run measured that slowing, not the functions.
struct FreshTable {
    name: String,
    reseed: Reseed,
    /// The function's event: its sample, but for park-failures (below).
    event: String,
}

impl FreshTable {
    async fn for_function(
        clients: &Clients,
        function: &str,
        sample: &str,
        load: FanOutLoad,
    ) -> Result<Self, Error> {
        let name = format!(
            "cold-bench-{}",
            ulid::Ulid::generate().to_string().to_lowercase()
        );
        table::create_if_missing(&clients.plain, &name).await?;
        let reseed = Reseed {
            table: Table::new(clients.plain.clone(), &name),
            items: seed(function, load)?,
        };
        let mut event = sample.to_owned();
        if function == "park-failures" {
            // Its seed's writes are the stream records it is pointed at.
            reseed.prepare().await?;
            event = park_failures_event(clients, &name, &event).await?;
        }
        match (function, load) {
            ("fan-out", FanOutLoad::Rename(_)) => event = rename_event(&event)?,
            ("fan-out", FanOutLoad::Likes(n)) => event = likes_event(&event, n)?,
            _ => {}
        }
        Ok(Self {
            name,
            reseed,
            event,
        })
    }

    /// Deletes it, its stream with it; a table left behind (the delete
    /// refused) only takes DynamoDB Local's memory, so it is not an error.
    async fn delete(&self, clients: &Clients) {
        let deleted = clients.plain.delete_table().table_name(&self.name).send();
        if let Err(err) = deleted.await {
            eprintln!("{}: not deleted: {err}", self.name);
        }
    }
}

/// Serves each function's event [`WARM_UP`] times, unconfined, the table
/// reseeded before each as for the measured ones, discarding the figures;
/// fails if any invocation missed its success path (the seed would be
/// wrong, and every figure after it with it).
async fn warm_up(
    functions: &[Function],
    builds: &[(String, PathBuf)],
    clients: &Clients,
    endpoint: &str,
    bundle: &Path,
    load: FanOutLoad,
) -> Result<(), Error> {
    let free = Confinement {
        ca_file: Some(bundle.to_owned()),
        ..Confinement::default()
    };
    for (name, sample) in functions {
        for (_, dir) in builds {
            let fresh = FreshTable::for_function(clients, name, sample, load).await?;
            let env = Environment {
                table: &fresh.name,
                endpoint,
            };
            let invocations = Invocations {
                event: &fresh.event,
                count: WARM_UP,
                expected: expected(name),
            };
            let served = lambda::serve(
                name,
                &dir.join(name),
                &env,
                &free,
                &invocations,
                &fresh.reseed,
            )
            .await;
            fresh.delete(clients).await;
            let served = served?;
            if served.failed > 0 {
                return Err(unexpected(name, &invocations, &served.answers).into());
            }
        }
    }
    Ok(())
}

/// What a function answered that it should not have.
fn unexpected(name: &str, invocations: &Invocations<'_>, answers: &[Answer]) -> String {
    let wrong: Vec<&Answer> = answers
        .iter()
        .filter(|answer| !invocations.expected.met_by(answer))
        .collect();
    format!(
        "{name}: {} of {} invocations answered other than {:?}: {wrong:?}",
        wrong.len(),
        answers.len(),
        invocations.expected
    )
}

/// One function at one memory size, in each build.
struct Case<'a> {
    name: &'a str,
    /// What its rows say it measured.
    label: &'a str,
    memory: u32,
    builds: &'a [(String, PathBuf)],
    env: &'a Environment<'a>,
    confinement: &'a Confinement,
    event: &'a str,
    reseed: &'a Reseed,
}

impl Case<'_> {
    /// Has one process of `dir`'s build serve `count` invocations, the table
    /// reseeded before each; says on stderr what any of them answered wrong.
    async fn serve(&self, dir: &Path, count: usize) -> Result<lambda::Served, Error> {
        let invocations = Invocations {
            event: self.event,
            count,
            expected: expected(self.name),
        };
        let binary = dir.join(self.name);
        let served = lambda::serve(
            self.name,
            &binary,
            self.env,
            self.confinement,
            &invocations,
            self.reseed,
        )
        .await?;
        if served.failed > 0 {
            eprintln!(
                "{} ({}): {}",
                share(self.memory),
                dir.display(),
                unexpected(self.name, &invocations, &served.answers)
            );
        }
        Ok(served)
    }
}

/// One function's cold starts at one size, the builds' starts in turn: each
/// build's row, and how many of its invocations failed.
async fn cold(case: &Case<'_>, starts: usize) -> Result<Vec<(String, usize)>, Error> {
    let mut figures = vec![ColdFigures::default(); case.builds.len()];
    for _ in 0..starts {
        for ((_, dir), figures) in case.builds.iter().zip(figures.iter_mut()) {
            let served = case.serve(dir, 2).await?;
            figures.add(&served);
            // The next start begins with a full quota, as a new Lambda
            // environment would: two periods pass first.
            tokio::time::sleep(Duration::from_micros(2 * PERIOD_US)).await;
        }
    }
    Ok(case
        .builds
        .iter()
        .zip(&figures)
        .map(|((build, _), figures)| {
            let row = row(case.label, case.memory, build, figures);
            (row, figures.failed)
        })
        .collect())
}

/// One function's warm invocations at one size: one process, its first
/// (cold) invocation left out of the figures but not of the failed count.
async fn warm(case: &Case<'_>, invocations: usize) -> Result<Vec<(String, usize)>, Error> {
    let mut rows = Vec::new();
    for (build, dir) in case.builds {
        let served = case.serve(dir, invocations + 1).await?;
        let warm: Vec<f64> = served.invocations.iter().skip(1).copied().collect();
        let stats = Stats::of(warm.clone());
        // Lambda bills each invocation's duration rounded up to the
        // millisecond, at the memory size's GB-second price; unconfined is
        // priced as one vCPU's memory size.
        let billed_ms = warm.iter().map(|s| (s * 1000.0).ceil()).sum::<f64>() / warm.len() as f64;
        let (size_mb, memory) = if case.memory == 0 {
            (
                ONE_VCPU_MB as u32,
                format!("unconfined (priced at {ONE_VCPU_MB} MB)"),
            )
        } else {
            (case.memory, share(case.memory))
        };
        let per_million = 1e6
            * (REQUEST_USD
                + billed_ms / 1000.0 * f64::from(size_mb) / 1024.0 * ARM64_GB_SECOND_USD);
        // CPU per warm invocation, and the rate of back-to-back invocations
        // one environment sustains before its share (memory / 1,769 of a
        // vCPU-second each second) is used up: past it the quota holds each
        // invocation back.
        let (cpu_ms, binds_above) = match served.later_cpu {
            Some(cpu) if case.memory > 0 => {
                let cpu_ms = cpu * 1000.0 / invocations as f64;
                let share_ms = 1000.0 * f64::from(case.memory) / ONE_VCPU_MB as f64;
                (format!("{cpu_ms:.2}"), format!("{:.0}", share_ms / cpu_ms))
            }
            _ => ("–".to_owned(), "–".to_owned()),
        };
        rows.push((
            format!(
                "| {} | {memory} | {build} | {:.2} / {:.2} | {billed_ms:.2} | {per_million:.4} | {cpu_ms} | {binds_above} | {} |",
                case.label, stats.p50, stats.p99, served.failed
            ),
            served.failed,
        ));
    }
    Ok(rows)
}

fn share(memory: u32) -> String {
    if memory == 0 {
        "unconfined".to_owned()
    } else {
        format!(
            "{memory} MB ({:.0} %)",
            100.0 * f64::from(memory) / ONE_VCPU_MB as f64
        )
    }
}

/// The table row of one function at one memory size.
fn row(name: &str, memory: u32, build: &str, figures: &ColdFigures) -> String {
    // "–" where nothing was measured (the CPU columns of an unconfined
    // start, which has no cgroup to count them).
    let ms = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        match (v.get(v.len() / 2), v.last()) {
            (Some(p50), Some(max)) => format!("{:.1} / {:.1}", p50 * 1000.0, max * 1000.0),
            _ => "–".to_owned(),
        }
    };
    let peak = figures.peak_kib.iter().max().map_or("–".to_owned(), |kib| {
        format!("{:.1}", *kib as f64 / 1024.0)
    });
    format!(
        "| {name} | {} | {build} | {} | {} | {} | {} | {} | {peak} | {} |",
        share(memory),
        ms(&figures.init),
        ms(&figures.first_answer),
        ms(&figures.cpu),
        ms(&figures.throttled),
        ms(&figures.second_answer),
        figures.failed
    )
}

/// A [`Confinement`] whose cgroups are removed when it is dropped, however
/// the run leaves the memory size (an error included): none is left behind
/// with its quota set.
struct Confined {
    confinement: Confinement,
}

impl Drop for Confined {
    fn drop(&mut self) {
        bench::lambda::remove_cgroups(&self.confinement.cgroups);
    }
}

/// The cgroups of a `memory` MB function (v1 `cpu` with its quota,
/// `cpuacct` to count its CPU time, `memory` with its limit), the share
/// checked to be in force; none for 0 (unconfined). The function trusts
/// `bundle`.
fn confine(memory: u32, bundle: &Path) -> Result<Confined, Error> {
    let mut confined = Confined {
        confinement: Confinement {
            memory_mb: (memory > 0).then_some(memory),
            ca_file: Some(bundle.to_owned()),
            ..Confinement::default()
        },
    };
    if memory == 0 {
        return Ok(confined);
    }
    let group =
        |controller: &str| PathBuf::from(format!("/sys/fs/cgroup/{controller}/blog-cold-{memory}"));
    let (cpu, cpuacct, mem) = (group("cpu"), group("cpuacct"), group("memory"));
    for group in [&cpu, &cpuacct, &mem] {
        std::fs::create_dir_all(group)
            .map_err(|e| format!("{}: {e} (cgroup v1, as root)", group.display()))?;
        confined.confinement.cgroups.push(group.clone());
    }
    let quota = PERIOD_US * u64::from(memory) / ONE_VCPU_MB;
    std::fs::write(cpu.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
    std::fs::write(cpu.join("cpu.cfs_quota_us"), quota.to_string())?;
    let bytes = u64::from(memory) * 1024 * 1024;
    std::fs::write(mem.join("memory.limit_in_bytes"), bytes.to_string())?;
    confined.confinement.cpu = Some(cpu);
    confined.confinement.cpuacct = Some(cpuacct);
    let slowdown = check_share(&confined.confinement.cgroups)?;
    let expected = ONE_VCPU_MB as f64 / f64::from(memory);
    println!("{memory} MB: a busy loop runs {slowdown:.1} times slower (expected {expected:.1})");
    // Below one vCPU the quota must show; well above it, it cannot.
    if expected > 1.5 && slowdown < expected / 2.0 {
        return Err(format!("the {memory} MB CPU share is not in force").into());
    }
    // The busy loop spent this period's quota: the first start must not
    // inherit what is left of it.
    std::thread::sleep(Duration::from_micros(2 * PERIOD_US));
    Ok(confined)
}

/// How many times slower a busy loop runs in `cgroups` than outside them:
/// the check that the CPU share is in force.
fn check_share(cgroups: &[PathBuf]) -> Result<f64, Error> {
    let time = |confined: bool| -> Result<f64, Error> {
        let mut command = std::process::Command::new("/bin/sh");
        let busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
        if confined {
            let script =
                format!(r#"for g; do echo $$ > "$g/cgroup.procs" || exit 97; done; {busy}"#);
            command.arg("-c").arg(script).arg("sh").args(cgroups);
        } else {
            command.arg("-c").arg(busy);
        }
        let started = Instant::now();
        let status = command.status()?;
        if !status.success() {
            return Err(format!("the busy loop failed: {status}").into());
        }
        Ok(started.elapsed().as_secs_f64())
    };
    let free = time(false)?;
    let confined = time(true)?;
    Ok(confined / free)
}

/// A test root, an intermediate it signed and a certificate the intermediate
/// signed for `localhost` and 127.0.0.1, made with openssl in `dir`; the
/// trust bundle the function is given (the platform's and the test root).
fn test_ca(dir: &Path) -> Result<PathBuf, Error> {
    // Each call: its arguments, and the subject (which holds spaces) last.
    let run = |args: &str, subject: Option<&str>| -> Result<(), Error> {
        let mut command = std::process::Command::new("openssl");
        command.args(args.split_whitespace());
        if let Some(subject) = subject {
            command.arg("-subj").arg(subject);
        }
        let status = command
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("openssl {args}: {status}").into())
        }
    };
    // DynamoDB's chain has this shape: an RSA 2048 leaf, an RSA 2048
    // intermediate, a root in the platform's bundle.
    let key = "-newkey rsa:2048 -nodes";
    run(
        &format!("req -x509 {key} -keyout root.key -out root.pem -days 2"),
        Some("/CN=blog cold bench root CA"),
    )?;
    let extensions = [
        (
            "intermediate.ext",
            "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n",
        ),
        (
            "server.ext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        ),
    ];
    for (file, text) in extensions {
        std::fs::write(dir.join(file), text)?;
    }
    for (name, subject, signer) in [
        ("intermediate", "/CN=blog cold bench RSA 2048 M01", "root"),
        ("server", "/CN=localhost", "intermediate"),
    ] {
        run(
            &format!("req {key} -keyout {name}.key -out {name}.csr"),
            Some(subject),
        )?;
        run(
            &format!(
                "x509 -req -in {name}.csr -CA {signer}.pem -CAkey {signer}.key \
                 -CAcreateserial -out {name}.pem -days 2 -extfile {name}.ext"
            ),
            None,
        )?;
    }
    // The endpoint presents the leaf and its intermediate.
    let chain = [
        std::fs::read_to_string(dir.join("server.pem"))?,
        std::fs::read_to_string(dir.join("intermediate.pem"))?,
    ]
    .concat();
    std::fs::write(dir.join("chain.pem"), chain)?;
    // The function trusts the whole platform bundle and the test root.
    let bundle = [
        std::fs::read_to_string(SYSTEM_BUNDLE)
            .map_err(|e| format!("{SYSTEM_BUNDLE}: {e}: the platform's trust bundle"))?,
        std::fs::read_to_string(dir.join("root.pem"))?,
    ]
    .concat();
    std::fs::write(dir.join("bundle.pem"), bundle)?;
    Ok(dir.join("bundle.pem"))
}

/// A TLS endpoint on a loopback port that forwards every connection, once
/// its handshake is done, to `upstream` (DynamoDB Local's host:port), each
/// answer held back `latency` once (before its first bytes); its
/// `https://localhost:PORT` URL.
async fn serve_tls(dir: &Path, upstream: String, latency: Duration) -> Result<String, Error> {
    let certs =
        CertificateDer::pem_file_iter(dir.join("chain.pem"))?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key"))?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            // No Nagle on either leg: a proxy of its own must not add the
            // 40 ms of a delayed ACK to what it measures.
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(plain) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = plain.set_nodelay(true);
                let (mut tls_in, mut tls_out) = tokio::io::split(tls);
                let (mut plain_in, mut plain_out) = plain.into_split();
                // Set when a request has gone upstream, cleared by the first
                // chunk of its answer: the latency is added once an answer,
                // however many reads it arrives in. (The SDK's HTTP/1.1
                // client sends no request before the last one's answer.)
                let asked = AtomicBool::new(false);
                let requests = async {
                    let mut buffer = vec![0; 64 * 1024];
                    loop {
                        let read = tls_in.read(&mut buffer).await?;
                        if read == 0 {
                            return Ok::<_, std::io::Error>(());
                        }
                        plain_out.write_all(&buffer[..read]).await?;
                        asked.store(true, Ordering::Release);
                    }
                };
                let answers = async {
                    let mut buffer = vec![0; 64 * 1024];
                    loop {
                        let read = plain_in.read(&mut buffer).await?;
                        if read == 0 {
                            return Ok::<_, std::io::Error>(());
                        }
                        if !latency.is_zero() && asked.swap(false, Ordering::AcqRel) {
                            tokio::time::sleep(latency).await;
                        }
                        tls_out.write_all(&buffer[..read]).await?;
                        tls_out.flush().await?;
                    }
                };
                let _ = tokio::try_join!(requests, answers);
            });
        }
    });
    Ok(format!("https://localhost:{port}"))
}
