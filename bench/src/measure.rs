//! One scale's measurements: load the data set, then, for each request in each
//! model, the calls and capacity it costs (metered) and its latency (not
//! metered: the meter parses every response), beside the floor of a bare
//! GetItem; then what the fan-out spends and how far it lags.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::{Client, types::AttributeValue};
use blog::{
    api::{App, FeedCache},
    fanout,
    ids::{PostId, UserId},
    store::{
        Store,
        meter::{Call, CapacityMeter},
    },
    text::Username,
};
use fastrand::Rng;
use local::{
    billing::{Rate, Shape, Snapshot, billed_writes},
    stream_poller::{InvokeError, StreamPoller, mapping::StreamMapping},
};
use serde_json::json;

use crate::{
    dataset,
    load::{self, Loaded},
    naive::{Error, Naive, NaiveStore},
    requests::{Request, Target, event, run_naive, run_v3, v3_event},
};

/// How many times each thing is measured.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Metered runs of each read on its reference target (all cost the same).
    pub metered_reads: usize,
    /// Metered runs of each command, on fresh targets.
    pub metered_commands: usize,
    /// Timed runs of each read (random targets) and of the floor.
    pub timed_reads: usize,
    pub timed_commands: usize,
    /// The most time one request of a naive model may take in all, as V1's
    /// scans at 10×S take seconds each; at least one run is made.
    pub v1_budget: Duration,
    pub floor_runs: usize,
    /// Posts whose way into the feed is timed (0: skip).
    pub lag_samples: usize,
}

/// The models measured: the seeds' three, with V1 twice (by scanning, and
/// with the indexes the seeds' V1 had in Cosmos DB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    V1,
    V1Indexed,
    V2,
    V3,
}

impl Model {
    pub const ALL: [Model; 4] = [Model::V1, Model::V1Indexed, Model::V2, Model::V3];

    pub fn label(self) -> &'static str {
        match self {
            Model::V1 => "V1, scan",
            Model::V1Indexed => "V1, GSIs",
            Model::V2 => "V2",
            Model::V3 => "V3",
        }
    }

    /// Whether this model answers `request`: the naive models answer only the
    /// seeds' ten.
    pub fn answers(self, request: Request) -> bool {
        self == Model::V3 || request.in_seeds()
    }

    fn naive(self) -> Option<Naive> {
        match self {
            Model::V1 => Some(Naive::Scan),
            Model::V1Indexed => Some(Naive::Indexed),
            Model::V2 => Some(Naive::Copied),
            Model::V3 => None,
        }
    }
}

/// Write units of a command as DynamoDB bills them (see [`local::billing`]),
/// per command: its own writes and its fan-out's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Billed {
    pub request: f64,
    pub fanout: f64,
}

impl Billed {
    pub fn total(&self) -> f64 {
        self.request + self.fanout
    }
}

/// Latency percentiles, in milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
}

impl Stats {
    pub fn of(mut seconds: Vec<f64>) -> Self {
        seconds.sort_by(f64::total_cmp);
        let at = |q: f64| {
            // Nearest rank.
            let rank = ((q * seconds.len() as f64).ceil() as usize).clamp(1, seconds.len());
            seconds[rank - 1] * 1_000.0
        };
        if seconds.is_empty() {
            return Self::default();
        }
        Self {
            n: seconds.len(),
            p50: at(0.50),
            p99: at(0.99),
        }
    }
}

/// Mean calls and capacity units per request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cost {
    pub calls: f64,
    pub table: f64,
    pub indexes: f64,
}

impl Cost {
    pub fn per_request(calls: &[Call], requests: usize) -> Self {
        let n = requests.max(1) as f64;
        // Summing no floats gives -0.0: start from +0.0.
        let sum = |part: fn(&Call) -> f64| calls.iter().map(part).fold(0.0, |a, b| a + b);
        Self {
            calls: calls.len() as f64 / n,
            table: sum(|c| c.table) / n,
            indexes: sum(|c| c.indexes) / n,
        }
    }

    pub fn total(&self) -> f64 {
        self.table + self.indexes
    }
}

#[derive(Debug, Clone)]
pub struct Row {
    pub request: Request,
    pub model: Model,
    pub cost: Cost,
    /// The stream fan-out's calls and capacity per command (V3 only).
    pub fanout: Cost,
    /// Commands: write units as DynamoDB bills them.
    pub billed: Option<Billed>,
    pub latency: Stats,
    /// V3 reads: the same DynamoDB call, made bare on the same targets. The
    /// handler's own work is the difference.
    pub bare: Option<Stats>,
}

/// A rename: its own cost, and what the fan-out spent copying the new name.
#[derive(Debug, Clone)]
pub struct Rename {
    /// Posts, comments and likes the user wrote: the copies a rename updates.
    pub items: usize,
    pub command: Cost,
    pub fanout: Cost,
}

/// An account's erasure (`DELETE /users/{userId}`): the request, then the
/// fan-out's walk over everything the user wrote, drained to its end.
#[derive(Debug, Clone)]
pub struct Erasure {
    /// Posts, comments and likes the user wrote: what the walk erases.
    pub items: usize,
    pub command: Cost,
    pub fanout: Cost,
    /// Write units as DynamoDB bills them; the walk's at most (see
    /// `Scale::erasures`).
    pub billed: Billed,
}

/// The pages of one user's export (`GET /users/{userId}/export?limit=25`).
#[derive(Debug, Clone)]
pub struct Export {
    /// What the pages listed: posts, comments and likes.
    pub items: usize,
    pub pages: usize,
    /// Mean calls and read units per page.
    pub per_page: Cost,
    /// The costliest page.
    pub max_calls: usize,
    pub max_units: f64,
    /// Each page served in turn, unmetered.
    pub latency: Stats,
}

#[derive(Debug, Clone)]
pub struct ScaleResult {
    pub label: String,
    pub loaded: Loaded,
    pub floor: Stats,
    pub rows: Vec<Row>,
    /// C3 and C4 on a post of each of [`POST_LENGTHS`], by length.
    pub by_length: Vec<(usize, Row)>,
    pub renames: Vec<Rename>,
    /// From a post's creation to its appearance in the feed.
    pub lag: Option<Stats>,
}

/// The account requests at one scale (`blog-account-bench`).
#[derive(Debug, Clone)]
pub struct AccountResult {
    pub label: String,
    pub loaded: Loaded,
    /// The reference user's export.
    pub export: Export,
    /// The erasures of the users with the fewest posts and a median number.
    pub erasures: Vec<Erasure>,
}

impl ScaleResult {
    pub fn row(&self, request: Request, model: Model) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.request == request && r.model == model)
    }

    /// C3 or C4 on the post of `bytes`.
    pub fn by_length(&self, bytes: usize, request: Request, model: Model) -> Option<&Row> {
        self.by_length
            .iter()
            .find(|(b, r)| *b == bytes && r.request == request && r.model == model)
            .map(|(_, r)| r)
    }
}

/// The clients of one run: one bare, one metered for the requests, one metered
/// for the fan-out, so each side's calls are counted apart.
#[derive(Clone)]
pub struct Clients {
    pub plain: Client,
    pub requests: Client,
    pub request_meter: CapacityMeter,
    pub fanout: Client,
    pub fanout_meter: CapacityMeter,
    pub streams: aws_sdk_dynamodbstreams::Client,
}

impl Clients {
    /// Clients of the DynamoDB Local at `endpoint`, with its fixed credentials
    /// and patient timeouts (V1's scan pages take seconds at 10×S).
    pub async fn local(endpoint: &str) -> Self {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "local", "local", None, None, "bench",
            ))
            .region(aws_config::Region::new("us-east-1"))
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(Duration::from_secs(60))
                    .build(),
            )
            .load()
            .await;
        Self::new(&sdk, endpoint)
    }

    pub fn new(sdk: &aws_config::SdkConfig, endpoint: &str) -> Self {
        let metered = |meter: &CapacityMeter| {
            let config = aws_sdk_dynamodb::config::Builder::from(sdk)
                .endpoint_url(endpoint)
                .interceptor(meter.clone())
                .build();
            Client::from_conf(config)
        };
        let (request_meter, fanout_meter) = (CapacityMeter::default(), CapacityMeter::default());
        Self {
            plain: blog::store::dynamodb_client(sdk, Some(endpoint)),
            requests: metered(&request_meter),
            request_meter,
            fanout: metered(&fanout_meter),
            fanout_meter,
            streams: blog::store::streams_client(sdk, Some(endpoint)),
        }
    }
}

/// The tables of one scale, and how to reach them.
pub struct Scale {
    clients: Clients,
    loaded: Loaded,
    metered: App,
    plain: App,
    fanout_store: Store,
    poller: StreamPoller,
    prefix: String,
    rng: Rng,
    /// Users created by C1 that have liked nothing yet, per model: C4's likers.
    fresh_users: [Vec<UserId>; 4],
    created: usize,
}

/// Loads `users` users' data into tables named after `prefix` and measures.
pub async fn measure_scale(
    clients: &Clients,
    label: &str,
    prefix: &str,
    users: usize,
    settings: &Settings,
) -> Result<ScaleResult, Error> {
    println!("{label}: {users} users");
    let v3_table = format!("{prefix}-v3");
    let v1 = NaiveStore::new(clients.plain.clone(), prefix, Naive::Indexed);
    let v2 = NaiveStore::new(clients.plain.clone(), prefix, Naive::Copied);
    let loaded = load::load(&clients.plain, &v3_table, &v1, &v2, users).await?;
    println!(
        "  loaded {} posts, {} comments, {} likes: {} V3, {} V1 and {} V2 items in {:.0} s",
        loaded.posts,
        loaded.comments,
        loaded.likes,
        loaded.v3_items,
        loaded.v1_items,
        loaded.v2_items,
        loaded.seconds
    );
    let mut scale = Scale::new(clients, prefix, users, loaded)?;
    let mut rows = Vec::new();
    // Reads first, while the feed and the reference targets are as loaded.
    for request in Request::ALL.into_iter().filter(|r| !r.is_command()) {
        for model in Model::ALL.into_iter().filter(|m| m.answers(request)) {
            rows.push(scale.metered_read(request, model, settings).await?);
        }
    }
    for request in Request::ALL.into_iter().filter(|r| r.is_command()) {
        for model in Model::ALL.into_iter().filter(|m| m.answers(request)) {
            rows.push(scale.metered_command(request, model, settings).await?);
        }
    }
    let mut by_length = Vec::new();
    for bytes in POST_LENGTHS {
        for model in Model::ALL {
            for row in scale.on_post_of(bytes, model, settings).await? {
                by_length.push((bytes, row));
            }
        }
    }
    println!("  calls and capacity: done");
    let floor = scale.floor(settings.floor_runs).await?;
    for row in &mut rows {
        (row.latency, row.bare) = scale.timed(row.request, row.model, settings).await?;
    }
    println!("  latency: done");
    scale.drain(false).await?;
    let renamed = scale.renamed_users();
    let renames = scale.renames(&renamed).await?;
    let lag = match settings.lag_samples {
        0 => None,
        n => Some(scale.lag(n).await?),
    };
    Ok(ScaleResult {
        label: label.to_owned(),
        loaded: scale.loaded,
        floor,
        rows,
        by_length,
        renames,
        lag,
    })
}

/// Loads `users` users' data into the V3 table alone (named after `prefix`),
/// then measures the reference user's export (`timed_runs` pages timed) and
/// the erasures of the users with the fewest posts and a median number.
pub async fn measure_account(
    clients: &Clients,
    label: &str,
    prefix: &str,
    users: usize,
    timed_runs: usize,
) -> Result<AccountResult, Error> {
    println!("{label}: {users} users");
    let loaded = load::load_v3(&clients.plain, &format!("{prefix}-v3"), users).await?;
    println!(
        "  loaded {} posts, {} comments, {} likes: {} items in {:.0} s",
        loaded.posts, loaded.comments, loaded.likes, loaded.v3_items, loaded.seconds
    );
    let mut scale = Scale::new(clients, prefix, users, loaded)?;
    let export = scale.export(timed_runs).await?;
    println!("  export: done");
    let users = scale.renamed_users();
    let erasures = scale.erasures(&users[..2]).await?;
    println!("  erasures: done");
    Ok(AccountResult {
        label: label.to_owned(),
        loaded: scale.loaded,
        export,
        erasures,
    })
}

/// The fan-out's event source mapping as template.yaml deploys it, but for
/// its batching window: the benchmark measures the requests and the fan-out's
/// own work, not the time a batch waits to fill.
pub fn fan_out_mapping() -> Result<StreamMapping, Error> {
    let mut mapping = StreamMapping::of_repository()?;
    mapping.batching_window = Duration::ZERO;
    Ok(mapping)
}

impl Scale {
    /// The V3 table of `prefix`, loaded as `loaded` says, with its clients
    /// and a stream poller at the stream's start.
    fn new(clients: &Clients, prefix: &str, users: usize, loaded: Loaded) -> Result<Self, Error> {
        let v3_table = format!("{prefix}-v3");
        let app = |client: &Client| App {
            store: Store::new(client.clone(), &v3_table),
            // Each Q6 measured is the Query it makes, not a cache hit.
            feed_cache: FeedCache::off(),
        };
        Ok(Self {
            clients: clients.clone(),
            metered: app(&clients.requests),
            plain: app(&clients.plain),
            fanout_store: Store::new(clients.fanout.clone(), &v3_table),
            poller: StreamPoller::new(
                Store::new(clients.plain.clone(), &v3_table),
                clients.streams.clone(),
                fan_out_mapping()?,
                None,
            ),
            prefix: prefix.to_owned(),
            rng: Rng::with_seed(users as u64),
            fresh_users: Default::default(),
            created: 0,
            loaded,
        })
    }

    /// The target a read's calls and capacity are measured on.
    fn reference_target(&self, request: Request) -> Target {
        match request {
            Request::Q1 | Request::Q3 => Target::User(self.loaded.reference_user.clone()),
            Request::Q2 | Request::Q4 | Request::Q5 => Target::Post(self.loaded.reference_post),
            Request::Q7 => Target::Username(shouted(dataset::username(dataset::REFERENCE_USER))),
            _ => Target::Feed,
        }
    }

    /// A target drawn from the whole data set (reads), or a new one (commands).
    fn random_target(&mut self, request: Request, model: Model) -> Result<Target, Error> {
        Ok(match request {
            Request::Q1 | Request::Q3 => {
                Target::User(dataset::user_id(self.rng.usize(..self.loaded.users)))
            }
            Request::Q2 | Request::Q4 | Request::Q5 => Target::Post(self.random_post()),
            Request::Q6 => Target::Feed,
            Request::C1 => {
                self.created += 1;
                let user = UserId::parse(&format!("bench-user-{:06}", self.created))?;
                self.fresh_users[model as usize].push(user.clone());
                Target::NewUser {
                    user,
                    username: Username::parse(&format!("reader_{:06}", self.created))?,
                }
            }
            Request::C2 => {
                let (title, content) = dataset::post_text(&mut self.rng);
                Target::NewPost {
                    post: PostId::generate(),
                    author: self.random_writer(),
                    title,
                    content,
                }
            }
            Request::C3 => Target::NewComment {
                post: self.random_post(),
                author: self.random_writer(),
                content: dataset::comment_text(&mut self.rng),
            },
            Request::C4 => Target::NewLike {
                post: self.random_post(),
                liker: self.fresh_users[model as usize]
                    .pop()
                    .ok_or("C4 needs a user from C1 who has liked nothing yet")?,
            },
            Request::Q7 => Target::Username(shouted(dataset::username(
                self.rng.usize(..self.loaded.users),
            ))),
            Request::D4 | Request::D3 | Request::D2 => {
                return Err(format!("{request:?} takes back what `targets` makes").into());
            }
        })
    }

    /// The targets of `n` runs of `request`. A take-back's are made first:
    /// a like or a comment by a writer of the data set on one of its posts
    /// (made through the handler, unmetered, its fan-out drained), or a post
    /// of the data set, which leaves the pool the other requests draw from.
    async fn targets(
        &mut self,
        request: Request,
        model: Model,
        n: usize,
    ) -> Result<Vec<Target>, Error> {
        let mut targets = Vec::with_capacity(n);
        for _ in 0..n {
            let target = match request {
                Request::D4 => {
                    let (post, liker) = (self.random_post(), self.random_writer());
                    let like = Target::NewLike {
                        post,
                        liker: liker.clone(),
                    };
                    // A writer may have liked the post in the data set: like
                    // again answers that like, which is taken back alike.
                    self.run(Request::C4, model, &like, false).await?;
                    Target::Like { post, liker }
                }
                Request::D3 => {
                    let (post, author) = (self.random_post(), self.random_writer());
                    let comment = Target::NewComment {
                        post,
                        author: author.clone(),
                        content: dataset::comment_text(&mut self.rng),
                    };
                    let (_, body) = self.run(Request::C3, model, &comment, false).await?;
                    let made: blog::model::Comment = serde_json::from_str(&body)?;
                    Target::Comment {
                        post,
                        comment: made.comment_id,
                        author,
                    }
                }
                Request::D2 => {
                    let (post, author) = self.take_post();
                    Target::OwnPost {
                        post,
                        author: dataset::user_id(author),
                    }
                }
                _ => self.random_target(request, model)?,
            };
            targets.push(target);
        }
        if matches!(request, Request::D4 | Request::D3) {
            self.drain(false).await?;
        }
        Ok(targets)
    }

    /// Any post but the reference post, which reads are measured on.
    fn random_post(&mut self) -> PostId {
        loop {
            let (post, _) = self.loaded.post_ids[self.rng.usize(..self.loaded.post_ids.len())];
            if post != self.loaded.reference_post {
                return post;
            }
        }
    }

    /// A post of the data set, but the reference post, with its author's
    /// index, taken out of the pool the other requests draw from.
    fn take_post(&mut self) -> (PostId, usize) {
        loop {
            let at = self.rng.usize(..self.loaded.post_ids.len());
            if self.loaded.post_ids[at].0 != self.loaded.reference_post {
                return self.loaded.post_ids.swap_remove(at);
            }
        }
    }

    /// Any user of the data set but the reference user.
    fn random_writer(&mut self) -> UserId {
        dataset::user_id(self.rng.usize(1..self.loaded.users))
    }

    /// The store of a naive model, on the metered client or the plain one.
    fn naive(&self, naive: Naive, metered: bool) -> NaiveStore {
        let client = if metered {
            &self.clients.requests
        } else {
            &self.clients.plain
        };
        NaiveStore::new(client.clone(), &self.prefix, naive)
    }

    /// Runs one request: its time, and (V3) its response body.
    async fn run(
        &mut self,
        request: Request,
        model: Model,
        target: &Target,
        metered: bool,
    ) -> Result<(f64, String), Error> {
        match model.naive() {
            None => {
                let app = if metered { &self.metered } else { &self.plain };
                run_v3(app, request.function(), v3_event(request, target)?).await
            }
            Some(naive) => {
                let store = self.naive(naive, metered);
                Ok((run_naive(&store, request, target).await?, String::new()))
            }
        }
    }

    async fn metered_read(
        &mut self,
        request: Request,
        model: Model,
        settings: &Settings,
    ) -> Result<Row, Error> {
        let target = self.reference_target(request);
        self.clients.request_meter.take();
        let runs = settings.metered_reads;
        for _ in 0..runs {
            self.run(request, model, &target, true).await?;
        }
        Ok(Row {
            request,
            model,
            cost: Cost::per_request(&self.clients.request_meter.take(), runs),
            fanout: Cost::default(),
            billed: None,
            latency: Stats::default(),
            bare: None,
        })
    }

    async fn metered_command(
        &mut self,
        request: Request,
        model: Model,
        settings: &Settings,
    ) -> Result<Row, Error> {
        let targets = self
            .targets(request, model, settings.metered_commands)
            .await?;
        self.metered_commands(request, model, &targets).await
    }

    /// Runs `request` on each target, one by one, each with its fan-out
    /// drained: the calls and capacity of both, as DynamoDB Local reports
    /// them, and the write units DynamoDB bills, from the partitions the
    /// command can touch, read before, after the command and after its
    /// fan-out.
    async fn metered_commands(
        &mut self,
        request: Request,
        model: Model,
        targets: &[Target],
    ) -> Result<Row, Error> {
        let (mut calls, mut fanout_calls) = (Vec::new(), Vec::new());
        let mut billed = Billed::default();
        for target in targets {
            let (table, shape, mut pks) = self.partitions(model, request, target);
            let client = self.clients.plain.clone();
            let snapshot = |pks: Vec<String>| {
                let (client, table, shape) = (&client, &table, &shape);
                async move { Snapshot::partitions(client, table, shape, &pks).await }
            };
            let before = snapshot(pks.clone()).await?;
            self.clients.request_meter.take();
            let (_, body) = self.run(request, model, target, true).await?;
            let request_calls = self.clients.request_meter.take();
            if model == Model::V3 && request == Request::C2 {
                let post: blog::model::Post = serde_json::from_str(&body)?;
                pks.push(blog::keys::post_pk(&post.post_id));
            }
            let answered = snapshot(pks.clone()).await?;
            let (settled, fanout) = if model == Model::V3 {
                self.clients.fanout_meter.take();
                self.drain(true).await?;
                let fanout = self.clients.fanout_meter.take();
                (snapshot(pks).await?, fanout)
            } else {
                (answered.clone(), Vec::new())
            };
            let rate = if request_calls
                .iter()
                .any(|c| c.operation == "TransactWriteItems")
            {
                Rate::Transactional
            } else {
                Rate::Standard
            };
            billed.request +=
                (billed_writes(&shape, &before, &answered, rate) + refused(&request_calls)) as f64;
            billed.fanout += (billed_writes(&shape, &answered, &settled, Rate::Standard)
                + refused(&fanout)) as f64;
            calls.extend(request_calls);
            fanout_calls.extend(fanout);
        }
        let n = targets.len().max(1) as f64;
        let mut cost = Cost::per_request(&calls, targets.len());
        if model == Model::V1 {
            // V1 by scanning has no index: its commands share V1's tables,
            // which carry the indexes of V1 with GSIs.
            cost.indexes = 0.0;
        }
        Ok(Row {
            request,
            model,
            cost,
            fanout: Cost::per_request(&fanout_calls, targets.len()),
            billed: Some(Billed {
                request: billed.request / n,
                fanout: billed.fanout / n,
            }),
            latency: Stats::default(),
            bare: None,
        })
    }

    /// The table a command writes, its shape, and the partitions it can touch
    /// (V3's C2 adds the new post's partition once it is known).
    fn partitions(
        &self,
        model: Model,
        request: Request,
        target: &Target,
    ) -> (String, local::billing::Shape, Vec<String>) {
        use blog::keys;
        match model.naive() {
            None => {
                let table = self.plain.store.table().to_owned();
                let pks = match target {
                    Target::NewUser { user, username } => {
                        vec![keys::user_pk(user), keys::username_pk(username)]
                    }
                    // A like's mark is in its liker's own partition.
                    Target::NewLike { post, liker } | Target::Like { post, liker } => vec![
                        keys::post_pk(post),
                        keys::FEED_PK.to_owned(),
                        keys::user_pk(liker),
                    ],
                    Target::NewComment { post, .. }
                    | Target::Comment { post, .. }
                    | Target::OwnPost { post, .. } => {
                        vec![keys::post_pk(post), keys::FEED_PK.to_owned()]
                    }
                    _ => vec![keys::FEED_PK.to_owned()],
                };
                (table, Shape::single_table(), pks)
            }
            Some(naive) => {
                let store = self.naive(naive, false);
                let indexed = naive != Naive::Scan;
                match target {
                    Target::NewUser { user, .. } => (
                        store.users_table().to_owned(),
                        crate::naive::users_shape(),
                        vec![user.to_string()],
                    ),
                    Target::NewPost { post, .. }
                    | Target::NewComment { post, .. }
                    | Target::NewLike { post, .. } => (
                        store.posts_table().to_owned(),
                        crate::naive::posts_shape(indexed),
                        vec![post.to_string()],
                    ),
                    _ => {
                        debug_assert!(!request.is_command(), "{request:?}");
                        (String::new(), Shape::single_table(), Vec::new())
                    }
                }
            }
        }
    }

    /// C3 and C4 on one new post of `bytes` (of Japanese text), with the same
    /// short comments whatever its length: what the post's length adds.
    async fn on_post_of(
        &mut self,
        bytes: usize,
        model: Model,
        settings: &Settings,
    ) -> Result<Vec<Row>, Error> {
        let content = POST_CHAR.repeat(bytes / POST_CHAR.len());
        let target = Target::NewPost {
            post: PostId::generate(),
            author: self.random_writer(),
            title: format!("a post of {bytes} bytes"),
            content,
        };
        let (_, body) = self.run(Request::C2, model, &target, false).await?;
        let post = match (&target, model) {
            (_, Model::V3) => serde_json::from_str::<blog::model::Post>(&body)?.post_id,
            (Target::NewPost { post, .. }, _) => *post,
            _ => unreachable!("the target is a new post"),
        };
        if model == Model::V3 {
            self.drain(false).await?;
        }
        let runs = settings.metered_commands.min(10);
        let comments: Vec<Target> = (0..runs)
            .map(|_| Target::NewComment {
                post,
                author: self.random_writer(),
                content: "A short comment of a few words.".into(),
            })
            .collect();
        let mut likes = Vec::with_capacity(runs);
        for _ in 0..runs {
            let new_user = self.random_target(Request::C1, model)?;
            self.run(Request::C1, model, &new_user, false).await?;
            let liker = self.fresh_users[model as usize]
                .pop()
                .ok_or("C1 made no user")?;
            likes.push(Target::NewLike { post, liker });
        }
        Ok(vec![
            self.metered_commands(Request::C3, model, &comments).await?,
            self.metered_commands(Request::C4, model, &likes).await?,
        ])
    }

    /// Latency over random targets. For a V3 read, each run is paired with the
    /// same DynamoDB call made bare on the same target, in alternating order,
    /// so that the machine's drift weighs on both alike.
    async fn timed(
        &mut self,
        request: Request,
        model: Model,
        settings: &Settings,
    ) -> Result<(Stats, Option<Stats>), Error> {
        let runs = if request.is_command() {
            settings.timed_commands
        } else {
            settings.timed_reads
        };
        let paired = model == Model::V3 && !request.is_command();
        // A take-back's targets are made before the clock runs; the others
        // are drawn run by run (a naive model may stop short of `runs`).
        let mut made = if request.takes_back() {
            self.targets(request, model, runs).await?
        } else {
            Vec::new()
        };
        let started = Instant::now();
        let mut seconds = Vec::with_capacity(runs);
        let mut bare = Vec::with_capacity(if paired { runs } else { 0 });
        for n in 0..runs {
            let target = match made.pop() {
                Some(target) => target,
                None => self.random_target(request, model)?,
            };
            if paired && n % 2 == 0 {
                bare.push(self.bare_call(request, &target).await?);
            }
            seconds.push(self.run(request, model, &target, false).await?.0);
            if paired && n % 2 == 1 {
                bare.push(self.bare_call(request, &target).await?);
            }
            if model != Model::V3 && started.elapsed() > settings.v1_budget {
                break;
            }
        }
        // Commands write to the stream: keep it drained as the runs go.
        if request.is_command() && model == Model::V3 {
            self.drain(false).await?;
        }
        Ok((Stats::of(seconds), paired.then(|| Stats::of(bare))))
    }

    /// The DynamoDB call a V3 read makes, made directly on the same client.
    async fn bare_call(&self, request: Request, target: &Target) -> Result<f64, Error> {
        use aws_sdk_dynamodb::types::AttributeValue::S;
        use blog::keys;
        let client = self.plain.store.client();
        let table = self.plain.store.table();
        let started = Instant::now();
        let list = |pk: String, prefix: &str, forward: bool| {
            client
                .query()
                .table_name(table)
                .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
                .expression_attribute_values(":pk", S(pk))
                .expression_attribute_values(":prefix", S(prefix.to_owned()))
                .scan_index_forward(forward)
                .limit(101)
        };
        match (request, target) {
            (Request::Q1, Target::User(user)) => {
                let key = blog::store::items::user::UserItem::key(user);
                client
                    .get_item()
                    .table_name(table)
                    .set_key(Some(key))
                    .send()
                    .await?;
            }
            (Request::Q7, Target::Username(name)) => {
                client
                    .get_item()
                    .table_name(table)
                    .key(keys::PK, S(keys::username_pk(&Username::parse(name)?)))
                    .key(keys::SK, S(keys::USERNAME_SK.to_owned()))
                    .send()
                    .await?;
            }
            (Request::Q2, Target::Post(post)) => {
                // The post item and its content.
                list(keys::post_pk(post), keys::POST_ITEMS_PREFIX, true)
                    .limit(2)
                    .send()
                    .await?;
            }
            (Request::Q3, Target::User(user)) => {
                client
                    .query()
                    .table_name(table)
                    .index_name(keys::GSI1)
                    .key_condition_expression("GSI1PK = :pk AND begins_with(GSI1SK, :post)")
                    .expression_attribute_values(":pk", S(keys::user_items_pk(user)))
                    .expression_attribute_values(":post", S(keys::POST_PREFIX.to_owned()))
                    .scan_index_forward(false)
                    .limit(101)
                    .send()
                    .await?;
            }
            (Request::Q4, Target::Post(post)) => {
                list(keys::post_pk(post), keys::COMMENT_PREFIX, true)
                    .send()
                    .await?;
            }
            (Request::Q5, Target::Post(post)) => {
                list(keys::post_pk(post), keys::LIKE_PREFIX, false)
                    .send()
                    .await?;
            }
            (Request::Q6, Target::Feed) => {
                list(keys::FEED_PK.to_owned(), keys::POST_PREFIX, false)
                    .limit(100)
                    .send()
                    .await?;
            }
            (request, target) => {
                return Err(format!("no bare call for {request:?} on {target:?}").into());
            }
        }
        Ok(started.elapsed().as_secs_f64())
    }

    /// The floor: one bare GetItem of a profile, on the same client and table.
    async fn floor(&mut self, runs: usize) -> Result<Stats, Error> {
        let mut seconds = Vec::with_capacity(runs);
        for _ in 0..runs {
            let user = dataset::user_id(self.rng.usize(..self.loaded.users));
            let started = Instant::now();
            let output = self
                .plain
                .store
                .client()
                .get_item()
                .table_name(self.plain.store.table())
                .set_key(Some(blog::store::items::user::UserItem::key(&user)))
                .send()
                .await?;
            seconds.push(started.elapsed().as_secs_f64());
            output.item.ok_or("the floor's profile is missing")?;
        }
        Ok(Stats::of(seconds))
    }

    /// Delivers everything the stream holds to the fan-out, metered or not.
    async fn drain(&mut self, metered: bool) -> Result<(), Error> {
        let plain = Store::new(self.clients.plain.clone(), self.plain.store.table());
        let store = if metered { &self.fanout_store } else { &plain };
        let deliver = |event| async move {
            let response = fanout::handle(store, event).await;
            if response.batch_item_failures.is_empty() {
                Ok(response)
            } else {
                // Ends the poll, and the benchmark with it.
                Err(InvokeError::Unreachable(format!(
                    "the fan-out failed: {:?}",
                    response.batch_item_failures
                )))
            }
        };
        let mut quiet = 0;
        while quiet < 2 {
            // DynamoDB Local appends a write to its stream a moment after the
            // write: drained means empty twice, a short pause apart.
            if self.poller.poll_once(&deliver).await? > 0 {
                quiet = 0;
            } else {
                quiet += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(())
    }

    /// The users renamed: the one with the fewest posts, a median one and the
    /// reference user (the first two are then erased).
    fn renamed_users(&self) -> [usize; 3] {
        let mut posts_of = std::collections::BTreeMap::<usize, usize>::new();
        for (_, author) in &self.loaded.post_ids {
            *posts_of.entry(*author).or_default() += 1;
        }
        let mut by_posts: Vec<(usize, usize)> = posts_of.into_iter().collect();
        by_posts.sort_by_key(|(author, n)| (*n, *author));
        let at = |i: usize| by_posts.get(i).map_or(dataset::REFERENCE_USER, |(a, _)| *a);
        [at(0), at(by_posts.len() / 2), dataset::REFERENCE_USER]
    }

    /// Renames of users with few and with many items: the command, then the
    /// fan-out's copies of the new name.
    async fn renames(&mut self, chosen: &[usize]) -> Result<Vec<Rename>, Error> {
        let mut renames = Vec::new();
        for (n, &user) in chosen.iter().enumerate() {
            let id = dataset::user_id(user);
            let items = self.written_by(&id).await?.len();
            self.clients.request_meter.take();
            self.clients.fanout_meter.take();
            let req = event(
                "update-user",
                &[("userId", id.to_string())],
                "",
                Some(json!({ "username": format!("renamed_{n}_{user:06}") })),
                Some(id.as_str()),
            )?;
            run_v3(&self.metered, "update-user", req).await?;
            let command = Cost::per_request(&self.clients.request_meter.take(), 1);
            self.drain(true).await?;
            let fanout = Cost::per_request(&self.clients.fanout_meter.take(), 1);
            renames.push(Rename {
                items,
                command,
                fanout,
            });
        }
        Ok(renames)
    }

    /// The reference user's export, 25 a page: each page's calls and read
    /// units, then `runs` pages served in turn, timed.
    async fn export(&mut self, runs: usize) -> Result<Export, Error> {
        let user = dataset::user_id(dataset::REFERENCE_USER);
        let page = |cursor: &Option<String>| {
            let query = match cursor {
                Some(cursor) => format!("limit=25&cursor={cursor}"),
                None => "limit=25".to_owned(),
            };
            let params = [("userId", user.to_string())];
            event("export-user", &params, &query, None, Some(user.as_str()))
        };
        let (mut cursors, mut cursor) = (Vec::new(), None);
        let (mut items, mut calls, mut max_calls, mut max_units) = (0, Vec::new(), 0, 0.0_f64);
        loop {
            self.clients.request_meter.take();
            let (_, body) = run_v3(&self.metered, "export-user", page(&cursor)?).await?;
            let page_calls = self.clients.request_meter.take();
            max_calls = max_calls.max(page_calls.len());
            max_units = max_units.max(Cost::per_request(&page_calls, 1).total());
            calls.extend(page_calls);
            let body: serde_json::Value = serde_json::from_str(&body)?;
            items += body["items"].as_array().map_or(0, Vec::len);
            cursors.push(cursor);
            cursor = body["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        let mut seconds = Vec::with_capacity(runs);
        for n in 0..runs {
            let req = page(&cursors[n % cursors.len()])?;
            seconds.push(run_v3(&self.plain, "export-user", req).await?.0);
        }
        Ok(Export {
            items,
            pages: cursors.len(),
            per_page: Cost::per_request(&calls, cursors.len()),
            max_calls,
            max_units,
            latency: Stats::of(seconds),
        })
    }

    /// Erasures of `users`: the request, then its fan-out drained to the end
    /// of the walk. Billed: the request as the transaction it is; the walk
    /// from every partition it can touch (the user's, their name's, the feed
    /// and each post they wrote or replied to), read before and after, with
    /// the user's own items, their like markers and the posts whose counts
    /// fell at the transactional rate (each comment or like goes in one
    /// transaction with its post's count, each post in one with its content)
    /// and the rest at the standard rate: at most what DynamoDB bills, as a
    /// reply of theirs on their own post may go with the post's partition,
    /// at the standard rate.
    async fn erasures(&mut self, users: &[usize]) -> Result<Vec<Erasure>, Error> {
        use blog::keys;
        let mut erasures = Vec::new();
        for &user in users {
            let id = dataset::user_id(user);
            let written = self.written_by(&id).await?;
            let profile = self
                .plain
                .store
                .db()
                .get_entity::<blog::store::items::user::UserItem>(keys::profile(&id).item(), true)
                .await?
                .ok_or("an erased user has no profile")?;
            let mut pks: Vec<String> = written.iter().map(|(pk, _)| pk.clone()).collect();
            pks.sort();
            pks.dedup();
            pks.extend([
                keys::user_pk(&id),
                keys::username_pk(&profile.username),
                keys::FEED_PK.to_owned(),
            ]);
            let (table, shape) = (self.plain.store.table().to_owned(), Shape::single_table());
            let client = self.clients.plain.clone();
            let snapshot = || Snapshot::partitions(&client, &table, &shape, &pks);
            let before = snapshot().await?;
            self.clients.request_meter.take();
            self.clients.fanout_meter.take();
            let req = event(
                "delete-user",
                &[("userId", id.to_string())],
                "",
                None,
                Some(id.as_str()),
            )?;
            run_v3(&self.metered, "delete-user", req).await?;
            let request_calls = self.clients.request_meter.take();
            let answered = snapshot().await?;
            self.drain(true).await?;
            let fanout = self.clients.fanout_meter.take();
            let settled = snapshot().await?;
            let transactional = written_in_transactions(&answered, &id, &written);
            let at = |pk: &str, sk: &str| transactional.contains(&(pk.to_owned(), sk.to_owned()));
            let part = |snapshot: &Snapshot, tx: bool| snapshot.filter(|pk, sk| at(pk, sk) == tx);
            let billed = Billed {
                request: (billed_writes(&shape, &before, &answered, Rate::Transactional)
                    + refused(&request_calls)) as f64,
                fanout: (billed_writes(
                    &shape,
                    &part(&answered, true),
                    &part(&settled, true),
                    Rate::Transactional,
                ) + billed_writes(
                    &shape,
                    &part(&answered, false),
                    &part(&settled, false),
                    Rate::Standard,
                ) + refused(&fanout)) as f64,
            };
            erasures.push(Erasure {
                items: written.len(),
                command: Cost::per_request(&request_calls, 1),
                fanout: Cost::per_request(&fanout, 1),
                billed,
            });
        }
        Ok(erasures)
    }

    /// The table keys (partition, sort) of everything `user` wrote: their
    /// GSI1 partition, read to its end.
    async fn written_by(&self, user: &UserId) -> Result<Vec<(String, String)>, Error> {
        let mut keys = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .clients
                .plain
                .query()
                .table_name(self.plain.store.table())
                .index_name(blog::keys::GSI1)
                .key_condition_expression("GSI1PK = :pk")
                .expression_attribute_values(
                    ":pk",
                    AttributeValue::S(blog::keys::user_items_pk(user)),
                )
                .projection_expression("PK, SK")
                .set_exclusive_start_key(start)
                .send()
                .await?;
            for item in page.items.unwrap_or_default() {
                match (item.get("PK"), item.get("SK")) {
                    (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) => {
                        keys.push((pk.clone(), sk.clone()));
                    }
                    _ => return Err("a GSI1 entry without its table keys".into()),
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(keys);
            }
        }
    }

    /// From a post's creation (the handler's answer) to its appearance in the
    /// feed, with the stream poller running as the local stack runs it, and
    /// posts created at random intervals of up to half a second.
    async fn lag(&mut self, samples: usize) -> Result<Stats, Error> {
        let store = Store::new(self.clients.plain.clone(), self.plain.store.table());
        // The benchmark's own poller, which has read the stream to its end,
        // now runs on its own; the replacement is never used.
        self.drain(false).await?;
        let fresh = StreamPoller::new(
            store.clone(),
            self.clients.streams.clone(),
            fan_out_mapping()?,
            None,
        );
        let poller = std::mem::replace(&mut self.poller, fresh);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let fanout_store = store.clone();
        let running = tokio::spawn(async move {
            let deliver = move |event| {
                let store = fanout_store.clone();
                async move { Ok(fanout::handle(&store, event).await) }
            };
            poller
                .run(deliver, POLL_IDLE, async {
                    let _ = stopped.await;
                })
                .await;
        });
        let mut seconds = Vec::with_capacity(samples);
        let warmup = 1;
        for n in 0..samples + warmup {
            // Sporadic writes: each lands at a random point of the poller's
            // cycle, busy or idle, as a write to a quiet blog would.
            tokio::time::sleep(Duration::from_millis(self.rng.u64(0..500))).await;
            let target = self.random_target(Request::C2, Model::V3)?;
            let req = v3_event(Request::C2, &target)?;
            let (_, body) = run_v3(&self.plain, "create-post", req).await?;
            let post: blog::model::Post = serde_json::from_str(&body)?;
            let created = Instant::now();
            let deadline = created + Duration::from_secs(30);
            loop {
                let newest = store.requests().feed(1).await?;
                if newest.first().map(|p| p.post_id) == Some(post.post_id) {
                    break;
                }
                if Instant::now() > deadline {
                    return Err("a post did not reach the feed within 30 s".into());
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            if n >= warmup {
                seconds.push(created.elapsed().as_secs_f64());
            }
        }
        let _ = stop.send(());
        running.await?;
        Ok(Stats::of(seconds))
    }
}

/// A username as someone might type it: in capitals, which find-user ignores.
fn shouted(username: Username) -> String {
    username.as_str().to_ascii_uppercase()
}

/// The posts a comment and a like are measured on, by their length in bytes
/// of UTF-8: a short one and a long one (40 KB).
pub const POST_LENGTHS: [usize; 2] = [2 * 1024, 40 * 1024];
const POST_CHAR: &str = "本";

/// Writes refused by their condition: billed, though no capacity is reported.
/// The items of `snapshot` (a user's partitions before their erasure's walk)
/// that the walk writes in transactions: whatever `user` wrote, their like
/// markers, the contents of their posts (deleted with the post) and the post
/// items of the partitions `written` names (their counts fall with each
/// comment or like, in its transaction).
fn written_in_transactions(
    snapshot: &Snapshot,
    user: &UserId,
    written: &[(String, String)],
) -> std::collections::BTreeSet<(String, String)> {
    use blog::keys;
    let own_posts: std::collections::BTreeSet<&str> = written
        .iter()
        .filter(|(_, sk)| sk == keys::POST_SK)
        .map(|(pk, _)| pk.as_str())
        .collect();
    let replied_to: std::collections::BTreeSet<&str> =
        written.iter().map(|(pk, _)| pk.as_str()).collect();
    let marker = keys::liker_sk(user);
    let mut keys = snapshot.keys_where(
        |item| matches!(item.get("userId"), Some(AttributeValue::S(u)) if u == user.as_str()),
    );
    keys.extend(
        snapshot
            .keys_where(|_| true)
            .into_iter()
            .filter(|(pk, sk)| {
                *sk == marker
                    || (own_posts.contains(pk.as_str()) && sk == keys::POST_CONTENT_SK)
                    || (replied_to.contains(pk.as_str()) && sk == keys::POST_SK)
            }),
    );
    keys
}

fn refused(calls: &[blog::store::meter::Call]) -> u64 {
    calls.iter().filter(|c| c.failed_condition()).count() as u64
}

/// The poller's pause after an empty poll: Lambda's event source mapping polls
/// each shard about four times a second.
pub const POLL_IDLE: Duration = Duration::from_millis(250);
