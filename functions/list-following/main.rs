//! `list-following`: see `blog::api::follows::list_following`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::follows::list_following).await
}
