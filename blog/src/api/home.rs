//! The caller's home: the posts of the people they follow.

use lambda_http::Request;

use super::{ApiResult, App, Reply, request};
use crate::store::home::MAX_PAGE;

/// `GET /home?limit&cursor` (a token required): the published posts of the
/// people the caller follows, newest first, in short form with their counts
/// and usernames as they are now. A page may hold fewer than `limit` (posts
/// taken back, authors unfollowed); `nextCursor` says whether more follow.
pub async fn home(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let (limit, cursor) = request::page_within(&req, MAX_PAGE, request::DEFAULT_LIMIT)?;
    // The caller's own: never stored by a shared cache.
    Reply::ok(
        &app.store
            .requests()
            .home(&caller, limit, cursor.as_deref())
            .await?,
    )
}
