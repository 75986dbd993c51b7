//! C1 create / edit a user, Q1 get a user, a user's export of everything
//! they wrote, and the erasure of their account.

use lambda_http::{Request, RequestExt};
use serde::Deserialize;

use super::{ApiError, ApiResult, App, ErrorCode, Reply, conditional, request};
use crate::{ids::UserId, model::User, revision::Revision, text};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UsernameBody {
    username: String,
}

/// C1 `POST /users`: creates the caller's own profile (409 the second time).
pub async fn create_user(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let body: UsernameBody = request::json_body(&req)?;
    let username = text::Username::parse(&body.username)?;
    let keyed = request::idempotency(&req)?;
    let requests = app.store.requests();
    let answer = requests.create_user_keyed(&caller, &username, keyed.as_ref());
    Reply::created_once(answer.await?)
}

/// C1 `PUT /users/{userId}`: renames the caller (403 for anyone else);
/// with `If-Match`, only if the profile is still the revision it names
/// (412).
pub async fn update_user(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let user = request::path_id(&req, "userId", UserId::parse)?;
    if user != caller {
        return Err(ApiError::Forbidden("you can only change your own profile"));
    }
    let body: UsernameBody = request::json_body(&req)?;
    let username = text::Username::parse(&body.username)?;
    let expected = conditional::if_match(&req)?;
    let requests = app.store.requests();
    let renamed = requests.rename_user(&user, &username, &expected).await?;
    Ok(Reply::ok(&renamed)?.tagged(revision(&renamed)))
}

/// The revision a profile's answer shows ([`crate::revision`]).
fn revision(user: &User) -> Revision {
    Revision::of_profile(user.username.as_str(), &user.updated_at)
}

/// `DELETE /users/{userId}`: erases the caller's account (403 for anyone
/// else; 404 without a profile; 204 again for an account already erased).
/// The profile and the username go at once; everything the user wrote
/// follows in the fan-out (`store::erasure`).
pub async fn delete_user(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let user = request::path_id(&req, "userId", UserId::parse)?;
    if user != caller {
        return Err(ApiError::Forbidden("you can only delete your own account"));
    }
    request::no_body(&req)?;
    app.store.requests().erase_user(&user).await?;
    Reply::no_content()
}

/// Q1 by name, `GET /users?username=<name>`: the profile whose username is
/// `name` ignoring case.
pub async fn find_user(app: &App, req: Request) -> ApiResult {
    let raw = request::required_query(&req, "username", ErrorCode::MissingUsername)?;
    let username = text::Username::parse(&raw)?;
    match app.store.requests().find_user(&username).await? {
        Some(found) => Reply::read(&found),
        None => Err(ApiError::NotFound("no user has that username")),
    }
}

/// Q1 `GET /users/{userId}`.
pub async fn get_user(app: &App, req: Request) -> ApiResult {
    let user = request::path_id(&req, "userId", UserId::parse)?;
    match app.store.requests().get_user(&user).await? {
        Some(found) => Reply::read(&found)?
            .tagged(revision(&found))
            .unless_none_match(&req),
        None => Err(ApiError::NotFound("no such user")),
    }
}

/// The most a page of an export holds: a post comes with its full content
/// (up to 50,000 characters, at most 200 KB of UTF-8), and 25 such posts
/// (about 5 MB) stay inside Lambda's 6 MB response.
pub const EXPORT_MAX_LIMIT: usize = 25;

/// `GET /users/{userId}/export`: the caller's own profile and everything they
/// wrote, a page at a time (`limit` 1–25, default 10; `cursor`). Only the
/// user themself (403 for anyone else; 404 without a profile).
pub async fn export_user(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let user = request::path_id(&req, "userId", UserId::parse)?;
    if user != caller {
        return Err(ApiError::Forbidden("you can only export your own data"));
    }
    let (limit, cursor) = request::page(&req)?;
    let limit = match req.query_string_parameters().first("limit") {
        None => EXPORT_DEFAULT_LIMIT,
        Some(_) if limit <= EXPORT_MAX_LIMIT => limit,
        Some(_) => {
            return Err(ApiError::bad_request(
                ErrorCode::BadLimit,
                format!("an export's limit is an integer from 1 to {EXPORT_MAX_LIMIT}"),
            ));
        }
    };
    match app
        .store
        .requests()
        .export_page(&user, limit, cursor.as_deref())
        .await?
    {
        Some(page) => Reply::ok(&page),
        None => Err(ApiError::NotFound("no such user")),
    }
}

const EXPORT_DEFAULT_LIMIT: usize = 10;
