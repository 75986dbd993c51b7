//! DynamoDB's errors, classified once: which are worth another try
//! ([`Busy`], by [`busy_call`] and [`busy_transaction`]), which are the
//! caller's answer (a failed condition), which leave the outcome unknown
//! ([`lost`]), and how a failed call reads in the store's words
//! ([`classify`]). The table in the module's docs lists them.

use aws_sdk_dynamodb::{
    error::{ProvideErrorMetadata, SdkError},
    operation::transact_write_items::TransactWriteItemsError,
    types::CancellationReason,
};

use super::Slot;
use crate::store::error::{Busy, StoreError};

/// `err` as the request must answer it when an earlier attempt's outcome
/// was unknown and the write was not found: a busy DynamoDB no longer means
/// that nothing was written.
pub(super) fn after_unknown_outcome(err: StoreError) -> StoreError {
    match err {
        StoreError::Busy { cause, detail } => StoreError::busy(
            Busy::OutcomeUnknown,
            format!(
                "{detail} (after an attempt whose answer was lost: {})",
                cause.as_str()
            ),
        ),
        other => other,
    }
}

/// `ConditionalCheckFailedException` (a plain write) or
/// `ConditionalCheckFailed` (a transaction's cancellation reason).
pub(super) fn condition_failed_code(code: &str) -> bool {
    matches!(
        code,
        "ConditionalCheckFailedException" | "ConditionalCheckFailed"
    )
}

/// The meaning of an error code of any DynamoDB call, when it is transient.
pub(super) fn busy_code(code: &str) -> Option<Busy> {
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

/// Whether an attempt's answer was lost, so that it may have taken effect:
/// a timeout, a connection dropped, an unreadable answer, a 5xx. A call
/// that could not even connect, or not even be signed, was never sent.
pub(super) fn lost<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> bool {
    match err {
        SdkError::DispatchFailure(failure) => {
            !never_connected(failure) && unconfigured(failure).is_none()
        }
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::ServiceError(e) => {
            matches!(
                e.err().code(),
                Some("InternalServerError" | "ServiceUnavailable")
            )
        }
        _ => false,
    }
}

/// Whether a dispatch failed before a connection was made (refused, or no
/// address to connect from): then nothing of the request was sent.
fn never_connected(failure: &aws_smithy_runtime_api::client::result::DispatchFailure) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = failure
        .as_connector_error()
        .map(|e| e as &(dyn std::error::Error + 'static));
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::AddrNotAvailable
            )
        {
            return true;
        }
        source = err.source();
    }
    false
}

/// What is missing when a call could not be sent for want of
/// configuration: the SDK failed before sending it, resolving the
/// credentials to sign it with (none in the environment, a profile or the
/// instance's role). `None` for a failure of the connection itself.
/// Another try cannot help.
fn unconfigured(
    failure: &aws_smithy_runtime_api::client::result::DispatchFailure,
) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = failure
        .as_connector_error()
        .map(|e| e as &(dyn std::error::Error + 'static));
    while let Some(err) = source {
        if let Some(credentials) =
            err.downcast_ref::<aws_credential_types::provider::error::CredentialsError>()
        {
            return Some(format!(
                "no AWS credentials to sign requests with: set AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY (any values for DynamoDB Local), or AWS_PROFILE \
                 ({credentials})"
            ));
        }
        source = err.source();
    }
    None
}

/// Transient failures of a plain call (anything but TransactWriteItems).
pub fn busy_call<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> Option<Busy> {
    match err {
        SdkError::ServiceError(e) => e.err().code().and_then(busy_code),
        SdkError::DispatchFailure(failure) if unconfigured(failure).is_some() => None,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Some(Busy::Unavailable)
        }
        _ => None,
    }
}

/// Transient failures of a TransactWriteItems call: cancellations whose
/// reasons are all transient (a failed condition is an answer, whatever else
/// happened), and what [`busy_call`] calls transient.
pub(super) fn busy_transaction<R>(err: &SdkError<TransactWriteItemsError, R>) -> Option<Busy> {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
            busy_reasons(e.cancellation_reasons())
        }
        _ => busy_call(err),
    }
}

/// Which items' conditions failed, when the transaction was cancelled for
/// failed conditions (whatever else happened).
pub(super) fn failed_conditions<R>(
    err: &SdkError<TransactWriteItemsError, R>,
) -> Option<Vec<bool>> {
    let failed: Vec<bool> = cancellation_reasons(err)?
        .iter()
        .map(|r| r.code().is_some_and(condition_failed_code))
        .collect();
    failed.iter().any(|f| *f).then_some(failed)
}

/// Whether a cancellation refused the item in `slot` for capacity (and no
/// item's condition failed, which would be the answer).
pub(super) fn throttled_item<R>(err: &SdkError<TransactWriteItemsError, R>, slot: Slot) -> bool {
    busy_item(err, slot) == Some(Busy::Throttled)
}

/// Why a cancellation refused the item in `slot`, when it was transient
/// (and no item's condition failed, which would be the answer).
pub(super) fn busy_item<R>(err: &SdkError<TransactWriteItemsError, R>, slot: Slot) -> Option<Busy> {
    let reasons = cancellation_reasons(err)?;
    busy_reasons(reasons)?;
    reasons
        .get(slot.0)
        .and_then(|r| r.code())
        .and_then(busy_reason)
}

/// The reasons of a cancelled transaction, one per item; `None` when the
/// transaction was not cancelled.
fn cancellation_reasons<R>(
    err: &SdkError<TransactWriteItemsError, R>,
) -> Option<&[CancellationReason]> {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
            Some(e.cancellation_reasons())
        }
        _ => None,
    }
}

/// The transient cause shared by a cancellation's `reasons`; `None` when
/// some item's condition failed (that is the answer) or none is transient.
fn busy_reasons(reasons: &[CancellationReason]) -> Option<Busy> {
    if reasons
        .iter()
        .any(|r| r.code().is_some_and(condition_failed_code))
    {
        return None;
    }
    reasons
        .iter()
        .filter_map(|r| r.code())
        .find_map(busy_reason)
}

/// The SDK's error for a failed call, in the store's words: anything that
/// says "DynamoDB could not serve this now" becomes [`StoreError::Busy`].
pub fn classify<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    if let SdkError::DispatchFailure(failure) = &err
        && let Some(missing) = unconfigured(failure)
    {
        return StoreError::Config(missing);
    }
    let detail = describe(&err);
    match busy_call(&err) {
        Some(cause) => StoreError::busy(cause, detail),
        None => StoreError::Internal(detail),
    }
}

/// One line saying what went wrong with a call, for logs.
pub(super) fn describe<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> String {
    match err {
        SdkError::ServiceError(e) => format!(
            "{}: {}",
            e.err().code().unwrap_or("Unknown"),
            e.err().message().unwrap_or_default()
        ),
        SdkError::TimeoutError(_) => "request timed out".to_owned(),
        SdkError::DispatchFailure(e) => {
            let mut reasons = Vec::new();
            let mut source: Option<&(dyn std::error::Error + 'static)> = e
                .as_connector_error()
                .map(|e| e as &(dyn std::error::Error + 'static));
            while let Some(err) = source {
                reasons.push(err.to_string());
                source = err.source();
            }
            format!("could not reach DynamoDB: {}", reasons.join(": "))
        }
        SdkError::ResponseError(_) => "unreadable response".to_owned(),
        _ => "request could not be built".to_owned(),
    }
}
