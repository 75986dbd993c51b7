//! A proxy in front of DynamoDB Local that behaves like DynamoDB under load.
//!
//! DynamoDB Local never throttles, never cancels a transaction because another
//! one holds the item, never loses a response after committing and updates
//! global secondary indexes synchronously. Real DynamoDB does all four, and
//! code that was only ever run against DynamoDB Local has never taken those
//! paths. [`Proxy`] forwards the AWS SDK's JSON 1.0 requests to an upstream
//! (DynamoDB Local) and, at seeded rates set by [`Faults`], answers some of them
//! the way the real service would:
//!
//! - `transaction_cancel`: a TransactWriteItems is not sent; the client gets a
//!   `TransactionCanceledException` with one item's reason `ThrottlingError` or
//!   `TransactionConflict` and `None` for the others.
//! - `write_conflict`: a PutItem, UpdateItem or DeleteItem is not sent; the
//!   client gets `TransactionConflictException`.
//! - `throttle`: a data-plane read or write is not sent; the client gets
//!   `ProvisionedThroughputExceededException` or `ThrottlingException`.
//! - `lost_response`: a TransactWriteItems, PutItem, UpdateItem or DeleteItem
//!   is sent and takes effect, but the client gets a 500, as when an attempt
//!   times out after the commit. A transaction retried with the same
//!   `ClientRequestToken` is answered by DynamoDB (and DynamoDB Local) as a
//!   success without being applied again; a plain write has no token, so its
//!   retry runs again (and a conditional one fails its condition).
//! - `server_error`: a PutItem, UpdateItem, DeleteItem or TransactWriteItems
//!   is not sent; the client gets a 500, as when DynamoDB fails before
//!   committing: the client cannot tell it from a lost response.
//! - `late_commit`: a TransactWriteItems with a `ClientRequestToken` is held
//!   and the client gets a 500 at once (its attempt timed out); the proxy
//!   sends it on `late_commit_delay` later, where it commits after the
//!   client gave up on that attempt. Meanwhile a retry with the same token
//!   gets `TransactionInProgressException`, as DynamoDB answers while the
//!   first attempt still runs; after it, the retry is a replay (a success).
//!   Late commits are not charged to the partition limits.
//! - `replay_cancel`: such a replay is cancelled anyway (as when another
//!   transaction holds its items at that moment); otherwise the proxy never
//!   cancels a replay.
//! - `gsi_lag`: a Query on an index does not see items whose `createdAt` is
//!   more recent than the lag, as a GSI that has not caught up yet.
//!
//! And with [`Proxy::set_partition_limits`], it enforces DynamoDB's
//! per-partition throughput (1,000 WCU and 3,000 RCU a second per partition
//! key value, of the table and of each index, scaled): see [`partitions`].
//!
//! Control-plane operations and DynamoDB Streams requests always pass through
//! untouched, and [`Faults::none`] makes the proxy transparent. [`Stats`]
//! counts what was forwarded and what was injected.
//!
//! Test and local-stack tooling only: nothing that ships in a Lambda depends
//! on this crate.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let proxy = hostile::Proxy::start(listener, "http://127.0.0.1:8000", hostile::Faults::hostile()).await?;
//! // point the SDK client's endpoint_url at proxy.url(), run the workload, then:
//! proxy.set_faults(hostile::Faults::none());
//! println!("injected {} faults", proxy.stats().faults());
//! # Ok(())
//! # }
//! ```

mod faults;
mod gsi;
mod limiter;
pub mod partitions;
mod proxy;
mod stats;

pub use faults::{Faults, RATE_KINDS};
pub use partitions::{PartitionLimits, TableCeiling};
pub use proxy::Proxy;
pub use stats::Stats;
