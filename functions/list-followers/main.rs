//! `list-followers`: see `blog::api::follows::list_followers`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::follows::list_followers).await
}
