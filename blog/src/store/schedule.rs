//! Scheduled publishing (the `publish-scheduled` function, which an
//! EventBridge schedule runs every minute: template.yaml; locally
//! `blog-admin scheduler` runs it the same way).
//!
//! A post written or edited with `status: scheduled` gets a marker in the
//! `SCHEDULED` partition, `<publishAt>#<postId>`, in the same transaction.
//! Each run reads the markers due within [`LOOKAHEAD`] (one Query, in time
//! order) and publishes each post at its time, waiting for it if it is a
//! few seconds off: a post is never out before its `publishAt`, and out
//! within a minute of it (at its time when a run falls in the 30 s before
//! it; else at the next run). Publishing is one UpdateItem
//! of the post, conditional on it still being scheduled for that time (an
//! edit or a deletion since wins), then the marker is deleted; a marker its
//! post no longer names is deleted too. Each step is idempotent, so a run
//! that dies is simply done again by the next.

use serde::{Deserialize, Serialize};

use super::{
    FanOut, ItemType, StoreError, n,
    posts::{PostItem, STATUS, Unpublished},
    s,
    table::{Deleted, Expr, Landed, Query, Write},
};
use crate::{
    ids::PostId,
    keys::{self, Entity, GSI1SK, Key, SCHEDULED_PK},
    store::rename::Deadline,
    timestamp,
};

/// How far ahead a run looks: the markers due by then are published at
/// their time, the run waiting for them. Under the schedule's minute.
pub const LOOKAHEAD: std::time::Duration = std::time::Duration::from_secs(30);

/// How many markers one run reads at most (the next run takes the rest).
const PER_RUN: usize = 100;

/// A scheduled post's marker: when, and which post.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledItem {
    pub post_id: PostId,
    pub publish_at: String,
}

impl ScheduledItem {
    pub fn new(post: PostId, at: &str) -> Self {
        Self {
            post_id: post,
            publish_at: at.to_owned(),
        }
    }
}

impl Entity for ScheduledItem {
    const TYPE: ItemType = ItemType::Scheduled;
    /// A marker for a post and a time made for this request.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Key::new(
            SCHEDULED_PK.to_owned(),
            keys::scheduled_sk(&self.publish_at, &self.post_id),
        )
    }
}

/// What a run did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Published {
    pub published: usize,
    /// Markers whose post was edited, deleted or published otherwise since.
    pub dropped: usize,
}

impl FanOut<'_> {
    /// One run of the scheduler: publishes every post due by now and, at
    /// their time, those due within [`LOOKAHEAD`]; stops near `deadline`.
    pub async fn publish_due(&self, deadline: &Deadline) -> Result<Published, StoreError> {
        let horizon = timestamp::format(time::OffsetDateTime::now_utc() + LOOKAHEAD);
        let due = Query::partition(SCHEDULED_PK.to_owned())
            .between("0".to_owned(), format!("{horizon}#~"))
            .consistent();
        let markers: Vec<ScheduledItem> = super::from_items(
            self.db
                .query_up_to("scheduled posts", &due, None, PER_RUN)
                .await?,
        )?;
        let mut done = Published::default();
        tracing::info!(due = markers.len(), %horizon, near = deadline.near(), "scheduled posts read");
        for marker in markers {
            // What is due now is published whatever the deadline (a few
            // writes); waiting for what is due later only with time left.
            if let Some(wait) = until(&marker.publish_at) {
                if deadline.near() {
                    break;
                }
                tokio::time::sleep(wait).await;
            }
            if self.publish(&marker).await? {
                done.published += 1;
            } else {
                done.dropped += 1;
            }
            let gone = Write::delete(marker.key().item(), Deleted::IfGone);
            self.db.write("drop schedule marker", &gone).await?;
        }
        Ok(done)
    }

    /// Publishes the post `marker` names, if it is still scheduled for that
    /// time: listed from its `publishAt`, in every list (the fan-out puts
    /// it there as it does any post published). `false` when it is not.
    async fn publish(&self, marker: &ScheduledItem) -> Result<bool, StoreError> {
        let Some(post) = self.post_item(&marker.post_id).await? else {
            return Ok(false);
        };
        let mut published = post.clone();
        published.status = None;
        published.publish_at = None;
        published.published_at = Some(marker.publish_at.clone());
        let Some(listed) = published.listed_id() else {
            return Ok(false);
        };
        let scheduled = serde_dynamo::to_attribute_value(Unpublished::Scheduled)
            .map_err(|e| StoreError::Internal(format!("cannot encode a status: {e}")))?;
        let still = Expr::item_exists()
            .and("#status = :scheduled AND publishAt = :at")
            .name("#status", STATUS)
            .value(":scheduled", scheduled)
            .value(":at", s(&marker.publish_at));
        let change = Expr::new(
            "SET publishedAt = :at, #gsi1sk = :gsi1sk, version = version + :one \
             REMOVE #status, publishAt",
        )
        .name("#gsi1sk", GSI1SK)
        .value(":gsi1sk", s(keys::user_post_sk(&listed)))
        .value(":one", n(1));
        let landed = Landed::When(vec![("publishedAt", s(&marker.publish_at))]);
        let write = Write::update(PostItem::key(&marker.post_id), change, landed).when(still);
        Ok(self
            .db
            .write("publish scheduled post", &write)
            .await?
            .done())
    }
}

/// How long until `at`, if it is still ahead.
fn until(at: &str) -> Option<std::time::Duration> {
    let at = timestamp::parse(at)?;
    let left = at - time::OffsetDateTime::now_utc();
    std::time::Duration::try_from(left)
        .ok()
        .filter(|d| !d.is_zero())
}

#[cfg(feature = "admin")]
impl super::Admin<'_> {
    /// Whether `post` has its marker for `at` (the audit).
    pub(crate) async fn is_scheduled(&self, post: &PostId, at: &str) -> Result<bool, StoreError> {
        let marker = ScheduledItem::new(*post, at).key().item();
        Ok(self.db.get(marker, true).await?.is_some())
    }

    /// The audit's repair of a scheduled post without its marker: the marker
    /// put again (if the post is still scheduled then, it is published at
    /// that time or, if past, at the next run).
    pub(crate) async fn reschedule(&self, post: &PostId, at: &str) -> Result<bool, StoreError> {
        let put = Write::put(&ScheduledItem::new(*post, at), Landed::Untold)?;
        Ok(self.db.write("reschedule", &put).await?.done())
    }
}
