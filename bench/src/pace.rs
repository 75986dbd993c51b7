//! An open load's pace: requests sent on ticks, whatever the answers'
//! latency, at a rate that rises from quiet to its full rate over a ramp,
//! linearly, then holds.

use std::time::{Duration, Instant};

/// A tick later than this shifts the ticks after it (as tokio's
/// `MissedTickBehavior::Delay` does past the same 5 ms): a sender that
/// cannot keep up sends less, rather than in bursts.
pub const MISSED: Duration = Duration::from_millis(5);

/// Ticks at a rate that rises from 0 to `per_second` over `ramp` seconds,
/// linearly, then holds; a tick later than [`MISSED`] shifts those after.
#[derive(Debug)]
pub struct Ticker {
    start: Instant,
    per_second: f64,
    ramp: f64,
    next: u64,
    lag: Duration,
}

impl Ticker {
    /// Its first tick is due at once.
    pub fn new(per_second: f64, ramp: f64) -> Self {
        Ticker {
            start: Instant::now(),
            per_second,
            ramp,
            next: 0,
            lag: Duration::ZERO,
        }
    }

    /// Waits until the next tick is due.
    pub async fn tick(&mut self) {
        let due = self.start
            + self.lag
            + Duration::from_secs_f64(offset(self.next as f64, self.per_second, self.ramp));
        tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
        let late = Instant::now().saturating_duration_since(due);
        if late > MISSED {
            self.lag += late;
        }
        self.next += 1;
    }

    /// How far the ticks have fallen behind their schedule in all.
    pub fn lag(&self) -> Duration {
        self.lag
    }
}

/// The seconds from the start at which the `k`th tick (from 0) falls.
pub fn offset(k: f64, per_second: f64, ramp: f64) -> f64 {
    let ramped = per_second * ramp / 2.0;
    if ramp <= 0.0 {
        k / per_second
    } else if k <= ramped {
        // k = per_second × t² / (2 × ramp)
        (2.0 * k * ramp / per_second).sqrt()
    } else {
        ramp + (k - ramped) / per_second
    }
}

/// The ticks due in the first `seconds` (the integral of the rate).
pub fn offered_in(seconds: f64, per_second: f64, ramp: f64) -> f64 {
    if ramp <= 0.0 {
        per_second * seconds
    } else if seconds <= ramp {
        per_second * seconds * seconds / (2.0 * ramp)
    } else {
        per_second * ramp / 2.0 + per_second * (seconds - ramp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_rises_over_the_ramp_then_holds() {
        // 100 a second after a 1 s ramp: 50 ticks in the ramp, then 100 a
        // second.
        assert_eq!(offset(0.0, 100.0, 1.0), 0.0);
        assert!((offset(50.0, 100.0, 1.0) - 1.0).abs() < 1e-12);
        assert!((offset(150.0, 100.0, 1.0) - 2.0).abs() < 1e-12);
        // A quarter of the ramp's ticks by half of it.
        assert!((offset(12.5, 100.0, 1.0) - 0.5).abs() < 1e-12);
        // Gaps shrink over the ramp and are 10 ms after it.
        let gap = |k: f64| offset(k + 1.0, 100.0, 1.0) - offset(k, 100.0, 1.0);
        assert!(gap(1.0) > gap(10.0) && gap(10.0) > gap(40.0));
        assert!((gap(60.0) - 0.01).abs() < 1e-12);
    }

    #[test]
    fn without_a_ramp_ticks_are_even() {
        assert!((offset(10.0, 20.0, 0.0) - 0.5).abs() < 1e-12);
        assert!((offered_in(3.0, 20.0, 0.0) - 60.0).abs() < 1e-12);
    }

    #[test]
    fn the_ticks_due_by_a_time_are_the_inverse_of_the_offsets() {
        for (per_second, ramp) in [(10.0, 1.0), (400.0, 1.0), (7.0, 2.5), (50.0, 0.0)] {
            for k in [0.0, 1.0, 3.0, 17.0, 250.0, 1_000.0] {
                let at = offset(k, per_second, ramp);
                assert!(
                    (offered_in(at, per_second, ramp) - k).abs() < 1e-6,
                    "{per_second}/s, ramp {ramp}, tick {k}"
                );
            }
        }
        // A 5 s row at 10 a second after a 1 s ramp: 45 ticks.
        assert!((offered_in(5.0, 10.0, 1.0) - 45.0).abs() < 1e-12);
    }
}
