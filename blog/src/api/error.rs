//! Every way a request can fail, and its HTTP status, code and message.

use lambda_http::http::StatusCode;
use serde_json::json;
use thiserror::Error;

use crate::{
    ids::IdError,
    store::{Busy, StoreError},
    text::TextError,
};

/// The `code` of an error body: what a client branches on (openapi.yaml
/// lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    BadJson,
    BadId,
    BadLimit,
    BadCursor,
    InvalidField,
    MissingUsername,
    Unauthorized,
    Forbidden,
    AccountErased,
    NotFound,
    UsernameTaken,
    ProfileExists,
    BeingErased,
    BadIdempotencyKey,
    IdempotencyKeyReused,
    IdempotencyKeyInFlight,
    PreconditionFailed,
    BadPrecondition,
    PostIsHot,
    FollowingLimit,
    PayloadTooLarge,
    Unavailable,
    OutcomeUnknown,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadJson => "bad_json",
            Self::BadId => "bad_id",
            Self::BadLimit => "bad_limit",
            Self::BadCursor => "bad_cursor",
            Self::InvalidField => "invalid_field",
            Self::MissingUsername => "missing_username",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::AccountErased => "account_erased",
            Self::NotFound => "not_found",
            Self::UsernameTaken => "username_taken",
            Self::ProfileExists => "profile_exists",
            Self::BeingErased => "being_erased",
            Self::BadIdempotencyKey => "bad_idempotency_key",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::IdempotencyKeyInFlight => "idempotency_key_in_flight",
            Self::PreconditionFailed => "precondition_failed",
            Self::BadPrecondition => "bad_precondition",
            Self::PostIsHot => "post_is_hot",
            Self::FollowingLimit => "following_limit",
            Self::PayloadTooLarge => "payload_too_large",
            Self::Unavailable => "unavailable",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { code: ErrorCode, message: String },
    #[error("this request needs an authenticated caller")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(&'static str),
    /// The caller's account was erased: it can write nothing (403).
    #[error("this account was erased (DELETE /users/{{userId}}): it can write nothing")]
    AccountErased,
    #[error("{0}")]
    NotFound(&'static str),
    #[error("{message}")]
    Conflict { code: ErrorCode, message: String },
    /// Well-formed, but it contradicts what the same key asked before (422).
    #[error("{message}")]
    Unprocessable { code: ErrorCode, message: String },
    /// The post or profile changed since the copy the request's
    /// `If-Match` names (412): nothing was written.
    #[error("{0}")]
    PreconditionFailed(String),
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// DynamoDB could not serve the request now; `cause` says why
    /// (`throttle`, `conflict`, `unavailable`).
    #[error("{message}")]
    Unavailable {
        cause: &'static str,
        message: String,
    },
    /// DynamoDB stayed busy after an attempt whose answer was lost, and the
    /// write was not found: it may yet have taken effect.
    #[error("{0}")]
    OutcomeUnknown(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::BadRequest {
            code,
            message: message.into(),
        }
    }

    fn conflict(code: ErrorCode, message: String) -> Self {
        Self::Conflict { code, message }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::AccountErased => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            Self::Unavailable { .. } | Self::OutcomeUnknown(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Self::BadRequest { code, .. }
            | Self::Conflict { code, .. }
            | Self::Unprocessable { code, .. } => *code,
            Self::Unauthorized => ErrorCode::Unauthorized,
            Self::Forbidden(_) => ErrorCode::Forbidden,
            Self::AccountErased => ErrorCode::AccountErased,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::PayloadTooLarge { .. } => ErrorCode::PayloadTooLarge,
            Self::PreconditionFailed(_) => ErrorCode::PreconditionFailed,
            Self::Unavailable { .. } => ErrorCode::Unavailable,
            Self::OutcomeUnknown(_) => ErrorCode::OutcomeUnknown,
            Self::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The JSON error body, naming the invocation (`requestId`, left out when
    /// there is none) whose logs hold the details. Details of 5xx errors go
    /// to the log, not the client.
    pub fn body(&self, request_id: &str) -> serde_json::Value {
        let message = match self {
            Self::Unavailable { .. } => "the database is unavailable; try again shortly".to_owned(),
            Self::OutcomeUnknown(_) => "the database stayed busy after an attempt whose answer was lost: the write may have taken effect; read it back before sending it again, or send it again with the same Idempotency-Key".to_owned(),
            Self::Internal(_) => "internal error".to_owned(),
            other => other.to_string(),
        };
        let mut error = json!({ "code": self.code().as_str(), "message": message });
        if !request_id.is_empty() {
            error["requestId"] = request_id.into();
        }
        json!({ "error": error })
    }

    pub fn log(&self) {
        if self.status().is_server_error() {
            tracing::error!(code = self.code().as_str(), error = %self, "request failed");
        } else {
            tracing::info!(code = self.code().as_str(), error = %self, "request rejected");
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        let message = err.to_string();
        match err {
            StoreError::UsernameTaken => Self::conflict(ErrorCode::UsernameTaken, message),
            StoreError::ProfileExists => Self::conflict(ErrorCode::ProfileExists, message),
            StoreError::PostIsHot => Self::conflict(ErrorCode::PostIsHot, message),
            StoreError::BeingErased => Self::conflict(ErrorCode::BeingErased, message),
            StoreError::NoProfile => Self::Forbidden("create your profile first (POST /users)"),
            StoreError::AccountErased => Self::AccountErased,
            StoreError::NotAuthor => Self::Forbidden("only the post's author may change it"),
            StoreError::UserNotFound => Self::NotFound("no such user"),
            StoreError::PostNotFound => Self::NotFound("no such post"),
            StoreError::CommentNotFound => Self::NotFound("no such comment"),
            StoreError::FollowSelf => Self::bad_request(ErrorCode::InvalidField, message),
            StoreError::FollowingLimit => Self::Unprocessable {
                code: ErrorCode::FollowingLimit,
                message,
            },
            StoreError::PreconditionFailed => Self::PreconditionFailed(
                "it was changed since the copy your If-Match names: read it again (its ETag), then send your change with that".to_owned(),
            ),
            StoreError::NotCommentAuthor => {
                Self::Forbidden("only the comment's author or the post's author may delete it")
            }
            StoreError::BadCursor(_) => Self::bad_request(ErrorCode::BadCursor, message),
            StoreError::IdempotencyKeyReused => Self::Unprocessable {
                code: ErrorCode::IdempotencyKeyReused,
                message,
            },
            StoreError::IdempotencyKeyInFlight => {
                Self::conflict(ErrorCode::IdempotencyKeyInFlight, message)
            }
            StoreError::Busy {
                cause: Busy::OutcomeUnknown,
                ..
            } => Self::OutcomeUnknown(message),
            StoreError::Busy { cause, .. } => Self::Unavailable {
                cause: cause.as_str(),
                message,
            },
            // A function without credentials is misdeployed: 500, not a
            // 503 that invites the client to send it again.
            StoreError::Config(_) | StoreError::Internal(_) => Self::Internal(message),
        }
    }
}

impl From<TextError> for ApiError {
    fn from(err: TextError) -> Self {
        Self::bad_request(ErrorCode::InvalidField, err.to_string())
    }
}

impl From<IdError> for ApiError {
    fn from(err: IdError) -> Self {
        let code = match err {
            IdError::BadIdempotencyKey => ErrorCode::BadIdempotencyKey,
            IdError::NotUlid { .. } | IdError::BadUserId => ErrorCode::BadId,
        };
        Self::bad_request(code, err.to_string())
    }
}
