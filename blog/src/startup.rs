//! What every Lambda `main` calls: JSON logs, one [`App`] per process (one SDK
//! client, reused by every invocation), then the Lambda runtime loop.
//!
//! Environment:
//! - `TABLE_NAME` (required): the table.
//! - `DYNAMODB_ENDPOINT` (optional): e.g. DynamoDB Local's URL.
//! - `FEED_CACHE_SECONDS` (optional, default 2; 0 turns it off): how long a
//!   `get-feed` instance serves the feed it read ([`crate::api::FeedCache`]).
//! - `HOME_CACHE_SECONDS` (optional, default 2; 0 turns it off): how long a
//!   `get-home` instance serves a pulled author's newest posts it read
//!   ([`crate::store::memory::PulledLists`]).
//! - `HOT_READ_CACHE_SECONDS` (optional, default 1; 0 turns it off): how
//!   long a read function's instance serves a hot post's Q2 and first pages
//!   of comments and likes it read ([`crate::store::memory::HotReads`]);
//!   on (above 0), the instance also keeps the entries of those first pages
//!   for `HOT_ENTRIES_TTL` (10 s), off with it.
//! - `HOT_WRITES_PER_SECOND` (optional, default 25; 0 turns it off): the
//!   likes and comments a second one instance writes on one quiet post that
//!   turn it hot ([`crate::store::memory::WriteRates`]); scaled down with
//!   the partition limits of the local stack's proxy.
//! - `RUST_LOG`, else `AWS_LAMBDA_LOG_LEVEL` (what the template's
//!   `LoggingConfig.ApplicationLogLevel` sets), else `info`: the log level.
//!
//! The caller's identity comes only from the JWT authorizer's claims in the
//! event (`api::request::caller`), locally as deployed: no setting makes a
//! function trust anything else.

use std::{future::Future, time::Duration};

use aws_lambda_events::event::{
    dynamodb::Event,
    sqs::{SqsBatchResponse, SqsEvent},
    streams::DynamoDbEventResponse,
};
use lambda_http::{Request, RequestExt, service_fn};
use lambda_runtime::LambdaEvent;

use crate::{
    api::{self, ApiResult, App, FeedCache, feed::FEED_CACHE_TTL},
    clock::Clock,
    metrics,
    store::{
        self, Store,
        deadline::Deadline,
        memory::{HOT_READ_TTL, HOT_WRITES_PER_SECOND, HotReads, PULLED_CACHE_TTL, PulledLists},
        meter::CapacityMeter,
    },
};

pub type Error = lambda_http::Error;

/// Structured JSON logs on stdout, which Lambda sends to CloudWatch. The level
/// comes from `RUST_LOG`, else from Lambda's `AWS_LAMBDA_LOG_LEVEL`, else
/// `info`.
pub fn init_tracing() {
    let directives = log_directives(
        std::env::var("RUST_LOG").ok().as_deref(),
        std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref(),
    );
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // A second call (tests) finds a subscriber set already; that is fine.
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_target(false)
        .with_current_span(false)
        .flatten_event(true)
        .try_init();
}

/// The `tracing` filter: `RUST_LOG` when set (it can name modules), else the
/// level Lambda's advanced logging passes (`TRACE`…`FATAL`; tracing has no
/// fatal, so that is `error`), else `info`.
fn log_directives(rust_log: Option<&str>, lambda_level: Option<&str>) -> String {
    if let Some(directives) = rust_log.filter(|d| !d.trim().is_empty()) {
        return directives.to_owned();
    }
    match lambda_level
        .map(|l| l.trim().to_ascii_lowercase())
        .as_deref()
    {
        Some(level @ ("trace" | "debug" | "info" | "warn" | "error")) => level.to_owned(),
        Some("fatal") => "error".to_owned(),
        _ => "info".to_owned(),
    }
}

/// A cache's time to live from its setting `name` (`FEED_CACHE_SECONDS`,
/// `HOME_CACHE_SECONDS`, `HOT_READ_CACHE_SECONDS`): absent is `default`, anything but a number of
/// seconds from 0 to 60 is refused at start-up.
fn cache_ttl(name: &str, setting: Option<&str>, default: Duration) -> Result<Duration, Error> {
    let Some(setting) = setting else {
        return Ok(default);
    };
    setting
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| (0.0..=60.0).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{name} must be from 0 to 60, not {setting:?}").into())
}

/// The rate that turns a quiet post hot, from `HOT_WRITES_PER_SECOND`
/// (absent: [`HOT_WRITES_PER_SECOND`]; 0: off); anything but a number from 0
/// to 10,000 is refused at start-up.
fn hot_rate(setting: Option<&str>) -> Result<Option<f64>, Error> {
    let Some(setting) = setting else {
        return Ok(Some(HOT_WRITES_PER_SECOND));
    };
    let rate = setting
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=10_000.0).contains(r))
        .ok_or_else(|| format!("HOT_WRITES_PER_SECOND must be from 0 to 10000, not {setting:?}"))?;
    Ok((rate > 0.0).then_some(rate))
}

/// The cache setting `name` as the environment has it.
fn cache_ttl_from_env(name: &str, default: Duration) -> Result<Duration, Error> {
    cache_ttl(name, std::env::var(name).ok().as_deref(), default)
}

#[cfg(feature = "admin")]
/// Builds the process's [`App`] from the environment.
pub async fn app_from_env() -> Result<App, Error> {
    build_app(&store::sdk_config().await, None)
}

/// The process's [`App`] on the SDK configuration `sdk`, and inside Lambda
/// the meter of its DynamoDB calls, for the capacity metrics printed after
/// each invocation.
fn lambda_app(sdk: &aws_config::SdkConfig) -> Result<(&'static App, Option<CapacityMeter>), Error> {
    let meter = metrics::enabled().then(CapacityMeter::default);
    let app = build_app(sdk, meter.clone())?;
    // One App for the life of the process; leaking it gives the handlers a
    // `'static` borrow without reference counting on every request.
    Ok((Box::leak(Box::new(app)), meter))
}

/// Prints the capacity the invocation's calls consumed (Lambda runs one
/// invocation at a time per process, so the meter holds exactly its calls).
fn emit_capacity(meter: Option<&CapacityMeter>) {
    if let Some(meter) = meter {
        metrics::emit_capacity(&meter.take());
    }
}

fn build_app(sdk: &aws_config::SdkConfig, meter: Option<CapacityMeter>) -> Result<App, Error> {
    let table = std::env::var("TABLE_NAME").map_err(|_| "TABLE_NAME is not set")?;
    let endpoint = std::env::var("DYNAMODB_ENDPOINT").ok();
    let client = store::dynamodb_client_metered(sdk, endpoint.as_deref(), meter);
    let pulled = cache_ttl_from_env("HOME_CACHE_SECONDS", PULLED_CACHE_TTL)?;
    let hot_reads = cache_ttl_from_env("HOT_READ_CACHE_SECONDS", HOT_READ_TTL)?;
    Ok(App {
        store: Store::new(client, table)
            .with_pulled_lists(PulledLists::new(pulled, Clock::default()))
            .with_hot_reads(HotReads::new(hot_reads, Clock::default()))
            .with_hot_rate(hot_rate(
                std::env::var("HOT_WRITES_PER_SECOND").ok().as_deref(),
            )?),
        feed_cache: FeedCache::new(cache_ttl_from_env("FEED_CACHE_SECONDS", FEED_CACHE_TTL)?),
    })
}

/// Serves one HTTP handler behind API Gateway until the runtime stops.
pub async fn run_http<H, F>(handler: H) -> Result<(), Error>
where
    H: Fn(&'static App, Request) -> F,
    F: Future<Output = ApiResult> + Send + 'static,
{
    init_tracing();
    let (app, meter) = lambda_app(&store::sdk_config().await)?;
    lambda_http::run(service_fn(|req: Request| {
        // Lambda's id for this invocation: the seed of its transactions' tokens.
        let request_id = req
            .lambda_context_ref()
            .map(|ctx| ctx.request_id.clone())
            .unwrap_or_default();
        // When the invocation times out: an unknown outcome is resolved
        // until shortly before.
        let deadline = req
            .lambda_context_ref()
            .and_then(|ctx| deadline_of(ctx.deadline));
        let reply = store::request_scope_until(request_id.clone(), deadline, handler(app, req));
        let meter = meter.clone();
        async move {
            let response = api::respond(reply.await, &request_id);
            emit_capacity(meter.as_ref());
            Ok::<_, Error>(response)
        }
    }))
    .await
}

/// The instant of a Lambda deadline (milliseconds since the epoch); `None`
/// when it is not in the future.
fn deadline_of(epoch_ms: u64) -> Option<std::time::Instant> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let left = std::time::Duration::from_millis(epoch_ms).checked_sub(now)?;
    Some(std::time::Instant::now() + left)
}

/// Serves a DynamoDB Streams handler: each batch in, with the invocation's
/// deadline, its partial-batch response (`batchItemFailures`) out.
pub async fn run_stream<H, F>(handler: H) -> Result<(), Error>
where
    H: Fn(&'static Store, Event, Deadline) -> F,
    F: Future<Output = DynamoDbEventResponse> + Send + 'static,
{
    init_tracing();
    let (app, meter) = lambda_app(&store::sdk_config().await)?;
    lambda_runtime::run(lambda_runtime::service_fn(|event: LambdaEvent<Event>| {
        // Boxed: the handler's future is deep enough to overflow the compiler's
        // type-layout limit once nested in the runtime's.
        let deadline = Deadline::from_epoch_ms(event.context.deadline);
        metered(
            meter.clone(),
            Box::pin(handler(&app.store, event.payload, deadline)),
        )
    }))
    .await
}

/// Serves a scheduled function (EventBridge's schedule, whose event says
/// nothing it needs): each run with the invocation's deadline, what it did
/// out.
pub async fn run_scheduled<H, F, T>(handler: H) -> Result<(), Error>
where
    H: Fn(&'static Store, Deadline) -> F,
    F: Future<Output = Result<T, store::StoreError>> + Send + 'static,
    T: serde::Serialize + Send + 'static,
{
    init_tracing();
    let (app, meter) = lambda_app(&store::sdk_config().await)?;
    lambda_runtime::run(lambda_runtime::service_fn(
        |event: LambdaEvent<serde_json::Value>| {
            let deadline = Deadline::from_epoch_ms(event.context.deadline);
            tracing::info!(deadline_ms = event.context.deadline, "scheduled run");
            let run = handler(&app.store, deadline);
            let meter = meter.clone();
            async move {
                let done = run.await;
                emit_capacity(meter.as_ref());
                // An error fails the invocation: EventBridge's next run
                // (a minute later) does what is left.
                done.map_err(|e| Error::from(e.to_string()))
            }
        },
    ))
    .await
}

/// A stream or queue handler's boxed answer, then the invocation's capacity
/// metrics.
async fn metered<T>(
    meter: Option<CapacityMeter>,
    response: std::pin::Pin<Box<dyn Future<Output = T> + Send>>,
) -> Result<T, Error> {
    let response = response.await;
    emit_capacity(meter.as_ref());
    Ok(response)
}

/// Serves the fan-out's failure queue (`park-failures`): each message in,
/// the messages it could not serve (`batchItemFailures`) out.
pub async fn run_failure_queue<H, F>(handler: H) -> Result<(), Error>
where
    H: Fn(&'static Store, &'static aws_sdk_dynamodbstreams::Client, SqsEvent) -> F,
    F: Future<Output = SqsBatchResponse> + Send + 'static,
{
    init_tracing();
    // One SDK configuration (credentials, region) for both clients.
    let sdk = store::sdk_config().await;
    let (app, meter) = lambda_app(&sdk)?;
    let endpoint = std::env::var("DYNAMODB_ENDPOINT").ok();
    let streams: &'static aws_sdk_dynamodbstreams::Client =
        Box::leak(Box::new(store::streams_client(&sdk, endpoint.as_deref())));
    lambda_runtime::run(lambda_runtime::service_fn(
        |event: LambdaEvent<SqsEvent>| {
            // Boxed, as in `run_stream`: the compiler's type-layout limit.
            metered(
                meter.clone(),
                Box::pin(handler(&app.store, streams, event.payload)),
            )
        },
    ))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_wins_then_lambdas_level_then_info() {
        assert_eq!(
            log_directives(Some("blog=debug"), Some("ERROR")),
            "blog=debug"
        );
        assert_eq!(log_directives(None, Some("DEBUG")), "debug");
        assert_eq!(log_directives(Some(" "), Some("WARN")), "warn");
        assert_eq!(log_directives(None, Some("FATAL")), "error");
        assert_eq!(log_directives(None, Some("LOUD")), "info");
        assert_eq!(log_directives(None, None), "info");
    }

    #[test]
    fn a_cache_setting_is_seconds_or_refused() {
        let ttl = |setting| cache_ttl("FEED_CACHE_SECONDS", setting, FEED_CACHE_TTL);
        assert_eq!(ttl(None).ok(), Some(FEED_CACHE_TTL));
        assert_eq!(ttl(Some("0")).ok(), Some(Duration::ZERO));
        assert_eq!(ttl(Some("0.5")).ok(), Some(Duration::from_millis(500)));
        for bad in ["", "-1", "61", "two", "NaN"] {
            let refused = ttl(Some(bad)).err().map(|e| e.to_string());
            assert_eq!(
                refused.as_deref(),
                Some(format!("FEED_CACHE_SECONDS must be from 0 to 60, not {bad:?}").as_str()),
                "{bad:?}"
            );
        }
        assert_eq!(
            cache_ttl("HOME_CACHE_SECONDS", None, PULLED_CACHE_TTL).ok(),
            Some(PULLED_CACHE_TTL)
        );
        assert!(cache_ttl("HOME_CACHE_SECONDS", Some("x"), PULLED_CACHE_TTL).is_err());
    }

    #[test]
    fn the_hot_rate_is_a_number_of_writes_a_second_or_off() {
        assert_eq!(hot_rate(None).ok(), Some(Some(HOT_WRITES_PER_SECOND)));
        assert_eq!(hot_rate(Some("0")).ok(), Some(None));
        assert_eq!(hot_rate(Some(" 0.25 ")).ok(), Some(Some(0.25)));
        for bad in ["", "-1", "10001", "fast", "NaN", "inf"] {
            assert!(hot_rate(Some(bad)).is_err(), "{bad:?}");
        }
    }
}
