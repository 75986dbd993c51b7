//! What DynamoDB bills for writes, computed from the items themselves, by the
//! published rules: a write costs 1 WCU per KB (rounded up) of the larger of
//! the item before and after, on the table, and again on each index whose
//! entry changes; a transactional write costs twice that on the table.
//!
//! DynamoDB Local does not report transactions the way DynamoDB bills them (a
//! like: Local says 13 write units, DynamoDB bills 9), so the tests and the
//! benchmark compare snapshots of the partitions a command can
//! touch, taken before and after it, instead of trusting its figures. Index
//! writes are counted at the standard rate: the index is updated after the
//! transaction, not inside it. What a snapshot cannot see: a write that left
//! an item exactly as it was (still billed), and a failed conditional write
//! (billed at least 1 WCU): count those from the calls.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::{Client, types::AttributeValue};
use blog::{
    keys::{GSI1PK, GSI1SK, PK, SK},
    store::{
        Item,
        size::{item_size, write_units},
        table::GSI1_PROJECTED,
    },
};

/// A table's key attributes and the indexes its items can have entries in.
#[derive(Clone, Debug)]
pub struct Shape {
    pub pk: &'static str,
    pub sk: Option<&'static str>,
    pub indexes: Vec<IndexShape>,
}

/// A global secondary index: its keys and what it projects.
#[derive(Clone, Debug)]
pub struct IndexShape {
    pub pk: &'static str,
    pub sk: &'static str,
    pub projection: Projection,
}

#[derive(Clone, Copy, Debug)]
pub enum Projection {
    All,
    /// The table's and the index's keys, and these attributes.
    Include(&'static [&'static str]),
}

impl Shape {
    /// This project's single table and its GSI1.
    pub fn single_table() -> Self {
        Self {
            pk: PK,
            sk: Some(SK),
            indexes: vec![IndexShape {
                pk: GSI1PK,
                sk: GSI1SK,
                projection: Projection::Include(&GSI1_PROJECTED),
            }],
        }
    }

    fn key(&self, item: &Item) -> (String, String) {
        let part = |name: Option<&str>| match name.and_then(|n| item.get(n)) {
            Some(AttributeValue::S(s)) => s.clone(),
            Some(other) => format!("{other:?}"),
            None => String::new(),
        };
        (part(Some(self.pk)), part(self.sk))
    }
}

impl IndexShape {
    /// The entry `item` has in this index, or `None` when the sparse index
    /// leaves it out (it lacks one of the index's keys).
    pub fn entry(&self, table: &Shape, item: &Item) -> Option<Item> {
        item.get(self.pk)?;
        item.get(self.sk)?;
        match self.projection {
            Projection::All => Some(item.clone()),
            Projection::Include(names) => {
                let keys = [Some(table.pk), table.sk, Some(self.pk), Some(self.sk)];
                let kept = |name: &str| keys.contains(&Some(name)) || names.contains(&name);
                Some(
                    item.iter()
                        .filter(|(name, _)| kept(name))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                )
            }
        }
    }
}

/// The items of some partitions of one table, by primary key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot(BTreeMap<(String, String), Item>);

impl Snapshot {
    pub fn new(shape: &Shape, items: impl IntoIterator<Item = Item>) -> Self {
        Self(
            items
                .into_iter()
                .map(|item| (shape.key(&item), item))
                .collect(),
        )
    }

    /// Every item of the partitions `pks` of `table`, read strongly
    /// consistent, page by page.
    pub async fn partitions(
        client: &Client,
        table: &str,
        shape: &Shape,
        pks: &[String],
    ) -> Result<Self, aws_sdk_dynamodb::Error> {
        let mut items = Vec::new();
        for pk in pks {
            let mut start = None;
            loop {
                let page = client
                    .query()
                    .table_name(table)
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", shape.pk)
                    .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
                    .consistent_read(true)
                    .set_exclusive_start_key(start)
                    .send()
                    .await?;
                items.extend(page.items.unwrap_or_default());
                start = page.last_evaluated_key;
                if start.is_none() {
                    break;
                }
            }
        }
        Ok(Self::new(shape, items))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The items whose primary key (partition, sort) `keep` accepts: a
    /// snapshot cut in parts billed at different rates.
    pub fn filter(&self, keep: impl Fn(&str, &str) -> bool) -> Self {
        Self(
            self.0
                .iter()
                .filter(|((pk, sk), _)| keep(pk, sk))
                .map(|(key, item)| (key.clone(), item.clone()))
                .collect(),
        )
    }

    /// The primary keys (partition, sort) of the items `pick` accepts.
    pub fn keys_where(&self, pick: impl Fn(&Item) -> bool) -> BTreeSet<(String, String)> {
        self.0
            .iter()
            .filter(|(_, item)| pick(item))
            .map(|(key, _)| key.clone())
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// How a command's writes are billed on the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// PutItem, UpdateItem, DeleteItem, BatchWriteItem.
    Standard,
    /// TransactWriteItems: twice the standard rate.
    Transactional,
}

/// Write units billed for going from `before` to `after`: every item that
/// appeared, changed or went, by the larger of its two versions, at `rate` on
/// the table and at the standard rate on each index whose entry changed.
pub fn billed_writes(shape: &Shape, before: &Snapshot, after: &Snapshot, rate: Rate) -> u64 {
    let factor = match rate {
        Rate::Standard => 1,
        Rate::Transactional => 2,
    };
    let larger = |old: Option<&Item>, new: Option<&Item>| {
        old.map_or(0, item_size).max(new.map_or(0, item_size))
    };
    let keys: BTreeSet<_> = before.0.keys().chain(after.0.keys()).collect();
    let mut units = 0;
    for key in keys {
        let (old, new) = (before.0.get(key), after.0.get(key));
        if old == new {
            continue;
        }
        units += factor * write_units(larger(old, new));
        for index in &shape.indexes {
            let entry = |item: Option<&Item>| item.and_then(|i| index.entry(shape, i));
            let (old_entry, new_entry) = (entry(old), entry(new));
            if old_entry != new_entry {
                units += write_units(larger(old_entry.as_ref(), new_entry.as_ref()));
            }
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, &str)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), AttributeValue::S((*v).to_owned())))
            .collect()
    }

    #[test]
    fn billing_rounds_up_per_kb_of_the_larger_item_at_the_rate() {
        let shape = Shape::single_table();
        let long = "a".repeat(1500);
        let before = Snapshot::new(&shape, [item(&[(PK, "POST#1"), (SK, "X"), ("t", &long)])]);
        let after = Snapshot::new(&shape, [item(&[(PK, "POST#1"), (SK, "X"), ("t", "a")])]);
        // 1.5 KB before, tiny after: 2 KB, twice in a transaction.
        assert_eq!(
            billed_writes(&shape, &before, &after, Rate::Transactional),
            4
        );
        assert_eq!(billed_writes(&shape, &before, &after, Rate::Standard), 2);
        assert_eq!(
            billed_writes(&shape, &after, &after, Rate::Transactional),
            0
        );
        // An item that goes costs what it was.
        let gone = Snapshot::default();
        assert_eq!(billed_writes(&shape, &before, &gone, Rate::Standard), 2);
    }

    #[test]
    fn an_index_entry_costs_only_when_what_it_projects_changes() {
        let shape = Shape::single_table();
        let keys = [
            (PK, "POST#1"),
            (SK, "POST"),
            (GSI1PK, "USER#u"),
            (GSI1SK, "POST#1"),
        ];
        let with = |extra: (&str, &str)| {
            let mut pairs = keys.to_vec();
            pairs.push(extra);
            Snapshot::new(&shape, [item(&pairs)])
        };
        // `title` is projected: table and index.
        assert_eq!(
            billed_writes(
                &shape,
                &with(("title", "a")),
                &with(("title", "b")),
                Rate::Standard
            ),
            2
        );
        // `content` is not: the table only.
        assert_eq!(
            billed_writes(
                &shape,
                &with(("content", "a")),
                &with(("content", "b")),
                Rate::Standard
            ),
            1
        );
        // An item without index keys has no entry: the table only.
        let bare =
            |v: &str| Snapshot::new(&shape, [item(&[(PK, "FEED"), (SK, "POST#1"), ("t", v)])]);
        assert_eq!(
            billed_writes(&shape, &bare("a"), &bare("b"), Rate::Standard),
            1
        );
        // With everything projected, the whole item is the entry.
        let all = Shape {
            pk: "id",
            sk: None,
            indexes: vec![IndexShape {
                pk: "author",
                sk: "id",
                projection: Projection::All,
            }],
        };
        let row =
            |v: &str| Snapshot::new(&all, [item(&[("id", "1"), ("author", "u"), ("body", v)])]);
        let long = "b".repeat(2000);
        assert_eq!(
            billed_writes(&all, &row("a"), &row(&long), Rate::Transactional),
            4 + 2
        );
    }
}
