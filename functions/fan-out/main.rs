//! `fan-out`: the DynamoDB Streams consumer; see `blog::fanout`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_stream(blog::fanout::handle_until).await
}
