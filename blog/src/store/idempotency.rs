//! Idempotency keys (request): a creating write (`POST /users`, `POST
//! /posts`, `POST /posts/{id}/comments`) sent with an `Idempotency-Key` puts
//! a record of its answer in the same transaction as what it creates
//! (`USER#<caller> / REQUEST#<key>`: one conditional put of a small item,
//! 2 WCU, with a TTL). A retry with the same key from the same caller finds
//! the record, its condition fails, and the first answer is given again:
//! nothing is created twice, whatever was lost on the way. The same key with
//! another request (another route, path or body) is refused (422); a key
//! whose first request is still committing when the retries run out, 409.
//!
//! The record holds the answer without the post's or comment's `content`
//! (up to 200 KB, which would bill the create twice over): a replay reads
//! it from the item. A record is kept [`KEPT`] (DynamoDB's TTL deletes it
//! some time after; until then an expired one is replaced, never replayed).
//! An erased account's records go with what it wrote, at the end of the
//! erasure's walk (`store::erasure`).

use crate::store::items::request_record::{Account, Created};
use crate::store::items::request_record::{RequestRecordItem, USER_VERSION};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::Requests;
use super::{
    StoreError, n, s,
    table::{Expr, Landed, Slot, Transaction, Write},
};
use crate::{ids::IdempotencyKey, keys, timestamp};

/// How long a key answers with its first request's answer.
pub const KEPT: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// A keyed request: its key and the digest of what it asks.
#[derive(Debug, Clone)]
pub struct Idempotency {
    key: IdempotencyKey,
    digest: String,
}

impl Idempotency {
    /// `key` for the request `route` (method and path, ids included) with
    /// the JSON `body`; two bodies that differ only in spacing or the order
    /// of their fields are the same request.
    pub fn new(key: IdempotencyKey, route: &str, body: &[u8]) -> Self {
        let canonical = serde_json::from_slice::<serde_json::Value>(body)
            .map(|value| value.to_string().into_bytes())
            .unwrap_or_else(|_| body.to_vec());
        let mut hasher = Sha256::new();
        hasher.update(route.as_bytes());
        hasher.update(b"\n");
        hasher.update(&canonical);
        let digest = hasher
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        Self { key, digest }
    }
}

/// The answer's fields a record leaves out, being up to 50,000 characters
/// and more: a replay reads them again from what was created (`content`,
/// then a post's `contentHtml`).
pub const LEFT_OUT: [&str; 2] = ["content", "contentHtml"];

/// A keyed request's answer: made now, or given again.
#[derive(Debug)]
pub enum Answer<T> {
    New(T),
    Replayed(Replay),
}

/// An answer given again: the first request's status and body.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub status: u16,
    pub body: serde_json::Value,
}

fn epoch_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Idempotency {
    /// Adds to `tx` the record of `caller`'s creating request, if it had a
    /// key ([`Idempotency::record`]), watched for another request under the
    /// same key holding it ([`Committing::Held`](super::table::Committing));
    /// its slot.
    pub(super) fn add_record(
        keyed: Option<&Self>,
        tx: &mut Transaction<'_>,
        writer: Account<'_>,
        response: &impl Serialize,
        created: Created,
    ) -> Result<Option<Slot>, StoreError> {
        let Some(keyed) = keyed else {
            return Ok(None);
        };
        let slot = tx.add(
            "request record",
            keyed.record(writer, 201, response, created)?,
        );
        tx.report_held(slot);
        Ok(Some(slot))
    }

    /// The record of `writer`'s request as answered `status` with
    /// `response` (its [`LEFT_OUT`] fields left out), kept [`KEPT`] from now.
    pub fn record_item(
        &self,
        writer: Account<'_>,
        status: u16,
        response: &impl Serialize,
        created: Created,
    ) -> Result<RequestRecordItem, StoreError> {
        let mut body = serde_json::to_value(response)
            .map_err(|e| StoreError::Internal(format!("cannot record the answer: {e}")))?;
        if let Some(fields) = body.as_object_mut() {
            for field in LEFT_OUT {
                fields.remove(field);
            }
        }
        Ok(RequestRecordItem {
            user_id: writer.user.clone(),
            key: self.key.clone(),
            request_digest: self.digest.clone(),
            status,
            response: body.to_string(),
            created,
            created_at: timestamp::now(),
            expires_at: epoch_seconds() + KEPT.as_secs(),
            user_version: writer.version,
        })
    }

    /// The transaction item that records `writer`'s request: a put if there
    /// is no live record of the key (none, an expired one, or an erased
    /// account's).
    fn record(
        &self,
        writer: Account<'_>,
        status: u16,
        response: &impl Serialize,
        created: Created,
    ) -> Result<Write, StoreError> {
        let record = self.record_item(writer, status, response, created)?;
        let mut free = Expr::item_absent()
            .or("#expires < :now")
            .or("#version < :first")
            .name("#expires", crate::keys::EXPIRES_AT)
            .name("#version", USER_VERSION)
            .value(":now", n(epoch_seconds()))
            .value(":first", n(writer.first_version));
        if writer.first_version > 1 {
            // A record kept from before records held their version: the
            // erased account's too.
            free = free.or("attribute_not_exists(#version)");
        }
        let landed = Landed::When(vec![
            ("requestDigest", s(&record.request_digest)),
            ("createdAt", s(&record.created_at)),
        ]);
        Ok(Write::put(&record, landed)?.when(free))
    }
}

impl Requests<'_> {
    /// The first answer to `caller`'s request made with `keyed`'s key,
    /// after the record's condition refused this one: the same request
    /// answers as the first did (its `content` read from what it created:
    /// 404 if that was deleted since); another request under the same key is
    /// [`StoreError::IdempotencyKeyReused`].
    pub(super) async fn replay(
        &self,
        caller: Account<'_>,
        keyed: &Idempotency,
    ) -> Result<Replay, StoreError> {
        let key = keys::request_record(caller.user, &keyed.key).item();
        let record = self.db.get_entity::<RequestRecordItem>(key, true).await?;
        // Expired and deleted between the refusal and this read: the first
        // request was made more than a day ago, and this one may be sent
        // again. An erased account's record (its erasure's fan-out deleting
        // it, or this request's condition having met another): the same.
        let record = record
            .filter(|record| !record.is_an_erased_accounts(caller.first_version))
            .ok_or_else(|| {
                StoreError::busy(
                    super::Busy::Conflict,
                    "the Idempotency-Key's record changed while it was read",
                )
            })?;
        if record.request_digest != keyed.digest {
            return Err(StoreError::IdempotencyKeyReused);
        }
        let mut body: serde_json::Value = serde_json::from_str(&record.response)
            .map_err(|e| StoreError::Internal(format!("unreadable request record: {e}")))?;
        let text = match &record.created {
            Created::User => None,
            Created::Post { post_id } => {
                let post = self.read_post(post_id, true).await?;
                let post = crate::model::Post::from(post.ok_or(StoreError::PostNotFound)?);
                Some((post.content, Some(post.content_html)))
            }
            Created::Comment {
                post_id,
                comment_id,
            } => {
                let comment = self.read_comment(post_id, comment_id).await?;
                Some((comment.ok_or(StoreError::CommentNotFound)?.content, None))
            }
        };
        if let (Some((content, html)), Some(fields)) = (text, body.as_object_mut()) {
            fields.insert(LEFT_OUT[0].to_owned(), content.into());
            if let Some(html) = html {
                fields.insert(LEFT_OUT[1].to_owned(), html.into());
            }
        }
        tracing::info!(
            status = record.status,
            "an idempotency key's first answer given again"
        );
        Ok(Replay {
            status: record.status,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_its_route_and_its_body_whatever_the_json_spelling() {
        let key = || IdempotencyKey::parse("k-1").expect("key");
        let digest = |route, body: &str| Idempotency::new(key(), route, body.as_bytes()).digest;
        let first = digest("POST /posts", r#"{"title":"t","content":"c"}"#);
        assert_eq!(
            first,
            digest("POST /posts", r#"{ "content": "c", "title": "t" }"#)
        );
        assert_ne!(
            first,
            digest("POST /posts", r#"{"title":"t","content":"d"}"#)
        );
        assert_ne!(
            first,
            digest("POST /users", r#"{"title":"t","content":"c"}"#)
        );
        assert_eq!(first.len(), 64);
    }
}
