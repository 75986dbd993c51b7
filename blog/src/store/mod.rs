//! Single-table data access, in three layers, each importing only those
//! below it:
//!
//! - the operations: a module per entity or protocol (`users`, `posts`,
//!   `comments`, `likes`, `feed` (the feed and the tag lists), `follows`,
//!   `followers`, `blocks`, `home`,
//!   `schedule`, `hot`, `counts` (counts kept by shards: a post's likes and
//!   comments, a user's followers), `idempotency`, `parked`, the walks
//!   `rename`, `deletion` and `erasure`, `export`), each describing its
//!   operations as [`table::Write`]s, [`table::Query`]s and transactions;
//! - [`items`]: every stored item's shape, below every operation (its
//!   struct, its [`Entity`](crate::keys::Entity) impl, its key constructor,
//!   its attribute names): operations import items, never each other's
//!   shapes;
//! - [`table`], the only code that talks to DynamoDB: the table's name,
//!   metering, client request tokens, retries and the classification of
//!   errors live there once; beside it `error` (the store's error), and
//!   below everything `deadline` (how long a walk may go on) and `memory`
//!   (what an instance keeps between requests).
//!
//! Operations are grouped by caller, by the type that carries them
//! (`handle.rs`): [`Requests`] (the request handlers: C1–C4, Q1–Q6, the
//! take-backs, the export and the erasure request), [`FanOut`] (the stream
//! Lambda and the recovery of its records) and `Admin` (`blog-admin`: the
//! audit and its repairs, the migration, the replay; compiled only with the
//! `admin` feature). Each is a view of the [`Store`], which keeps the table,
//! the settings and the writes more than one caller shares; each entity
//! module holds those shared writes and one `impl` block per caller that
//! uses it.
//!
//! This file only declares the modules and hands their names on. The table
//! layer and the items take the store's error from `error`, never through
//! here; neither they nor `keys.rs` import `handle.rs` or an operation, so
//! no import runs back up.

pub mod blocks;
#[cfg(feature = "bulk")]
pub mod bulk;
mod client;
pub mod comments;
pub mod counts;
pub mod cursor;
pub mod deadline;
pub mod deletion;
pub mod erasure;
mod error;
pub mod export;
pub mod feed;
pub mod first_pages;
pub mod followers;
pub mod follows;
mod handle;
pub mod home;
pub mod hot;
pub mod idempotency;
pub mod items;
pub mod likes;
pub mod memory;
mod merge;
pub mod meter;
#[cfg(feature = "admin")]
pub mod migrate;
pub mod notifications;
mod pages;
pub mod parked;
pub mod posts;
pub mod rename;
pub mod schedule;
#[cfg(feature = "admin")]
pub mod size;
pub mod table;
pub mod users;

pub use crate::keys::{Item, ItemType};
pub(crate) use crate::keys::{from_item, from_items};
pub use client::{
    dynamodb_client, dynamodb_client_metered, is_local_endpoint, sdk_config, streams_client,
    with_local_defaults,
};
pub use error::{Busy, Limit, StoreError};
#[cfg(feature = "admin")]
pub use handle::Admin;
pub use handle::{DELIVERY_PAGE, FanOut, GSI_LAG_BOUND, PULL_FOLLOWERS, Requests, Store};
pub use table::{Backoff, Sizes, classify, request_scope, request_scope_until};
pub(crate) use table::{n, s, signed};
