//! `blog-viral-bench`: one post liked, unliked and commented on by many
//! users at rising rates, on a DynamoDB that enforces its per-partition
//! limits (the `hostile` proxy's, scaled), through the requests' store calls
//! (`like_post`, `unlike_post`, `create_comment`, and the API's status for
//! each answer), while readers read its Q2, Q4 and Q5, with the stream
//! fan-out running as the local stack runs it (template.yaml's mapping, its
//! 1 s batching window included). Two designs: `today` (a post
//! stays in its partition, as before hot posts: `Store::never_hot`) and `hot`
//! (a throttled post spreads over shards: `blog::store::hot`).
//!
//! For each design and offered like rate: requests a second answered 2xx,
//! the share answered 503, p50 and p99, the write units the partitions were
//! charged per request and per like accepted (as DynamoDB bills them: the
//! proxy's charges; every write of the run, the fan-out's and the unlikes'
//! and comments' included), the reads answered a second, their share
//! answered 503, their p50 and p99 and the read units each cost (see
//! "Readers"), the hottest partition's write units a second (and the hottest
//! for reads, its read units a second), and the time from the last request
//! until the post and its feed copy count every like and comment the API
//! accepted.
//!
//! Each liker likes once; one in ten takes the like back at once; three in
//! ten also comment (300 comments a second at 1,000 likes). The offered rate
//! rises from quiet to the row's rate in `--ramp` seconds (1), linearly,
//! then holds: the row lasts `--seconds` in all (its likes are the ramp's
//! half second and the rest at the full rate). Each request is sent on its
//! tick, whatever the others' latency; a tick more than 5 ms late shifts the
//! ticks after it (tokio's `MissedTickBehavior::Delay`): a machine that
//! cannot keep up offers less, and the requests answered a second say so.
//! So does a row whose calls in flight reached the cap (the process's open
//! files / 64: a call may hold many connections to the proxy at once, a hot
//! post's merged first page one a shard, and the proxy two for each): the
//! ticks wait for calls to end. `infra/bench.sh` raises the open files to
//! the most it may (as root, the kernel's most).
//!
//! ```text
//! blog-viral-bench --endpoint URL [--scale 0.1] [--seconds 20]
//!     [--rates 50,100,200,500,1000,2000] [--designs today,hot] [--tags N]
//!     [--readers 10] [--hot-read-cache 1] [--ramp 1] [--confine [--instances N]]
//! ```
//!
//! # Readers
//!
//! With `--readers R` (R > 0), reads a second are R × the offered like rate
//! (scaled as everything else, and ramped with it), each on its tick, spread
//! evenly over Q2 (`get_post`), Q4's first page (`list_comments(post, 20)`)
//! and Q5's first page (`list_likes(post, 20)`), for as long as the likes
//! are being offered and answered. With `--readers 0` (the default), one
//! reader reads Q2, Q4 and Q5 one after another, about 200 times a second at
//! DynamoDB's real limits. Either way the readers are functions of their
//! own (an SDK client of their own, as the get-post, list-comments and
//! list-likes functions are). With `--readers R`, the reads are served in
//! turn by as many read instances as Lambda would keep busy for the scaled
//! rate if each read took what it takes deployed (each function's third of
//! the rate × 10 ms, at least one: `read_paced` says why the count must
//! scale down with the rate), each of one function (get-post,
//! list-comments or list-likes: up to 44b7fe4 each instance served all
//! three, and so missed each of their answers once a second where a
//! function's instance misses its own): a `Store` with a memory of its
//! own, which serves a hot post's Q2 and first pages again for
//! `--hot-read-cache` seconds (default 1, as `HOT_READ_CACHE_SECONDS`
//! deployed; 0: every read to the table); the row
//! says how many instances served, all three functions' (up to d709b75: an
//! instance per read in flight here, up to 312). Their client's
//! `CapacityMeter` sums the read units DynamoDB Local reports for their
//! calls: the "RCU per read" column, per read answered (a throttled call is
//! not billed; Local's read units follow DynamoDB's published rules for
//! reads, docs/benchmarks.md). The proxy charges the same partitions for
//! every client, so its hottest-for-reads column holds the readers' reads
//! with the requests' and the fan-out's.
//!
//! # Confined rows
//!
//! The request calls (likes, unlikes, comments and the readers' reads) run
//! on a tokio runtime of their own, the fan-out's `fanout::handle` on
//! another, and each runtime's threads join a cgroup v1 `cpu` group of their
//! own as they start (`on_thread_start` writes the thread's id to the
//! group's `tasks`); the proxy (which stands for DynamoDB), DynamoDB Local,
//! the stream poller (which stands for the event source mapping, not a
//! function) and the load's tickers (the clients) stay on the main runtime,
//! outside. Without `--confine` the same runtimes run without a quota (the
//! machine's 2 cores). With `--confine` each group's quota is the CPU of
//! the Lambda instances it stands for, at Lambda's share (one vCPU at
//! 1,769 MB), set every 10 ms:
//! - the request functions (template.yaml: 256 MB each): one instance per
//!   request in flight (Lambda serves one request an instance at a time, so
//!   the instances it keeps busy are the requests in flight), the most in
//!   flight over the last 100 ms, at least one; `--instances N` fixes it at
//!   N instead. Quota = instances × 256 / 1,769 of a CPU.
//! - the fan-out (512 MB): one instance per stream shard with a batch in
//!   flight (the mapping's `ParallelizationFactor` is 1: a shard has one
//!   batch in flight at a time, and the local poller reads the ready shards
//!   at once), at least one.
//!
//! Before the rows each runtime's threads are checked to be in their group
//! (their `/proc/thread-self/cgroup`) and each quota to be in force (a busy
//! loop in each group, at one instance's quota, must be throttled and get
//! at most 1.25 × that share of a CPU: its CPU time over its wall time, so
//! that others' load on the machine does not pass for a quota), and after
//! each row each group's `cpu.stat` throttling over the row is printed with
//! its instances (the most in flight and the mean). The cgroups are
//! removed when the run ends (on an error too; a run killed by a signal
//! leaves them, and the next `--confine` run removes them). Needs root
//! (cgroup v1 mounted at `/sys/fs/cgroup/cpu`); without it `--confine`
//! stops with a message saying so.
//!
//! What confinement stands for: the CPU all the busy instances of each kind
//! would have between them, following their count as the load moves. What
//! it does not: each instance's own share (here one process pools them, so
//! a request may use the CPU of an instance that waits on DynamoDB, and a
//! busy instance's share is not its own); cold starts (an instance's init is
//! not run, its CPU not spent); the instances' memory (one process's, not
//! capped: the `memory` cgroup is not used) and what lives in it (one store
//! memory for all request instances: the hot switch sees the post's whole
//! rate, as one instance would see its share); Lambda's concurrency quota
//! (1,000 instances an account unless raised; the only cap here is the open
//! files'); API Gateway and the network (the requests are calls, not HTTP);
//! and the machine: a quota above its 2 cores is not granted (past 13
//! request instances, or fewer beside the fan-out's and the proxy's own
//! CPU, the cores are the bound; each row says for how much of it the
//! quotas were above them). At `--scale` the instances are the scaled
//! load's: the real load would keep 1 / scale as many busy, each with the
//! same share, so the CPU a request gets is what the confinement keeps.
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
//! `infra/bench.sh --viral` runs it against its own DynamoDB Local, e.g.
//!
//! ```text
//! ./infra/bench.sh --viral --designs hot --scale 0.01 --rates 1000,10000,20000,40000 --seconds 20 --readers 10
//! ./infra/bench.sh --viral --designs hot --scale 0.01 --rates 1000,10000,20000,40000 --seconds 20 --readers 10 --confine
//! ```

use std::{
    collections::{BTreeMap, VecDeque},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use bench::{
    measure::{Clients, POLL_IDLE},
    naive::Error,
    pace::{Ticker, offered_in},
};
use blog::{
    api::ApiError,
    clock::Clock,
    fanout,
    ids::{PostId, UserId},
    keys,
    store::{
        Store, StoreError, bulk, idempotency::Answer, items::user::UserItem, likes::Liked,
        memory::HotReads, posts::NewPost, table,
    },
    text::{Tag, Username},
    timestamp,
};
use hostile::{Faults, PartitionLimits, Proxy};
use local::stream_poller::{InvokeError, StreamPoller, mapping::StreamMapping};
use tokio::{
    runtime::Handle,
    sync::{Notify, OwnedSemaphorePermit, Semaphore},
    task::JoinSet,
};

/// One in this many likers takes the like back at once.
const UNLIKE_EVERY: usize = 10;
/// This many in ten likers also comment.
const COMMENTS_IN_TEN: usize = 3;

/// Lambda gives one vCPU at this many MB, and CPU in proportion below it.
const ONE_VCPU_MB: u64 = 1_769;
/// The request functions' memory (template.yaml's `MemorySize`).
const REQUEST_MB: u64 = 256;
/// The fan-out's.
const FANOUT_MB: u64 = 512;
/// The confinement's CFS period, in µs.
const PERIOD_US: u64 = 100_000;
/// How often the quotas follow the instances in flight.
const FOLLOW_EVERY: Duration = Duration::from_millis(10);
/// Over how many of those the most in flight is the instances kept busy
/// (100 ms).
const FOLLOW_WINDOW: usize = 10;

/// The command line.
struct Options {
    endpoint: String,
    scale: f64,
    seconds: f64,
    rates: Vec<f64>,
    designs: Vec<&'static str>,
    tag_count: usize,
    notifications: bool,
    /// Reads a second, as a multiple of the offered like rate (0: one
    /// reader, one read after another).
    readers: f64,
    /// Seconds from quiet to the row's rate.
    ramp: f64,
    confine: bool,
    /// The request functions' instances, fixed (else: those in flight).
    instances: Option<usize>,
    /// How long each read instance serves a hot post's answers again
    /// (`HOT_READ_CACHE_SECONDS` as deployed; 0: off).
    hot_read_cache: Duration,
}

impl Options {
    fn parse() -> Result<Self, Error> {
        let mut options = Options {
            endpoint: std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default(),
            scale: 0.1,
            seconds: 20.0,
            rates: vec![50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0],
            designs: vec!["today", "hot"],
            tag_count: 0,
            notifications: false,
            readers: 0.0,
            ramp: 1.0,
            confine: false,
            instances: None,
            hot_read_cache: blog::store::memory::HOT_READ_TTL,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--endpoint" => options.endpoint = value()?,
                "--scale" => options.scale = value()?.parse()?,
                "--seconds" => options.seconds = value()?.parse()?,
                "--rates" => {
                    options.rates = value()?
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()?;
                }
                "--tags" => options.tag_count = value()?.parse()?,
                "--notifications" => options.notifications = true,
                "--designs" => {
                    let given = value()?;
                    options.designs = ["today", "hot"]
                        .into_iter()
                        .filter(|d| given.split(',').any(|g| g == *d))
                        .collect();
                }
                "--readers" => options.readers = value()?.parse()?,
                "--ramp" => options.ramp = value()?.parse()?,
                "--confine" => options.confine = true,
                "--instances" => options.instances = Some(value()?.parse()?),
                "--hot-read-cache" => {
                    let seconds: f64 = value()?.parse()?;
                    if !seconds.is_finite() || !(0.0..=60.0).contains(&seconds) {
                        return Err("--hot-read-cache must be from 0 to 60 seconds".into());
                    }
                    options.hot_read_cache = Duration::from_secs_f64(seconds);
                }
                other => return Err(format!("unknown option {other}").into()),
            }
        }
        if options.endpoint.is_empty() {
            return Err("give DynamoDB Local's URL with --endpoint".into());
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(options.scale) || !positive(options.seconds) {
            return Err("--scale and --seconds must be above 0".into());
        }
        if options.rates.iter().any(|r| !positive(*r)) {
            return Err("--rates must be above 0".into());
        }
        if !options.readers.is_finite() || options.readers < 0.0 {
            return Err("--readers must be 0 or more".into());
        }
        if !options.ramp.is_finite() || options.ramp < 0.0 || options.ramp > options.seconds {
            return Err("--ramp must be from 0 to --seconds".into());
        }
        if options.instances == Some(0) {
            return Err("--instances must be 1 or more".into());
        }
        if options.instances.is_some() && !options.confine {
            return Err("--instances goes with --confine".into());
        }
        Ok(options)
    }
}

struct Row {
    design: &'static str,
    confined: bool,
    offered: f64,
    /// From the first like sent to the last answered.
    span: f64,
    /// Requests answered 2xx (likes, unlikes, comments).
    accepted: usize,
    unavailable: usize,
    other: usize,
    p50: f64,
    p99: f64,
    /// Reads (Q2, Q4, Q5) made meanwhile: answered 2xx, 503, otherwise,
    /// over this many seconds.
    reads: Tally,
    read_span: f64,
    read_p50: f64,
    read_p99: f64,
    /// The read units the readers' calls were billed, per read answered.
    read_units_per_read: f64,
    write_units_per_request: f64,
    write_units_per_like: f64,
    hottest: String,
    hottest_per_second: f64,
    /// The partition charged the most read units, and its units a second.
    hottest_read: String,
    hottest_read_per_second: f64,
    exact_after: Option<f64>,
    /// The functions' instances and throttling over the row.
    functions: String,
    /// With `--notifications`: the author's notifications partition's write
    /// units a second (table and GSI1), whether their list showed the
    /// likes group at the post's exact count, and its units per request
    /// answered 2xx (what the notifications add to each).
    notified: Option<(f64, bool, f64)>,
}

/// Answers by status: 2xx, 503, and the rest.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    answered: usize,
    unavailable: usize,
    other: usize,
}

impl Tally {
    fn of(answers: &[(u16, f64)]) -> Self {
        let answered = answers.iter().filter(|(s, _)| *s < 300).count();
        let unavailable = answers.iter().filter(|(s, _)| *s == 503).count();
        Tally {
            answered,
            unavailable,
            other: answers.len() - answered - unavailable,
        }
    }

    fn all(&self) -> usize {
        self.answered + self.unavailable + self.other
    }
}

/// The request functions' and the fan-out's runtimes (their threads in
/// their cgroups when confined), then the main runtime (the proxy, the
/// poller, the tickers) running the benchmark; the cgroups removed last,
/// once the runtimes' threads are gone.
fn main() -> Result<(), Error> {
    // Quiet unless RUST_LOG asks (the store's switches and widenings).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    let options = Options::parse()?;
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let groups = if options.confine {
        Some(Groups::make(&["requests", "fanout"])?)
    } else {
        None
    };
    let group = |i: usize| groups.as_ref().and_then(|g| g.paths.get(i).cloned());
    let (requests, requests_runtime) = Functions::start(
        "request functions",
        REQUEST_MB,
        options.instances,
        group(0),
        cores,
    )?;
    let (fan_out, fan_out_runtime) = Functions::start("fan-out", FANOUT_MB, None, group(1), cores)?;
    if let Some(groups) = &groups {
        for (functions, path) in [&requests, &fan_out].into_iter().zip(&groups.paths) {
            functions.check_joined()?;
            let (used, throttled) = check_share(path)?;
            let quota = functions.kind.memory_mb as f64 / ONE_VCPU_MB as f64;
            println!(
                "{} confined to {}: a busy loop at one {} MB instance's quota ({:.1} % of a CPU) got {:.1} %, throttled in {throttled} periods",
                functions.kind.label,
                path.display(),
                functions.kind.memory_mb,
                100.0 * quota,
                100.0 * used,
            );
            if throttled == 0 || used > quota * 1.25 {
                return Err(format!(
                    "the {} MB CPU share is not in force",
                    functions.kind.memory_mb
                )
                .into());
            }
        }
    }
    let main_runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = main_runtime.block_on(run(options, &requests, &fan_out, cores));
    // The runtimes' threads end before the cgroups are removed (`groups`
    // is dropped last, on an early return too).
    drop(main_runtime);
    requests_runtime.shutdown_timeout(Duration::from_secs(10));
    fan_out_runtime.shutdown_timeout(Duration::from_secs(10));
    drop(groups);
    result
}

async fn run(
    options: Options,
    requests: &Functions,
    fan_out_functions: &Functions,
    cores: usize,
) -> Result<(), Error> {
    let Options {
        endpoint,
        scale,
        seconds,
        rates,
        designs,
        tag_count,
        notifications,
        readers,
        ramp,
        confine,
        instances: _,
        hot_read_cache,
    } = options;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let proxy = Proxy::start(listener, endpoint.as_str(), Faults::none()).await?;
    let direct = Clients::local(&endpoint).await;
    // Each runtime its own clients (a client's connections are driven on
    // the runtime that opened them): the request functions', the readers'
    // (metered: their read units), and those of the main runtime (the
    // checks and the stream poller).
    let limited = Clients::local(&proxy.url()).await;
    let reading = Clients::local(&proxy.url()).await;
    let outside = Clients::local(&proxy.url()).await;
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
    // The readers are functions of their own: a memory of their own.
    let readers_hot = Store::new(reading.requests.clone(), &name);
    let readers_today = readers_hot.clone().never_hot();
    let check = Store::new(outside.plain.clone(), &name);
    let fan_out = Store::new(limited.fanout.clone(), &name);

    let tags = (0..tag_count)
        .map(|i| Tag::parse(&format!("viral-{i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let author = UserId::parse("viral-author")?;
    setup
        .requests()
        .create_user(&author, &Username::parse("author")?)
        .await?;
    let likes_in = |rate: f64| offered_in(seconds, rate * scale, ramp).ceil().max(1.0) as usize;
    let likers_needed: usize =
        designs.len() * rates.iter().map(|rate| likes_in(*rate)).sum::<usize>() + QUIET_LIKES;
    let likers = load_likers(&direct, &name, likers_needed).await?;
    println!(
        "{likers_needed} likers loaded into {name}; the request functions' calls in flight capped at {}",
        requests.kind.cap_size
    );

    // The fan-out, as the local stack runs it, through the limits too: the
    // poller (the event source mapping) here, each batch's function on the
    // fan-out's runtime, one instance while it runs.
    let poller = StreamPoller::new(
        Store::new(outside.fanout.clone(), &name),
        outside.streams.clone(),
        // The template's mapping, its 1 s batching window included: a hot
        // post's counts reach it once a batch, and a batch a second is what
        // its own partition takes of those writes.
        StreamMapping::of_repository()?,
        None,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let functions = fan_out_functions.clone();
        async move {
            let deliver = move |event| {
                let store = fan_out.clone();
                let functions = functions.clone();
                async move {
                    let instance = functions.kind.enter().await;
                    functions
                        .handle
                        .spawn(async move {
                            let _instance = instance;
                            fanout::handle(&store, event).await
                        })
                        .await
                        .map_err(|e| InvokeError::Function(e.to_string()))
                }
            };
            poller
                .run(deliver, POLL_IDLE, async {
                    let _ = stopped.await;
                })
                .await;
        }
    });
    let following = tokio::spawn(follow(
        [requests.kind.clone(), fan_out_functions.kind.clone()],
        cores,
    ));

    proxy.set_partition_limits(Some(PartitionLimits::scaled(scale)?));
    let mut rows = Vec::new();
    let mut next_liker = 0;
    for design in &designs {
        let (store, readers_store) = if *design == "hot" {
            (&hot, &readers_hot)
        } else {
            (&today, &readers_today)
        };
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
            settle(&check, &post, &tags, Counts::default()).await;
            let count = likes_in(*rate);
            let mine = likers[next_liker..next_liker + count].to_vec();
            next_liker += count;
            proxy.take_charged();
            reading.request_meter.take();
            let throttled = [requests.kind.cpu_stat(), fan_out_functions.kind.cpu_stat()];
            requests.kind.take_following();
            fan_out_functions.kind.take_following();
            let done = Arc::new(Notify::new());
            let reader = tokio::spawn({
                let (store, functions, done) =
                    (readers_store.clone(), requests.clone(), done.clone());
                let per_second = readers * rate * scale;
                async move {
                    if per_second > 0.0 {
                        let pace = (per_second, ramp, hot_read_cache);
                        read_paced(store, functions, post, pace, done).await
                    } else {
                        read_meanwhile(store, functions, post, scale, done).await
                    }
                }
            });
            let started = Instant::now();
            let offered = offer(store, requests, post, mine, rate * scale, ramp).await;
            let span = started.elapsed().as_secs_f64();
            done.notify_one();
            let read = reader.await.unwrap_or_default();
            let functions = [
                requests.kind.describe(throttled[0]),
                fan_out_functions.kind.describe(throttled[1]),
                format!(
                    "the likes' ticks fell {:.2} s behind, the reads' {:.2} s; {} read instances (each keeping a hot post's answers {:.1} s)",
                    offered.lag.as_secs_f64(),
                    read.lag.as_secs_f64(),
                    read.instances,
                    hot_read_cache.as_secs_f64()
                ),
                unavailable_by_cause(),
            ]
            .join("; ");
            let read_units: f64 = reading
                .request_meter
                .take()
                .iter()
                .filter(|call| call.reads())
                .map(|call| call.total())
                .sum();
            let answers = &offered.answers;
            let tally = Tally::of(answers);
            let mut latencies: Vec<f64> = answers.iter().map(|(_, l)| *l).collect();
            latencies.sort_by(f64::total_cmp);
            let reads = Tally::of(&read.answers);
            let mut read_latencies: Vec<f64> = read.answers.iter().map(|(_, l)| *l).collect();
            read_latencies.sort_by(f64::total_cmp);
            let settled = Instant::now();
            let exact = settle(&check, &post, &tags, offered.counts).await;
            // The requests' writes and the fan-out's for them.
            let charged = proxy.take_charged().unwrap_or_default();
            let (hottest, units) = charged.hottest_write.clone().unwrap_or_default();
            let (hottest_read, hottest_read_units) =
                charged.hottest_read.clone().unwrap_or_default();
            let notified = if notifications {
                let units: f64 = charged
                    .writes
                    .iter()
                    .filter(|(name, _)| name.contains(&keys::notify_pk(&author)))
                    .map(|(_, units)| units)
                    .sum();
                let shown = likes_shown(&setup, &author, &post).await;
                let likes = offered.counts.likes;
                Some((
                    units / span / scale,
                    shown == Some(likes),
                    per(units, tally.answered),
                ))
            } else {
                None
            };
            let row = Row {
                design,
                confined: confine,
                offered: *rate,
                span,
                accepted: tally.answered,
                unavailable: tally.unavailable,
                other: tally.other,
                p50: percentile(&latencies, 0.5),
                p99: percentile(&latencies, 0.99),
                reads,
                read_span: read.span,
                read_p50: percentile(&read_latencies, 0.5),
                read_p99: percentile(&read_latencies, 0.99),
                read_units_per_read: per(read_units, reads.answered),
                write_units_per_request: per(charged.write_units, tally.answered),
                write_units_per_like: per(charged.write_units, offered.likes_accepted),
                hottest: hottest.split('/').skip(1).collect::<Vec<_>>().join("/"),
                hottest_per_second: units / span / scale,
                hottest_read: hottest_read
                    .split('/')
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join("/"),
                hottest_read_per_second: hottest_read_units / span / scale,
                exact_after: exact.then(|| settled.elapsed().as_secs_f64()),
                functions,
                notified,
            };
            println!("  {}", table_row(&row, scale));
            println!(
                "    {}; the readers' read units {read_units:.1} of the {:.1} the proxy charged",
                row.functions, charged.read_units
            );
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
    following.abort();
    println!();
    println!(
        "| design | CPU | offered likes/s (+ 30 % comments, 10 % unlikes) | requests answered 2xx /s | 503 | other | p50 ms | p99 ms | reads answered /s (others) | reads 503 | read p50 ms | read p99 ms | WCU billed per request | per like | RCU billed per read | hottest partition | its WCU/s | hottest for reads | its RCU/s | counts exact after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{}", table_row(row, scale));
    }
    println!(
        "(rates at DynamoDB's real limits: measured at {scale} of them, divided by {scale}; a rate is per second from the first like sent to the last answered (the readers': to their last answer), the first {ramp} s a ramp from quiet; reads {})",
        if readers > 0.0 {
            format!(
                "at {readers} x the offered like rate, spread over Q2, Q4's and Q5's first pages"
            )
        } else {
            "by one reader, Q2, Q4 and Q5 in turn".to_owned()
        }
    );
    for row in &rows {
        println!("{} at {:.0}/s: {}", row.design, row.offered, row.functions);
    }
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

/// `units` per one of `count` (0 for none).
fn per(units: f64, count: usize) -> f64 {
    if count > 0 { units / count as f64 } else { 0.0 }
}

/// One kind of function: the runtime its calls run on (owned by `main`),
/// and its instances.
#[derive(Clone)]
struct Functions {
    handle: Handle,
    kind: Arc<Kind>,
}

/// What a kind of function is, and how many of its instances are busy.
struct Kind {
    label: &'static str,
    memory_mb: u64,
    /// The instances, fixed (`--instances`); else those in flight.
    fixed: Option<usize>,
    /// Its `cpu` cgroup, when confined.
    group: Option<PathBuf>,
    in_flight: AtomicUsize,
    /// The most in flight since the quota last followed.
    peak: AtomicUsize,
    following: Mutex<Following>,
    /// The calls in flight at once ([`in_flight_cap`]).
    cap: Arc<Semaphore>,
    cap_size: usize,
    /// Calls that waited for the cap since the row began.
    capped: AtomicUsize,
    /// Whether a runtime thread failed to join the group.
    unjoined: AtomicBool,
}

/// The instances the quota follows, and what they were over a row.
#[derive(Debug, Default)]
struct Following {
    window: VecDeque<usize>,
    /// The instances the quota is set for.
    instances: usize,
    samples: u64,
    sum: u64,
    most: usize,
    /// Samples at which the quotas together were above the machine's cores.
    above_cores: u64,
}

/// One busy instance: a request (or a fan-out batch) in flight, until
/// dropped.
struct Instance {
    kind: Arc<Kind>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kind.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A cgroup v1 `cpu` group's throttling counters (`cpu.stat`).
#[derive(Debug, Clone, Copy, Default)]
struct Throttling {
    periods: u64,
    throttled: u64,
    throttled_ns: u64,
}

impl Functions {
    /// A runtime of `cores` workers whose threads join `group` as they
    /// start.
    fn start(
        label: &'static str,
        memory_mb: u64,
        fixed: Option<usize>,
        group: Option<PathBuf>,
        cores: usize,
    ) -> Result<(Self, tokio::runtime::Runtime), Error> {
        let kind = Arc::new(Kind {
            label,
            memory_mb,
            fixed,
            group: group.clone(),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            following: Mutex::new(Following::default()),
            cap: Arc::new(Semaphore::new(in_flight_cap())),
            cap_size: in_flight_cap(),
            capped: AtomicUsize::new(0),
            unjoined: AtomicBool::new(false),
        });
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder
            .enable_all()
            .worker_threads(cores)
            .thread_name(format!("viral-{}", label.replace(' ', "-")));
        if let Some(group) = group {
            let tasks = group.join("tasks");
            let kind = kind.clone();
            builder.on_thread_start(move || {
                if let Err(e) = join_group(&tasks) {
                    eprintln!("a thread could not join {}: {e}", tasks.display());
                    kind.unjoined.store(true, Ordering::Relaxed);
                }
            });
        }
        let runtime = builder.build()?;
        let functions = Functions {
            handle: runtime.handle().clone(),
            kind,
        };
        Ok((functions, runtime))
    }

    /// Whether the runtime's threads are in its group: each of a few tasks
    /// reads its own thread's cgroups.
    fn check_joined(&self) -> Result<(), Error> {
        let Some(group) = &self.kind.group else {
            return Ok(());
        };
        let name = group
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        // `main`'s thread is in no runtime yet: it may wait on this one.
        let checked = self.handle.block_on(async {
            let mut tasks = JoinSet::new();
            for _ in 0..8 {
                tasks.spawn(async {
                    tokio::task::yield_now().await;
                    std::fs::read_to_string("/proc/thread-self/cgroup").unwrap_or_default()
                });
            }
            let mut seen = Vec::new();
            while let Some(Ok(cgroups)) = tasks.join_next().await {
                seen.push(cgroups);
            }
            seen
        });
        let inside = |cgroups: &String| {
            cgroups.lines().any(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
                controllers.is_some_and(|c| c.split(',').any(|c| c == "cpu"))
                    && path == Some(&format!("/{name}"))
            })
        };
        if self.kind.unjoined.load(Ordering::Relaxed)
            || checked.is_empty()
            || !checked.iter().all(inside)
        {
            return Err(format!(
                "the {}' threads are not in {}",
                self.kind.label,
                group.display()
            )
            .into());
        }
        Ok(())
    }
}

impl Kind {
    /// An instance for a call, once fewer than the cap are in flight.
    async fn enter(self: &Arc<Self>) -> Instance {
        let permit = match self.cap.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => {
                self.capped.fetch_add(1, Ordering::Relaxed);
                self.cap.clone().acquire_owned().await.ok()
            }
        };
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Instance {
            kind: self.clone(),
            _permit: permit,
        }
    }

    fn following(&self) -> std::sync::MutexGuard<'_, Following> {
        self.following
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The instances kept busy now: the most in flight over the window
    /// (at least one), or the fixed number. Sets the quota to them.
    fn follow(&self) -> usize {
        let seen = self
            .peak
            .swap(self.in_flight.load(Ordering::Relaxed), Ordering::Relaxed);
        let mut following = self.following();
        following.window.push_back(seen);
        if following.window.len() > FOLLOW_WINDOW {
            following.window.pop_front();
        }
        let busiest = following.window.iter().copied().max().unwrap_or(0);
        let instances = self.fixed.unwrap_or(busiest.max(1));
        if instances != following.instances {
            if let Some(group) = &self.group
                && let Err(e) = set_quota(group, instances as u64 * self.memory_mb)
            {
                eprintln!("the {}' quota: {e}", self.label);
            }
            following.instances = instances;
        }
        following.samples += 1;
        following.sum += busiest as u64;
        following.most = following.most.max(busiest);
        instances
    }

    /// The instances over the row so far (the most, the mean, and the share
    /// of it the quotas were above the cores), starting the next row's.
    fn take_following(&self) -> (usize, f64, f64) {
        let mut following = self.following();
        let taken = (
            following.most,
            following.sum as f64 / following.samples.max(1) as f64,
            following.above_cores as f64 / following.samples.max(1) as f64,
        );
        following.samples = 0;
        following.sum = 0;
        following.most = 0;
        following.above_cores = 0;
        taken
    }

    fn cpu_stat(&self) -> Throttling {
        let Some(group) = &self.group else {
            return Throttling::default();
        };
        let text = std::fs::read_to_string(group.join("cpu.stat")).unwrap_or_default();
        let mut stat = Throttling::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(name), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            let value = value.parse().unwrap_or(0);
            match name {
                "nr_periods" => stat.periods = value,
                "nr_throttled" => stat.throttled = value,
                "throttled_time" => stat.throttled_ns = value,
                _ => {}
            }
        }
        stat
    }

    /// The row's instances and (confined) throttling since `before`.
    fn describe(&self, before: Throttling) -> String {
        let (most, mean, above) = self.take_following();
        let mut text = format!(
            "{} ({} MB): up to {most} in flight, {mean:.1} on average",
            self.label, self.memory_mb
        );
        let capped = self.capped.swap(0, Ordering::Relaxed);
        if capped > 0 {
            text.push_str(&format!(
                " ({capped} calls waited for the cap of {} in flight: their ticks came late, and the offered rate fell)",
                self.cap_size
            ));
        }
        if let Some(fixed) = self.fixed {
            text.push_str(&format!(
                " (the quota fixed at {fixed} × {} MB)",
                self.memory_mb
            ));
        }
        if self.group.is_some() {
            let after = self.cpu_stat();
            text.push_str(&format!(
                ", throttled in {} of {} periods ({:.2} s), quotas above the cores {:.0} % of the row",
                after.throttled.saturating_sub(before.throttled),
                after.periods.saturating_sub(before.periods),
                after.throttled_ns.saturating_sub(before.throttled_ns) as f64 / 1e9,
                100.0 * above
            ));
        }
        text
    }
}

/// Every [`FOLLOW_EVERY`], each kind's quota follows its instances; whether
/// the quotas together were above the machine's `cores` is counted.
async fn follow(kinds: [Arc<Kind>; 2], cores: usize) {
    let mut tick = tokio::time::interval(FOLLOW_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let vcpus: f64 = kinds
            .iter()
            .map(|kind| kind.follow() as f64 * kind.memory_mb as f64 / ONE_VCPU_MB as f64)
            .sum();
        if vcpus > cores as f64 {
            for kind in &kinds {
                kind.following().above_cores += 1;
            }
        }
    }
}

/// How many calls of a kind may be in flight at once: this process's open
/// files limit / 64, at least 100. A call may hold many connections to the
/// proxy at once (a hot post's merged first page, one a shard: 17 at 16
/// shards), and the proxy holds their ends and one upstream each: at 10
/// times the like rate a hot post's readers, merging until its copies are
/// made, took 20,000 open files with 345 calls in flight.
fn in_flight_cap() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|line| line.starts_with("Max open files"))
                .and_then(|line| line.split_whitespace().nth(3))
                .and_then(|soft| soft.parse::<usize>().ok())
        })
        .unwrap_or(1024);
    (soft / 64).max(100)
}

/// Sets `group`'s quota to the CPU share of `memory_mb` (one vCPU at
/// [`ONE_VCPU_MB`]), at least 1 ms a period (the kernel's least).
fn set_quota(group: &Path, memory_mb: u64) -> std::io::Result<()> {
    let quota = (PERIOD_US * memory_mb / ONE_VCPU_MB).max(1_000);
    std::fs::write(group.join("cpu.cfs_quota_us"), quota.to_string())
}

/// The calling thread joins the group whose `tasks` file is `tasks`.
fn join_group(tasks: &Path) -> std::io::Result<()> {
    // `/proc/thread-self` links to `<pid>/task/<tid>`.
    let me = std::fs::read_link("/proc/thread-self")?;
    let tid = me
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| std::io::Error::other("no thread id in /proc/thread-self"))?
        .to_owned();
    std::fs::write(tasks, tid)
}

/// The confinement's cgroups (v1 `cpu`), removed when dropped however the
/// run ends.
struct Groups {
    paths: Vec<PathBuf>,
}

impl Groups {
    /// A group for each of `names` (this process's), its period set and
    /// its quota one instance's.
    fn make(names: &[&str]) -> Result<Self, Error> {
        let root = Path::new("/sys/fs/cgroup/cpu");
        if !root.join("cpu.cfs_quota_us").exists() {
            return Err(
                "--confine needs cgroup v1's cpu controller at /sys/fs/cgroup/cpu (and root)"
                    .into(),
            );
        }
        // A run killed by a signal leaves its groups (named by its process
        // id): removed here once that process is gone.
        for entry in std::fs::read_dir(root)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let owner = name
                .strip_prefix("blog-viral-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            if let Some(pid) = owner
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
        let mut groups = Groups { paths: Vec::new() };
        for name in names {
            let path = root.join(format!("blog-viral-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&path).map_err(|e| {
                format!(
                    "--confine: cannot make the cgroup {}: {e} (it needs root)",
                    path.display()
                )
            })?;
            groups.paths.push(path.clone());
            std::fs::write(path.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
            set_quota(
                &path,
                if *name == "fanout" {
                    FANOUT_MB
                } else {
                    REQUEST_MB
                },
            )?;
        }
        Ok(groups)
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        bench::lambda::remove_cgroups(&self.paths);
    }
}

/// The share of a CPU a busy loop in `group` (at its quota now) got, and
/// the periods the group was throttled in meanwhile: the check that the
/// quota is in force. The share is the loop's CPU time (its
/// `/proc/<pid>/stat`, in the kernel's 100 Hz ticks) over its wall time, so
/// that a machine others keep busy does not pass for a quota.
fn check_share(group: &Path) -> Result<(f64, u64), Error> {
    let throttled = || {
        std::fs::read_to_string(group.join("cpu.stat"))
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix("nr_throttled "))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = throttled();
    let script = r#"echo $$ > "$1/cgroup.procs" || exit 97
i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done
cat /proc/$$/stat"#;
    let started = Instant::now();
    let output = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(group)
        .output()?;
    let wall = started.elapsed().as_secs_f64();
    if !output.status.success() {
        return Err(format!("the busy loop failed: {}", output.status).into());
    }
    // The fields after the command's name (which ends with ')'): utime and
    // stime are the 12th and 13th.
    let stat = String::from_utf8_lossy(&output.stdout);
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    let (Some(user), Some(system)) = (ticks(11), ticks(12)) else {
        return Err(format!("the busy loop's /proc stat: {stat:?}").into());
    };
    // The loop spent this period's quota: the first row must not inherit
    // what is left of it.
    std::thread::sleep(Duration::from_micros(2 * PERIOD_US));
    Ok(((user + system) as f64 / 100.0 / wall, throttled() - before))
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
    /// Likes answered 201.
    likes_accepted: usize,
    /// How far the likes' ticks fell behind their schedule.
    lag: Duration,
}

/// The status the API answers for a store call's result, and whether it
/// took effect.
fn status<T>(result: Result<T, StoreError>, ok: u16) -> (u16, Option<T>) {
    match result {
        Ok(done) => (ok, Some(done)),
        Err(err) => {
            tracing::debug!(error = %err, "a request refused");
            let cause = err.to_string();
            let status = ApiError::from(err).status().as_u16();
            if status == 503 {
                let mut causes = UNAVAILABLE.lock().unwrap_or_else(PoisonError::into_inner);
                *causes.entry(cause).or_default() += 1;
            }
            (status, None)
        }
    }
}

/// The 503s of the row under way, by their error's text (likes', comments',
/// unlikes' and reads' alike): what refused them, which the retry layer's
/// give-ups say only for the calls it gave up on.
static UNAVAILABLE: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

/// The row's 503s by cause, most first, and the count starts again.
fn unavailable_by_cause() -> String {
    let causes = std::mem::take(&mut *UNAVAILABLE.lock().unwrap_or_else(PoisonError::into_inner));
    let mut causes: Vec<(String, usize)> = causes.into_iter().collect();
    causes.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    if causes.is_empty() {
        return "no 503".to_owned();
    }
    let listed: Vec<String> = causes
        .iter()
        .map(|(cause, n)| format!("{n} × {cause}"))
        .collect();
    format!("503s by cause: {}", listed.join(", "))
}

/// Each liker likes `post` once, on `Ticker`'s ticks (whatever the others'
/// latency; `per_second` after `ramp` seconds); some take it back at once,
/// some comment. The calls run on the request functions' runtime, one
/// instance busy for each liker's calls; a like's time runs from its tick.
async fn offer(
    store: &Store,
    functions: &Functions,
    post: PostId,
    likers: Vec<UserId>,
    per_second: f64,
    ramp: f64,
) -> Offered {
    let answers = Arc::new(Mutex::new(Vec::with_capacity(likers.len() * 2)));
    let likes = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::new(AtomicUsize::new(0));
    let comments = Arc::new(AtomicUsize::new(0));
    let mut ticker = Ticker::new(per_second, ramp);
    let mut sent = JoinSet::new();
    for (i, liker) in likers.into_iter().enumerate() {
        ticker.tick().await;
        let ticked = Instant::now();
        let instance = functions.kind.enter().await;
        let (store, answers) = (store.clone(), answers.clone());
        let (likes, accepted, comments) = (likes.clone(), accepted.clone(), comments.clone());
        sent.spawn_on(
            async move {
                let _instance = instance;
                let timed = |status: u16, started: Instant| {
                    if let Ok(mut answers) = answers.lock() {
                        answers.push((status, started.elapsed().as_secs_f64()));
                    }
                };
                let (code, liked) = status(store.requests().like_post(&post, &liker).await, 201);
                let new = matches!(liked, Some(Liked::New(_)));
                timed(if new || liked.is_none() { code } else { 200 }, ticked);
                if new {
                    likes.fetch_add(1, Ordering::Relaxed);
                    accepted.fetch_add(1, Ordering::Relaxed);
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
            },
            &functions.handle,
        );
        // Keep the set to the calls in flight.
        while sent.try_join_next().is_some() {}
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
        likes_accepted: accepted.load(Ordering::Relaxed),
        lag: ticker.lag(),
    }
}

/// The readers' answers (status and seconds), and the seconds from their
/// first read to their last answer.
#[derive(Debug, Default)]
struct Reads {
    answers: Vec<(u16, f64)>,
    span: f64,
    /// How far the reads' ticks fell behind their schedule.
    lag: Duration,
    /// How many read instances served them (in turn: `read_paced`).
    instances: usize,
}

/// The `k`th read of a reader: Q2, then Q4's first page, then Q5's, in
/// turn; its status as the API would answer it.
async fn read(store: &Store, post: &PostId, k: usize) -> u16 {
    match k % 3 {
        0 => match store.requests().get_post(post).await {
            Ok(Some(_)) => 200,
            Ok(None) => 404,
            Err(err) => status::<()>(Err(err), 200).0,
        },
        1 => status(store.requests().list_comments(post, 20, None).await, 200).0,
        _ => status(store.requests().list_likes(post, 20, None).await, 200).0,
    }
}

/// How long a read of a hot post takes deployed, at most: a miss's two or
/// three DynamoDB calls of a few milliseconds each (a hit answers from the
/// instance's memory in well under one). What sets how many read instances
/// Lambda keeps busy for a rate of reads, below.
const DEPLOYED_READ_SECONDS: f64 = 0.01;

/// Reads of `post` on `Ticker`'s ticks (whatever the others' latency;
/// `per_second` after `ramp` seconds) until `done`, on the request
/// functions' runtime, one instance busy for each; a read's time runs from
/// its tick.
///
/// Each read instance is a store of its own, its memory its own (a hot
/// post's answers kept for `cache`, as `HOT_READ_CACHE_SECONDS` keeps them
/// deployed), and of one function, as deployed: the `k`th read goes to an
/// instance of the `k % 3`th (Q2, Q4, Q5, as [`read`] takes them), so each
/// misses its function's answer about once per `cache` whatever it serves:
/// what a partition takes from the readers is the instances' count.
/// Deployed, Lambda keeps about rate × duration of each function's busy; at
/// `--scale` the partitions take `scale` of their units, so the instances
/// must be `scale` of the real count too: a third of `per_second` (the
/// scaled rate) × [`DEPLOYED_READ_SECONDS`] a function, at least one.
/// Here a read takes what this machine's DynamoDB Local takes under the
/// load (seconds), which made as
/// many instances as reads in flight (up to the open files' cap, each
/// missing once a second: the readers' misses at 0.01 of the rate were
/// those of the full rate); so the reads are spread over that count of
/// instances in turn, several at once on one when this machine is slow (a
/// miss then made by each read in flight on it: more than one instance
/// serving one read at a time would make).
async fn read_paced(
    template: Store,
    functions: Functions,
    post: PostId,
    (per_second, ramp, cache): (f64, f64, Duration),
    done: Arc<Notify>,
) -> Reads {
    let answers = Arc::new(Mutex::new(Vec::new()));
    // Each request type is a function of its own (get-post, list-comments,
    // list-likes), its instances and their memory its own: a third of the
    // reads each.
    let count = (per_second / 3.0 * DEPLOYED_READ_SECONDS).ceil().max(1.0) as usize;
    let functions_instances: Vec<Vec<Store>> = (0..3)
        .map(|_| {
            (0..count)
                .map(|_| {
                    Store::new(template.client().clone(), template.table())
                        .with_hot_reads(HotReads::new(cache, Clock::default()))
                })
                .collect()
        })
        .collect();
    let started = Instant::now();
    let mut ticker = Ticker::new(per_second, ramp);
    let mut sent = JoinSet::new();
    for k in 0.. {
        tokio::select! {
            () = ticker.tick() => {}
            () = done.notified() => break,
        }
        let ticked = Instant::now();
        let instance = functions.kind.enter().await;
        let store = functions_instances[k % 3][(k / 3) % count].clone();
        let answers = answers.clone();
        sent.spawn_on(
            async move {
                let _instance = instance;
                let code = read(&store, &post, k).await;
                if let Ok(mut answers) = answers.lock() {
                    answers.push((code, ticked.elapsed().as_secs_f64()));
                }
            },
            &functions.handle,
        );
        while sent.try_join_next().is_some() {}
    }
    while sent.join_next().await.is_some() {}
    let span = started.elapsed().as_secs_f64();
    let answers = Arc::try_unwrap(answers)
        .ok()
        .and_then(|m| m.into_inner().ok())
        .unwrap_or_default();
    Reads {
        answers,
        span,
        lag: ticker.lag(),
        instances: 3 * count,
    }
}

/// One reader: Q2, Q4 and Q5 of `post`, one after another, about 200 times
/// a second at DynamoDB's real limits (every 50 ms at `scale` 0.1, every
/// 500 ms at 0.01: the partitions' read units are scaled, so the reads are
/// too) until `done`, on the request functions' runtime.
async fn read_meanwhile(
    store: Store,
    functions: Functions,
    post: PostId,
    scale: f64,
    done: Arc<Notify>,
) -> Reads {
    let pause = Duration::from_secs_f64(0.005 / scale.max(0.001));
    let started = Instant::now();
    let reader = functions.handle.spawn({
        let kind = functions.kind.clone();
        async move {
            let mut answers = Vec::new();
            loop {
                for k in 0..3 {
                    let _instance = kind.enter().await;
                    let sent = Instant::now();
                    let code = read(&store, &post, k).await;
                    answers.push((code, sent.elapsed().as_secs_f64()));
                }
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = done.notified() => break,
                }
            }
            answers
        }
    });
    let answers = reader.await.unwrap_or_default();
    Reads {
        answers,
        span: started.elapsed().as_secs_f64(),
        lag: Duration::ZERO,
        instances: 1,
    }
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
    let share = |part: usize, all: usize| 100.0 * part as f64 / all.max(1) as f64;
    format!(
        "| {} | {} | {:.0} | {:.0} | {:.0} % | {} | {:.0} | {:.0} | {:.0} ({}) | {:.0} % | {:.0} | {:.0} | {:.1} | {:.1} | {:.2} | `{}` | {:.0} | `{}` | {:.0} | {} |",
        row.design,
        if row.confined {
            "Lambda's share"
        } else {
            "unconfined"
        },
        row.offered,
        row.accepted as f64 / row.span / scale,
        share(row.unavailable, row.accepted + row.unavailable + row.other),
        row.other,
        row.p50 * 1000.0,
        row.p99 * 1000.0,
        row.reads.answered as f64 / row.read_span.max(f64::EPSILON) / scale,
        row.reads.other,
        share(row.reads.unavailable, row.reads.all()),
        row.read_p50 * 1000.0,
        row.read_p99 * 1000.0,
        row.write_units_per_request,
        row.write_units_per_like,
        row.read_units_per_read,
        row.hottest,
        row.hottest_per_second,
        row.hottest_read,
        row.hottest_read_per_second,
        row.exact_after
            .map_or_else(|| "not within 60 s".to_owned(), |s| format!("{s:.1} s")),
    )
}
