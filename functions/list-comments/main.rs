//! `list-comments`: see `blog::api::comments::list_comments`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::comments::list_comments).await
}
