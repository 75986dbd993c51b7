//! `get-user`: see `blog::api::users::get_user`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::users::get_user).await
}
