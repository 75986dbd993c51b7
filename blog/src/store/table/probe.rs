//! Which partition is at its limit: a write that can never take effect,
//! sent once, whose refusal says why.
//!
//! A transaction cancelled with `ThrottlingError` on an item does not say
//! what throttled it: the item's own partition (its key range), an index
//! partition its write also touches, or the table's on-demand maximum
//! (`MaxWriteRequestUnits`), or a burst that has passed. A single call's
//! refusal does: DynamoDB checks a write's throughput before its condition,
//! and names the limit in `ThrottlingReasons` (`TableWriteKeyRangeThroughputExceeded`,
//! `IndexWriteKeyRangeThroughputExceeded`, `TableWriteMaxOnDemandThroughputExceeded`,
//! …). So [`Table::probe_write`] sends one UpdateItem at the item's key whose
//! condition cannot hold: it changes nothing (no stream record), costs 1 WCU
//! on the item's own partition and touches no index, and either fails its
//! condition (the partition has room now) or is refused with the reason.

use aws_sdk_dynamodb::{error::SdkError, operation::update_item::UpdateItemError};

use super::{Table, errors::classify};
use crate::{
    keys::{Item, PK},
    store::error::StoreError,
};

/// What a partition said to a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// It took the write (and refused its condition): it has room now.
    Now,
    /// It refused the write for capacity, for this reason.
    Refused(Throttle),
}

/// Why DynamoDB refused a write for capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttle {
    /// The item's own partition is at its limit (`Table…KeyRange…`).
    KeyRange,
    /// One of the table's index partitions is (its key range).
    Index,
    /// The table or an index as a whole: an on-demand maximum, a
    /// provisioned rate or the account's limit.
    Table,
    /// The refusal gave no reason.
    Unstated,
}

impl Throttle {
    /// The cause of a refusal with `reasons` (DynamoDB's `ThrottlingReason`
    /// names: resource type, operation, limit). The item's own key range
    /// wins over anything else named with it.
    pub fn of<'a>(reasons: impl IntoIterator<Item = &'a str>) -> Self {
        let mut cause = Throttle::Unstated;
        for reason in reasons {
            let key_range = reason.ends_with("KeyRangeThroughputExceeded");
            let this = match (reason.starts_with("Index"), key_range) {
                (false, true) => return Throttle::KeyRange,
                (true, true) => Throttle::Index,
                // A maximum, a provisioned rate or an account limit: the
                // table's (or an index's) as a whole.
                _ => Throttle::Table,
            };
            if cause == Throttle::Unstated || this == Throttle::Table {
                cause = this;
            }
        }
        cause
    }
}

impl Table {
    /// Sends, once and without a retry, an UpdateItem at `key` whose
    /// condition can never hold, and answers what the partition said.
    pub async fn probe_write(&self, key: Item) -> Result<Room, StoreError> {
        let sent = self
            .client
            .update_item()
            .table_name(&self.name)
            .set_key(Some(key))
            .update_expression("REMOVE #probe")
            .condition_expression("attribute_exists(#pk) AND attribute_not_exists(#pk)")
            .expression_attribute_names("#probe", "throttleProbe")
            .expression_attribute_names("#pk", PK)
            .send()
            .await;
        let err = match sent {
            // Cannot happen: the condition cannot hold.
            Ok(_) => return Ok(Room::Now),
            Err(err) => err,
        };
        if let SdkError::ServiceError(service) = &err {
            let reasons = match service.err() {
                UpdateItemError::ConditionalCheckFailedException(_) => return Ok(Room::Now),
                UpdateItemError::ProvisionedThroughputExceededException(e) => {
                    e.throttling_reasons()
                }
                UpdateItemError::ThrottlingException(e) => e.throttling_reasons(),
                UpdateItemError::RequestLimitExceeded(e) => e.throttling_reasons(),
                _ => return Err(classify(err)),
            };
            let names = reasons.iter().filter_map(|r| r.reason());
            return Ok(Room::Refused(Throttle::of(names)));
        }
        Err(classify(err))
    }
}

#[cfg(test)]
mod tests {
    use super::Throttle;

    #[test]
    fn the_items_own_key_range_is_told_from_an_index_and_the_table() {
        let of = |reasons: &[&str]| Throttle::of(reasons.iter().copied());
        assert_eq!(
            of(&["TableWriteKeyRangeThroughputExceeded"]),
            Throttle::KeyRange
        );
        assert_eq!(
            of(&["IndexWriteKeyRangeThroughputExceeded"]),
            Throttle::Index
        );
        assert_eq!(
            of(&["TableWriteMaxOnDemandThroughputExceeded"]),
            Throttle::Table
        );
        assert_eq!(of(&["TableWriteAccountLimitExceeded"]), Throttle::Table);
        assert_eq!(
            of(&["TableWriteProvisionedThroughputExceeded"]),
            Throttle::Table
        );
        assert_eq!(
            of(&["IndexWriteMaxOnDemandThroughputExceeded"]),
            Throttle::Table
        );
        assert_eq!(
            of(&[
                "IndexWriteKeyRangeThroughputExceeded",
                "TableWriteKeyRangeThroughputExceeded"
            ]),
            Throttle::KeyRange
        );
        assert_eq!(
            of(&[
                "IndexWriteKeyRangeThroughputExceeded",
                "TableWriteMaxOnDemandThroughputExceeded"
            ]),
            Throttle::Table
        );
        assert_eq!(of(&[]), Throttle::Unstated);
    }
}
