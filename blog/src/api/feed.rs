//! Q6 the feed: the newest posts in short form.

use lambda_http::Request;

use super::{ApiError, ApiResult, App, Reply, request};
use crate::model::Feed;

/// Q6 `GET /feed?limit`: newest first, at most 100; it takes no cursor.
pub async fn get_feed(app: &App, req: Request) -> ApiResult {
    let (limit, cursor) = request::page(&req)?;
    if cursor.is_some() {
        return Err(ApiError::bad_request(
            "bad_cursor",
            "the feed takes no cursor",
        ));
    }
    Reply::ok(&Feed {
        items: app.store.feed(limit).await?,
    })
}
