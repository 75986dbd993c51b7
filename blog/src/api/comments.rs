//! C3 comment on a post, Q4 list a post's comments.

use lambda_http::Request;
use serde::Deserialize;

use super::{ApiResult, App, Reply, request};
use crate::{
    ids::{CommentId, PostId},
    text,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewComment {
    content: String,
}

/// C3 `POST /posts/{postId}/comments`: needs a profile (403) and the post (404).
pub async fn create_comment(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let post = request::path_id(&req, "postId", PostId::parse)?;
    let body: NewComment = request::json_body(&req)?;
    let content = text::comment_content(&body.content)?;
    let keyed = request::idempotency(&req)?;
    let requests = app.store.requests();
    let answer = requests.create_comment_keyed(&post, &caller, content, keyed.as_ref());
    Reply::created_once(answer.await?)
}

/// C3 taken back, `DELETE /posts/{postId}/comments/{commentId}`: by the
/// comment's author or the post's author; 204, or 404 when there is no such
/// comment.
pub async fn delete_comment(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let post = request::path_id(&req, "postId", PostId::parse)?;
    let comment = request::path_id(&req, "commentId", CommentId::parse)?;
    request::no_body(&req)?;
    app.store
        .requests()
        .delete_comment(&post, &comment, &caller)
        .await?;
    Reply::no_content()
}

/// Q4 `GET /posts/{postId}/comments`: oldest first, without the comments
/// of users the post's author blocks.
pub async fn list_comments(app: &App, req: Request) -> ApiResult {
    let post = request::path_id(&req, "postId", PostId::parse)?;
    let (limit, cursor) = request::page(&req)?;
    // A post back to a draft keeps what it had: shown to no one (404); the
    // comments of users its author blocks are left out.
    let requests = app.store.requests();
    let page = requests
        .list_comments(&post, limit, cursor.as_deref())
        .await?;
    Reply::read(&page)
}
