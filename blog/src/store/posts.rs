//! Posts (C2, Q2) and a user's list of posts (Q3, through GSI1).

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnConsumedCapacity, Update,
};
use serde::{Deserialize, Serialize};

use super::{
    Busy, Cancelled, ItemType, Store, StoreError, condition_held, from_item, key, n, s, to_item,
    users::UserItem,
};
use crate::{
    ids::{PostId, UserId},
    keys::{self, GSI1, GSI1PK, GSI1SK, PK, POST_CONTENT_SK, POST_SK, SK},
    model::{Page, Post, PostSummary},
    text, timestamp,
};

/// How often an edit reads the post again when another edit got in first.
const EDIT_ATTEMPTS: usize = 5;

/// An edit's condition on the post item: it exists, it is the editor's, and
/// what lists show is still what the edit read (`:editor`, `:title`,
/// `:summary`; see [`as_read`]).
const AS_READ: &str =
    "attribute_exists(PK) AND userId = :editor AND title = :title AND summary = :summary";

/// The values [`AS_READ`] names, for the post item as the edit read it.
fn as_read(item: &PostItem, editor: &UserId) -> [(&'static str, AttributeValue); 3] {
    [
        (":editor", s(editor.as_str())),
        (":title", s(&item.title)),
        (":summary", s(&item.summary)),
    ]
}

/// The post item: what lists show (the short form, copied by GSI1 for Q3 and
/// by the fan-out into the feed), the counts (changed in the same transaction
/// as each comment and like), the author's username copied at `userVersion`,
/// and its own `version`. It stays a few hundred bytes whatever the post's
/// length, so a like or a comment rewrites only that (DynamoDB bills a write
/// by the larger of the old and new item, on the table and on GSI1).
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
    pub summary: String,
    pub comment_count: u64,
    pub like_count: u64,
    pub created_at: String,
    pub updated_at: String,
    pub version: u64,
    /// Only on posts written before the content had an item of its own, until
    /// `blog-admin migrate` moves it there ([`Store::migrate_post`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

impl PostItem {
    /// A new post by `author` (as of the profile's version), made at `at`.
    pub fn new(post_id: PostId, author: &UserItem, title: &str, content: &str, at: &str) -> Self {
        Self {
            pk: keys::post_pk(&post_id),
            sk: POST_SK.to_owned(),
            gsi1pk: keys::user_items_pk(&author.user_id),
            gsi1sk: keys::user_post_sk(&post_id),
            kind: ItemType::Post,
            post_id,
            user_id: author.user_id.clone(),
            username: author.username.clone(),
            user_version: author.version,
            title: title.to_owned(),
            summary: text::summary(content),
            comment_count: 0,
            like_count: 0,
            created_at: at.to_owned(),
            updated_at: at.to_owned(),
            version: 1,
            content: None,
        }
    }

    pub fn key(post: &PostId) -> super::Item {
        key(keys::post_pk(post), POST_SK)
    }
}

/// A post's full text, beside the post item in its partition. Nothing copies
/// it and nothing but Q2 and edits reads or writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostContentItem {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "type")]
    pub kind: ItemType,
    pub post_id: PostId,
    pub content: String,
    /// When the content last changed: an edit of the content alone leaves
    /// the post item as it is.
    pub updated_at: String,
}

impl PostContentItem {
    pub fn new(post: PostId, content: &str, at: &str) -> Self {
        Self {
            pk: keys::post_pk(&post),
            sk: POST_CONTENT_SK.to_owned(),
            kind: ItemType::PostContent,
            post_id: post,
            content: content.to_owned(),
            updated_at: at.to_owned(),
        }
    }
}

/// A post as stored: its item and its content, in either shape.
#[derive(Debug, Clone)]
pub struct StoredPost {
    pub item: PostItem,
    pub content: Option<PostContentItem>,
}

impl StoredPost {
    /// The text: the content item's, or the post item's in the old shape.
    pub fn text(&self) -> &str {
        match (&self.content, &self.item.content) {
            (Some(content), _) => &content.content,
            (None, Some(legacy)) => legacy,
            (None, None) => "",
        }
    }
}

impl From<StoredPost> for Post {
    fn from(stored: StoredPost) -> Self {
        let content = stored.text().to_owned();
        let item = stored.item;
        let updated_at = match stored.content {
            Some(c) if c.updated_at > item.updated_at => c.updated_at,
            _ => item.updated_at,
        };
        Post {
            post_id: item.post_id,
            user_id: item.user_id,
            username: item.username,
            title: item.title,
            content,
            comment_count: item.comment_count,
            like_count: item.like_count,
            created_at: item.created_at,
            updated_at,
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
    /// C2: the post item and its content, in one transaction, under the
    /// caller's current username (a rename racing with it is caught up by the
    /// fan-out's INSERT rule).
    pub async fn create_post(
        &self,
        author: &UserId,
        title: &str,
        content: &str,
    ) -> Result<Post, StoreError> {
        let profile = self.author(author).await?;
        let post_id = PostId::generate();
        let now = post_id.created_at();
        let item = PostItem::new(post_id, &profile, title, content, &now);
        let text = PostContentItem::new(post_id, content, &now);
        let mut tx = self.transaction("create post");
        tx.put_new("post", &item)?;
        tx.put_new("post content", &text)?;
        match tx.commit().await {
            Ok(()) => Ok(StoredPost {
                item,
                content: Some(text),
            }
            .into()),
            Err(Cancelled::Conditions(failed)) => Err(failed.unexpected("create post")),
            Err(Cancelled::Store(err)) => Err(err),
        }
    }

    /// Q2: one Query of the post's partition for `begins_with(SK, POST)`: the
    /// post item and its content. One call, and one read charge for both
    /// (DynamoDB rounds a Query's total size up to 4 KB, where two GetItems,
    /// or a BatchGetItem, would round each item up on its own).
    pub async fn get_post(&self, post: &PostId) -> Result<Option<Post>, StoreError> {
        Ok(self.read_post(post, false).await?.map(Post::from))
    }

    /// The post item and its content, strongly consistent when a write
    /// depends on them.
    pub async fn read_post(
        &self,
        post: &PostId,
        consistent: bool,
    ) -> Result<Option<StoredPost>, StoreError> {
        let query = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :post)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(keys::post_pk(post)))
            .expression_attribute_values(":post", s(keys::POST_ITEMS_PREFIX))
            .consistent_read(consistent)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let mut item = None;
        let mut content = None;
        for found in self.query_up_to(query, None, 2).await? {
            let sk = found.get(SK).and_then(|v| v.as_s().ok()).cloned();
            match sk.as_deref() {
                Some(POST_SK) => item = Some(from_item::<PostItem>(found)?),
                Some(POST_CONTENT_SK) => content = Some(from_item::<PostContentItem>(found)?),
                _ => {}
            }
        }
        Ok(item.map(|item| StoredPost { item, content }))
    }

    /// C2 (edit): the content item, when the content changes, and the post
    /// item, when what lists show (the title or the summary) changes; one
    /// transaction either way. The post item's condition (the author, and
    /// the title and summary as read) makes concurrent edits take turns, so
    /// the summary is always the content's; likes and comments meanwhile do
    /// not disturb it.
    pub async fn edit_post(
        &self,
        post: &PostId,
        editor: &UserId,
        edit: PostEdit<'_>,
    ) -> Result<Post, StoreError> {
        for _ in 0..EDIT_ATTEMPTS {
            let current = self
                .read_post(post, true)
                .await?
                .ok_or(StoreError::PostNotFound)?;
            if current.item.user_id != *editor {
                return Err(StoreError::NotAuthor);
            }
            let now = timestamp::now();
            let legacy = current.item.content.is_some();
            let text = edit.content.unwrap_or(current.text()).to_owned();
            let title = edit.title.unwrap_or(&current.item.title).to_owned();
            let summary = text::summary(&text);
            let shown_changes = title != current.item.title || summary != current.item.summary;

            let mut tx = self.transaction("edit post");
            let new_content = (edit.content.is_some() || legacy)
                .then(|| PostContentItem::new(*post, &text, &now));
            if let Some(content) = &new_content {
                let put = Put::builder()
                    .table_name(self.table())
                    .set_item(Some(to_item(content)?))
                    .build()?;
                tx.put("post content", put);
            }
            let mut item = current.item.clone();
            let guard = if shown_changes || legacy {
                let update = Update::builder()
                    .table_name(self.table())
                    .set_key(Some(PostItem::key(post)))
                    .update_expression(
                        "SET title = :new_title, summary = :new_summary, updatedAt = :now, \
                         version = version + :one REMOVE content",
                    )
                    .condition_expression(AS_READ)
                    .expression_attribute_values(":new_title", s(&title))
                    .expression_attribute_values(":new_summary", s(&summary))
                    .expression_attribute_values(":now", s(&now))
                    .expression_attribute_values(":one", n(1));
                item.title = title;
                item.summary = summary;
                item.updated_at = now;
                item.version += 1;
                item.content = None;
                let update = as_read(&current.item, editor)
                    .into_iter()
                    .fold(update, |u, (name, value)| {
                        u.expression_attribute_values(name, value)
                    });
                tx.update("post", update.build()?)
            } else {
                let check = ConditionCheck::builder()
                    .table_name(self.table())
                    .set_key(Some(PostItem::key(post)))
                    .condition_expression(AS_READ);
                let check = as_read(&current.item, editor)
                    .into_iter()
                    .fold(check, |c, (name, value)| {
                        c.expression_attribute_values(name, value)
                    });
                tx.check("post", check.build()?)
            };
            match tx.commit().await {
                Ok(()) => {
                    let content = new_content.or(current.content);
                    return Ok(StoredPost { item, content }.into());
                }
                // Deleted, or edited by another request since we read it.
                Err(Cancelled::Conditions(failed)) if failed.failed(guard) => continue,
                Err(Cancelled::Conditions(failed)) => return Err(failed.unexpected("edit post")),
                Err(Cancelled::Store(err)) => return Err(err),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the post kept changing during the edit",
        ))
    }

    /// The audit's repair of a count: sets `counter` to `actual` if the post
    /// is still at the `version` it was read at (so a like or a comment since
    /// is never undone), and raises the version so the feed copy follows.
    pub(crate) async fn set_post_count(
        &self,
        post: &PostId,
        counter: &str,
        actual: u64,
        version: u64,
    ) -> Result<bool, StoreError> {
        let update = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(PostItem::key(post)))
            .update_expression("SET #counter = :actual, version = version + :one")
            .condition_expression("version = :seen")
            .expression_attribute_names("#counter", counter)
            .expression_attribute_values(":actual", n(actual))
            .expression_attribute_values(":seen", n(version))
            .expression_attribute_values(":one", n(1))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        condition_held(
            self.backoff()
                .send("set post count", || update.clone().send())
                .await,
        )
    }

    /// Moves a post of the old shape (content on the post item) into the new
    /// one: the content item, then the content off the post item, in one
    /// transaction. `false` when there was nothing to move: the post is in
    /// the new shape already, or an edit moved it meanwhile. Safe while the
    /// API serves: an edit always leaves the new shape, and a like or a
    /// comment does not touch the content.
    pub async fn migrate_post(&self, post: &PostId) -> Result<bool, StoreError> {
        let Some(current) = self.read_post(post, true).await? else {
            return Ok(false);
        };
        let Some(text) = current.item.content.clone() else {
            return Ok(false);
        };
        let mut tx = self.transaction("migrate post");
        let content = PostContentItem::new(*post, &text, &current.item.updated_at);
        let moved = tx.put_new("post content", &content)?;
        let update = Update::builder()
            .table_name(self.table())
            .set_key(Some(PostItem::key(post)))
            .update_expression("REMOVE content")
            .condition_expression("content = :content")
            .expression_attribute_values(":content", s(&text))
            .build()?;
        let removed = tx.update("post", update);
        match tx.commit().await {
            Ok(()) => Ok(true),
            Err(Cancelled::Conditions(failed))
                if failed.failed(moved) || failed.failed(removed) =>
            {
                Ok(false)
            }
            Err(Cancelled::Conditions(failed)) => Err(failed.unexpected("migrate post")),
            Err(Cancelled::Store(err)) => Err(err),
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
