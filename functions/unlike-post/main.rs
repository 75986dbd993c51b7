//! `unlike-post`: see `blog::api::likes::unlike_post`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::likes::unlike_post).await
}
