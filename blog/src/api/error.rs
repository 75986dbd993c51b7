//! Every way a request can fail, and its HTTP status, code and message.

use lambda_http::http::StatusCode;
use serde_json::json;
use thiserror::Error;

use crate::{
    ids::IdError,
    store::{Busy, StoreError},
    text::TextError,
};

/// Declares [`ErrorCode`] from one list: each variant, its `code` string and
/// its HTTP status, so that [`ErrorCode::ALL`] names every variant (a
/// variant can only be added to the list) and `as_str` and `status` have an
/// arm for each.
macro_rules! error_codes {
    ($($variant:ident = $code:literal => $status:ident,)+) => {
        /// The `code` of an error body: what a client branches on.
        /// openapi.yaml's `Error.code` enum lists exactly these, and each
        /// route documents the status of every code it can answer
        /// (`blog/tests/api/contract.rs` holds both).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ErrorCode {
            $($variant,)+
        }

        impl ErrorCode {
            /// Every code, in the order declared.
            pub const ALL: &'static [ErrorCode] = &[$(Self::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $code,)+
                }
            }

            /// The HTTP status every answer with this code has: the one
            /// place statuses are chosen ([`ApiError::status`] reads it).
            pub fn status(self) -> StatusCode {
                match self {
                    $(Self::$variant => StatusCode::$status,)+
                }
            }
        }
    };
}

error_codes! {
    BadJson = "bad_json" => BAD_REQUEST,
    BadId = "bad_id" => BAD_REQUEST,
    BadLimit = "bad_limit" => BAD_REQUEST,
    BadCursor = "bad_cursor" => BAD_REQUEST,
    InvalidField = "invalid_field" => BAD_REQUEST,
    MissingUsername = "missing_username" => BAD_REQUEST,
    Unauthorized = "unauthorized" => UNAUTHORIZED,
    Forbidden = "forbidden" => FORBIDDEN,
    AccountErased = "account_erased" => FORBIDDEN,
    NotFound = "not_found" => NOT_FOUND,
    UsernameTaken = "username_taken" => CONFLICT,
    ProfileExists = "profile_exists" => CONFLICT,
    BeingErased = "being_erased" => CONFLICT,
    BadIdempotencyKey = "bad_idempotency_key" => BAD_REQUEST,
    IdempotencyKeyReused = "idempotency_key_reused" => UNPROCESSABLE_ENTITY,
    IdempotencyKeyInFlight = "idempotency_key_in_flight" => CONFLICT,
    PreconditionFailed = "precondition_failed" => PRECONDITION_FAILED,
    BadPrecondition = "bad_precondition" => BAD_REQUEST,
    PostIsHot = "post_is_hot" => CONFLICT,
    FollowingLimit = "following_limit" => UNPROCESSABLE_ENTITY,
    Blocked = "blocked" => FORBIDDEN,
    BlockLimit = "block_limit" => UNPROCESSABLE_ENTITY,
    PayloadTooLarge = "payload_too_large" => PAYLOAD_TOO_LARGE,
    Unavailable = "unavailable" => SERVICE_UNAVAILABLE,
    OutcomeUnknown = "outcome_unknown" => SERVICE_UNAVAILABLE,
    Internal = "internal" => INTERNAL_SERVER_ERROR,
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
    /// The user the write is aimed at blocks the caller (403 `blocked`):
    /// nothing was written.
    #[error("{0}")]
    Blocked(String),
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

    /// The HTTP status: its code's ([`ErrorCode::status`]).
    pub fn status(&self) -> StatusCode {
        self.code().status()
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Self::BadRequest { code, .. }
            | Self::Conflict { code, .. }
            | Self::Unprocessable { code, .. } => *code,
            Self::Unauthorized => ErrorCode::Unauthorized,
            Self::Forbidden(_) => ErrorCode::Forbidden,
            Self::AccountErased => ErrorCode::AccountErased,
            Self::Blocked(_) => ErrorCode::Blocked,
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
            StoreError::Blocked => Self::Blocked(message),
            StoreError::BlockSelf => Self::bad_request(ErrorCode::InvalidField, message),
            StoreError::BlockLimit => Self::Unprocessable {
                code: ErrorCode::BlockLimit,
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
            // A request over DynamoDB's limits is the code's bug: 500.
            StoreError::Config(_) | StoreError::Internal(_) | StoreError::OverLimit { .. } => {
                Self::Internal(message)
            }
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
