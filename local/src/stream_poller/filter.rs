//! Lambda's event filtering, as an event source mapping's `FilterCriteria`
//! applies it to a DynamoDB stream record before the function sees it.
//!
//! A record passes when any of the filters matches it (they are ORed); a
//! record that matches none is dropped: not delivered, not a failure, and the
//! mapping's position moves past it. A filter is a JSON pattern matched
//! against the record as the function's event carries it (`eventName`,
//! `dynamodb.NewImage.type.S`, …), with the rules AWS documents for Lambda's
//! filters (the EventBridge pattern syntax):
//!
//! - an object matches when every one of its fields matches; a field whose
//!   pattern is an object descends into the record's field (an array there
//!   matches when any of its elements does);
//! - an array lists what a leaf may be, any one of them: a literal (string,
//!   number, `true`/`false`, `null`; `""` for the empty string), or one of the
//!   operators `{"prefix": s}`, `{"suffix": s}`, `{"equals-ignore-case": s}`,
//!   `{"anything-but": literal or [literals]}`, `{"numeric": [op, n, …]}`
//!   (`=`, `<`, `<=`, `>`, `>=`; one or two comparisons) and
//!   `{"exists": bool}`; a leaf that is an array in the record matches when
//!   any element does; `exists` matches leaves only;
//! - `"$or": [pattern, …]` at any level matches when any of its patterns does.
//!
//! Anything else (another operator, a nested `anything-but`, a pattern that
//! is not an object) is refused when the filter is read, so that the local
//! stack never silently lets through what AWS would drop, or the reverse.

use serde_json::{Map, Value};

/// A mapping's filters: a record passes when any matches. No filters (no
/// `FilterCriteria`): every record passes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filters {
    patterns: Vec<Pattern>,
}

impl Filters {
    /// The `Pattern` strings of a `FilterCriteria`, each read and checked.
    pub fn parse<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let patterns = patterns
            .into_iter()
            .map(|text| {
                let json: Value = serde_json::from_str(text)
                    .map_err(|e| format!("filter pattern {text:?} is not JSON: {e}"))?;
                Pattern::parse(&json).map_err(|e| format!("filter pattern {text}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { patterns })
    }

    /// Whether Lambda would hand `record` (as the event carries it) to the
    /// function.
    pub fn admits(&self, record: &Value) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| p.matches(Some(record)))
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

/// An object pattern: every field must match, and any of each `$or`.
#[derive(Debug, Clone, PartialEq)]
struct Pattern {
    fields: Vec<(String, Node)>,
    any_of: Vec<Vec<Pattern>>,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Object(Pattern),
    Leaf(Vec<Matcher>),
}

#[derive(Debug, Clone, PartialEq)]
enum Matcher {
    Literal(Value),
    Prefix(String),
    Suffix(String),
    EqualsIgnoreCase(String),
    AnythingBut(Vec<Value>),
    Numeric(Vec<(Comparison, f64)>),
    Exists(bool),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Comparison {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Pattern {
    fn parse(json: &Value) -> Result<Self, String> {
        let Value::Object(fields) = json else {
            return Err(format!("a pattern must be an object, not {json}"));
        };
        if fields.is_empty() {
            return Err("an empty pattern".into());
        }
        let mut pattern = Pattern {
            fields: Vec::new(),
            any_of: Vec::new(),
        };
        for (name, value) in fields {
            if name == "$or" {
                let alternatives = value
                    .as_array()
                    .filter(|a| a.len() >= 2)
                    .ok_or("\"$or\" takes an array of at least two patterns")?;
                pattern.any_of.push(
                    alternatives
                        .iter()
                        .map(Pattern::parse)
                        .collect::<Result<_, _>>()?,
                );
                continue;
            }
            let node = match value {
                Value::Object(_) => Node::Object(Pattern::parse(value)?),
                Value::Array(leaves) if !leaves.is_empty() => Node::Leaf(
                    leaves
                        .iter()
                        .map(Matcher::parse)
                        .collect::<Result<_, _>>()
                        .map_err(|e| format!("{name}: {e}"))?,
                ),
                _ => {
                    return Err(format!(
                        "{name}: a field's pattern is an object or a non-empty array, not {value}"
                    ));
                }
            };
            pattern.fields.push((name.clone(), node));
        }
        Ok(pattern)
    }

    /// `value` is the record's field at this level (`None`: absent).
    fn matches(&self, value: Option<&Value>) -> bool {
        match value {
            // A pattern against an array: any element.
            Some(Value::Array(items)) if !items.is_empty() => {
                items.iter().any(|item| self.matches(Some(item)))
            }
            Some(Value::Object(object)) => self.matches_object(object),
            // Absent, empty or a leaf: no field below it exists.
            _ => self.matches_object(&Map::new()),
        }
    }

    fn matches_object(&self, object: &Map<String, Value>) -> bool {
        self.fields.iter().all(|(name, node)| {
            let value = object.get(name);
            match node {
                Node::Object(pattern) => pattern.matches(value),
                Node::Leaf(matchers) => leaf_matches(matchers, value),
            }
        }) && self
            .any_of
            .iter()
            .all(|alternatives| alternatives.iter().any(|p| p.matches_object(object)))
    }
}

fn leaf_matches(matchers: &[Matcher], value: Option<&Value>) -> bool {
    match value {
        None => matchers.contains(&Matcher::Exists(false)),
        Some(Value::Object(_)) => false,
        Some(Value::Array(items)) => items
            .iter()
            .any(|item| matchers.iter().any(|m| m.matches(item))),
        Some(scalar) => matchers.iter().any(|m| m.matches(scalar)),
    }
}

impl Matcher {
    fn parse(json: &Value) -> Result<Self, String> {
        let Value::Object(operator) = json else {
            return match json {
                Value::Array(_) => Err(format!("a nested array {json} is not a value")),
                literal => Ok(Matcher::Literal(literal.clone())),
            };
        };
        let mut entries = operator.iter();
        let (Some((name, operand)), None) = (entries.next(), entries.next()) else {
            return Err(format!("an operator is an object of one field: {json}"));
        };
        let text = || {
            operand
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("\"{name}\" takes a string, not {operand}"))
        };
        Ok(match name.as_str() {
            "prefix" => Matcher::Prefix(text()?),
            "suffix" => Matcher::Suffix(text()?),
            "equals-ignore-case" => Matcher::EqualsIgnoreCase(text()?),
            "exists" => Matcher::Exists(
                operand
                    .as_bool()
                    .ok_or_else(|| format!("\"exists\" takes true or false, not {operand}"))?,
            ),
            "anything-but" => {
                let values = match operand {
                    Value::Array(values) if !values.is_empty() => values.clone(),
                    Value::Array(_) => return Err("\"anything-but\" of nothing".into()),
                    Value::Object(_) => {
                        return Err(format!(
                            "\"anything-but\" with an operator ({operand}) is not implemented by the local poller"
                        ));
                    }
                    literal => vec![literal.clone()],
                };
                if values.iter().any(|v| v.is_object() || v.is_array()) {
                    return Err(format!("\"anything-but\" takes literals, not {operand}"));
                }
                Matcher::AnythingBut(values)
            }
            "numeric" => Matcher::Numeric(comparisons(operand)?),
            other => {
                return Err(format!(
                    "the operator \"{other}\" is not implemented by the local poller"
                ));
            }
        })
    }

    fn matches(&self, value: &Value) -> bool {
        match self {
            Matcher::Literal(literal) => same(literal, value),
            Matcher::Prefix(prefix) => value.as_str().is_some_and(|s| s.starts_with(prefix)),
            Matcher::Suffix(suffix) => value.as_str().is_some_and(|s| s.ends_with(suffix)),
            Matcher::EqualsIgnoreCase(text) => value
                .as_str()
                .is_some_and(|s| s.to_lowercase() == text.to_lowercase()),
            Matcher::AnythingBut(values) => !values.iter().any(|v| same(v, value)),
            Matcher::Numeric(comparisons) => value.as_f64().is_some_and(|n| {
                value.is_number()
                    && comparisons.iter().all(|(op, bound)| match op {
                        Comparison::Eq => n == *bound,
                        Comparison::Lt => n < *bound,
                        Comparison::Le => n <= *bound,
                        Comparison::Gt => n > *bound,
                        Comparison::Ge => n >= *bound,
                    })
            }),
            // A present leaf: `exists: true` matches, `exists: false` not.
            Matcher::Exists(exists) => *exists,
        }
    }
}

/// Literals are equal as JSON values, numbers by value (`5` is `5.0`).
fn same(literal: &Value, value: &Value) -> bool {
    match (literal.as_f64(), value.as_f64()) {
        (Some(a), Some(b)) if literal.is_number() && value.is_number() => a == b,
        _ => literal == value,
    }
}

fn comparisons(operand: &Value) -> Result<Vec<(Comparison, f64)>, String> {
    let terms = operand
        .as_array()
        .filter(|t| t.len() == 2 || t.len() == 4)
        .ok_or_else(|| format!("\"numeric\" takes [op, n] or [op, n, op, n], not {operand}"))?;
    terms
        .chunks(2)
        .map(|pair| {
            let op = match pair[0].as_str() {
                Some("=") => Comparison::Eq,
                Some("<") => Comparison::Lt,
                Some("<=") => Comparison::Le,
                Some(">") => Comparison::Gt,
                Some(">=") => Comparison::Ge,
                _ => return Err(format!("\"numeric\": {} is not a comparison", pair[0])),
            };
            let bound = pair[1]
                .as_f64()
                .filter(|_| pair[1].is_number())
                .ok_or_else(|| format!("\"numeric\": {} is not a number", pair[1]))?;
            Ok((op, bound))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Filters;

    fn filters(patterns: &[&str]) -> Filters {
        Filters::parse(patterns.iter().copied()).expect("a valid filter")
    }

    fn insert_of(kind: &str) -> serde_json::Value {
        json!({
            "eventName": "INSERT",
            "dynamodb": {"NewImage": {"type": {"S": kind}, "likeCount": {"N": "3"}}, "SizeBytes": 120}
        })
    }

    #[test]
    fn fields_are_anded_values_ored_filters_ored() {
        let f = filters(&[
            r#"{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"type": {"S": ["post", "like"]}}}}"#,
            r#"{"eventName": ["REMOVE"]}"#,
        ]);
        assert!(f.admits(&insert_of("post")));
        assert!(f.admits(&insert_of("like")));
        assert!(!f.admits(&insert_of("comment")));
        assert!(f.admits(&json!({"eventName": "REMOVE", "dynamodb": {}})));
        let mut modify = insert_of("post");
        modify["eventName"] = json!("MODIFY");
        assert!(!f.admits(&modify), "one field of the first filter fails");
        assert!(
            !f.admits(&json!({"eventName": "INSERT"})),
            "a field the pattern names but the record lacks"
        );
    }

    #[test]
    fn no_filters_admit_everything() {
        let f = Filters::default();
        assert!(f.is_empty());
        assert!(f.admits(&json!({"anything": 1})));
    }

    #[test]
    fn the_documented_operators() {
        let record = json!({
            "name": "Alice", "city": "Seattle", "n": 15, "tags": ["a", "b"], "nothing": null, "empty": ""
        });
        let cases = [
            (r#"{"name": [{"prefix": "Al"}]}"#, true),
            (r#"{"name": [{"prefix": "al"}]}"#, false),
            (r#"{"name": [{"suffix": "ice"}]}"#, true),
            (r#"{"name": [{"equals-ignore-case": "ALICE"}]}"#, true),
            (r#"{"name": [{"anything-but": ["Bob", "Carol"]}]}"#, true),
            (r#"{"name": [{"anything-but": "Alice"}]}"#, false),
            (r#"{"n": [{"numeric": [">", 10, "<=", 15]}]}"#, true),
            (r#"{"n": [{"numeric": ["=", 15.0]}]}"#, true),
            (r#"{"n": [{"numeric": ["<", 15]}]}"#, false),
            (r#"{"name": [{"numeric": [">", 0]}]}"#, false),
            (r#"{"n": [15]}"#, true),
            (r#"{"n": ["15"]}"#, false),
            (r#"{"tags": ["b"]}"#, true),
            (r#"{"tags": ["c"]}"#, false),
            (r#"{"nothing": [null]}"#, true),
            (r#"{"empty": [""]}"#, true),
            (r#"{"name": [{"exists": true}]}"#, true),
            (r#"{"missing": [{"exists": true}]}"#, false),
            (r#"{"missing": [{"exists": false}]}"#, true),
            (r#"{"name": [{"exists": false}]}"#, false),
            (
                r#"{"city": ["Seattle"], "$or": [{"n": [1]}, {"name": ["Alice"]}]}"#,
                true,
            ),
            (r#"{"$or": [{"n": [1]}, {"name": ["Bob"]}]}"#, false),
        ];
        for (pattern, expected) in cases {
            assert_eq!(filters(&[pattern]).admits(&record), expected, "{pattern}");
        }
    }

    #[test]
    fn exists_matches_leaves_only_and_nested_absence() {
        let record = json!({"dynamodb": {"NewImage": {"type": {"S": "post"}}}});
        assert!(!filters(&[r#"{"dynamodb": [{"exists": true}]}"#]).admits(&record));
        assert!(
            filters(&[r#"{"dynamodb": {"OldImage": {"type": [{"exists": false}]}}}"#])
                .admits(&record)
        );
        assert!(
            !filters(&[r#"{"dynamodb": {"OldImage": {"type": {"S": ["post"]}}}}"#]).admits(&record)
        );
    }

    #[test]
    fn what_the_poller_does_not_implement_is_refused() {
        for pattern in [
            r#"{"name": [{"wildcard": "A*"}]}"#,
            r#"{"ip": [{"cidr": "10.0.0.0/24"}]}"#,
            r#"{"name": [{"anything-but": {"prefix": "A"}}]}"#,
            r#"{"name": [{"prefix": "A", "suffix": "e"}]}"#,
            r#"{"name": []}"#,
            r#"{"name": "Alice"}"#,
            r#"{"n": [{"numeric": ["~", 1]}]}"#,
            r#"{"$or": [{"n": [1]}]}"#,
            r#"["INSERT"]"#,
            "not json",
        ] {
            let refused = Filters::parse([pattern]);
            assert!(refused.is_err(), "{pattern} was accepted");
        }
        let message = Filters::parse([r#"{"name": [{"wildcard": "A*"}]}"#]).expect_err("refused");
        assert!(
            message.contains("\"wildcard\" is not implemented"),
            "{message}"
        );
    }
}
