//! The caller's notifications: likes and comments of their posts, mentions
//! of them, new followers ([`crate::store::notifications`]).

use lambda_http::Request;
use serde::Deserialize;

use super::{ApiError, ApiResult, App, ErrorCode, Reply, request};
use crate::store::notifications::MAX_PAGE;
use crate::timestamp;

/// `GET /notifications?limit&cursor` (a token required): the caller's
/// notifications, newest first (a group by its newest activity), with how
/// many are unread (up to 100) and until when they have read them.
pub async fn list_notifications(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let (limit, cursor) = request::page_within(&req, MAX_PAGE, request::DEFAULT_LIMIT)?;
    // The caller's own: never stored by a shared cache.
    Reply::ok(
        &app.store
            .requests()
            .notifications(&caller, limit, cursor.as_deref())
            .await?,
    )
}

/// The body of `POST /notifications/seen`: until when (RFC 3339; now when
/// absent). Kept as JSON until checked: an explicit `null` is not a time
/// (400), where an absent field is now.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Seen {
    #[serde(default, deserialize_with = "present")]
    seen_at: Option<serde_json::Value>,
}

/// A field that is there, `null` included (serde reads `null` as absent for
/// an `Option`; absent stays `None` by `default`).
fn present<'de, D: serde::Deserializer<'de>>(
    field: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(field).map(Some)
}

/// `POST /notifications/seen` (a token required): the caller has read their
/// notifications up to `seenAt` (now when absent; a time in the future is
/// now). Never moved back: 200 with the `seenAt` held, which an earlier
/// time leaves as it was.
pub async fn mark_notifications_seen(app: &App, req: Request) -> ApiResult {
    let caller = request::caller(&req)?;
    let seen: Seen = if request::no_body(&req).is_ok() {
        Seen::default()
    } else {
        request::json_body(&req)?
    };
    let now = time::OffsetDateTime::now_utc();
    let at = match seen.seen_at {
        None => now,
        Some(raw) => raw.as_str().and_then(timestamp::parse).ok_or_else(|| {
            ApiError::bad_request(ErrorCode::InvalidField, "seenAt must be an RFC 3339 time")
        })?,
    };
    let at = timestamp::format(at.min(now));
    let held = app.store.requests().mark_seen(&caller, &at).await?;
    Reply::ok(&serde_json::json!({ "seenAt": held }))
}
