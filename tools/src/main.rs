//! `blog-admin`: tools for operators and for the local stack.
//!
//! ```text
//! blog-admin create-table
//!     create the table (TABLE_NAME) if it is missing
//! blog-admin audit [--repair] [--segments N] [--user ID | --post ID]
//!     check every denormalised value against its source (a parallel Scan of
//!     N segments, 4 by default: an offline tool), or only one user's
//!     username copies (their GSI1 items) or one post (its partition, its
//!     authors, its feed entry); with --repair, rewrite what is wrong. Prints
//!     each finding, then the items read, findings, repairs, time and peak
//!     memory. Exits 1 while anything is left unrepaired.
//! blog-admin replay [--dry-run]
//!     apply the stream records the fan-out gave up on (parked by the
//!     `park-failures` function, or locally by the stream poller) through the
//!     fan-out, partition by partition (the earlier version's single `PARKED`
//!     first, then `PARKED#00`..`PARKED#15`), oldest first in each, and forget
//!     each one that applied; --dry-run only lists them. Exits 1 while any is
//!     left
//! blog-admin migrate
//!     move every post stored in the old shape (its content on the post item)
//!     into the current one (a post item and a content item); idempotent,
//!     resumable (run it again), and safe while the API serves
//! blog-admin api-gateway PORT --functions URL --idp URL --user-pool ID --client ID [--region R] [--origins LIST] [--param NAME=VALUE ...]
//!     serve on 127.0.0.1:PORT the HTTP API as template.yaml deploys it
//!     (`local::api_gateway`): CORS, routes, throttles, the JWT authorizer
//!     (tokens of user pool ID in region R (us-east-1), its keys from the
//!     identity provider at URL, audience the app client ID), and payload
//!     2.0 events to the functions through the Lambda Invoke API at
//!     --functions (`cargo lambda watch`'s); --origins and --param as the
//!     template's parameters
//! blog-admin identity-provider URL [--region R] [--save FILE]
//!     create template.yaml's user pool and app client in the Cognito
//!     emulator at URL (moto's server, started by infra/lib.sh) and save
//!     where they are to FILE ($BLOG_DATA_DIR/identity.json, .local/ by default)
//! blog-admin token NAME... [--pool FILE]
//!     print a fresh ID token of each local user NAME (NAME@example.com,
//!     signed up and confirmed if new), one a line, from the pool FILE names
//!     ($BLOG_DATA_DIR/identity.json, .local/ by default)
//! blog-admin stream-poller [--checkpoint FILE] [--functions URL]
//! blog-admin scheduler --functions URL
//!     deliver the table's stream to the function of template.yaml's DynamoDB
//!     stream event until Ctrl-C, as that event source mapping does (its
//!     filters, batch size and window, retries, bisection, maximum record age
//!     and failure destination; see `local::stream_poller`): in this process
//!     (the fan-out's code, records given up on parked here), or, with
//!     --functions, through the Lambda Invoke API at URL (`cargo lambda
//!     watch`'s, e.g. http://127.0.0.1:9001), the notices of records given
//!     up on going as an SQS event to the function that reads the mapping's
//!     failure queue (park-failures)
//! blog-admin hostile-dynamodb PORT --upstream URL [--faults none|hostile] [--seed N] [--rate KIND=P ...]
//!     [--gsi-lag-ms N] [--late-commit-ms N] [--partition-scale S [--burst-seconds N]]
//!     serve on 127.0.0.1:PORT a proxy to the DynamoDB Local at URL that fails
//!     requests the way real DynamoDB does under load (the `hostile` crate),
//!     until Ctrl-C: `hostile::Faults::hostile()`'s rates and GSI lag (or
//!     none, with --faults none) unless --rate (KIND: transaction_cancel, write_conflict, throttle,
//!     lost_response, server_error, late_commit, replay_cancel; P in [0, 1], 0 to switch it off) or
//!     --gsi-lag-ms sets them; --late-commit-ms is how long a late commit is
//!     held (6,000 by default). With --partition-scale S (0 < S <= 1) it also enforces
//!     DynamoDB's per-partition throughput, 1,000 WCU and 3,000 RCU a second
//!     per partition key value of the table and of each index, times S
//!     (`hostile::partitions`), with one second of allowance per partition
//!     or --burst-seconds N (DynamoDB's burst capacity is 300). Logs what it
//!     injected and refused as it goes and on exit
//! ```
//! The table and endpoint come from the same environment as the functions:
//! `TABLE_NAME`, and `DYNAMODB_ENDPOINT` for DynamoDB Local.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use aws_lambda_events::event::{dynamodb::Event, streams::DynamoDbEventResponse};
use blog::{
    fanout::{self, Outcome},
    recovery::{self, FailureNotice, Replayed},
    store::{self, Store, table},
};
use local::stream_poller::{InvokeError, StreamPoller, mapping::StreamMapping};

mod identity;

type Error = Box<dyn std::error::Error>;

const USAGE: &str = concat!(
    "usage: blog-admin create-table\n",
    "       blog-admin audit [--repair] [--segments N] [--user ID | --post ID]\n",
    "       blog-admin replay [--dry-run]\n",
    "       blog-admin migrate\n",
    "       blog-admin api-gateway PORT --functions URL --idp URL --user-pool ID --client ID [--region R] [--origins LIST] [--param NAME=VALUE ...]\n",
    "       blog-admin identity-provider URL [--region R] [--save FILE]\n",
    "       blog-admin token NAME... [--pool FILE]\n",
    "       blog-admin stream-poller [--checkpoint FILE] [--functions URL]\n",
    "       blog-admin scheduler --functions URL\n",
    "       blog-admin hostile-dynamodb PORT --upstream URL [--faults none|hostile] [--seed N] [--rate KIND=P ...] [--gsi-lag-ms N] [--late-commit-ms N] [--partition-scale S [--burst-seconds N]]",
);

#[tokio::main]
async fn main() -> ExitCode {
    blog::startup::init_tracing();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("create-table") => create_table().await,
        Some("stream-poller") => stream_poller(&args[1..]).await,
        Some("scheduler") => scheduler(&args[1..]).await,
        Some("audit") => audit(&args[1..]).await,
        Some("migrate") if args.len() == 1 => migrate().await,
        Some("replay") => replay(&args[1..]).await,
        Some("api-gateway") => api_gateway(&args[1..]).await,
        Some("identity-provider") => identity_provider(&args[1..]).await,
        Some("token") => token(&args[1..]).await,
        Some("hostile-dynamodb") => hostile_dynamodb(&args[1..]).await,
        _ => Err(USAGE.into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("blog-admin: {err}");
            ExitCode::FAILURE
        }
    }
}

struct Env {
    table: String,
    endpoint: Option<String>,
    sdk: aws_config::SdkConfig,
}

/// The table, its endpoint and the SDK's settings, from the environment:
/// `TABLE_NAME`, and `DYNAMODB_ENDPOINT` locally. Against a local endpoint
/// that is all (DynamoDB Local's credentials and us-east-1 unless the
/// environment names others); against AWS, the credentials and region the
/// AWS CLI would use.
async fn env() -> Result<Env, Error> {
    let endpoint = std::env::var("DYNAMODB_ENDPOINT").ok();
    let credentials_named = ["AWS_ACCESS_KEY_ID", "AWS_PROFILE"]
        .iter()
        .any(|name| std::env::var_os(name).is_some());
    let table = std::env::var("TABLE_NAME").map_err(|_| "TABLE_NAME is not set")?;
    let sdk = store::with_local_defaults(
        store::sdk_config().await,
        endpoint.as_deref(),
        credentials_named,
    );
    if sdk.region().is_none() {
        return Err(
            "no AWS region: set AWS_REGION (or a profile's region, AWS_PROFILE), \
                    or DYNAMODB_ENDPOINT for DynamoDB Local"
                .into(),
        );
    }
    Ok(Env {
        table,
        endpoint,
        sdk,
    })
}

/// The table's store, from the environment.
async fn store_from_env() -> Result<Store, Error> {
    let env = env().await?;
    Ok(Store::new(
        store::dynamodb_client(&env.sdk, env.endpoint.as_deref()),
        env.table,
    ))
}

async fn create_table() -> Result<(), Error> {
    let env = env().await?;
    let client = store::dynamodb_client(&env.sdk, env.endpoint.as_deref());
    let created = table::create_if_missing(&client, &env.table).await?;
    tracing::info!(table = %env.table, created, "table ready");
    Ok(())
}

async fn migrate() -> Result<(), Error> {
    let store = store_from_env().await?;
    let done = store.admin().migrate().await?;
    tracing::info!(
        found = done.found,
        moved = done.moved,
        busy = done.busy,
        likers_moved = done.likers_moved,
        followers_copied = done.followers_copied,
        "migration finished"
    );
    println!(
        "{} post(s) in the old shape, {} moved; {} hot post(s) had their likers marked; {} follower entries in the followers lists",
        done.found, done.moved, done.likers_moved, done.followers_copied
    );
    if done.busy > 0 {
        return Err(format!(
            "{} post(s) left in the old shape: DynamoDB stayed busy on them; run `blog-admin migrate` again",
            done.busy
        )
        .into());
    }
    Ok(())
}

async fn replay(args: &[String]) -> Result<(), Error> {
    let dry_run = match args {
        [] => false,
        [flag] if flag == "--dry-run" => true,
        _ => return Err(USAGE.into()),
    };
    let store = store_from_env().await?;
    let report = recovery::replay(&store, dry_run, |item, replayed| {
        let what = match replayed {
            Replayed::Applied(Outcome::Written { .. }) => "applied".to_owned(),
            Replayed::Applied(Outcome::Stale { .. }) => "applied already (or overtaken)".to_owned(),
            Replayed::Applied(Outcome::Ignored | Outcome::Coalesced | Outcome::Paused { .. }) => {
                "nothing to apply".to_owned()
            }
            Replayed::Failed(error) => format!("left parked: {error}"),
            Replayed::Listed => "parked".to_owned(),
        };
        println!(
            "{} of {} at {} (parked {}): {what}",
            item.event_name, item.shard_id, item.sequence_number, item.parked_at
        );
    })
    .await?;
    tracing::info!(
        applied = report.applied,
        failed = report.failed,
        listed = report.listed,
        "replay finished"
    );
    println!(
        "{} applied, {} left parked, {} listed",
        report.applied, report.failed, report.listed
    );
    if report.failed > 0 {
        return Err(format!(
            "{} record(s) left parked; run again once the cause is mended",
            report.failed
        )
        .into());
    }
    Ok(())
}

async fn audit(args: &[String]) -> Result<(), Error> {
    use blog::{
        audit::AuditOptions,
        ids::{PostId, UserId},
    };
    let mut options = AuditOptions::default();
    let (mut user, mut post) = (None, None);
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match flag.as_str() {
            "--repair" => options.repair = true,
            "--segments" => {
                let n = rest.next().and_then(|n| n.parse().ok()).filter(|n| *n > 0);
                options.segments = n.ok_or("--segments needs a number above 0")?;
            }
            "--user" => {
                let id = rest.next().ok_or(USAGE)?;
                user = Some(UserId::parse(id).map_err(|e| format!("--user {id:?}: {e}"))?);
            }
            "--post" => {
                let id = rest.next().ok_or(USAGE)?;
                post = Some(PostId::parse(id).map_err(|e| format!("--post {id:?}: {e}"))?);
            }
            _ => return Err(USAGE.into()),
        }
    }
    let env = env().await?;
    // An operator's tool, not a request: a Scan page may take longer than the
    // functions' 3 s (DynamoDB Local's do, at a million items).
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs(60))
        .build();
    let sdk = env.sdk.to_builder().timeout_config(timeouts).build();
    let store = Store::new(
        store::dynamodb_client(&sdk, env.endpoint.as_deref()),
        env.table,
    );
    // Each finding as it is made; the report keeps only the first ones.
    options.on_finding = Some(std::sync::Arc::new(|finding| println!("{finding}")));
    let started = std::time::Instant::now();
    let report = match (user, post) {
        (Some(user), None) => store.admin().audit_user(&user, &options).await?,
        (None, Some(post)) => store.admin().audit_post(&post, &options).await?,
        (None, None) => store.admin().audit_with(&options).await?,
        (Some(_), Some(_)) => return Err(USAGE.into()),
    };
    let seconds = started.elapsed().as_secs_f64();
    let peak = peak_memory_kib();
    tracing::info!(
        items_read = report.items_read,
        findings = report.found,
        repaired = report.repaired,
        read_units = report.read_units,
        seconds,
        peak_kib = peak,
        "audit finished"
    );
    println!(
        "items read: {}\nfindings: {}\nrepaired: {}\nread units: {:.1}\npages: {}\n\
         users held: {}\nposts held at most: {}\nelapsed: {seconds:.2} s\npeak memory: {} KiB",
        report.items_read,
        report.found,
        report.repaired,
        report.read_units,
        report.pages,
        report.users_held,
        report.max_held,
        peak.map_or_else(|| "unknown".to_owned(), |kib| kib.to_string()),
    );
    let left = report.left();
    if left > 0 {
        return Err(format!(
            "{left} finding(s) left; run with --repair, or again if values changed meanwhile"
        )
        .into());
    }
    Ok(())
}

/// The process's peak resident memory (`VmHWM` in /proc/self/status), on Linux.
fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Where `identity-provider` saves the local pool, and `token` reads it:
/// `identity.json` in the local stack's data directory (`BLOG_DATA_DIR`, as
/// run-local.sh sets it; `.local` by default).
fn local_pool() -> PathBuf {
    std::env::var_os("BLOG_DATA_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(".local"), PathBuf::from)
        .join("identity.json")
}

/// template.yaml's user pool in the local Cognito emulator.
async fn identity_provider(args: &[String]) -> Result<(), Error> {
    let Some((endpoint, flags)) = args.split_first() else {
        return Err(USAGE.into());
    };
    let (mut region, mut save) = ("us-east-1".to_owned(), local_pool());
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        match (flag.as_str(), flags.next()) {
            ("--region", Some(r)) => region.clone_from(r),
            ("--save", Some(file)) => save = PathBuf::from(file),
            _ => return Err(USAGE.into()),
        }
    }
    let template = std::fs::read_to_string("template.yaml")
        .map_err(|e| format!("template.yaml (run from the repository's root): {e}"))?;
    let pool = identity::create_pool(endpoint, &region, &template).await?;
    pool.save(&save)?;
    println!("{} {}", pool.user_pool_id, pool.client_id);
    Ok(())
}

/// A fresh ID token of each local user named, one a line.
async fn token(args: &[String]) -> Result<(), Error> {
    let (names, file) = match args {
        [names @ .., flag, file] if flag == "--pool" => (names, PathBuf::from(file)),
        names => (names, local_pool()),
    };
    if names.is_empty() || names.iter().any(|name| name.starts_with("--")) {
        return Err(USAGE.into());
    }
    let pool = identity::LocalPool::load(&file)?;
    for name in names {
        println!("{}", identity::token(&pool, name).await?);
    }
    Ok(())
}

/// The HTTP API as deployed, in front of `cargo lambda watch`.
async fn api_gateway(args: &[String]) -> Result<(), Error> {
    use local::api_gateway::{
        Gateway,
        config::ApiConfig,
        jwt::{Authorizer, JwtConfig},
    };
    let Some((port, flags)) = args.split_first() else {
        return Err(USAGE.into());
    };
    let port: u16 = port.parse().map_err(|_| USAGE)?;
    let mut given = std::collections::HashMap::new();
    let mut parameters = std::collections::HashMap::new();
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        match (flag.as_str(), flags.next()) {
            ("--origins", Some(list)) => {
                parameters.insert("AllowedOrigins".to_owned(), list.clone());
            }
            ("--param", Some(pair)) => {
                let (name, value) = pair.split_once('=').ok_or(USAGE)?;
                parameters.insert(name.to_owned(), value.to_owned());
            }
            (
                name @ ("--functions" | "--idp" | "--user-pool" | "--client" | "--region"),
                Some(value),
            ) => {
                given.insert(name, value.clone());
            }
            _ => return Err(USAGE.into()),
        }
    }
    let mut take = |name: &str| given.remove(name).ok_or(USAGE);
    let (functions, idp) = (take("--functions")?, take("--idp")?);
    let (pool, client) = (take("--user-pool")?, take("--client")?);
    let region = take("--region").unwrap_or_else(|_| "us-east-1".to_owned());
    let template = std::fs::read_to_string("template.yaml")
        .map_err(|e| format!("template.yaml (run from the repository's root): {e}"))?;
    let api = ApiConfig::from_template(&template, &parameters)?;
    let jwt = JwtConfig {
        issuer: api.issuer(&region, &pool),
        audience: vec![client],
        jwks_url: format!("{}/{pool}/.well-known/jwks.json", idp.trim_end_matches('/')),
    };
    tracing::info!(port, %functions, issuer = %jwt.issuer, jwks = %jwt.jwks_url, "API gateway listening");
    let http = reqwest::Client::builder().no_proxy().build()?;
    let gateway = Gateway::new(api, Authorizer::new(jwt, http), &functions)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    tokio::select! {
        () = gateway.serve(listener) => {}
        () = shutdown() => {}
    }
    Ok(())
}

/// A proxy before DynamoDB Local with real DynamoDB's failures, for running
/// the local stack against them (`BLOG_HOSTILE_DYNAMODB=1 infra/run-local.sh`).
async fn hostile_dynamodb(args: &[String]) -> Result<(), Error> {
    let Some((port, flags)) = args.split_first() else {
        return Err(USAGE.into());
    };
    let port: u16 = port.parse().map_err(|_| USAGE)?;
    let mut upstream = None;
    let mut faults = hostile::Faults::hostile();
    let mut partitions: Option<hostile::PartitionLimits> = None;
    let mut burst = None;
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        match (flag.as_str(), flags.next()) {
            ("--upstream", Some(url)) => upstream = Some(url.clone()),
            ("--faults", Some(preset)) => {
                let seed = faults.seed;
                faults = match preset.as_str() {
                    "none" => hostile::Faults::none(),
                    "hostile" => hostile::Faults::hostile(),
                    _ => return Err(format!("--faults {preset:?}: none or hostile").into()),
                };
                faults.seed = seed;
            }
            ("--partition-scale", Some(scale)) => {
                let scale = scale
                    .parse()
                    .map_err(|_| format!("--partition-scale {scale:?} is not a number"))?;
                partitions = Some(hostile::PartitionLimits::scaled(scale)?);
            }
            ("--burst-seconds", Some(seconds)) => {
                let seconds: f64 = seconds
                    .parse()
                    .map_err(|_| format!("--burst-seconds {seconds:?} is not a number"))?;
                if !(1.0..=300.0).contains(&seconds) {
                    return Err(format!("--burst-seconds {seconds} is not within 1–300").into());
                }
                burst = Some(seconds);
            }
            ("--seed", Some(seed)) => {
                faults.seed = seed
                    .parse()
                    .map_err(|_| format!("--seed {seed:?} is not a number"))?;
            }
            ("--rate", Some(spec)) => faults.parse_rate(spec)?,
            ("--gsi-lag-ms", Some(ms)) => {
                let ms = ms
                    .parse()
                    .map_err(|_| format!("--gsi-lag-ms {ms:?} is not a number"))?;
                faults.gsi_lag = Duration::from_millis(ms);
            }
            ("--late-commit-ms", Some(ms)) => {
                let ms = ms
                    .parse()
                    .map_err(|_| format!("--late-commit-ms {ms:?} is not a number"))?;
                faults.late_commit_delay = Duration::from_millis(ms);
            }
            _ => return Err(USAGE.into()),
        }
    }
    let upstream = upstream.ok_or(USAGE)?;
    if let (Some(limits), Some(seconds)) = (&mut partitions, burst) {
        limits.burst_seconds = seconds;
    } else if burst.is_some() {
        return Err("--burst-seconds needs --partition-scale".into());
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let proxy = hostile::Proxy::start(listener, upstream.as_str(), faults.clone()).await?;
    proxy.set_partition_limits(partitions);
    tracing::info!(url = %proxy.url(), %upstream, ?faults, ?partitions, "hostile DynamoDB proxy listening");
    // Report when something was injected since the last report, not on every
    // request: the stream poller alone sends several a second.
    let injected = |stats: &hostile::Stats| {
        (
            stats.faults(),
            stats.gsi_hidden_items,
            stats.partition_throttled(),
        )
    };
    let mut reported = injected(&proxy.stats());
    let mut report = tokio::time::interval(Duration::from_secs(30));
    let stop = shutdown();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            _ = report.tick() => {
                let stats = proxy.stats();
                if injected(&stats) != reported {
                    reported = injected(&stats);
                    tracing::info!(%stats, "hostile DynamoDB proxy");
                }
            }
        }
    }
    tracing::info!(stats = %proxy.stats(), "hostile DynamoDB proxy stopped");
    Ok(())
}

/// Ctrl-C, or the SIGTERM that run-local.sh stops its processes with.
async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// EventBridge's schedules, locally: each of template.yaml's `Schedule`
/// events invokes its function at its rate (the first run at once), through
/// `cargo lambda watch`'s Invoke API, until interrupted.
async fn scheduler(args: &[String]) -> Result<(), Error> {
    let functions = match args {
        [flag, url] if flag == "--functions" => url.trim_end_matches('/').to_owned(),
        _ => return Err(USAGE.into()),
    };
    let template = std::fs::read_to_string("template.yaml")
        .map_err(|e| format!("template.yaml (run from the repository's root): {e}"))?;
    let schedules = local::scheduler::from_template(&template)?;
    let http = reqwest::Client::new();
    let runs = schedules.into_iter().map(|schedule| {
        let http = http.clone();
        let url = format!("{functions}/2015-03-31/functions/{}/invocations", schedule.function);
        async move {
            tracing::info!(function = %schedule.function, every_s = schedule.every.as_secs(), "schedule started");
            let mut ticks = tokio::time::interval(schedule.every);
            loop {
                ticks.tick().await;
                let sent = http
                    .post(&url)
                    .json(&local::scheduler::event(&schedule))
                    .timeout(Duration::from_secs(120))
                    .send()
                    .await;
                match sent {
                    Ok(response) => {
                        let status = response.status();
                        let body = response.text().await.unwrap_or_default();
                        tracing::info!(function = %schedule.function, %status, %body, "scheduled run");
                    }
                    // EventBridge would try again later; so does the next tick.
                    Err(error) => tracing::warn!(function = %schedule.function, %error, "scheduled run not delivered"),
                }
            }
        }
    });
    let mut running = tokio::task::JoinSet::new();
    for run in runs {
        running.spawn(run);
    }
    let _ = tokio::signal::ctrl_c().await;
    running.abort_all();
    Ok(())
}

async fn stream_poller(args: &[String]) -> Result<(), Error> {
    let mut checkpoint = None;
    let mut functions = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match (flag.as_str(), rest.next()) {
            ("--checkpoint", Some(path)) => checkpoint = Some(PathBuf::from(path)),
            ("--functions", Some(url)) => functions = Some(url.trim_end_matches('/').to_owned()),
            _ => return Err(USAGE.into()),
        }
    }
    let template = std::fs::read_to_string("template.yaml")
        .map_err(|e| format!("template.yaml (run from the repository's root): {e}"))?;
    let mapping = StreamMapping::from_template(&template)?;
    let env = env().await?;
    let store = Store::new(
        store::dynamodb_client(&env.sdk, env.endpoint.as_deref()),
        env.table.clone(),
    );
    let streams = blog::store::streams_client(&env.sdk, env.endpoint.as_deref());
    let invocations = |function: &str| {
        functions
            .as_ref()
            .map(|base| format!("{base}/2015-03-31/functions/{function}/invocations"))
    };
    let invoke = invocations(&mapping.function);
    let failures = mapping
        .on_failure
        .as_ref()
        .and_then(|d| d.consumer.as_deref())
        .and_then(invocations);
    tracing::info!(
        table = %env.table,
        function = %mapping.function,
        invoke = invoke.as_deref().unwrap_or("in-process"),
        batch_size = mapping.batch_size,
        batching_window_s = mapping.batching_window.as_secs(),
        "stream poller started"
    );
    let mut poller = StreamPoller::new(store.clone(), streams, mapping, checkpoint);
    if let Some(url) = failures {
        let http = reqwest::Client::new();
        poller = poller.with_failure_sink(Box::new(move |notice| {
            Box::pin(send_notice(http.clone(), url.clone(), notice))
        }));
    }
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let idle = Duration::from_millis(200);
    match invoke {
        None => {
            let deliver = |event: Event| {
                let store = &store;
                async move { Ok(fanout::handle(store, event).await) }
            };
            poller.run(deliver, idle, stop).await;
        }
        Some(url) => {
            let http = reqwest::Client::new();
            let deliver = |event: Event| invoke_function(&http, &url, event);
            poller.run(deliver, idle, stop).await;
        }
    }
    Ok(())
}

/// Sends a failure notice as the fan-out's failure queue would: an SQS event
/// to the `park-failures` function, through the Lambda Invoke API.
async fn send_notice(
    http: reqwest::Client,
    url: String,
    notice: FailureNotice,
) -> Result<(), String> {
    let body = serde_json::to_string(&notice).map_err(|e| e.to_string())?;
    let event = serde_json::json!({
        "Records": [{
            "messageId": ulid::Ulid::generate().to_string(),
            "receiptHandle": "local",
            "body": body,
            "attributes": { "ApproximateReceiveCount": "1" },
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:local:000000000000:fan-out-failures",
            "awsRegion": "local",
        }]
    });
    let answer: aws_lambda_events::event::sqs::SqsBatchResponse =
        invoke(&http, &url, &event).await?;
    if answer.batch_item_failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "park-failures could not park the batch: {:?}",
            answer.batch_item_failures
        ))
    }
}

/// Invokes the mapping's function through the Lambda Invoke API, as the
/// event source mapping does, and reads its partial-batch response. The
/// function's own failure (an error answer, the Invoke API's
/// `X-Amz-Function-Error`, a 5xx, an answer that is no response, no answer
/// within 120 s: the template's 60 s function timeout, and as long again
/// for watch to build the function on its first invocation) is a
/// [`InvokeError::Function`], counted and bisected as Lambda does; an
/// invocation that never reached watch (no connection) or that watch refused
/// (another 4xx) is [`InvokeError::Unreachable`], tried again without
/// counting.
async fn invoke_function(
    http: &reqwest::Client,
    url: &str,
    event: Event,
) -> Result<DynamoDbEventResponse, InvokeError> {
    let response = http
        .post(url)
        .json(&event)
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                InvokeError::Function(format!("no answer: {e}"))
            } else {
                InvokeError::Unreachable(e.to_string())
            }
        })?;
    let status = response.status();
    let function_error = response.headers().contains_key("x-amz-function-error");
    let body = response
        .text()
        .await
        .map_err(|e| InvokeError::Unreachable(e.to_string()))?;
    let error_payload = serde_json::from_str::<serde_json::Value>(&body)
        .is_ok_and(|v| v.get("errorType").is_some() || v.get("errorMessage").is_some());
    if function_error || error_payload || status.is_server_error() {
        return Err(InvokeError::Function(format!("{status}: {body}")));
    }
    if !status.is_success() {
        return Err(InvokeError::Unreachable(format!(
            "{url} answered {status}: {body}"
        )));
    }
    serde_json::from_str(&body)
        .map_err(|e| InvokeError::Function(format!("not a batch response {body:?}: {e}")))
}

/// Invokes a function through the Lambda Invoke API at `url` with `event`
/// and reads its answer as `R`.
async fn invoke<E: serde::Serialize, R: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
    event: &E,
) -> Result<R, String> {
    let response = http
        .post(url)
        .json(event)
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{url} answered {status}: {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("unexpected answer from {url} {body:?}: {e}"))
}
