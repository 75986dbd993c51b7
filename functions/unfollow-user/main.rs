//! `unfollow-user`: see `blog::api::follows::unfollow_user`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::follows::unfollow_user).await
}
