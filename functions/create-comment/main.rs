//! `create-comment`: see `blog::api::comments::create_comment`.

#[tokio::main]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::comments::create_comment).await
}
