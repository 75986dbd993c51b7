//! `list-tag-posts-atom`: see `blog::api::atom::list_tag_posts_atom`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::atom::list_tag_posts_atom).await
}
