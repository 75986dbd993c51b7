//! The harness: a fresh table per test in the DynamoDB Local that infra/test.sh
//! started, served over HTTP on a loopback port by `local::local_gateway`, the
//! stand-in for API Gateway (each request becomes the HTTP API's payload-2.0
//! event, parsed by lambda_http as a Lambda would).

use std::collections::HashMap;

use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_dynamodb::{
    Client,
    config::{BehaviorVersion, Credentials, Region, SharedHttpClient},
    types::AttributeValue,
};
use blog::{
    api::{App, FeedCache},
    audit::{AuditOptions, Report},
    fanout,
    ids::{CommentId, PostId, UserId},
    keys,
    store::{Store, meter::CapacityMeter, table},
};
use local::{
    local_gateway,
    stream_poller::{StreamPoller, mapping::StreamMapping},
};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// A header the stand-in turns into a verified JWT `sub` claim, as API
/// Gateway's JWT authorizer would after checking a real token.
pub const JWT_SUB: &str = "x-test-jwt-sub";

/// The DynamoDB Local this test uses. infra/test.sh starts several (each
/// serves its requests one at a time) and lists them in
/// `DYNAMODB_ENDPOINTS`. A test keeps to one, so that
/// its tables, streams and proxies meet: the first call on its thread (libtest
/// runs each test on a thread of its own) takes the instance with the fewest
/// tests running, then the fewest served, and the thread's end gives it back.
pub fn endpoint() -> String {
    CHOSEN.with(|chosen| {
        chosen
            .get_or_init(|| {
                let listed = std::env::var("DYNAMODB_ENDPOINTS")
                    .or_else(|_| std::env::var("DYNAMODB_ENDPOINT"))
                    .expect(
                        "DYNAMODB_ENDPOINT is not set: run the integration tests through infra/test.sh",
                    );
                let endpoints: Vec<&str> = listed.split(',').filter(|e| !e.is_empty()).collect();
                let mut load = LOAD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                load.resize(endpoints.len(), (0, 0));
                let index = (0..endpoints.len())
                    .min_by_key(|&i| load[i])
                    .unwrap_or_default();
                load[index].0 += 1;
                load[index].1 += 1;
                Chosen {
                    index,
                    endpoint: endpoints[index].to_owned(),
                }
            })
            .endpoint
            .clone()
    })
}

/// Per instance of `DYNAMODB_ENDPOINTS`: the tests running on it, and all
/// it has served.
static LOAD: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());

thread_local! {
    static CHOSEN: std::cell::OnceCell<Chosen> = const { std::cell::OnceCell::new() };
}

/// The instance a test's thread took, given back when the thread ends.
struct Chosen {
    index: usize,
    endpoint: String,
}

impl Drop for Chosen {
    fn drop(&mut self) {
        let mut load = LOAD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((running, _)) = load.get_mut(self.index) {
            *running = running.saturating_sub(1);
        }
    }
}

/// A fault-injecting proxy (the `hostile` crate) in front of this test's
/// DynamoDB Local, with `faults` to start with.
pub async fn proxy(faults: hostile::Faults) -> hostile::Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    hostile::Proxy::start(listener, endpoint(), faults)
        .await
        .expect("proxy")
}

/// A test app whose DynamoDB is behind a fault-injecting proxy (no faults
/// yet), its calls retried by `backoff`.
/// The suite's store on `client` and `table`: as deployed, but no post turns
/// hot by the rate its likes and comments come at (the suite likes posts far
/// faster than anyone would, on a DynamoDB that takes any rate on one key);
/// the viral tests turn it on ([`behind_proxy_with`]), scaled with the
/// partition limits they enforce.
pub fn quiet_store(client: Client, table: impl Into<String>) -> Store {
    Store::new(client, table).with_hot_rate(None)
}

/// [`behind_proxy`], its store then set up by `settings`.
pub async fn behind_proxy_with(
    backoff: blog::store::Backoff,
    settings: impl FnOnce(Store) -> Store,
) -> (hostile::Proxy, TestApi) {
    let proxy = proxy(hostile::Faults::none()).await;
    let api =
        TestApi::start_behind_with(&proxy.url(), backoff, std::time::Duration::ZERO, settings)
            .await;
    (proxy, api)
}

pub async fn behind_proxy(backoff: blog::store::Backoff) -> (hostile::Proxy, TestApi) {
    let proxy = proxy(hostile::Faults::none()).await;
    let api = TestApi::start_behind(&proxy.url(), backoff, std::time::Duration::ZERO).await;
    (proxy, api)
}

/// The deployed retry budget's attempts (8), with waits of a millisecond or
/// two so that a test that exhausts it stays quick.
pub fn fast_full_backoff() -> blog::store::Backoff {
    blog::store::Backoff {
        base: std::time::Duration::from_millis(1),
        cap: std::time::Duration::from_millis(2),
        ..blog::store::Backoff::default()
    }
}

pub fn client(endpoint: &str, meter: &CapacityMeter, http: Option<SharedHttpClient>) -> Client {
    let mut config = aws_sdk_dynamodb::Config::builder();
    if let Some(http) = http {
        config = config.http_client(http);
    }
    // As deployed: the SDK's retries off, the store's backoff the one retry
    // layer (it also retries a connection DynamoDB Local was slow to accept).
    let config = config
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .interceptor(meter.clone())
        .behavior_version(BehaviorVersion::latest())
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .timeout_config(
            aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
                .connect_timeout(std::time::Duration::from_secs(2))
                // A DynamoDB Local busy with other tests' tables and scans
                // can hold a 25-item batch for over 10 s.
                .operation_timeout(std::time::Duration::from_secs(30))
                .build(),
        )
        .build();
    Client::from_conf(config)
}

/// Creates a table with a fresh name and returns the name.
pub async fn new_table(client: &Client) -> String {
    let name = format!("test-{}", ulid::Ulid::generate());
    table::create_if_missing(client, &name)
        .await
        .expect("create test table");
    name
}

pub struct TestApi {
    pub base: String,
    pub http: reqwest::Client,
    pub app: &'static App,
    /// Every DynamoDB call the API made, with its consumed capacity.
    pub meter: CapacityMeter,
}

impl TestApi {
    /// A new table and a gateway in front of it.
    pub async fn start() -> Self {
        Self::start_full(None).await
    }

    /// The full audit of the table, repairing what it finds if `repair`.
    pub async fn audit(&self, repair: bool) -> Report {
        self.app.store.admin().audit(repair).await.expect("audit")
    }

    /// The full audit with `options` (segments, page size, repair).
    pub async fn audit_with(&self, options: &AuditOptions) -> Report {
        self.app
            .store
            .admin()
            .audit_with(options)
            .await
            .expect("audit")
    }

    /// Makes `post` hot, as the first throttled like or comment would
    /// (DynamoDB Local throttles nothing).
    pub async fn make_hot(&self, post: &str) {
        let post = post_id(post);
        let hot = self.app.store.requests().make_hot(&post).await;
        hot.expect("hot");
    }

    /// A new table behind a client that sends its requests through `http`.
    pub async fn start_with_http(http: SharedHttpClient) -> Self {
        Self::start_full(Some(http)).await
    }

    async fn start_full(http: Option<SharedHttpClient>) -> Self {
        let meter = CapacityMeter::default();
        let client = client(&endpoint(), &meter, http);
        let name = new_table(&client).await;
        Self::serve(quiet_store(client, name), meter).await
    }

    /// A new table, its store set up by `settings` (a smaller feed, a
    /// delivery page, a pull threshold).
    pub async fn start_with(settings: impl FnOnce(Store) -> Store) -> Self {
        let meter = CapacityMeter::default();
        let client = client(&endpoint(), &meter, None);
        let name = new_table(&client).await;
        Self::serve(settings(quiet_store(client, name)), meter).await
    }

    /// A new table whose feed keeps only `capacity` posts.
    pub async fn start_with_feed_capacity(capacity: usize) -> Self {
        Self::start_with(|store| store.with_feed_capacity(capacity)).await
    }

    /// A new table whose posts' deliveries walk `page` followers a page.
    pub async fn start_with_delivery_page(page: usize) -> Self {
        Self::start_with(|store| store.with_delivery_page(page)).await
    }

    /// A new table in the DynamoDB at `endpoint`.
    pub async fn start_at(endpoint: &str) -> Self {
        let meter = CapacityMeter::default();
        let client = client(endpoint, &meter, None);
        let name = new_table(&client).await;
        Self::serve(quiet_store(client, name), meter).await
    }

    /// A new table in the DynamoDB at `endpoint` (a hostile proxy), through a
    /// client that retries as the deployed one does (not at all: the store
    /// does), a store that retries by `backoff`, and a rename fan-out that
    /// allows GSI1 `gsi_lag_bound` to catch up.
    pub async fn start_behind(
        endpoint: &str,
        backoff: blog::store::Backoff,
        gsi_lag_bound: std::time::Duration,
    ) -> Self {
        Self::start_behind_with(endpoint, backoff, gsi_lag_bound, |store| store).await
    }

    /// [`TestApi::start_behind`], its store then set up by `settings`.
    pub async fn start_behind_with(
        endpoint: &str,
        backoff: blog::store::Backoff,
        gsi_lag_bound: std::time::Duration,
        settings: impl FnOnce(Store) -> Store,
    ) -> Self {
        let meter = CapacityMeter::default();
        let client = client(endpoint, &meter, None);
        let name = new_table(&client).await;
        let store = quiet_store(client, name)
            .with_backoff(backoff)
            .with_gsi_lag_bound(gsi_lag_bound);
        Self::serve(settings(store), meter).await
    }

    /// A gateway whose DynamoDB is at `endpoint`, with no table set up.
    pub async fn start_against(endpoint: &str) -> Self {
        let meter = CapacityMeter::default();
        Self::serve(
            quiet_store(client(endpoint, &meter, None), "unreachable"),
            meter,
        )
        .await
    }

    /// A new table, and a `get-feed` that keeps the feed it read for `ttl`,
    /// as deployed.
    pub async fn start_with_feed_cache(cache: FeedCache) -> Self {
        let meter = CapacityMeter::default();
        let client = client(&endpoint(), &meter, None);
        let name = new_table(&client).await;
        Self::serve_with(quiet_store(client, name), meter, cache).await
    }

    async fn serve(store: Store, meter: CapacityMeter) -> Self {
        // Tests read the feed right after changing it; the cache has its own
        // test.
        Self::serve_with(store, meter, FeedCache::off()).await
    }

    async fn serve_with(store: Store, meter: CapacityMeter, feed_cache: FeedCache) -> Self {
        // DynamoDB Local's GSI is synchronous: no wait for it to catch up
        // (the hostile tests give their own bound).
        let store = if store.gsi_lag_bound() == blog::store::GSI_LAG_BOUND {
            store.with_gsi_lag_bound(std::time::Duration::ZERO)
        } else {
            store
        };
        let app: &'static App = Box::leak(Box::new(App { store, feed_cache }));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(local_gateway::serve(listener, app, JWT_SUB));
        Self {
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
            app,
            meter,
        }
    }

    /// The store the requests are served with.
    pub fn store(&self) -> &Store {
        &self.app.store
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Sends a request as `user` (the JWT `sub` the authorizer would hand the
    /// function) with an optional JSON body.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        user: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method.parse().expect("method"), self.url(path));
        if let Some(user) = user {
            req = req.header(JWT_SUB, user);
        }
        if let Some(body) = body {
            req = req.body(body.to_string());
        }
        let (status, reply) = decode(req.send().await.expect("send")).await;
        crate::contract::check_answer(method, path, status, &reply);
        (status, reply)
    }

    /// [`Self::call`] with an `Idempotency-Key` when `key` is given; the
    /// answer, and whether it says it was given again
    /// (`Idempotent-Replayed: true`).
    pub async fn call_keyed(
        &self,
        method: &str,
        path: &str,
        user: Option<&str>,
        key: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, Value, bool) {
        let mut req = self
            .http
            .request(method.parse().expect("method"), self.url(path));
        if let Some(user) = user {
            req = req.header(JWT_SUB, user);
        }
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        if let Some(body) = body {
            req = req.body(body.to_string());
        }
        let response = req.send().await.expect("send");
        let replayed = response
            .headers()
            .get(blog::api::REPLAYED_HEADER)
            .is_some_and(|v| v == "true");
        let (status, reply) = decode(response).await;
        crate::contract::check_answer(method, path, status, &reply);
        (status, reply, replayed)
    }

    /// Sends a request with the given headers, e.g. a verified JWT `sub`.
    pub async fn call_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method.parse().expect("method"), self.url(path));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(body) = body {
            req = req.body(body.to_string());
        }
        let (status, reply) = decode(req.send().await.expect("send")).await;
        crate::contract::check_answer(method, path, status, &reply);
        (status, reply)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None, None).await
    }

    /// Creates a user and returns its id.
    pub async fn user(&self, username: &str) -> String {
        let id = format!("user-{}", ulid::Ulid::generate());
        let (status, body) = self
            .call(
                "POST",
                "/users",
                Some(&id),
                Some(json!({ "username": username })),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        id
    }

    pub async fn user_named(&self, username: String) -> String {
        self.user(&username).await
    }

    /// `user`'s profile item, read strongly from the table (it must exist).
    pub async fn profile(&self, user: &str) -> blog::store::items::user::UserItem {
        let key = keys::profile(&user_id(user)).item();
        let found = self.app.store.db().get_entity(key, true);
        found.await.expect("read").expect("profile")
    }

    /// Creates a post by `user` and returns its id.
    pub async fn post(&self, user: &str, title: impl Into<String>, content: &str) -> String {
        let title: String = title.into();
        let (status, body) = self
            .call(
                "POST",
                "/posts",
                Some(user),
                Some(json!({ "title": title, "content": content })),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["postId"].as_str().expect("postId").to_owned()
    }

    /// Likes `post` as `user` (a first like: 201) and returns the reply.
    pub async fn like(&self, user: &str, post: &str) -> Value {
        let (status, body) = self
            .call("POST", &format!("/posts/{post}/likes"), Some(user), None)
            .await;
        assert_eq!(status, 201, "like {post} as {user}: {body}");
        body
    }

    /// Renames `user` to `username` (the user themself) and returns the
    /// profile.
    pub async fn rename(&self, user: &str, username: &str) -> Value {
        let (status, body) = self
            .call(
                "PUT",
                &format!("/users/{user}"),
                Some(user),
                Some(json!({ "username": username })),
            )
            .await;
        assert_eq!(status, 200, "rename {user} to {username}: {body}");
        body
    }

    /// `follower` follows `followed` (a new follow: 201).
    pub async fn follow(&self, follower: &str, followed: &str) -> Value {
        let path = format!("/users/{followed}/followers");
        let (status, body) = self.call("POST", &path, Some(follower), None).await;
        assert_eq!(status, 201, "{follower} follows {followed}: {body}");
        body
    }

    /// Comments on `post` as `user` and returns the comment's id.
    pub async fn comment(&self, user: &str, post: &str, content: &str) -> String {
        let (status, body) = self
            .call(
                "POST",
                &format!("/posts/{post}/comments"),
                Some(user),
                Some(json!({ "content": content })),
            )
            .await;
        assert_eq!(status, 201, "comment on {post} as {user}: {body}");
        body["commentId"].as_str().expect("commentId").to_owned()
    }
}

/// Loads `items` in bulk into the test's table, as the API and the fan-out
/// would have left them. Unconditional puts, so a batch that timed out (a
/// DynamoDB Local busy with the other tests' tables) is simply sent again.
pub async fn load(api: &TestApi, items: Vec<blog::store::Item>) {
    let store = &api.app.store;
    for attempt in 1..=3 {
        match blog::store::bulk::put_items(store.client(), store.table(), items.clone()).await {
            Ok(()) => return,
            Err(err) if attempt < 3 => eprintln!("bulk load, attempt {attempt}: {err}"),
            Err(err) => panic!("bulk load: {err}"),
        }
    }
}

/// A post with `content` and its replies, as the API and the fan-out would
/// have left them, for [`load`].
pub fn thread(
    post: blog::store::items::post::PostItem,
    content: &str,
    comments: Vec<blog::store::items::comment::CommentItem>,
    likes: Vec<blog::store::items::like::LikeItem>,
) -> blog::store::bulk::PostWithReplies {
    let content =
        blog::store::items::post::PostContentItem::new(post.post_id, content, &post.created_at);
    blog::store::bulk::PostWithReplies::new(post, content, comments, likes)
}

/// A post's id from a reply, typed as [`blog::keys`] takes it.
pub fn post_id(id: &str) -> PostId {
    PostId::parse(id).expect("post id")
}

/// A user's id, typed as [`blog::keys`] takes it.
pub fn user_id(id: &str) -> UserId {
    UserId::parse(id).expect("user id")
}

/// A comment's id from a reply, typed as [`blog::keys`] takes it.
pub fn comment_id(id: &str) -> CommentId {
    CommentId::parse(id).expect("comment id")
}

/// A DynamoDB Streams client of the DynamoDB at `endpoint`.
pub fn streams_client(endpoint: &str) -> aws_sdk_dynamodbstreams::Client {
    aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .build(),
    )
}

/// The status and the JSON body; `Null` for a 204's or a 304's empty body;
/// an Atom document as a string (any other answer must carry JSON).
pub async fn decode(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let atom = resp
        .headers()
        .get("content-type")
        .is_some_and(|t| t == blog::api::ATOM);
    let text = resp.text().await.expect("body");
    if status == 204 || status == 304 {
        assert_eq!(text, "", "a {status} has no body");
        return (status, Value::Null);
    }
    if atom && status == 200 {
        return (status, Value::String(text));
    }
    let body =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("response is not JSON: {text:?}"));
    (status, body)
}

impl TestApi {
    /// A poller of this test's table that hands batches to the fan-out in this
    /// process, as Lambda would: the records go through Lambda's JSON event.
    pub fn poller(&self) -> StreamPoller {
        self.poller_saving_to(None)
    }

    /// A poller that batches as the deployed mapping does (template.yaml's
    /// `MaximumBatchingWindowInSeconds`; the others take a batch as soon as
    /// records come, which at a scaled partition limit writes a hot post's
    /// counts far more often than Lambda would).
    pub fn poller_as_deployed(&self) -> StreamPoller {
        let mut mapping = stream_mapping();
        mapping.batching_window = StreamMapping::of_repository()
            .expect("template.yaml's stream mapping")
            .batching_window;
        self.poller_with(mapping, &endpoint(), None)
    }

    /// A poller that keeps its progress in `checkpoint`.
    pub fn poller_with_checkpoint(&self, checkpoint: &std::path::Path) -> StreamPoller {
        self.poller_saving_to(Some(checkpoint.to_path_buf()))
    }

    fn poller_saving_to(&self, checkpoint: Option<std::path::PathBuf>) -> StreamPoller {
        self.poller_of(&endpoint(), checkpoint)
    }

    /// A poller reading the stream of the DynamoDB at `endpoint`.
    pub fn poller_of(
        &self,
        endpoint: &str,
        checkpoint: Option<std::path::PathBuf>,
    ) -> StreamPoller {
        self.poller_with(stream_mapping(), endpoint, checkpoint)
    }

    /// A poller of this test's table doing what `mapping` does.
    pub fn poller_with(
        &self,
        mapping: StreamMapping,
        endpoint: &str,
        checkpoint: Option<std::path::PathBuf>,
    ) -> StreamPoller {
        StreamPoller::new(
            self.app.store.clone(),
            streams_client(endpoint),
            mapping,
            checkpoint,
        )
    }

    /// Runs the fan-out in the background through `poller`, as Lambda would
    /// alongside the API, until [`RunningFanOut::stop`].
    pub fn run_fan_out(&self, poller: StreamPoller) -> RunningFanOut {
        self.run_fan_out_on(poller, self.app.store.clone())
    }

    /// [`TestApi::run_fan_out`] with a store of its own (the fan-out's
    /// Lambda, set up otherwise than the requests').
    pub fn run_fan_out_on(&self, poller: StreamPoller, store: Store) -> RunningFanOut {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let deliver = |event| {
                let store = store.clone();
                async move { Ok(fanout::handle(&store, event).await) }
            };
            poller
                .run(deliver, std::time::Duration::from_millis(20), async {
                    let _ = stopped.await;
                })
                .await;
        });
        RunningFanOut { stop, task }
    }

    /// Every record the table's stream holds (the filtered ones too), as
    /// Lambda's event carries them, without applying any.
    pub async fn stream_records(&self) -> Vec<aws_lambda_events::event::dynamodb::EventRecord> {
        let records = std::sync::Mutex::new(Vec::new());
        let collect = |event: aws_lambda_events::event::dynamodb::Event| {
            records.lock().expect("lock").extend(event.records);
            async { Ok(Default::default()) }
        };
        let mut poller = self.poller_with(stream_mapping().unfiltered(), &endpoint(), None);
        while poller.poll_once(&collect).await.expect("read the stream") > 0 {}
        records.into_inner().expect("lock")
    }

    /// Runs the fan-out until the stream has nothing left, its own writes'
    /// records included: a bounded poll, never a fixed sleep.
    pub async fn settle(&self, poller: &mut StreamPoller) {
        let store = &self.app.store;
        let deliver = |event| async move { Ok(fanout::handle(store, event).await) };
        let mut quiet = 0;
        for _ in 0..200 {
            if poller.poll_once(&deliver).await.expect("poll the stream") > 0 {
                quiet = 0;
                continue;
            }
            // DynamoDB Local appends a write to its stream a moment after the
            // write: settled means empty twice, a short pause apart.
            quiet += 1;
            if quiet == 2 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        }
        panic!("the stream did not settle after 200 polls");
    }

    /// Passes over everything the stream holds now without applying it: for
    /// data loaded in bulk as the fan-out would already have left it.
    pub async fn pass_over(&self, poller: &mut StreamPoller) {
        let deliver = |_event| async { Ok(DynamoDbEventResponse::default()) };
        let mut quiet = 0;
        while quiet < 2 {
            if poller.poll_once(&deliver).await.expect("poll the stream") > 0 {
                quiet = 0;
            } else {
                quiet += 1;
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            }
        }
    }

    /// Waits (bounded) until the stream holds at least `count` records.
    pub async fn wait_for_stream(&self, count: usize) {
        for _ in 0..200 {
            if self.stream_records().await.len() >= count {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the stream never reached {count} records");
    }
}

/// The fan-out's event source mapping as template.yaml deploys it: its
/// filters, batch size, retries, bisection, maximum record age and failure
/// destination; but no batching window, which would only make each test
/// wait for batches to fill (a batch may hold anything from one record to the
/// batch size either way; `poller.rs` tests the window itself).
pub fn stream_mapping() -> StreamMapping {
    static MAPPING: std::sync::OnceLock<StreamMapping> = std::sync::OnceLock::new();
    let mut mapping = MAPPING
        .get_or_init(|| StreamMapping::of_repository().expect("template.yaml's stream mapping"))
        .clone();
    mapping.batching_window = std::time::Duration::ZERO;
    mapping
}

/// The fan-out running in the background: see [`TestApi::run_fan_out`].
pub struct RunningFanOut {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningFanOut {
    /// Stops it once the batch in hand is done.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("the fan-out task");
    }
}

/// Every item of the test's table, for "changes nothing" assertions. A test
/// tool, not a request path: a Scan is fine here.
pub async fn table_snapshot(api: &TestApi) -> Vec<HashMap<String, AttributeValue>> {
    store_snapshot(&api.app.store).await
}

/// The items of the partitions whose key `PK` begins with `prefix`, in key
/// order (a whole key: that partition alone, but for partitions whose keys
/// extend it).
pub async fn partition_items(api: &TestApi, prefix: &str) -> Vec<HashMap<String, AttributeValue>> {
    table_snapshot(api)
        .await
        .into_iter()
        .filter(|item| {
            item.get("PK")
                .and_then(|pk| pk.as_s().ok())
                .is_some_and(|pk| pk.starts_with(prefix))
        })
        .collect()
}

/// Every item of `store`'s table, in key order.
pub async fn store_snapshot(store: &Store) -> Vec<HashMap<String, AttributeValue>> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let out = store
            .client()
            .scan()
            .table_name(store.table())
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        items.extend(out.items.unwrap_or_default());
        start = out.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    items.sort_by_key(|item| format!("{:?}{:?}", item.get(keys::PK), item.get(keys::SK)));
    items
}
