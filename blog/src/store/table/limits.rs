//! DynamoDB's own limits on a request's size ([`Limit`]), held to before
//! each request is sent, and what this table's requests came to against
//! them ([`Sizes`]: for tests and benchmarks, to show how close the widest
//! case comes).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::store::error::{Limit, StoreError};

/// The largest request of each kind this table sent or refused, and how many
/// it refused; shared by the table's clones.
#[derive(Debug, Default)]
pub struct Sizes {
    peaks: [AtomicUsize; Limit::ALL.len()],
    refused: AtomicUsize,
}

impl Sizes {
    /// `Ok` when `size` is within `limit` (noted as the peak if it is the
    /// largest yet); [`StoreError::OverLimit`] otherwise, and counted.
    pub(super) fn hold(&self, what: &str, limit: Limit, size: usize) -> Result<(), StoreError> {
        self.peaks[limit as usize].fetch_max(size, Ordering::Relaxed);
        StoreError::within(what, limit, size).inspect_err(|_| {
            self.refused.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// The largest size of `limit`'s kind a request had (its expression's
    /// bytes, its transaction's items, its batch's writes or keys).
    pub fn peak(&self, limit: Limit) -> usize {
        self.peaks[limit as usize].load(Ordering::Relaxed)
    }

    /// How many requests were refused for passing a limit (each a bug).
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::Relaxed)
    }
}
