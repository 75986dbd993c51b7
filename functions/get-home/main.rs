//! `get-home`: see `blog::api::home::home`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::home::home).await
}
