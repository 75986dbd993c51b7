//! What DynamoDB answers when it cannot serve a request *now*, and how the store
//! retries it. DynamoDB Local never says any of this; the service does:
//!
//! | answer | from | the SDK retries it | we |
//! |---|---|---|---|
//! | `ProvisionedThroughputExceededException`, `ThrottlingException`, `RequestLimitExceeded` | any call | yes (3 attempts) | retry, then 503 / failed record |
//! | `InternalServerError`, `ServiceUnavailable` | any call | yes | retry, then 503 / failed record |
//! | `TransactionConflictException` | a plain write on an item a transaction holds | **no** | retry, then 503 / failed record |
//! | `TransactionInProgressException` | a transaction whose token is still running | no | retry |
//! | `TransactionCanceledException` with `TransactionConflict`, `ThrottlingError` or `ProvisionedThroughputExceeded` reasons | TransactWriteItems | no | retry, then 503 / failed record |
//! | `TransactionCanceledException` with a `ConditionalCheckFailed` reason | TransactWriteItems | no | the caller's domain answer |
//!
//! Sources: the DynamoDB API reference for `TransactWriteItems` (its list of
//! cancellation reasons) and the developer guide's "Error handling with
//! DynamoDB" (which errors are safe to retry) and "Transaction conflict handling".
//!
//! Retries use exponential backoff with full jitter, bounded both in attempts
//! and in time, so that a request still answers well inside API Gateway's 30 s.

use std::{
    future::Future,
    time::{Duration, Instant},
};

use aws_sdk_dynamodb::{
    error::{ProvideErrorMetadata, SdkError},
    operation::transact_write_items::TransactWriteItemsError,
    types::CancellationReason,
};

/// Why DynamoDB could not serve a call now; each is worth another try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// Another transaction held an item (`TransactionConflict[Exception]`).
    Conflict,
    /// Capacity: the partition, the table or the account throttled the call.
    Throttled,
    /// The service failed or is unreachable.
    Unavailable,
}

impl Busy {
    pub fn as_str(self) -> &'static str {
        match self {
            Busy::Conflict => "conflict",
            Busy::Throttled => "throttle",
            Busy::Unavailable => "unavailable",
        }
    }
}

/// The meaning of an error code of any DynamoDB call, when it is transient.
pub(crate) fn busy_code(code: &str) -> Option<Busy> {
    match code {
        // In progress: an earlier attempt with the same token still runs.
        "TransactionConflictException" | "TransactionInProgressException" => Some(Busy::Conflict),
        "ProvisionedThroughputExceededException"
        | "ThrottlingException"
        | "RequestLimitExceeded"
        | "LimitExceededException" => Some(Busy::Throttled),
        "InternalServerError" | "ServiceUnavailable" => Some(Busy::Unavailable),
        _ => None,
    }
}

/// The meaning of one transaction item's cancellation reason, when transient.
fn busy_reason(code: &str) -> Option<Busy> {
    match code {
        "TransactionConflict" => Some(Busy::Conflict),
        "ThrottlingError" | "ProvisionedThroughputExceeded" => Some(Busy::Throttled),
        _ => None,
    }
}

/// Whether a cancelled transaction should be tried again: only when no item's
/// condition failed (that is an answer, whatever else happened) and some item
/// was held or throttled.
pub(crate) fn busy_reasons(reasons: &[CancellationReason]) -> Option<Busy> {
    if reasons
        .iter()
        .any(|r| r.code() == Some("ConditionalCheckFailed"))
    {
        return None;
    }
    reasons
        .iter()
        .filter_map(|r| r.code())
        .find_map(busy_reason)
}

/// Transient failures of a plain call (anything but TransactWriteItems).
pub(crate) fn busy_call<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> Option<Busy> {
    match err {
        SdkError::ServiceError(e) => e.err().code().and_then(busy_code),
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Some(Busy::Unavailable)
        }
        _ => None,
    }
}

/// Transient failures of a TransactWriteItems call, cancellations included.
pub(crate) fn busy_transaction<R>(err: &SdkError<TransactWriteItemsError, R>) -> Option<Busy> {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
            busy_reasons(e.cancellation_reasons())
        }
        _ => busy_call(err),
    }
}

/// Exponential backoff with full jitter: waits a random time in
/// `[0, min(cap, base · 2^attempt))`, which spreads retrying writers apart;
/// gives up after `attempts` tries or once `budget` has passed.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub attempts: u32,
    pub base: Duration,
    pub cap: Duration,
    pub budget: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            attempts: 8,
            base: Duration::from_millis(20),
            cap: Duration::from_millis(800),
            budget: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self.base.saturating_mul(1 << attempt.min(16)).min(self.cap);
        ceiling.mul_f64(fastrand::f64())
    }

    /// Calls `attempt` until it succeeds, fails for a reason `busy` does not
    /// call transient, or the attempts or the time budget run out; returns the
    /// last result.
    pub(crate) async fn retry<T, E, F, Fut>(
        &self,
        what: &'static str,
        busy: impl Fn(&E) -> Option<Busy>,
        mut attempt: F,
    ) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let started = Instant::now();
        let mut tries = 0;
        loop {
            let result = attempt().await;
            tries += 1;
            let Err(err) = &result else {
                return result;
            };
            let Some(cause) = busy(err) else {
                return result;
            };
            let delay = self.delay(tries);
            if tries >= self.attempts || started.elapsed() + delay > self.budget {
                tracing::warn!(
                    what,
                    tries,
                    cause = cause.as_str(),
                    "giving up after retries"
                );
                return result;
            }
            tracing::info!(
                what,
                tries,
                cause = cause.as_str(),
                "DynamoDB busy, retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// [`Backoff::retry`] for one plain SDK call.
    pub(crate) async fn send<T, E, R, F, Fut>(
        &self,
        what: &'static str,
        attempt: F,
    ) -> Result<T, SdkError<E, R>>
    where
        E: ProvideErrorMetadata,
        R: std::fmt::Debug,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, R>>>,
    {
        self.retry(what, busy_call, attempt).await
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use aws_sdk_dynamodb::types::error::TransactionCanceledException;

    use super::*;

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

    fn fast(attempts: u32) -> Backoff {
        Backoff {
            attempts,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(2),
            budget: Duration::from_secs(10),
        }
    }

    async fn run(
        backoff: Backoff,
        answers: &[&[&str]],
    ) -> (Result<usize, SdkError<TransactWriteItemsError, ()>>, usize) {
        let calls = Cell::new(0);
        let result = backoff
            .retry("test", busy_transaction, || {
                let n = calls.get();
                calls.set(n + 1);
                let answer = answers.get(n).map(|codes| cancelled(codes));
                async move {
                    match answer {
                        Some(err) => Err(err),
                        None => Ok(n),
                    }
                }
            })
            .await;
        (result, calls.get())
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
    }

    #[test]
    fn delays_stay_under_the_cap() {
        let backoff = Backoff::default();
        for attempt in 0..40 {
            assert!(backoff.delay(attempt) <= backoff.cap);
        }
    }
}
