//! `list-blocks`: see `blog::api::blocks::list_blocks`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::blocks::list_blocks).await
}
