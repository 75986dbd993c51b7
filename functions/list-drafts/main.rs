//! `list-drafts`: see `blog::api::posts::list_drafts`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::posts::list_drafts).await
}
