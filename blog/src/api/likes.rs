//! C4 like a post, Q5 list a post's likes.

use lambda_http::Request;

use super::{ApiResult, App, Reply, request};
use crate::{ids::PostId, store::likes::Liked};

/// C4 `POST /posts/{postId}/likes`: 201 with the new like, or 200 with the one
/// the caller had already given.
pub async fn like_post(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let post = request::path_id(&req, "postId", PostId::parse)?;
    request::no_body(&req)?;
    match app.store.requests().like_post(&post, &caller).await? {
        Liked::New(like) => Reply::created(&like),
        Liked::Already(like) => Reply::ok(&like),
    }
}

/// C4 taken back, `DELETE /posts/{postId}/likes`: 204 whether or not the
/// caller had liked the post (taking back twice is taking back once).
pub async fn unlike_post(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let post = request::path_id(&req, "postId", PostId::parse)?;
    request::no_body(&req)?;
    app.store.requests().unlike_post(&post, &caller).await?;
    Reply::no_content()
}

/// Q5 `GET /posts/{postId}/likes`: newest first.
pub async fn list_likes(app: &App, req: Request) -> ApiResult {
    let post = request::path_id(&req, "postId", PostId::parse)?;
    let (limit, cursor) = request::page(&req)?;
    let requests = app.store.requests();
    // A post back to a draft keeps what it had: shown to no one (404).
    let page = requests.list_likes(&post, limit, cursor.as_deref()).await?;
    Reply::read(&page)
}
