//! What the store's operations fail with, and how the SDK's errors become that.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use thiserror::Error;

use super::{Busy, cursor, retry};

/// What an operation can fail with, in the domain's words. The API maps these
/// to HTTP statuses in one place (`api::error`).
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("that username is already taken")]
    UsernameTaken,
    #[error("a profile already exists for this user")]
    ProfileExists,
    #[error("create your profile first (POST /users)")]
    NoProfile,
    #[error("no such user")]
    UserNotFound,
    #[error("no such post")]
    PostNotFound,
    #[error("only the post's author may change it")]
    NotAuthor,
    #[error("no such comment")]
    CommentNotFound,
    #[error("only the comment's author or the post's author may delete it")]
    NotCommentAuthor,
    #[error("{0}")]
    BadCursor(#[from] cursor::CursorError),
    /// DynamoDB could not serve the call now, and retrying did not help: a
    /// 503 for a request, a failed record for the fan-out.
    #[error("DynamoDB is busy ({}): {detail}", cause.as_str())]
    Busy { cause: Busy, detail: String },
    #[error("unexpected DynamoDB response: {0}")]
    Internal(String),
}

impl StoreError {
    pub fn busy(cause: Busy, detail: impl Into<String>) -> Self {
        StoreError::Busy {
            cause,
            detail: detail.into(),
        }
    }
}

/// The SDK's error for a failed request, in the domain's words: anything that
/// says "DynamoDB could not serve this now" becomes [`StoreError::Busy`].
pub fn classify<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match err {
        SdkError::TimeoutError(_) => StoreError::busy(Busy::Unavailable, "request timed out"),
        SdkError::DispatchFailure(e) => StoreError::busy(
            Busy::Unavailable,
            format!("could not reach DynamoDB: {e:?}"),
        ),
        SdkError::ResponseError(e) => {
            StoreError::busy(Busy::Unavailable, format!("unreadable response: {e:?}"))
        }
        SdkError::ServiceError(e) => classify_service(e.err()),
        other => StoreError::Internal(format!("{other:?}")),
    }
}

/// One line saying what went wrong with a call, for logs.
pub(crate) fn describe<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> String {
    match err {
        SdkError::ServiceError(e) => format!(
            "{}: {}",
            e.err().code().unwrap_or("Unknown"),
            e.err().message().unwrap_or_default()
        ),
        SdkError::TimeoutError(_) => "timed out".to_owned(),
        SdkError::DispatchFailure(e) => format!("could not reach DynamoDB: {:?}", e.as_other()),
        SdkError::ResponseError(_) => "unreadable response".to_owned(),
        _ => "request could not be built".to_owned(),
    }
}

/// Whether a conditional write landed: `false` when its condition failed,
/// an error for anything else that went wrong.
pub(crate) fn condition_held<T, E, R>(result: Result<T, SdkError<E, R>>) -> Result<bool, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match result {
        Ok(_) => Ok(true),
        Err(SdkError::ServiceError(e))
            if e.err().code() == Some("ConditionalCheckFailedException") =>
        {
            Ok(false)
        }
        Err(err) => Err(classify(err)),
    }
}

pub(crate) fn classify_service<E: ProvideErrorMetadata>(err: &E) -> StoreError {
    let code = err.code().unwrap_or("Unknown");
    let message = err.message().unwrap_or_default();
    match retry::busy_code(code) {
        Some(cause) => StoreError::busy(cause, format!("{code}: {message}")),
        None => StoreError::Internal(format!("{code}: {message}")),
    }
}

impl From<aws_sdk_dynamodb::error::BuildError> for StoreError {
    fn from(err: aws_sdk_dynamodb::error::BuildError) -> Self {
        StoreError::Internal(format!("invalid request: {err}"))
    }
}
