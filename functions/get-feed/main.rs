//! `get-feed`: see `blog::api::feed::get_feed`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::feed::get_feed).await
}
