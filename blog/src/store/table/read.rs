//! Reads: one item by key ([`Table::get`]), up to 100 by key
//! ([`Table::batch_get`]), a partition page by page ([`Query`],
//! [`Table::query_page`], [`Table::query_up_to`]) and, for the admin tools,
//! the whole table ([`Scan`], [`Table::scan_page`]). DynamoDB ends a page at
//! 1 MB whatever its limit, so a caller that wants `n` items follows the
//! pages ([`Page::next`]) until it has them.

use std::collections::HashMap;

use aws_sdk_dynamodb::{
    operation::{query::QueryOutput, scan::ScanOutput},
    types::{ConsumedCapacity, ReturnConsumedCapacity, Select},
};

use super::{
    Table,
    expr::{Expr, merged, s},
};
use crate::store::error::{Busy, Limit};
use crate::{
    keys::{Entity, GSI1, GSI1PK, GSI1SK, Item, PK, SK},
    store::error::StoreError,
};

/// A Query of one partition, of the table or of GSI1.
#[derive(Clone, Debug)]
pub struct Query {
    pub(super) index: Option<&'static str>,
    pub(super) key: Expr,
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

    /// Only sort keys before `sk` (a newest-first list's next page).
    pub fn before(self, sk: String) -> Self {
        self.and_sort_key("#sk < :before", &[(":before", sk)])
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

/// The output of a Query or of a Scan, which DynamoDB answers alike, read
/// into a [`Page`] the same way.
trait IntoPage {
    fn into_page(self) -> Page;
}

/// [`IntoPage`] for SDK outputs that have a page's fields (the SDK gives
/// them no trait in common).
macro_rules! into_page {
    ($($output:ty),+) => {$(
        impl IntoPage for $output {
            fn into_page(self) -> Page {
                Page {
                    count: u64::try_from(self.count).unwrap_or_default(),
                    read_units: units(self.consumed_capacity.as_ref()),
                    items: self.items.unwrap_or_default(),
                    next: self.last_evaluated_key,
                }
            }
        }
    )+};
}
into_page!(QueryOutput, ScanOutput);

/// The capacity units a call consumed, as the answer reports them.
fn units(consumed: Option<&ConsumedCapacity>) -> f64 {
    consumed
        .and_then(ConsumedCapacity::capacity_units)
        .unwrap_or(0.0)
}

impl Table {
    /// One GetItem; strongly consistent when a write depends on what it reads.
    #[tracing::instrument(level = "debug", skip(self, key), fields(table = %self.name))]
    /// `what` names it in the retry layer's logs.
    pub async fn get(
        &self,
        what: &'static str,
        key: Item,
        consistent: bool,
    ) -> Result<Option<Item>, StoreError> {
        let get = self
            .client
            .get_item()
            .table_name(&self.name)
            .set_key(Some(key))
            .consistent_read(consistent)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        Ok(self.call(what, || get.clone().send()).await?.item)
    }

    /// [`Table::get`], decoded as `E` (the logs name the read by `E`).
    pub async fn get_entity<E: Entity>(
        &self,
        key: Item,
        consistent: bool,
    ) -> Result<Option<E>, StoreError> {
        let name = std::any::type_name::<E>();
        let what = name.rsplit("::").next().unwrap_or(name);
        self.get(what, key, consistent)
            .await?
            .map(E::from_item)
            .transpose()
    }

    /// One page of `query` from `start`, at most `limit` items.
    pub async fn query_page(
        &self,
        what: &'static str,
        query: &Query,
        start: Option<Item>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        let (names, values) = merged([Some(&query.key), query.projection.as_ref()]);
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
        Ok(self.call(what, || call.clone().send()).await?.into_page())
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
        let (names, values) = merged([scan.filter.as_ref(), scan.projection.as_ref()]);
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
        Ok(self.call(what, || call.clone().send()).await?.into_page())
    }

    /// Strongly consistent BatchGetItem of `keys` (the audit's profiles; a
    /// page of a user's export), resending what DynamoDB leaves
    /// unprocessed. Returns the items found and the read units spent.
    /// A key named twice is read once (DynamoDB refuses a request that
    /// names one twice), and more than `BATCH_GET` keys go in calls of
    /// at most that many, sent at once.
    pub async fn batch_get(
        &self,
        what: &'static str,
        keys: Vec<Item>,
    ) -> Result<(Vec<Item>, f64), StoreError> {
        self.batch_get_with(what, keys, true).await
    }

    /// [`Table::batch_get`], eventually consistent unless `consistent`
    /// (half the units: a home page's posts, a follow list's profiles).
    pub async fn batch_get_with(
        &self,
        what: &'static str,
        keys: Vec<Item>,
        consistent: bool,
    ) -> Result<(Vec<Item>, f64), StoreError> {
        let keys = distinct(keys);
        if keys.len() > BATCH_GET {
            // The calls at once: their keys are the caller's, bounded by it.
            let calls = keys
                .chunks(BATCH_GET)
                .map(|chunk| self.batch_get_call(what, chunk.to_vec(), consistent));
            let (mut found, mut units) = (Vec::new(), 0.0);
            for (items, spent) in futures::future::try_join_all(calls).await? {
                found.extend(items);
                units += spent;
            }
            return Ok((found, units));
        }
        self.batch_get_call(what, keys, consistent).await
    }

    /// One BatchGetItem of at most [`BATCH_GET`] distinct `keys`, resent
    /// with what DynamoDB leaves unprocessed; more are refused before
    /// sending, as DynamoDB would.
    pub(super) async fn batch_get_call(
        &self,
        what: &'static str,
        keys: Vec<Item>,
        consistent: bool,
    ) -> Result<(Vec<Item>, f64), StoreError> {
        self.sizes.hold(what, Limit::BatchGetKeys, keys.len())?;
        if keys.is_empty() {
            return Ok((Vec::new(), 0.0));
        }
        let request = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(consistent)
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
            let output = self.call(what, || batch.clone().send()).await?;
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
}

/// The most keys one BatchGetItem may name.
pub const BATCH_GET: usize = Limit::BatchGetKeys.max();

/// `keys` with each key once, in the order first named.
fn distinct(keys: Vec<Item>) -> Vec<Item> {
    let mut once: Vec<Item> = Vec::with_capacity(keys.len());
    for key in keys {
        if !once.contains(&key) {
            once.push(key);
        }
    }
    once
}
