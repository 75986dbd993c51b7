//! `park-failures`: the fan-out's failure queue consumer; see `blog::recovery`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_failure_queue(blog::recovery::handle_notices).await
}
