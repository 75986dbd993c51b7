//! `list-notifications`: see `blog::api::notifications::list_notifications`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::notifications::list_notifications).await
}
