use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use aws_sdk_dynamodb::{
    error::SdkError,
    operation::transact_write_items::TransactWriteItemsError,
    types::{CancellationReason, error::TransactionCanceledException},
};

use super::{
    errors::{
        busy_call, busy_code, busy_transaction, classify, condition_failed_code, failed_conditions,
        lost,
    },
    tokens::{Tokens, next_token, token},
    *,
};
use crate::store::error::Busy;
use crate::{
    keys::{GSI1, GSI1PK, GSI1SK, Key, PK, SK},
    store::error::StoreError,
};

fn cancelled(codes: &[&str]) -> SdkError<TransactWriteItemsError, ()> {
    let mut err = TransactionCanceledException::builder();
    for code in codes {
        err = err.cancellation_reasons(CancellationReason::builder().code(*code).build());
    }
    SdkError::service_error(
        TransactWriteItemsError::TransactionCanceledException(err.build()),
        (),
    )
}

fn lost_answer() -> SdkError<TransactWriteItemsError, ()> {
    SdkError::timeout_error("the answer never came")
}

fn fast(attempts: u32) -> Backoff {
    Backoff {
        attempts,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(2),
        budget: Duration::from_secs(10),
        resolve: Duration::ZERO,
    }
}

async fn run(
    backoff: Backoff,
    answers: &[&[&str]],
) -> (Result<usize, SdkError<TransactWriteItemsError, ()>>, usize) {
    let calls = AtomicUsize::new(0);
    let result = backoff
        .retry("test", busy_transaction, || {
            let n = calls.fetch_add(1, Ordering::Relaxed);
            let answer = answers.get(n).map(|codes| cancelled(codes));
            async move {
                match answer {
                    Some(err) => Err(err),
                    None => Ok(n),
                }
            }
        })
        .await;
    (result, calls.load(Ordering::Relaxed))
}

#[tokio::test]
async fn conflicts_and_throttles_are_retried_until_the_write_lands() {
    let (result, calls) = run(
        fast(5),
        &[
            &["None", "TransactionConflict"],
            &["ThrottlingError", "None"],
            &["None", "ProvisionedThroughputExceeded"],
        ],
    )
    .await;
    assert_eq!(result.ok(), Some(3));
    assert_eq!(calls, 4);
}

#[tokio::test]
async fn retries_stop_after_the_last_attempt() {
    let conflict: &[&str] = &["TransactionConflict"];
    let (result, calls) = run(fast(4), &[conflict; 10]).await;
    assert_eq!(
        result.as_ref().err().and_then(busy_transaction),
        Some(Busy::Conflict)
    );
    assert_eq!(calls, 4);
}

#[tokio::test]
async fn the_default_backoff_sends_a_busy_call_eight_times_at_most() {
    let backoff = Backoff {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(1),
        ..Backoff::default()
    };
    let throttled: &[&str] = &["ThrottlingError"];
    let (result, calls) = run(backoff, &[throttled; 20]).await;
    assert!(result.is_err());
    assert_eq!(calls, 8);
}

#[tokio::test]
async fn retries_stop_when_the_time_budget_is_spent() {
    let backoff = Backoff {
        budget: Duration::ZERO,
        ..fast(100)
    };
    let conflict: &[&str] = &["TransactionConflict"];
    let (result, calls) = run(backoff, &[conflict; 10]).await;
    assert!(result.is_err());
    assert_eq!(calls, 1);
}

#[tokio::test]
async fn failed_conditions_are_answers_not_retried() {
    for codes in [
        &["ConditionalCheckFailed"][..],
        &["None", "ConditionalCheckFailed", "TransactionConflict"],
        &["ValidationError"],
    ] {
        let (result, calls) = run(fast(4), &[codes]).await;
        assert!(result.is_err());
        assert_eq!(calls, 1, "{codes:?}");
    }
}

#[test]
fn failed_conditions_name_their_items() {
    let err = cancelled(&["None", "ConditionalCheckFailed", "TransactionConflict"]);
    assert_eq!(failed_conditions(&err), Some(vec![false, true, false]));
    assert_eq!(failed_conditions(&cancelled(&["ThrottlingError"])), None);
    assert_eq!(failed_conditions(&lost_answer()), None);
}

#[test]
fn plain_errors_are_classified_by_code() {
    assert_eq!(
        busy_code("TransactionConflictException"),
        Some(Busy::Conflict)
    );
    for code in [
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
    ] {
        assert_eq!(busy_code(code), Some(Busy::Throttled), "{code}");
    }
    assert_eq!(busy_code("ConditionalCheckFailedException"), None);
    assert_eq!(busy_code("ValidationException"), None);
    assert!(condition_failed_code("ConditionalCheckFailedException"));
    assert!(condition_failed_code("ConditionalCheckFailed"));
    assert!(!condition_failed_code("TransactionConflict"));
}

#[test]
fn lost_answers_are_told_from_refusals() {
    assert!(lost(&lost_answer()));
    let server_error: SdkError<TransactWriteItemsError, ()> = SdkError::service_error(
        TransactWriteItemsError::generic(
            aws_sdk_dynamodb::error::ErrorMetadata::builder()
                .code("InternalServerError")
                .build(),
        ),
        (),
    );
    assert!(lost(&server_error));
    assert!(!lost(&cancelled(&["TransactionConflict"])));
    assert!(!lost(&cancelled(&["ConditionalCheckFailed"])));
}

#[test]
fn delays_stay_under_the_cap() {
    let backoff = Backoff::default();
    for attempt in 0..40 {
        assert!(backoff.delay(attempt) <= backoff.cap);
    }
}

#[test]
fn tokens_are_derived_from_the_request_and_the_transaction() {
    assert_eq!(token("req-1", 0), token("req-1", 0));
    assert_ne!(token("req-1", 0), token("req-1", 1));
    assert_ne!(token("req-1", 0), token("req-2", 0));
    assert!(token("req-1", 0).len() <= 36);
}

#[tokio::test]
async fn a_scope_numbers_its_transactions() {
    let tokens = request_scope("req-9", async { [next_token(), next_token()] }).await;
    assert_eq!(
        tokens,
        [token("req-9", 0), token("req-9", 1)],
        "the same request replayed gets the same tokens in the same order"
    );
    assert_ne!(next_token(), next_token(), "outside a scope each is random");
}

#[tokio::test]
async fn a_cancelled_attempt_gets_a_fresh_token_until_an_outcome_is_unknown() {
    request_scope("req-7", async {
        let tokens = Tokens::new();
        let first = tokens.current();
        tokens.after(&cancelled(&["TransactionConflict"]));
        let second = tokens.current();
        assert_ne!(first, second, "a cancelled attempt did not commit");
        assert!(!tokens.pinned());

        tokens.after(&lost_answer());
        assert!(tokens.pinned());
        assert_eq!(tokens.current(), second, "a lost answer keeps its token");
        // Whatever comes after: a cancellation, a throttle, another loss.
        tokens.after(&cancelled(&["TransactionConflict"]));
        tokens.after(&cancelled(&["ThrottlingError"]));
        tokens.after(&lost_answer());
        assert_eq!(tokens.current(), second);
        assert!(tokens.pinned());
    })
    .await;
}

#[test]
fn a_write_merges_its_change_and_condition_placeholders() {
    let write = Write::update(
        Key::new("POST#1".to_owned(), "POST").item(),
        Expr::new("SET #c = #c + :one")
            .name("#c", crate::keys::Counter::Likes.attribute())
            .value(":one", n(1)),
        Landed::Untold,
    )
    .when(Expr::new("attribute_exists(#pk)").name("#pk", PK));
    let (condition, names, values) = write.parts();
    assert_eq!(condition.as_deref(), Some("attribute_exists(#pk)"));
    let names = names.unwrap_or_default();
    assert_eq!(
        names.get("#c").map(String::as_str),
        Some(crate::keys::Counter::Likes.attribute())
    );
    assert_eq!(names.get("#pk").map(String::as_str), Some(PK));
    assert_eq!(values.unwrap_or_default().get(":one"), Some(&n(1)));
    // A delete without condition sends no empty maps (DynamoDB refuses them).
    let (condition, names, values) =
        Write::delete(Key::new("A".to_owned(), "B").item(), Deleted::IfGone).parts();
    assert!(condition.is_none() && names.is_none() && values.is_none());
}

#[test]
fn queries_name_the_sort_key_of_what_they_read() {
    let table = Query::partition("POST#1".to_owned()).begins_with("LIKE#");
    assert_eq!(table.key.text, "#pk = :pk AND begins_with(#sk, :prefix)");
    assert_eq!(table.key.names.get("#sk").map(String::as_str), Some(SK));
    let index = Query::gsi1("USER#u".to_owned()).between("A".into(), "B".into());
    assert_eq!(index.index, Some(GSI1));
    assert_eq!(index.key.names.get("#pk").map(String::as_str), Some(GSI1PK));
    assert_eq!(index.key.names.get("#sk").map(String::as_str), Some(GSI1SK));
}

#[test]
fn combined_conditions_read_as_written_whatever_each_side_holds() {
    let either = Expr::item_absent().or("version <= :v AND userVersion <= :uv");
    assert_eq!(
        either.text,
        format!("(attribute_not_exists({PK})) OR (version <= :v AND userVersion <= :uv)")
    );
    let guarded = Expr::new("a = :a OR b = :b").value(":a", n(1)).and_expr(
        Expr::new("c = :c OR d = :d")
            .name("#x", "x")
            .value(":c", n(2)),
    );
    assert_eq!(guarded.text, "(a = :a OR b = :b) AND (c = :c OR d = :d)");
    assert_eq!(guarded.values.get(":a"), Some(&n(1)));
    assert_eq!(guarded.values.get(":c"), Some(&n(2)));
    assert_eq!(guarded.names.get("#x").map(String::as_str), Some("x"));
    assert_eq!(
        Expr::item_exists().and("x > :zero").text,
        format!("(attribute_exists({PK})) AND (x > :zero)")
    );
}

/// Credentials that are never there, counting how often they were asked for.
#[derive(Debug, Default)]
struct NoCredentials(std::sync::Arc<AtomicUsize>);

impl aws_sdk_dynamodb::config::ProvideCredentials for NoCredentials {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.0.fetch_add(1, Ordering::SeqCst);
        aws_credential_types::provider::future::ProvideCredentials::ready(Err(
            aws_credential_types::provider::error::CredentialsError::not_loaded(
                "no providers in chain provided credentials",
            ),
        ))
    }
}

/// A call that cannot be signed for want of credentials is not a busy
/// DynamoDB: it is not retried, was not sent, and says what is missing.
#[tokio::test]
async fn missing_credentials_are_a_configuration_error_not_a_busy_database() {
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        // Never reached: the call fails before it is sent.
        .endpoint_url("http://127.0.0.1:9")
        .credentials_provider(NoCredentials(asked.clone()))
        .identity_cache(aws_sdk_dynamodb::config::IdentityCache::no_cache())
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    let result = fast(8)
        .retry("test", busy_call, || {
            client.describe_table().table_name("blog").send()
        })
        .await;
    let err = result.expect_err("no credentials");
    assert_eq!(asked.load(Ordering::SeqCst), 1, "tried once");
    assert!(!lost(&err), "never sent");
    match classify(err) {
        StoreError::Config(missing) => assert!(
            missing.contains("AWS_ACCESS_KEY_ID") && missing.contains("AWS_PROFILE"),
            "{missing}"
        ),
        other => panic!("{other:?}"),
    }
}

/// A table whose client counts each time it is asked for credentials (once
/// per call it tries to send) and has none: a request refused before
/// sending never asks.
fn unsendable() -> (Table, std::sync::Arc<AtomicUsize>) {
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .endpoint_url("http://127.0.0.1:9")
        .credentials_provider(NoCredentials(asked.clone()))
        .identity_cache(aws_sdk_dynamodb::config::IdentityCache::no_cache())
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    (Table::new(client, "blog").with_backoff(fast(1)), asked)
}

fn key(n: usize) -> crate::keys::Item {
    Key::new(format!("X#{n}"), "Y").item()
}

/// Whether `result` is the table layer's refusal of `limit` at `size`.
fn over<T: std::fmt::Debug>(
    result: Result<T, StoreError>,
    limit: crate::store::error::Limit,
    size: usize,
) -> bool {
    match result {
        Err(StoreError::OverLimit {
            limit: refused,
            size: at,
            ..
        }) => refused == limit && at == size,
        other => panic!("not refused for {limit:?}: {other:?}"),
    }
}

/// A transaction of 101 items is refused before it is sent (a bug, not the
/// client's doing); one of 100 is sent (here it fails for want of
/// credentials).
#[tokio::test]
async fn a_transaction_of_more_than_100_items_is_refused_before_sending() {
    use crate::store::error::Limit;
    let (table, asked) = unsendable();
    let transaction = |items: usize| {
        let mut tx = table.transaction("test");
        for n in 0..items {
            tx.add("check", Write::check(key(n), Expr::item_exists()));
        }
        tx
    };
    assert!(over(
        transaction(101).commit().await,
        Limit::TransactionItems,
        101
    ));
    assert_eq!(asked.load(Ordering::SeqCst), 0, "never sent");
    let sent = transaction(100).commit().await;
    assert!(matches!(sent, Err(StoreError::Config(_))), "{sent:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 1, "sent");
    // The refusal is the API's 500, its message says what and how many.
    let err = transaction(101).commit().await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        "test: 101 items in a transaction, over DynamoDB's 100"
    );
    // The table counts what it refused, and the largest it was asked for.
    assert_eq!(table.sizes().refused(), 2);
    assert_eq!(table.sizes().peak(Limit::TransactionItems), 101);
    assert_eq!(table.sizes().peak(Limit::BatchWriteItems), 0);
}

/// A BatchWriteItem of 26 writes is refused before sending; `put_all` and
/// `delete_all` send any number in calls of 25.
#[tokio::test]
async fn a_batch_write_of_more_than_25_is_refused_and_the_writers_split() {
    use crate::store::error::Limit;
    use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
    let (table, asked) = unsendable();
    let requests: Vec<WriteRequest> = (0..26)
        .map(|n| {
            let delete = DeleteRequest::builder()
                .set_key(Some(key(n)))
                .build()
                .expect("a delete");
            WriteRequest::builder().delete_request(delete).build()
        })
        .collect();
    assert!(over(
        table.write_batch("test", requests).await,
        Limit::BatchWriteItems,
        26
    ));
    assert_eq!(asked.load(Ordering::SeqCst), 0, "never sent");
    let keys: Vec<_> = (0..26).map(key).collect();
    let sent = table.delete_all("test", keys, 1).await;
    assert!(matches!(sent, Err(StoreError::Config(_))), "{sent:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 1, "the first call of 25 sent");
    assert_eq!(table.sizes().refused(), 1);
}

/// A BatchGetItem of 101 keys is refused before sending; `batch_get` sends
/// any number in calls of 100.
#[tokio::test]
async fn a_batch_get_of_more_than_100_keys_is_refused_and_the_reader_splits() {
    use crate::store::error::Limit;
    let (table, asked) = unsendable();
    let keys: Vec<_> = (0..101).map(key).collect();
    assert!(over(
        table.batch_get_call("test", keys.clone(), true).await,
        Limit::BatchGetKeys,
        101
    ));
    assert_eq!(asked.load(Ordering::SeqCst), 0, "never sent");
    let sent = table.batch_get("test", keys).await;
    assert!(matches!(sent, Err(StoreError::Config(_))), "{sent:?}");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the first call of 100 sent"
    );
}

/// A write with an expression over 4 KB is refused before sending, on its
/// own or as a transaction's item; one of exactly 4 KB is sent.
#[tokio::test]
async fn an_expression_over_4_kb_is_refused_before_sending() {
    use crate::store::error::Limit;
    let (table, asked) = unsendable();
    // `attribute_exists(PK)` (20 bytes), padded to `bytes`.
    let condition =
        |bytes: usize| Expr::new(format!("attribute_exists(PK){}", " ".repeat(bytes - 20)));
    let long = Write::delete(key(0), Deleted::Untold).when(condition(4097));
    assert!(over(
        table.write("test", &long).await,
        Limit::ExpressionBytes,
        4097
    ));
    let mut tx = table.transaction("test");
    tx.add("long", Write::check(key(0), condition(4097)));
    assert!(over(tx.commit().await, Limit::ExpressionBytes, 4097));
    assert_eq!(asked.load(Ordering::SeqCst), 0, "never sent");
    let within = Write::delete(key(0), Deleted::Untold).when(condition(4096));
    let sent = table.write("test", &within).await;
    assert!(matches!(sent, Err(StoreError::Config(_))), "{sent:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 1, "sent");
}
