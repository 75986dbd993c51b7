//! The table layer: the only code that talks to DynamoDB about the table.
//!
//! Every operation of the store is one of these: [`Table::get`],
//! [`Table::write`] (a put, update or delete, conditional or not),
//! [`Table::query_page`]/[`Table::query_up_to`] (pages past 1 MB),
//! [`Table::transaction`] (TransactWriteItems with its items named),
//! [`Table::batch_get`] (the audit's profiles, a page of a user's export), and
//! for the admin tools `Table::scan_page` (admin only). Each answers a
//! small typed outcome ([`Outcome`], [`TxOutcome`]); the table's name,
//! `ReturnConsumedCapacity` (what the meter and the metrics read), client
//! request tokens, retries and the classification of DynamoDB's errors live
//! here and nowhere else.
//!
//! # Files
//!
//! | file | holds |
//! |---|---|
//! | `probe.rs` | [`Table::probe_write`]: which partition a throttle came from ([`Room`], [`Throttle`]) |
//! | `expr.rs` | [`Expr`]: conditions, updates, key conditions and projections with their placeholders; [`s`], [`n`], [`signed`] |
//! | `write.rs` | [`Write`]: on its own ([`Table::write`], its [`Outcome`]) or in a [`Transaction`] (its items, its retries); reading a write back after a lost answer, and a transaction's resolution under the same token |
//! | `read.rs` | [`Table::get`], [`Table::batch_get`], [`Query`] and `Scan` (admin only) and their [`Page`]s |
//! | `tokens.rs` | client request tokens, and the [`request_scope`] (and deadline) they come from |
//! | `retry.rs` | [`Backoff`], and the one way a plain call is sent, retried and its failure classified |
//! | `limits.rs` | [`Sizes`]: each request held to DynamoDB's limits before it is sent, and the largest of each kind |
//! | `errors.rs` | what each of DynamoDB's errors means ([`Busy`](crate::store::error::Busy)), [`classify`] |
//! | `schema.rs` | the table's definition (admin) |
//!
//! # Errors and retries: one layer
//!
//! The SDK's own retries are off (`store::client`): this layer's [`Backoff`]
//! is the only one, so a throttled call is sent at most `attempts` (8) times
//! in all, never 3 × 8.
//!
//! | DynamoDB answers | retried here | then |
//! |---|---|---|
//! | `ProvisionedThroughputExceededException`, `ThrottlingException`, `RequestLimitExceeded`, `LimitExceededException` | yes | [`StoreError::Busy`](super::StoreError::Busy): 503 / failed record |
//! | `TransactionConflictException` (a plain write on an item a transaction holds; the SDK never retries it) | yes | the same |
//! | `TransactionCanceledException` with `TransactionConflict`, `ThrottlingError` or `ProvisionedThroughputExceeded` reasons | yes | the same |
//! | `InternalServerError`, `ServiceUnavailable`, a timeout, a dropped connection: **the outcome is unknown** | yes | the same |
//! | `ConditionalCheckFailedException`, or a cancellation with a `ConditionalCheckFailed` reason | no | the caller's domain answer |
//!
//! # DynamoDB's limits
//!
//! DynamoDB refuses a request over its limits with a `ValidationException`,
//! and DynamoDB Local takes some of them: this layer refuses them first,
//! before sending, with [`StoreError::OverLimit`](super::StoreError::OverLimit)
//! (a bug in the operation that built the request: a 500, never retried):
//!
//! | limit | held at |
//! |---|---|
//! | 4 KB an expression (update, condition) | every write, on its own or a transaction's item |
//! | 100 items a TransactWriteItems | [`Transaction::commit`] |
//! | 25 writes a BatchWriteItem | each call of `Table::put_all` and `Table::delete_all` (which send any number in calls of 25) |
//! | 100 keys a BatchGetItem | each call of [`Table::batch_get`] (which sends any number in calls of 100) |
//!
//! # Unknown outcomes
//!
//! An attempt whose answer was lost may have taken effect. From then on:
//! - every later attempt of that transaction carries the same
//!   `ClientRequestToken`, whatever happens in between (before that, a
//!   cancelled attempt, which certainly did not commit, gets a fresh one);
//! - a failed condition, or retries that ran out, are checked by reading
//!   back what the write would have left ([`Write::create`] knows which
//!   attributes make an item this request's; every other put, update and
//!   delete is given its [`Landed`] or [`Deleted`] where it is built, and
//!   one that leaves nothing of its own says so, [`Landed::Untold`]): if it is
//!   there, the write took effect and answers as if nothing had been lost
//!   ([`Outcome::Done`], [`TxOutcome::Committed`]), never with an error;
//! - any other failed condition is reported with `after_unknown: true`;
//! - retries that ran out without the write found answer
//!   [`Busy::OutcomeUnknown`](crate::store::error::Busy::OutcomeUnknown) (the API's 503 `outcome_unknown`), never the
//!   busy error that says nothing was written: the lost attempt may still
//!   commit.

#[cfg(feature = "admin")]
mod schema;

mod errors;
mod expr;
mod limits;
mod probe;
mod read;
mod retry;
mod tokens;
mod write;

use aws_sdk_dynamodb::Client;

pub use errors::{busy_call, classify};
pub use expr::{Expr, MAX_EXPRESSION_BYTES, n, s, signed};
pub use limits::Sizes;
pub use probe::{Room, Throttle};
#[cfg(feature = "admin")]
pub use read::Scan;
pub use read::{BATCH_GET, Page, Query};
pub use retry::Backoff;
#[cfg(feature = "admin")]
pub use schema::{GSI1_PROJECTED, create_if_missing};
pub use tokens::{request_scope, request_scope_until};
pub use write::{
    Committing, Deleted, Landed, Outcome, Rejected, Returning, Slot, Transaction, TxOutcome, Write,
};

/// The table and the SDK client a process shares across invocations. Its
/// operations are spread over this module's files by what they do (see the
/// table above).
#[derive(Clone, Debug)]
pub struct Table {
    client: Client,
    name: String,
    backoff: Backoff,
    sizes: std::sync::Arc<Sizes>,
}

impl Table {
    pub fn new(client: Client, name: impl Into<String>) -> Self {
        Self {
            client,
            name: name.into(),
            backoff: Backoff::default(),
            sizes: Default::default(),
        }
    }

    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// What its requests came to against DynamoDB's limits, and how many
    /// were refused for passing one.
    pub fn sizes(&self) -> &Sizes {
        &self.sizes
    }
}

#[cfg(test)]
mod tests;
