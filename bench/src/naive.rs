//! The seeds' V1 model, ported to DynamoDB as a naive team would: normalised
//! items referring to each other, and every read aggregating what it shows.
//!
//! Two tables, like the seeds' two containers: `users` keyed by `id`, and
//! `posts` keyed by `postId`, holding a post, its comments and its likes in one
//! partition (sort keys `post`, `comment#<id>`, `like#<id>`). Nothing is copied:
//! - Q2 reads the post, then its author's username and two counts (COUNT queries);
//! - Q3 and Q6 have no key to query, so they scan the posts table, then count
//!   and look up usernames per post;
//! - Q4 and Q5 query the post's partition, then look up each author's username.
//!
//! It is not a straw man: the counts use key conditions (they read only the
//! comments or likes), lookups of the same user are made once per request, and
//! independent calls run concurrently (up to [`CONCURRENCY`] at a time).

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::{
    Client,
    types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ReturnConsumedCapacity,
        ScalarAttributeType, Select,
    },
};
use blog::{
    ids::{PostId, UserId},
    model::{Comment, Like, Post, PostSummary},
    store::{Item, bulk::PostWithReplies, users::UserItem},
    text,
};
use futures::{StreamExt, TryStreamExt, stream};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Independent calls of one request in flight at once.
pub const CONCURRENCY: usize = 16;
/// Segments of the parallel scans of Q3 and Q6.
pub const SCAN_SEGMENTS: i32 = 64;

const POST_SK: &str = "post";
const COMMENT_PREFIX: &str = "comment#";
const LIKE_PREFIX: &str = "like#";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct UserRow {
    id: String,
    username: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PostRow {
    post_id: String,
    sk: String,
    #[serde(rename = "type")]
    kind: String,
    user_id: String,
    title: String,
    content: String,
    creation_date: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplyRow {
    post_id: String,
    sk: String,
    #[serde(rename = "type")]
    kind: String,
    id: String,
    user_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    creation_date: String,
}

impl ReplyRow {
    /// A comment (with `content`) or a like (without).
    fn new(post: &PostId, id: &str, author: &UserId, content: Option<&str>, at: &str) -> Self {
        let (prefix, kind) = match content {
            Some(_) => (COMMENT_PREFIX, "comment"),
            None => (LIKE_PREFIX, "like"),
        };
        Self {
            post_id: post.to_string(),
            sk: format!("{prefix}{id}"),
            kind: kind.into(),
            id: id.to_owned(),
            user_id: author.to_string(),
            content: content.map(str::to_owned),
            creation_date: at.to_owned(),
        }
    }
}

/// The V1 tables of one scale.
#[derive(Clone, Debug)]
pub struct NaiveStore {
    client: Client,
    users: String,
    posts: String,
}

impl NaiveStore {
    pub fn new(client: Client, prefix: &str) -> Self {
        Self {
            client,
            users: format!("{prefix}-v1-users"),
            posts: format!("{prefix}-v1-posts"),
        }
    }

    pub fn users_table(&self) -> &str {
        &self.users
    }

    pub fn posts_table(&self) -> &str {
        &self.posts
    }

    pub async fn create_tables(&self) -> Result<(), Error> {
        let attr = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
        };
        let key = |name: &str, kind| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
        };
        self.client
            .create_table()
            .table_name(&self.users)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("id")?)
            .key_schema(key("id", KeyType::Hash)?)
            .send()
            .await?;
        self.client
            .create_table()
            .table_name(&self.posts)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("postId")?)
            .attribute_definitions(attr("sk")?)
            .key_schema(key("postId", KeyType::Hash)?)
            .key_schema(key("sk", KeyType::Range)?)
            .send()
            .await?;
        Ok(())
    }

    /// The V1 rows of one user.
    pub fn user_rows(user: &UserItem) -> Result<Vec<Item>, Error> {
        Ok(vec![serde_dynamo::to_item(UserRow {
            id: user.user_id.to_string(),
            username: user.username.clone(),
        })?])
    }

    /// The V1 rows of a post and its replies: no counts, no usernames.
    pub fn post_rows(thread: &PostWithReplies) -> Result<Vec<Item>, Error> {
        let post = &thread.post;
        let mut rows = vec![serde_dynamo::to_item(post_row(
            &post.post_id,
            &post.user_id,
            &post.title,
            &thread.content.content,
            &post.created_at,
        ))?];
        for c in &thread.comments {
            let id = c.comment_id.to_string();
            let row = ReplyRow::new(
                &post.post_id,
                &id,
                &c.user_id,
                Some(&c.content),
                &c.created_at,
            );
            rows.push(serde_dynamo::to_item(row)?);
        }
        for l in &thread.likes {
            let row = ReplyRow::new(
                &post.post_id,
                &l.like_id.to_string(),
                &l.user_id,
                None,
                &l.created_at,
            );
            rows.push(serde_dynamo::to_item(row)?);
        }
        Ok(rows)
    }

    // ---- commands: one PutItem each, nothing to keep in step ----

    /// C1.
    pub async fn create_user(&self, user: &UserId, username: &str) -> Result<(), Error> {
        let row = UserRow {
            id: user.to_string(),
            username: username.to_owned(),
        };
        self.put(&self.users, serde_dynamo::to_item(row)?).await
    }

    /// C2.
    pub async fn create_post(
        &self,
        post: &PostId,
        author: &UserId,
        title: &str,
        content: &str,
        at: &str,
    ) -> Result<(), Error> {
        let row = post_row(post, author, title, content, at);
        self.put(&self.posts, serde_dynamo::to_item(row)?).await
    }

    /// C3 (`content` given) or C4 (`None`).
    pub async fn reply(
        &self,
        post: &PostId,
        id: &str,
        author: &UserId,
        content: Option<&str>,
        at: &str,
    ) -> Result<(), Error> {
        let row = ReplyRow::new(post, id, author, content, at);
        self.put(&self.posts, serde_dynamo::to_item(row)?).await
    }

    async fn put(&self, table: &str, item: Item) -> Result<(), Error> {
        self.client
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await?;
        Ok(())
    }

    // ---- queries: each aggregates what V3 stores ready-made ----

    /// Q1: one GetItem, as in V3.
    pub async fn get_user(&self, user: &UserId) -> Result<Option<String>, Error> {
        let usernames = self.usernames([user.to_string()].into()).await?;
        Ok(usernames.into_values().next())
    }

    /// Q2: the post, then its author's username and its two counts.
    pub async fn get_post(&self, post: &PostId) -> Result<Option<Post>, Error> {
        let Some(row) = self.post_row(post).await? else {
            return Ok(None);
        };
        let (usernames, comments, likes) = futures::try_join!(
            self.usernames([row.user_id.clone()].into()),
            self.count(post, COMMENT_PREFIX),
            self.count(post, LIKE_PREFIX),
        )?;
        let username = usernames.get(&row.user_id).cloned().unwrap_or_default();
        Ok(Some(Post {
            post_id: *post,
            user_id: UserId::parse(&row.user_id)?,
            username,
            title: row.title,
            content: row.content,
            comment_count: comments,
            like_count: likes,
            created_at: row.creation_date.clone(),
            updated_at: row.creation_date,
        }))
    }

    /// Q3: no key leads to a user's posts, so scan for them, then aggregate.
    pub async fn list_user_posts(&self, user: &UserId) -> Result<Vec<PostSummary>, Error> {
        let mut rows = self.scan_posts(Some(user)).await?;
        rows.sort_by(|a, b| b.post_id.cmp(&a.post_id));
        self.summaries(rows).await
    }

    /// Q4: the post's comments, then each commenter's username.
    pub async fn list_comments(&self, post: &PostId) -> Result<Vec<Comment>, Error> {
        let rows = self.replies(post, COMMENT_PREFIX).await?;
        let names = self
            .usernames(rows.iter().map(|r| r.user_id.clone()).collect())
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(Comment {
                    comment_id: blog::ids::CommentId::parse(&r.id)?,
                    post_id: *post,
                    username: names.get(&r.user_id).cloned().unwrap_or_default(),
                    user_id: UserId::parse(&r.user_id)?,
                    content: r.content.unwrap_or_default(),
                    created_at: r.creation_date,
                })
            })
            .collect()
    }

    /// Q5: the post's likes, then each liker's username.
    pub async fn list_likes(&self, post: &PostId) -> Result<Vec<Like>, Error> {
        let mut rows = self.replies(post, LIKE_PREFIX).await?;
        rows.reverse(); // newest first, as V3 lists them
        let names = self
            .usernames(rows.iter().map(|r| r.user_id.clone()).collect())
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(Like {
                    post_id: *post,
                    username: names.get(&r.user_id).cloned().unwrap_or_default(),
                    user_id: UserId::parse(&r.user_id)?,
                    created_at: r.creation_date,
                })
            })
            .collect()
    }

    /// Q6: scan every post, sort by date, keep the newest 100, aggregate.
    pub async fn feed(&self) -> Result<Vec<PostSummary>, Error> {
        let mut rows = self.scan_posts(None).await?;
        rows.sort_by(|a, b| (&b.creation_date, &b.post_id).cmp(&(&a.creation_date, &a.post_id)));
        rows.truncate(blog::store::feed::FEED_CAPACITY);
        self.summaries(rows).await
    }

    async fn post_row(&self, post: &PostId) -> Result<Option<PostRow>, Error> {
        let output = self
            .client
            .get_item()
            .table_name(&self.posts)
            .key("postId", s(post.to_string()))
            .key("sk", s(POST_SK))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await?;
        Ok(output.item.map(serde_dynamo::from_item).transpose()?)
    }

    /// Every post row (of `author`, if given): a parallel scan of the whole
    /// table in [`SCAN_SEGMENTS`] segments, page by page, [`CONCURRENCY`]
    /// segments at a time. (A single sequential scan reads the same data for
    /// the same capacity; DynamoDB Local is just far slower at it.)
    async fn scan_posts(&self, author: Option<&UserId>) -> Result<Vec<PostRow>, Error> {
        let segments: Vec<Vec<PostRow>> = stream::iter(0..SCAN_SEGMENTS)
            .map(|segment| self.scan_segment(segment, author))
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(segments.into_iter().flatten().collect())
    }

    async fn scan_segment(
        &self,
        segment: i32,
        author: Option<&UserId>,
    ) -> Result<Vec<PostRow>, Error> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let mut scan = self
                .client
                .scan()
                .table_name(&self.posts)
                .segment(segment)
                .total_segments(SCAN_SEGMENTS)
                .expression_attribute_names("#type", "type")
                .expression_attribute_values(":post", s(POST_SK))
                .set_exclusive_start_key(start)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
            scan = match author {
                Some(author) => scan
                    .filter_expression("#type = :post AND userId = :author")
                    .expression_attribute_values(":author", s(author.to_string())),
                None => scan.filter_expression("#type = :post"),
            };
            let page = scan.send().await?;
            rows.extend(decode::<PostRow>(page.items.unwrap_or_default())?);
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(rows);
            }
        }
    }

    /// The short forms of `rows`: usernames and counts looked up per post.
    async fn summaries(&self, rows: Vec<PostRow>) -> Result<Vec<PostSummary>, Error> {
        let names = self
            .usernames(rows.iter().map(|r| r.user_id.clone()).collect())
            .await?;
        stream::iter(rows)
            .map(|row| {
                let names = &names;
                async move {
                    let post = PostId::parse(&row.post_id)?;
                    let (comments, likes) = futures::try_join!(
                        self.count(&post, COMMENT_PREFIX),
                        self.count(&post, LIKE_PREFIX)
                    )?;
                    Ok::<_, Error>(PostSummary {
                        post_id: post,
                        username: names.get(&row.user_id).cloned().unwrap_or_default(),
                        user_id: UserId::parse(&row.user_id)?,
                        title: row.title,
                        summary: text::summary(&row.content),
                        comment_count: comments,
                        like_count: likes,
                        created_at: row.creation_date,
                    })
                }
            })
            .buffered(CONCURRENCY / 2)
            .try_collect()
            .await
    }

    /// How many comments or likes a post has: a COUNT query over them.
    async fn count(&self, post: &PostId, prefix: &str) -> Result<u64, Error> {
        let mut total = 0;
        let mut start = None;
        loop {
            let page = self
                .replies_query(post, prefix)
                .select(Select::Count)
                .set_exclusive_start_key(start)
                .send()
                .await?;
            total += u64::try_from(page.count).unwrap_or(0);
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(total);
            }
        }
    }

    async fn replies(&self, post: &PostId, prefix: &str) -> Result<Vec<ReplyRow>, Error> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .replies_query(post, prefix)
                .set_exclusive_start_key(start)
                .send()
                .await?;
            rows.extend(decode::<ReplyRow>(page.items.unwrap_or_default())?);
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(rows);
            }
        }
    }

    fn replies_query(
        &self,
        post: &PostId,
        prefix: &str,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.posts)
            .key_condition_expression("postId = :post AND begins_with(sk, :prefix)")
            .expression_attribute_values(":post", s(post.to_string()))
            .expression_attribute_values(":prefix", s(prefix))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
    }

    /// Username of each distinct user id: one GetItem per user.
    async fn usernames(&self, ids: BTreeSet<String>) -> Result<HashMap<String, String>, Error> {
        stream::iter(ids)
            .map(|id| async move {
                let output = self
                    .client
                    .get_item()
                    .table_name(&self.users)
                    .key("id", s(id.clone()))
                    .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                    .send()
                    .await?;
                let row: Option<UserRow> = output.item.map(serde_dynamo::from_item).transpose()?;
                Ok::<_, Error>(row.map(|r| (id, r.username)))
            })
            .buffer_unordered(CONCURRENCY)
            .try_filter_map(|found| async move { Ok(found) })
            .try_collect()
            .await
    }
}

fn post_row(post: &PostId, author: &UserId, title: &str, content: &str, at: &str) -> PostRow {
    PostRow {
        post_id: post.to_string(),
        sk: POST_SK.into(),
        kind: POST_SK.into(),
        user_id: author.to_string(),
        title: title.to_owned(),
        content: content.to_owned(),
        creation_date: at.to_owned(),
    }
}

fn decode<T: DeserializeOwned>(items: Vec<Item>) -> Result<Vec<T>, Error> {
    Ok(items
        .into_iter()
        .map(serde_dynamo::from_item)
        .collect::<Result<_, _>>()?)
}

fn s(value: impl Into<String>) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::S(value.into())
}
