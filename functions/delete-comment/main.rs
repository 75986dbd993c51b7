//! `delete-comment`: see `blog::api::comments::delete_comment`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::comments::delete_comment).await
}
