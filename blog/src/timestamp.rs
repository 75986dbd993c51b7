//! Timestamps are RFC 3339 UTC strings with millisecond precision, stored and
//! returned as they are.

use time::{OffsetDateTime, format_description::FormatItem, macros::format_description};

const RFC3339_MILLIS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

pub fn now() -> String {
    format(OffsetDateTime::now_utc())
}

/// Now, or a millisecond after `previous` if now is not later: the
/// `updatedAt` of an edit of something last edited at `previous`, so that
/// each edit has a time of its own ([`crate::revision`]).
pub fn after(previous: &str) -> String {
    let now = now();
    if now.as_str() > previous {
        return now;
    }
    match parse(previous) {
        Some(at) => format(at + time::Duration::milliseconds(1)),
        None => now,
    }
}

pub fn format(at: OffsetDateTime) -> String {
    // Formatting a UTC date with a fixed description only fails for years
    // outside 0..=9999, which a clock does not produce.
    at.format(RFC3339_MILLIS)
        .unwrap_or_else(|_| String::from("1970-01-01T00:00:00.000Z"))
}

/// A timestamp as [`format()`] writes it (any RFC 3339 is accepted).
pub fn parse(raw: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::after;
    use time::macros::datetime;

    #[test]
    fn formats_utc_with_millis() {
        assert_eq!(
            super::format(datetime!(2024-02-29 13:04:05.678 UTC)),
            "2024-02-29T13:04:05.678Z"
        );
    }

    #[test]
    fn after_is_later_than_what_it_follows() {
        let future = "2999-01-01T00:00:00.999Z";
        assert_eq!(after(future), "2999-01-01T00:00:01.000Z");
        assert!(after("2000-01-01T00:00:00.000Z").as_str() > "2000-01-01T00:00:00.000Z");
    }

    #[test]
    fn now_parses_as_rfc3339() {
        let now = super::now();
        assert!(
            time::OffsetDateTime::parse(&now, &time::format_description::well_known::Rfc3339)
                .is_ok()
        );
    }
}
