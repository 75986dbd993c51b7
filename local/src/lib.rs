//! Local-only stand-ins for what AWS provides around the functions, kept out
//! of the `blog` library so that no Lambda compiles or links them:
//! - [`local_gateway`]: an in-process API Gateway stand-in for the Rust tests
//!   (claims from a test header, no tokens), and the payload 2.0 event
//!   builder that it, [`api_gateway`] and the benchmark share.
//! - [`stream_poller`]: the stand-in for Lambda's DynamoDB Streams event source
//!   (`blog-admin stream-poller`, the tests, the benchmark).
//! - [`api_gateway`]: the local API Gateway, from template.yaml: CORS,
//!   routes, throttles, the JWT authorizer and payload 2.0 events sent to
//!   `cargo lambda watch`'s Invoke API.
//! - [`scheduler`]: the stand-in for EventBridge's schedules (`blog-admin
//!   scheduler`): the template's `Schedule` events, run at their rate.
//! - [`billing`]: what DynamoDB bills for a command's writes, from the items
//!   before and after it (the tests and the benchmark).

pub mod api_gateway;
pub mod billing;
pub mod local_gateway;
pub mod scheduler;
pub mod stream_poller;
