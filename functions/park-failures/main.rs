//! `park-failures`: the fan-out's failure queue consumer; see `blog::recovery`.
// The SQS runtime loop around the stream SDK's futures nests deeper than the
// compiler's default type-layout limit (128).
#![recursion_limit = "256"]

#[tokio::main]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_failure_queue(blog::recovery::handle_notices).await
}
