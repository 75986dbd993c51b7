//! Single-table data access. One module per entity; each owns its item shape and
//! its operations, and builds keys only through [`crate::keys`].

pub mod bulk;
pub mod comments;
pub mod cursor;
pub mod feed;
pub mod likes;
pub mod meter;
pub mod posts;
mod retry;
pub mod table;
pub mod users;

use std::time::Duration;

use aws_config::{BehaviorVersion, retry::RetryConfig, timeout::TimeoutConfig};
use aws_sdk_dynamodb::{
    Client,
    error::{ProvideErrorMetadata, SdkError},
    operation::transact_write_items::TransactWriteItemsError,
    types::{
        AttributeValue, CancellationReason, ConditionCheck, Put, ReturnConsumedCapacity,
        TransactWriteItem, Update,
    },
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use thiserror::Error;

use crate::model::Page;

pub use retry::Backoff;

/// A DynamoDB item as the SDK sees it.
pub type Item = std::collections::HashMap<String, AttributeValue>;

/// What an operation can fail with, in the domain's words. The API maps these
/// to HTTP statuses in one place (`api::error`).
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("that username is already taken")]
    UsernameTaken,
    #[error("a profile already exists for this user")]
    ProfileExists,
    #[error("create your profile first (POST /users)")]
    NoProfile,
    #[error("no such user")]
    UserNotFound,
    #[error("no such post")]
    PostNotFound,
    #[error("only the post's author may change it")]
    NotAuthor,
    #[error("too many concurrent writes to the same item; try again")]
    Contention,
    #[error("{0}")]
    BadCursor(#[from] cursor::CursorError),
    #[error("DynamoDB is unavailable: {0}")]
    Unavailable(String),
    #[error("unexpected DynamoDB response: {0}")]
    Internal(String),
}

/// Which kind of entity an item is; stored as `type` so that stream records and
/// offline tools can tell items apart without parsing keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ItemType {
    User,
    Username,
    Post,
    Comment,
    Like,
    Liker,
    FeedEntry,
    FeedFloor,
    /// A type this version does not know (written by a newer one).
    #[serde(other)]
    Other,
}

impl ItemType {
    /// The `type` attribute's value.
    pub fn attribute(self) -> Result<AttributeValue, StoreError> {
        serde_dynamo::to_attribute_value(self)
            .map_err(|e| StoreError::Internal(format!("cannot encode type: {e}")))
    }
}

/// The table, and the one SDK client a process shares across invocations.
#[derive(Clone, Debug)]
pub struct Store {
    client: Client,
    table: String,
    backoff: Backoff,
    feed_capacity: usize,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            backoff: Backoff::default(),
            feed_capacity: feed::FEED_CAPACITY,
        }
    }

    /// Caps the feed at `capacity` posts instead of [`feed::FEED_CAPACITY`]:
    /// lets tests exercise trimming with a few posts.
    pub fn with_feed_capacity(mut self, capacity: usize) -> Self {
        self.feed_capacity = capacity;
        self
    }

    pub fn feed_capacity(&self) -> usize {
        self.feed_capacity
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// A transaction item that creates `item`, cancelled if its key is taken.
    fn put_new<T: Serialize>(&self, item: &T) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(self.table())
            .set_item(Some(to_item(item)?))
            .condition_expression("attribute_not_exists(PK)")
            .build()?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A transaction item that adds one to a post's `counter` and bumps its
    /// `version`, cancelled if the post does not exist.
    fn count_on_post(
        &self,
        post: &crate::ids::PostId,
        counter: &str,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(self.table())
            .set_key(Some(key(crate::keys::post_pk(post), crate::keys::POST_SK)))
            .update_expression("SET #counter = #counter + :one, version = version + :one")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_names("#counter", counter)
            .expression_attribute_values(":one", n(1))
            .build()?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// A transaction item that holds only while the author's profile is still at
    /// the version whose username the new item copies: a rename racing with the
    /// write cancels it, and the write is redone with the new name.
    fn author_unchanged(&self, author: &users::UserItem) -> Result<TransactWriteItem, StoreError> {
        let check = ConditionCheck::builder()
            .table_name(self.table())
            .set_key(Some(users::UserItem::key(&author.user_id)))
            .condition_expression("version = :seen")
            .expression_attribute_values(":seen", n(author.version))
            .build()?;
        Ok(TransactWriteItem::builder().condition_check(check).build())
    }

    /// Runs a transaction, retrying with jittered backoff while DynamoDB cancels
    /// it for a conflict with another transaction on the same item (a hot post).
    /// Cancellations for a failed condition come back to the caller to interpret.
    async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<(), Cancelled> {
        let result = self
            .backoff
            .retry_conflicts(|| {
                self.client
                    .transact_write_items()
                    .set_transact_items(Some(items.clone()))
                    .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                    .send()
            })
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(err)) => match err.into_err() {
                TransactWriteItemsError::TransactionCanceledException(e) => {
                    let reasons = e.cancellation_reasons().to_vec();
                    if retry::is_conflict(&reasons) {
                        Err(Cancelled::Store(StoreError::Contention))
                    } else {
                        Err(Cancelled::Conditions(reasons))
                    }
                }
                other => Err(Cancelled::Store(classify_service(&other))),
            },
            Err(other) => Err(Cancelled::Store(classify(other))),
        }
    }
}

/// Why a transaction did not commit.
enum Cancelled {
    /// DynamoDB cancelled it; one reason per transaction item, in order.
    Conditions(Vec<CancellationReason>),
    Store(StoreError),
}

/// True when the condition of the transaction item at `index` failed.
fn condition_failed(reasons: &[CancellationReason], index: usize) -> bool {
    reasons.get(index).and_then(CancellationReason::code) == Some("ConditionalCheckFailed")
}

/// The SDK's error for a failed request, in the domain's words: anything that
/// says "DynamoDB could not serve this now" becomes [`StoreError::Unavailable`].
pub(crate) fn classify<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match err {
        SdkError::TimeoutError(_) => StoreError::Unavailable("request timed out".into()),
        SdkError::DispatchFailure(e) => {
            StoreError::Unavailable(format!("could not reach DynamoDB: {e:?}"))
        }
        SdkError::ResponseError(e) => {
            StoreError::Unavailable(format!("unreadable response: {e:?}"))
        }
        SdkError::ServiceError(e) => classify_service(e.err()),
        other => StoreError::Internal(format!("{other:?}")),
    }
}

/// Whether a conditional write landed: `false` when its condition failed,
/// an error for anything else that went wrong.
pub(crate) fn condition_held<T, E, R>(result: Result<T, SdkError<E, R>>) -> Result<bool, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match result {
        Ok(_) => Ok(true),
        Err(SdkError::ServiceError(e))
            if e.err().code() == Some("ConditionalCheckFailedException") =>
        {
            Ok(false)
        }
        Err(err) => Err(classify(err)),
    }
}

fn classify_service<E: ProvideErrorMetadata>(err: &E) -> StoreError {
    let code = err.code().unwrap_or("Unknown");
    let message = err.message().unwrap_or_default();
    match code {
        "ProvisionedThroughputExceededException"
        | "ThrottlingException"
        | "RequestLimitExceeded"
        | "InternalServerError"
        | "ServiceUnavailable"
        | "LimitExceededException" => StoreError::Unavailable(format!("{code}: {message}")),
        _ => StoreError::Internal(format!("{code}: {message}")),
    }
}

/// Lists read one item more than the page, so a page knows whether another follows.
fn fetch_for_page(limit: usize) -> i32 {
    i32::try_from(limit.saturating_add(1)).unwrap_or(i32::MAX)
}

/// Where a page of `list` starts: after the item the cursor names, if any.
/// The id inside the cursor is validated like any other client id.
fn resume_after<I>(
    list: &str,
    cursor: Option<&str>,
    parse: fn(&str) -> Result<I, crate::ids::IdError>,
) -> Result<Option<I>, StoreError> {
    cursor
        .map(|c| {
            let raw = cursor::decode(c, list)?;
            parse(&raw).map_err(|_| StoreError::BadCursor(cursor::CursorError::Malformed))
        })
        .transpose()
}

/// Cuts a list fetched with [`fetch_for_page`] down to `limit` items, with a
/// cursor after the last one when more follow.
fn finish_page<T>(
    list: &str,
    mut items: Vec<T>,
    limit: usize,
    id_of: impl Fn(&T) -> String,
) -> Page<T> {
    let more = items.len() > limit;
    items.truncate(limit);
    let next_cursor = match items.last() {
        Some(last) if more => Some(cursor::encode(list, &id_of(last))),
        _ => None,
    };
    Page { items, next_cursor }
}

pub(crate) fn to_item<T: Serialize>(value: &T) -> Result<Item, StoreError> {
    serde_dynamo::to_item(value)
        .map_err(|e| StoreError::Internal(format!("cannot encode item: {e}")))
}

pub(crate) fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, StoreError> {
    serde_dynamo::from_item(item)
        .map_err(|e| StoreError::Internal(format!("cannot decode item: {e}")))
}

pub(crate) fn from_items<T: DeserializeOwned>(items: Vec<Item>) -> Result<Vec<T>, StoreError> {
    items.into_iter().map(from_item).collect()
}

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn key(pk: String, sk: impl Into<String>) -> Item {
    Item::from([
        (crate::keys::PK.to_owned(), s(pk)),
        (crate::keys::SK.to_owned(), s(sk)),
    ])
}

/// Loads credentials and region from the environment, with short timeouts so
/// that an unreachable DynamoDB becomes a 503 well inside API Gateway's 30 s.
pub async fn sdk_config() -> aws_config::SdkConfig {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs(3))
        .operation_timeout(Duration::from_secs(8))
        .build();
    aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(timeouts)
        .retry_config(RetryConfig::standard().with_max_attempts(3))
        .load()
        .await
}

/// The DynamoDB client, pointed at `endpoint` when one is given (DynamoDB Local).
pub fn dynamodb_client(sdk: &aws_config::SdkConfig, endpoint: Option<&str>) -> Client {
    let mut config = aws_sdk_dynamodb::config::Builder::from(sdk);
    if let Some(endpoint) = endpoint {
        config = config.endpoint_url(endpoint);
    }
    Client::from_conf(config.build())
}

/// The DynamoDB Streams client (the local stream poller's), likewise.
pub fn streams_client(
    sdk: &aws_config::SdkConfig,
    endpoint: Option<&str>,
) -> aws_sdk_dynamodbstreams::Client {
    let mut config = aws_sdk_dynamodbstreams::config::Builder::from(sdk);
    if let Some(endpoint) = endpoint {
        config = config.endpoint_url(endpoint);
    }
    aws_sdk_dynamodbstreams::Client::from_conf(config.build())
}
