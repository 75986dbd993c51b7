//! The feed (Q6): one partition holding the short form of the newest posts.
//! The stream fan-out writes and trims it; requests only read it.

use aws_sdk_dynamodb::types::ReturnConsumedCapacity;

use super::{Store, StoreError, classify, from_items, s};
use crate::{
    keys::{FEED_PK, PK},
    model::PostSummary,
};

/// How many posts the feed partition keeps.
pub const FEED_CAPACITY: usize = 100;

impl Store {
    /// Q6: one Query of the feed partition, newest first.
    pub async fn feed(&self, limit: usize) -> Result<Vec<PostSummary>, StoreError> {
        let output = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("#pk = :feed")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":feed", s(FEED_PK))
            .scan_index_forward(false)
            .limit(i32::try_from(limit.min(FEED_CAPACITY)).unwrap_or(i32::MAX))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(classify)?;
        from_items(output.items.unwrap_or_default())
    }
}
