//! How long a walk may go on in this invocation: Lambda's deadline and the
//! margin kept before it ([`Deadline`]). Every walk that pauses and goes on
//! when its record comes again (a rename's, a deletion's, an erasure's, a
//! delivery's, the scheduler's) asks it once a page.

use std::time::{Duration, Instant};

/// The walk starts no page later than this before the deadline (or a third
/// of the invocation's time, when that is shorter: `cargo lambda watch` gives
/// a few seconds): one page's writes, each retried for at most the backoff's
/// 5 s budget, and the saving of its place fit in it. The first page of an
/// invocation is always walked, so that every invocation goes further.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(10);

/// When the invocation must have answered (Lambda's deadline), if ever, and
/// how long before it the walk stops.
#[derive(Debug, Clone, Default)]
pub struct Deadline(Limit);

#[derive(Debug, Clone, Default)]
enum Limit {
    #[default]
    Never,
    /// Lambda's deadline, and the margin kept before it.
    At(Instant, Duration),
    /// Near once it has been asked this many more times: tests stop a walk
    /// after a chosen number of pages, not after a time a loaded machine may
    /// stretch.
    #[cfg(feature = "admin")]
    AfterChecks(std::sync::Arc<std::sync::atomic::AtomicU32>),
}

/// 2001-09-09 in milliseconds since the epoch: no invocation's deadline
/// is before it ([`Deadline::from_epoch_ms`]).
pub const EPOCH_MS_FLOOR: u64 = 1_000_000_000_000;

impl Deadline {
    /// No deadline: work until done (the local poller, tools).
    pub const NONE: Self = Self(Limit::Never);

    pub fn at(instant: Instant) -> Self {
        let left = instant.saturating_duration_since(Instant::now());
        Self(Limit::At(instant, DEADLINE_MARGIN.min(left / 3)))
    }

    /// Lambda's deadline, in milliseconds since the Unix epoch. A value
    /// below [`EPOCH_MS_FLOOR`] is no such time: `cargo lambda watch` (the
    /// local stack's runtime, 1.9.1) sends the function's timeout there (600
    /// s), which is read as that long from now, as Lambda's deadline is.
    pub fn from_epoch_ms(deadline_ms: u64) -> Self {
        if deadline_ms < EPOCH_MS_FLOOR {
            return Self::at(Instant::now() + Duration::from_millis(deadline_ms));
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or_default();
        Self::at(Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms)))
    }

    /// A deadline that is near from the `checks + 1`th time it is asked on
    /// (a walk asks once a page, after its first): tests and tools.
    #[cfg(feature = "admin")]
    pub fn after_checks(checks: u32) -> Self {
        Self(Limit::AfterChecks(std::sync::Arc::new(checks.into())))
    }

    /// Whether there is no longer time for a page.
    pub fn near(&self) -> bool {
        match &self.0 {
            Limit::Never => false,
            Limit::At(at, margin) => Instant::now() + *margin >= *at,
            #[cfg(feature = "admin")]
            Limit::AfterChecks(left) => {
                use std::sync::atomic::Ordering;
                let spent =
                    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
                spent.is_err()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_is_an_epoch_time_or_watchs_timeout() {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        assert!(!Deadline::from_epoch_ms(now_ms + 60_000).near());
        assert!(Deadline::from_epoch_ms(now_ms - 1_000).near());
        // `cargo lambda watch` sends its 600 s timeout as the deadline.
        assert!(!Deadline::from_epoch_ms(600_000).near());
        assert!(Deadline::from_epoch_ms(0).near());
    }

    #[test]
    fn the_margin_is_ten_seconds_or_a_third_of_a_short_invocation() {
        assert!(!Deadline::NONE.near());
        // 60 s (the template's timeout): stops 10 s before.
        let lambda = Deadline::at(Instant::now() + Duration::from_secs(60));
        assert!(matches!(lambda.0, Limit::At(_, m) if m == DEADLINE_MARGIN));
        assert!(!lambda.near());
        // 3 s (a local runtime's): stops 1 s before, not at once.
        let short = Deadline::at(Instant::now() + Duration::from_secs(3));
        assert!(matches!(short.0, Limit::At(_, m) if m <= Duration::from_secs(1)));
        assert!(!short.near());
        let brief = Deadline::at(Instant::now() + Duration::from_millis(300));
        std::thread::sleep(Duration::from_millis(250));
        assert!(brief.near());
        // Past already.
        assert!(Deadline::at(Instant::now()).near());
    }
}
