//! Q6 the feed: the newest posts in short form.
//!
//! The feed is one partition, and every visitor of the front page reads it:
//! at about 8 read units a full page, about 375 reads a second would exhaust
//! its partition's 3,000. So each `get-feed` instance keeps the full page it
//! read last for [`FeedCache`]'s time to live and serves every `limit` from
//! it: the partition sees at most one Query per instance per time to live,
//! however many requests arrive (docs/scaling.md).

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use lambda_http::Request;

use super::{ApiError, ApiResult, App, ErrorCode, Reply, request};
pub use crate::clock::Clock;
use crate::model::{Feed, PostSummary};

/// How long an instance serves the feed it read, unless `FEED_CACHE_SECONDS`
/// says otherwise. A reader sees a new post this much later than the fan-out
/// puts it in the feed, at most.
pub const FEED_CACHE_TTL: Duration = Duration::from_secs(2);

/// The full feed page an instance read last, and when.
#[derive(Debug)]
pub struct FeedCache {
    ttl: Duration,
    page: Mutex<Option<(Instant, Arc<[PostSummary]>)>>,
    clock: Clock,
}

impl FeedCache {
    /// Keeps a page for `ttl`; zero keeps nothing.
    pub fn new(ttl: Duration) -> Self {
        Self::on(ttl, Clock::default())
    }

    /// Keeps a page for `ttl` as `clock` measures it.
    pub fn on(ttl: Duration, clock: Clock) -> Self {
        Self {
            ttl,
            page: Mutex::new(None),
            clock,
        }
    }

    /// Every read goes to the table.
    pub fn off() -> Self {
        Self::new(Duration::ZERO)
    }

    pub fn is_on(&self) -> bool {
        !self.ttl.is_zero()
    }

    /// The page read less than the time to live ago.
    fn fresh(&self) -> Option<Arc<[PostSummary]>> {
        let page = self.page.lock().unwrap_or_else(PoisonError::into_inner);
        page.as_ref()
            .filter(|(read, _)| self.clock.now().duration_since(*read) < self.ttl)
            .map(|(_, items)| items.clone())
    }

    fn keep(&self, items: Vec<PostSummary>) -> Arc<[PostSummary]> {
        let items: Arc<[PostSummary]> = items.into();
        if self.is_on() {
            *self.page.lock().unwrap_or_else(PoisonError::into_inner) =
                Some((self.clock.now(), items.clone()));
        }
        items
    }
}

/// Q6 `GET /feed?limit`: newest first, at most 100; it takes no cursor.
pub async fn get_feed(app: &App, req: Request) -> ApiResult {
    let (limit, cursor) = request::page(&req)?;
    if cursor.is_some() {
        return Err(ApiError::bad_request(
            ErrorCode::BadCursor,
            "the feed takes no cursor",
        ));
    }
    let page = newest(app, limit).await?;
    Reply::feed(&Feed {
        items: page[..limit.min(page.len())].to_vec(),
    })
}

/// At least the `limit` newest posts (all the feed holds when the cache is
/// on): the page an instance read within the time to live, or one Query.
pub(super) async fn newest(app: &App, limit: usize) -> Result<Arc<[PostSummary]>, ApiError> {
    Ok(match app.feed_cache.fresh() {
        Some(page) => page,
        // Cached, one Query of the whole feed whatever the limit: the next
        // request may ask for more.
        None if app.feed_cache.is_on() => app
            .feed_cache
            .keep(app.store.requests().feed(app.store.feed_capacity()).await?),
        None => app.store.requests().feed(limit).await?.into(),
    })
}
