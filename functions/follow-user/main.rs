//! `follow-user`: see `blog::api::follows::follow_user`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::follows::follow_user).await
}
