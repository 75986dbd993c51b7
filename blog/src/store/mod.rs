//! Single-table data access. One module per entity; each owns its item shape and
//! its operations, and builds keys only through [`crate::keys`].

pub mod bulk;
pub mod comments;
pub mod cursor;
pub mod feed;
pub mod likes;
pub mod meter;
pub mod migrate;
mod pages;
pub mod posts;
pub mod retry;
pub mod size;
pub mod table;
mod transaction;
pub mod users;

use std::time::Duration;

use aws_config::{BehaviorVersion, retry::RetryConfig, timeout::TimeoutConfig};
use aws_sdk_dynamodb::{
    Client,
    error::{ProvideErrorMetadata, SdkError},
    types::{AttributeValue, Update},
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use thiserror::Error;

pub use retry::{Backoff, Busy};
pub use transaction::request_scope;
pub(crate) use transaction::{Cancelled, Slot, Transaction};

/// How long the rename fan-out allows GSI1 to catch up with a write. DynamoDB
/// documents GSI propagation as usually under a second; twice that leaves room.
pub const GSI_LAG_BOUND: Duration = Duration::from_secs(2);

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
    #[error("{0}")]
    BadCursor(#[from] cursor::CursorError),
    /// DynamoDB could not serve the call now, and retrying did not help: a
    /// 503 for a request, a failed record for the fan-out.
    #[error("DynamoDB is busy ({}): {detail}", cause.as_str())]
    Busy { cause: Busy, detail: String },
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
    PostContent,
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

impl StoreError {
    pub fn busy(cause: Busy, detail: impl Into<String>) -> Self {
        StoreError::Busy {
            cause,
            detail: detail.into(),
        }
    }
}

/// The table, and the one SDK client a process shares across invocations.
#[derive(Clone, Debug)]
pub struct Store {
    client: Client,
    table: String,
    backoff: Backoff,
    feed_capacity: usize,
    gsi_lag_bound: Duration,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            backoff: Backoff::default(),
            feed_capacity: feed::FEED_CAPACITY,
            gsi_lag_bound: GSI_LAG_BOUND,
        }
    }

    /// Replaces the retry policy (tests make it fast, or give up at once).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How long GSI1 may take to show a write: the rename fan-out waits this
    /// long after a rename before its second pass. DynamoDB Local's index is
    /// synchronous, so tests against it may set zero.
    pub fn with_gsi_lag_bound(mut self, bound: Duration) -> Self {
        self.gsi_lag_bound = bound;
        self
    }

    pub fn gsi_lag_bound(&self) -> Duration {
        self.gsi_lag_bound
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

    pub(crate) fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// One GetItem, retried while DynamoDB is busy; strongly consistent when
    /// a write depends on what it reads.
    pub(crate) async fn get(
        &self,
        key: Item,
        consistent: bool,
    ) -> Result<Option<Item>, StoreError> {
        let get = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key))
            .consistent_read(consistent)
            .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Indexes);
        let output = self
            .backoff()
            .send("get", || get.clone().send())
            .await
            .map_err(classify)?;
        Ok(output.item)
    }

    /// Adds one to a post's `counter` and bumps its `version`; the condition
    /// fails if the post does not exist.
    fn count_on_post(
        &self,
        tx: &mut Transaction<'_>,
        post: &crate::ids::PostId,
        counter: &str,
    ) -> Result<Slot, StoreError> {
        let update = Update::builder()
            .table_name(self.table())
            .set_key(Some(key(crate::keys::post_pk(post), crate::keys::POST_SK)))
            .update_expression("SET #counter = #counter + :one, version = version + :one")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_names("#counter", counter)
            .expression_attribute_values(":one", n(1))
            .build()?;
        Ok(tx.update("post", update))
    }
}

/// The SDK's error for a failed request, in the domain's words: anything that
/// says "DynamoDB could not serve this now" becomes [`StoreError::Busy`].
pub fn classify<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match err {
        SdkError::TimeoutError(_) => StoreError::busy(Busy::Unavailable, "request timed out"),
        SdkError::DispatchFailure(e) => StoreError::busy(
            Busy::Unavailable,
            format!("could not reach DynamoDB: {e:?}"),
        ),
        SdkError::ResponseError(e) => {
            StoreError::busy(Busy::Unavailable, format!("unreadable response: {e:?}"))
        }
        SdkError::ServiceError(e) => classify_service(e.err()),
        other => StoreError::Internal(format!("{other:?}")),
    }
}

/// One line saying what went wrong with a call, for logs.
pub(crate) fn describe<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> String {
    match err {
        SdkError::ServiceError(e) => format!(
            "{}: {}",
            e.err().code().unwrap_or("Unknown"),
            e.err().message().unwrap_or_default()
        ),
        SdkError::TimeoutError(_) => "timed out".to_owned(),
        SdkError::DispatchFailure(e) => format!("could not reach DynamoDB: {:?}", e.as_other()),
        SdkError::ResponseError(_) => "unreadable response".to_owned(),
        _ => "request could not be built".to_owned(),
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
    match retry::busy_code(code) {
        Some(cause) => StoreError::busy(cause, format!("{code}: {message}")),
        None => StoreError::Internal(format!("{code}: {message}")),
    }
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
        // DynamoDB's throttling clears in tens of milliseconds, not the SDK's
        // default first backoff of one second.
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(50)),
        )
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
