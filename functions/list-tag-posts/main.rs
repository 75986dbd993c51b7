//! `list-tag-posts`: see `blog::api::tags::list_tag_posts`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::tags::list_tag_posts).await
}
