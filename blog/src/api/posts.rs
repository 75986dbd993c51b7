//! C2 create / edit a post, Q2 get a post, Q3 list a user's posts.

use lambda_http::Request;
use serde::Deserialize;

use super::{ApiError, ApiResult, App, ErrorCode, Reply, conditional, request};
use crate::{
    ids::{PostId, UserId},
    model::{Post, Status},
    revision::Revision,
    store::posts::{NewPost, PostEdit},
    text, timestamp,
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewPostBody {
    title: String,
    content: String,
    #[serde(default)]
    tags: Vec<String>,
    /// `published` (the default), `draft`, or `scheduled` (with
    /// `publishAt`).
    #[serde(default = "published")]
    status: Status,
    publish_at: Option<String>,
}

fn published() -> Status {
    Status::Published
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EditedPost {
    title: Option<String>,
    content: Option<String>,
    tags: Option<Vec<String>>,
    status: Option<Status>,
    publish_at: Option<String>,
}

/// C2 `POST /posts`: needs a profile (403 without).
pub async fn create_post(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let body: NewPostBody = request::json_body(&req)?;
    let tags = text::tags(&body.tags)?;
    let publish_at = publish_at(Some(body.status), body.publish_at.as_deref())?;
    let new = NewPost {
        title: text::title(&body.title)?,
        content: text::post_content(&body.content)?,
        tags: &tags,
        status: body.status,
        publish_at: publish_at.as_deref(),
    };
    let keyed = request::idempotency(&req)?;
    let requests = app.store.requests();
    let answer = requests.create_post_keyed(&caller, new, keyed.as_ref());
    Reply::created_once(answer.await?)
}

/// C2 `PUT /posts/{postId}`: only its author (403), at least one field;
/// with `If-Match`, only if the post is still the revision it names (412).
pub async fn update_post(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let post = request::path_id(&req, "postId", PostId::parse)?;
    let body: EditedPost = request::json_body(&req)?;
    let tags = body.tags.as_deref().map(text::tags).transpose()?;
    let publish_at = publish_at(body.status, body.publish_at.as_deref())?;
    let edit = PostEdit {
        status: body.status,
        publish_at: publish_at.as_deref(),
        tags: tags.as_deref(),
        title: body.title.as_deref().map(text::title).transpose()?,
        content: body
            .content
            .as_deref()
            .map(text::post_content)
            .transpose()?,
    };
    if edit.title.is_none()
        && edit.content.is_none()
        && edit.tags.is_none()
        && edit.status.is_none()
    {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidField,
            "give a title, a content, tags, a status, or any of them",
        ));
    }
    let expected = conditional::if_match(&req)?;
    let requests = app.store.requests();
    let edited = requests.edit_post(&post, &caller, edit, &expected).await?;
    Ok(Reply::ok(&edited)?.tagged(revision(&edited)))
}

/// How far ahead a post may be scheduled.
const SCHEDULE_AHEAD_DAYS: i64 = 366;

/// A scheduled post's `publishAt`, as stored (RFC 3339 UTC, milliseconds):
/// with `status: scheduled` only, and then required; later than now and
/// within [`SCHEDULE_AHEAD_DAYS`]. Anything else is a 400 naming it.
fn publish_at(status: Option<Status>, raw: Option<&str>) -> Result<Option<String>, ApiError> {
    let invalid = |problem: &str| {
        ApiError::bad_request(ErrorCode::InvalidField, format!("publishAt {problem}"))
    };
    match (status, raw) {
        (Some(Status::Scheduled), None) => Err(invalid("is required with status scheduled")),
        (_, None) => Ok(None),
        (Some(Status::Scheduled), Some(raw)) => {
            let at = timestamp::parse(raw).ok_or_else(|| invalid("must be an RFC 3339 time"))?;
            let now = time::OffsetDateTime::now_utc();
            if at <= now {
                return Err(invalid("must be in the future"));
            }
            if at > now + time::Duration::days(SCHEDULE_AHEAD_DAYS) {
                return Err(invalid("must be within a year"));
            }
            Ok(Some(timestamp::format(at)))
        }
        (_, Some(_)) => Err(invalid("goes with status scheduled only")),
    }
}

/// The revision a post's answer shows ([`crate::revision`]).
fn revision(post: &Post) -> Revision {
    Revision::of_post(&post.title, &post.updated_at, post.published_at.as_deref())
}

/// C2 taken back, `DELETE /posts/{postId}`: by its author only; 204, or
/// 404 when there is no such post. The post and its content go now; its
/// comments, likes and feed entry follow through the fan-out.
pub async fn delete_post(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let post = request::path_id(&req, "postId", PostId::parse)?;
    request::no_body(&req)?;
    let expected = conditional::if_match(&req)?;
    app.store
        .requests()
        .delete_post(&post, &caller, &expected)
        .await?;
    Reply::no_content()
}

/// Q2 `GET /posts/{postId}`.
pub async fn get_post(app: &App, req: Request) -> ApiResult {
    let post = request::path_id(&req, "postId", PostId::parse)?;
    match app.store.requests().get_post(&post).await? {
        Some(found) => Reply::read(&found)?
            .tagged(revision(&found))
            .unless_none_match(&req),
        None => Err(ApiError::NotFound("no such post")),
    }
}

/// Q3 `GET /users/{userId}/posts`: short forms, newest first. A user with no
/// posts, or no profile, has an empty list.
pub async fn list_user_posts(app: &App, req: Request) -> ApiResult {
    let user = request::path_id(&req, "userId", UserId::parse)?;
    let (limit, cursor) = request::page(&req)?;
    Reply::read(
        &app.store
            .requests()
            .list_user_posts(&user, limit, cursor.as_deref())
            .await?,
    )
}

/// `GET /users/{userId}/drafts?limit&cursor`: the caller's own drafts,
/// whole, newest first (403 for anyone else's). `limit` 1–25 (default 10);
/// a page of very long drafts stops early, its cursor going on.
pub async fn list_drafts(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let user = request::path_id(&req, "userId", UserId::parse)?;
    if caller != user {
        return Err(ApiError::Forbidden("only the author lists their drafts"));
    }
    let (limit, cursor) = request::page_within(&req, DRAFTS_MAX_LIMIT, DRAFTS_DEFAULT_LIMIT)?;
    // The caller's own: never stored by a cache (as the export).
    Reply::ok(
        &app.store
            .requests()
            .list_drafts(&caller, limit, cursor.as_deref())
            .await?,
    )
}

/// A drafts page holds whole posts: fewer than a list of short forms.
const DRAFTS_MAX_LIMIT: usize = 25;
const DRAFTS_DEFAULT_LIMIT: usize = 10;
