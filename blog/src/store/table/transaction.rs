//! Transactions: TransactWriteItems with its items named ([`Transaction`]),
//! retried while DynamoDB cancels it for a conflict or for capacity or its
//! answer is lost, each attempt under the token [`Tokens`] chooses; and,
//! when an attempt's outcome stays unknown, its resolution (see "Unknown
//! outcomes" in the module's docs): reading back what its writes would have
//! left, then asking DynamoDB again under the same token.

use std::time::Instant;

use aws_sdk_dynamodb::{
    config::http::HttpResponse,
    error::SdkError,
    operation::transact_write_items::{TransactWriteItemsError, TransactWriteItemsOutput},
    types::{ConditionCheck, Delete, Put, ReturnConsumedCapacity, TransactWriteItem, Update},
};

use super::{
    Backoff, Table,
    errors::{
        Busy, after_unknown_outcome, busy_item, busy_transaction, classify, describe,
        failed_conditions, lost, throttled_item,
    },
    tokens::{Tokens, resolve_until},
    write::{Op, Write, with_write},
};
use crate::store::StoreError;

/// What one attempt of a transaction answered.
type Sent = Result<TransactWriteItemsOutput, SdkError<TransactWriteItemsError, HttpResponse>>;

/// An item of a [`Transaction`], to ask [`Rejected::failed`] about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(pub(super) usize);

/// A transaction being built: add its items by name, keep their slots, then
/// [`Transaction::commit`].
pub struct Transaction<'t> {
    table: &'t Table,
    what: &'static str,
    slots: Vec<(&'static str, Write)>,
    /// The item whose throttling ends the retries ([`Committing::Throttled`]).
    yield_on: Option<Slot>,
    /// The item whose being held by another transaction, when the retries
    /// run out, is [`Committing::Held`].
    held_by: Option<Slot>,
}

/// What [`Transaction::commit_watched`] did.
#[derive(Debug)]
pub enum Committing {
    Done(TxOutcome),
    /// DynamoDB refused the watched item for capacity (its partition is
    /// hot); nothing was written.
    Throttled,
    /// Another transaction held the watched item through every retry
    /// (`TransactionConflict`); nothing was written.
    Held,
}

/// What a transaction did.
#[derive(Debug)]
pub enum TxOutcome {
    Committed,
    /// Some item's condition failed: the only cancellation that is a domain
    /// answer ("already liked", "no such post").
    ConditionFailed(Rejected),
}

/// The items of a cancelled transaction whose condition failed.
#[derive(Debug)]
pub struct Rejected {
    names: Vec<&'static str>,
    failed: Vec<bool>,
    /// An earlier attempt's outcome was unknown (see the module's docs).
    pub after_unknown: bool,
}

impl Rejected {
    pub fn failed(&self, slot: Slot) -> bool {
        self.failed.get(slot.0).copied().unwrap_or(false)
    }

    /// A cancellation the caller did not expect, as an internal error.
    pub fn unexpected(&self, what: &str) -> StoreError {
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

impl Table {
    /// Starts a transaction; `what` names it in logs and errors.
    pub fn transaction(&self, what: &'static str) -> Transaction<'_> {
        Transaction {
            table: self,
            what,
            slots: Vec::new(),
            yield_on: None,
            held_by: None,
        }
    }
}

impl Transaction<'_> {
    /// Adds `write` under `name` (for logs and [`Rejected::unexpected`]).
    pub fn add(&mut self, name: &'static str, write: Write) -> Slot {
        self.slots.push((name, write));
        Slot(self.slots.len() - 1)
    }

    fn items(&self) -> Result<Vec<TransactWriteItem>, StoreError> {
        self.slots
            .iter()
            .map(|(_, write)| transact_item(&self.table.name, write))
            .collect()
    }

    /// Runs the transaction: retried while DynamoDB cancels it for a
    /// conflict or for capacity, or its answer is lost.
    pub async fn commit(self) -> Result<TxOutcome, StoreError> {
        match Box::pin(self.run()).await? {
            Committing::Done(outcome) => Ok(outcome),
            Committing::Throttled | Committing::Held => Err(StoreError::Internal(
                "a transaction answered for an item it did not watch".to_owned(),
            )),
        }
    }

    /// Makes the first cancellation that throttles the item in `slot` end
    /// the transaction ([`Committing::Throttled`]): the caller moves that
    /// item's load elsewhere ([`crate::store::hot`]) rather than retry into
    /// a partition at its limit.
    pub fn yield_when_throttled(&mut self, slot: Slot) {
        self.yield_on = Some(slot);
    }

    /// Makes retries that run out while another transaction holds the item
    /// in `slot` end as [`Committing::Held`] rather than busy.
    pub fn report_held(&mut self, slot: Slot) {
        self.held_by = Some(slot);
    }

    /// [`Transaction::commit`], answering for the items watched with
    /// [`Transaction::yield_when_throttled`] and [`Transaction::report_held`].
    pub async fn commit_watched(self) -> Result<Committing, StoreError> {
        Box::pin(self.run()).await
    }

    /// One attempt: `items` sent under `token`.
    async fn send(&self, items: &[TransactWriteItem], token: String) -> Sent {
        self.table
            .client
            .transact_write_items()
            .set_transact_items(Some(items.to_vec()))
            .client_request_token(token)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
    }

    /// The cancellation of this transaction for the failed conditions
    /// `failed` (one flag per item).
    fn rejected(&self, failed: Vec<bool>, after_unknown: bool) -> TxOutcome {
        TxOutcome::ConditionFailed(Rejected {
            names: self.slots.iter().map(|(name, _)| *name).collect(),
            failed,
            after_unknown,
        })
    }

    #[tracing::instrument(level = "debug", skip(self), fields(what = self.what, items = self.slots.len()))]
    async fn run(self) -> Result<Committing, StoreError> {
        let what = self.what;
        let items = self.items()?;
        let tokens = Tokens::new();
        let yield_on = self.yield_on;
        let busy = |err: &SdkError<TransactWriteItemsError, _>| match yield_on {
            Some(slot) if throttled_item(err, slot) => None,
            _ => busy_transaction(err),
        };
        let result = Box::pin(self.table.backoff.retry(what, busy, || async {
            let sent = self.send(&items, tokens.current()).await;
            if let Err(err) = &sent {
                tokens.after(err);
            }
            sent
        }))
        .await;
        let err = match result {
            Ok(_) => return Ok(Committing::Done(TxOutcome::Committed)),
            Err(err) => err,
        };
        let after_unknown = tokens.pinned();
        // Whatever the last attempt said, an earlier one whose answer was
        // lost may have committed: if it did, the transaction took effect.
        if after_unknown && self.own_write_landed().await? {
            tracing::info!(what, "a lost answer's transaction had committed");
            return Ok(Committing::Done(TxOutcome::Committed));
        }
        if yield_on.is_some_and(|slot| throttled_item(&err, slot)) && !after_unknown {
            tracing::info!(what, "an item's partition throttled the transaction");
            return Ok(Committing::Throttled);
        }
        if after_unknown
            && failed_conditions(&err).is_none()
            && let Some(outcome) = Box::pin(self.resolve(&items, &tokens)).await?
        {
            return Ok(Committing::Done(outcome));
        }
        if self
            .held_by
            .is_some_and(|slot| busy_item(&err, slot) == Some(Busy::Conflict))
            && !after_unknown
        {
            return Ok(Committing::Held);
        }
        let Some(failed) = failed_conditions(&err) else {
            let err = match busy_transaction(&err) {
                Some(cause) => StoreError::busy(cause, format!("{what}: {}", describe(&err))),
                None => classify(err),
            };
            return Err(if after_unknown {
                after_unknown_outcome(err)
            } else {
                err
            });
        };
        Ok(Committing::Done(self.rejected(failed, after_unknown)))
    }

    /// After the retries, an attempt's outcome still unknown and its writes
    /// not found: keeps sending the transaction under the same token, one
    /// attempt per [`Backoff::cap`], until [`Backoff::resolve`] or the
    /// request's deadline. DynamoDB answers a token it committed with a
    /// success (without applying it again), one still running with
    /// `TransactionInProgressException` (wait), and a cancellation only for
    /// a transaction that did not commit under it (then a failed condition is
    /// the answer). `None` when it still cannot tell.
    async fn resolve(
        &self,
        items: &[TransactWriteItem],
        tokens: &Tokens,
    ) -> Result<Option<TxOutcome>, StoreError> {
        let Backoff { resolve, cap, .. } = self.table.backoff;
        let until = resolve_until(resolve);
        while Instant::now() + cap <= until {
            tokio::time::sleep(cap).await;
            let err = match self.send(items, tokens.current()).await {
                Ok(_) => {
                    tracing::info!(what = self.what, "an unknown outcome resolved: committed");
                    return Ok(Some(TxOutcome::Committed));
                }
                Err(err) => err,
            };
            if let Some(failed) = failed_conditions(&err) {
                return Ok(Some(self.rejected(failed, true)));
            }
            if busy_transaction(&err).is_none() && !lost(&err) {
                return Err(after_unknown_outcome(classify(err)));
            }
            tracing::info!(
                what = self.what,
                error = %describe(&err),
                "outcome still unknown; asking again"
            );
            if self.own_write_landed().await? {
                return Ok(Some(TxOutcome::Committed));
            }
        }
        Ok(None)
    }

    /// After an unknown outcome: whether one of the transaction's writes
    /// shows that it landed, which (a transaction being atomic) means the
    /// whole transaction committed.
    async fn own_write_landed(&self) -> Result<bool, StoreError> {
        for (_, write) in &self.slots {
            if self.table.landed(write).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// `write` as an item of a TransactWriteItems on `table`.
fn transact_item(table: &str, write: &Write) -> Result<TransactWriteItem, StoreError> {
    let item = TransactWriteItem::builder();
    Ok(match &write.op {
        Op::Put(put) => {
            let put = Put::builder().set_item(Some(put.clone()));
            item.put(with_write!(put, table, write).build()?)
        }
        Op::Update(key, change) => {
            let update = Update::builder()
                .set_key(Some(key.clone()))
                .update_expression(&change.text);
            item.update(with_write!(update, table, write).build()?)
        }
        Op::Delete(key) => {
            let delete = Delete::builder().set_key(Some(key.clone()));
            item.delete(with_write!(delete, table, write).build()?)
        }
        Op::Check(key) => {
            let check = ConditionCheck::builder().set_key(Some(key.clone()));
            item.condition_check(with_write!(check, table, write).build()?)
        }
    }
    .build())
}
