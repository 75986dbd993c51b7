//! The fan-out's rules: which stream record falls under which rule, and what
//! each rule writes. [`super::handle_until`] applies every record of a batch
//! here (with the records coalesced into it); recovery replays one parked
//! record through [`apply`].
//!
//! | stream record | what it writes | why it is idempotent |
//! |---|---|---|
//! | post INSERT | the post's feed entry and the feed's count; when the count passes the capacity, its reserve and its slack (100 + 20 + 20), trims the feed back to the capacity and its reserve (120) (also when the entry was there already: a first delivery may have died before trimming) | put only if absent and the post is above the feed's floor |
//! | post, comment or like INSERT | the author's current username, if the profile moved on since the item was written (a rename whose walk read GSI1 before the index showed the item) | update only where `userVersion` is older |
//! | post MODIFY (short form changed) | the feed entry's copy of it, once a batch: a MODIFY followed in the batch by another of the same post is coalesced into that one | update only if the entry exists and is older |
//! | post INSERT or MODIFY (tags, or what lists show, changed) | the post's entry in each of its tags' lists (`TAG#t`), once a batch as above; out of the lists of tags it no longer has (any coalesced record's old image counts) | put only where absent or older, then the post read again: an entry for a tag it no longer has (or for a gone or unpublished post) is taken back; a removal only of an entry no newer than the record |
//! | post INSERT of a draft or scheduled post | nothing but its author's name caught up: it is in no list | – |
//! | post MODIFY that publishes it (a draft's `PUT`, the scheduler) or takes it back | published: into the feed and its tag lists as a new post, at its place (`listedId`: its publication time); taken back (or published again elsewhere): its feed entry and tag entries under the old place out (any coalesced record's old image counts) | as for a new post and a deletion; a late record is taken back by the read of the post after it |
//! | user MODIFY (username changed) | the username onto every post, comment and like the user wrote, page by page, its place saved (`store::rename`); near the deadline it stops and the record is reported failed, so that the retry goes on from there | update only where `userVersion` is older; an older rename's walk stops once a newer one exists |
//! | user REMOVE (erased) | everything the user wrote out, page by page under GSI1 `USER#u`: each post as `DELETE /posts/{id}` deletes it, each comment and like with its post's count one down; near the deadline it stops and the record is reported failed, so that the retry deletes what is left (`store::erasure`) | deleting what is gone is a no-op; the erased user can write nothing new, and what they had in flight is taken out by the INSERT rule |
//! | post, comment or like INSERT of an erased author (in flight when the erasure committed) | the item out, with its count (as the erasure's walk does) | deleting what is gone is a no-op |
//! | post REMOVE (deleted) | its feed entry and its tag entries out (the count one down; the reserve's next newest shows in its place), then every comment, like and marker of its partition (and of a hot post's shards), a page at a time; near the deadline it stops and the record is reported failed, so that the retry deletes what is left (`store::deletion`) | deleting what is gone is a no-op; nothing can be added to a deleted post; a late INSERT finds no post and takes its entry back out |
//! | post MODIFY of a hot post whose switch is unfinished (no `likersMoved` or no `commentsSharded`) | what the switch's request did not get to: the likes pointer, the comments pointer and `commentsSharded`, then a mark in its liker's partition for every like the post had, a page at a time, its place kept on the pointer, then `likersMoved` (`store::hot`); near the deadline it stops and the record is reported failed | each step only where not done; a mark is put only where none is; one whose marker changed as it was put is taken back |
//! | a hot post's shard counter MODIFY | once a batch per post (its counters' records coalesced into the last one): what each shard counted since the version the post holds of it, added onto the post's counts (`store::hot`); that post MODIFY then refreshes the feed entry | the post update is conditional on each shard's version as read |
//! | post INSERT, or MODIFY that publishes it | a delivery item for each of its author's follower shards with followers (`store::home`) | put only if absent |
//! | delivery INSERT, or its MODIFY with `handoff` | its follower shard's followers' home entries, a page at a time from its saved place; near the deadline its place saved with `handoff`, whose MODIFY goes on | the place saved conditional on the place read: a record delivered again goes on from there; an entry put twice is the same entry |
//! | follower shard count INSERT or MODIFY (the last of a batch's per followed user carries the others) | what each shard counted since the version the profile holds of it, added onto `followerCount`, the versions kept in `followerShards` | each shard's version held is still the one read |
//! | a hot post's like or comment INSERT or REMOVE, and its first-page copy's INSERT or MODIFY with `due` | once a batch per post and list, after the rules (`super::pages`): the copy of the keys of its likes' or comments' first page rebuilt by the exact merge, when the copy does not cover the batch's records and is at least 1 s old; a copy younger than that is marked `due` instead, and that MODIFY brings the post back (`store::first_pages`) | the copy is put only over an older one with no later rebuild due; a mark only where none as late is |
//! | anything else | nothing | – |
//!
//! A quiet post's counts need no rule of their own: a comment or like changes
//! the post in the same transaction, and that change reaches the feed entry as
//! a post MODIFY. A hot post's count in a shard counter reaches the post
//! through the shard counter rule, and the feed entry from there.
//! The fan-out's own writes to feed entries, comments and likes match no rule,
//! and its writes to posts only refresh feed entries, so nothing loops.
//!
//! Lambda delivers records at least once, in order per item, and after a
//! partial failure again from the lowest failed sequence number, so a record
//! may come again after newer ones: every write above is conditional on
//! versions, and applying any such schedule gives the table a single clean
//! application gives.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde::Deserialize;

use super::{
    FanoutError, Outcome,
    record::{Change, decode},
};
use crate::{
    ids::UserId,
    keys::{self, Key},
    metrics::{self, Metric},
    store::{
        ItemType, Store,
        counts::{ShardCounter, Summed},
        deletion::Removal,
        erasure::{ErasureStep, Written},
        feed::Copied,
        followers::FollowerChange,
        home::Delivering,
        hot::Moving,
        items::counter::{ShardCounterItem, ShardGroupItem},
        items::feed::FeedEntryItem,
        items::follow::{FollowerCountItem, FollowerItem},
        items::post::PostItem,
        items::user::UserItem,
        users::{Author, Authors},
        {deadline::Deadline, rename::RenameStep},
    },
};

/// Whether a post MODIFY refreshes its feed entry only when what the feed
/// shows changed between its two images, or always (earlier MODIFYs of the
/// post in its batch were coalesced into it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refresh {
    WhenChanged,
    Always,
}

/// The rule a record falls under (the table above), if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Rule {
    NewPost,
    NewReply,
    ChangedPost,
    ChangedUser,
    RemovedUser,
    RemovedPost,
    ShardCounts,
    GroupCounts,
    FollowerCount,
    FollowerCopy,
    Deliver,
    /// A like or comment taken back: its notification, which the batch's
    /// notifications step takes back ([`super::notify`]), and a hot post's
    /// first-page copy, which the batch's first-pages step rebuilds
    /// ([`super::pages`]).
    RemovedReply,
    /// A hot post's first-page copy marked with a rebuild due (`due`): the
    /// batch's first-pages step rebuilds it ([`super::pages`]).
    FirstPageDue,
}

impl Rule {
    /// Every item type has its decision here, for every change: a new type
    /// does not compile until it has one, and template.yaml's
    /// `FilterCriteria` must let through exactly what gets a rule (the
    /// API suite's `stream_filter` tests hold the two together).
    pub(super) fn of(record: &EventRecord) -> Option<Rule> {
        let change = Change::of(record)?;
        match kind_of(record)? {
            ItemType::Post => Some(match change {
                Change::Insert => Rule::NewPost,
                Change::Modify => Rule::ChangedPost,
                Change::Remove => Rule::RemovedPost,
            }),
            // A reply is never edited; its removal changed its post's count
            // in the same transaction (a post MODIFY).
            ItemType::Comment | ItemType::Like => match change {
                Change::Insert => Some(Rule::NewReply),
                Change::Remove => Some(Rule::RemovedReply),
                Change::Modify => None,
            },
            // A profile is created with nothing to copy yet.
            ItemType::User => match change {
                Change::Insert => None,
                Change::Modify => Some(Rule::ChangedUser),
                Change::Remove => Some(Rule::RemovedUser),
            },
            // A hot post's counts, added onto its group (or, made before
            // groups were, onto the post); made with the switch (nothing
            // counted yet), deleted with the post.
            ItemType::ShardCounter => match change {
                Change::Modify => Some(Rule::ShardCounts),
                Change::Insert | Change::Remove => None,
            },
            // 16 shards' counts, added onto the post; made with its
            // counters, deleted with the post.
            ItemType::ShardGroup => match change {
                Change::Modify => Some(Rule::GroupCounts),
                Change::Insert | Change::Remove => None,
            },
            // A follower shard's count, copied onto the followed profile:
            // made by the first follow, changed by each; deleted by nothing.
            ItemType::FollowerCount => match change {
                Change::Insert | Change::Modify => Some(Rule::FollowerCount),
                Change::Remove => None,
            },
            // A follower's entry, copied into the followed user's list by
            // time (`store::followers`), and taken out of it.
            ItemType::Follower => match change {
                Change::Insert | Change::Remove => Some(Rule::FollowerCopy),
                Change::Modify => None,
            },
            // A post's delivery into one follower shard's homes: walked
            // from its INSERT, and on from a MODIFY that handed it off at
            // a deadline (its saves after each page have no `handoff`).
            ItemType::Delivery => match change {
                Change::Insert => Some(Rule::Deliver),
                Change::Modify if handed_off(record) => Some(Rule::Deliver),
                Change::Modify | Change::Remove => None,
            },
            // A hot post's first-page copy, the fan-out's own: only a write
            // of it that marks a rebuild due comes back to it.
            ItemType::FirstPage => match change {
                Change::Insert | Change::Modify if first_page_due(record) => {
                    Some(Rule::FirstPageDue)
                }
                Change::Insert | Change::Modify | Change::Remove => None,
            },
            // The copies the fan-out keeps and its own bookkeeping: nothing
            // is copied from them. A follow is counted in its transaction;
            // a home entry and a follower window are written only by the
            // fan-out.
            ItemType::Follow
            | ItemType::Block
            | ItemType::BlockedBy
            | ItemType::FollowerWindow
            | ItemType::HomeEntry
            | ItemType::Username
            | ItemType::LikeShards
            | ItemType::Liked
            | ItemType::CommentShards
            | ItemType::PostContent
            | ItemType::Liker
            | ItemType::FeedEntry
            | ItemType::FeedFloor
            | ItemType::TagEntry
            | ItemType::Scheduled
            | ItemType::RenameProgress
            | ItemType::Erasure
            | ItemType::RequestRecord
            | ItemType::ParkedRecord
            | ItemType::NotificationGroup
            | ItemType::Notification
            | ItemType::NotificationsSeen
            | ItemType::Other => None,
        }
    }
}

/// Whether a first-page copy's INSERT or MODIFY marked a rebuild due (its
/// new image has `due`: template.yaml's filter lets only those through; a
/// rebuild that covers what it was asked to puts none).
fn first_page_due(record: &EventRecord) -> bool {
    record
        .change
        .new_image
        .contains_key(crate::store::items::first_page::DUE_ATTRIBUTE)
}

/// Whether a delivery's MODIFY handed its walk off (its new image has
/// `handoff`: template.yaml's filter lets only those through).
fn handed_off(record: &EventRecord) -> bool {
    record.change.new_image.contains_key("handoff")
}

/// Whether [`apply`] may change a copy for this record: what template.yaml's
/// `FilterCriteria` lets through to the function (new posts, comments and
/// likes; changed posts and profiles; deleted posts and profiles). Records of any other
/// kind are [`Outcome::Ignored`], so recovery need not keep them.
pub fn applies_to(record: &EventRecord) -> bool {
    Rule::of(record).is_some()
}

/// The record's item type, from its new image (its old one for a REMOVE);
/// `None` for an image without a known type, which is not one of ours.
fn kind_of(record: &EventRecord) -> Option<ItemType> {
    let (image, which) = match Change::of(record) {
        Some(Change::Remove) => (&record.change.old_image, "old"),
        _ => (&record.change.new_image, "new"),
    };
    decode::<Kind>(image, which).map_or(None, |k| k.kind)
}

/// Applies one stream record; a rename or a deletion stops near `deadline`.
pub async fn apply(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    apply_record(store, record, deadline, &[], &Authors::default()).await
}

/// Applies `record`, and the records of its batch `carried` into it; the
/// author of a new item from `authors` when they were read there.
pub(super) async fn apply_record(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
    carried: &[&EventRecord],
    authors: &Authors,
) -> Result<Outcome, FanoutError> {
    let refresh = if carried.is_empty() {
        Refresh::WhenChanged
    } else {
        Refresh::Always
    };
    // Each rule boxed: their futures are large, and a caller's future holds
    // the largest of them (debug builds overflowed a test thread's stack).
    match Rule::of(record) {
        Some(Rule::NewPost) => Box::pin(new_post(store, record, authors)).await,
        Some(Rule::NewReply) => Box::pin(new_reply(store, record, authors)).await,
        Some(Rule::ChangedPost) => {
            Box::pin(changed_post(store, record, carried, refresh, deadline)).await
        }
        Some(Rule::ChangedUser) => Box::pin(changed_user(store, record, deadline)).await,
        Some(Rule::RemovedUser) => Box::pin(removed_user(store, record, deadline)).await,
        Some(Rule::RemovedPost) => Box::pin(removed_post(store, record, deadline)).await,
        Some(Rule::ShardCounts) => {
            Box::pin(shard_counts::<ShardCounterItem>(store, record, carried)).await
        }
        Some(Rule::GroupCounts) => {
            Box::pin(shard_counts::<ShardGroupItem>(store, record, carried)).await
        }
        Some(Rule::FollowerCount) => {
            Box::pin(shard_counts::<FollowerCountItem>(store, record, carried)).await
        }
        Some(Rule::FollowerCopy) => Box::pin(copy_followers(store, record, carried)).await,
        Some(Rule::Deliver) => Box::pin(deliver(store, record, deadline)).await,
        // Its notification is the batch's notifications step's, and a hot
        // post's first page the first-pages step's.
        Some(Rule::RemovedReply) => Ok(Outcome::Ignored),
        Some(Rule::FirstPageDue) => Ok(Outcome::Ignored),
        None => Ok(Outcome::Ignored),
    }
}

/// A post INSERT: the post's name caught up, its feed entry, the feed trimmed.
async fn new_post(
    store: &Store,
    record: &EventRecord,
    authors: &Authors,
) -> Result<Outcome, FanoutError> {
    let mut post: PostItem = decode(&record.change.new_image, "new")?;
    let renamed = match author_of(store, record, authors).await? {
        Author::Erased => return erased_author(store, record).await,
        Author::Renamed(profile) => Some(profile),
        Author::Current => None,
    };
    // The feed gets the name the post has now.
    if let Some(profile) = &renamed {
        post.username.clone_from(&profile.username);
        post.user_version = profile.version;
    }
    if !post.is_published() {
        // A draft is in no list; its name caught up is all there is.
        return Ok(match renamed {
            Some(_) => Outcome::Written { writes: 1 },
            None => Outcome::Ignored,
        });
    }
    let (entered, entries) = store.fanout().enter_feed(&post).await?;
    // Also when the entry was there already: a first delivery may have
    // entered it and died before trimming.
    let trimmed = if store.fanout().feed_due_trim(entries) {
        store.fanout().trim_feed().await?
    } else {
        0
    };
    let tagged = store.fanout().enter_tags(&post).await?;
    // Into its author's followers' homes: a delivery a follower shard.
    let deliveries = store.fanout().start_deliveries(&post).await?;
    // The users it mentions are told.
    let mentioned = super::notify::post_mentions(store, None, Some(&post)).await?;
    let writes = 2 + trimmed + tagged + deliveries + mentioned + usize::from(renamed.is_some());
    Ok(match (entered, renamed) {
        (Copied::Written, _) | (_, Some(_)) => Outcome::Written { writes },
        _ if !post.tags.is_empty() || deliveries > 0 => Outcome::Written { writes },
        _ => Outcome::Stale { writes },
    })
}

/// A comment or like INSERT: its author's name caught up, or the item out
/// if its author was erased meanwhile.
async fn new_reply(
    store: &Store,
    record: &EventRecord,
    authors: &Authors,
) -> Result<Outcome, FanoutError> {
    Ok(match author_of(store, record, authors).await? {
        Author::Current => Outcome::Ignored,
        Author::Renamed(_) => Outcome::Written { writes: 1 },
        Author::Erased => return erased_author(store, record).await,
    })
}

/// A new item whose author's account was erased while it was written: out
/// it goes, as the erasure's walk would have taken it.
async fn erased_author(store: &Store, record: &EventRecord) -> Result<Outcome, FanoutError> {
    let key: Key = decode(&record.change.new_image, "new")?;
    let item: Authored = decode(&record.change.new_image, "new")?;
    let written = Written::of(&key).ok_or_else(|| FanoutError::Malformed {
        image: "new",
        reason: format!("{}/{} is not a post, comment or like", key.pk, key.sk),
    })?;
    let erased = store.fanout().erase_written(&item.user_id, written).await?;
    // A keyed create put its request record in the same transaction: it
    // holds what the erased account wrote, and goes with it.
    let forgotten = store.fanout().forget_erased_requests(&item.user_id).await?;
    tracing::info!(pk = %key.pk, sk = %key.sk, forgotten, "an erased author's late item taken out");
    Ok(match erased.total() + forgotten {
        0 => Outcome::Stale { writes: 1 },
        writes => Outcome::Written { writes },
    })
}

/// A user REMOVE: everything the erased user wrote, out.
async fn removed_user(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    let old: UserItem = decode(&record.change.old_image, "old")?;
    // Their notifications first: a page of keys at a time, at most a few
    // pages a call (what is left comes with the record again).
    let mut cleared = false;
    for _ in 0..NOTIFICATION_PAGES {
        if store.fanout().erase_notifications(&old.user_id).await? {
            cleared = true;
            break;
        }
    }
    if !cleared {
        return Ok(Outcome::Paused { writes: 0 });
    }
    let step = store.fanout().erase_items(&old.user_id, deadline).await?;
    let (erased, paused, finished) = match step {
        ErasureStep::Paused(e) => (e.total(), 1.0, 0.0),
        ErasureStep::Done(e) => (e.total(), 0.0, 1.0),
        ErasureStep::Stale => (0, 0.0, 0.0),
    };
    metrics::emit(
        &[],
        &[
            (Metric::ErasedItems, erased as f64),
            (Metric::ErasuresPaused, paused),
            (Metric::ErasuresFinished, finished),
        ],
    );
    Ok(match step {
        ErasureStep::Paused(e) => Outcome::Paused { writes: e.total() },
        ErasureStep::Done(e) => Outcome::Written {
            writes: e.total() + 2,
        },
        ErasureStep::Stale => Outcome::Stale { writes: 0 },
    })
}

/// How many pages of an erased user's notifications one application of
/// its record deletes before it pauses.
const NOTIFICATION_PAGES: usize = 8;

/// A post MODIFY: its feed entry and its tag lists' entries, when what
/// they show changed (or `Always`, for the last of a batch's coalesced
/// MODIFYs); out of the lists of the tags it no longer has (as any of the
/// batch's `carried` MODIFYs had them).
async fn changed_post(
    store: &Store,
    record: &EventRecord,
    carried: &[&EventRecord],
    refresh: Refresh,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    let old: PostItem = decode(&record.change.old_image, "old")?;
    let new: PostItem = decode(&record.change.new_image, "new")?;
    let listed = new.listed_id();
    // What the lists held of it before (each coalesced record's old image
    // counts): entries under another place (it went back to a draft, or was
    // published again since) go; under the same place, the tags it lost.
    let mut untagged = Vec::new();
    let mut unlisted = Vec::new();
    // Whether any image before was not where it is now: then it enters the
    // lists now (a like coalesced after its publication included).
    let mut moved = false;
    for earlier in carried
        .iter()
        .map(|r| &r.change.old_image)
        .chain([&record.change.old_image])
    {
        let before: PostItem = decode(earlier, "old")?;
        moved |= before.listed_id() != listed;
        let Some(was) = before.listed_id() else {
            continue;
        };
        if Some(was) != listed {
            if !unlisted.contains(&was) {
                unlisted.push(was);
            }
            for tag in before.tags {
                store.fanout().leave_tag(&tag, &was, None).await?;
            }
            continue;
        }
        for tag in before.tags {
            if !new.tags.contains(&tag) && !untagged.contains(&tag) {
                untagged.push(tag);
            }
        }
    }
    // Taken back to a draft: its notifications' groups go; the users it
    // mentions (as published, before the batch's first change and now) are
    // told or untold.
    let notified = if listed.is_none() && !unlisted.is_empty() {
        super::notify::post_taken_back(store, &new).await?
    } else {
        0
    };
    let first: PostItem = match carried.first() {
        Some(earliest) => decode(&earliest.change.old_image, "old")?,
        None => old.clone(),
    };
    let notified = notified + super::notify::post_mentions(store, Some(&first), Some(&new)).await?;
    let mut left = 0;
    for was in &unlisted {
        left += 1 + usize::from(store.fanout().leave_feed(was).await?);
    }
    if let Some(listed) = listed {
        for tag in &untagged {
            store
                .fanout()
                .leave_tag(tag, &listed, Some(new.version))
                .await?;
        }
    }
    // Published now (or again, elsewhere in the lists): into the feed, as a
    // new post enters it.
    if listed.is_some() && moved {
        let (_, entries) = store.fanout().enter_feed(&new).await?;
        if store.fanout().feed_due_trim(entries) {
            left += store.fanout().trim_feed().await?;
        }
        let tagged = store.fanout().enter_tags(&new).await?;
        let deliveries = store.fanout().start_deliveries(&new).await?;
        return Ok(Outcome::Written {
            writes: left + 2 + tagged + deliveries + untagged.len(),
        });
    }
    if listed.is_none() {
        return Ok(match left + notified {
            0 => Outcome::Ignored,
            writes => Outcome::Written { writes },
        });
    }
    let retagged = old.tags != new.tags || !untagged.is_empty() || left > 0;
    let switch: Switch = decode(&record.change.new_image, "new")?;
    let mut finished = None;
    if switch.unfinished() {
        finished = Some(store.fanout().finish_switch(&new.post_id, deadline).await?);
    }
    if let Some(Moving::Paused { moved }) = finished {
        return Ok(Outcome::Paused { writes: moved });
    }
    if refresh == Refresh::WhenChanged && short_form(&old) == short_form(&new) && !retagged {
        return Ok(match finished {
            Some(Moving::Done { moved }) => Outcome::Written {
                writes: moved + 1 + notified,
            },
            _ if notified > 0 => Outcome::Written { writes: notified },
            _ => Outcome::Ignored,
        });
    }
    let tagged = untagged.len() + store.fanout().enter_tags(&new).await?;
    Ok(match store.fanout().refresh_feed_entry(&new).await? {
        Copied::Written => Outcome::Written { writes: 1 + tagged },
        Copied::Stale if tagged > 0 => Outcome::Written { writes: 1 + tagged },
        Copied::Stale => Outcome::Stale { writes: 1 },
    })
}

/// What a post's image says of its switch to hot: unfinished while it is
/// hot without its likers moved or its comments sharded.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Switch {
    #[serde(default)]
    shards: Option<u8>,
    #[serde(default)]
    likers_moved: Option<bool>,
    #[serde(default)]
    comments_sharded: Option<bool>,
}

impl Switch {
    fn unfinished(&self) -> bool {
        self.shards.is_some()
            && (self.likers_moved != Some(true) || self.comments_sharded != Some(true))
    }
}

/// Shard counter changes of one owner (this record and those of its batch
/// carried into it): a hot post's counters' MODIFYs (onto their group), its
/// groups' (onto the post), or a followed user's follower counts' INSERTs
/// and MODIFYs. What they counted is added onto
/// the owner, once.
async fn shard_counts<C: ShardCounter + serde::de::DeserializeOwned>(
    store: &Store,
    record: &EventRecord,
    carried: &[&EventRecord],
) -> Result<Outcome, FanoutError> {
    let counters = carried
        .iter()
        .chain(std::iter::once(&record))
        .map(|r| decode::<C>(&r.change.new_image, "new"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(match store.fanout().add_shard_counts(&counters).await? {
        Summed::Written => Outcome::Written { writes: 1 },
        Summed::Stale | Summed::Gone => Outcome::Stale { writes: 0 },
    })
}

/// What the counters of one owner (a group, or a post: [`ShardCounter::owner`])
/// are coalesced under: the owner's key.
pub(super) fn counters_owner<C: ShardCounter + serde::de::DeserializeOwned>(
    record: &EventRecord,
) -> Option<Key> {
    let counter: C = decode(&record.change.new_image, "new").ok()?;
    Some(counter.owner())
}

/// What the follower counts of one followed user are coalesced under: the
/// key of their first shard's count (from the image: whose count it is).
pub(super) fn follower_counts_of(record: &EventRecord) -> Option<Key> {
    let count: FollowerCountItem = decode(&record.change.new_image, "new").ok()?;
    Some(FollowerCountItem::key_of(&count.user_id, 0))
}

/// A follower entry's INSERT or REMOVE, with the records of its window
/// coalesced into it (in stream order): onto the followed user's window.
async fn copy_followers(
    store: &Store,
    record: &EventRecord,
    carried: &[&EventRecord],
) -> Result<Outcome, FanoutError> {
    let mut changes = Vec::with_capacity(carried.len() + 1);
    for record in carried.iter().copied().chain(std::iter::once(record)) {
        changes.push(follower_change(record)?);
    }
    let sent = store.fanout().copy_followers(&changes).await?;
    Ok(Outcome::Written { writes: sent })
}

/// What a follower entry's record changes in its window.
fn follower_change(record: &EventRecord) -> Result<FollowerChange, FanoutError> {
    let removed = Change::of(record) == Some(Change::Remove);
    let entry: FollowerItem = if removed {
        decode(&record.change.old_image, "old")?
    } else {
        decode(&record.change.new_image, "new")?
    };
    Ok(FollowerChange {
        followed: entry.user_id,
        follow: entry.follow_id,
        follower: (!removed).then_some(entry.follower_id),
    })
}

/// The follower window a follower entry's record changes: what a batch's
/// records of one window are coalesced under.
pub(super) fn follower_window_of(record: &EventRecord) -> Option<Key> {
    let change = follower_change(record).ok()?;
    Some(keys::follower_window(&change.followed, &change.follow))
}

/// A delivery's INSERT (or its handoff's MODIFY): its walk, from its place.
async fn deliver(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    let key: Key = decode(&record.change.new_image, "new")?;
    if !keys::is_delivery(&key) {
        return Err(FanoutError::Malformed {
            image: "new",
            reason: format!("{}/{} is not a delivery", key.pk, key.sk),
        });
    }
    Ok(match store.fanout().deliver(&key, deadline).await? {
        Delivering::Done { written } => Outcome::Written {
            writes: written + 1,
        },
        // Its handoff's MODIFY goes on, in the next invocation.
        Delivering::Paused { written } => Outcome::Written {
            writes: written + 1,
        },
        Delivering::Stale => Outcome::Stale { writes: 0 },
    })
}

/// A user MODIFY: a new username onto everything they wrote.
async fn changed_user(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    let old: UserItem = decode(&record.change.old_image, "old")?;
    let new: UserItem = decode(&record.change.new_image, "new")?;
    if old.username == new.username {
        return Ok(Outcome::Ignored);
    }
    let step = store.fanout().copy_username(&new, deadline).await?;
    let (copies, paused, finished) = match step {
        RenameStep::Paused(r) => (r.written, 1.0, 0.0),
        RenameStep::Superseded(r) => (r.written, 0.0, 0.0),
        RenameStep::Done(r) => (r.written, 0.0, 1.0),
    };
    metrics::emit(
        &[],
        &[
            (Metric::RenameCopies, copies as f64),
            (Metric::RenamesPaused, paused),
            (Metric::RenamesFinished, finished),
        ],
    );
    Ok(match step {
        RenameStep::Paused(renamed) => Outcome::Paused {
            writes: renamed.written + renamed.stale,
        },
        // Stale when every copy already had this rename, or a newer rename
        // took over.
        RenameStep::Superseded(renamed) => Outcome::Stale {
            writes: renamed.written + renamed.stale,
        },
        RenameStep::Done(renamed) if renamed.written == 0 => Outcome::Stale {
            writes: renamed.stale,
        },
        RenameStep::Done(renamed) => Outcome::Written {
            writes: renamed.written + renamed.stale,
        },
    })
}

/// A post REMOVE: its feed entry out, then what its partition holds.
async fn removed_post(
    store: &Store,
    record: &EventRecord,
    deadline: &Deadline,
) -> Result<Outcome, FanoutError> {
    let old: PostItem = decode(&record.change.old_image, "old")?;
    super::notify::post_removed(store, &old).await?;
    super::notify::post_mentions(store, Some(&old), None).await?;
    let mut left = 0;
    if let Some(at) = &old.publish_at {
        left += usize::from(store.fanout().unschedule(&old.post_id, at).await?);
    }
    if let Some(listed) = old.listed_id() {
        left += usize::from(store.fanout().leave_feed(&listed).await?);
        for tag in &old.tags {
            store.fanout().leave_tag(tag, &listed, None).await?;
            left += 1;
        }
    }
    Ok(
        match store
            .fanout()
            .remove_post_items(&old.post_id, old.shards_made(), deadline)
            .await?
        {
            Removal::Paused { deleted } => Outcome::Paused {
                writes: left + deleted,
            },
            Removal::Done { deleted } if left + deleted == 0 => Outcome::Stale { writes: 0 },
            Removal::Done { deleted } => Outcome::Written {
                writes: left + deleted,
            },
        },
    )
}

/// Who wrote a new item that copies its author's username: see
/// [`crate::store::FanOut::author_of_new_item`].
async fn author_of(
    store: &Store,
    record: &EventRecord,
    authors: &Authors,
) -> Result<Author, FanoutError> {
    let key: Key = decode(&record.change.new_image, "new")?;
    let item: Authored = decode(&record.change.new_image, "new")?;
    Ok(store
        .fanout()
        .author_of_new_item(&key, &item.user_id, item.user_version, authors)
        .await?)
}

/// The author of a new post, comment or like (whose rule reads their
/// profile: [`author_of`]); `None` for any other record, or one that does
/// not decode (its rule answers that).
pub(super) fn new_item_author(record: &EventRecord) -> Option<UserId> {
    match Rule::of(record)? {
        Rule::NewPost | Rule::NewReply => decode::<Authored>(&record.change.new_image, "new")
            .ok()
            .map(|item| item.user_id),
        _ => None,
    }
}

/// What a post, comment or like says of its author.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Authored {
    user_id: UserId,
    user_version: u64,
}

#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type")]
    kind: Option<ItemType>,
}

/// What a feed entry shows of a post, and the post's `updatedAt` (the Atom
/// entry's `updated`): a change of the versions alone is no reason to write.
fn short_form(post: &PostItem) -> FeedEntryItem {
    FeedEntryItem {
        version: 0,
        user_version: 0,
        ..FeedEntryItem::from(post)
    }
}
