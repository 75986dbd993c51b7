//! `delete-post`: see `blog::api::posts::delete_post`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::posts::delete_post).await
}
