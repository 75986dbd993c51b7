//! The one retry layer: [`Backoff`], and [`Table::call`], the way every
//! plain call of this layer (everything but TransactWriteItems, whose
//! retries also choose its tokens: `write.rs`) is sent, retried and
//! its failure classified.

use std::{
    future::Future,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use super::{
    Table,
    errors::{busy_call, classify, condition_failed_code, lost},
};
use crate::store::error::{Busy, StoreError};

/// Exponential backoff with full jitter: waits a random time in
/// `[0, min(cap, base · 2^attempt))`, which spreads retrying writers apart;
/// gives up after `attempts` tries in all or once `budget` has passed, so that
/// a request still answers well inside API Gateway's 30 s.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub attempts: u32,
    pub base: Duration,
    pub cap: Duration,
    pub budget: Duration,
    /// After the retries, how long a transaction whose outcome an attempt
    /// left unknown keeps asking DynamoDB (its token unchanged) before it
    /// answers [`Busy::OutcomeUnknown`]; never past the request's deadline
    /// ([`super::request_scope_until`]).
    pub resolve: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            attempts: Self::ATTEMPTS,
            base: Duration::from_millis(20),
            cap: Duration::from_millis(800),
            budget: Duration::from_secs(5),
            resolve: Duration::from_secs(3),
        }
    }
}

impl Backoff {
    /// How often one logical call is sent at most, by default.
    pub const ATTEMPTS: u32 = 8;

    /// The same backoff, giving up after `attempts` tries: for a caller that
    /// paces its own rounds of calls within the one budget (the rename walk).
    pub fn with_attempts(self, attempts: u32) -> Self {
        Self { attempts, ..self }
    }

    /// How long to wait before another try, after `attempt` tries.
    pub fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self.base.saturating_mul(1 << attempt.min(16)).min(self.cap);
        ceiling.mul_f64(fastrand::f64())
    }

    /// Calls `attempt` until it succeeds, fails for a reason `busy` does not
    /// call transient, or the attempts or the time budget run out; returns
    /// the last result.
    pub async fn retry<T, E, F, Fut>(
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

    /// [`Backoff::retry`] for a call of another AWS service (the stream's
    /// reads in `recovery`), with the same classification.
    pub async fn send<T, E, R, F, Fut>(
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

/// Why a plain call failed, once [`Table::call`] has given up on it.
pub(super) struct Failed {
    pub(super) failure: Failure,
    /// Whether some attempt's answer was lost, so that the call may have
    /// taken effect although its last attempt failed.
    pub(super) after_unknown: bool,
}

/// A failed call's error, a condition's failure told apart from the rest.
pub(super) enum Failure {
    /// The call's condition failed: the caller's answer, not an error.
    Condition,
    /// Anything else, in the store's words ([`classify`]).
    Store(StoreError),
}

impl From<StoreError> for Failed {
    /// A failure found before anything was sent.
    fn from(err: StoreError) -> Self {
        Self {
            failure: Failure::Store(err),
            after_unknown: false,
        }
    }
}

impl From<Failed> for StoreError {
    /// The error of a call that has no condition and changes nothing (a
    /// read) or may safely be repeated (an unconditional batch of puts), for
    /// which neither a failed condition nor a lost answer needs an answer of
    /// its own.
    fn from(failed: Failed) -> Self {
        match failed.failure {
            Failure::Store(err) => err,
            Failure::Condition => {
                StoreError::Internal("a condition failed on a call that has none".to_owned())
            }
        }
    }
}

impl Table {
    /// Sends a plain call the way this layer sends every one: `attempt`
    /// (one send of a built request) retried under the backoff while
    /// [`busy_call`] calls its failure transient, each lost answer noted, and
    /// the last failure classified. Boxed: the SDK's futures are large, and a
    /// caller's future holds every one it awaits (debug builds overflowed a
    /// test thread's stack). Each request asks for its consumed capacity
    /// itself (`ReturnConsumedCapacity`), which the caller reads from the
    /// output and `store::meter` from the raw response.
    pub(super) async fn call<T, E, R, F, Fut>(
        &self,
        what: &'static str,
        mut attempt: F,
    ) -> Result<T, Failed>
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, R>>>,
    {
        let answer_lost = AtomicBool::new(false);
        let result = Box::pin(self.backoff.retry(what, busy_call, || {
            let sent = attempt();
            async {
                let result = sent.await;
                if result.as_ref().err().is_some_and(lost) {
                    answer_lost.store(true, Ordering::Relaxed);
                }
                result
            }
        }))
        .await;
        let failure = match result {
            Ok(output) => return Ok(output),
            Err(SdkError::ServiceError(e)) if e.err().code().is_some_and(condition_failed_code) => {
                Failure::Condition
            }
            Err(err) => Failure::Store(classify(err)),
        };
        Err(Failed {
            failure,
            after_unknown: answer_lost.load(Ordering::Relaxed),
        })
    }
}
