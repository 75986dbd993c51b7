//! TransactWriteItems, with its items addressed by name and DynamoDB's answers
//! sorted into the three kinds a caller must tell apart:
//!
//! - committed;
//! - [`Cancelled::Conditions`]: some item's condition failed, the only
//!   cancellation that is a domain answer ("already liked", "no such post");
//!   [`Rejected::failed`] says which item by the [`Slot`] it was added as;
//! - [`Cancelled::Store`]: anything else, after the retries of [`super::retry`]
//!   for conflicts and throttling (503 for a request, a failed record for the
//!   fan-out).
//!
//! Every attempt carries a `ClientRequestToken` derived from the request being
//! served ([`request_scope`]), so when the SDK resends an attempt whose answer
//! was lost after it committed, DynamoDB answers "done" instead of running it
//! again (and failing its conditions, or writing twice).

use std::{
    future::Future,
    hash::{DefaultHasher, Hash, Hasher},
    sync::atomic::{AtomicU32, Ordering},
};

use aws_sdk_dynamodb::{
    error::SdkError,
    operation::transact_write_items::TransactWriteItemsError,
    types::{
        CancellationReason, ConditionCheck, Delete, Put, ReturnConsumedCapacity, TransactWriteItem,
        Update,
    },
};
use serde::Serialize;

use super::{Store, StoreError, retry, to_item};

/// An item of a [`Transaction`], to ask [`Rejected::failed`] about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot(usize);

/// Why a transaction did not commit.
#[derive(Debug)]
pub(crate) enum Cancelled {
    /// Some item's condition failed.
    Conditions(Rejected),
    /// DynamoDB could not run it (after retries), or refused it as invalid.
    Store(StoreError),
}

/// The items of a cancelled transaction whose condition failed.
#[derive(Debug)]
pub(crate) struct Rejected {
    names: Vec<&'static str>,
    failed: Vec<bool>,
}

impl Rejected {
    pub(crate) fn failed(&self, slot: Slot) -> bool {
        self.failed.get(slot.0).copied().unwrap_or(false)
    }

    /// A cancellation the caller did not expect, as an internal error.
    pub(crate) fn unexpected(&self, what: &str) -> StoreError {
        let failed: Vec<_> = self
            .names
            .iter()
            .zip(&self.failed)
            .filter(|(_, failed)| **failed)
            .map(|(name, _)| *name)
            .collect();
        StoreError::Internal(format!(
            "{what}: unexpected failed conditions on {failed:?}"
        ))
    }
}

/// A transaction being built: add items, keep their slots, then [`commit`].
///
/// [`commit`]: Transaction::commit
pub(crate) struct Transaction<'s> {
    store: &'s Store,
    what: &'static str,
    names: Vec<&'static str>,
    items: Vec<TransactWriteItem>,
}

impl Store {
    /// Starts a transaction; `what` names it in logs and errors.
    pub(crate) fn transaction(&self, what: &'static str) -> Transaction<'_> {
        Transaction {
            store: self,
            what,
            names: Vec::new(),
            items: Vec::new(),
        }
    }
}

impl Transaction<'_> {
    fn add(&mut self, name: &'static str, item: TransactWriteItem) -> Slot {
        self.names.push(name);
        self.items.push(item);
        Slot(self.items.len() - 1)
    }

    /// Creates `item`; its condition fails if the key is taken.
    pub(crate) fn put_new<T: Serialize>(
        &mut self,
        name: &'static str,
        item: &T,
    ) -> Result<Slot, StoreError> {
        let put = Put::builder()
            .table_name(self.store.table())
            .set_item(Some(to_item(item)?))
            .condition_expression("attribute_not_exists(PK)")
            .build()?;
        Ok(self.add(name, TransactWriteItem::builder().put(put).build()))
    }

    pub(crate) fn update(&mut self, name: &'static str, update: Update) -> Slot {
        self.add(name, TransactWriteItem::builder().update(update).build())
    }

    pub(crate) fn delete(&mut self, name: &'static str, delete: Delete) -> Slot {
        self.add(name, TransactWriteItem::builder().delete(delete).build())
    }

    pub(crate) fn put(&mut self, name: &'static str, put: Put) -> Slot {
        self.add(name, TransactWriteItem::builder().put(put).build())
    }

    pub(crate) fn check(&mut self, name: &'static str, check: ConditionCheck) -> Slot {
        self.add(
            name,
            TransactWriteItem::builder().condition_check(check).build(),
        )
    }

    /// Runs the transaction: retried while DynamoDB cancels it for a conflict
    /// or for capacity, or its answer is lost.
    pub(crate) async fn commit(self) -> Result<(), Cancelled> {
        let Transaction {
            store,
            what,
            names,
            items,
        } = self;
        // An attempt whose answer was lost (a timeout, a 500) may have
        // committed: the next one carries the same token, so DynamoDB answers
        // "done" instead of running it again. An attempt DynamoDB cancelled
        // did not commit: the next one gets a fresh token, so that it runs
        // again whether or not DynamoDB remembers the cancelled one.
        let token = std::sync::Mutex::new(next_token());
        let current = || token.lock().map(|t| t.clone()).unwrap_or_default();
        let result = store
            .backoff()
            .retry(what, retry::busy_transaction, || async {
                let sent = store
                    .client()
                    .transact_write_items()
                    .set_transact_items(Some(items.clone()))
                    .set_client_request_token(current())
                    .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                    .send()
                    .await;
                let cancelled = matches!(
                    sent.as_ref().err().and_then(SdkError::as_service_error),
                    Some(TransactWriteItemsError::TransactionCanceledException(_))
                );
                if cancelled && let Ok(mut token) = token.lock() {
                    *token = next_token();
                }
                sent
            })
            .await;
        let err = match result {
            Ok(_) => return Ok(()),
            Err(err) => err,
        };
        if let Some(cause) = retry::busy_transaction(&err) {
            return Err(Cancelled::Store(StoreError::busy(
                cause,
                format!("{what}: {}", super::describe(&err)),
            )));
        }
        match err {
            SdkError::ServiceError(e) => match e.into_err() {
                TransactWriteItemsError::TransactionCanceledException(e) => {
                    let reasons = e.cancellation_reasons();
                    let failed: Vec<bool> = reasons.iter().map(condition_failed).collect();
                    if failed.iter().any(|f| *f) {
                        Err(Cancelled::Conditions(Rejected { names, failed }))
                    } else {
                        let codes: Vec<_> = reasons.iter().map(CancellationReason::code).collect();
                        Err(Cancelled::Store(StoreError::Internal(format!(
                            "{what} cancelled: {codes:?}"
                        ))))
                    }
                }
                other => Err(Cancelled::Store(super::classify_service(&other))),
            },
            other => Err(Cancelled::Store(super::classify(other))),
        }
    }
}

fn condition_failed(reason: &CancellationReason) -> bool {
    reason.code() == Some("ConditionalCheckFailed")
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// The request being served, for deriving transaction tokens.
struct Scope {
    seed: String,
    issued: AtomicU32,
}

/// Runs `work` (one request, or one stream record) with transaction tokens
/// derived from `seed` (its request id, or the record's event id): the n-th
/// transaction of the same seed always gets the same token. Outside a
/// scope the SDK makes up a random token per call, which still covers its own
/// retries.
pub async fn request_scope<F: Future>(seed: impl Into<String>, work: F) -> F::Output {
    SCOPE
        .scope(
            Scope {
                seed: seed.into(),
                issued: AtomicU32::new(0),
            },
            work,
        )
        .await
}

fn next_token() -> Option<String> {
    SCOPE
        .try_with(|scope| token(&scope.seed, scope.issued.fetch_add(1, Ordering::Relaxed)))
        .ok()
}

/// A `ClientRequestToken` (at most 36 characters) for the `n`-th transaction
/// of `seed`.
fn token(seed: &str, n: u32) -> String {
    let half = |salt: u8| {
        let mut hasher = DefaultHasher::new();
        (salt, seed, n).hash(&mut hasher);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_derived_from_the_request_and_the_transaction() {
        assert_eq!(token("req-1", 0), token("req-1", 0));
        assert_ne!(token("req-1", 0), token("req-1", 1));
        assert_ne!(token("req-1", 0), token("req-2", 0));
        assert!(token("req-1", 0).len() <= 36);
    }

    #[tokio::test]
    async fn a_scope_numbers_its_transactions() {
        assert_eq!(next_token(), None);
        let tokens = request_scope("req-9", async { [next_token(), next_token()] }).await;
        assert_eq!(
            tokens,
            [Some(token("req-9", 0)), Some(token("req-9", 1))],
            "the same request replayed gets the same tokens in the same order"
        );
    }
}
