//! `block-user`: see `blog::api::blocks::block_user`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::blocks::block_user).await
}
