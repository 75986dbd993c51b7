//! The HTTP side: accept the SDK's requests, decide, forward, rewrite.

use std::{
    convert::Infallible,
    io,
    net::SocketAddr,
    sync::{
        Arc, Mutex, PoisonError, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use http_body_util::{BodyExt, Full};
use hyper::{
    HeaderMap, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderValue},
    http::request::Parts,
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::TokioIo;
use time::OffsetDateTime;
use tokio::{net::TcpListener, sync::watch};

use crate::{
    faults::{
        self, Committed, Fault, Faults, TARGET_PREFIX, Transaction, error_body,
        partition_throttle_body, table_throttle_body, throttled_cancellation_body,
    },
    gsi,
    limiter::{Admission, Limiter, Upstream},
    partitions::{Charged, Kind, Partition, PartitionLimits, throttling_reasons},
    stats::{Counters, Stats},
};

/// The headers that describe one hop's connection or framing, not the
/// request: each side sets its own.
const HOP_BY_HOP: [&str; 5] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "upgrade",
];

/// A running proxy. Dropping it stops it: the accept loop and every open
/// connection end.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// Never sent on: dropping it is the stop signal.
    _stop: watch::Sender<()>,
}

struct Shared {
    upstream: String,
    http: reqwest::Client,
    /// One generator for all connections, so that a seed fixes the sequence
    /// of decisions (the order requests arrive in is up to the client).
    state: Mutex<State>,
    counters: Counters,
    next_request_id: AtomicU64,
    /// The partition limits, when enforced.
    limiter: RwLock<Option<Arc<Limiter>>>,
}

struct State {
    faults: Faults,
    rng: fastrand::Rng,
    /// Tokens of transactions upstream committed, whose retries are replays.
    committed: Committed,
    /// Tokens of transactions held for a late commit: their retries are
    /// answered "in progress" until it is sent.
    in_flight: std::collections::HashSet<String>,
}

impl Proxy {
    /// Serves on `listener` (bind 127.0.0.1:0 for a test) and forwards to
    /// `upstream`, e.g. DynamoDB Local's `http://127.0.0.1:8000`. Fails only
    /// on an unusable listener or upstream URL.
    pub async fn start(
        listener: TcpListener,
        upstream: impl Into<String>,
        faults: Faults,
    ) -> io::Result<Proxy> {
        let addr = listener.local_addr()?;
        let upstream = upstream.into().trim_end_matches('/').to_owned();
        reqwest::Url::parse(&upstream).map_err(|err| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("upstream {upstream:?}: {err}"),
            )
        })?;
        // Upstream is a local process: no system proxy, no request timeout
        // of our own (the SDK's attempt timeout is the one that matters).
        let http = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .build()
            .map_err(io::Error::other)?;
        let shared = Arc::new(Shared {
            upstream,
            http,
            state: Mutex::new(State {
                rng: fastrand::Rng::with_seed(faults.seed),
                faults,
                committed: Committed::default(),
                in_flight: std::collections::HashSet::new(),
            }),
            counters: Counters::default(),
            next_request_id: AtomicU64::new(1),
            limiter: RwLock::new(None),
        });
        let (stop, stopped) = watch::channel(());
        tokio::spawn(serve(listener, shared.clone(), stopped));
        Ok(Proxy {
            addr,
            shared,
            _stop: stop,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint URL to give the SDK client.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }

    pub fn faults(&self) -> Faults {
        self.shared.state().faults.clone()
    }

    /// Transactions held for a late commit, not sent yet.
    pub fn late_commits_pending(&self) -> usize {
        self.shared.state().in_flight.len()
    }

    /// Enforces DynamoDB's per-partition throughput, scaled by `limits`
    /// (`None`: no limits, DynamoDB Local's behaviour), from the next request
    /// on, with every partition's allowance full: see
    /// [`crate::partitions`].
    pub fn set_partition_limits(&self, limits: Option<PartitionLimits>) {
        *self
            .shared
            .limiter
            .write()
            .unwrap_or_else(PoisonError::into_inner) = limits.map(|l| Arc::new(Limiter::new(l)));
    }

    /// What the partition of `key` (of `table`, or of its `index`) has left
    /// of its `kind` allowance now, in units: below zero once a charge took
    /// more than it had. `None` without limits, or for a partition never
    /// charged (its allowance is full).
    pub fn allowance(
        &self,
        table: &str,
        index: Option<&str>,
        key: &str,
        kind: Kind,
    ) -> Option<f64> {
        let partition = Partition {
            table: table.to_owned(),
            index: index.map(str::to_owned),
            key: key.to_owned(),
        };
        self.shared.limiter()?.allowance(&partition, kind)
    }

    /// The units the partition limits charged since they were set or this
    /// was last called (which starts the totals again); `None` without
    /// limits.
    pub fn take_charged(&self) -> Option<Charged> {
        Some(self.shared.limiter()?.take_charged())
    }

    /// The partition limits in force, if any.
    pub fn partition_limits(&self) -> Option<PartitionLimits> {
        self.shared.limiter().map(|l| l.limits())
    }

    /// Changes the faults from the next request on (switch them off to let a
    /// workload drain, say), and reseeds the generator with `faults.seed`.
    pub fn set_faults(&self, faults: Faults) {
        let mut state = self.shared.state();
        state.rng = fastrand::Rng::with_seed(faults.seed);
        state.faults = faults;
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<()>) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.changed() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(err) => {
                // Out of file descriptors under load, say: a later accept may work.
                tracing::warn!(%err, "hostile proxy: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(shared.answer(req).await) }
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = stop.changed() => {}
            }
        });
    }
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing panics while holding the lock; if something did, the state
        // is still a valid configuration and generator.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn answer(self: Arc<Self>, req: Request<Incoming>) -> Response<Full<Bytes>> {
        self.counters.request();
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(body) => body.to_bytes(),
            Err(err) => {
                let message = format!("hostile proxy: cannot read the request: {err}");
                return self.error(StatusCode::BAD_REQUEST, "SerializationException", &message);
            }
        };
        let target = parts
            .headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let operation = target.strip_prefix(TARGET_PREFIX);
        let transaction = match operation {
            Some("TransactWriteItems") => Transaction::read(&body),
            _ => Transaction::default(),
        };
        let (fault, gsi_lag) = match operation {
            Some(operation) => self.decide(operation, &transaction),
            None => (None, Duration::ZERO),
        };
        if fault == Some(Fault::LateCommit)
            && let Some(token) = transaction.token.clone()
        {
            self.commit_late(parts.clone(), body, token);
            return self.inject(operation.unwrap_or_default(), Fault::LateCommit);
        }
        if let Some(fault) = fault.filter(|f| !matches!(f, Fault::LostResponse | Fault::LateCommit))
        {
            return self.inject(operation.unwrap_or_default(), fault);
        }

        // The partitions' allowance: a request refused goes no further; one
        // admitted is charged the rest of its cost once upstream answers.
        let limiter = self.limiter();
        let side_calls = SideCalls {
            shared: &self,
            parts: &parts,
        };
        let mut metered = None;
        let mut body = body;
        let mut unprocessed = None;
        if let (Some(limiter), Some(operation)) = (&limiter, operation) {
            match limiter.admit(&side_calls, operation, &body).await {
                Admission::Free => {}
                Admission::Admitted(pending) => metered = Some(pending),
                Admission::Partial {
                    pending,
                    request,
                    unprocessed: left,
                } => {
                    self.counters.partition_throttle();
                    tracing::debug!(operation, ?left, "hostile proxy: a batch read in part");
                    metered = Some(pending);
                    body = Bytes::from(request.to_string());
                    unprocessed = Some(left);
                }
                Admission::Refused {
                    refused,
                    transaction,
                } => {
                    self.counters.partition_throttle();
                    tracing::debug!(operation, ?refused, "hostile proxy: partition throttled");
                    let whole_table = refused.iter().any(|c| c.partition.is_whole_table());
                    // Past the table's ceiling, any request (a transaction
                    // too) is refused whole, with DynamoDB's reasons; past a
                    // partition's, a transaction's cancellation names the
                    // items refused and a single call gets the reasons.
                    let body = match transaction {
                        _ if whole_table => table_throttle_body(throttling_reasons(&refused)),
                        Some(items) => {
                            let mut throttled: Vec<usize> =
                                refused.iter().map(|c| c.item).collect();
                            throttled.dedup();
                            throttled_cancellation_body(items, &throttled)
                        }
                        None => partition_throttle_body(throttling_reasons(&refused)),
                    };
                    return self.respond(StatusCode::BAD_REQUEST, body);
                }
            }
        }

        let (status, headers, answer) = match self.forward(&parts, body.clone()).await {
            Ok(forwarded) => forwarded,
            Err(err) => {
                self.counters.upstream_failure();
                tracing::warn!(%err, upstream = %self.upstream, "hostile proxy: upstream failed");
                let message = format!("hostile proxy: upstream {} failed: {err}", self.upstream);
                return self.error(StatusCode::BAD_GATEWAY, "InternalServerError", &message);
            }
        };
        self.counters.forwarded(match operation {
            Some(operation) => operation,
            None if target.is_empty() => "(none)",
            None => target,
        });

        if let (Some(limiter), Some(pending), StatusCode::OK) = (&limiter, metered, status) {
            limiter.settle(&side_calls, pending, &answer).await;
        }
        if let (Some(token), StatusCode::OK) = (transaction.token, status) {
            self.state().committed.insert(token);
        }
        if fault == Some(Fault::LostResponse) && status == StatusCode::OK {
            return self.inject(operation.unwrap_or_default(), Fault::LostResponse);
        }
        if let (Some(left), StatusCode::OK) = (&unprocessed, status) {
            // Keys left out of the request must come back unprocessed, or
            // the client takes them for missing items: an answer this cannot
            // add them to is a throttle, as a refusal whole would have been.
            return match crate::limiter::with_unprocessed(&answer, left) {
                Some(answered) => passed_back(status, headers, Bytes::from(answered), true),
                None => self.respond(
                    StatusCode::BAD_REQUEST,
                    partition_throttle_body(serde_json::json!([
                        { "reason": "TableReadKeyRangeThroughputExceeded" }
                    ])),
                ),
            };
        }
        if operation == Some("Query")
            && !gsi_lag.is_zero()
            && status == StatusCode::OK
            && gsi::queries_an_index(&body)
            && let Some((lagged, hidden)) =
                gsi::hide_recent(&answer, gsi_lag, OffsetDateTime::now_utc())
        {
            self.counters.gsi_hidden(hidden);
            return passed_back(status, headers, Bytes::from(lagged), true);
        }
        passed_back(status, headers, answer, false)
    }

    fn limiter(&self) -> Option<Arc<Limiter>> {
        self.limiter
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The fault for this request and the GSI lag, under the lock.
    fn decide(&self, operation: &str, transaction: &Transaction) -> (Option<Fault>, Duration) {
        let mut state = self.state();
        let State {
            faults,
            rng,
            committed,
            in_flight,
        } = &mut *state;
        let token = transaction.token.as_deref();
        if token.is_some_and(|token| in_flight.contains(token)) {
            return (Some(Fault::InProgress), faults.gsi_lag);
        }
        let replay = token.is_some_and(|token| committed.contains(token));
        let fault = faults::decide(rng, faults, operation, transaction.items, replay);
        (fault, faults.gsi_lag)
    }

    /// A late commit: the transaction `body` (token `token`) is sent on
    /// [`Faults::late_commit_delay`] from now, after its client gave up on
    /// it; until then its token is in flight.
    fn commit_late(self: &Arc<Self>, parts: Parts, body: Bytes, token: String) {
        let delay = {
            let mut state = self.state();
            state.in_flight.insert(token.clone());
            state.faults.late_commit_delay
        };
        let shared = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let sent = shared.forward(&parts, body).await;
            let mut state = shared.state();
            state.in_flight.remove(&token);
            match sent {
                Ok((StatusCode::OK, _, _)) => state.committed.insert(token),
                Ok((status, _, answer)) => tracing::debug!(
                    %status,
                    answer = %String::from_utf8_lossy(&answer),
                    "hostile proxy: a late commit was refused"
                ),
                Err(err) => tracing::warn!(%err, "hostile proxy: a late commit failed"),
            }
        });
    }

    fn inject(&self, operation: &str, fault: Fault) -> Response<Full<Bytes>> {
        self.counters.fault(fault);
        tracing::debug!(operation, ?fault, "hostile proxy: fault injected");
        let (status, body) = fault.response();
        self.respond(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            body,
        )
    }

    fn error(&self, status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
        self.respond(status, error_body(code, message))
    }

    /// A response of the proxy's own, shaped like DynamoDB's.
    fn respond(&self, status: StatusCode, body: String) -> Response<Full<Bytes>> {
        let id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-amz-json-1.0"),
        );
        if let Ok(id) = HeaderValue::from_str(&format!("HOSTILE{id:045}")) {
            headers.insert("x-amzn-requestid", id);
        }
        response
    }

    /// Sends the request on as it came (method, path, headers, body) and
    /// reads the whole answer.
    async fn forward(
        &self,
        parts: &Parts,
        body: Bytes,
    ) -> Result<(StatusCode, HeaderMap, Bytes), reqwest::Error> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut headers = parts.headers.clone();
        headers.remove(HOST);
        headers.remove(CONTENT_LENGTH);
        for name in HOP_BY_HOP {
            headers.remove(name);
        }
        let response = self
            .http
            .request(parts.method.clone(), format!("{}{path}", self.upstream))
            .headers(headers)
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await?;
        Ok((status, headers, body))
    }
}

/// The limiter's own requests to upstream, with the client's credentials
/// (DynamoDB Local keys its databases by them unless `-sharedDb`).
struct SideCalls<'a> {
    shared: &'a Shared,
    parts: &'a Parts,
}

impl Upstream for SideCalls<'_> {
    async fn call(&self, operation: &str, request: serde_json::Value) -> Option<serde_json::Value> {
        let mut sent = self
            .shared
            .http
            .post(format!("{}/", self.shared.upstream))
            .header(CONTENT_TYPE, "application/x-amz-json-1.0")
            .header("x-amz-target", format!("{TARGET_PREFIX}{operation}"))
            .body(request.to_string());
        for name in ["authorization", "x-amz-date"] {
            if let Some(value) = self.parts.headers.get(name) {
                sent = sent.header(name, value);
            }
        }
        let answer = sent.send().await.ok()?;
        if !answer.status().is_success() {
            tracing::warn!(operation, status = %answer.status(), "hostile proxy: the limiter's read failed");
            return None;
        }
        serde_json::from_slice(&answer.bytes().await.ok()?).ok()
    }
}

/// Upstream's answer for the client. `content-length` is always recomputed
/// (hyper sets it from the body); a `modified` body also loses upstream's
/// `x-amz-crc32`, which would no longer match.
fn passed_back(
    status: StatusCode,
    mut headers: HeaderMap,
    body: Bytes,
    modified: bool,
) -> Response<Full<Bytes>> {
    headers.remove(CONTENT_LENGTH);
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    if modified {
        headers.remove("x-amz-crc32");
    }
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
