//! The proxy's side of [`crate::partitions`]: reads what a request will
//! touch (its keys; the items before a write, from upstream), admits or
//! refuses it on the partitions' buckets, and charges the rest of its true
//! cost once upstream has answered.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Instant,
};

use serde_json::{Map, Value, json};

use crate::partitions::{
    Buckets, Charge, Kind, Partition, PartitionLimits, TableShape, index_estimates, item_size,
    partition_value, read_units, write_charges,
};

/// The limiter of a proxy: the buckets and the shapes of the tables seen.
#[derive(Debug)]
pub(crate) struct Limiter {
    buckets: Mutex<Buckets>,
    shapes: Mutex<HashMap<String, TableShape>>,
}

/// What upstream is asked on the limiter's behalf (DescribeTable,
/// BatchGetItem), with the client's credentials.
pub(crate) trait Upstream {
    async fn call(&self, operation: &str, request: Value) -> Option<Value>;
}

/// One item a write request changes.
#[derive(Debug, Clone)]
struct WriteItem {
    table: String,
    key: Map<String, Value>,
    after: After,
    /// Its position in the request (a transaction's item).
    index: usize,
}

#[derive(Debug, Clone)]
enum After {
    Item(Map<String, Value>),
    Gone,
    /// An update: known once it has taken effect. It names the attributes
    /// its expression mentions (`None`: it could not be read).
    Updated(Option<Vec<String>>),
    /// A transaction's condition check: nothing changes.
    Checked,
}

/// One read a request makes.
#[derive(Debug, Clone)]
struct ReadItem {
    partition: Partition,
    strongly_consistent: bool,
    /// Twice the units (TransactGetItems).
    transactional: bool,
    /// A BatchGetItem's key: its table, and its place among that table's
    /// `Keys`.
    batch_key: Option<(String, usize)>,
}

/// The decision on one request.
pub(crate) enum Admission {
    /// Not metered (control plane, Scan, an unreadable request).
    Free,
    /// Refused: the charges no partition had room for, and whether the
    /// request was a transaction of `items` items.
    Refused {
        refused: Vec<Charge>,
        transaction: Option<usize>,
    },
    /// Admitted: what is charged once upstream answers.
    Admitted(Pending),
    /// A BatchGetItem some of whose keys' partitions had no room: the rest
    /// is read (`request`, the keys refused taken out), and the keys
    /// refused are answered as `UnprocessedKeys` (`unprocessed`, as
    /// DynamoDB answers them: each table's entry as asked, with only those
    /// keys), as DynamoDB does with a batch it can read only part of.
    Partial {
        pending: Pending,
        request: Value,
        unprocessed: Value,
    },
}

/// An update admitted on an estimate: the item before it, and what was
/// charged for it.
struct Update {
    write: WriteItem,
    before: Option<Map<String, Value>>,
    estimated: Vec<Charge>,
}

/// The part of a request's cost known only from upstream's answer.
pub(crate) struct Pending {
    updates: Vec<Update>,
    transactional: bool,
    reads: Vec<ReadItem>,
    operation: String,
}

impl Limiter {
    pub(crate) fn new(limits: PartitionLimits) -> Self {
        Self {
            buckets: Mutex::new(Buckets::new(limits)),
            shapes: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn limits(&self) -> PartitionLimits {
        self.buckets().limits()
    }

    /// What was charged since the last call (see [`Buckets::take_charged`]).
    pub(crate) fn take_charged(&self) -> crate::partitions::Charged {
        self.buckets().take_charged()
    }

    /// What a partition has left of `kind` now (`None`: never charged).
    pub(crate) fn allowance(&self, partition: &Partition, kind: Kind) -> Option<f64> {
        self.buckets().tokens(partition, kind, Instant::now())
    }

    fn buckets(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.buckets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits `operation` with `body`, or refuses it.
    pub(crate) async fn admit(
        &self,
        upstream: &impl Upstream,
        operation: &str,
        body: &[u8],
    ) -> Admission {
        let Ok(request) = serde_json::from_slice::<Value>(body) else {
            return Admission::Free;
        };
        let (writes, transactional) = writes_of(operation, &request);
        let reads = self.reads_of(upstream, operation, &request).await;
        if writes.is_empty() && reads.is_empty() {
            return Admission::Free;
        }
        let mut charges = Vec::new();
        let mut updates = Vec::new();
        if !writes.is_empty() {
            // A put names its item, not its key: the table's shape says
            // which attributes are the key.
            let mut keyed = Vec::new();
            for mut write in writes {
                let Some(shape) = self.shape(upstream, &write.table).await else {
                    continue;
                };
                write.key = shape.key_of(&write.key);
                keyed.push((write, shape));
            }
            // A spent table partition refuses before anything is read: its
            // least cost is a unit (two in a transaction) whatever the item.
            let least: Vec<Charge> = keyed
                .iter()
                .filter_map(|(write, shape)| {
                    Some(Charge {
                        partition: Partition {
                            table: write.table.clone(),
                            index: None,
                            key: write.key.get(&shape.pk).map(partition_value)?,
                        },
                        kind: Kind::Write,
                        units: if transactional { 2.0 } else { 1.0 },
                        item: write.index,
                    })
                })
                .collect();
            if let Err(refused) = self.buckets().would_take(&least, Instant::now()) {
                return Admission::Refused {
                    refused,
                    transaction: transaction_items(operation, &request),
                };
            }
            let writes: Vec<WriteItem> = keyed.iter().map(|(w, _)| w.clone()).collect();
            let before = self.items_before(upstream, &writes).await;
            for (write, shape) in keyed {
                let old = before.get(&(write.table.clone(), key_text(&write.key)));
                let after = match &write.after {
                    After::Item(item) => Some(item.clone()),
                    After::Gone => None,
                    // Estimated as the item before (or its key alone), set
                    // right once the update has taken effect.
                    After::Updated(_) => Some(old.cloned().unwrap_or_else(|| write.key.clone())),
                    After::Checked => old.cloned(),
                };
                let mut item_charges = write_charges(
                    &write.table,
                    &shape,
                    &write.key,
                    old,
                    after.as_ref(),
                    transactional,
                    write.index,
                );
                if let (After::Updated(names), Some(old)) = (&write.after, old) {
                    let names = names.as_deref();
                    let estimates = index_estimates(&write.table, &shape, old, names, write.index);
                    item_charges.extend(estimates);
                }
                if matches!(write.after, After::Updated(_)) {
                    updates.push(Update {
                        write: write.clone(),
                        before: old.cloned(),
                        estimated: item_charges.clone(),
                    });
                }
                charges.extend(item_charges);
            }
        }
        for (index, read) in reads.iter().enumerate() {
            charges.push(Charge {
                partition: read.partition.clone(),
                kind: Kind::Read,
                units: read_units(0, read.strongly_consistent)
                    * if read.transactional { 2.0 } else { 1.0 },
                item: index,
            });
        }
        let taken = self.buckets().take(&charges, Instant::now());
        match taken {
            Err(refused) if operation == "BatchGetItem" => {
                self.read_part(request, reads, &charges, refused)
            }
            Err(refused) => Admission::Refused {
                refused,
                transaction: transaction_items(operation, &request),
            },
            Ok(()) => Admission::Admitted(Pending {
                updates,
                transactional,
                reads,
                operation: operation.to_owned(),
            }),
        }
    }

    /// A BatchGetItem whose `charges` were `refused` in part: the keys of
    /// the partitions that had room read, the others left unprocessed
    /// ([`Admission::Partial`]); refused whole when none had room, or past
    /// the table's ceiling.
    fn read_part(
        &self,
        request: Value,
        reads: Vec<ReadItem>,
        charges: &[Charge],
        refused: Vec<Charge>,
    ) -> Admission {
        let whole = refused.iter().any(|c| c.partition.is_whole_table());
        let short: std::collections::HashSet<usize> = refused.iter().map(|c| c.item).collect();
        let admitted: Vec<Charge> = charges
            .iter()
            .filter(|c| !short.contains(&c.item))
            .cloned()
            .collect();
        let refuse = |refused| Admission::Refused {
            refused,
            transaction: None,
        };
        if whole || admitted.is_empty() {
            return refuse(refused);
        }
        if let Err(refused) = self.buckets().take(&admitted, Instant::now()) {
            return refuse(refused);
        }
        let (kept, left): (Vec<_>, Vec<_>) = reads
            .into_iter()
            .enumerate()
            .partition(|(index, _)| !short.contains(index));
        let left: Vec<(String, usize)> =
            left.into_iter().filter_map(|(_, r)| r.batch_key).collect();
        let (request, unprocessed) = split_batch_get(request, &left);
        Admission::Partial {
            pending: Pending {
                updates: Vec::new(),
                transactional: false,
                reads: kept.into_iter().map(|(_, read)| read).collect(),
                operation: "BatchGetItem".to_owned(),
            },
            request,
            unprocessed,
        }
    }

    /// Charges what upstream's `answer` (status 200) shows the request cost
    /// beyond what was taken when it was admitted.
    pub(crate) async fn settle(&self, upstream: &impl Upstream, pending: Pending, answer: &[u8]) {
        let now = Instant::now;
        if !pending.updates.is_empty() {
            let writes: Vec<WriteItem> = pending.updates.iter().map(|u| u.write.clone()).collect();
            let after = self.items_before(upstream, &writes).await;
            for Update {
                write,
                before,
                estimated,
            } in &pending.updates
            {
                let Some(shape) = self.shape(upstream, &write.table).await else {
                    continue;
                };
                let new = after.get(&(write.table.clone(), key_text(&write.key)));
                let actual = write_charges(
                    &write.table,
                    &shape,
                    &write.key,
                    before.as_ref(),
                    new,
                    pending.transactional,
                    write.index,
                );
                let mut buckets = self.buckets();
                for charge in &actual {
                    buckets.adjust(&charge.partition, charge.kind, charge.units, now());
                }
                for charge in estimated {
                    buckets.adjust(&charge.partition, charge.kind, -charge.units, now());
                }
            }
        }
        if pending.reads.is_empty() {
            return;
        }
        let Ok(answer) = serde_json::from_slice::<Value>(answer) else {
            return;
        };
        let read_bytes = read_sizes(&pending.operation, &answer, pending.reads.len());
        let mut buckets = self.buckets();
        for (read, bytes) in pending.reads.iter().zip(read_bytes) {
            let factor = if read.transactional { 2.0 } else { 1.0 };
            let extra = factor
                * (read_units(bytes, read.strongly_consistent)
                    - read_units(0, read.strongly_consistent));
            if extra > 0.0 {
                buckets.adjust(&read.partition, Kind::Read, extra, now());
            }
        }
    }

    /// The table's keys and indexes (DescribeTable once per table).
    async fn shape(&self, upstream: &impl Upstream, table: &str) -> Option<TableShape> {
        if let Some(shape) = self
            .shapes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(table)
        {
            return Some(shape.clone());
        }
        let description = upstream
            .call("DescribeTable", json!({ "TableName": table }))
            .await?;
        let shape = TableShape::from_description(&description)?;
        self.shapes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(table.to_owned(), shape.clone());
        Some(shape)
    }

    /// The items at `writes`' keys now, by (table, key): one strongly
    /// consistent BatchGetItem.
    async fn items_before(
        &self,
        upstream: &impl Upstream,
        writes: &[WriteItem],
    ) -> HashMap<(String, String), Map<String, Value>> {
        let mut found = HashMap::new();
        let mut requested: HashMap<String, Vec<Value>> = HashMap::new();
        for write in writes {
            let keys = requested.entry(write.table.clone()).or_default();
            let key = Value::Object(write.key.clone());
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let request: Map<String, Value> = requested
            .into_iter()
            .map(|(table, keys)| (table, json!({ "Keys": keys, "ConsistentRead": true })))
            .collect();
        let Some(answer) = upstream
            .call("BatchGetItem", json!({ "RequestItems": request }))
            .await
        else {
            return found;
        };
        let Some(responses) = answer["Responses"].as_object() else {
            return found;
        };
        for (table, items) in responses {
            let Some(shape) = self.shape(upstream, table).await else {
                continue;
            };
            for item in items.as_array().into_iter().flatten() {
                if let Some(item) = item.as_object() {
                    found.insert((table.clone(), key_text(&shape.key_of(item))), item.clone());
                }
            }
        }
        found
    }

    /// The partitions a read request reads.
    async fn reads_of(
        &self,
        upstream: &impl Upstream,
        operation: &str,
        request: &Value,
    ) -> Vec<ReadItem> {
        let consistent = |r: &Value| r["ConsistentRead"].as_bool().unwrap_or(false);
        let mut reads = Vec::new();
        match operation {
            "GetItem" | "Query" => {
                let Some(table) = request["TableName"].as_str() else {
                    return reads;
                };
                let Some(shape) = self.shape(upstream, table).await else {
                    return reads;
                };
                let index = request["IndexName"].as_str().map(str::to_owned);
                let key = if operation == "GetItem" {
                    request["Key"].get(&shape.pk).map(partition_value)
                } else {
                    let pk = match &index {
                        None => Some(shape.pk.clone()),
                        Some(name) => shape
                            .indexes
                            .iter()
                            .find(|i| &i.name == name)
                            .map(|i| i.pk.clone()),
                    };
                    pk.and_then(|pk| key_condition_value(request, &pk))
                };
                if let Some(key) = key {
                    reads.push(ReadItem {
                        partition: Partition {
                            table: table.to_owned(),
                            index,
                            key,
                        },
                        strongly_consistent: consistent(request),
                        transactional: false,
                        batch_key: None,
                    });
                }
            }
            "BatchGetItem" => {
                for (table, asked) in request["RequestItems"].as_object().into_iter().flatten() {
                    let Some(shape) = self.shape(upstream, table).await else {
                        continue;
                    };
                    for (place, key) in asked["Keys"].as_array().into_iter().flatten().enumerate() {
                        if let Some(value) = key.get(&shape.pk) {
                            reads.push(ReadItem {
                                partition: Partition {
                                    table: table.clone(),
                                    index: None,
                                    key: partition_value(value),
                                },
                                strongly_consistent: consistent(asked),
                                transactional: false,
                                batch_key: Some((table.clone(), place)),
                            });
                        }
                    }
                }
            }
            "TransactGetItems" => {
                for get in request["TransactItems"].as_array().into_iter().flatten() {
                    let get = &get["Get"];
                    let Some(table) = get["TableName"].as_str() else {
                        continue;
                    };
                    let Some(shape) = self.shape(upstream, table).await else {
                        continue;
                    };
                    if let Some(value) = get["Key"].get(&shape.pk) {
                        reads.push(ReadItem {
                            partition: Partition {
                                table: table.to_owned(),
                                index: None,
                                key: partition_value(value),
                            },
                            strongly_consistent: true,
                            transactional: true,
                            batch_key: None,
                        });
                    }
                }
            }
            _ => {}
        }
        reads
    }
}

/// The number of items of a transaction; `None` for any other request.
fn transaction_items(operation: &str, request: &Value) -> Option<usize> {
    match operation {
        "TransactWriteItems" | "TransactGetItems" => {
            request["TransactItems"].as_array().map(Vec::len)
        }
        _ => None,
    }
}

/// The items a write request changes, and whether it is a transaction.
/// The attributes an update's `UpdateExpression` mentions, top-level,
/// placeholders resolved (those it sets or removes, and those it reads:
/// more than it changes, never fewer); `None` without an expression.
fn updated_names(update: &Value) -> Option<Vec<String>> {
    let expression = update["UpdateExpression"].as_str()?;
    let placeholders = update["ExpressionAttributeNames"].as_object();
    let mut names = Vec::new();
    let separators = |c: char| c.is_whitespace() || ",=+-()".contains(c);
    for token in expression.split(separators).filter(|t| !t.is_empty()) {
        // A path's first element is the item's attribute.
        let first = token.split(['.', '[']).next().unwrap_or_default();
        let name = if first.starts_with('#') {
            placeholders
                .and_then(|p| p.get(first))
                .and_then(Value::as_str)
        } else if first.starts_with(':')
            || [
                "SET",
                "REMOVE",
                "ADD",
                "DELETE",
                "if_not_exists",
                "list_append",
            ]
            .iter()
            .any(|word| first.eq_ignore_ascii_case(word))
        {
            None
        } else {
            Some(first)
        };
        if let Some(name) = name.filter(|n| !names.iter().any(|known| known == n)) {
            names.push(name.to_owned());
        }
    }
    Some(names)
}

fn writes_of(operation: &str, request: &Value) -> (Vec<WriteItem>, bool) {
    let object = |v: &Value| v.as_object().cloned();
    let table = |v: &Value| v["TableName"].as_str().map(str::to_owned);
    let mut writes = Vec::new();
    match operation {
        "PutItem" => writes.extend(put(request, table(request), 0)),
        "UpdateItem" | "DeleteItem" => {
            if let (Some(table), Some(key)) = (table(request), object(&request["Key"])) {
                let after = if operation == "UpdateItem" {
                    After::Updated(updated_names(request))
                } else {
                    After::Gone
                };
                writes.push(WriteItem {
                    table,
                    key,
                    after,
                    index: 0,
                });
            }
        }
        "BatchWriteItem" => {
            for (table, requests) in request["RequestItems"].as_object().into_iter().flatten() {
                for (index, one) in requests.as_array().into_iter().flatten().enumerate() {
                    if let Some(key) = object(&one["DeleteRequest"]["Key"]) {
                        writes.push(WriteItem {
                            table: table.clone(),
                            key,
                            after: After::Gone,
                            index,
                        });
                    } else {
                        writes.extend(put(&one["PutRequest"], Some(table.clone()), index));
                    }
                }
            }
        }
        "TransactWriteItems" => {
            for (index, item) in request["TransactItems"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                for (kind, after) in [
                    ("Update", After::Updated(updated_names(&item["Update"]))),
                    ("Delete", After::Gone),
                    ("ConditionCheck", After::Checked),
                ] {
                    let part = &item[kind];
                    if let (Some(table), Some(key)) = (table(part), object(&part["Key"])) {
                        writes.push(WriteItem {
                            table,
                            key,
                            after,
                            index,
                        });
                    }
                }
                writes.extend(put(&item["Put"], table(&item["Put"]), index));
            }
            return (writes, true);
        }
        _ => {}
    }
    (writes, false)
}

/// A put of `request["Item"]` into `table`. Its key is taken from the item
/// once the table's shape is known: here the whole item stands in, and
/// [`key_text`] of the shape's key is what matches.
fn put(request: &Value, table: Option<String>, index: usize) -> Option<WriteItem> {
    let item = request["Item"].as_object()?.clone();
    Some(WriteItem {
        table: table?,
        key: item.clone(),
        after: After::Item(item),
        index,
    })
}

/// A key as text, for matching: its attributes in name order.
fn key_text(key: &Map<String, Value>) -> String {
    let mut names: Vec<&String> = key.keys().collect();
    names.sort();
    names
        .into_iter()
        .map(|name| format!("{name}={}", key[name]))
        .collect::<Vec<_>>()
        .join("&")
}

/// The value a Query's `KeyConditionExpression` gives the partition key
/// attribute `pk` (`PK = :pk`, or `#p = :v` with `#p` naming it).
fn key_condition_value(request: &Value, pk: &str) -> Option<String> {
    let expression = request["KeyConditionExpression"].as_str()?;
    let names = &request["ExpressionAttributeNames"];
    let values = &request["ExpressionAttributeValues"];
    expression
        .split(" AND ")
        .flat_map(|c| c.split(" and "))
        .find_map(|clause| {
            let clause = clause.trim().trim_start_matches('(').trim_end_matches(')');
            let (left, right) = clause.split_once('=')?;
            if left.ends_with(['<', '>', '!']) {
                return None;
            }
            let (left, right) = (left.trim(), right.trim());
            let name = if left.starts_with('#') {
                names[left].as_str()?
            } else {
                left
            };
            (name == pk).then(|| values.get(right).map(partition_value))?
        })
}

/// A BatchGetItem `request` without the keys `left` (each its table and its
/// place among the table's `Keys`), and those keys as DynamoDB answers
/// them unprocessed: each table's entry as asked, with only those keys.
fn split_batch_get(mut request: Value, left: &[(String, usize)]) -> (Value, Value) {
    let mut unprocessed = Map::new();
    if let Some(tables) = request["RequestItems"].as_object_mut() {
        for (table, asked) in tables.iter_mut() {
            let Some(keys) = asked["Keys"].as_array().cloned() else {
                continue;
            };
            let refused = |place: &usize| left.contains(&(table.clone(), *place));
            let (out, kept): (Vec<_>, Vec<_>) = keys
                .into_iter()
                .enumerate()
                .partition(|(place, _)| refused(place));
            if out.is_empty() {
                continue;
            }
            let mut entry = asked.clone();
            entry["Keys"] = Value::Array(out.into_iter().map(|(_, key)| key).collect());
            unprocessed.insert(table.clone(), entry);
            asked["Keys"] = Value::Array(kept.into_iter().map(|(_, key)| key).collect());
        }
        tables.retain(|_, asked| {
            asked["Keys"]
                .as_array()
                .is_some_and(|keys| !keys.is_empty())
        });
    }
    (request, Value::Object(unprocessed))
}

/// A BatchGetItem's `answer` with `unprocessed` added to its
/// `UnprocessedKeys` (`None`: not an answer this can read).
pub(crate) fn with_unprocessed(answer: &[u8], unprocessed: &Value) -> Option<Vec<u8>> {
    let mut answer: Value = serde_json::from_slice(answer).ok()?;
    let object = answer.as_object_mut()?;
    let keys = object
        .entry("UnprocessedKeys")
        .or_insert_with(|| Value::Object(Map::new()));
    let keys = keys.as_object_mut()?;
    for (table, entry) in unprocessed.as_object()? {
        match keys.get_mut(table) {
            Some(already) => {
                let more = entry["Keys"].as_array().cloned().unwrap_or_default();
                if let Some(listed) = already["Keys"].as_array_mut() {
                    listed.extend(more);
                }
            }
            None => {
                keys.insert(table.clone(), entry.clone());
            }
        }
    }
    serde_json::to_vec(&answer).ok()
}

/// The bytes each read of a request returned, in the order of its reads.
fn read_sizes(operation: &str, answer: &Value, reads: usize) -> Vec<usize> {
    let size = |item: &Value| item.as_object().map_or(0, item_size);
    match operation {
        "GetItem" => vec![size(&answer["Item"])],
        "Query" => vec![
            answer["Items"]
                .as_array()
                .map_or(0, |items| items.iter().map(size).sum()),
        ],
        "TransactGetItems" => answer["Responses"]
            .as_array()
            .map(|r| r.iter().map(|one| size(&one["Item"])).collect())
            .unwrap_or_default(),
        // Which key each item answers is not worth matching here: each read
        // is charged at least its unit when admitted, and the items found
        // are charged in turn, largest first.
        "BatchGetItem" => {
            let mut sizes: Vec<usize> = answer["Responses"]
                .as_object()
                .into_iter()
                .flat_map(|tables| tables.values())
                .flat_map(|items| items.as_array().into_iter().flatten())
                .map(size)
                .collect();
            sizes.sort_unstable_by(|a, b| b.cmp(a));
            sizes.resize(reads, 0);
            sizes
        }
        _ => vec![0; reads],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{key_condition_value, key_text, writes_of};

    #[test]
    fn an_updates_names_are_the_attributes_its_expression_mentions() {
        let count = json!({
            "UpdateExpression": "SET #counter = #counter + :one, version = version + :one",
            "ExpressionAttributeNames": { "#counter": "likeCount" },
        });
        assert_eq!(
            super::updated_names(&count),
            Some(vec!["likeCount".to_owned(), "version".to_owned()])
        );
        let nested = json!({
            "UpdateExpression": "SET #added.#s3 = :s3, likes = if_not_exists(likes, :zero) REMOVE #probe",
            "ExpressionAttributeNames": { "#added": "shardCounts", "#s3": "3", "#probe": "throttleProbe" },
        });
        assert_eq!(
            super::updated_names(&nested),
            Some(vec![
                "shardCounts".to_owned(),
                "likes".to_owned(),
                "throttleProbe".to_owned()
            ])
        );
        assert_eq!(
            super::updated_names(&json!({ "AttributeUpdates": {} })),
            None
        );
    }
    #[test]
    fn a_query_names_its_partition_in_its_key_condition() {
        let request = json!({
            "KeyConditionExpression": "#pk = :pk AND begins_with(SK, :prefix)",
            "ExpressionAttributeNames": {"#pk": "GSI1PK"},
            "ExpressionAttributeValues": {":pk": {"S": "USER#a"}, ":prefix": {"S": "POST#"}}
        });
        assert_eq!(
            key_condition_value(&request, "GSI1PK").as_deref(),
            Some("USER#a")
        );
        assert_eq!(key_condition_value(&request, "PK"), None);
        let plain = json!({
            "KeyConditionExpression": "PK = :p AND SK BETWEEN :a AND :b",
            "ExpressionAttributeValues": {":p": {"S": "POST#1"}}
        });
        assert_eq!(key_condition_value(&plain, "PK").as_deref(), Some("POST#1"));
        let range = json!({
            "KeyConditionExpression": "PK = :p AND SK >= :a",
            "ExpressionAttributeValues": {":p": {"S": "FEED"}, ":a": {"S": "x"}}
        });
        assert_eq!(key_condition_value(&range, "PK").as_deref(), Some("FEED"));
    }

    #[test]
    fn a_transaction_lists_every_item_it_writes_or_checks() {
        let request = json!({"TransactItems": [
            {"Put": {"TableName": "t", "Item": {"PK": {"S": "a"}, "SK": {"S": "1"}}}},
            {"Update": {"TableName": "t", "Key": {"PK": {"S": "b"}, "SK": {"S": "2"}}}},
            {"ConditionCheck": {"TableName": "t", "Key": {"PK": {"S": "c"}, "SK": {"S": "3"}}}},
            {"Delete": {"TableName": "t", "Key": {"PK": {"S": "d"}, "SK": {"S": "4"}}}}
        ]});
        let (writes, transactional) = writes_of("TransactWriteItems", &request);
        assert!(transactional);
        let listed: Vec<_> = writes.iter().map(|w| (w.index, key_text(&w.key))).collect();
        assert_eq!(
            listed,
            [
                (0, r#"PK={"S":"a"}&SK={"S":"1"}"#.to_owned()),
                (1, r#"PK={"S":"b"}&SK={"S":"2"}"#.to_owned()),
                (2, r#"PK={"S":"c"}&SK={"S":"3"}"#.to_owned()),
                (3, r#"PK={"S":"d"}&SK={"S":"4"}"#.to_owned()),
            ]
        );
        let (writes, transactional) = writes_of("GetItem", &request);
        assert!(writes.is_empty() && !transactional);
    }
}
