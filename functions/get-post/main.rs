//! `get-post`: see `blog::api::posts::get_post`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::posts::get_post).await
}
