//! `update-user`: see `blog::api::users::update_user`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::users::update_user).await
}
