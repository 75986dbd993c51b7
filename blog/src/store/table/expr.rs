//! Expressions: the conditions, update expressions, key conditions, filters
//! and projections that callers write as text, with their `#name` and
//! `:value` placeholders, and the attribute values they bind.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::keys::{Counter, PK};
use crate::store::error::Limit;

/// The longest expression DynamoDB takes (each of a call's: its update,
/// its condition, its key condition, its filter), in bytes.
pub const MAX_EXPRESSION_BYTES: usize = Limit::ExpressionBytes.max();

/// An expression (condition, update or key condition) with its `#name` and
/// `:value` placeholders.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expr {
    pub(super) text: String,
    pub(super) names: HashMap<String, String>,
    pub(super) values: HashMap<String, AttributeValue>,
}

impl Expr {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// The condition that the item is there: every item has its partition
    /// key.
    pub fn item_exists() -> Self {
        Self::new(format!("attribute_exists({PK})"))
    }

    /// The condition that no item has the key.
    pub fn item_absent() -> Self {
        Self::new(format!("attribute_not_exists({PK})"))
    }

    /// `#comments` and `#likes` stand for a post's counters' attributes
    /// (for an expression that names both: DynamoDB refuses a placeholder
    /// the expression does not use).
    pub fn with_counters(self) -> Self {
        self.name("#comments", Counter::Comments.attribute())
            .name("#likes", Counter::Likes.attribute())
    }

    /// This condition, and `more` (whose placeholders the caller adds).
    /// Each side is put in parentheses, so that the result reads as written
    /// whatever either side holds.
    pub fn and(self, more: &str) -> Self {
        let text = format!("({}) AND ({more})", self.text);
        Self { text, ..self }
    }

    /// This condition, or `other` (whose placeholders the caller adds), each
    /// side in parentheses.
    pub fn or(self, other: &str) -> Self {
        let text = format!("({}) OR ({other})", self.text);
        Self { text, ..self }
    }

    /// `#placeholder` stands for the attribute `attribute`.
    /// The same names and values under another expression's text: for an
    /// update whose clauses are put together after its values.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    pub fn name(mut self, placeholder: &str, attribute: &str) -> Self {
        self.names
            .insert(placeholder.to_owned(), attribute.to_owned());
        self
    }

    /// This condition, and the condition `other` with its placeholders, each
    /// in parentheses.
    pub fn and_expr(mut self, other: Expr) -> Self {
        self.text = format!("({}) AND ({})", self.text, other.text);
        self.names.extend(other.names);
        self.values.extend(other.values);
        self
    }

    /// `:placeholder` stands for `value`.
    pub fn value(mut self, placeholder: &str, value: AttributeValue) -> Self {
        self.values.insert(placeholder.to_owned(), value);
        self
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
pub(super) type Names = Option<HashMap<String, String>>;
/// `:value` placeholders, `None` when there are none.
pub(super) type Values = Option<HashMap<String, AttributeValue>>;

/// The placeholders of the expressions of one call, as the SDK takes them:
/// never an empty map, which DynamoDB refuses.
pub(super) fn merged(parts: [Option<&Expr>; 2]) -> (Names, Values) {
    let mut names = HashMap::new();
    let mut values = HashMap::new();
    for part in parts.into_iter().flatten() {
        names.extend(part.names.clone());
        values.extend(part.values.clone());
    }
    (
        (!names.is_empty()).then_some(names),
        (!values.is_empty()).then_some(values),
    )
}
