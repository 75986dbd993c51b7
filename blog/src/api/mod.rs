//! One handler per request. A handler parses and authorises its request, calls
//! the store once, and returns a [`Reply`] or an [`ApiError`]; [`respond`] turns
//! either into the HTTP response.

pub mod atom;
pub mod blocks;
pub mod comments;
pub mod conditional;
mod error;
pub mod feed;
pub mod follows;
pub mod home;
pub mod likes;
pub mod notifications;
pub mod posts;
mod request;
pub mod tags;
pub mod users;

use lambda_http::{
    Body, Response,
    http::{HeaderValue, StatusCode, header},
};
use serde::Serialize;

pub use error::{ApiError, ErrorCode};
pub use feed::FeedCache;

use crate::{
    metrics::{self, Dimension, Metric},
    store::{Store, idempotency::Answer},
};

/// What every handler shares for the life of the process.
#[derive(Debug)]
pub struct App {
    pub store: Store,
    /// The feed this instance read last (used by `get-feed` only).
    pub feed_cache: FeedCache,
}

/// How long browsers and shared caches may keep a response: its
/// `Cache-Control`. docs/scaling.md has the arithmetic behind the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Writes and every error: never stored (a 404 for a post being created
    /// must not outlive it).
    NoStore,
    /// Public reads of one thing or one list: browsers ask again each time, a
    /// shared cache in front of the API (CloudFront) may answer for 5 s.
    Shared,
    /// The front page, the same for everyone: browsers and shared caches may
    /// keep it 5 s.
    Feed,
}

impl Freshness {
    pub fn cache_control(self) -> &'static str {
        match self {
            Self::NoStore => "no-store",
            Self::Shared => "public, max-age=0, s-maxage=5",
            Self::Feed => "public, max-age=5",
        }
    }
}

pub type ApiResult = Result<Reply, ApiError>;

/// A successful response: a status, a JSON body, and how long it may be
/// cached.
#[derive(Debug)]
pub struct Reply {
    status: StatusCode,
    body: String,
    freshness: Freshness,
    /// An `Idempotency-Key`'s first answer, given again
    /// (`Idempotent-Replayed: true`).
    replayed: bool,
    /// Its `ETag` ([`conditional`]), for a post or a profile.
    etag: Option<String>,
    /// JSON, but for the Atom feeds.
    content_type: &'static str,
}

/// What every answer but the Atom feeds' is.
pub const JSON: &str = "application/json";

/// What the Atom feeds are (RFC 4287 §7).
pub const ATOM: &str = "application/atom+xml";

/// The header that marks an answer given again for an `Idempotency-Key`.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

impl Reply {
    /// 200 to a write (a rename, an edit, a like given before).
    pub fn ok(body: &impl Serialize) -> ApiResult {
        Self::with(StatusCode::OK, body, Freshness::NoStore)
    }

    pub fn created(body: &impl Serialize) -> ApiResult {
        Self::with(StatusCode::CREATED, body, Freshness::NoStore)
    }

    /// 204 to a removal: no body.
    pub fn no_content() -> ApiResult {
        Ok(Self {
            status: StatusCode::NO_CONTENT,
            body: String::new(),
            freshness: Freshness::NoStore,
            replayed: false,
            etag: None,
            content_type: JSON,
        })
    }

    /// 201 to a creating write, or, for a retry of one with the same
    /// `Idempotency-Key`, the first request's status and body again.
    pub fn created_once<T: Serialize>(answer: Answer<T>) -> ApiResult {
        match answer {
            Answer::New(created) => Self::created(&created),
            Answer::Replayed(replay) => {
                let status = StatusCode::from_u16(replay.status)
                    .map_err(|e| ApiError::Internal(format!("recorded status: {e}")))?;
                let mut reply = Self::with(status, &replay.body, Freshness::NoStore)?;
                reply.replayed = true;
                Ok(reply)
            }
        }
    }

    /// 200 to a public read.
    pub fn read(body: &impl Serialize) -> ApiResult {
        Self::with(StatusCode::OK, body, Freshness::Shared)
    }

    /// 200 to a read of the feed.
    pub fn feed(body: &impl Serialize) -> ApiResult {
        Self::with(StatusCode::OK, body, Freshness::Feed)
    }

    fn with(status: StatusCode, body: &impl Serialize, freshness: Freshness) -> ApiResult {
        let body = serde_json::to_string(body)
            .map_err(|e| ApiError::Internal(format!("cannot encode response: {e}")))?;
        Ok(Self {
            status,
            body,
            freshness,
            replayed: false,
            etag: None,
            content_type: JSON,
        })
    }

    /// 200 with an Atom document, its `ETag` the document's hash.
    pub fn atom(document: String, freshness: Freshness) -> Self {
        Self {
            status: StatusCode::OK,
            etag: Some(conditional::document_tag(&document)),
            body: document,
            freshness,
            replayed: false,
            content_type: ATOM,
        }
    }

    /// The answer with its `ETag`: the revision it shows and its body
    /// ([`conditional::entity_tag`]).
    pub fn tagged(mut self, revision: crate::revision::Revision) -> Self {
        self.etag = Some(conditional::entity_tag(revision, &self.body));
        self
    }

    /// A tagged read, or 304 with no body if the request's `If-None-Match`
    /// names its tag (the same `ETag` and caching headers).
    pub fn unless_none_match(mut self, req: &lambda_http::Request) -> ApiResult {
        if let Some(etag) = &self.etag
            && conditional::none_match_fails(req, etag)?
        {
            self.status = StatusCode::NOT_MODIFIED;
            self.body.clear();
        }
        Ok(self)
    }
}

/// The one place where results become HTTP responses. `request_id` is the
/// invocation's id, which every log line of the invocation carries: an error
/// body names it, so that a caller's report leads to the logs.
pub fn respond(result: ApiResult, request_id: &str) -> Response<Body> {
    let (status, body, freshness, replayed, etag, content_type) = match result {
        Ok(reply) => {
            if reply.status == StatusCode::CREATED && !reply.replayed {
                metrics::emit(&[], &[(Metric::Created, 1.0)]);
            }
            (
                reply.status,
                reply.body,
                reply.freshness,
                reply.replayed,
                reply.etag,
                reply.content_type,
            )
        }
        Err(err) => {
            err.log();
            if let ApiError::Unavailable { cause, .. } = &err {
                metrics::emit(&[(Dimension::Cause, cause)], &[(Metric::Unavailable, 1.0)]);
            }
            (
                err.status(),
                err.body(request_id).to_string(),
                Freshness::NoStore,
                false,
                None,
                JSON,
            )
        }
    };
    let empty = body.is_empty();
    let mut response = Response::new(if empty { Body::Empty } else { Body::Text(body) });
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if !empty {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(freshness.cache_control()),
    );
    if replayed {
        headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    if let Some(etag) = etag.and_then(|tag| HeaderValue::from_str(&tag).ok()) {
        headers.insert(header::ETAG, etag);
    }
    response
}
