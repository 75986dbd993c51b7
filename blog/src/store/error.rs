//! What the store's operations fail with, in the domain's words (the table
//! layer classifies DynamoDB's errors into these).

use thiserror::Error;

use super::cursor;

/// Why DynamoDB could not serve a call now; each is worth another try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// Another transaction held an item (`TransactionConflict[Exception]`).
    Conflict,
    /// Capacity: the partition, the table or the account throttled the call.
    Throttled,
    /// The service failed or is unreachable.
    Unavailable,
    /// An attempt's answer was lost (so it may have taken effect), the
    /// retries ran out, and reading back did not find the write: it may yet
    /// take effect (an attempt still in flight commits later). Not "nothing
    /// was written", unlike the others.
    OutcomeUnknown,
}

impl Busy {
    pub fn as_str(self) -> &'static str {
        match self {
            Busy::Conflict => "conflict",
            Busy::Throttled => "throttle",
            Busy::Unavailable => "unavailable",
            Busy::OutcomeUnknown => "outcome_unknown",
        }
    }
}

/// One of DynamoDB's own limits on the size of a request, which DynamoDB
/// answers with a `ValidationException` (DynamoDB Local takes some of them):
/// the table layer holds every request it sends to them first
/// ([`StoreError::OverLimit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// An expression (an update, a condition, a key condition, a filter),
    /// in bytes.
    ExpressionBytes,
    /// The items of one TransactWriteItems.
    TransactionItems,
    /// The puts and deletes of one BatchWriteItem.
    BatchWriteItems,
    /// The keys of one BatchGetItem.
    BatchGetKeys,
}

impl Limit {
    /// Every limit, each at its index (`limit as usize`).
    pub const ALL: [Limit; 4] = [
        Limit::ExpressionBytes,
        Limit::TransactionItems,
        Limit::BatchWriteItems,
        Limit::BatchGetKeys,
    ];

    /// The most DynamoDB takes.
    pub const fn max(self) -> usize {
        match self {
            Limit::ExpressionBytes => 4 * 1024,
            Limit::TransactionItems => 100,
            Limit::BatchWriteItems => 25,
            Limit::BatchGetKeys => 100,
        }
    }

    /// What it counts.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::ExpressionBytes => "bytes in an expression",
            Limit::TransactionItems => "items in a transaction",
            Limit::BatchWriteItems => "writes in a batch write",
            Limit::BatchGetKeys => "keys in a batch get",
        }
    }
}

/// What an operation can fail with, in the domain's words. The API maps these
/// to HTTP statuses in one place (`api::error`).
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("that username is already taken")]
    UsernameTaken,
    #[error("a profile already exists for this user")]
    ProfileExists,
    #[error("the caller has no profile yet")]
    NoProfile,
    /// The caller's account was erased (no profile, an erasure mark): every
    /// write but the erasure itself answers this.
    #[error("the caller's account was erased")]
    AccountErased,
    #[error("this user's earlier account is still being erased")]
    BeingErased,
    #[error("no such user")]
    UserNotFound,
    #[error("no such post")]
    PostNotFound,
    #[error("only the post's author may change it")]
    NotAuthor,
    /// The post or profile is no longer the revision an edit or a deletion
    /// was made from (`If-Match`): nothing was written.
    #[error("it changed since the copy this request was made from (If-Match)")]
    PreconditionFailed,
    #[error("a user cannot follow themselves")]
    FollowSelf,
    #[error("a user may follow at most 5,000 others; unfollow someone first")]
    FollowingLimit,
    /// The user the write is aimed at (the followed, the post's author)
    /// blocks the caller: nothing was written.
    #[error("this user has blocked you")]
    Blocked,
    #[error("a user cannot block themselves")]
    BlockSelf,
    #[error("a user may block at most 1,000 others; unblock someone first")]
    BlockLimit,
    #[error("no such comment")]
    CommentNotFound,
    #[error("a viral (hot) post cannot go back to a draft; delete it instead")]
    PostIsHot,
    #[error("only the comment's author or the post's author may delete it")]
    NotCommentAuthor,
    #[error("{0}")]
    BadCursor(#[from] cursor::CursorError),
    /// An `Idempotency-Key` this caller used for another request.
    #[error("this Idempotency-Key was used for another request (another route, path or body)")]
    IdempotencyKeyReused,
    /// The first request with this `Idempotency-Key` was still being written
    /// when this one gave up waiting for it.
    #[error("a request with this Idempotency-Key is still in flight; send it again shortly")]
    IdempotencyKeyInFlight,
    /// DynamoDB could not serve the call now, and retrying did not help: a
    /// 503 for a request, a failed record for the fan-out.
    #[error("DynamoDB is busy ({}): {detail}", cause.as_str())]
    Busy { cause: Busy, detail: String },
    /// The call could not be made at all: no credentials to sign it with,
    /// or no region or endpoint to send it to. Nothing was sent, and
    /// sending it again will not help (not [`StoreError::Busy`]).
    #[error("DynamoDB cannot be called: {0}")]
    Config(String),
    #[error("unexpected DynamoDB response: {0}")]
    Internal(String),
    /// A request the code built that DynamoDB would refuse for its size
    /// ([`Limit`]), refused before it was sent: a bug in the operation that
    /// should have split it, never the client's doing (a 500, not a 4xx,
    /// and not worth another try).
    #[error("{what}: {size} {}, over DynamoDB's {}", limit.as_str(), limit.max())]
    OverLimit {
        what: String,
        limit: Limit,
        size: usize,
    },
}

impl StoreError {
    pub fn busy(cause: Busy, detail: impl Into<String>) -> Self {
        StoreError::Busy {
            cause,
            detail: detail.into(),
        }
    }

    /// `Ok` when `size` is within `limit`; [`StoreError::OverLimit`] (and an
    /// error in the log: it is a bug) otherwise.
    pub fn within(what: &str, limit: Limit, size: usize) -> Result<(), Self> {
        if size <= limit.max() {
            return Ok(());
        }
        let err = StoreError::OverLimit {
            what: what.to_owned(),
            limit,
            size,
        };
        tracing::error!(%err, "a request over DynamoDB's limits, refused before sending");
        Err(err)
    }
}

/// An item that cannot be encoded or decoded is a bug or a table written by
/// something else: an internal error, in the key layer's words.
impl From<crate::keys::KeyError> for StoreError {
    fn from(err: crate::keys::KeyError) -> Self {
        StoreError::Internal(err.to_string())
    }
}

impl From<aws_sdk_dynamodb::error::BuildError> for StoreError {
    fn from(err: aws_sdk_dynamodb::error::BuildError) -> Self {
        StoreError::Internal(format!("invalid request: {err}"))
    }
}
