//! Scheduled publishing (the `publish-scheduled` function, which an
//! EventBridge schedule runs every minute: template.yaml; locally
//! `blog-admin scheduler` runs it the same way).
//!
//! A post written or edited with `status: scheduled` gets a marker in the
//! `SCHEDULED` partition, `<publishAt>#<postId>`, in the same transaction.
//! Each run reads the markers due within [`LOOKAHEAD`] (Query pages, in
//! time order) and publishes each post at its time, waiting for it if it
//! is a few seconds off: a post is never out before its `publishAt`, and
//! out within a minute of it (at its time when a run falls in the 30 s
//! before it; else at the next run, and then listed at the time it is
//! out). Publishing is one UpdateItem of the post, conditional on it still
//! being scheduled for that time (an edit or a deletion since wins), then
//! the marker is deleted. An edit that moves, publishes or ends a schedule
//! deletes the old marker in its own transaction, and a deleted post's
//! marker goes with the fan-out of its REMOVE, so a run reads only live
//! markers; one a crash left behind is deleted when its time comes. Each
//! step is idempotent, so a run that dies is simply done again by the
//! next.

use crate::store::items::schedule::ScheduledItem;
use futures::StreamExt;
use serde::Serialize;

use super::{
    FanOut, StoreError,
    items::post::{PostItem, STATUS, Unpublished},
    n, s,
    table::{Deleted, Expr, Landed, Query, Write},
};
use crate::{
    ids::PostId,
    keys::{self, Entity, GSI1SK, SCHEDULED_PK},
    store::deadline::Deadline,
    timestamp,
};

/// How far ahead a run looks: the markers due by then are published at
/// their time, the run waiting for them. Under the schedule's minute.
pub const LOOKAHEAD: std::time::Duration = std::time::Duration::from_secs(30);

/// How many markers a run reads a page (it reads page after page of what
/// is due, until its deadline).
const PAGE: i32 = 100;

/// How many posts a run publishes at once.
const AT_ONCE: usize = 16;

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
    /// their time, those due within [`LOOKAHEAD`], `AT_ONCE` at a time,
    /// page after page of markers in time order, until `deadline` is near
    /// (what is left is the next run's). Only live markers are read: an
    /// edit that moves or ends a schedule, and a post's deletion, take its
    /// marker out, so no author's edits make a run's work grow.
    pub async fn publish_due(&self, deadline: &Deadline) -> Result<Published, StoreError> {
        let horizon = timestamp::format(time::OffsetDateTime::now_utc() + LOOKAHEAD);
        let due = Query::partition(SCHEDULED_PK.to_owned())
            .between("0".to_owned(), format!("{horizon}#~"))
            .consistent();
        let mut done = Published::default();
        let mut start = None;
        loop {
            let page = self
                .db
                .query_page("scheduled posts", &due, start, Some(PAGE))
                .await?;
            let markers: Vec<ScheduledItem> = super::from_items(page.items)?;
            tracing::info!(due = markers.len(), %horizon, near = deadline.near(), "scheduled posts read");
            let runs = futures::stream::iter(markers)
                .map(|marker| self.publish_marker(marker, deadline))
                .buffer_unordered(AT_ONCE)
                .collect::<Vec<_>>()
                .await;
            for run in runs {
                match run? {
                    Some(true) => done.published += 1,
                    Some(false) => done.dropped += 1,
                    None => {}
                }
            }
            start = page.next;
            if start.is_none() || deadline.near() {
                return Ok(done);
            }
        }
    }

    /// One marker's post published at its time (waited for when it is a
    /// few seconds ahead, only with time left: `None`, the next run's),
    /// then the marker out. `Some(false)`: its post was no longer scheduled
    /// for that time.
    async fn publish_marker(
        &self,
        marker: ScheduledItem,
        deadline: &Deadline,
    ) -> Result<Option<bool>, StoreError> {
        // What is due now is published whatever the deadline (a few
        // writes); waiting for what is due later only with time left.
        let on_time = match until(&marker.publish_at) {
            Some(_) if deadline.near() => return Ok(None),
            Some(wait) => {
                tokio::time::sleep(wait).await;
                true
            }
            None => false,
        };
        let published = self.publish(&marker, on_time).await?;
        let gone = Write::delete(marker.key().item(), Deleted::IfGone);
        self.db.write("drop schedule marker", &gone).await?;
        Ok(Some(published))
    }

    /// Publishes the post `marker` names, if it is still scheduled for that
    /// time: listed from when it is published (its `publishAt` when the run
    /// waited for that time, `on_time`; the time it is out when a run found
    /// it due already), in every list (the fan-out puts it there as it
    /// does any post published). `false` when it is not.
    async fn publish(&self, marker: &ScheduledItem, on_time: bool) -> Result<bool, StoreError> {
        let Some(post) = self.post_item(&marker.post_id).await? else {
            return Ok(false);
        };
        // Never before its time; when late, at the time it is out.
        let now = timestamp::now();
        let at = if on_time || now <= marker.publish_at {
            marker.publish_at.clone()
        } else {
            now
        };
        let mut published = post.clone();
        published.status = None;
        published.publish_at = None;
        published.published_at = Some(at.clone());
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
            "SET publishedAt = :published, #gsi1sk = :gsi1sk, version = version + :one \
             REMOVE #status, publishAt",
        )
        .name("#gsi1sk", GSI1SK)
        .value(":published", s(&at))
        .value(":gsi1sk", s(keys::user_post_sk(&listed)))
        .value(":one", n(1));
        let landed = Landed::When(vec![("publishedAt", s(&at))]);
        let write = Write::update(PostItem::key(&marker.post_id), change, landed).when(still);
        Ok(self
            .db
            .write("publish scheduled post", &write)
            .await?
            .done())
    }

    /// A deleted post's marker out (the fan-out of its REMOVE: a deletion,
    /// an erasure's), so that no run reads it. `false` when it was gone.
    pub async fn unschedule(&self, post: &PostId, at: &str) -> Result<bool, StoreError> {
        let gone = Write::delete(ScheduledItem::new(*post, at).key().item(), Deleted::IfGone);
        Ok(self.db.write("drop schedule marker", &gone).await?.done())
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
        Ok(self
            .db
            .get("a schedule marker", marker, true)
            .await?
            .is_some())
    }

    /// The audit's repair of a scheduled post without its marker: the marker
    /// put again (if the post is still scheduled then, it is published at
    /// that time or, if past, at the next run).
    pub(crate) async fn reschedule(&self, post: &PostId, at: &str) -> Result<bool, StoreError> {
        let put = Write::put(&ScheduledItem::new(*post, at), Landed::Untold)?;
        Ok(self.db.write("reschedule", &put).await?.done())
    }
}
