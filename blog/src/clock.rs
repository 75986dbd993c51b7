//! What an instance's caches (the feed's, the pulled authors' lists of the
//! home) measure their time to live by.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Instant,
};

/// The system's monotonic clock, or one a test moves by hand.
#[derive(Debug, Clone, Default)]
pub struct Clock(Option<Arc<Mutex<Instant>>>);

impl Clock {
    pub(crate) fn now(&self) -> Instant {
        match &self.0 {
            None => Instant::now(),
            Some(set) => *set.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// A clock that stands still until [`Clock::advance`] moves it: tests.
    #[cfg(feature = "admin")]
    pub fn manual() -> Self {
        Self(Some(Arc::new(Mutex::new(Instant::now()))))
    }

    #[cfg(feature = "admin")]
    pub fn advance(&self, by: std::time::Duration) {
        if let Some(set) = &self.0 {
            *set.lock().unwrap_or_else(PoisonError::into_inner) += by;
        }
    }
}
