//! `unblock-user`: see `blog::api::blocks::unblock_user`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::blocks::unblock_user).await
}
