//! Real DynamoDB cancels a transaction that collides with another one on the
//! same item (`TransactionConflict`), as on a hot post; DynamoDB Local never
//! does. This HTTP client answers chosen TransactWriteItems calls the way
//! DynamoDB does in that case, without sending them, so the store's retry path
//! runs against the real SDK's parsing of the real error.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use aws_sdk_dynamodb::config::{HttpClient, RuntimeComponents, SharedHttpClient};
use aws_smithy_runtime_api::client::{
    http::{HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector},
    orchestrator::{HttpRequest, HttpResponse},
};
use aws_smithy_types::body::SdkBody;

use crate::support::{TestApi, table_snapshot};

const CONFLICT: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, None, TransactionConflict, None]","CancellationReasons":[{"Code":"None"},{"Code":"None"},{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"},{"Code":"None"}]}"#;

/// Answers the next `remaining` transactions with a conflict.
#[derive(Debug, Clone)]
struct Conflicts {
    inner: SharedHttpClient,
    remaining: Arc<AtomicUsize>,
}

impl Conflicts {
    fn new() -> Self {
        Self {
            inner: aws_smithy_http_client::Builder::new().build_http(),
            remaining: Arc::default(),
        }
    }

    fn inject(&self, count: usize) {
        self.remaining.store(count, Ordering::SeqCst);
    }
}

impl HttpClient for Conflicts {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(ConflictingConnector {
            inner: self.inner.http_connector(settings, components),
            remaining: self.remaining.clone(),
        })
    }
}

#[derive(Debug)]
struct ConflictingConnector {
    inner: SharedHttpConnector,
    remaining: Arc<AtomicUsize>,
}

impl HttpConnector for ConflictingConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let is_transaction = request
            .headers()
            .get("x-amz-target")
            .is_some_and(|target| target.ends_with(".TransactWriteItems"));
        let inject = is_transaction
            && self
                .remaining
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if !inject {
            return self.inner.call(request);
        }
        let mut response =
            HttpResponse::new(400u16.try_into().expect("status"), SdkBody::from(CONFLICT));
        response
            .headers_mut()
            .insert("content-type", "application/x-amz-json-1.0");
        HttpConnectorFuture::ready(Ok(response))
    }
}

async fn hot_post(api: &TestApi) -> (String, String) {
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    (fan, api.post(&author, "Hot", "post").await)
}

#[tokio::test]
async fn conflicting_transactions_are_retried_until_they_land() {
    let conflicts = Conflicts::new();
    let api = TestApi::start_with_http(SharedHttpClient::new(conflicts.clone())).await;
    let (fan, post) = hot_post(&api).await;

    conflicts.inject(3);
    api.meter.take();
    let (status, _) = api.like_post(&fan, &post).await;
    assert_eq!(status, 201);
    let attempts = api
        .meter
        .take()
        .iter()
        .filter(|c| c.operation == "TransactWriteItems")
        .count();
    assert_eq!(attempts, 4, "three conflicts, then the write");
    assert_eq!(api.get_post(&post).await.1["likeCount"], 1);

    conflicts.inject(2);
    let (status, _) = api.comment_on(&fan, &post, "hi").await;
    assert_eq!(status, 201);
    assert_eq!(api.get_post(&post).await.1["commentCount"], 1);
}

#[tokio::test]
async fn endless_conflicts_end_in_503_with_nothing_written() {
    let conflicts = Conflicts::new();
    let api = TestApi::start_with_http(SharedHttpClient::new(conflicts.clone())).await;
    let (fan, post) = hot_post(&api).await;
    let before = table_snapshot(&api).await;

    conflicts.inject(usize::MAX);
    let (status, body) = api.like_post(&fan, &post).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("unavailable"))
    );
    conflicts.inject(0);
    assert_eq!(table_snapshot(&api).await, before);

    let (status, _) = api.like_post(&fan, &post).await;
    assert_eq!(status, 201, "the next try goes through");
}
