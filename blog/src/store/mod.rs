//! Single-table data access. One module per entity (`users`, `posts`,
//! `comments`, `likes`, `feed`); each owns its item shapes, which build their
//! own keys through [`crate::keys`], and its operations. Around them, one
//! module per concern: `error` (what operations fail with), `retry` (what
//! DynamoDB answers when busy, and backoff), `transaction` (TransactWriteItems
//! by name, with tokens), `pages` (lists past 1 MB), `encoding` (items and
//! attribute values), `client` (the SDK client), `size` (item sizes and
//! billed units), `table` (the table's definition).

#[cfg(feature = "bulk")]
pub mod bulk;
mod client;
pub mod comments;
pub mod cursor;
pub mod deletion;
mod encoding;
mod error;
pub mod feed;
pub mod likes;
pub mod meter;
pub mod migrate;
mod pages;
pub mod parked;
pub mod posts;
pub mod rename;
pub mod retry;
pub mod size;
pub mod table;
mod transaction;
pub mod users;

use std::time::Duration;

use aws_sdk_dynamodb::{Client, types::Update};

pub use client::{dynamodb_client, dynamodb_client_metered, sdk_config, streams_client};
pub use encoding::{Item, ItemType};
pub(crate) use encoding::{from_item, from_items, key, n, s, to_item};
pub use error::{StoreError, classify};
pub(crate) use error::{classify_service, condition_held, describe};
pub use retry::{Backoff, Busy};
pub use transaction::request_scope;
pub(crate) use transaction::{Cancelled, Slot, Transaction};

/// How long the rename fan-out allows GSI1 to catch up with a write. DynamoDB
/// documents GSI propagation as usually under a second; twice that leaves room.
pub const GSI_LAG_BOUND: Duration = Duration::from_secs(2);

/// The table, and the one SDK client a process shares across invocations.
#[derive(Clone, Debug)]
pub struct Store {
    client: Client,
    table: String,
    backoff: Backoff,
    feed_capacity: usize,
    gsi_lag_bound: Duration,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            backoff: Backoff::default(),
            feed_capacity: feed::FEED_CAPACITY,
            gsi_lag_bound: GSI_LAG_BOUND,
        }
    }

    /// Replaces the retry policy (tests make it fast, or give up at once).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
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

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub(crate) fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// One GetItem, retried while DynamoDB is busy; strongly consistent when
    /// a write depends on what it reads.
    pub(crate) async fn get(
        &self,
        key: Item,
        consistent: bool,
    ) -> Result<Option<Item>, StoreError> {
        let get = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key))
            .consistent_read(consistent)
            .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Indexes);
        let output = self
            .backoff()
            .send("get", || get.clone().send())
            .await
            .map_err(classify)?;
        Ok(output.item)
    }

    /// The post's `counter` one up (`up`) or one down, in the transaction that
    /// adds or removes what it counts; its `version` one up. Its condition
    /// fails if the post is gone, and, going down, if the counter is already
    /// 0 (which an exact count never is while the counted item exists).
    fn count_on_post(
        &self,
        tx: &mut Transaction<'_>,
        post: &crate::ids::PostId,
        counter: &str,
        up: bool,
    ) -> Result<Slot, StoreError> {
        let (change, condition) = if up {
            ("#counter + :one", "attribute_exists(PK)")
        } else {
            (
                "#counter - :one",
                "attribute_exists(PK) AND #counter > :zero",
            )
        };
        let mut update = Update::builder()
            .table_name(self.table())
            .set_key(Some(key(crate::keys::post_pk(post), crate::keys::POST_SK)))
            .update_expression(format!("SET #counter = {change}, version = version + :one"))
            .condition_expression(condition)
            .expression_attribute_names("#counter", counter)
            .expression_attribute_values(":one", n(1));
        if !up {
            update = update.expression_attribute_values(":zero", n(0));
        }
        Ok(tx.update("post", update.build()?))
    }
}
