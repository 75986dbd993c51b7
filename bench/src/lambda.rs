//! Figures of the deployed functions: the zip's size, the time from process
//! start to the first poll of the Lambda Runtime API and to the answer of the
//! first invocation (what a cold start costs a caller, less Lambda's own
//! set-up), and the peak memory after 1,000 invocations.
//!
//! The functions run as built (`target/release/<name>`) against a stand-in for
//! the Runtime API on a loopback port: it notes when the first
//! `GET /runtime/invocation/next` arrives, hands out queued events (holding
//! the poll while none is queued, as Lambda holds a frozen environment), and
//! records what each response or error posted back answered ([`Answer`]).

use std::{
    collections::VecDeque,
    convert::Infallible,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use http_body_util::Full;
use hyper::{body::Bytes, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use tokio::{net::TcpListener, sync::Notify};

use crate::{measure::Stats, naive::Error};

#[derive(Debug, Clone)]
pub struct FunctionFigures {
    pub name: String,
    pub zip_bytes: Option<u64>,
    /// Process start to the first poll of the Runtime API.
    pub startup: Stats,
    /// Process start to the first invocation's answer: start-up, then the
    /// first event served with fresh connections (to DynamoDB Local over
    /// plain HTTP here; in AWS a TLS handshake comes on top).
    pub first_answer: Stats,
    /// Peak resident memory (VmHWM) after the invocations, in KiB.
    pub peak_kib: Option<u64>,
    /// An invocation of the warm process, from handing out its event to its
    /// response: the handler and the runtime around it.
    pub invocation: Stats,
    pub invocations: usize,
    /// Invocations that failed (posted to `/error`, or answered non-2xx),
    /// the cold starts' included.
    pub failed: usize,
}

#[derive(Default)]
struct State {
    events: VecDeque<String>,
    first_poll: Option<Instant>,
    first_answer: Option<Instant>,
    /// When the event being served was handed out.
    handed_out: Option<Instant>,
    /// Seconds from each event handed out to its response.
    served: Vec<f64>,
    answered: usize,
    failed: usize,
    /// What each invocation answered, in order.
    answers: Vec<Answer>,
}

/// What an invocation answered, as the harness judges it against what the
/// function should answer ([`Expected`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// An HTTP function's response: the `statusCode` it carries.
    Status(u16),
    /// A batch function's response (the stream fan-out, the failure
    /// queue's): how many items it reported in `batchItemFailures`.
    Batch { failures: usize },
    /// Posted to `/error`: the handler failed.
    Error,
    /// A response the harness cannot read either way.
    Unreadable,
}

impl Answer {
    fn of(path: &str, body: &[u8]) -> Self {
        if path.ends_with("/error") {
            return Self::Error;
        }
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
            return Self::Unreadable;
        };
        if let Some(status) = value["statusCode"].as_u64() {
            return u16::try_from(status).map_or(Self::Unreadable, Self::Status);
        }
        match &value["batchItemFailures"] {
            serde_json::Value::Array(failures) => Self::Batch {
                failures: failures.len(),
            },
            // An empty partial-batch response may leave the list out.
            serde_json::Value::Null if value.is_object() => Self::Batch { failures: 0 },
            _ => Self::Unreadable,
        }
    }
}

/// The answer a function gives on its success path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// This HTTP status, exactly.
    Status(u16),
    /// A batch response with no `batchItemFailures`.
    NoBatchFailures,
}

impl Expected {
    pub fn met_by(self, answer: &Answer) -> bool {
        match (self, answer) {
            (Self::Status(want), Answer::Status(got)) => want == *got,
            (Self::NoBatchFailures, Answer::Batch { failures }) => *failures == 0,
            _ => false,
        }
    }
}

/// The Runtime API stand-in.
struct RuntimeApi {
    state: Mutex<State>,
    changed: Notify,
}

impl RuntimeApi {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn handle(
        self: Arc<Self>,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
        let path = req.uri().path().to_owned();
        let reply = |status: u16, body: String| {
            let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() = hyper::StatusCode::from_u16(status)
                .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
            response
        };
        if path.ends_with("/invocation/next") {
            self.state().first_poll.get_or_insert_with(Instant::now);
            self.changed.notify_waiters();
            // Nothing to invoke yet: hold the poll, as Lambda freezes the
            // process, until the harness queues the next event.
            let event = loop {
                let queued = self.changed.notified();
                {
                    let mut state = self.state();
                    if let Some(event) = state.events.pop_front() {
                        state.handed_out = Some(Instant::now());
                        break event;
                    }
                }
                queued.await;
            };
            let deadline = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis()
                + 30_000;
            let mut response = reply(200, event);
            let headers = response.headers_mut();
            let id = ulid::Ulid::generate().to_string();
            for (name, value) in [
                ("lambda-runtime-aws-request-id", id),
                ("lambda-runtime-deadline-ms", deadline.to_string()),
                (
                    "lambda-runtime-invoked-function-arn",
                    "arn:aws:lambda:us-east-1:123456789012:function:bench".into(),
                ),
                (
                    "lambda-runtime-trace-id",
                    "Root=1-67400000-0123456789abcdef01234567;Parent=0;Sampled=0".into(),
                ),
            ] {
                if let Ok(value) = value.parse() {
                    headers.insert(name, value);
                }
            }
            return Ok(response);
        }
        if path.ends_with("/response") || path.ends_with("/error") {
            let body = http_body_util::BodyExt::collect(req.into_body())
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            // An HTTP function's response carries the status it answered.
            let status = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["statusCode"].as_u64());
            let answer = Answer::of(&path, &body);
            {
                let mut state = self.state();
                state.first_answer.get_or_insert_with(Instant::now);
                if let Some(handed_out) = state.handed_out.take() {
                    state.served.push(handed_out.elapsed().as_secs_f64());
                }
                state.answered += 1;
                if path.ends_with("/error") || status.is_some_and(|s| s >= 300) {
                    state.failed += 1;
                }
                state.answers.push(answer);
            }
            self.changed.notify_waiters();
            return Ok(reply(202, r#"{"status":"OK"}"#.into()));
        }
        Ok(reply(404, String::new()))
    }

    /// The stand-in on a loopback port: the API, its `host:port`, and its
    /// server task, aborted when the guard is dropped (on every exit path).
    async fn serve() -> Result<(Arc<Self>, String, AbortOnDrop), Error> {
        let api = Arc::new(Self {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let server = api.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let api = server.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| api.clone().handle(req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok((api, address, AbortOnDrop(task)))
    }

    /// Queues `event`, handed to the function's next poll (or the one it
    /// is holding).
    fn queue(&self, event: String) {
        self.state().events.push_back(event);
        self.changed.notify_waiters();
    }

    /// Waits until `done` holds of the state, or `limit` passes.
    async fn wait(&self, limit: Duration, done: impl Fn(&State) -> bool) -> Result<(), Error> {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            if done(&self.state()) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("the function did not get there in time".into());
            }
            let _ = tokio::time::timeout(left.min(Duration::from_millis(100)), notified).await;
        }
    }
}

/// A task aborted when dropped: the Runtime API stand-in's server does not
/// outlive the measurement, whichever way it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a function process needs in its environment, as Lambda sets it.
pub struct Environment<'a> {
    pub table: &'a str,
    pub endpoint: &'a str,
}

/// Removes the cgroup directories `groups`, each once it is empty: a
/// thread or process on its way out may take a moment to leave (up to 1 s
/// each; one that stays is reported, not fatal).
pub fn remove_cgroups(groups: &[PathBuf]) {
    for group in groups {
        let mut tries = 0;
        while let Err(e) = std::fs::remove_dir(group) {
            tries += 1;
            if e.kind() == std::io::ErrorKind::NotFound {
                break;
            }
            if tries == 50 {
                eprintln!("could not remove the cgroup {}: {e}", group.display());
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Where a cold start runs as Lambda would run it: the cgroups it joins
/// before the binary starts (its CPU share and memory limit), the memory
/// size it is told, and the certificates its HTTPS client trusts.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    pub cgroups: Vec<PathBuf>,
    /// The `cpu` cgroup among them, whose `cpu.stat` counts the time the
    /// quota held the process back.
    pub cpu: Option<PathBuf>,
    /// The `cpuacct` cgroup among them, whose `cpuacct.usage` counts the
    /// CPU time the process used, every thread included.
    pub cpuacct: Option<PathBuf>,
    pub memory_mb: Option<u32>,
    /// `SSL_CERT_FILE`: the AWS SDK's HTTPS client (rustls with the
    /// platform's roots, `rustls-native-certs`) reads its trust roots there.
    pub ca_file: Option<PathBuf>,
}

impl Confinement {
    /// The CPU time the cgroup has used, in seconds.
    fn cpu_used(&self) -> Option<f64> {
        let usage = std::fs::read_to_string(self.cpuacct.as_ref()?.join("cpuacct.usage")).ok()?;
        Some(usage.trim().parse::<f64>().ok()? / 1e9)
    }

    /// The time the quota has held the cgroup back, in seconds.
    fn throttled(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(self.cpu.as_ref()?.join("cpu.stat")).ok()?;
        let ns = stat
            .lines()
            .find_map(|line| line.strip_prefix("throttled_time "))?;
        Some(ns.trim().parse::<f64>().ok()? / 1e9)
    }
}

/// Joins every cgroup of `$@` (after the binary, `$1`), says so on stdout,
/// waits for a line on stdin, then becomes the binary: it starts confined,
/// none of its own work outside, and the clock starts at the go, not at the
/// shell's start and its cgroup writes (which Lambda's start does not have).
const CONFINE: &str = r#"b=$1; shift; for g; do echo $$ > "$g/cgroup.procs" || exit 97; done; echo joined; read go; exec "$b" </dev/null >/dev/null"#;

fn command(
    binary: &Path,
    name: &str,
    env: &Environment<'_>,
    runtime_api: &str,
) -> tokio::process::Command {
    confined_command(binary, name, env, runtime_api, &Confinement::default())
}

fn confined_command(
    binary: &Path,
    name: &str,
    env: &Environment<'_>,
    runtime_api: &str,
    confinement: &Confinement,
) -> tokio::process::Command {
    let mut command = if confinement.cgroups.is_empty() {
        tokio::process::Command::new(binary)
    } else {
        let mut shell = tokio::process::Command::new("/bin/sh");
        shell.arg("-c").arg(CONFINE).arg("sh").arg(binary);
        shell.args(&confinement.cgroups);
        shell
    };
    // A confined start talks to its shell on stdin and stdout first.
    let (stdin, stdout) = if confinement.cgroups.is_empty() {
        (Stdio::null(), Stdio::null())
    } else {
        (Stdio::piped(), Stdio::piped())
    };
    let memory = confinement.memory_mb.unwrap_or(128).to_string();
    command
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
        .env("AWS_LAMBDA_FUNCTION_NAME", name)
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory)
        .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("TABLE_NAME", env.table)
        .env("DYNAMODB_ENDPOINT", env.endpoint)
        .env("RUST_LOG", "warn")
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::null())
        .kill_on_drop(true);
    if let Some(ca) = &confinement.ca_file {
        command.env("SSL_CERT_FILE", ca);
    }
    command
}

/// A cold start for each of `cold`, a new process answering that one event,
/// then the peak memory after serving all of `events` in one process.
pub async fn measure(
    name: &str,
    binary: &Path,
    zip: &Path,
    env: &Environment<'_>,
    cold: Vec<String>,
    events: Vec<String>,
) -> Result<FunctionFigures, Error> {
    let mut to_poll = Vec::with_capacity(cold.len());
    let mut to_answer = Vec::with_capacity(cold.len());
    let mut cold_failed = 0;
    for event in cold {
        let (api, address, _server) = RuntimeApi::serve().await?;
        api.queue(event);
        let started = Instant::now();
        let mut child = command(binary, name, env, &address).spawn()?;
        api.wait(Duration::from_secs(30), |s| {
            s.first_poll.is_some() && s.first_answer.is_some()
        })
        .await?;
        let (first_poll, first_answer) = {
            let state = api.state();
            cold_failed += state.failed;
            (state.first_poll.ok_or("no poll")?, state.first_answer)
        };
        to_poll.push(first_poll.duration_since(started).as_secs_f64());
        if let Some(answer) = first_answer {
            to_answer.push(answer.duration_since(started).as_secs_f64());
        }
        child.kill().await?;
    }

    let (api, address, _server) = RuntimeApi::serve().await?;
    let invocations = events.len();
    api.state().events.extend(events);
    let mut child = command(binary, name, env, &address).spawn()?;
    api.wait(Duration::from_secs(300), |s| s.answered >= invocations)
        .await?;
    let peak_kib = child.id().and_then(peak_rss_kib);
    child.kill().await?;
    let failed = api.state().failed + cold_failed;
    // The first invocation opened the process's connections: warm ones only.
    let invocation = Stats::of(api.state().served.iter().skip(1).copied().collect());
    Ok(FunctionFigures {
        name: name.to_owned(),
        zip_bytes: std::fs::metadata(zip).ok().map(|m| m.len()),
        startup: Stats::of(to_poll),
        first_answer: Stats::of(to_answer),
        peak_kib,
        invocation,
        invocations,
        failed,
    })
}

/// VmHWM of a process: its peak resident set, in KiB (Linux).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// One function's cold starts under a [`Confinement`], in seconds: process
/// start to its first poll (init), to its first answer (init and the first
/// invocation, its connection to DynamoDB opened), the second invocation of
/// the same process alone, the CPU time used and the time the quota held the
/// process back up to the first answer, and the peak memory of each start.
#[derive(Debug, Clone, Default)]
pub struct ColdFigures {
    pub init: Vec<f64>,
    pub first_answer: Vec<f64>,
    pub second_answer: Vec<f64>,
    pub cpu: Vec<f64>,
    pub throttled: Vec<f64>,
    pub peak_kib: Vec<u64>,
    pub failed: usize,
}

/// A cold start of `binary` serving one event several times: what it took
/// to the first poll and the first answer, each invocation's time and
/// answer, and the CPU it used.
#[derive(Debug, Clone, Default)]
pub struct Served {
    pub init: f64,
    pub first_answer: f64,
    /// Each invocation, from handing out its event to its response.
    pub invocations: Vec<f64>,
    /// What each invocation answered.
    pub answers: Vec<Answer>,
    /// CPU time used, and time held back by the quota, up to the first
    /// answer (when the cgroups say).
    pub cpu: Option<f64>,
    pub throttled: Option<f64>,
    /// CPU time used by the invocations after the first, all together.
    pub later_cpu: Option<f64>,
    pub peak_kib: Option<u64>,
    /// Invocations whose answer was not the [`Expected`] one.
    pub failed: usize,
}

/// What a process serves in [`serve`]: one event, `count` times, each
/// expected to answer `expected`.
pub struct Invocations<'a> {
    pub event: &'a str,
    pub count: usize,
    pub expected: Expected,
}

/// Puts the table back as an invocation needs it, before each event is
/// handed out: every invocation then takes the same path, whatever the one
/// before it wrote or took away.
pub trait Prepare {
    fn prepare(&self) -> impl Future<Output = Result<(), Error>>;
}

/// Starts `binary` under `confinement` and has it serve `invocations`, one
/// at a time as Lambda hands them out, `prepare` run before each (the
/// process holding its poll meanwhile, as a frozen Lambda environment
/// would).
pub async fn serve(
    name: &str,
    binary: &Path,
    env: &Environment<'_>,
    confinement: &Confinement,
    invocations: &Invocations<'_>,
    prepare: &impl Prepare,
) -> Result<Served, Error> {
    let (api, address, _server) = RuntimeApi::serve().await?;
    prepare.prepare().await?;
    api.queue(invocations.event.to_owned());
    // Counters of the cgroup before the start: a start is measured from a
    // full quota (the caller leaves a period between starts).
    let (cpu_before, throttled_before) = (confinement.cpu_used(), confinement.throttled());
    // An unconfined start is timed from before its launch, as a confined
    // one is from the moment its shell is told to become the binary.
    let launched = Instant::now();
    let mut child = confined_command(binary, name, env, &address, confinement).spawn()?;
    let started = go(&mut child).await?.unwrap_or(launched);
    api.wait(Duration::from_secs(60), |s| s.answered >= 1)
        .await?;
    // Read before the next event is queued: the figures are the first
    // invocation's alone.
    let cpu = confinement.cpu_used().zip(cpu_before).map(|(a, b)| a - b);
    let throttled = confinement
        .throttled()
        .zip(throttled_before)
        .map(|(a, b)| a - b);
    for served in 1..invocations.count {
        prepare.prepare().await?;
        api.queue(invocations.event.to_owned());
        api.wait(Duration::from_secs(60), |s| s.answered > served)
            .await?;
    }
    // The process idles in its poll between invocations (while `prepare`
    // runs): what the cgroup counted since the first answer is theirs.
    let later_cpu = confinement
        .cpu_used()
        .zip(cpu.zip(cpu_before))
        .map(|(now, (first, before))| now - before - first);
    // VmHWM, confined or not (the shell became the binary: one pid), as
    // Lambda's "Max Memory Used" counts the process, not the page cache
    // a memory cgroup also charges.
    let peak_kib = child.id().and_then(peak_rss_kib);
    let served = {
        let state = api.state();
        let poll = state.first_poll.ok_or("no poll")?;
        let answer = state.first_answer.ok_or("no answer")?;
        Served {
            init: poll.duration_since(started).as_secs_f64(),
            first_answer: answer.duration_since(started).as_secs_f64(),
            invocations: state.served.clone(),
            answers: state.answers.clone(),
            cpu,
            throttled,
            later_cpu,
            peak_kib,
            failed: state
                .answers
                .iter()
                .filter(|answer| !invocations.expected.met_by(answer))
                .count(),
        }
    };
    child.kill().await?;
    Ok(served)
}

/// When a confined start's shell has joined its cgroups, tells it to become
/// the binary; the instant it was told (`None` for an unconfined start,
/// which is the binary from its launch).
async fn go(child: &mut tokio::process::Child) -> Result<Option<Instant>, Error> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (Some(stdin), Some(stdout)) = (child.stdin.as_mut(), child.stdout.take()) else {
        return Ok(None);
    };
    let mut line = String::new();
    tokio::io::BufReader::new(stdout)
        .read_line(&mut line)
        .await?;
    if line.trim() != "joined" {
        return Err(format!("the confining shell said {line:?}").into());
    }
    let started = Instant::now();
    stdin.write_all(b"go\n").await?;
    stdin.flush().await?;
    Ok(Some(started))
}

impl ColdFigures {
    /// Adds one start's figures.
    pub fn add(&mut self, served: &Served) {
        self.failed += served.failed;
        self.init.push(served.init);
        self.first_answer.push(served.first_answer);
        self.second_answer.extend(served.invocations.get(1));
        self.cpu.extend(served.cpu);
        self.throttled.extend(served.throttled);
        self.peak_kib.extend(served.peak_kib);
    }
}
