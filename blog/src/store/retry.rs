//! Retrying transactions that DynamoDB cancelled because another transaction was
//! writing the same item at the same moment (`TransactionConflict`): on a hot post
//! every like and comment updates the same post item. DynamoDB Local never raises
//! it, so the tests inject it.

use std::{future::Future, time::Duration};

use aws_sdk_dynamodb::{
    error::SdkError, operation::transact_write_items::TransactWriteItemsError,
    types::CancellationReason,
};

/// Exponential backoff with full jitter: waits a random time in
/// `[0, min(cap, base · 2^attempt))`, which spreads retrying writers apart.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub attempts: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            attempts: 8,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(500),
        }
    }
}

pub(crate) fn is_conflict(reasons: &[CancellationReason]) -> bool {
    reasons
        .iter()
        .any(|r| r.code() == Some("TransactionConflict"))
}

fn is_conflict_error<R>(err: &SdkError<TransactWriteItemsError, R>) -> bool {
    matches!(
        err.as_service_error(),
        Some(TransactWriteItemsError::TransactionCanceledException(e)) if is_conflict(e.cancellation_reasons())
    )
}

impl Backoff {
    fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self.base.saturating_mul(1 << attempt.min(16)).min(self.cap);
        ceiling.mul_f64(fastrand::f64())
    }

    /// Calls `attempt` until it succeeds, fails for another reason, or has
    /// conflicted `attempts` times; returns the last result.
    pub async fn retry_conflicts<T, R, F, Fut>(
        &self,
        mut attempt: F,
    ) -> Result<T, SdkError<TransactWriteItemsError, R>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<TransactWriteItemsError, R>>>,
    {
        let mut tries = 0;
        loop {
            let result = attempt().await;
            tries += 1;
            match result {
                Err(err) if is_conflict_error(&err) && tries < self.attempts => {
                    tracing::warn!(tries, "transaction conflict, retrying");
                    tokio::time::sleep(self.delay(tries)).await;
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use aws_sdk_dynamodb::types::error::TransactionCanceledException;

    use super::*;

    fn cancelled(code: &str) -> SdkError<TransactWriteItemsError, ()> {
        let err = TransactionCanceledException::builder()
            .cancellation_reasons(CancellationReason::builder().code("None").build())
            .cancellation_reasons(CancellationReason::builder().code(code).build())
            .build();
        SdkError::service_error(
            TransactWriteItemsError::TransactionCanceledException(err),
            (),
        )
    }

    fn fast(attempts: u32) -> Backoff {
        Backoff {
            attempts,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(2),
        }
    }

    #[tokio::test]
    async fn conflicts_are_retried_until_the_write_lands() {
        let calls = Cell::new(0);
        let result = fast(5)
            .retry_conflicts(|| {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move {
                    if n < 3 {
                        Err(cancelled("TransactionConflict"))
                    } else {
                        Ok(n)
                    }
                }
            })
            .await;
        assert_eq!(result.ok(), Some(3));
        assert_eq!(calls.get(), 3);
    }

    #[tokio::test]
    async fn retries_stop_after_the_last_attempt() {
        let calls = Cell::new(0);
        let result: Result<(), _> = fast(4)
            .retry_conflicts(|| {
                calls.set(calls.get() + 1);
                async { Err(cancelled("TransactionConflict")) }
            })
            .await;
        assert!(result.as_ref().is_err_and(is_conflict_error));
        assert_eq!(calls.get(), 4);
    }

    #[tokio::test]
    async fn failed_conditions_are_not_retried() {
        let calls = Cell::new(0);
        let result: Result<(), _> = fast(4)
            .retry_conflicts(|| {
                calls.set(calls.get() + 1);
                async { Err(cancelled("ConditionalCheckFailed")) }
            })
            .await;
        assert!(result.is_err());
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn delays_stay_under_the_cap() {
        let backoff = Backoff::default();
        for attempt in 0..40 {
            assert!(backoff.delay(attempt) <= backoff.cap);
        }
    }
}
