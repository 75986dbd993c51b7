//! `list-user-posts`: see `blog::api::posts::list_user_posts`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::posts::list_user_posts).await
}
