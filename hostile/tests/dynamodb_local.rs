//! The proxy in front of the real DynamoDB Local, driven by the real SDK:
//! what it injects must be what the SDK parses as DynamoDB's own errors.
//! Needs `DYNAMODB_ENDPOINT` (DynamoDB Local's URL); skipped without it.

use std::{
    collections::HashMap,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use aws_sdk_dynamodb::{
    Client,
    config::{BehaviorVersion, Credentials, Region, retry::RetryConfig},
    error::ProvideErrorMetadata,
    operation::transact_write_items::TransactWriteItemsError,
    types::{
        AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
        KeyType, Projection, ProjectionType, Put, ScalarAttributeType, StreamSpecification,
        StreamViewType, TransactWriteItem, Update,
    },
};
use hostile::{Faults, PartitionLimits, Proxy, partitions::Kind};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

const INDEX: &str = "byGroup";

fn upstream() -> Option<String> {
    let endpoint = std::env::var("DYNAMODB_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty());
    if endpoint.is_none() {
        eprintln!(
            "skipped: set DYNAMODB_ENDPOINT to DynamoDB Local's URL to run the proxy against it"
        );
    }
    endpoint
}

/// A client with the SDK's standard retries (`attempts` in all), quickly.
fn client(endpoint: &str, attempts: u32) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
        .endpoint_url(endpoint)
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(attempts)
                .with_initial_backoff(Duration::from_millis(5)),
        )
        .build();
    Client::from_conf(config)
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

fn now_minus(ago: Duration) -> String {
    (OffsetDateTime::now_utc() - ago)
        .format(&Rfc3339)
        .expect("format")
}

/// A proxy with `faults` before DynamoDB Local, a client through it, a
/// client straight to DynamoDB Local, and a fresh table.
struct Setup {
    proxy: Proxy,
    through: Client,
    direct: Client,
    table: String,
}

impl Setup {
    async fn new(upstream: &str, test: &str, faults: Faults, attempts: u32) -> Setup {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let proxy = Proxy::start(listener, upstream, faults)
            .await
            .expect("start");
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_nanos();
        let setup = Setup {
            through: client(&proxy.url(), attempts),
            direct: client(upstream, 3),
            proxy,
            table: format!("hostile-{test}-{nanos}"),
        };
        setup.create_table(&setup.direct).await;
        setup
    }

    async fn create_table(&self, client: &Client) {
        let attr = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute")
        };
        let key = |name: &str, kind| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .expect("key")
        };
        let index = GlobalSecondaryIndex::builder()
            .index_name(INDEX)
            .key_schema(key("group", KeyType::Hash))
            .key_schema(key("createdAt", KeyType::Range))
            .projection(
                Projection::builder()
                    .projection_type(ProjectionType::All)
                    .build(),
            )
            .build()
            .expect("index");
        client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("pk"))
            .attribute_definitions(attr("group"))
            .attribute_definitions(attr("createdAt"))
            .key_schema(key("pk", KeyType::Hash))
            .global_secondary_indexes(index)
            .stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::NewImage)
                    .build()
                    .expect("stream"),
            )
            .send()
            .await
            .expect("create table");
    }

    fn item(&self, pk: &str, created_at: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("pk".to_owned(), s(pk)),
            ("group".to_owned(), s("g")),
            ("createdAt".to_owned(), s(created_at)),
        ])
    }

    /// The item as DynamoDB Local holds it, read past the proxy.
    async fn stored(&self, pk: &str) -> Option<HashMap<String, AttributeValue>> {
        self.direct
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .consistent_read(true)
            .send()
            .await
            .expect("direct get")
            .item
    }

    async fn query_index(&self, client: &Client) -> (Vec<String>, i32) {
        let out = client
            .query()
            .table_name(&self.table)
            .index_name(INDEX)
            .key_condition_expression("#g = :g")
            .expression_attribute_names("#g", "group")
            .expression_attribute_values(":g", s("g"))
            .send()
            .await
            .expect("query index");
        let ids = out
            .items()
            .iter()
            .filter_map(|i| i.get("pk")?.as_s().ok().cloned())
            .collect();
        (ids, out.count)
    }

    /// A transaction of a conditional put of `order` and an increment of
    /// `counter`: applied twice, either the condition fails or `hits` is 2.
    fn transaction(&self, order: &str) -> Vec<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(self.item(order, &now_minus(Duration::ZERO))))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .expect("put");
        let update = Update::builder()
            .table_name(&self.table)
            .key("pk", s("counter"))
            .update_expression("ADD hits :one")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .build()
            .expect("update");
        vec![
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().update(update).build(),
        ]
    }

    async fn hits(&self) -> Option<String> {
        let counter = self.stored("counter").await?;
        counter.get("hits")?.as_n().ok().cloned()
    }

    async fn drop_table(self) {
        let _ = self
            .direct
            .delete_table()
            .table_name(&self.table)
            .send()
            .await;
    }
}

/// The reason codes of a `TransactionCanceledException`, item by item.
fn cancellation_codes<R: std::fmt::Debug + Send + Sync + 'static>(
    err: aws_sdk_dynamodb::error::SdkError<TransactWriteItemsError, R>,
) -> Vec<String> {
    let TransactWriteItemsError::TransactionCanceledException(cancelled) = err.into_service_error()
    else {
        panic!("not a TransactionCanceledException");
    };
    cancelled
        .cancellation_reasons()
        .iter()
        .map(|r| r.code().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn with_no_faults_the_proxy_is_transparent() {
    let Some(upstream) = upstream() else { return };
    let t = Setup::new(&upstream, "transparent", Faults::none(), 1).await;
    let created = now_minus(Duration::ZERO);

    // Control plane through the proxy.
    t.through
        .describe_table()
        .table_name(&t.table)
        .send()
        .await
        .expect("describe");
    t.through
        .put_item()
        .table_name(&t.table)
        .set_item(Some(t.item("a", &created)))
        .send()
        .await
        .expect("put");
    let got = t
        .through
        .get_item()
        .table_name(&t.table)
        .key("pk", s("a"))
        .send()
        .await
        .expect("get");
    assert_eq!(got.item, t.stored("a").await);
    let queried = t
        .through
        .query()
        .table_name(&t.table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", s("a"))
        .send()
        .await
        .expect("query");
    assert_eq!(queried.count, 1);
    assert_eq!(t.query_index(&t.through).await, (vec!["a".to_owned()], 1));
    t.through
        .transact_write_items()
        .set_transact_items(Some(t.transaction("b")))
        .send()
        .await
        .expect("transaction");
    assert_eq!(t.hits().await.as_deref(), Some("1"));

    // DynamoDB Streams requests pass through too (the local stream poller's).
    let streams = aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::Config::builder()
            .behavior_version(aws_sdk_dynamodbstreams::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodbstreams::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodbstreams::config::Credentials::new(
                "local", "local", None, None, "tests",
            ))
            .endpoint_url(t.proxy.url())
            .build(),
    );
    let listed = streams
        .list_streams()
        .table_name(&t.table)
        .send()
        .await
        .expect("list streams");
    assert_eq!(listed.streams().len(), 1);

    // Many requests at once.
    let mut gets = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let request = t.through.get_item().table_name(&t.table).key("pk", s("a"));
        gets.spawn(request.send());
    }
    while let Some(done) = gets.join_next().await {
        assert!(done.expect("join").expect("get").item.is_some());
    }

    let stats = t.proxy.stats();
    assert_eq!(stats.faults(), 0, "{stats}");
    assert_eq!(stats.gsi_hidden_items, 0);
    assert_eq!(stats.forwarded("PutItem"), 1);
    assert_eq!(stats.forwarded("GetItem"), 65);
    assert_eq!(stats.forwarded("Query"), 2);
    assert_eq!(stats.forwarded("TransactWriteItems"), 1);
    assert_eq!(stats.forwarded("DynamoDBStreams_20120810.ListStreams"), 1);
    assert_eq!(stats.requests, stats.forwarded_total());
    t.drop_table().await;
}

#[tokio::test]
async fn a_cancelled_transaction_reads_like_dynamodbs() {
    let Some(upstream) = upstream() else { return };
    let faults = Faults {
        transaction_cancel: 1.0,
        ..Faults::none()
    };
    let t = Setup::new(&upstream, "cancel", faults, 3).await;
    let err = t
        .through
        .transact_write_items()
        .set_transact_items(Some(t.transaction("order")))
        .send()
        .await
        .expect_err("cancelled");
    let codes = cancellation_codes(err);
    assert_eq!(codes.len(), 2, "one reason per item: {codes:?}");
    let faulted: Vec<&str> = codes
        .iter()
        .map(String::as_str)
        .filter(|c| *c != "None")
        .collect();
    assert!(
        matches!(faulted[..], ["ThrottlingError" | "TransactionConflict"]),
        "{codes:?}"
    );
    assert_eq!(t.stored("order").await, None, "nothing was sent");
    assert_eq!(t.hits().await, None);
    let stats = t.proxy.stats();
    assert_eq!(stats.transaction_cancel, 1, "the SDK does not retry it");
    assert_eq!(stats.forwarded("TransactWriteItems"), 0);
    t.drop_table().await;
}

#[tokio::test]
async fn a_write_conflict_fails_a_put() {
    let Some(upstream) = upstream() else { return };
    let faults = Faults {
        write_conflict: 1.0,
        ..Faults::none()
    };
    let t = Setup::new(&upstream, "conflict", faults, 3).await;
    let err = t
        .through
        .put_item()
        .table_name(&t.table)
        .set_item(Some(t.item("a", &now_minus(Duration::ZERO))))
        .send()
        .await
        .expect_err("conflict");
    assert_eq!(err.code(), Some("TransactionConflictException"));
    assert_eq!(t.stored("a").await, None);
    // Reads are not writes: they go through.
    let got = t
        .through
        .get_item()
        .table_name(&t.table)
        .key("pk", s("a"))
        .send()
        .await
        .expect("get");
    assert_eq!(got.item, None);
    assert!(t.proxy.stats().write_conflict >= 1);
    t.drop_table().await;
}

#[tokio::test]
async fn throttling_is_retried_by_the_sdk() {
    let Some(upstream) = upstream() else { return };
    let faults = Faults {
        throttle: 1.0,
        ..Faults::none()
    };
    let t = Setup::new(&upstream, "throttle", faults, 3).await;
    let err = t
        .through
        .get_item()
        .table_name(&t.table)
        .key("pk", s("a"))
        .send()
        .await
        .expect_err("throttled");
    assert!(
        matches!(
            err.code(),
            Some("ThrottlingException" | "ProvisionedThroughputExceededException")
        ),
        "{:?}",
        err.code()
    );
    assert_eq!(t.proxy.stats().throttle, 3, "every attempt was throttled");

    // Switched off, the next request goes through.
    t.proxy.set_faults(Faults::none());
    t.through
        .get_item()
        .table_name(&t.table)
        .key("pk", s("a"))
        .send()
        .await
        .expect("get");
    t.drop_table().await;
}

/// A transaction whose response is lost after it committed, and the SDK's
/// retries with the same ClientRequestToken. Real DynamoDB answers such a
/// retry (same token and parameters, within 10 minutes) with success and does
/// not apply the transaction again; DynamoDB Local 1.25.1 does the same, so
/// every attempt commits nothing new and is answered 200 (which the proxy
/// loses again, at rate 1). A retry with a new token would fail the put's
/// condition instead.
#[tokio::test]
async fn a_lost_response_commits_once() {
    let Some(upstream) = upstream() else { return };
    let faults = Faults {
        lost_response: 1.0,
        ..Faults::none()
    };
    let t = Setup::new(&upstream, "lost", faults, 3).await;
    // At most 36 characters; the table's name ends with a unique number.
    let token: String = t.table.chars().rev().take(36).collect();
    let items = t.transaction("order");
    let err = t
        .through
        .transact_write_items()
        .set_transact_items(Some(items.clone()))
        .client_request_token(&token)
        .send()
        .await
        .expect_err("the client never sees the commit");
    assert_eq!(err.code(), Some("InternalServerError"), "{err:?}");
    assert!(t.stored("order").await.is_some(), "committed upstream");
    assert_eq!(t.hits().await.as_deref(), Some("1"), "committed once");
    let stats = t.proxy.stats();
    assert_eq!(stats.forwarded("TransactWriteItems"), 3, "the SDK retried");
    assert_eq!(
        stats.lost_response, 3,
        "DynamoDB Local answered each retry with the token 200, not a failed condition"
    );

    // A later retry is a replay: the proxy does not cancel it, and DynamoDB
    // Local answers it without applying it again, through the proxy or not.
    t.proxy.set_faults(Faults {
        transaction_cancel: 1.0,
        ..Faults::none()
    });
    for client in [&t.through, &t.direct] {
        client
            .transact_write_items()
            .set_transact_items(Some(items.clone()))
            .client_request_token(&token)
            .send()
            .await
            .expect("an idempotent retry");
    }
    assert_eq!(t.hits().await.as_deref(), Some("1"));
    assert_eq!(t.proxy.stats().transaction_cancel, 0);
    // The token with other parameters is refused, as DynamoDB does.
    let mismatched = t
        .direct
        .transact_write_items()
        .set_transact_items(Some(t.transaction("other")))
        .client_request_token(&token)
        .send()
        .await
        .expect_err("another transaction with the same token");
    assert_eq!(
        mismatched.code(),
        Some("IdempotentParameterMismatchException")
    );
    assert_eq!(t.stored("other").await, None);
    t.drop_table().await;
}

#[tokio::test]
async fn gsi_lag_hides_fresh_items_from_index_queries() {
    let Some(upstream) = upstream() else { return };
    let faults = Faults {
        gsi_lag: Duration::from_secs(60),
        ..Faults::none()
    };
    let t = Setup::new(&upstream, "lag", faults, 1).await;
    for (pk, age) in [("old", 120), ("fresh", 0)] {
        t.direct
            .put_item()
            .table_name(&t.table)
            .set_item(Some(t.item(pk, &now_minus(Duration::from_secs(age)))))
            .send()
            .await
            .expect("put");
    }
    assert_eq!(t.query_index(&t.through).await, (vec!["old".to_owned()], 1));
    // The base table is strongly consistent: nothing hidden there.
    let base = t
        .through
        .get_item()
        .table_name(&t.table)
        .key("pk", s("fresh"))
        .send()
        .await
        .expect("get");
    assert!(base.item.is_some());
    let stats = t.proxy.stats();
    assert_eq!((stats.gsi_lagged_queries, stats.gsi_hidden_items), (1, 1));

    t.proxy.set_faults(Faults::none());
    let (mut ids, count) = t.query_index(&t.through).await;
    ids.sort();
    assert_eq!(
        (ids, count),
        (vec!["fresh".to_owned(), "old".to_owned()], 2)
    );
    t.drop_table().await;
}

#[tokio::test]
async fn a_concurrent_workload_sees_only_dynamodbs_errors() {
    let Some(upstream) = upstream() else { return };
    let faults = Faults {
        seed: 1,
        ..Faults::hostile()
    };
    let t = Setup::new(&upstream, "load", faults, 3).await;
    let mut work = tokio::task::JoinSet::new();
    for i in 0..200 {
        let (client, table) = (t.through.clone(), t.table.clone());
        let item = t.item(&format!("item-{i}"), &now_minus(Duration::ZERO));
        let transaction = t.transaction(&format!("order-{i}"));
        work.spawn(async move {
            let result = match i % 3 {
                0 => client
                    .put_item()
                    .table_name(&table)
                    .set_item(Some(item))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| e.code().map(str::to_owned)),
                1 => client
                    .get_item()
                    .table_name(&table)
                    .key("pk", s("item-0"))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| e.code().map(str::to_owned)),
                _ => client
                    .transact_write_items()
                    .set_transact_items(Some(transaction))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| e.code().map(str::to_owned)),
            };
            (i, result)
        });
    }
    let mut failed = 0;
    while let Some(done) = work.join_next().await {
        let (i, result) = done.expect("join");
        let Err(code) = result else { continue };
        failed += 1;
        let code = code.unwrap_or_default();
        let expected: &[&str] = match i % 3 {
            // A plain write's answer can be lost after it landed, too.
            0 => &[
                "TransactionConflictException",
                "InternalServerError",
                "ThrottlingException",
                "ProvisionedThroughputExceededException",
            ],
            1 => &[
                "ThrottlingException",
                "ProvisionedThroughputExceededException",
            ],
            _ => &[
                "TransactionCanceledException",
                "InternalServerError",
                "ThrottlingException",
                "ProvisionedThroughputExceededException",
            ],
        };
        assert!(expected.contains(&code.as_str()), "request {i}: {code}");
    }
    let stats = t.proxy.stats();
    println!("{stats}; {failed} of 200 requests failed after the SDK's retries");
    assert!(stats.faults() > 0 && failed < 100, "{stats}");
    assert_eq!(
        stats.requests,
        stats.forwarded_total() + stats.faults() - stats.lost_response,
        "every request was either forwarded or answered by the proxy: {stats}"
    );
    t.drop_table().await;
}

// ------------------------------------------------------------ partition limits

/// A proxy enforcing DynamoDB's partition limits times `scale`, without
/// faults, and a client through it that does not retry.
async fn limited(upstream: &str, test: &str, scale: f64) -> Setup {
    let t = Setup::new(upstream, test, Faults::none(), 1).await;
    t.proxy
        .set_partition_limits(Some(PartitionLimits::scaled(scale).expect("scale")));
    t
}

impl Setup {
    /// An item of `pk` in index group `group`, with a body of `bytes` bytes
    /// (the item is about 50 bytes more).
    fn sized(&self, pk: &str, group: &str, bytes: usize) -> HashMap<String, AttributeValue> {
        let mut item = self.item(pk, &now_minus(Duration::ZERO));
        item.insert("group".to_owned(), s(group));
        item.insert("body".to_owned(), s(&"x".repeat(bytes)));
        item
    }

    async fn put(
        &self,
        client: &Client,
        item: HashMap<String, AttributeValue>,
    ) -> Result<(), String> {
        client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| format!("{:?}", e.into_service_error()))
    }

    fn allowance(&self, index: Option<&str>, key: &str, kind: Kind) -> f64 {
        self.proxy
            .allowance(&self.table, index, key, kind)
            .unwrap_or_else(|| panic!("{key} was never charged"))
    }
}

/// `actual` is `expected`, or a little more: buckets refill as time passes.
#[track_caller]
fn about(actual: f64, expected: f64) {
    assert!(
        (expected..expected + 0.5).contains(&actual),
        "{actual} is not {expected} (or a little more)"
    );
}

/// At a scale of 0.001 (1 WCU and 3 RCU a second per key) the refill during
/// the test is small against the charges, so each charge reads off the
/// partition's allowance: a write 1 WCU per KB of the larger image, twice in
/// a transaction, and its index entry at the plain rate; a read 4 KB units,
/// half when eventually consistent.
#[tokio::test]
async fn each_request_is_charged_as_dynamodb_bills_it() {
    let Some(upstream) = upstream() else { return };
    let t = limited(&upstream, "charges", 0.001).await;
    let (table, index) = (None, Some(INDEX));

    // A 2.9 KB put: 3 units on its partition and 3 on its index entry's.
    t.put(&t.through, t.sized("a", "g", 2800))
        .await
        .expect("put");
    about(t.allowance(table, "a", Kind::Write), 1.0 - 3.0);
    about(t.allowance(index, "g", Kind::Write), 1.0 - 3.0);

    // A small transactional put: 2 units on the table, 1 on the index.
    let put = Put::builder()
        .table_name(&t.table)
        .set_item(Some(t.sized("b", "h", 10)))
        .build()
        .expect("put");
    t.through
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .send()
        .await
        .expect("transaction");
    about(t.allowance(table, "b", Kind::Write), 1.0 - 2.0);
    about(t.allowance(index, "h", Kind::Write), 1.0 - 1.0);

    // An update that grows a small item to 4.8 KB: the larger image, 5
    // units, on the table and on the index entry (read back once it took
    // effect).
    t.put(&t.direct, t.sized("c", "i", 10))
        .await
        .expect("put past the proxy");
    t.through
        .update_item()
        .table_name(&t.table)
        .key("pk", s("c"))
        .update_expression("SET body = :big")
        .expression_attribute_values(":big", s(&"y".repeat(4800)))
        .send()
        .await
        .expect("update");
    about(t.allowance(table, "c", Kind::Write), 1.0 - 5.0);
    about(t.allowance(index, "i", Kind::Write), 1.0 - 5.0);

    // Reads: 2.9 KB strongly consistent is 1 unit; 4.8 KB eventually
    // consistent is 2 units halved; a Query of the index's "g" finds the
    // 2.9 KB item, eventually consistent: half a unit.
    let got = t
        .through
        .get_item()
        .table_name(&t.table)
        .key("pk", s("a"))
        .consistent_read(true)
        .send()
        .await
        .expect("get");
    assert!(got.item.is_some());
    about(t.allowance(table, "a", Kind::Read), 3.0 - 1.0);
    t.through
        .get_item()
        .table_name(&t.table)
        .key("pk", s("c"))
        .send()
        .await
        .expect("get");
    about(t.allowance(table, "c", Kind::Read), 3.0 - 1.0);
    assert_eq!(t.query_index(&t.through).await.1, 1);
    about(t.allowance(index, "g", Kind::Read), 3.0 - 0.5);
    assert_eq!(t.proxy.stats().partition_throttled(), 0);
    t.drop_table().await;
}

/// A write is refused when a partition it touches, the table's or an
/// index's, has less than its cost left; the refusal is DynamoDB's, with
/// its throttling reason, and writes nothing.
#[tokio::test]
async fn a_spent_partition_refuses_writes_with_dynamodbs_reason() {
    let Some(upstream) = upstream() else { return };
    let t = limited(&upstream, "refusals", 0.001).await;

    // The table's partition: a second write to one key within the second.
    t.put(&t.through, t.sized("hot", "g1", 10))
        .await
        .expect("first put");
    let refused = t
        .put(&t.through, t.sized("hot", "g2", 20))
        .await
        .expect_err("the partition is spent");
    assert!(
        refused.contains("ProvisionedThroughputExceededException"),
        "{refused}"
    );
    assert!(
        refused.contains("TableWriteKeyRangeThroughputExceeded"),
        "{refused}"
    );
    assert!(
        t.stored("hot").await.is_some_and(|i| i["group"] == s("g1")),
        "the refused put wrote nothing"
    );

    // An index's partition refuses the base write, whose own partition is
    // fresh.
    t.put(&t.through, t.sized("one", "shared", 10))
        .await
        .expect("put");
    let refused = t
        .put(&t.through, t.sized("two", "shared", 10))
        .await
        .expect_err("the index partition is spent");
    assert!(
        refused.contains("IndexWriteKeyRangeThroughputExceeded"),
        "{refused}"
    );
    assert_eq!(t.stored("two").await, None);

    // A transaction: item by item, ThrottlingError where a partition is
    // spent, None elsewhere; nothing written.
    let put = |pk: &str, group: &str| {
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&t.table)
                    .set_item(Some(t.sized(pk, group, 10)))
                    .build()
                    .expect("put"),
            )
            .build()
    };
    let err = t
        .through
        .transact_write_items()
        .transact_items(put("hot", "g3"))
        .transact_items(put("fresh", "g4"))
        .send()
        .await
        .expect_err("cancelled");
    let codes = cancellation_codes(err);
    assert_eq!(codes, ["ThrottlingError", "None"]);
    assert_eq!(t.stored("fresh").await, None);

    // Reads: a 9 KB item strongly consistent is 3 units, the whole second.
    t.put(&t.direct, t.sized("big", "g5", 9000))
        .await
        .expect("put past the proxy");
    let get = || {
        t.through
            .get_item()
            .table_name(&t.table)
            .key("pk", s("big"))
            .consistent_read(true)
            .send()
    };
    get().await.expect("the first read");
    let refused = format!("{:?}", get().await.expect_err("spent").into_service_error());
    assert!(
        refused.contains("TableReadKeyRangeThroughputExceeded"),
        "{refused}"
    );
    assert_eq!(t.proxy.stats().partition_throttled(), 4);
    t.drop_table().await;
}

/// A BatchGetItem of keys in several partitions, one of them spent, is read
/// in part, as DynamoDB reads it: the others' items answered, the spent
/// one's key in `UnprocessedKeys` (with the table's request as asked);
/// refused whole only when no key's partition has room.
#[tokio::test]
async fn a_batch_read_meeting_a_spent_partition_leaves_its_keys_unprocessed() {
    let Some(upstream) = upstream() else { return };
    let t = limited(&upstream, "batches", 0.001).await;
    for pk in ["fresh1", "fresh2"] {
        t.put(&t.direct, t.sized(pk, "g", 10))
            .await
            .expect("put past the proxy");
    }
    // 3 RCU a second: a strongly consistent read of a 300 KB item (74 RCU)
    // takes the partition's allowance 71 below zero, which a read finds
    // spent for 20 seconds and more, however slow this machine.
    t.put(&t.direct, t.sized("spent", "g", 300_000))
        .await
        .expect("put past the proxy");
    t.through
        .get_item()
        .table_name(&t.table)
        .key("pk", s("spent"))
        .consistent_read(true)
        .send()
        .await
        .expect("the read that spends it");
    let keys = |pks: &[&str]| {
        let mut asked = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
            .projection_expression("pk, #g")
            .expression_attribute_names("#g", "group");
        for pk in pks {
            asked = asked.keys(HashMap::from([("pk".to_owned(), s(pk))]));
        }
        asked.build().expect("keys")
    };
    let read = t
        .through
        .batch_get_item()
        .request_items(&t.table, keys(&["fresh1", "spent", "fresh2"]))
        .send()
        .await
        .expect("read in part");
    let mut found: Vec<String> = read
        .responses()
        .and_then(|r| r.get(&t.table))
        .into_iter()
        .flatten()
        .filter_map(|item| item.get("pk").and_then(|v| v.as_s().ok()).cloned())
        .collect();
    found.sort();
    assert_eq!(found, ["fresh1", "fresh2"]);
    let left = read
        .unprocessed_keys()
        .and_then(|u| u.get(&t.table))
        .expect("the spent partition's key unprocessed");
    assert_eq!(
        left.keys(),
        [HashMap::from([("pk".to_owned(), s("spent"))])]
    );
    assert_eq!(left.projection_expression(), Some("pk, #g"));
    // Only the spent partition's key: refused whole.
    let refused = t
        .through
        .batch_get_item()
        .request_items(&t.table, keys(&["spent"]))
        .send()
        .await
        .expect_err("nothing to read");
    let refused = format!("{:?}", refused.into_service_error());
    assert!(
        refused.contains("ProvisionedThroughputExceeded"),
        "{refused}"
    );
    assert_eq!(t.proxy.stats().partition_throttled(), 2);
    t.drop_table().await;
}

/// `count` puts of small items to each of `keys`, `per_second` a second
/// each, each sent on its tick whatever the others' latency; the refused
/// count per key and the seconds it took.
async fn offer(t: &Setup, keys: &[&str], per_second: u32, count: usize) -> (Vec<usize>, f64) {
    let started = std::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = tokio::task::JoinSet::new();
    for n in 0..count {
        tick.tick().await;
        for (k, key) in keys.iter().enumerate() {
            let put = t
                .through
                .put_item()
                .table_name(&t.table)
                .set_item(Some(t.sized(key, &format!("{key}-{n}"), 10)));
            sent.spawn(async move { (k, put.send().await.is_err()) });
        }
    }
    let mut refused = vec![0; keys.len()];
    while let Some(done) = sent.join_next().await {
        let (k, failed) = done.expect("join");
        refused[k] += usize::from(failed);
    }
    (refused, started.elapsed().as_secs_f64())
}

/// At 0.01 (10 WCU a second per key), a key offered 20 writes a second is
/// refused about half the time (less at first: its second of allowance), and
/// never serves more than its limit.
#[tokio::test]
async fn a_key_written_at_twice_its_limit_is_refused_about_half_the_time() {
    let Some(upstream) = upstream() else { return };
    let t = limited(&upstream, "twice", 0.01).await;
    let offered = 120;
    let (refused, seconds) = offer(&t, &["hot"], 20, offered).await;
    let served = offered - refused[0];
    assert!(
        served as f64 <= 10.0 + 10.0 * seconds + 1.0,
        "{served} served in {seconds:.1} s: more than the limit"
    );
    let share = refused[0] as f64 / offered as f64;
    assert!(
        (0.3..=0.6).contains(&share),
        "refused {share:.2} of {offered}"
    );
    assert_eq!(t.proxy.stats().partition_throttled(), refused[0] as u64);
    t.drop_table().await;
}

/// Two keys, each written just under its limit, are both served in full:
/// the limit is a partition's, not the table's.
#[tokio::test]
async fn two_keys_at_their_limit_each_are_both_served() {
    let Some(upstream) = upstream() else { return };
    let t = limited(&upstream, "two-keys", 0.01).await;
    let (refused, _) = offer(&t, &["left", "right"], 9, 36).await;
    assert_eq!(refused, [0, 0]);
    assert_eq!(t.proxy.stats().partition_throttled(), 0);
    t.drop_table().await;
}
