//! Comments (C3) and a post's list of comments (Q4), in the post's partition.

use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use serde::{Deserialize, Serialize};

use super::{Cancelled, ItemType, Store, StoreError, classify, condition_failed, from_items, s};
use crate::{
    ids::{CommentId, PostId, UserId},
    keys::{self, COMMENT_PREFIX, PK, SK},
    model::{Comment, Page},
    timestamp,
};

/// A comment, stored beside its post and listed in its author's GSI1 partition
/// (what a rename fans out to).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "GSI1PK")]
    pub gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    pub gsi1sk: String,
    #[serde(rename = "type")]
    pub kind: ItemType,
    pub comment_id: CommentId,
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: String,
    pub user_version: u64,
    pub content: String,
    pub created_at: String,
}

impl From<CommentItem> for Comment {
    fn from(item: CommentItem) -> Self {
        Comment {
            comment_id: item.comment_id,
            post_id: item.post_id,
            user_id: item.user_id,
            username: item.username,
            content: item.content,
            created_at: item.created_at,
        }
    }
}

impl Store {
    /// C3: the comment and the post's `commentCount` change commit together, so
    /// the count is exact however many comment at once (the seeds' stored
    /// procedure, as one single-partition transaction).
    pub async fn create_comment(
        &self,
        post: &PostId,
        author: &UserId,
        content: &str,
    ) -> Result<Comment, StoreError> {
        for _ in 0..super::users::OPTIMISTIC_ATTEMPTS {
            let profile = self.author(author).await?;
            let comment_id = CommentId::generate();
            let item = CommentItem {
                pk: keys::post_pk(post),
                sk: keys::comment_sk(&comment_id),
                gsi1pk: keys::user_items_pk(author),
                gsi1sk: keys::user_comment_sk(&comment_id),
                kind: ItemType::Comment,
                comment_id,
                post_id: *post,
                user_id: author.clone(),
                username: profile.username.clone(),
                user_version: profile.version,
                content: content.to_owned(),
                created_at: timestamp::now(),
            };
            let writes = vec![
                self.put_new(&item)?,
                self.count_on_post(post, "commentCount")?,
                self.author_unchanged(&profile)?,
            ];
            match self.transact(writes).await {
                Ok(()) => return Ok(item.into()),
                Err(Cancelled::Conditions(reasons)) if condition_failed(&reasons, 1) => {
                    return Err(StoreError::PostNotFound);
                }
                Err(Cancelled::Conditions(reasons)) if condition_failed(&reasons, 2) => continue,
                Err(Cancelled::Conditions(reasons)) => {
                    return Err(StoreError::Internal(format!(
                        "comment cancelled: {reasons:?}"
                    )));
                }
                Err(Cancelled::Store(err)) => return Err(err),
            }
        }
        Err(StoreError::Contention)
    }

    /// Q4: one Query in the post's partition, oldest first.
    pub async fn list_comments(
        &self,
        post: &PostId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Comment>, StoreError> {
        let list = format!("comments:{post}");
        let after = super::resume_after(&list, cursor, CommentId::parse)?;
        let start =
            after.map(|comment| super::key(keys::post_pk(post), keys::comment_sk(&comment)));
        let output = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(keys::post_pk(post)))
            .expression_attribute_values(":prefix", s(COMMENT_PREFIX))
            .scan_index_forward(true)
            .limit(super::fetch_for_page(limit))
            .set_exclusive_start_key(start)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(classify)?;
        let items: Vec<CommentItem> = from_items(output.items.unwrap_or_default())?;
        let page = super::finish_page(&list, items, limit, |c| c.comment_id.to_string());
        Ok(Page {
            items: page.items.into_iter().map(Comment::from).collect(),
            next_cursor: page.next_cursor,
        })
    }
}
