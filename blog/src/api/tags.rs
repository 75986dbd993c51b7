//! A tag's posts: `GET /tags/{tag}/posts` (its Atom feed is
//! [`super::atom::list_tag_posts_atom`]).

use lambda_http::{Request, RequestExt};

use super::{ApiError, ApiResult, App, ErrorCode, Reply, request};
use crate::text::Tag;

/// The tag a path names (400 `bad_id` when it is no tag; any case, as a
/// post's tags are written).
pub(super) fn path_tag(req: &Request) -> Result<Tag, ApiError> {
    let params = req.path_parameters();
    let raw = params
        .first("tag")
        .ok_or_else(|| ApiError::bad_request(ErrorCode::BadId, "missing path parameter tag"))?;
    Tag::parse(raw).map_err(|e| ApiError::bad_request(ErrorCode::BadId, e.problem))
}

/// `GET /tags/{tag}/posts?limit&cursor`: the posts with the tag, short
/// form, newest first; one Query a page. A tag no post has is an empty list.
pub async fn list_tag_posts(app: &App, req: Request) -> ApiResult {
    let tag = path_tag(&req)?;
    let (limit, cursor) = request::page(&req)?;
    Reply::read(
        &app.store
            .requests()
            .tag_posts(&tag, limit, cursor.as_deref())
            .await?,
    )
}
