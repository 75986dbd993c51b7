//! Posts (C2, Q2) and a user's list of posts (Q3, through GSI1).

use aws_sdk_dynamodb::{
    operation::update_item::UpdateItemError,
    types::{ReturnConsumedCapacity, ReturnValue, ReturnValuesOnConditionCheckFailure},
};
use serde::{Deserialize, Serialize};

use super::{
    Cancelled, ItemType, Store, StoreError, classify, from_item, key, n, s, users::Attempt,
};
use crate::{
    ids::{PostId, UserId},
    keys::{self, GSI1, GSI1PK, GSI1SK, PK, POST_SK, SK},
    model::{Page, Post, PostSummary},
    text, timestamp,
};

/// The post item. It carries its short form's `summary` so that GSI1 can
/// project the short form without the content, its counts (changed in the same
/// transaction as each comment and like), the author's username copied at
/// `userVersion`, and its own `version`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostItem {
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
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: String,
    pub user_version: u64,
    pub title: String,
    pub content: String,
    pub summary: String,
    pub comment_count: u64,
    pub like_count: u64,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
}

impl From<PostItem> for Post {
    fn from(item: PostItem) -> Self {
        Post {
            post_id: item.post_id,
            user_id: item.user_id,
            username: item.username,
            title: item.title,
            content: item.content,
            comment_count: item.comment_count,
            like_count: item.like_count,
            created_at: item.created_at,
            updated_at: item.updated_at,
        }
    }
}

/// What a post edit changes; `None` keeps the current value.
#[derive(Debug, Default)]
pub struct PostEdit<'a> {
    pub title: Option<&'a str>,
    pub content: Option<&'a str>,
}

impl Store {
    /// C2: writes a post under the caller's current username.
    pub async fn create_post(
        &self,
        author: &UserId,
        title: &str,
        content: &str,
    ) -> Result<Post, StoreError> {
        self.as_author(author, move |profile| async move {
            let post_id = PostId::generate();
            let now = post_id.created_at();
            let item = PostItem {
                pk: keys::post_pk(&post_id),
                sk: POST_SK.to_owned(),
                gsi1pk: keys::user_items_pk(author),
                gsi1sk: keys::user_post_sk(&post_id),
                kind: ItemType::Post,
                post_id,
                user_id: author.clone(),
                username: profile.username.clone(),
                user_version: profile.version,
                title: title.to_owned(),
                content: content.to_owned(),
                summary: text::summary(content),
                comment_count: 0,
                like_count: 0,
                created_at: now.clone(),
                updated_at: now,
                version: 1,
            };
            let mut tx = self.transaction("create post");
            tx.put_new("post", &item)?;
            let author = self.author_unchanged(&mut tx, &profile)?;
            match tx.commit().await {
                Ok(()) => Ok(Attempt::Done(item.into())),
                Err(Cancelled::Conditions(failed)) if failed.failed(author) => {
                    Ok(Attempt::ProfileMoved)
                }
                Err(Cancelled::Conditions(failed)) => Err(failed.unexpected("create post")),
                Err(Cancelled::Store(err)) => Err(err),
            }
        })
        .await
    }

    /// Q2: one GetItem; the post item already holds the author's username and
    /// both counts.
    pub async fn get_post(&self, post: &PostId) -> Result<Option<Post>, StoreError> {
        let get = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key(keys::post_pk(post), POST_SK)))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let output = self
            .backoff()
            .send("get post", || get.clone().send())
            .await
            .map_err(classify)?;
        output
            .item
            .map(from_item::<PostItem>)
            .transpose()
            .map(|p| p.map(Post::from))
    }

    /// C2 (edit): one conditional UpdateItem. When the condition fails, the old
    /// item (if any) tells "not yours" (403) from "no such post" (404).
    pub async fn edit_post(
        &self,
        post: &PostId,
        editor: &UserId,
        edit: PostEdit<'_>,
    ) -> Result<Post, StoreError> {
        let mut sets = vec!["updatedAt = :now", "version = version + :one"];
        let mut update = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(keys::post_pk(post), POST_SK)))
            .condition_expression("attribute_exists(PK) AND userId = :editor")
            .expression_attribute_values(":editor", s(editor.as_str()))
            .expression_attribute_values(":now", s(timestamp::now()))
            .expression_attribute_values(":one", n(1))
            .return_values(ReturnValue::AllNew)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        if let Some(title) = edit.title {
            sets.push("title = :title");
            update = update.expression_attribute_values(":title", s(title));
        }
        if let Some(content) = edit.content {
            sets.push("content = :content");
            sets.push("summary = :summary");
            update = update
                .expression_attribute_values(":content", s(content))
                .expression_attribute_values(":summary", s(text::summary(content)));
        }
        let update = update.update_expression(format!("SET {}", sets.join(", ")));
        match self
            .backoff()
            .send("edit post", || update.clone().send())
            .await
        {
            Ok(output) => {
                let item = output
                    .attributes
                    .ok_or_else(|| StoreError::Internal("update returned no item".into()))?;
                Ok(from_item::<PostItem>(item)?.into())
            }
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed))
                    if failed.item().is_some() =>
                {
                    Err(StoreError::NotAuthor)
                }
                Some(UpdateItemError::ConditionalCheckFailedException(_)) => {
                    Err(StoreError::PostNotFound)
                }
                _ => Err(classify(err)),
            },
        }
    }

    /// Q3: one Query of GSI1 in the author's partition, newest first. Reads one
    /// item more than the page so that the last page has no cursor.
    pub async fn list_user_posts(
        &self,
        author: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostSummary>, StoreError> {
        let list = format!("user-posts:{author}");
        let after = super::pages::resume_after(&list, cursor, PostId::parse)?;
        let start = after.map(|post| {
            super::Item::from([
                (GSI1PK.to_owned(), s(keys::user_items_pk(author))),
                (GSI1SK.to_owned(), s(keys::user_post_sk(&post))),
                (PK.to_owned(), s(keys::post_pk(&post))),
                (SK.to_owned(), s(POST_SK)),
            ])
        });
        let query = self
            .client()
            .query()
            .table_name(self.table())
            .index_name(GSI1)
            .key_condition_expression("GSI1PK = :pk AND begins_with(GSI1SK, :prefix)")
            .expression_attribute_values(":pk", s(keys::user_items_pk(author)))
            .expression_attribute_values(":prefix", s(keys::POST_PREFIX))
            .scan_index_forward(false)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        self.list_page(&list, query, start, limit, |p: &PostSummary| {
            p.post_id.to_string()
        })
        .await
    }
}
