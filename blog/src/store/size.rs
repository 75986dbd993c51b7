//! The size of an item as DynamoDB counts it, and the capacity units that size
//! costs. DynamoDB refuses items over 400 KB, stops a Query page at 1 MB and
//! bills by these sizes, so bounds on stored text are checked against this,
//! not against JSON lengths.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// DynamoDB's largest item, in bytes (400 KB).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// The size of `item` by the rules of the Amazon DynamoDB Developer Guide's
/// "DynamoDB item sizes and formats"
/// (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>):
/// each attribute costs its name's UTF-8 length plus its value's size (see
/// [`value_size`]). The guide calls the size of numbers approximate, so this
/// is too, by a byte or so per number.
pub fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum()
}

/// The size of one value, without its attribute name: S its UTF-8 bytes, N
/// [`number_size`], B its raw bytes (not the base64 on the wire), BOOL and
/// NULL 1 byte, L and M 3 bytes plus each element's size plus 1 byte per
/// element (a map element's size includes its name's), and a set the sum of
/// its members' sizes.
pub fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(list) => 3 + list.iter().map(|v| value_size(v) + 1).sum::<usize>(),
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(name, v)| name.len() + value_size(v) + 1)
                .sum::<usize>()
        }
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Ns(set) => set.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(set) => set.iter().map(|b| b.as_ref().len()).sum(),
        // A type this SDK does not know: nothing to count it by.
        _ => 0,
    }
}

/// A number's size: 1 byte per two significant digits (leading and trailing
/// zeroes do not count, nor do the sign, the point or an exponent), plus 1.
/// Zero counts as one digit.
pub fn number_size(number: &str) -> usize {
    let mantissa = number.split(['e', 'E']).next().unwrap_or_default();
    let digits: Vec<u8> = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|&d| d == b'0')
        .collect();
    let trailing_zeroes = digits.iter().rev().take_while(|&&d| d == b'0').count();
    let significant = (digits.len() - trailing_zeroes).max(1);
    significant.div_ceil(2) + 1
}

/// Write capacity units for writing an item of `bytes`: one per KB, rounded
/// up, and at least one (a transactional write costs twice this).
pub fn write_units(bytes: usize) -> u64 {
    units(bytes, 1024)
}

/// Read capacity units for reading `bytes`: one per 4 KB, rounded up and at
/// least one, for a strongly consistent read; half that for an eventually
/// consistent one. For a Query, `bytes` is the sum of the items read.
pub fn read_units(bytes: usize, strongly_consistent: bool) -> f64 {
    let strong = units(bytes, 4 * 1024) as f64;
    if strongly_consistent {
        strong
    } else {
        strong / 2.0
    }
}

fn units(bytes: usize, unit: usize) -> u64 {
    u64::try_from(bytes.div_ceil(unit).max(1)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::primitives::Blob;

    use super::*;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_owned())
    }

    fn n(v: &str) -> AttributeValue {
        AttributeValue::N(v.to_owned())
    }

    #[test]
    fn strings_count_utf8_bytes_of_name_and_value() {
        // "PK" 2 + "POST#1" 6; "title" 5 + "日本" 6; "emoji" 5 + "😀" 4.
        let item = HashMap::from([
            ("PK".to_owned(), s("POST#1")),
            ("title".to_owned(), s("日本")),
            ("emoji".to_owned(), s("😀")),
        ]);
        assert_eq!(item_size(&item), 8 + 11 + 9);
        assert_eq!(item_size(&HashMap::new()), 0);
    }

    #[test]
    fn numbers_count_significant_digits() {
        assert_eq!(number_size("0"), 2);
        assert_eq!(number_size("7"), 2); // 1 digit: 1 + 1
        assert_eq!(number_size("12"), 2); // 2 digits: 1 + 1
        assert_eq!(number_size("123"), 3); // 3 digits: 2 + 1
        assert_eq!(number_size("1000000"), 2); // trailing zeroes trimmed
        assert_eq!(number_size("000123"), 3); // leading zeroes trimmed
        assert_eq!(number_size("-12.345"), 4); // 5 digits: 3 + 1
        assert_eq!(number_size("0.0012"), 2);
        assert_eq!(number_size("1.5E+10"), 2);
        assert_eq!(number_size(&"9".repeat(38)), 20);
        // likeCount: a 9-byte name, and 12345: 3 + 1 bytes.
        let item = HashMap::from([(
            crate::keys::Counter::Likes.attribute().to_owned(),
            n("12345"),
        )]);
        assert_eq!(item_size(&item), 13);
    }

    #[test]
    fn binary_booleans_and_nulls() {
        let item = HashMap::from([
            ("b".to_owned(), AttributeValue::B(Blob::new(vec![0u8; 10]))),
            ("ok".to_owned(), AttributeValue::Bool(true)),
            ("none".to_owned(), AttributeValue::Null(true)),
        ]);
        // 1 + 10, 2 + 1, 4 + 1.
        assert_eq!(item_size(&item), 11 + 3 + 5);
    }

    #[test]
    fn lists_and_maps_have_overhead_per_container_and_element() {
        let empty = HashMap::from([("l".to_owned(), AttributeValue::L(vec![]))]);
        assert_eq!(item_size(&empty), 1 + 3);
        // "tags" 4 + 3 + ("ab" 2 + 1) + ("c" 1 + 1).
        let list = HashMap::from([("tags".to_owned(), AttributeValue::L(vec![s("ab"), s("c")]))]);
        assert_eq!(item_size(&list), 4 + 3 + 3 + 2);
        // "m" 1 + 3 + ("k" 1 + "v" 1 + 1) + ("n" 1 + "42" 2 + 1)
        //   + ("in" 2 + (3 + (true 1 + 1)) + 1).
        let map = HashMap::from([(
            "m".to_owned(),
            AttributeValue::M(HashMap::from([
                ("k".to_owned(), s("v")),
                ("n".to_owned(), n("42")),
                (
                    "in".to_owned(),
                    AttributeValue::L(vec![AttributeValue::Bool(true)]),
                ),
            ])),
        )]);
        assert_eq!(item_size(&map), 1 + 3 + 3 + 4 + (2 + (3 + 1 + 1) + 1));
    }

    #[test]
    fn sets_sum_their_members() {
        let item = HashMap::from([
            (
                "ss".to_owned(),
                AttributeValue::Ss(vec!["a".into(), "日".into()]),
            ),
            (
                "ns".to_owned(),
                AttributeValue::Ns(vec!["1".into(), "123".into()]),
            ),
            (
                "bs".to_owned(),
                AttributeValue::Bs(vec![Blob::new(vec![1, 2]), Blob::new(vec![3])]),
            ),
        ]);
        // 2 + (1 + 3), 2 + (2 + 3), 2 + (2 + 1).
        assert_eq!(item_size(&item), 6 + 7 + 5);
    }

    #[test]
    fn write_units_are_per_kilobyte_rounded_up() {
        assert_eq!(write_units(0), 1);
        assert_eq!(write_units(1), 1);
        assert_eq!(write_units(1024), 1);
        assert_eq!(write_units(1025), 2);
        assert_eq!(write_units(MAX_ITEM_BYTES), 400);
    }

    #[test]
    fn read_units_are_per_four_kilobytes_halved_when_eventual() {
        assert_eq!(read_units(0, true), 1.0);
        assert_eq!(read_units(0, false), 0.5);
        assert_eq!(read_units(4096, true), 1.0);
        assert_eq!(read_units(4097, true), 2.0);
        assert_eq!(read_units(4097, false), 1.0);
        assert_eq!(read_units(10 * 1024, false), 1.5);
        assert_eq!(read_units(MAX_ITEM_BYTES, true), 100.0);
    }
}
