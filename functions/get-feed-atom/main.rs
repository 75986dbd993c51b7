//! `get-feed-atom`: see `blog::api::atom::get_feed_atom`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::atom::get_feed_atom).await
}
