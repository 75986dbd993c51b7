//! One handler per request. A handler parses and authorises its request, calls
//! the store once, and returns a [`Reply`] or an [`ApiError`]; [`respond`] turns
//! either into the HTTP response.

pub mod comments;
mod error;
pub mod feed;
pub mod likes;
pub mod posts;
mod request;
pub mod users;

use lambda_http::{Body, Response, http::StatusCode};
use serde::Serialize;

pub use error::ApiError;

use crate::store::Store;

/// What every handler shares for the life of the process.
#[derive(Debug)]
pub struct App {
    pub store: Store,
    /// Honour the `X-User-Id` header as the caller's identity. For local runs
    /// only, where no JWT authorizer exists: see [`crate::startup`].
    pub local_identity: bool,
}

pub type ApiResult = Result<Reply, ApiError>;

/// A successful response: a status and a JSON body.
#[derive(Debug)]
pub struct Reply {
    status: StatusCode,
    body: String,
}

impl Reply {
    pub fn ok(body: &impl Serialize) -> ApiResult {
        Self::with(StatusCode::OK, body)
    }

    pub fn created(body: &impl Serialize) -> ApiResult {
        Self::with(StatusCode::CREATED, body)
    }

    fn with(status: StatusCode, body: &impl Serialize) -> ApiResult {
        let body = serde_json::to_string(body)
            .map_err(|e| ApiError::Internal(format!("cannot encode response: {e}")))?;
        Ok(Self { status, body })
    }
}

/// The one place where results become HTTP responses.
pub fn respond(result: ApiResult) -> Response<Body> {
    let (status, body) = match result {
        Ok(reply) => (reply.status, reply.body),
        Err(err) => {
            err.log();
            (err.status(), err.body().to_string())
        }
    };
    let mut response = Response::new(Body::Text(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        lambda_http::http::header::CONTENT_TYPE,
        lambda_http::http::HeaderValue::from_static("application/json"),
    );
    response
}
