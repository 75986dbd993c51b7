//! The rename fan-out: a user's new username onto everything they wrote, found
//! page by page under their GSI1 partition (`USER#u`), however much that is.
//!
//! A rename of 100,000 items does not fit one invocation, so the walk keeps
//! its place in the user's own partition (`USER#u / RENAME`, one small write
//! per page of 100 items) and stops [`DEADLINE_MARGIN`](super::deadline::DEADLINE_MARGIN) before the
//! invocation's deadline; the fan-out then reports that record as failed, and
//! Lambda's retry (from the lowest failed record) resumes where the walk
//! stopped. A newer rename of the same user supersedes an older one's walk,
//! which stops (the newer record, later in the same shard, walks everything).
//! A write that stays throttled or held through its round's attempts is
//! tried again with fewer writes in flight, so a throttled walk slows down
//! instead of failing; its rounds share the one retry budget of 8 sends.

use crate::store::items::rename::{Phase, RenameProgress};
use std::time::Duration;

use futures::StreamExt;

use super::FanOut;
use super::{
    Item, Store, StoreError,
    deadline::Deadline,
    n, s,
    table::{Backoff, Expr, Landed, Query, Write},
};
use crate::{ids::UserId, keys, store::items::user::UserItem, timestamp};

/// How many of a user's items one page of the walk reads.
const RENAME_PAGE: i32 = 100;
/// How many username copies the walk writes at once, at most.
const RENAME_CONCURRENCY: usize = 16;
/// How many rounds a page sends the copies that stayed busy in, with half as
/// many in flight each round, before the record fails (and is delivered
/// again).
const BUSY_ROUNDS: u32 = 4;
/// How often one copy is sent in one round. A copy that stays busy is sent
/// `BUSY_ROUNDS × ROUND_ATTEMPTS` times in all, no more than any other call:
/// the pacing shares the one retry budget, it does not stack on it.
const ROUND_ATTEMPTS: u32 = 2;
const _: () = assert!(BUSY_ROUNDS * ROUND_ATTEMPTS <= Backoff::ATTEMPTS);
/// What a rename's walk did in this invocation.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Renamed {
    /// Items that now carry the new username.
    pub written: usize,
    /// Items that already carried this rename or a newer one.
    pub stale: usize,
}

impl std::ops::AddAssign for Renamed {
    fn add_assign(&mut self, other: Self) {
        self.written += other.written;
        self.stale += other.stale;
    }
}

/// How a rename's fan-out ended this time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenameStep {
    /// Everything the user wrote carries this name, or a newer one.
    Done(Renamed),
    /// A newer rename of the user came: its own record walks everything.
    Superseded(Renamed),
    /// The deadline came first; the walk's place is saved, and the record must
    /// be delivered again to go on.
    Paused(Renamed),
}

/// How a walk over part of GSI1 ended.
enum WalkEnd {
    Finished,
    Superseded,
    Paused,
}

impl FanOut<'_> {
    /// Fan-out of a rename: writes `user`'s username onto everything they
    /// wrote. Each write lands only on an item that copied an older version of
    /// the profile (`userVersion`), so replaying a rename, or an older one
    /// after a newer one, changes nothing. A post's feed entry follows through
    /// the post's `userVersion`.
    ///
    /// GSI1 is eventually consistent: an item written just before the rename
    /// may not be in it yet. So once the index has had [`Store::gsi_lag_bound`]
    /// to catch up with the rename, a second, short pass reads only the items
    /// whose ids (ULIDs, time-ordered) were made since shortly before it. An
    /// item later than that carries the new name already: its write checked
    /// the profile's version. (The fan-out's INSERT rule covers an index that
    /// lags even longer; see `fanout`.)
    pub async fn copy_username(
        &self,
        user: &UserItem,
        deadline: &Deadline,
    ) -> Result<RenameStep, StoreError> {
        let mut done = Renamed::default();
        let mut progress = match self.rename_progress(&user.user_id).await? {
            Some(p) if p.version > user.version => return Ok(RenameStep::Superseded(done)),
            Some(p) if p.version == user.version => p,
            _ => RenameProgress::start(user),
        };
        if progress.phase == Phase::Done {
            return Ok(RenameStep::Done(done));
        }
        progress.invocations += 1;

        if progress.phase == Phase::Walk {
            let end = self
                .walk(user, None, Some(&mut progress), deadline, &mut done)
                .await?;
            match end {
                // Not saved: the second pass follows at once, and a retry
                // that finds the place of the last page saved finds an empty
                // page after it.
                WalkEnd::Finished => {
                    progress.phase = Phase::Tail;
                    progress.cursor = None;
                }
                WalkEnd::Superseded => return Ok(RenameStep::Superseded(done)),
                WalkEnd::Paused => return Ok(RenameStep::Paused(done)),
            }
        }

        let lowest_id = self.tail_start(user).await?;
        let walked = done;
        for prefix in [
            keys::POST_PREFIX,
            keys::DRAFT_PREFIX,
            keys::COMMENT_PREFIX,
            keys::LIKE_PREFIX,
        ] {
            let range = (format!("{prefix}{lowest_id}"), format!("{prefix}~"));
            // Short, and not saved page by page: a retry does it again.
            let end = self
                .walk(user, Some(range), None, deadline, &mut done)
                .await?;
            match end {
                WalkEnd::Finished => {}
                WalkEnd::Superseded => return Ok(RenameStep::Superseded(done)),
                WalkEnd::Paused => {
                    return Ok(if self.save_progress(&progress).await? {
                        RenameStep::Paused(done)
                    } else {
                        RenameStep::Superseded(done)
                    });
                }
            }
        }
        progress.written += (done.written - walked.written) as u64;
        progress.stale += (done.stale - walked.stale) as u64;
        progress.phase = Phase::Done;
        if !self.save_progress(&progress).await? {
            return Ok(RenameStep::Superseded(done));
        }
        tracing::info!(
            user_id = %user.user_id,
            version = user.version,
            written = progress.written,
            stale = progress.stale,
            invocations = progress.invocations,
            "rename copied everywhere"
        );
        Ok(RenameStep::Done(done))
    }

    /// Where the second pass starts: the lowest id an item written since
    /// GSI1 last lagged behind the rename can have. Waits until GSI1 has
    /// had its bound to show such items.
    async fn tail_start(&self, user: &UserItem) -> Result<String, StoreError> {
        let renamed_at = timestamp::parse(&user.updated_at).ok_or_else(|| {
            StoreError::Internal(format!("profile has a bad updatedAt {}", user.updated_at))
        })?;
        let settled_at = renamed_at + self.gsi_lag_bound();
        let wait = settled_at - time::OffsetDateTime::now_utc();
        if wait.is_positive() {
            tokio::time::sleep(wait.unsigned_abs()).await;
        }
        // Ids are stamped by the writers' clocks, `updatedAt` by the renamer's:
        // allow them to disagree by half the bound.
        let since = renamed_at - self.gsi_lag_bound() - self.gsi_lag_bound() / 2;
        let since_ms = u64::try_from(since.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
        Ok(ulid::Ulid::from_parts(since_ms, 0).to_string())
    }

    /// Copies `user`'s name onto their items in GSI1: all of them, keeping
    /// the walk's place and totals in `progress` (saved after each page but
    /// the last), and stopping when a newer rename appears; or those whose
    /// GSI1SK lies in `range`. Stops when the deadline nears.
    async fn walk(
        &self,
        user: &UserItem,
        range: Option<(String, String)>,
        mut progress: Option<&mut RenameProgress>,
        deadline: &Deadline,
        done: &mut Renamed,
    ) -> Result<WalkEnd, StoreError> {
        let mut query = Query::gsi1(keys::user_items_pk(&user.user_id));
        if let Some((low, high)) = range {
            query = query.between(low, high);
        }
        let mut start: Option<Item> = progress
            .as_ref()
            .and_then(|p| p.cursor.as_ref())
            .map(|cursor| cursor.iter().map(|(k, v)| (k.clone(), s(v))).collect());
        let mut concurrency = RENAME_CONCURRENCY;
        let mut first = true;
        loop {
            if !first && deadline.near() {
                return Ok(WalkEnd::Paused);
            }
            first = false;
            // The whole walk gives way to a newer rename, page by page (the
            // second pass is short: the walk before it checked).
            if progress.is_some() && self.superseded(user).await? {
                return Ok(WalkEnd::Superseded);
            }
            let page = self
                .db
                .query_page("rename walk", &query, start.clone(), Some(RENAME_PAGE))
                .await?;
            let page_done = self
                .copy_page(user, page.items, deadline, &mut concurrency)
                .await?;
            *done += page_done;
            start = page.next;
            if let Some(progress) = progress.as_deref_mut() {
                progress.written += page_done.written as u64;
                progress.stale += page_done.stale as u64;
                progress.cursor = start.as_ref().map(|key| {
                    key.iter()
                        .filter_map(|(k, v)| v.as_s().ok().map(|v| (k.clone(), v.clone())))
                        .collect()
                });
                if start.is_some() && !self.save_progress(progress).await? {
                    return Ok(WalkEnd::Superseded);
                }
            }
            if start.is_none() {
                return Ok(WalkEnd::Finished);
            }
        }
    }

    /// Copies the name onto one page of items, `concurrency` at a time: fewer
    /// after copies that stayed busy through their round's attempts (which are
    /// tried again in the next round), one more after a page without trouble.
    async fn copy_page(
        &self,
        user: &UserItem,
        items: Vec<Item>,
        deadline: &Deadline,
        concurrency: &mut usize,
    ) -> Result<Renamed, StoreError> {
        let mut page_done = Renamed::default();
        let mut pending = items;
        let mut round = 0;
        let backoff = *self.db.backoff();
        let round_attempts = ROUND_ATTEMPTS.min(backoff.attempts);
        let paced = &Store::clone(self).with_backoff(backoff.with_attempts(round_attempts));
        while !pending.is_empty() {
            let results: Vec<(Item, Result<bool, StoreError>)> = futures::stream::iter(pending)
                .map(|item| async move {
                    let written = paced.fanout().copy_username_onto(item.clone(), user).await;
                    (item, written)
                })
                .buffer_unordered(*concurrency)
                .collect()
                .await;
            pending = Vec::new();
            for (item, result) in results {
                match result {
                    Ok(true) => page_done.written += 1,
                    Ok(false) => page_done.stale += 1,
                    Err(StoreError::Busy { cause, .. }) => {
                        tracing::info!(cause = cause.as_str(), "rename copy busy; pacing");
                        pending.push(item);
                    }
                    Err(err) => return Err(err),
                }
            }
            if pending.is_empty() {
                break;
            }
            round += 1;
            *concurrency = (*concurrency / 2).max(1);
            if round >= BUSY_ROUNDS || deadline.near() {
                // The place saved is the page's start: the copies already
                // made are skipped (their condition fails) next time.
                return Err(StoreError::busy(
                    super::Busy::Throttled,
                    format!("{} username copies stayed busy", pending.len()),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100 << round)).await;
        }
        if round == 0 {
            *concurrency = (*concurrency + 1).min(RENAME_CONCURRENCY);
        }
        Ok(page_done)
    }

    /// Whether the profile has moved past `user`'s version (or is gone).
    async fn superseded(&self, user: &UserItem) -> Result<bool, StoreError> {
        Ok(self
            .read_profile(&user.user_id, true)
            .await?
            .is_none_or(|profile| profile.version > user.version))
    }

    async fn rename_progress(&self, user: &UserId) -> Result<Option<RenameProgress>, StoreError> {
        self.db.get_entity(RenameProgress::key(user), true).await
    }

    /// Saves the walk's place and totals; `false` when a newer rename's walk
    /// has saved its own (this one is superseded).
    async fn save_progress(&self, progress: &RenameProgress) -> Result<bool, StoreError> {
        let progress = RenameProgress {
            updated_at: timestamp::now(),
            ..progress.clone()
        };
        let not_newer = Expr::item_absent()
            .or("version <= :v")
            .value(":v", n(progress.version));
        let landed = Landed::When(vec![
            (keys::VERSION, n(progress.version)),
            ("updatedAt", s(&progress.updated_at)),
        ]);
        let put = Write::put(&progress, landed)?.when(not_newer);
        Ok(self.db.write("save rename progress", &put).await?.done())
    }
}
