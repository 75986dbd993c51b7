//! Comments (C3) and a post's list of comments (Q4), in the post's partition.

use aws_sdk_dynamodb::types::{Delete, ReturnConsumedCapacity};
use serde::{Deserialize, Serialize};

use super::{
    Cancelled, ItemType, Store, StoreError, from_item, key, posts::PostItem, s, users::UserItem,
};
use crate::{
    ids::{CommentId, PostId, UserId},
    keys::{self, COMMENT_PREFIX, PK, SK},
    model::{Comment, Page},
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

impl CommentItem {
    /// `author`'s comment on `post`, made when `comment_id` was.
    pub fn new(post: PostId, comment_id: CommentId, author: &UserItem, content: &str) -> Self {
        Self {
            pk: keys::post_pk(&post),
            sk: keys::comment_sk(&comment_id),
            gsi1pk: keys::user_items_pk(&author.user_id),
            gsi1sk: keys::user_comment_sk(&comment_id),
            kind: ItemType::Comment,
            comment_id,
            post_id: post,
            user_id: author.user_id.clone(),
            username: author.username.clone(),
            user_version: author.version,
            content: content.to_owned(),
            created_at: comment_id.created_at(),
        }
    }
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
    /// C3 taken back: removes `comment` from `post` and one from the post's
    /// `commentCount`, in one transaction. Its author may, and so may the
    /// post's author (a strongly consistent read of each, the post's only
    /// when the caller is not the comment's author).
    pub async fn delete_comment(
        &self,
        post: &PostId,
        comment: &CommentId,
        caller: &UserId,
    ) -> Result<(), StoreError> {
        let comment_key = key(keys::post_pk(post), keys::comment_sk(comment));
        let item = self
            .get(comment_key.clone(), true)
            .await?
            .ok_or(StoreError::CommentNotFound)?;
        let found: CommentItem = from_item(item)?;
        if &found.user_id != caller {
            let post_item = self
                .get(PostItem::key(post), true)
                .await?
                .ok_or(StoreError::CommentNotFound)?;
            let post_item: PostItem = from_item(post_item)?;
            if &post_item.user_id != caller {
                return Err(StoreError::NotCommentAuthor);
            }
        }
        let remove = Delete::builder()
            .table_name(self.table())
            .set_key(Some(comment_key))
            .condition_expression("attribute_exists(PK)")
            .build()?;
        let mut tx = self.transaction("delete comment");
        let removed = tx.delete("comment", remove);
        let counted = self.count_on_post(&mut tx, post, "commentCount", false)?;
        match tx.commit().await {
            Ok(()) => Ok(()),
            // Deleted meanwhile (by its other permitted deleter, or the post's
            // deletion): there is no such comment now.
            Err(Cancelled::Conditions(failed)) if failed.failed(removed) => {
                Err(StoreError::CommentNotFound)
            }
            Err(Cancelled::Conditions(failed)) if failed.failed(counted) => {
                Err(StoreError::CommentNotFound)
            }
            Err(Cancelled::Conditions(failed)) => Err(failed.unexpected("delete comment")),
            Err(Cancelled::Store(err)) => Err(err),
        }
    }

    /// C3: the comment and the post's `commentCount` change commit together, so
    /// the count is exact however many comment at once (the seeds' stored
    /// procedure, as one single-partition transaction).
    pub async fn create_comment(
        &self,
        post: &PostId,
        author: &UserId,
        content: &str,
    ) -> Result<Comment, StoreError> {
        let profile = self.author(author).await?;
        let item = CommentItem::new(*post, CommentId::generate(), &profile, content);
        let mut tx = self.transaction("comment");
        tx.put_new("comment", &item)?;
        let counted = self.count_on_post(&mut tx, post, "commentCount", true)?;
        match tx.commit().await {
            Ok(()) => Ok(item.into()),
            Err(Cancelled::Conditions(failed)) if failed.failed(counted) => {
                Err(StoreError::PostNotFound)
            }
            Err(Cancelled::Conditions(failed)) => Err(failed.unexpected("comment")),
            Err(Cancelled::Store(err)) => Err(err),
        }
    }

    /// Q4: one Query in the post's partition, oldest first.
    pub async fn list_comments(
        &self,
        post: &PostId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Comment>, StoreError> {
        let list = format!("comments:{post}");
        let after = super::pages::resume_after(&list, cursor, CommentId::parse)?;
        let start =
            after.map(|comment| super::key(keys::post_pk(post), keys::comment_sk(&comment)));
        let query = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(keys::post_pk(post)))
            .expression_attribute_values(":prefix", s(COMMENT_PREFIX))
            .scan_index_forward(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let page = self
            .list_page(&list, query, start, limit, |c: &CommentItem| {
                c.comment_id.to_string()
            })
            .await?;
        Ok(Page {
            items: page.items.into_iter().map(Comment::from).collect(),
            next_cursor: page.next_cursor,
        })
    }
}
