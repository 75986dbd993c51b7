//! The blog backend: one DynamoDB table, one Lambda per route (the seeds'
//! ten requests, finding a user by name, and taking back a post, a comment
//! or a like), and the stream fan-out.
//!
//! Read it top-down:
//! - [`routes`]: the HTTP contract, route by route, and which function serves it.
//! - [`api`]: one handler per request (C1–C4, Q1–Q6), parsing and authorising it.
//! - [`store`]: the single-table data access, one module per entity, each
//!   going to DynamoDB only through `store::table` (the table layer).
//! - [`keys`]: every key format of the table, in one place, and the `Entity`
//!   trait through which items know their keys.
//! - [`ids`], [`text`], [`model`]: validated identifiers, text rules and the JSON shapes;
//!   [`markdown`]: a post's content rendered; [`mentions`]: `@username` in a
//!   post or comment and the users it names;
//!   [`revision`]: what an edit's `If-Match` compares.
//! - [`fanout`]: the DynamoDB Streams consumer that keeps denormalised copies true.
//! - `audit` (the `admin` feature): the offline check (and repair) of every
//!   denormalised value.
//! - [`startup`]: what every Lambda `main` calls.
//!
//! The local-only stand-ins (the API Gateway stand-in, the stream poller) live
//! in the `local` crate, and what only `blog-admin`, the benchmark and the
//! tests run is behind the `admin` feature, so that no Lambda compiles them.

pub mod api;
#[cfg(feature = "admin")]
pub mod audit;
pub mod clock;
pub mod fanout;
pub mod ids;
pub mod keys;
pub mod markdown;
pub mod mentions;
pub mod metrics;
pub mod model;
pub mod recovery;
pub mod revision;
pub mod routes;
pub mod startup;
pub mod store;
pub mod text;
pub mod timestamp;
