//! Writes: a put, update or delete ([`Write`]), sent on its own by
//! [`Table::write`] and answered as an [`Outcome`], or with others as one
//! TransactWriteItems, its items named ([`Transaction`]), answered as a
//! [`TxOutcome`]. A transaction is retried while DynamoDB cancels it for a
//! conflict or for capacity or its answer is lost, each attempt under the
//! token [`Tokens`] chooses. After an attempt whose answer was lost (see
//! "Unknown outcomes" in the module's docs), a write is read back to tell
//! whether it landed; a transaction whose writes are not found is asked
//! again under the same token.
//!
//! In order: a write as its caller builds it and how it is recognised after
//! a lost answer; one write on its own; writes in a transaction.

use std::time::Instant;

use aws_sdk_dynamodb::{
    config::http::HttpResponse,
    error::SdkError,
    operation::transact_write_items::{TransactWriteItemsError, TransactWriteItemsOutput},
    types::{
        AttributeValue, ConditionCheck, Delete, Put, ReturnConsumedCapacity, ReturnValue,
        TransactWriteItem, Update,
    },
};

use super::{
    Backoff, Table,
    errors::{
        after_unknown_outcome, busy_item, busy_transaction, classify, describe, failed_conditions,
        lost, throttled_item,
    },
    expr::{Expr, Names, Values, merged},
    limits::Sizes,
    retry::{Failed, Failure},
    tokens::{Tokens, resolve_until},
};
use crate::store::error::{Busy, Limit};
use crate::{
    keys::{Entity, Item, PK, SK},
    store::error::StoreError,
};

// A write as its caller builds it.

/// How a put or an update is recognised after an attempt whose answer was
/// lost (see "Unknown outcomes" in the module's docs): every put and update
/// says it where it is built.
#[derive(Clone, Debug)]
pub enum Landed {
    /// It landed if the item at its key holds these values: its own, such as
    /// a version it set or a digest it wrote.
    When(Vec<(&'static str, AttributeValue)>),
    /// Nothing it leaves tells it from another write: a lost answer stays
    /// unknown (on its own, a 503 `outcome_unknown` once retries run out; in
    /// a transaction, another item may tell that the transaction committed).
    Untold,
}

/// How a delete is recognised after an attempt whose answer was lost:
/// every delete says it where it is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// It landed if its item is gone: what was asked for is done, whoever
    /// did it. Not for a delete whose caller needs the item it removed
    /// ([`Returning::Old`]): after a lost answer that is not known. In a
    /// transaction, one item's landing means the whole committed: only for
    /// an item that was there before it (the one the transaction is about),
    /// never for one that may have been absent already (a post's content,
    /// a marker): its absence would pass for a commit.
    IfGone,
    /// As [`Landed::Untold`].
    Untold,
}

/// What a write reads back after an unknown outcome to tell that it landed.
#[derive(Clone, Debug)]
enum ReadBack {
    /// The item at the key holds these values.
    Holds(Item, Vec<(String, AttributeValue)>),
    /// The item at the key is gone.
    Gone(Item),
}

/// What a write does to its item.
#[derive(Clone, Debug)]
enum Op {
    Put(Item),
    Update(Item, Expr),
    Delete(Item),
    Check(Item),
}

/// Which attributes a write returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returning {
    Nothing,
    /// The item as it was (a delete's).
    Old,
    /// The attributes an update set, as they are now.
    UpdatedNew,
}

/// One write: on its own through [`Table::write`], or as an item of a
/// transaction through [`Transaction::add`].
#[derive(Clone, Debug)]
pub struct Write {
    op: Op,
    condition: Option<Expr>,
    /// How to tell, after an unknown outcome, that this write landed.
    landed: Option<ReadBack>,
    returning: Returning,
}

impl Write {
    fn of(op: Op) -> Self {
        Self {
            op,
            condition: None,
            landed: None,
            returning: Returning::Nothing,
        }
    }

    /// Puts `entity`, replacing whatever has its key.
    pub fn put<E: Entity>(entity: &E, landed: Landed) -> Result<Self, StoreError> {
        Ok(Self::of(Op::Put(entity.to_item()?)).landed(landed))
    }

    /// Creates `entity`: its condition fails if the key is taken. After an
    /// unknown outcome, an item found under the key whose [`Entity::OWN`]
    /// attributes are this write's is this write, and answers done.
    pub fn create<E: Entity>(entity: &E) -> Result<Self, StoreError> {
        let item = entity.to_item()?;
        let own = E::OWN
            .iter()
            .map(|name| {
                let value = item.get(*name).cloned();
                (*name, value.unwrap_or(AttributeValue::Null(true)))
            })
            .collect();
        Ok(Self::of(Op::Put(item))
            .when(Expr::item_absent())
            .landed(Landed::When(own)))
    }

    /// Changes the item at `key` by `change` (an update expression).
    pub fn update(key: Item, change: Expr, landed: Landed) -> Self {
        Self::of(Op::Update(key, change)).landed(landed)
    }

    /// Deletes the item at `key`.
    pub fn delete(key: Item, deleted: Deleted) -> Self {
        let read_back = match deleted {
            Deleted::IfGone => Some(ReadBack::Gone(key.clone())),
            Deleted::Untold => None,
        };
        Self {
            landed: read_back,
            ..Self::of(Op::Delete(key))
        }
    }

    /// A transaction item that writes nothing: its condition only.
    pub fn check(key: Item, condition: Expr) -> Self {
        Self::of(Op::Check(key)).when(condition)
    }

    /// The write happens only if `condition` holds of the item it targets.
    pub fn when(mut self, condition: Expr) -> Self {
        self.condition = Some(condition);
        self
    }

    /// A put's or an update's read-back after an unknown outcome.
    fn landed(mut self, landed: Landed) -> Self {
        let Landed::When(values) = landed else {
            return self;
        };
        let key = match &self.op {
            Op::Put(item) => item
                .iter()
                .filter(|(name, _)| *name == PK || *name == SK)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            Op::Update(key, _) | Op::Delete(key) | Op::Check(key) => key.clone(),
        };
        let values = values
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        self.landed = Some(ReadBack::Holds(key, values));
        self
    }

    pub fn returning(mut self, returning: Returning) -> Self {
        self.returning = returning;
        self
    }

    /// Its condition, and the placeholders of its change and condition.
    /// The longest of its expressions (its update's, its condition's), in
    /// bytes: DynamoDB refuses a write with one over
    /// [`MAX_EXPRESSION_BYTES`](super::MAX_EXPRESSION_BYTES) (a `ValidationException`), and so does this
    /// layer, before sending it (DynamoDB Local takes longer ones).
    pub fn longest_expression(&self) -> usize {
        let change = match &self.op {
            Op::Update(_, change) => change.text.len(),
            Op::Put(_) | Op::Delete(_) | Op::Check(_) => 0,
        };
        change.max(self.condition.as_ref().map_or(0, |c| c.text.len()))
    }

    /// Refuses it as DynamoDB would, with an expression over 4 KB.
    fn within_limits(&self, what: &str, sizes: &Sizes) -> Result<(), StoreError> {
        sizes.hold(what, Limit::ExpressionBytes, self.longest_expression())
    }

    pub(super) fn parts(&self) -> (Option<String>, Names, Values) {
        let change = match &self.op {
            Op::Update(_, change) => Some(change),
            Op::Put(_) | Op::Delete(_) | Op::Check(_) => None,
        };
        let (names, values) = merged([change, self.condition.as_ref()]);
        let condition = self.condition.as_ref().map(|c| c.text.clone());
        (condition, names, values)
    }

    fn return_value(&self) -> Option<ReturnValue> {
        match self.returning {
            Returning::Nothing => None,
            Returning::Old => Some(ReturnValue::AllOld),
            Returning::UpdatedNew => Some(ReturnValue::UpdatedNew),
        }
    }
}

/// The table, the condition and the placeholders of `$write`, on any of the
/// SDK's write builders, plain or a transaction's (they share these setters,
/// not a trait).
macro_rules! with_write {
    ($builder:expr, $table:expr, $write:expr) => {{
        let (condition, names, values) = $write.parts();
        $builder
            .table_name($table)
            .set_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
    }};
}

/// [`with_write!`] for a plain PutItem, UpdateItem or DeleteItem, which also
/// returns the attributes asked for and the capacity it consumed.
macro_rules! plain_write {
    ($builder:expr, $table:expr, $write:expr) => {
        with_write!($builder, $table, $write)
            .set_return_values($write.return_value())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
    };
}

// One write on its own.

/// What a single write did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It took effect; the attributes asked for with [`Write::returning`]
    /// (`None` when there were none, or nothing was there).
    Done(Option<Item>),
    /// Its condition failed. `after_unknown`: an earlier attempt's outcome
    /// was unknown, so the item may be as it is because of this very write.
    ConditionFailed { after_unknown: bool },
}

impl Outcome {
    /// Whether the write took effect.
    pub fn done(&self) -> bool {
        matches!(self, Outcome::Done(_))
    }
}

impl Table {
    /// One PutItem, UpdateItem or DeleteItem, retried while DynamoDB is busy
    /// or its answer is lost. `what` names it in logs and errors.
    #[tracing::instrument(level = "debug", skip(self, write), fields(table = %self.name))]
    pub async fn write(&self, what: &'static str, write: &Write) -> Result<Outcome, StoreError> {
        // Boxed, like the SDK's futures in `Table::call`: the request
        // builders it holds are large too, and a caller's future holds
        // every future it awaits.
        let Failed {
            failure,
            after_unknown,
        } = match Box::pin(self.send_write(what, write)).await {
            Ok(returned) => return Ok(Outcome::Done(returned.filter(|item| !item.is_empty()))),
            Err(failed) => failed,
        };
        match failure {
            Failure::Condition => {
                if after_unknown && self.landed(write).await? {
                    tracing::info!(what, "a lost answer's write was this request's own");
                    return Ok(Outcome::Done(None));
                }
                Ok(Outcome::ConditionFailed { after_unknown })
            }
            // Retries ran out, and some attempt may have written: if it did,
            // the write took effect and must not answer an error.
            Failure::Store(err) if after_unknown && self.landed(write).await? => {
                tracing::info!(what, %err, "retries ran out, but a lost answer's write landed");
                Ok(Outcome::Done(None))
            }
            Failure::Store(err) if after_unknown => Err(after_unknown_outcome(err)),
            Failure::Store(err) => Err(err),
        }
    }

    /// Sends `write` as the one call its op is, answering the attributes it
    /// returned.
    async fn send_write(&self, what: &'static str, write: &Write) -> Result<Option<Item>, Failed> {
        write.within_limits(what, &self.sizes)?;
        let (client, table) = (&self.client, &self.name);
        match &write.op {
            Op::Put(item) => {
                let put = client.put_item().set_item(Some(item.clone()));
                let put = plain_write!(put, table, write);
                self.call(what, || put.clone().send())
                    .await
                    .map(|o| o.attributes)
            }
            Op::Update(key, change) => {
                let update = client
                    .update_item()
                    .set_key(Some(key.clone()))
                    .update_expression(&change.text);
                let update = plain_write!(update, table, write);
                self.call(what, || update.clone().send())
                    .await
                    .map(|o| o.attributes)
            }
            Op::Delete(key) => {
                let delete = client.delete_item().set_key(Some(key.clone()));
                let delete = plain_write!(delete, table, write);
                self.call(what, || delete.clone().send())
                    .await
                    .map(|o| o.attributes)
            }
            Op::Check(_) => Err(Failed::from(StoreError::Internal(format!(
                "{what}: a condition check is only a transaction's item"
            )))),
        }
    }

    /// Whether `write` shows that it landed (see [`Write::create`],
    /// [`Landed`], [`Deleted`]); `false` for a write that cannot tell.
    async fn landed(&self, write: &Write) -> Result<bool, StoreError> {
        match &write.landed {
            None => Ok(false),
            Some(ReadBack::Gone(key)) => Ok(self
                .get("a write read back", key.clone(), true)
                .await?
                .is_none()),
            Some(ReadBack::Holds(key, values)) => {
                let Some(stored) = self.get("a write read back", key.clone(), true).await? else {
                    return Ok(false);
                };
                Ok(values
                    .iter()
                    .all(|(name, value)| stored.get(name) == Some(value)))
            }
        }
    }

    /// Writes `items` with BatchWriteItem, 25 at a time, resending whatever
    /// DynamoDB leaves unprocessed. Unconditional: for loading only.
    #[cfg(feature = "bulk")]
    pub async fn batch_put(&self, items: Vec<Item>) -> Result<(), StoreError> {
        self.put_all("bulk load", items, 1).await
    }

    /// Puts `items` with BatchWriteItem, 25 a call, `parallel` calls at a
    /// time, resending whatever DynamoDB leaves unprocessed (with the
    /// backoff, as many rounds as its attempts; then busy). Unconditional:
    /// for items whose put is the same whoever repeats it (a home's
    /// entries, a bulk load).
    pub async fn put_all(
        &self,
        what: &'static str,
        items: Vec<Item>,
        parallel: usize,
    ) -> Result<(), StoreError> {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        let mut batches: Vec<Vec<WriteRequest>> = Vec::new();
        let mut items = items.into_iter().peekable();
        while items.peek().is_some() {
            batches.push(
                items
                    .by_ref()
                    .take(Limit::BatchWriteItems.max())
                    .map(|item| {
                        PutRequest::builder()
                            .set_item(Some(item))
                            .build()
                            .map(|put| WriteRequest::builder().put_request(put).build())
                    })
                    .collect::<Result<_, _>>()?,
            );
        }
        self.write_batches(what, batches, parallel).await
    }

    /// Deletes the items at `keys` with BatchWriteItem, as [`Table::put_all`]
    /// puts (deleting what is gone is a no-op).
    pub async fn delete_all(
        &self,
        what: &'static str,
        keys: Vec<Item>,
        parallel: usize,
    ) -> Result<(), StoreError> {
        use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
        let mut batches: Vec<Vec<WriteRequest>> = Vec::new();
        let mut keys = keys.into_iter().peekable();
        while keys.peek().is_some() {
            batches.push(
                keys.by_ref()
                    .take(Limit::BatchWriteItems.max())
                    .map(|key| {
                        DeleteRequest::builder()
                            .set_key(Some(key))
                            .build()
                            .map(|delete| WriteRequest::builder().delete_request(delete).build())
                    })
                    .collect::<Result<_, _>>()?,
            );
        }
        self.write_batches(what, batches, parallel).await
    }

    /// Sends `batches`, `parallel` at a time.
    async fn write_batches(
        &self,
        what: &'static str,
        batches: Vec<Vec<aws_sdk_dynamodb::types::WriteRequest>>,
        parallel: usize,
    ) -> Result<(), StoreError> {
        use futures::{StreamExt, TryStreamExt};
        futures::stream::iter(batches)
            .map(|requests| self.write_batch(what, requests))
            .buffer_unordered(parallel.max(1))
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// One BatchWriteItem of at most 25 `requests`, resent until none is
    /// left unprocessed; more are refused before sending, as DynamoDB would.
    pub(super) async fn write_batch(
        &self,
        what: &'static str,
        mut requests: Vec<aws_sdk_dynamodb::types::WriteRequest>,
    ) -> Result<(), StoreError> {
        self.sizes
            .hold(what, Limit::BatchWriteItems, requests.len())?;
        let mut round = 0;
        while !requests.is_empty() {
            let batch = self
                .client
                .batch_write_item()
                .request_items(&self.name, requests)
                .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Indexes);
            let output = self.call(what, || batch.clone().send()).await?;
            requests = output
                .unprocessed_items
                .and_then(|mut left| left.remove(&self.name))
                .unwrap_or_default();
            if !requests.is_empty() {
                round += 1;
                if round >= self.backoff.attempts {
                    return Err(StoreError::busy(
                        Busy::Throttled,
                        "items stayed unprocessed",
                    ));
                }
                tokio::time::sleep(self.backoff.delay(round)).await;
            }
        }
        Ok(())
    }
}

// Writes in a transaction.

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
    /// The items whose throttling together ends the retries
    /// ([`Committing::Throttled`]).
    yield_on: Vec<Slot>,
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
            yield_on: Vec::new(),
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

    /// Its items as the SDK takes them; more than 100 (or one with an
    /// expression over 4 KB) are refused before sending, as DynamoDB would.
    fn items(&self) -> Result<Vec<TransactWriteItem>, StoreError> {
        let sizes = &self.table.sizes;
        sizes.hold(self.what, Limit::TransactionItems, self.slots.len())?;
        self.slots
            .iter()
            .map(|(_, write)| transact_item(&self.table.name, sizes, write))
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

    /// Makes the first cancellation that throttles every item in `slots`
    /// end the transaction ([`Committing::Throttled`]): the caller moves
    /// their load elsewhere ([`crate::store::hot`]) rather than retry into a
    /// partition at its limit. A cancellation names each item it throttled,
    /// so items of one partition throttled together are that partition's
    /// doing, where one of them alone may be an index partition's its write
    /// also touches.
    pub fn yield_when_throttled(&mut self, slots: &[Slot]) {
        self.yield_on = slots.to_vec();
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
        let yield_on = self.yield_on.clone();
        let yields = |err: &SdkError<TransactWriteItemsError, _>| {
            !yield_on.is_empty() && yield_on.iter().all(|slot| throttled_item(err, *slot))
        };
        let busy = |err: &SdkError<TransactWriteItemsError, _>| match yields(err) {
            true => None,
            false => busy_transaction(err),
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
        if yields(&err) && !after_unknown {
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
fn transact_item(
    table: &str,
    sizes: &Sizes,
    write: &Write,
) -> Result<TransactWriteItem, StoreError> {
    write.within_limits("transaction item", sizes)?;
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
