//! Local-only stand-ins for what AWS provides around the functions, kept out
//! of the `blog` library so that no Lambda compiles or links them:
//! - [`local_gateway`]: an API Gateway HTTP API stand-in for the tests, the
//!   fuzzer (`blog-admin gateway`) and the benchmark's events.
//! - [`stream_poller`]: the stand-in for Lambda's DynamoDB Streams event source
//!   (`blog-admin stream-poller`, the tests, the benchmark).
//! - [`cors_front`]: API Gateway's CORS handling in front of `cargo lambda
//!   watch` (`blog-admin cors-front`, the local stack).
//! - [`billing`]: what DynamoDB bills for a command's writes, from the items
//!   before and after it (the tests and the benchmark).

pub mod billing;
pub mod cors_front;
pub mod local_gateway;
pub mod stream_poller;
