//! The table layer: the only code that talks to DynamoDB about the table.
//!
//! Every operation of the store is one of these: [`Table::get`],
//! [`Table::write`] (a put, update or delete, conditional or not),
//! [`Table::query_page`]/[`Table::query_up_to`] (pages past 1 MB),
//! [`Table::transact`] (TransactWriteItems with its items named), and for the
//! admin tools [`Table::scan_page`] and [`Table::batch_get`]. Each answers a
//! small typed outcome ([`Outcome`], [`TxOutcome`]); the table's name,
//! `ReturnConsumedCapacity` (what the meter and the metrics read), client
//! request tokens, retries and the classification of DynamoDB's errors live
//! here and nowhere else.
//!
//! # Errors and retries: one layer
//!
//! The SDK's own retries are off (`store::client`): this layer's [`Backoff`]
//! is the only one, so a throttled call is sent at most `attempts` (8) times
//! in all, never 3 × 8.
//!
//! | DynamoDB answers | retried here | then |
//! |---|---|---|
//! | `ProvisionedThroughputExceededException`, `ThrottlingException`, `RequestLimitExceeded`, `LimitExceededException` | yes | [`StoreError::Busy`]: 503 / failed record |
//! | `TransactionConflictException` (a plain write on an item a transaction holds; the SDK never retries it) | yes | the same |
//! | `TransactionCanceledException` with `TransactionConflict`, `ThrottlingError` or `ProvisionedThroughputExceeded` reasons | yes | the same |
//! | `InternalServerError`, `ServiceUnavailable`, a timeout, a dropped connection: **the outcome is unknown** | yes | the same |
//! | `ConditionalCheckFailedException`, or a cancellation with a `ConditionalCheckFailed` reason | no | the caller's domain answer |
//!
//! # Unknown outcomes
//!
//! An attempt whose answer was lost may have taken effect. From then on:
//! - every later attempt of that transaction carries the same
//!   `ClientRequestToken`, whatever happens in between (before that, a
//!   cancelled attempt, which certainly did not commit, gets a fresh one);
//! - a failed condition, or retries that ran out, are checked by reading
//!   back what the write would have left ([`Write::create`] knows which
//!   attributes make an item this request's, [`Write::landed_when`] and
//!   [`Write::landed_if_gone`] say it for an update or a delete): if it is
//!   there, the write took effect and answers as if nothing had been lost
//!   ([`Outcome::Done`], [`TxOutcome::Committed`]), never with an error;
//! - any other failed condition is reported with `after_unknown: true`;
//! - retries that ran out without the write found answer
//!   [`Busy::OutcomeUnknown`] (the API's 503 `outcome_unknown`), never the
//!   busy error that says nothing was written: the lost attempt may still
//!   commit.

#[cfg(feature = "admin")]
mod schema;

use std::{
    collections::HashMap,
    future::Future,
    hash::{DefaultHasher, Hash, Hasher},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

use aws_sdk_dynamodb::{
    Client,
    error::{ProvideErrorMetadata, SdkError},
    operation::transact_write_items::TransactWriteItemsError,
    types::{
        AttributeValue, CancellationReason, ConditionCheck, ConsumedCapacity, Delete, Put,
        ReturnConsumedCapacity, ReturnValue, Select, TransactWriteItem, Update,
    },
};

#[cfg(feature = "admin")]
pub use schema::{GSI1_PROJECTED, create_if_missing};

use super::StoreError;
use crate::keys::{Entity, GSI1, GSI1PK, GSI1SK, Item, PK, SK};

// ---------------------------------------------------------------------------
// Expressions and writes: what callers describe, without the SDK's builders.
// ---------------------------------------------------------------------------

/// An expression (condition, update or key condition) with its `#name` and
/// `:value` placeholders.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expr {
    text: String,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expr {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// `#placeholder` stands for the attribute `attribute`.
    pub fn name(mut self, placeholder: &str, attribute: &str) -> Self {
        self.names
            .insert(placeholder.to_owned(), attribute.to_owned());
        self
    }

    /// `:placeholder` stands for `value`.
    /// The same expression with `prefix` before its text (its placeholders
    /// kept): `attribute_exists(PK) AND ` before a condition, say.
    pub fn prefixed(mut self, prefix: &str) -> Self {
        self.text = format!("{prefix}{}", self.text);
        self
    }

    pub fn value(mut self, placeholder: &str, value: AttributeValue) -> Self {
        self.values.insert(placeholder.to_owned(), value);
        self
    }

    fn merge_into(
        &self,
        names: &mut HashMap<String, String>,
        values: &mut HashMap<String, AttributeValue>,
    ) {
        names.extend(self.names.clone());
        values.extend(self.values.clone());
    }
}

/// A string attribute value.
pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A number attribute value.
pub fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// A number that may be negative (a change of a count).
pub fn signed(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// `#name` placeholders, `None` when there are none.
type Names = Option<HashMap<String, String>>;
/// `:value` placeholders, `None` when there are none.
type Values = Option<HashMap<String, AttributeValue>>;

/// How a write shows that it landed, read back after an unknown outcome.
#[derive(Clone, Debug)]
enum Landed {
    /// The item at the key holds these values.
    Holds(Item, Vec<(String, AttributeValue)>),
    /// The item at the key is gone.
    Gone(Item),
}

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
    landed: Option<Landed>,
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
    pub fn put<E: Entity>(entity: &E) -> Result<Self, StoreError> {
        Ok(Self::of(Op::Put(entity.to_item()?)))
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
        let absent = Expr::new("attribute_not_exists(#pk)").name("#pk", PK);
        Ok(Self::of(Op::Put(item)).when(absent).landed_when(own))
    }

    /// Changes the item at `key` by `change` (an update expression).
    pub fn update(key: Item, change: Expr) -> Self {
        Self::of(Op::Update(key, change))
    }

    pub fn delete(key: Item) -> Self {
        Self::of(Op::Delete(key))
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

    /// After an unknown outcome, the write landed if the item it targets
    /// holds these values (an update's own: a version it set, say).
    pub fn landed_when(mut self, values: Vec<(&str, AttributeValue)>) -> Self {
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
        self.landed = Some(Landed::Holds(key, values));
        self
    }

    /// After an unknown outcome, a delete landed if its item is gone: what
    /// the caller asked for is done, whoever did it.
    pub fn landed_if_gone(mut self) -> Self {
        if let Op::Delete(key) = &self.op {
            self.landed = Some(Landed::Gone(key.clone()));
        }
        self
    }

    pub fn returning(mut self, returning: Returning) -> Self {
        self.returning = returning;
        self
    }

    /// Its condition, and the placeholders of its change and condition.
    fn parts(&self) -> (Option<String>, Names, Values) {
        let mut names = HashMap::new();
        let mut values = HashMap::new();
        if let Op::Update(_, change) = &self.op {
            change.merge_into(&mut names, &mut values);
        }
        if let Some(condition) = &self.condition {
            condition.merge_into(&mut names, &mut values);
        }
        (
            self.condition.as_ref().map(|c| c.text.clone()),
            (!names.is_empty()).then_some(names),
            (!values.is_empty()).then_some(values),
        )
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
/// SDK's write builders (they share these setters, not a trait).
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

// ---------------------------------------------------------------------------
// Queries.
// ---------------------------------------------------------------------------

/// A Query of one partition, of the table or of GSI1.
#[derive(Clone, Debug)]
pub struct Query {
    index: Option<&'static str>,
    key: Expr,
    projection: Option<Expr>,
    forward: bool,
    consistent: bool,
    count_only: bool,
    page_size: Option<i32>,
}

impl Query {
    fn on(index: Option<&'static str>, pk_attr: &str, pk: String) -> Self {
        Self {
            index,
            key: Expr::new("#pk = :pk")
                .name("#pk", pk_attr)
                .value(":pk", s(pk)),
            projection: None,
            forward: true,
            consistent: false,
            count_only: false,
            page_size: None,
        }
    }

    /// The table's partition `pk`, oldest sort key first.
    pub fn partition(pk: String) -> Self {
        Self::on(None, PK, pk)
    }

    /// GSI1's partition `pk`.
    pub fn gsi1(pk: String) -> Self {
        Self::on(Some(GSI1), GSI1PK, pk)
    }

    fn sort_key(&self) -> &'static str {
        if self.index.is_some() { GSI1SK } else { SK }
    }

    /// Adds `condition` on the sort key (`#sk`) with its `values`.
    fn and_sort_key(mut self, condition: &str, values: &[(&str, String)]) -> Self {
        let sk = self.sort_key();
        let mut key = Expr {
            text: format!("{} AND {condition}", self.key.text),
            ..self.key
        }
        .name("#sk", sk);
        for (placeholder, value) in values {
            key = key.value(placeholder, s(value.clone()));
        }
        self.key = key;
        self
    }

    /// Only sort keys that begin with `prefix`.
    pub fn begins_with(self, prefix: &str) -> Self {
        self.and_sort_key(
            "begins_with(#sk, :prefix)",
            &[(":prefix", prefix.to_owned())],
        )
    }

    /// Only sort keys in `[low, high]`.
    pub fn between(self, low: String, high: String) -> Self {
        self.and_sort_key(
            "#sk BETWEEN :low AND :high",
            &[(":low", low), (":high", high)],
        )
    }

    /// Only sort keys after `sk`.
    pub fn after(self, sk: String) -> Self {
        self.and_sort_key("#sk > :after", &[(":after", sk)])
    }

    pub fn newest_first(mut self) -> Self {
        self.forward = false;
        self
    }

    /// Strongly consistent (the table only: GSIs never are).
    pub fn consistent(mut self) -> Self {
        self.consistent = true;
        self
    }

    /// Reads only these attributes (`#names` in `projection`'s text).
    pub fn project(mut self, projection: Expr) -> Self {
        self.projection = Some(projection);
        self
    }

    /// Counts the items instead of returning them (`Select: COUNT`).
    pub fn count(mut self) -> Self {
        self.count_only = true;
        self
    }

    /// At most `size` items a page.
    pub fn page_size(mut self, size: Option<i32>) -> Self {
        self.page_size = size;
        self
    }
}

#[cfg(feature = "admin")]
/// A Scan of the whole table, for the admin tools.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    filter: Option<Expr>,
    projection: Option<Expr>,
    consistent: bool,
    segment: Option<(i32, i32)>,
    page_size: Option<i32>,
}

#[cfg(feature = "admin")]
impl Scan {
    pub fn filter(mut self, filter: Expr) -> Self {
        self.filter = Some(filter);
        self
    }

    pub fn project(mut self, projection: Expr) -> Self {
        self.projection = Some(projection);
        self
    }

    pub fn consistent(mut self) -> Self {
        self.consistent = true;
        self
    }

    /// Segment `segment` of `of` (a parallel scan).
    pub fn segment(mut self, segment: u32, of: u32) -> Self {
        if of > 1 {
            let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
            self.segment = Some((int(segment), int(of)));
        }
        self
    }

    pub fn page_size(mut self, size: Option<i32>) -> Self {
        self.page_size = size;
        self
    }
}

/// One page of a Query or a Scan.
#[derive(Debug, Default)]
pub struct Page {
    pub items: Vec<Item>,
    /// Where the next page starts; `None` on the last.
    pub next: Option<Item>,
    /// How many items matched (what a counting Query answers).
    pub count: u64,
    /// The read units the page consumed.
    pub read_units: f64,
}

fn units(consumed: Option<&ConsumedCapacity>) -> f64 {
    consumed
        .and_then(ConsumedCapacity::capacity_units)
        .unwrap_or(0.0)
}

/// The placeholders of `parts`, as the SDK takes them (never empty maps,
/// which DynamoDB refuses).
fn merged(parts: [Option<&Expr>; 3]) -> (Names, Values) {
    let mut names = HashMap::new();
    let mut values = HashMap::new();
    for part in parts.into_iter().flatten() {
        part.merge_into(&mut names, &mut values);
    }
    (
        (!names.is_empty()).then_some(names),
        (!values.is_empty()).then_some(values),
    )
}

// ---------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------

/// The table and the SDK client a process shares across invocations.
#[derive(Clone, Debug)]
pub struct Table {
    client: Client,
    name: String,
    backoff: Backoff,
}

impl Table {
    pub fn new(client: Client, name: impl Into<String>) -> Self {
        Self {
            client,
            name: name.into(),
            backoff: Backoff::default(),
        }
    }

    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// One GetItem; strongly consistent when a write depends on what it reads.
    #[tracing::instrument(level = "debug", skip(self, key), fields(table = %self.name))]
    pub async fn get(&self, key: Item, consistent: bool) -> Result<Option<Item>, StoreError> {
        let get = self
            .client
            .get_item()
            .table_name(&self.name)
            .set_key(Some(key))
            .consistent_read(consistent)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let output = Box::pin(self.backoff.retry("get", busy_call, || get.clone().send()))
            .await
            .map_err(classify)?;
        Ok(output.item)
    }

    /// [`Table::get`], decoded as `E`.
    pub async fn get_entity<E: Entity>(
        &self,
        key: Item,
        consistent: bool,
    ) -> Result<Option<E>, StoreError> {
        self.get(key, consistent)
            .await?
            .map(E::from_item)
            .transpose()
    }

    /// One PutItem, UpdateItem or DeleteItem, retried while DynamoDB is busy
    /// or its answer is lost. `what` names it in logs and errors.
    #[tracing::instrument(level = "debug", skip(self, write), fields(table = %self.name))]
    pub async fn write(&self, what: &'static str, write: &Write) -> Result<Outcome, StoreError> {
        let unknown = AtomicBool::new(false);
        // Boxed: the SDK's futures are large, and a caller's future holds
        // every one it awaits (debug builds overflowed a test thread's stack).
        let result = match &write.op {
            Op::Put(item) => Box::pin(self.put_item(what, write, item, &unknown)).await,
            Op::Update(key, change) => {
                Box::pin(self.update_item(what, write, key, change, &unknown)).await
            }
            Op::Delete(key) => Box::pin(self.delete_item(what, write, key, &unknown)).await,
            Op::Check(_) => Err(Failure::Store(StoreError::Internal(format!(
                "{what}: a condition check is only a transaction's item"
            )))),
        };
        let after_unknown = unknown.load(Ordering::Relaxed);
        match result {
            Ok(returned) => Ok(Outcome::Done(returned.filter(|item| !item.is_empty()))),
            Err(Failure::Condition) => {
                if after_unknown && self.landed(write).await? {
                    tracing::info!(what, "a lost answer's write was this request's own");
                    return Ok(Outcome::Done(None));
                }
                Ok(Outcome::ConditionFailed { after_unknown })
            }
            // Retries ran out, and some attempt may have written: if it did,
            // the write took effect and must not answer an error.
            Err(Failure::Store(err)) if after_unknown && self.landed(write).await? => {
                tracing::info!(what, %err, "retries ran out, but a lost answer's write landed");
                Ok(Outcome::Done(None))
            }
            Err(Failure::Store(err)) if after_unknown => Err(after_unknown_outcome(err)),
            Err(Failure::Store(err)) => Err(err),
        }
    }

    async fn put_item(
        &self,
        what: &'static str,
        write: &Write,
        item: &Item,
        unknown: &AtomicBool,
    ) -> Result<Option<Item>, Failure> {
        let put = self.client.put_item().set_item(Some(item.clone()));
        let put = with_write!(put, &self.name, write).set_return_values(write.return_value());
        let put = put.return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let sent = self.send(what, unknown, || put.clone().send()).await;
        settle(sent).map(|o| o.attributes)
    }

    async fn update_item(
        &self,
        what: &'static str,
        write: &Write,
        key: &Item,
        change: &Expr,
        unknown: &AtomicBool,
    ) -> Result<Option<Item>, Failure> {
        let update = self
            .client
            .update_item()
            .set_key(Some(key.clone()))
            .update_expression(&change.text);
        let update = with_write!(update, &self.name, write).set_return_values(write.return_value());
        let update = update.return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let sent = self.send(what, unknown, || update.clone().send()).await;
        settle(sent).map(|o| o.attributes)
    }

    async fn delete_item(
        &self,
        what: &'static str,
        write: &Write,
        key: &Item,
        unknown: &AtomicBool,
    ) -> Result<Option<Item>, Failure> {
        let delete = self.client.delete_item().set_key(Some(key.clone()));
        let delete = with_write!(delete, &self.name, write).set_return_values(write.return_value());
        let delete = delete.return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let sent = self.send(what, unknown, || delete.clone().send()).await;
        settle(sent).map(|o| o.attributes)
    }

    /// Sends a plain call through the backoff, noting in `unknown` whether
    /// some attempt's outcome was lost.
    async fn send<T, E, R, F, Fut>(
        &self,
        what: &'static str,
        unknown: &AtomicBool,
        mut attempt: F,
    ) -> Result<T, SdkError<E, R>>
    where
        E: ProvideErrorMetadata,
        R: std::fmt::Debug,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, R>>>,
    {
        self.backoff
            .retry(what, busy_call, || {
                let sent = attempt();
                async {
                    let result = sent.await;
                    if result.as_ref().err().is_some_and(lost) {
                        unknown.store(true, Ordering::Relaxed);
                    }
                    result
                }
            })
            .await
    }

    /// Whether `write` shows that it landed (see [`Write::create`],
    /// [`Write::landed_when`], [`Write::landed_if_gone`]); `false` for a
    /// write that cannot tell.
    async fn landed(&self, write: &Write) -> Result<bool, StoreError> {
        match &write.landed {
            None => Ok(false),
            Some(Landed::Gone(key)) => Ok(self.get(key.clone(), true).await?.is_none()),
            Some(Landed::Holds(key, values)) => {
                let Some(stored) = self.get(key.clone(), true).await? else {
                    return Ok(false);
                };
                Ok(values
                    .iter()
                    .all(|(name, value)| stored.get(name) == Some(value)))
            }
        }
    }

    /// One page of `query` from `start`, at most `limit` items.
    pub async fn query_page(
        &self,
        what: &'static str,
        query: &Query,
        start: Option<Item>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        let (names, values) = merged([Some(&query.key), query.projection.as_ref(), None]);
        let call = self
            .client
            .query()
            .table_name(&self.name)
            .set_index_name(query.index.map(str::to_owned))
            .key_condition_expression(&query.key.text)
            .set_projection_expression(query.projection.as_ref().map(|p| p.text.clone()))
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .scan_index_forward(query.forward)
            .consistent_read(query.consistent)
            .set_select(query.count_only.then_some(Select::Count))
            .set_limit(limit.or(query.page_size))
            .set_exclusive_start_key(start)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let page = Box::pin(self.backoff.retry(what, busy_call, || call.clone().send()))
            .await
            .map_err(classify)?;
        Ok(Page {
            count: u64::try_from(page.count).unwrap_or_default(),
            read_units: units(page.consumed_capacity.as_ref()),
            items: page.items.unwrap_or_default(),
            next: page.last_evaluated_key,
        })
    }

    /// Runs `query` from after `start`, page after page (a page stops at
    /// 1 MB whatever its limit), until `want` items have come back or the
    /// partition has no more.
    pub async fn query_up_to(
        &self,
        what: &'static str,
        query: &Query,
        mut start: Option<Item>,
        want: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        while items.len() < want {
            let left = i32::try_from(want - items.len()).unwrap_or(i32::MAX);
            let page = self.query_page(what, query, start, Some(left)).await?;
            items.extend(page.items);
            start = page.next;
            if start.is_none() {
                break;
            }
        }
        Ok(items)
    }

    #[cfg(feature = "admin")]
    /// One page of a Scan (admin only: the audit and the migration).
    pub async fn scan_page(
        &self,
        what: &'static str,
        scan: &Scan,
        start: Option<Item>,
    ) -> Result<Page, StoreError> {
        let (names, values) = merged([scan.filter.as_ref(), scan.projection.as_ref(), None]);
        let call = self
            .client
            .scan()
            .table_name(&self.name)
            .set_filter_expression(scan.filter.as_ref().map(|f| f.text.clone()))
            .set_projection_expression(scan.projection.as_ref().map(|p| p.text.clone()))
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .consistent_read(scan.consistent)
            .set_segment(scan.segment.map(|(segment, _)| segment))
            .set_total_segments(scan.segment.map(|(_, of)| of))
            .set_limit(scan.page_size)
            .set_exclusive_start_key(start)
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        let page = Box::pin(self.backoff.retry(what, busy_call, || call.clone().send()))
            .await
            .map_err(classify)?;
        Ok(Page {
            count: u64::try_from(page.count).unwrap_or_default(),
            read_units: units(page.consumed_capacity.as_ref()),
            items: page.items.unwrap_or_default(),
            next: page.last_evaluated_key,
        })
    }

    /// Strongly consistent BatchGetItem of up to 100 `keys` (the audit's
    /// profiles; a page of a user's export), resending what DynamoDB leaves
    /// unprocessed. Returns
    /// the items found and the read units spent.
    pub async fn batch_get(
        &self,
        what: &'static str,
        keys: Vec<Item>,
    ) -> Result<(Vec<Item>, f64), StoreError> {
        let request = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(true)
            .build()?;
        let mut pending = Some(HashMap::from([(self.name.clone(), request)]));
        let (mut found, mut read_units) = (Vec::new(), 0.0);
        let mut round = 0_u32;
        while let Some(request) = pending.take().filter(|r| !r.is_empty()) {
            let batch = self
                .client
                .batch_get_item()
                .set_request_items(Some(request))
                .return_consumed_capacity(ReturnConsumedCapacity::Total);
            let output = self
                .backoff
                .retry(what, busy_call, || batch.clone().send())
                .await
                .map_err(classify)?;
            read_units += output
                .consumed_capacity
                .iter()
                .flatten()
                .filter_map(ConsumedCapacity::capacity_units)
                .sum::<f64>();
            found.extend(
                output
                    .responses
                    .and_then(|mut r| r.remove(&self.name))
                    .unwrap_or_default(),
            );
            pending = output.unprocessed_keys;
            if pending.as_ref().is_some_and(|p| !p.is_empty()) {
                // DynamoDB left some keys for later: it is busy.
                round += 1;
                if round >= self.backoff.attempts {
                    return Err(StoreError::busy(Busy::Throttled, "keys stayed unprocessed"));
                }
                tokio::time::sleep(self.backoff.delay(round)).await;
            }
        }
        Ok((found, read_units))
    }

    /// Writes `items` with BatchWriteItem, 25 at a time, resending whatever
    /// DynamoDB leaves unprocessed. Unconditional: for loading only.
    #[cfg(feature = "bulk")]
    pub async fn batch_put(&self, items: Vec<Item>) -> Result<(), StoreError> {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        let mut items = items.into_iter().peekable();
        while items.peek().is_some() {
            let mut requests: Vec<WriteRequest> = items
                .by_ref()
                .take(25)
                .map(|item| {
                    PutRequest::builder()
                        .set_item(Some(item))
                        .build()
                        .map(|put| WriteRequest::builder().put_request(put).build())
                })
                .collect::<Result<_, _>>()?;
            let mut round = 0;
            while !requests.is_empty() {
                let batch = self
                    .client
                    .batch_write_item()
                    .request_items(&self.name, requests);
                let output = self
                    .backoff
                    .retry("bulk load", busy_call, || batch.clone().send())
                    .await
                    .map_err(classify)?;
                requests = output
                    .unprocessed_items
                    .and_then(|mut left| left.remove(&self.name))
                    .unwrap_or_default();
                if !requests.is_empty() {
                    tokio::time::sleep(self.backoff.delay(round)).await;
                    round += 1;
                }
            }
        }
        Ok(())
    }

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

/// Why a single write did not take effect.
enum Failure {
    Condition,
    Store(StoreError),
}

/// A plain call's result: its condition's failure told apart from the rest.
fn settle<T, E, R>(result: Result<T, SdkError<E, R>>) -> Result<T, Failure>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match result {
        Ok(output) => Ok(output),
        Err(SdkError::ServiceError(e)) if e.err().code().is_some_and(condition_failed_code) => {
            Err(Failure::Condition)
        }
        Err(err) => Err(Failure::Store(classify(err))),
    }
}

// ---------------------------------------------------------------------------
// Transactions.
// ---------------------------------------------------------------------------

/// An item of a [`Transaction`], to ask [`Rejected::failed`] about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(usize);

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

    #[tracing::instrument(level = "debug", skip(self), fields(what = self.what, items = self.slots.len()))]
    async fn run(self) -> Result<Committing, StoreError> {
        let table = self.table;
        let what = self.what;
        let items = self.items()?;
        let tokens = Tokens::new();
        let yield_on = self.yield_on;
        let busy = |err: &SdkError<TransactWriteItemsError, _>| match yield_on {
            Some(slot) if throttled_item(err, slot) => None,
            _ => busy_transaction(err),
        };
        let result = Box::pin(table.backoff.retry(what, busy, || async {
            let sent = table
                .client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .client_request_token(tokens.current())
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await;
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
        Ok(Committing::Done(TxOutcome::ConditionFailed(Rejected {
            names: self.slots.iter().map(|(name, _)| *name).collect(),
            failed,
            after_unknown,
        })))
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
        let table = self.table;
        let until = resolve_until(table.backoff.resolve);
        let pause = table.backoff.cap;
        while Instant::now() + pause <= until {
            tokio::time::sleep(pause).await;
            let sent = table
                .client
                .transact_write_items()
                .set_transact_items(Some(items.to_vec()))
                .client_request_token(tokens.current())
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await;
            let err = match sent {
                Ok(_) => {
                    tracing::info!(what = self.what, "an unknown outcome resolved: committed");
                    return Ok(Some(TxOutcome::Committed));
                }
                Err(err) => err,
            };
            if let Some(failed) = failed_conditions(&err) {
                return Ok(Some(TxOutcome::ConditionFailed(Rejected {
                    names: self.slots.iter().map(|(name, _)| *name).collect(),
                    failed,
                    after_unknown: true,
                })));
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

/// Which items' conditions failed, when the transaction was cancelled for
/// failed conditions (whatever else happened).
fn failed_conditions<R>(err: &SdkError<TransactWriteItemsError, R>) -> Option<Vec<bool>> {
    let Some(TransactWriteItemsError::TransactionCanceledException(e)) = err.as_service_error()
    else {
        return None;
    };
    let failed: Vec<bool> = e
        .cancellation_reasons()
        .iter()
        .map(|r| r.code().is_some_and(condition_failed_code))
        .collect();
    failed.iter().any(|f| *f).then_some(failed)
}

/// The `ClientRequestToken` of one transaction's attempts: fresh after a
/// cancellation (which certainly did not commit) until an attempt's outcome
/// is unknown; from then on, the same for every attempt.
struct Tokens {
    current: Mutex<String>,
    pinned: AtomicBool,
}

impl Tokens {
    fn new() -> Self {
        Self {
            current: Mutex::new(next_token()),
            pinned: AtomicBool::new(false),
        }
    }

    fn current(&self) -> String {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn pinned(&self) -> bool {
        self.pinned.load(Ordering::Relaxed)
    }

    /// Learns from an attempt's error which token the next attempt carries.
    fn after<R>(&self, err: &SdkError<TransactWriteItemsError, R>) {
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
fn resolve_until(budget: Duration) -> Instant {
    let until = Instant::now() + budget;
    SCOPE
        .try_with(|scope| scope.deadline)
        .ok()
        .flatten()
        .map_or(until, |deadline| {
            until.min(deadline.checked_sub(ANSWER_MARGIN).unwrap_or(deadline))
        })
}

fn next_token() -> String {
    SCOPE
        .try_with(|scope| token(&scope.seed, scope.issued.fetch_add(1, Ordering::Relaxed)))
        .unwrap_or_else(|_| token(&ulid::Ulid::generate().to_string(), 0))
}

/// A `ClientRequestToken` (at most 36 characters) for the `n`-th
/// transaction of `seed`.
fn token(seed: &str, n: u32) -> String {
    let half = |salt: u8| {
        let mut hasher = DefaultHasher::new();
        (salt, seed, n).hash(&mut hasher);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

// ---------------------------------------------------------------------------
// DynamoDB's errors, classified once.
// ---------------------------------------------------------------------------

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

/// `err` as the request must answer it when an earlier attempt's outcome
/// was unknown and the write was not found: a busy DynamoDB no longer means
/// that nothing was written.
fn after_unknown_outcome(err: StoreError) -> StoreError {
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
fn condition_failed_code(code: &str) -> bool {
    matches!(
        code,
        "ConditionalCheckFailedException" | "ConditionalCheckFailed"
    )
}

/// The meaning of an error code of any DynamoDB call, when it is transient.
fn busy_code(code: &str) -> Option<Busy> {
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
/// that could not even connect was never sent.
fn lost<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> bool {
    match err {
        SdkError::DispatchFailure(failure) => !never_connected(failure),
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

/// Transient failures of a plain call (anything but TransactWriteItems).
pub fn busy_call<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> Option<Busy> {
    match err {
        SdkError::ServiceError(e) => e.err().code().and_then(busy_code),
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Some(Busy::Unavailable)
        }
        _ => None,
    }
}

/// Transient failures of a TransactWriteItems call: cancellations whose
/// reasons are all transient (a failed condition is an answer, whatever else
/// happened), and what [`busy_call`] calls transient.
fn busy_transaction<R>(err: &SdkError<TransactWriteItemsError, R>) -> Option<Busy> {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
            busy_reasons(e.cancellation_reasons())
        }
        _ => busy_call(err),
    }
}

/// Whether a cancellation refused the item in `slot` for capacity (and no
/// item's condition failed, which would be the answer).
fn throttled_item<R>(err: &SdkError<TransactWriteItemsError, R>, slot: Slot) -> bool {
    busy_item(err, slot) == Some(Busy::Throttled)
}

/// Why a cancellation refused the item in `slot`, when it was transient
/// (and no item's condition failed, which would be the answer).
fn busy_item<R>(err: &SdkError<TransactWriteItemsError, R>, slot: Slot) -> Option<Busy> {
    let Some(TransactWriteItemsError::TransactionCanceledException(e)) = err.as_service_error()
    else {
        return None;
    };
    let reasons = e.cancellation_reasons();
    busy_reasons(reasons)?;
    reasons
        .get(slot.0)
        .and_then(|r| r.code())
        .and_then(busy_reason)
}

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
    let detail = describe(&err);
    match busy_call(&err) {
        Some(cause) => StoreError::busy(cause, detail),
        None => StoreError::Internal(detail),
    }
}

/// One line saying what went wrong with a call, for logs.
fn describe<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> String {
    match err {
        SdkError::ServiceError(e) => format!(
            "{}: {}",
            e.err().code().unwrap_or("Unknown"),
            e.err().message().unwrap_or_default()
        ),
        SdkError::TimeoutError(_) => "request timed out".to_owned(),
        SdkError::DispatchFailure(e) => format!("could not reach DynamoDB: {:?}", e.as_other()),
        SdkError::ResponseError(_) => "unreadable response".to_owned(),
        _ => "request could not be built".to_owned(),
    }
}

// ---------------------------------------------------------------------------
// Backoff: the one retry layer.
// ---------------------------------------------------------------------------

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
    /// ([`request_scope_until`]).
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

    fn delay(&self, attempt: u32) -> Duration {
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

#[cfg(test)]
mod tests;
