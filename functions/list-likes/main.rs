//! `list-likes`: see `blog::api::likes::list_likes`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::likes::list_likes).await
}
