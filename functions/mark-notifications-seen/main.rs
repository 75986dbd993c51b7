//! `mark-notifications-seen`: see `blog::api::notifications::mark_notifications_seen`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_http(blog::api::notifications::mark_notifications_seen).await
}
