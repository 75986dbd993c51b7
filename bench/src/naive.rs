//! The seeds' V1 and V2 models, ported to DynamoDB as a team new to it would.
//!
//! Two tables, like the seeds' two containers: `users` keyed by `id`, and
//! `posts` keyed by `postId`, holding a post, its comments and its likes in one
//! partition (sort keys `post`, `comment#<id>`, `like#<id>`). Three variants
//! ([`Naive`]):
//! - **V1, scan**: nothing is copied and nothing is indexed. Q2 reads the post,
//!   then its author's username and two counts (COUNT queries); Q3 and Q6 have
//!   no key to query, so they scan the posts table, then count and look up
//!   usernames per post; Q4 and Q5 query the post's partition, then look up
//!   each author's username.
//! - **V1 with GSIs**: the same items, and what the seeds' V1 had in Cosmos DB
//!   for its cross-partition queries: two global secondary indexes of the post
//!   items (sparse: only posts carry their keys; everything projected, since
//!   the short form's summary is cut from the content), `byAuthor` (author,
//!   post id) for Q3 and `byDate` (the constant `post`, post id) for Q6 (a post
//!   id is a ULID: it sorts by creation time). Q3 and Q6 query an index
//!   instead of scanning, then count and look up per post as above.
//! - **V2**: the seeds' V2: usernames copied onto posts, comments and likes,
//!   and the counts kept on the post (a comment or like is a transaction with
//!   the count's update). Q2, Q4 and Q5 become one call each; Q3 and Q6 query
//!   the indexes but read whole posts, as nothing is pre-computed for them.
//!
//! It is not a straw man: the counts use key conditions (they read only the
//! comments or likes), lookups of the same user are made once per request, and
//! independent calls run concurrently (up to [`CONCURRENCY`] at a time).

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::{
    Client,
    types::{
        AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
        Projection, ProjectionType, Put, ReturnConsumedCapacity, ScalarAttributeType, Select,
        TransactWriteItem, Update,
    },
};
use blog::{
    ids::{PostId, UserId},
    model::{Comment, Like, Post, PostSummary},
    store::{Item, bulk::PostWithReplies, items::user::UserItem},
    text::Username,
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
/// The indexes of the posts table (V1 with GSIs, V2).
pub const BY_AUTHOR: &str = "byAuthor";
pub const BY_DATE: &str = "byDate";

/// Which of the seeds' naive models a [`NaiveStore`] plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naive {
    /// V1 answering Q3 and Q6 by scanning.
    Scan,
    /// V1 answering Q3 and Q6 from its indexes (the same tables as `Scan`).
    Indexed,
    /// V2: usernames and counts copied; Q3 and Q6 from the indexes.
    Copied,
}

/// The key attributes of the naive tables and their indexes, for billing.
pub fn users_shape() -> local::billing::Shape {
    local::billing::Shape {
        pk: "id",
        sk: None,
        indexes: Vec::new(),
    }
}

/// The posts table; `indexed` with its two indexes (V1 scan has none).
pub fn posts_shape(indexed: bool) -> local::billing::Shape {
    use local::billing::{IndexShape, Projection::All};
    let index = |pk| IndexShape {
        pk,
        sk: "postId",
        projection: All,
    };
    local::billing::Shape {
        pk: "postId",
        sk: Some("sk"),
        indexes: if indexed {
            vec![index("postAuthor"), index("postType")]
        } else {
            Vec::new()
        },
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct UserRow {
    id: String,
    username: Username,
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
    /// The keys of the two indexes, on posts only (the indexes stay sparse).
    post_author: String,
    post_type: String,
    /// V2's copies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    username: Option<Username>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    comment_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    like_count: Option<u64>,
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
    /// V2's copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    username: Option<Username>,
}

impl ReplyRow {
    /// A comment (with `content`) or a like (without).
    fn new(
        post: &PostId,
        id: &str,
        author: &UserId,
        username: Option<&Username>,
        content: Option<&str>,
        at: &str,
    ) -> Self {
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
            username: username.cloned(),
        }
    }
}

/// The tables of one naive model at one scale.
#[derive(Clone, Debug)]
pub struct NaiveStore {
    client: Client,
    users: String,
    posts: String,
    mode: Naive,
}

impl NaiveStore {
    /// V1's tables are `<prefix>-v1-users` and `<prefix>-v1-posts` (both V1
    /// variants), V2's `<prefix>-v2-…`.
    pub fn new(client: Client, prefix: &str, mode: Naive) -> Self {
        let version = if mode == Naive::Copied { "v2" } else { "v1" };
        Self {
            client,
            users: format!("{prefix}-{version}-users"),
            posts: format!("{prefix}-{version}-posts"),
            mode,
        }
    }

    pub fn mode(&self) -> Naive {
        self.mode
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
        let index = |name: &str, pk: &str| {
            GlobalSecondaryIndex::builder()
                .index_name(name)
                .key_schema(key(pk, KeyType::Hash)?)
                .key_schema(key("postId", KeyType::Range)?)
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
        };
        self.client
            .create_table()
            .table_name(&self.posts)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("postId")?)
            .attribute_definitions(attr("sk")?)
            .attribute_definitions(attr("postAuthor")?)
            .attribute_definitions(attr("postType")?)
            .key_schema(key("postId", KeyType::Hash)?)
            .key_schema(key("sk", KeyType::Range)?)
            .global_secondary_indexes(index(BY_AUTHOR, "postAuthor")?)
            .global_secondary_indexes(index(BY_DATE, "postType")?)
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

    /// The rows of a post and its replies: in V1 no counts and no usernames,
    /// in V2 both.
    pub fn post_rows(&self, thread: &PostWithReplies) -> Result<Vec<Item>, Error> {
        let post = &thread.post;
        let copied = self.mode == Naive::Copied;
        let mut row = post_row(
            &post.post_id,
            &post.user_id,
            &post.title,
            &thread.content.content,
            &post.created_at,
        );
        if copied {
            row.username = Some(post.username.clone());
            row.comment_count = Some(thread.comments.len() as u64);
            row.like_count = Some(thread.likes.len() as u64);
        }
        let mut rows = vec![serde_dynamo::to_item(row)?];
        for c in &thread.comments {
            let id = c.comment_id.to_string();
            let row = ReplyRow::new(
                &post.post_id,
                &id,
                &c.user_id,
                copied.then_some(&c.username),
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
                copied.then_some(&l.username),
                None,
                &l.created_at,
            );
            rows.push(serde_dynamo::to_item(row)?);
        }
        Ok(rows)
    }

    // ---- commands: in V1 one PutItem each, nothing to keep in step; in V2
    // the username is read to be copied, and a reply updates its count ----

    /// C1.
    pub async fn create_user(&self, user: &UserId, username: &Username) -> Result<(), Error> {
        let row = UserRow {
            id: user.to_string(),
            username: username.clone(),
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
        let mut row = post_row(post, author, title, content, at);
        if self.mode == Naive::Copied {
            row.username = Some(self.username(author).await?);
            row.comment_count = Some(0);
            row.like_count = Some(0);
        }
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
        if self.mode != Naive::Copied {
            let row = ReplyRow::new(post, id, author, None, content, at);
            return self.put(&self.posts, serde_dynamo::to_item(row)?).await;
        }
        // V2: the reply with its author's username, and the post's count, at once.
        let username = self.username(author).await?;
        let row = ReplyRow::new(post, id, author, Some(&username), content, at);
        let count = if content.is_some() {
            "commentCount"
        } else {
            "likeCount"
        };
        let put = Put::builder()
            .table_name(&self.posts)
            .set_item(Some(serde_dynamo::to_item(row)?))
            .condition_expression("attribute_not_exists(sk)")
            .build()?;
        let update = Update::builder()
            .table_name(&self.posts)
            .key("postId", s(post.to_string()))
            .key("sk", s(POST_SK))
            .update_expression(format!("ADD {count} :one"))
            .condition_expression("attribute_exists(sk)")
            .expression_attribute_values(
                ":one",
                aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
            )
            .build()?;
        self.client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put).build())
            .transact_items(TransactWriteItem::builder().update(update).build())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await?;
        Ok(())
    }

    /// One user's username (V2 copies it onto what they write).
    async fn username(&self, user: &UserId) -> Result<Username, Error> {
        self.usernames([user.to_string()].into())
            .await?
            .into_values()
            .next()
            .ok_or_else(|| format!("no user {user}").into())
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
    pub async fn get_user(&self, user: &UserId) -> Result<Option<Username>, Error> {
        let usernames = self.usernames([user.to_string()].into()).await?;
        Ok(usernames.into_values().next())
    }

    /// Q2: the post, then (V1) its author's username and its two counts.
    pub async fn get_post(&self, post: &PostId) -> Result<Option<Post>, Error> {
        let Some(row) = self.post_row(post).await? else {
            return Ok(None);
        };
        let (username, comments, likes) =
            match (row.username.clone(), row.comment_count, row.like_count) {
                (Some(username), Some(comments), Some(likes)) => (username, comments, likes),
                _ => {
                    let (usernames, comments, likes) = futures::try_join!(
                        self.usernames([row.user_id.clone()].into()),
                        self.count(post, COMMENT_PREFIX),
                        self.count(post, LIKE_PREFIX),
                    )?;
                    let username = name_of(&usernames, &row.user_id)?;
                    (username, comments, likes)
                }
            };
        Ok(Some(Post {
            post_id: *post,
            user_id: UserId::parse(&row.user_id)?,
            username,
            title: row.title,
            content_html: blog::markdown::to_html(&row.content),
            tags: Vec::new(),
            status: blog::model::Status::Published,
            published_at: Some(row.creation_date.clone()),
            publish_at: None,
            content: row.content,
            comment_count: comments,
            like_count: likes,
            created_at: row.creation_date.clone(),
            updated_at: row.creation_date,
        }))
    }

    /// Q3: V1 without an index scans for the user's posts; the others query
    /// `byAuthor`. Then V1 aggregates.
    pub async fn list_user_posts(&self, user: &UserId) -> Result<Vec<PostSummary>, Error> {
        let rows = if self.mode == Naive::Scan {
            let mut rows = self.scan_posts(Some(user)).await?;
            rows.sort_by(|a, b| b.post_id.cmp(&a.post_id));
            rows
        } else {
            self.index_posts(BY_AUTHOR, "postAuthor", &user.to_string(), None)
                .await?
        };
        self.summaries(rows).await
    }

    /// Q4: the post's comments, then (V1) each commenter's username.
    pub async fn list_comments(&self, post: &PostId) -> Result<Vec<Comment>, Error> {
        let rows = self.replies(post, COMMENT_PREFIX).await?;
        let names = self.reply_usernames(&rows).await?;
        rows.into_iter()
            .map(|r| {
                Ok(Comment {
                    comment_id: blog::ids::CommentId::parse(&r.id)?,
                    post_id: *post,
                    username: name_of(&names, &r.user_id)?,
                    user_id: UserId::parse(&r.user_id)?,
                    content: r.content.unwrap_or_default(),
                    created_at: r.creation_date,
                })
            })
            .collect()
    }

    /// Q5: the post's likes, then (V1) each liker's username.
    pub async fn list_likes(&self, post: &PostId) -> Result<Vec<Like>, Error> {
        let mut rows = self.replies(post, LIKE_PREFIX).await?;
        rows.reverse(); // newest first, as V3 lists them
        let names = self.reply_usernames(&rows).await?;
        rows.into_iter()
            .map(|r| {
                Ok(Like {
                    post_id: *post,
                    username: name_of(&names, &r.user_id)?,
                    user_id: UserId::parse(&r.user_id)?,
                    created_at: r.creation_date,
                })
            })
            .collect()
    }

    /// Q6: V1 without an index scans every post, sorts by date and keeps the
    /// newest 100; the others query `byDate` for them. Then V1 aggregates.
    pub async fn feed(&self) -> Result<Vec<PostSummary>, Error> {
        let capacity = blog::store::feed::FEED_CAPACITY;
        let rows = if self.mode == Naive::Scan {
            let mut rows = self.scan_posts(None).await?;
            rows.sort_by(|a, b| {
                (&b.creation_date, &b.post_id).cmp(&(&a.creation_date, &a.post_id))
            });
            rows.truncate(capacity);
            rows
        } else {
            self.index_posts(BY_DATE, "postType", POST_SK, Some(capacity))
                .await?
        };
        self.summaries(rows).await
    }

    /// Posts from one of the indexes, newest first, page by page.
    async fn index_posts(
        &self,
        index: &str,
        key: &str,
        value: &str,
        limit: Option<usize>,
    ) -> Result<Vec<PostRow>, Error> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let wanted = limit.map(|l| l - rows.len());
            let page = self
                .client
                .query()
                .table_name(&self.posts)
                .index_name(index)
                .key_condition_expression("#key = :value")
                .expression_attribute_names("#key", key)
                .expression_attribute_values(":value", s(value))
                .scan_index_forward(false)
                .set_limit(wanted.map(|w| i32::try_from(w).unwrap_or(i32::MAX)))
                .set_exclusive_start_key(start)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await?;
            rows.extend(decode::<PostRow>(page.items.unwrap_or_default())?);
            start = page.last_evaluated_key;
            if start.is_none() || limit.is_some_and(|l| rows.len() >= l) {
                return Ok(rows);
            }
        }
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

    /// The short forms of `rows`: as stored (V2), or with usernames and
    /// counts looked up per post (V1).
    async fn summaries(&self, rows: Vec<PostRow>) -> Result<Vec<PostSummary>, Error> {
        if self.mode == Naive::Copied {
            return rows
                .into_iter()
                .map(|row| {
                    Ok(PostSummary {
                        post_id: PostId::parse(&row.post_id)?,
                        user_id: UserId::parse(&row.user_id)?,
                        username: row.username.ok_or("a V2 row without its username")?,
                        title: row.title,
                        summary: blog::markdown::summary(&row.content),
                        comment_count: row.comment_count.unwrap_or_default(),
                        like_count: row.like_count.unwrap_or_default(),
                        published_at: row.creation_date.clone(),
                        created_at: row.creation_date,
                        updated_at: None,
                    })
                })
                .collect();
        }
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
                        username: name_of(names, &row.user_id)?,
                        user_id: UserId::parse(&row.user_id)?,
                        title: row.title,
                        summary: blog::markdown::summary(&row.content),
                        comment_count: comments,
                        like_count: likes,
                        published_at: row.creation_date.clone(),
                        created_at: row.creation_date,
                        updated_at: None,
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

    /// The usernames of the authors of `rows`: copied on them (V2), or looked
    /// up (V1).
    async fn reply_usernames(&self, rows: &[ReplyRow]) -> Result<HashMap<String, Username>, Error> {
        if self.mode == Naive::Copied {
            return Ok(rows
                .iter()
                .filter_map(|r| Some((r.user_id.clone(), r.username.clone()?)))
                .collect());
        }
        self.usernames(rows.iter().map(|r| r.user_id.clone()).collect())
            .await
    }

    /// Username of each distinct user id: one GetItem per user.
    async fn usernames(&self, ids: BTreeSet<String>) -> Result<HashMap<String, Username>, Error> {
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

/// The username of `user` among `names` (every author has a profile).
fn name_of(names: &HashMap<String, Username>, user: &str) -> Result<Username, Error> {
    Ok(names
        .get(user)
        .cloned()
        .ok_or_else(|| format!("no username for {user}"))?)
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
        post_author: author.to_string(),
        post_type: POST_SK.into(),
        username: None,
        comment_count: None,
        like_count: None,
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
