//! Follows: follow and unfollow a user, a user's followers and whom they
//! follow.

use lambda_http::Request;

use super::{ApiResult, App, Reply, request};
use crate::{ids::UserId, store::follows::Follows};

/// `POST /users/{userId}/followers`: the caller follows the user; 201 with
/// the follow, or 200 with the one the caller had already (following twice
/// is one follow). 400 to follow yourself, 404 for no such user, 422
/// `following_limit` past 5,000 follows.
pub async fn follow_user(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let user = request::path_id(&req, "userId", UserId::parse)?;
    request::no_body(&req)?;
    match app.store.requests().follow(&caller, &user).await? {
        Follows::New(follow) => Reply::created(&follow),
        Follows::Already(follow) => Reply::ok(&follow),
    }
}

/// `DELETE /users/{userId}/followers`: the caller unfollows the user; 204
/// whether or not they followed them.
pub async fn unfollow_user(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let user = request::path_id(&req, "userId", UserId::parse)?;
    request::no_body(&req)?;
    app.store.requests().unfollow(&caller, &user).await?;
    Reply::no_content()
}

/// `GET /users/{userId}/followers?limit&cursor`: who follows the user,
/// newest first (404 for no such user).
pub async fn list_followers(app: &App, req: Request) -> ApiResult {
    let user = request::path_id(&req, "userId", UserId::parse)?;
    let (limit, cursor) = request::page(&req)?;
    let requests = app.store.requests();
    Reply::read(
        &requests
            .list_followers(&user, limit, cursor.as_deref())
            .await?,
    )
}

/// `GET /users/{userId}/following?limit&cursor`: whom the user follows,
/// newest first (404 for no such user).
pub async fn list_following(app: &App, req: Request) -> ApiResult {
    let user = request::path_id(&req, "userId", UserId::parse)?;
    let (limit, cursor) = request::page(&req)?;
    let requests = app.store.requests();
    Reply::read(
        &requests
            .list_following(&user, limit, cursor.as_deref())
            .await?,
    )
}
