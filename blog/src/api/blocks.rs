//! Blocks: the caller blocks and unblocks a user, and reads whom they block.

use lambda_http::Request;

use super::{ApiResult, App, Reply, request};
use crate::{ids::UserId, store::blocks::Blocks};

/// `PUT /blocks/{userId}`: the caller blocks the user; 201 with the block,
/// or 200 with the one the caller had already (blocking twice is one block).
/// Either way the follows between the two, both ways, are taken back. 400
/// to block yourself, 404 for no such user, 422 `block_limit` past 1,000
/// blocks.
pub async fn block_user(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let user = request::path_id(&req, "userId", UserId::parse)?;
    request::no_body(&req)?;
    match app.store.requests().block(&caller, &user).await? {
        Blocks::New(block) => Reply::created(&block),
        Blocks::Already(block) => Reply::ok(&block),
    }
}

/// `DELETE /blocks/{userId}`: the caller unblocks the user; 204 whether or
/// not they blocked them.
pub async fn unblock_user(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let user = request::path_id(&req, "userId", UserId::parse)?;
    request::no_body(&req)?;
    app.store.requests().unblock(&caller, &user).await?;
    Reply::no_content()
}

/// `GET /blocks?limit&cursor`: whom the caller blocks, newest first (their
/// own list: no one else's can be asked for). 404 without a profile.
pub async fn list_blocks(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let (limit, cursor) = request::page(&req)?;
    let requests = app.store.requests();
    Reply::read(
        &requests
            .list_blocks(&caller, limit, cursor.as_deref())
            .await?,
    )
}
