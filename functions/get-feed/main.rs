//! `get-feed`: see `blog::api::feed::get_feed`.

#[tokio::main]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::feed::get_feed).await
}
