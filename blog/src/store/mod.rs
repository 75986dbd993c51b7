//! Single-table data access. One module per entity (`users`, `posts`,
//! `comments`, `likes`, `feed`); each owns its item shapes, which know their
//! own keys ([`crate::keys::Entity`]), and its operations, which it describes as
//! [`table::Write`]s, [`table::Query`]s and transactions. Only [`table`]
//! talks to DynamoDB: the table's name, metering, client request tokens,
//! retries and the classification of errors live there once.
//!
//! Each operation says which caller it serves: a request (C1–C4, Q1–Q6 and
//! the take-backs), the fan-out (the stream Lambda), or an admin tool
//! (`blog-admin`: audit, migration, replay, table creation).

#[cfg(feature = "bulk")]
pub mod bulk;
mod client;
pub mod comments;
pub mod cursor;
pub mod deletion;
pub mod erasure;
mod error;
pub mod export;
pub mod feed;
pub mod hot;
pub mod idempotency;
pub mod likes;
pub mod meter;
#[cfg(feature = "admin")]
pub mod migrate;
mod pages;
pub mod parked;
pub mod posts;
pub mod rename;
#[cfg(feature = "admin")]
pub mod size;
pub mod table;
pub mod users;

use std::time::Duration;

use aws_sdk_dynamodb::Client;

pub use crate::keys::{Item, ItemType};
pub(crate) use crate::keys::{from_item, from_items};
pub use client::{dynamodb_client, dynamodb_client_metered, sdk_config, streams_client};
pub use error::StoreError;
pub use table::{Backoff, Busy, classify, request_scope, request_scope_until};
pub(crate) use table::{n, s, signed};

/// How long the rename fan-out allows GSI1 to catch up with a write. DynamoDB
/// documents GSI propagation as usually under a second; twice that leaves room.
pub const GSI_LAG_BOUND: Duration = Duration::from_secs(2);

/// The table, and the settings its operations share.
#[derive(Clone, Debug)]
pub struct Store {
    db: table::Table,
    feed_capacity: usize,
    gsi_lag_bound: Duration,
    /// The hot posts this process has met ([`hot`]).
    hot: std::sync::Arc<hot::HotPosts>,
    /// Whether a throttled quiet post is made hot (always, but in the
    /// viral benchmark's run of the design before hot posts).
    hot_switch: bool,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            db: table::Table::new(client, table),
            feed_capacity: feed::FEED_CAPACITY,
            gsi_lag_bound: GSI_LAG_BOUND,
            hot: std::sync::Arc::default(),
            hot_switch: true,
        }
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

    /// Caps the feed at `capacity` posts instead of [`feed::FEED_CAPACITY`]:
    /// lets tests exercise trimming with a few posts.
    pub fn with_feed_capacity(mut self, capacity: usize) -> Self {
        self.feed_capacity = capacity;
        self
    }

    pub fn feed_capacity(&self) -> usize {
        self.feed_capacity
    }

    /// The table layer, through which every operation reaches DynamoDB.
    pub fn db(&self) -> &table::Table {
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
