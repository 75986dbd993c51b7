//! `find-user`: see `blog::api::users::find_user`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::users::find_user).await
}
