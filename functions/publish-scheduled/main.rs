//! `publish-scheduled`: run every minute by an EventBridge schedule; see
//! `blog::store::schedule`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), blog::startup::Error> {
    blog::startup::run_scheduled(|store, deadline| async move {
        store.fanout().publish_due(&deadline).await
    })
    .await
}
