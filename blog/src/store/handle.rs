//! The store's handle: the table and the settings its operations share, and
//! the views that group its operations by caller. Nothing below it (the
//! table layer, `keys.rs`) imports this file.

use std::time::Duration;

use aws_sdk_dynamodb::Client;

use super::table::{Backoff, Table};

/// How many posts the feed shows (Q6). The partition keeps a reserve below
/// them ([`super::items::feed::feed_reserve`]: the next newest, shown when one of
/// them is deleted) and a slack of older ones until the next trim
/// ([`super::items::feed::feed_slack`]). Here, as every store's default.
pub const FEED_CAPACITY: usize = 100;

/// How long the rename fan-out allows GSI1 to catch up with a write. DynamoDB
/// documents GSI propagation as usually under a second; twice that leaves room.
pub const GSI_LAG_BOUND: Duration = Duration::from_secs(2);

/// How many followers a post's delivery into their homes reads and writes
/// a page, unless set otherwise ([`Store::with_delivery_page`]).
pub const DELIVERY_PAGE: usize = 100;

/// From how many followers (when a follow is made) a follow is a pull
/// follow: a post is delivered into at most about this many homes (about
/// 3.4 s of writes within the stack's 1,500 WCU a second,
/// `MaxWriteRequestUnits`: within 5 s of its publication).
pub const PULL_FOLLOWERS: u64 = 5_000;

/// The table, and the settings its operations share.
#[derive(Clone, Debug)]
pub struct Store {
    pub(super) db: Table,
    pub(super) feed_capacity: usize,
    pub(super) gsi_lag_bound: Duration,
    /// How many followers a post's delivery reads and writes a page
    /// ([`DELIVERY_PAGE`]).
    pub(super) delivery_page: usize,
    /// From how many followers a new follow is a pull follow
    /// ([`PULL_FOLLOWERS`]).
    pub(super) pull_threshold: u64,
    /// The pulled authors' lists this instance read for the home
    /// ([`super::memory::PulledLists`]; off unless set).
    pub(super) pulled: std::sync::Arc<super::memory::PulledLists>,
    /// The hot posts this process has met ([`super::hot`]).
    pub(super) hot: std::sync::Arc<super::memory::HotPosts>,
    /// The hot posts whose first pages this process reads from their copies
    /// ([`super::memory::PagedPosts`]).
    pub(super) paged: std::sync::Arc<super::memory::PagedPosts>,
    /// The authors of the posts this process liked or commented on
    /// ([`super::memory::PostAuthors`]).
    pub(super) authors: std::sync::Arc<super::memory::PostAuthors>,
    /// Whether a throttled quiet post is made hot (always, but in the
    /// viral benchmark's run of the design before hot posts).
    pub(super) hot_switch: bool,
    /// The likes and comments a second this process writes on each quiet
    /// post, which turn it hot at their threshold
    /// ([`super::memory::WriteRates`]).
    pub(super) rates: std::sync::Arc<super::memory::WriteRates>,
    /// The hot posts' answers this read function's instance serves again
    /// ([`super::memory::HotReads`]; off unless set).
    pub(super) hot_reads: std::sync::Arc<super::memory::HotReads>,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            db: Table::new(client, table),
            feed_capacity: FEED_CAPACITY,
            gsi_lag_bound: GSI_LAG_BOUND,
            delivery_page: DELIVERY_PAGE,
            pull_threshold: PULL_FOLLOWERS,
            pulled: std::sync::Arc::default(),
            hot: std::sync::Arc::default(),
            paged: std::sync::Arc::default(),
            authors: std::sync::Arc::default(),
            hot_switch: true,
            rates: std::sync::Arc::default(),
            hot_reads: std::sync::Arc::default(),
        }
    }

    /// Turns a quiet post hot once this process writes `threshold` likes
    /// and comments a second on it, instead of
    /// [`HOT_WRITES_PER_SECOND`](super::memory::HOT_WRITES_PER_SECOND)
    /// (`None`: only a throttle of its partition does). Scaled with the
    /// partition limits a benchmark or test enforces.
    pub fn with_hot_rate(mut self, threshold: Option<f64>) -> Self {
        self.rates = std::sync::Arc::new(super::memory::WriteRates::new(threshold));
        self
    }

    /// The design before hot posts: a throttled post stays quiet, its
    /// requests retried into its partition. Only the viral benchmark runs it,
    /// to measure what the switch changes.
    #[cfg(feature = "bulk")]
    pub fn never_hot(mut self) -> Self {
        self.hot_switch = false;
        self
    }

    /// Replaces the retry policy (tests make it fast, or give up at once).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.db = self.db.with_backoff(backoff);
        self
    }

    /// How long GSI1 may take to show a write: the rename fan-out waits this
    /// long after a rename before its second pass. DynamoDB Local's index is
    /// synchronous, so tests against it may set zero.
    pub fn with_gsi_lag_bound(mut self, bound: Duration) -> Self {
        self.gsi_lag_bound = bound;
        self
    }

    pub fn gsi_lag_bound(&self) -> Duration {
        self.gsi_lag_bound
    }

    /// Caps the feed at `capacity` posts instead of [`FEED_CAPACITY`]:
    /// lets tests exercise trimming with a few posts.
    pub fn with_feed_capacity(mut self, capacity: usize) -> Self {
        self.feed_capacity = capacity;
        self
    }

    pub fn feed_capacity(&self) -> usize {
        self.feed_capacity
    }

    /// Delivers a post to `page` followers a page instead of
    /// [`DELIVERY_PAGE`]: lets tests walk a delivery page by page with
    /// a few followers.
    pub fn with_delivery_page(mut self, page: usize) -> Self {
        self.delivery_page = page.max(1);
        self
    }

    /// Makes a follow a pull follow from `followers` followers instead of
    /// [`PULL_FOLLOWERS`]: lets tests and the home benchmark
    /// follow a famous author with a few followers.
    pub fn with_pull_threshold(mut self, followers: u64) -> Self {
        self.pull_threshold = followers;
        self
    }

    /// Keeps the pulled authors' lists a home read reads for `lists`' time
    /// to live (`get-home` as deployed; off by default).
    pub fn with_pulled_lists(mut self, lists: super::memory::PulledLists) -> Self {
        self.pulled = std::sync::Arc::new(lists);
        self
    }

    /// Serves a hot post's Q2 and first pages again for `reads`' time to
    /// live (the read functions as deployed; off by default).
    pub fn with_hot_reads(mut self, reads: super::memory::HotReads) -> Self {
        self.hot_reads = std::sync::Arc::new(reads);
        self
    }

    /// The likes and comments a second one process writes on a quiet post
    /// that turn it hot (`None`: none do); the fan-out, which sees all of
    /// a post's, turns it hot at twice this.
    pub fn hot_rate(&self) -> Option<f64> {
        self.rates.threshold()
    }

    /// The table layer, through which every operation reaches DynamoDB.
    pub fn db(&self) -> &Table {
        &self.db
    }

    pub fn client(&self) -> &Client {
        self.db.client()
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        self.db.name()
    }

    pub fn backoff(&self) -> &Backoff {
        self.db.backoff()
    }
}

/// Declares a view of the [`Store`] named after the one caller whose
/// operations it carries. A view borrows the store and derefs to it, so its
/// operations reach the table and the writes every caller shares, which stay
/// on `Store` in each entity's module.
macro_rules! view {
    ($(#[$meta:meta])* $name:ident, $open:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name<'s>(&'s Store);

        impl std::ops::Deref for $name<'_> {
            type Target = Store;

            fn deref(&self) -> &Store {
                self.0
            }
        }

        impl Store {
            #[doc = concat!("The operations [`", stringify!($name), "`] carries.")]
            pub fn $open(&self) -> $name<'_> {
                $name(self)
            }
        }
    };
}

view! {
    /// What the request handlers call (`api`): C1–C4, Q1–Q6, the take-backs,
    /// the export and the erasure request. Each entity's module holds its
    /// `impl Requests` block.
    Requests,
    requests
}

view! {
    /// What the stream fan-out calls (`fanout`, and `recovery`, which parks
    /// and replays its records): the feed's writes, username copies, a
    /// deleted post's walk, an erased account's walk, the hot posts' sums.
    /// The admin tools' repairs call two of its walks too (an erasure's, a
    /// deleted post's), as the fan-out would.
    FanOut,
    fanout
}

#[cfg(feature = "admin")]
view! {
    /// What only the admin tools call (`blog-admin`: the audit and its
    /// repairs, the migration, the replay of parked records), compiled only
    /// with the `admin` feature.
    Admin,
    admin
}
