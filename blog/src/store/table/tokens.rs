//! Client request tokens: the `ClientRequestToken` each attempt of a
//! transaction carries ([`Tokens`]), derived from the request being served
//! ([`request_scope`]) so that a request or stream record replayed replays
//! its transactions under their first tokens. The scope also carries the
//! request's deadline, which bounds the resolution of an unknown outcome.

use std::{
    future::Future,
    hash::{DefaultHasher, Hash, Hasher},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

use aws_sdk_dynamodb::{error::SdkError, operation::transact_write_items::TransactWriteItemsError};

use super::errors::lost;

/// The `ClientRequestToken` of one transaction's attempts: fresh after a
/// cancellation (which certainly did not commit) until an attempt's outcome
/// is unknown; from then on, the same for every attempt.
pub(super) struct Tokens {
    current: Mutex<String>,
    pinned: AtomicBool,
}

impl Tokens {
    pub(super) fn new() -> Self {
        Self {
            current: Mutex::new(next_token()),
            pinned: AtomicBool::new(false),
        }
    }

    /// The token the next attempt carries.
    pub(super) fn current(&self) -> String {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether some attempt's outcome was unknown, which pinned the token.
    pub(super) fn pinned(&self) -> bool {
        self.pinned.load(Ordering::Relaxed)
    }

    /// Learns from an attempt's error which token the next attempt carries.
    pub(super) fn after<R>(&self, err: &SdkError<TransactWriteItemsError, R>) {
        if lost(err) {
            self.pinned.store(true, Ordering::Relaxed);
            return;
        }
        let cancelled = matches!(
            err.as_service_error(),
            Some(TransactWriteItemsError::TransactionCanceledException(_))
        );
        if cancelled && !self.pinned() {
            *self.current.lock().unwrap_or_else(PoisonError::into_inner) = next_token();
        }
    }
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// The request being served, for deriving transaction tokens.
struct Scope {
    seed: String,
    issued: AtomicU32,
    /// When the request must have answered (the Lambda invocation's deadline).
    deadline: Option<Instant>,
}

/// Runs `work` (one request, or one stream record) with transaction tokens
/// derived from `seed` (its request id, or the record's event id): the n-th
/// token of the same seed is always the same, so a record delivered again
/// replays its transactions under their first tokens. Outside a scope each
/// token is random.
pub async fn request_scope<F: Future>(seed: impl Into<String>, work: F) -> F::Output {
    request_scope_until(seed, None, work).await
}

/// [`request_scope`] for a request that must answer by `deadline`: the
/// resolution of an unknown outcome stops short of it.
pub async fn request_scope_until<F: Future>(
    seed: impl Into<String>,
    deadline: Option<Instant>,
    work: F,
) -> F::Output {
    SCOPE
        .scope(
            Scope {
                seed: seed.into(),
                issued: AtomicU32::new(0),
                deadline,
            },
            work,
        )
        .await
}

/// What a request keeps to answer in after resolving an unknown outcome.
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// Until when an unknown outcome may be resolved, from now: `budget`, and
/// never within [`ANSWER_MARGIN`] of the request's deadline.
pub(super) fn resolve_until(budget: Duration) -> Instant {
    let until = Instant::now() + budget;
    SCOPE
        .try_with(|scope| scope.deadline)
        .ok()
        .flatten()
        .map_or(until, |deadline| {
            until.min(deadline.checked_sub(ANSWER_MARGIN).unwrap_or(deadline))
        })
}

/// The next token of the request being served, or a random one outside a
/// scope.
pub(super) fn next_token() -> String {
    SCOPE
        .try_with(|scope| token(&scope.seed, scope.issued.fetch_add(1, Ordering::Relaxed)))
        .unwrap_or_else(|_| token(&ulid::Ulid::generate().to_string(), 0))
}

/// A `ClientRequestToken` (at most 36 characters) for the `n`-th
/// transaction of `seed`.
pub(super) fn token(seed: &str, n: u32) -> String {
    let half = |salt: u8| {
        let mut hasher = DefaultHasher::new();
        (salt, seed, n).hash(&mut hasher);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}
