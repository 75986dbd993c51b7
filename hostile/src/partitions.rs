//! Per-partition throughput, as DynamoDB enforces it and DynamoDB Local
//! never does.
//!
//! Each partition key value, of the table and of each global secondary index
//! alike, serves at most 1,000 write units and 3,000 read units a second
//! (adaptive capacity may give a hot key a partition of its own; it keeps
//! these limits). [`PartitionLimits`] scales both so that one machine can
//! reach them (0.1: 100 WCU and 300 RCU a second per key).
//!
//! What a request costs, as DynamoDB bills it:
//! - a write: 1 WCU per KB (rounded up) of the larger of the item before and
//!   after, on its table partition, twice in a transaction (a
//!   `ConditionCheck` too, at the size of the item it checks); on an index
//!   partition, 1 WCU per KB of the projected entry when the entry changes
//!   (put, removed, or moved: both partitions). The item before is read
//!   from upstream first (one strongly consistent BatchGetItem of the
//!   request's keys); an update is admitted on the estimate that each index
//!   entry the item has changes (so that an index partition at its limit
//!   refuses it, as DynamoDB's does), its item after is read back once it
//!   took effect, and the difference charged then;
//! - a read: 4 KB units of what it returned (per item for GetItem and
//!   BatchGetItem, the page's total for a Query, at least one unit), half
//!   for an eventually consistent one, on the partition it reads (a Query's
//!   key condition names it; an index Query reads the index partition).
//!   Scans are not charged: they cross partitions, and only offline tools
//!   run them here.
//!
//! A partition's allowance is a token bucket refilled at its rate and
//! holding one second of it (DynamoDB's burst capacity, up to 300 seconds of
//! unused capacity, is off unless asked for: with it a key that was quiet
//! may take 300 times its rate for a moment, which hides a hot key from a
//! short test). A write is refused when any partition it touches lacks its
//! cost; a read when its partition has less than its smallest cost (its
//! true cost is charged once known, and may take the bucket below zero).
//! A refused single request gets `ProvisionedThroughputExceededException`
//! with DynamoDB's throttling reason (`TableWriteKeyRangeThroughputExceeded`,
//! `IndexWriteKeyRangeThroughputExceeded`, and the read ones); a refused
//! transaction `TransactionCanceledException` with `ThrottlingError` for
//! each item that met a throttled partition. A throttled index partition
//! refuses the base table's write, as on DynamoDB. A table may also have an
//! on-demand maximum ([`TableCeiling`]): one more bucket, of the whole
//! table, charged with every charge on one of its partitions; a request past
//! it is refused whole with `ThrottlingException` and
//! `TableWriteMaxOnDemandThroughputExceeded` (or the read one).

use std::{collections::HashMap, time::Instant};

use serde_json::{Map, Value, json};

/// DynamoDB's limits per partition key value and second.
pub const WRITE_UNITS_PER_SECOND: f64 = 1_000.0;
pub const READ_UNITS_PER_SECOND: f64 = 3_000.0;

/// The partition limits the proxy enforces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartitionLimits {
    /// Multiplies DynamoDB's limits (0.1: 100 WCU and 300 RCU a second).
    pub scale: f64,
    /// Seconds of unused capacity a partition keeps (at least 1; DynamoDB's
    /// burst capacity is 300).
    pub burst_seconds: f64,
    /// A table's on-demand maximum (`MaxWriteRequestUnits`,
    /// `MaxReadRequestUnits`), in units a second over all its partitions,
    /// not scaled; `None`: none.
    pub table_ceiling: Option<TableCeiling>,
}

/// A table's on-demand maximum throughput: what all its partitions take
/// together, a second. A request past it (a transaction too) is refused
/// whole with `ThrottlingException` and the reason
/// `TableWriteMaxOnDemandThroughputExceeded` (or the read one): DynamoDB's
/// docs have requests past the maximum "receive quick throttle responses"
/// with a `MaxOnDemandThroughputExceeded` reason, not a cancellation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableCeiling {
    pub write_units_per_second: f64,
    pub read_units_per_second: f64,
}

impl PartitionLimits {
    /// DynamoDB's limits times `scale`, without burst capacity.
    pub fn scaled(scale: f64) -> Result<Self, String> {
        if !(scale > 0.0 && scale <= 1.0) {
            return Err(format!("partition scale {scale} is not within (0, 1]"));
        }
        Ok(Self {
            scale,
            burst_seconds: 1.0,
            table_ceiling: None,
        })
    }

    /// These limits with each table's on-demand maximum at `ceiling`.
    pub fn with_table_ceiling(self, ceiling: TableCeiling) -> Self {
        Self {
            table_ceiling: Some(ceiling),
            ..self
        }
    }

    pub fn write_units_per_second(&self) -> f64 {
        WRITE_UNITS_PER_SECOND * self.scale
    }

    pub fn read_units_per_second(&self) -> f64 {
        READ_UNITS_PER_SECOND * self.scale
    }
}

/// A table's keys and indexes, from DescribeTable.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TableShape {
    pub(crate) pk: String,
    pub(crate) sk: Option<String>,
    pub(crate) indexes: Vec<IndexShape>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IndexShape {
    pub(crate) name: String,
    pub(crate) pk: String,
    pub(crate) sk: Option<String>,
    /// `None`: every attribute (ALL); else the non-key attributes projected.
    pub(crate) projected: Option<Vec<String>>,
}

impl TableShape {
    /// The shape a DescribeTable answer gives.
    pub(crate) fn from_description(description: &Value) -> Option<Self> {
        let table = &description["Table"];
        let keys = |schema: &Value| -> Option<(String, Option<String>)> {
            let mut pk = None;
            let mut sk = None;
            for key in schema.as_array()? {
                let name = key["AttributeName"].as_str()?.to_owned();
                match key["KeyType"].as_str()? {
                    "HASH" => pk = Some(name),
                    _ => sk = Some(name),
                }
            }
            Some((pk?, sk))
        };
        let (pk, sk) = keys(&table["KeySchema"])?;
        let indexes = table["GlobalSecondaryIndexes"]
            .as_array()
            .map(|indexes| {
                indexes
                    .iter()
                    .filter_map(|index| {
                        let (pk, sk) = keys(&index["KeySchema"])?;
                        let projection = &index["Projection"];
                        let projected = match projection["ProjectionType"].as_str() {
                            Some("ALL") => None,
                            _ => Some(
                                projection["NonKeyAttributes"]
                                    .as_array()
                                    .map(|names| {
                                        names
                                            .iter()
                                            .filter_map(|n| n.as_str().map(str::to_owned))
                                            .collect()
                                    })
                                    .unwrap_or_default(),
                            ),
                        };
                        Some(IndexShape {
                            name: index["IndexName"].as_str()?.to_owned(),
                            pk,
                            sk,
                            projected,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Self { pk, sk, indexes })
    }

    /// The table key of `item` (its key attributes only).
    pub(crate) fn key_of(&self, item: &Map<String, Value>) -> Map<String, Value> {
        [Some(&self.pk), self.sk.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|name| item.get(name).map(|v| (name.clone(), v.clone())))
            .collect()
    }

    /// The index entry `item` has in `index`, if it has the index's keys.
    fn entry(&self, index: &IndexShape, item: &Map<String, Value>) -> Option<Map<String, Value>> {
        let has = |name: &String| item.contains_key(name);
        if !has(&index.pk) || index.sk.as_ref().is_some_and(|sk| !has(sk)) {
            return None;
        }
        Some(match &index.projected {
            None => item.clone(),
            Some(attributes) => item
                .iter()
                .filter(|(name, _)| {
                    **name == self.pk
                        || self.sk.as_ref() == Some(*name)
                        || **name == index.pk
                        || index.sk.as_ref() == Some(*name)
                        || attributes.contains(name)
                })
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
        })
    }
}

/// One partition: a table's or an index's, by its partition key value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Partition {
    pub(crate) table: String,
    pub(crate) index: Option<String>,
    pub(crate) key: String,
}

/// The key of the bucket that stands for a whole table (its on-demand
/// maximum), which no partition key value can be (DynamoDB keys are not
/// empty).
const WHOLE_TABLE: &str = "";

impl Partition {
    /// The bucket of `table`'s on-demand maximum.
    fn whole_table(table: &str) -> Self {
        Self {
            table: table.to_owned(),
            index: None,
            key: WHOLE_TABLE.to_owned(),
        }
    }

    /// Whether it stands for a whole table's on-demand maximum.
    pub(crate) fn is_whole_table(&self) -> bool {
        self.index.is_none() && self.key == WHOLE_TABLE
    }
}

/// Which of a partition's two allowances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Read,
    Write,
}

/// What one item of a request costs, where.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Charge {
    pub(crate) partition: Partition,
    pub(crate) kind: Kind,
    pub(crate) units: f64,
    /// The request's item (a transaction's index) this charge is for.
    pub(crate) item: usize,
}

/// The write charges of one item at `key`: `before` and `after` the write
/// (`None`: no item), on `table` shaped `shape`; `transactional` doubles the
/// table's. A write of no item at all (a delete or check of nothing) still
/// costs its 1 unit.
pub(crate) fn write_charges(
    table: &str,
    shape: &TableShape,
    key: &Map<String, Value>,
    before: Option<&Map<String, Value>>,
    after: Option<&Map<String, Value>>,
    transactional: bool,
    item: usize,
) -> Vec<Charge> {
    let mut charges = Vec::new();
    let Some(key_value) = key.get(&shape.pk).map(partition_value) else {
        return charges;
    };
    let size = before.map_or(0, item_size).max(after.map_or(0, item_size));
    let factor = if transactional { 2.0 } else { 1.0 };
    charges.push(Charge {
        partition: Partition {
            table: table.to_owned(),
            index: None,
            key: key_value,
        },
        kind: Kind::Write,
        units: factor * write_units(size),
        item,
    });
    for index in &shape.indexes {
        let old = before.and_then(|i| shape.entry(index, i));
        let new = after.and_then(|i| shape.entry(index, i));
        if old == new {
            continue;
        }
        let partition_of = |entry: &Map<String, Value>| Partition {
            table: table.to_owned(),
            index: Some(index.name.clone()),
            key: entry
                .get(&index.pk)
                .map(partition_value)
                .unwrap_or_default(),
        };
        let sort_key =
            |entry: &Map<String, Value>| index.sk.as_ref().and_then(|sk| entry.get(sk).cloned());
        match (&old, &new) {
            // The same entry, changed: one write. A changed index key (its
            // partition or its sort key) is a delete and a put.
            (Some(old), Some(new))
                if partition_of(old) == partition_of(new) && sort_key(old) == sort_key(new) =>
            {
                charges.push(Charge {
                    partition: partition_of(new),
                    kind: Kind::Write,
                    units: write_units(item_size(old).max(item_size(new))),
                    item,
                });
            }
            _ => {
                for entry in [&old, &new].into_iter().flatten() {
                    charges.push(Charge {
                        partition: partition_of(entry),
                        kind: Kind::Write,
                        units: write_units(item_size(entry)),
                        item,
                    });
                }
            }
        }
    }
    charges
}

/// What an update of `before` is charged on the indexes before it is known
/// what it changes: each index entry `before` has whose attributes the
/// update's expression names (`names`; `None`: unknown, so every entry), as
/// if it changed (the true charges are settled once it took effect).
/// Without this an index partition would never refuse an update, only be
/// charged after it; with every entry, an update of an attribute no index
/// holds would be refused for an index it cannot change.
pub(crate) fn index_estimates(
    table: &str,
    shape: &TableShape,
    before: &Map<String, Value>,
    names: Option<&[String]>,
    item: usize,
) -> Vec<Charge> {
    let touches = |index: &IndexShape| {
        names.is_none_or(|names| {
            names.iter().any(|name| {
                *name == index.pk
                    || index.sk.as_ref() == Some(name)
                    || index
                        .projected
                        .as_ref()
                        .is_none_or(|projected| projected.contains(name))
            })
        })
    };
    shape
        .indexes
        .iter()
        .filter(|index| touches(index))
        .filter_map(|index| {
            let entry = shape.entry(index, before)?;
            Some(Charge {
                partition: Partition {
                    table: table.to_owned(),
                    index: Some(index.name.clone()),
                    key: entry.get(&index.pk).map(partition_value)?,
                },
                kind: Kind::Write,
                units: write_units(item_size(&entry)),
                item,
            })
        })
        .collect()
}

/// Read units for `bytes` read in one go.
pub(crate) fn read_units(bytes: usize, strongly_consistent: bool) -> f64 {
    let units = bytes.div_ceil(4096).max(1) as f64;
    if strongly_consistent {
        units
    } else {
        units / 2.0
    }
}

fn write_units(bytes: usize) -> f64 {
    bytes.div_ceil(1024).max(1) as f64
}

/// A partition key value as text (`S` and `N` as they are, `B` as base64).
pub(crate) fn partition_value(value: &Value) -> String {
    ["S", "N", "B"]
        .iter()
        .find_map(|t| value[t].as_str())
        .map_or_else(|| value.to_string(), str::to_owned)
}

/// An item's size as DynamoDB counts it: each attribute's name in UTF-8
/// bytes plus its value's size.
pub(crate) fn item_size(item: &Map<String, Value>) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum()
}

/// A value's size: S its UTF-8 bytes, N about one byte per two digits plus
/// one, B its decoded bytes, BOOL and NULL 1, L and M 3 plus 1 per element
/// and the elements' sizes (a map's names included), sets their members'.
fn value_size(value: &Value) -> usize {
    let Some((kind, inner)) = value.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    let text = |v: &Value| v.as_str().map_or(0, str::len);
    let number = |v: &Value| {
        v.as_str()
            .map_or(0, |n| n.trim_start_matches('-').len().div_ceil(2) + 1)
    };
    let binary = |v: &Value| text(v) / 4 * 3;
    let members =
        |size: &dyn Fn(&Value) -> usize| inner.as_array().map_or(0, |a| a.iter().map(size).sum());
    match kind.as_str() {
        "S" => text(inner),
        "N" => number(inner),
        "B" => binary(inner),
        "BOOL" | "NULL" => 1,
        "SS" => members(&text),
        "NS" => members(&number),
        "BS" => members(&binary),
        "L" => {
            3 + inner
                .as_array()
                .map_or(0, |a| a.iter().map(|v| value_size(v) + 1).sum())
        }
        "M" => {
            3 + inner.as_object().map_or(0, |m| {
                m.iter()
                    .map(|(name, v)| name.len() + value_size(v) + 1)
                    .sum()
            })
        }
        _ => 0,
    }
}

/// The buckets of every partition seen, and what each was charged in all.
#[derive(Debug)]
pub(crate) struct Buckets {
    limits: PartitionLimits,
    buckets: HashMap<(Partition, Kind), Bucket>,
    charged: HashMap<(Partition, Kind), f64>,
}

/// What the partitions were charged since the limits were set (or the
/// totals taken): the benchmark's billed units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Charged {
    pub read_units: f64,
    pub write_units: f64,
    /// The partition charged the most write units: its table (and index)
    /// and key, and the units.
    pub hottest_write: Option<(String, f64)>,
    /// The partition charged the most read units, and the units.
    pub hottest_read: Option<(String, f64)>,
    /// Every partition's write units, named as `hottest_write` names one.
    pub writes: Vec<(String, f64)>,
    /// Every partition's read units, named the same way.
    pub reads: Vec<(String, f64)>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Buckets {
    pub(crate) fn new(limits: PartitionLimits) -> Self {
        Self {
            limits,
            buckets: HashMap::new(),
            charged: HashMap::new(),
        }
    }

    pub(crate) fn limits(&self) -> PartitionLimits {
        self.limits
    }

    fn rate(&self, partition: &Partition, kind: Kind) -> f64 {
        match (kind, partition.is_whole_table(), self.limits.table_ceiling) {
            (Kind::Read, true, Some(ceiling)) => ceiling.read_units_per_second,
            (Kind::Write, true, Some(ceiling)) => ceiling.write_units_per_second,
            (Kind::Read, _, _) => self.limits.read_units_per_second(),
            (Kind::Write, _, _) => self.limits.write_units_per_second(),
        }
    }

    fn capacity(&self, partition: &Partition, kind: Kind) -> f64 {
        self.rate(partition, kind) * self.limits.burst_seconds.max(1.0)
    }

    /// `charges` and, for a table with a ceiling, the same units of each
    /// charge on one of its own partitions charged to the whole table.
    fn with_ceiling(&self, charges: &[Charge]) -> Vec<Charge> {
        let mut all = charges.to_vec();
        if self.limits.table_ceiling.is_some() {
            all.extend(
                charges
                    .iter()
                    .filter(|c| c.partition.index.is_none())
                    .map(|c| Charge {
                        partition: Partition::whole_table(&c.partition.table),
                        ..c.clone()
                    }),
            );
        }
        all
    }

    /// What a partition has left now (`None`: never charged).
    pub(crate) fn tokens(
        &mut self,
        partition: &Partition,
        kind: Kind,
        now: Instant,
    ) -> Option<f64> {
        if !self.buckets.contains_key(&(partition.clone(), kind)) {
            return None;
        }
        Some(self.refilled(partition, kind, now).tokens)
    }

    /// The tokens of a partition now, refilled since it was last seen.
    fn refilled(&mut self, partition: &Partition, kind: Kind, now: Instant) -> &mut Bucket {
        let rate = self.rate(partition, kind);
        let capacity = self.capacity(partition, kind);
        let bucket = self
            .buckets
            .entry((partition.clone(), kind))
            .or_insert(Bucket {
                tokens: capacity,
                at: now,
            });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(capacity);
        bucket.at = now;
        bucket
    }

    /// Takes every charge if each partition has what its charges need;
    /// otherwise takes nothing and returns the refused charges. A cost above
    /// a whole bucket (possible only at a small scale: 400 KB written
    /// transactionally is 800 of DynamoDB's 1,000 units) needs a full bucket,
    /// and leaves it below zero.
    pub(crate) fn take(&mut self, charges: &[Charge], now: Instant) -> Result<(), Vec<Charge>> {
        self.would_take(charges, now)?;
        for charge in charges {
            self.adjust(&charge.partition, charge.kind, charge.units, now);
        }
        Ok(())
    }

    /// Whether [`Buckets::take`] would take `charges` now, taking nothing
    /// (the buckets are only brought up to `now`).
    pub(crate) fn would_take(
        &mut self,
        charges: &[Charge],
        now: Instant,
    ) -> Result<(), Vec<Charge>> {
        let charges = self.with_ceiling(charges);
        let mut totals: HashMap<(Partition, Kind), f64> = HashMap::new();
        for charge in &charges {
            *totals
                .entry((charge.partition.clone(), charge.kind))
                .or_default() += charge.units;
        }
        let short: Vec<(Partition, Kind)> = totals
            .iter()
            .filter(|((partition, kind), needed)| {
                let capacity = self.capacity(partition, *kind);
                self.refilled(partition, *kind, now).tokens < needed.min(capacity)
            })
            .map(|(key, _)| key.clone())
            .collect();
        if short.is_empty() {
            return Ok(());
        }
        // Past the table's ceiling, the request is refused for that alone.
        let whole = short
            .iter()
            .any(|(partition, _)| partition.is_whole_table());
        Err(charges
            .into_iter()
            .filter(|c| short.contains(&(c.partition.clone(), c.kind)))
            .filter(|c| !whole || c.partition.is_whole_table())
            .collect())
    }

    /// Charges `units` more (or gives back, when negative) once a request's
    /// true cost is known; a bucket may go below zero.
    pub(crate) fn adjust(&mut self, partition: &Partition, kind: Kind, units: f64, now: Instant) {
        self.refilled(partition, kind, now).tokens -= units;
        *self.charged.entry((partition.clone(), kind)).or_default() += units;
        if self.limits.table_ceiling.is_some() && partition.index.is_none() {
            let table = Partition::whole_table(&partition.table);
            self.refilled(&table, kind, now).tokens -= units;
        }
    }

    /// The totals charged since the last call, which starts them again.
    pub(crate) fn take_charged(&mut self) -> Charged {
        let charged = std::mem::take(&mut self.charged);
        let mut totals = Charged::default();
        for ((partition, kind), units) in charged {
            let (total, hottest) = match kind {
                Kind::Read => (&mut totals.read_units, &mut totals.hottest_read),
                Kind::Write => (&mut totals.write_units, &mut totals.hottest_write),
            };
            *total += units;
            let name = match &partition.index {
                Some(index) => format!("{}/{index}/{}", partition.table, partition.key),
                None => format!("{}/{}", partition.table, partition.key),
            };
            match kind {
                Kind::Write => totals.writes.push((name.clone(), units)),
                Kind::Read => totals.reads.push((name.clone(), units)),
            }
            if hottest.as_ref().is_none_or(|(_, most)| units > *most) {
                *hottest = Some((name, units));
            }
        }
        totals
    }
}

/// DynamoDB's throttling reason for a refused charge.
pub(crate) fn reason(charge: &Charge) -> &'static str {
    if charge.partition.is_whole_table() {
        return match charge.kind {
            Kind::Write => "TableWriteMaxOnDemandThroughputExceeded",
            Kind::Read => "TableReadMaxOnDemandThroughputExceeded",
        };
    }
    match (charge.partition.index.is_some(), charge.kind) {
        (false, Kind::Write) => "TableWriteKeyRangeThroughputExceeded",
        (false, Kind::Read) => "TableReadKeyRangeThroughputExceeded",
        (true, Kind::Write) => "IndexWriteKeyRangeThroughputExceeded",
        (true, Kind::Read) => "IndexReadKeyRangeThroughputExceeded",
    }
}

/// The resource a refused charge names.
pub(crate) fn resource(charge: &Charge) -> String {
    let table = format!(
        "arn:aws:dynamodb:local:000000000000:table/{}",
        charge.partition.table
    );
    match &charge.partition.index {
        Some(index) => format!("{table}/index/{index}"),
        None => table,
    }
}

/// The `ThrottlingReasons` of an error body.
pub(crate) fn throttling_reasons(refused: &[Charge]) -> Value {
    let mut reasons: Vec<Value> = refused
        .iter()
        .map(|c| json!({ "reason": reason(c), "resource": resource(c) }))
        .collect();
    reasons.dedup();
    Value::Array(reasons)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::{Map, Value, json};

    use super::*;

    fn item(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    fn shape() -> TableShape {
        TableShape {
            pk: "PK".into(),
            sk: Some("SK".into()),
            indexes: vec![IndexShape {
                name: "GSI1".into(),
                pk: "GSI1PK".into(),
                sk: Some("GSI1SK".into()),
                projected: Some(vec!["title".into()]),
            }],
        }
    }

    #[test]
    fn sizes_follow_dynamodbs_rules() {
        let sized = item(json!({
            "PK": {"S": "POST#1"}, "n": {"N": "12345"}, "ok": {"BOOL": true},
            "l": {"L": [{"S": "ab"}, {"NULL": true}]}, "m": {"M": {"k": {"S": "v"}}}
        }));
        // PK 2+6, n 1+4, ok 2+1, l 1+(3+3+2), m 1+(3+1+1+1)
        assert_eq!(item_size(&sized), 8 + 5 + 3 + 9 + 7);
    }

    #[test]
    fn a_write_costs_the_larger_image_twice_in_a_transaction_and_its_index_entry() {
        let before = item(json!({
            "PK": {"S": "POST#1"}, "SK": {"S": "POST"}, "GSI1PK": {"S": "USER#a"},
            "GSI1SK": {"S": "POST#1"}, "title": {"S": "t"}, "body": {"S": "x".repeat(1500)}
        }));
        let mut after = before.clone();
        after.insert("title".into(), json!({"S": "new"}));
        let key = shape().key_of(&before);
        let charges = write_charges("t", &shape(), &key, Some(&before), Some(&after), true, 0);
        assert_eq!(charges.len(), 2, "{charges:?}");
        assert_eq!(charges[0].partition.key, "POST#1");
        assert_eq!(charges[0].units, 4.0, "2 KB, twice");
        assert_eq!(charges[1].partition.index.as_deref(), Some("GSI1"));
        assert_eq!(charges[1].partition.key, "USER#a");
        assert_eq!(charges[1].units, 1.0, "the projected entry, not the body");

        // An attribute the index does not project: no index write.
        let mut unprojected = before.clone();
        unprojected.insert("body".into(), json!({"S": "y"}));
        let charges = write_charges(
            "t",
            &shape(),
            &key,
            Some(&before),
            Some(&unprojected),
            false,
            0,
        );
        assert_eq!(charges.len(), 1);
        assert_eq!(charges[0].units, 2.0);

        // A new item whose index key moves: both index partitions.
        let mut moved = before.clone();
        moved.insert("GSI1PK".into(), json!({"S": "USER#b"}));
        let charges = write_charges("t", &shape(), &key, Some(&before), Some(&moved), false, 0);
        let keys: Vec<_> = charges.iter().map(|c| c.partition.key.as_str()).collect();
        assert_eq!(keys, ["POST#1", "USER#a", "USER#b"]);

        // The index's sort key changes in the same partition: a delete and a
        // put there.
        let mut resorted = before.clone();
        resorted.insert("GSI1SK".into(), json!({"S": "POST#2"}));
        let charges = write_charges(
            "t",
            &shape(),
            &key,
            Some(&before),
            Some(&resorted),
            false,
            0,
        );
        let keys: Vec<_> = charges.iter().map(|c| c.partition.key.as_str()).collect();
        assert_eq!(keys, ["POST#1", "USER#a", "USER#a"]);
    }

    #[test]
    fn a_bucket_holds_one_second_and_refuses_what_it_lacks() {
        let limits = PartitionLimits::scaled(0.01).expect("scale"); // 10 WCU/s
        let mut buckets = Buckets::new(limits);
        let charge = |key: &str, units: f64| Charge {
            partition: Partition {
                table: "t".into(),
                index: None,
                key: key.into(),
            },
            kind: Kind::Write,
            units,
            item: 0,
        };
        let start = Instant::now();
        assert!(buckets.take(&[charge("a", 6.0)], start).is_ok());
        assert!(buckets.take(&[charge("a", 4.0)], start).is_ok());
        let refused = buckets
            .take(&[charge("b", 1.0), charge("a", 1.0)], start)
            .expect_err("a is spent");
        assert_eq!(refused, [charge("a", 1.0)]);
        assert!(
            buckets.take(&[charge("b", 1.0)], start).is_ok(),
            "b took nothing above"
        );
        // Half a second later: 5 units back, never more than 10.
        let later = start + std::time::Duration::from_millis(500);
        assert!(buckets.take(&[charge("a", 5.0)], later).is_ok());
        assert!(buckets.take(&[charge("a", 0.5)], later).is_err());
        let much_later = start + std::time::Duration::from_secs(60);
        assert!(buckets.take(&[charge("a", 10.0)], much_later).is_ok());
        assert!(
            buckets.take(&[charge("a", 0.5)], much_later).is_err(),
            "no burst"
        );
    }

    #[test]
    fn a_table_ceiling_refuses_what_all_partitions_take_together() {
        let ceiling = TableCeiling {
            write_units_per_second: 15.0,
            read_units_per_second: 30.0,
        };
        // 10 WCU/s a partition, 15 for the table.
        let limits = PartitionLimits::scaled(0.01)
            .expect("scale")
            .with_table_ceiling(ceiling);
        let mut buckets = Buckets::new(limits);
        let charge = |key: &str, index: Option<&str>, units: f64| Charge {
            partition: Partition {
                table: "t".into(),
                index: index.map(str::to_owned),
                key: key.into(),
            },
            kind: Kind::Write,
            units,
            item: 0,
        };
        let start = Instant::now();
        assert!(buckets.take(&[charge("a", None, 8.0)], start).is_ok());
        // An index's partitions are not the table's.
        assert!(
            buckets
                .take(&[charge("u", Some("GSI1"), 9.0)], start)
                .is_ok()
        );
        // b has room, the table has 7 left.
        let refused = buckets
            .take(&[charge("b", None, 8.0)], start)
            .expect_err("past the ceiling");
        assert!(refused.iter().all(|c| c.partition.is_whole_table()));
        assert_eq!(
            throttling_reasons(&refused),
            json!([{
                "reason": "TableWriteMaxOnDemandThroughputExceeded",
                "resource": "arn:aws:dynamodb:local:000000000000:table/t",
            }])
        );
        assert!(buckets.take(&[charge("b", None, 7.0)], start).is_ok());
        // A partition's own limit still names the partition.
        let later = start + std::time::Duration::from_secs(1);
        assert!(buckets.take(&[charge("a", None, 10.0)], later).is_ok());
        let refused = buckets
            .take(&[charge("a", None, 1.0)], later)
            .expect_err("past a's own limit");
        assert_eq!(refused[0].partition.key, "a");
        assert_eq!(
            throttling_reasons(&refused)[0]["reason"],
            "TableWriteKeyRangeThroughputExceeded"
        );
        // What the ceiling took is not billed twice.
        let charged = buckets.take_charged();
        assert!((charged.write_units - 34.0).abs() < 1e-9, "{charged:?}");
    }
}
