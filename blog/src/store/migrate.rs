//! `blog-admin migrate`: rewrites posts stored in the shape before the content
//! had an item of its own (content on the post item) into the current shape.
//!
//! Idempotent and resumable: it scans only for post items that still carry
//! `content`, and each move ([`Store::migrate_post`]) is one conditional
//! transaction, so a run stopped anywhere is finished by running it again,
//! and a post an edit moved meanwhile is left alone. Until a table is
//! migrated, every read and write serves both shapes.

use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use serde::Deserialize;

use super::{ItemType, Store, StoreError, classify, from_items};
use crate::ids::PostId;

/// What a migration run did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// Post items found in the old shape.
    pub found: usize,
    /// Moved by this run.
    pub moved: usize,
}

impl Store {
    /// Moves every post of the old shape into the new one.
    pub async fn migrate(&self) -> Result<Migrated, StoreError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Old {
            post_id: PostId,
        }
        let mut done = Migrated::default();
        let mut start = None;
        loop {
            let scan = self
                .client()
                .scan()
                .table_name(self.table())
                .filter_expression("#type = :post AND attribute_exists(content)")
                .projection_expression("postId")
                .expression_attribute_names("#type", "type")
                .expression_attribute_values(":post", ItemType::Post.attribute()?)
                .set_exclusive_start_key(start)
                .return_consumed_capacity(ReturnConsumedCapacity::Total);
            let page = self
                .backoff()
                .send("migration scan", || scan.clone().send())
                .await
                .map_err(classify)?;
            let old: Vec<Old> = from_items(page.items.unwrap_or_default())?;
            for post in old {
                done.found += 1;
                if self.migrate_post(&post.post_id).await? {
                    done.moved += 1;
                }
            }
            tracing::info!(found = done.found, moved = done.moved, "migration progress");
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(done);
            }
        }
    }
}
