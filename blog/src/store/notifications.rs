//! Notifications (fan-out, request): what tells a writer of the likes and
//! comments of their posts, of mentions of them and of new followers, in
//! their partition `NOTIFY#<userId>` ([`crate::store::items::notification`]).
//!
//! - **Groups** (a post's likes, a hot post's comments, new followers): one
//!   item per target, for the target's life. Its count is no copy: the list
//!   reads the target's own exact count (a post's `likeCount`, the comments
//!   its shards counted, the profile's `followerCount`) and takes the
//!   recipient's own part out (their own like, their own comments, which the
//!   group keeps). Its actors are the newest [`GROUP_ACTORS`] others, kept
//!   from the like, comment and follower records: one write a group a
//!   batch, however many records the batch holds of it
//!   ([`FanOut::change_actors`]). `lastAt` (the newest actor's time) places
//!   it in GSI1's list, so new activity brings it to the top.
//! - **Notes** (a comment on a quiet post, a mention): one item each, put
//!   from the comment's or post's record and deleted with it.
//! - **Seen**: until when the user has read them; a notification is read
//!   when its time is at or before it.
//!
//! What is taken back leaves: an unlike or a deleted comment moves the
//! count down through its target's record and takes the actor out of the
//! group; a deleted or unpublished post takes its groups and mentions; an
//! erased account's partition goes, and its likes, comments and follows,
//! which its erasure takes out, leave every count; the list reads actors'
//! names as they are now, and an erased actor's profile is gone, so its
//! name never shows. A notification is kept [`KEEP_DAYS`](super::items::notification::KEEP_DAYS) after its last
//! activity (TTL).

use std::collections::{HashMap, HashSet};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;

use super::items::notification::{
    Actor, GROUP_ACTORS, KEPT_ACTORS, NotificationGroupItem, NotificationItem, NotificationKind,
    NotificationsSeenItem, attributes as a, expires_after,
};
use super::items::user::UserItem;
use super::{
    FanOut, Item, ItemType, Requests, StoreError, cursor, from_item, s, signed,
    table::{Deleted, Expr, Landed, Outcome, Query, Write},
};
use crate::{
    ids::{CommentId, PostId, UserId},
    keys::{self, Entity, GSI1PK, GSI1SK, Key},
    timestamp,
};

/// The most notifications one page answers.
pub const MAX_PAGE: usize = 100;

/// How many unread notifications the list counts at most (it says "at least
/// this many" past it).
pub const MAX_UNREAD: usize = 100;

/// How often an update of a group's actors is tried again when another
/// batch changed them in between.
const ACTOR_ATTEMPTS: usize = 4;

/// One change of a group's actors from a batch: an actor added (their like,
/// comment or follow, at its time) or taken out (taken back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorChange {
    pub actor: UserId,
    pub at: String,
    pub added: bool,
}

/// Which group a change is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupOf {
    pub recipient: UserId,
    pub kind: NotificationKind,
    pub post: Option<PostId>,
}

impl GroupOf {
    /// The group's key.
    pub fn key(&self) -> Key {
        NotificationGroupItem::key_of(&self.recipient, self.kind, self.post.as_ref())
    }
}

/// The attributes every write of a group sets, so that the first makes it
/// whole: its type, recipient, kind and post.
fn group_whole(change: Expr, group: &GroupOf) -> Result<Expr, StoreError> {
    let change = change
        .name("#type", keys::TYPE)
        .name("#user", a::USER_ID)
        .name("#kind", a::KIND)
        .value(":type", ItemType::NotificationGroup.attribute()?)
        .value(":user", s(group.recipient.as_str()))
        .value(":kind", s(group.kind.name()));
    Ok(match &group.post {
        Some(post) => change
            .name("#post", a::POST_ID)
            .value(":post", s(post.to_string())),
        None => change,
    })
}

/// The `SET` clauses of [`group_whole`].
fn group_whole_sets(group: &GroupOf) -> &'static str {
    match group.post {
        Some(_) => "#type = :type, #user = :user, #kind = :kind, #post = :post",
        None => "#type = :type, #user = :user, #kind = :kind",
    }
}

impl FanOut<'_> {
    /// `post`'s item if it is published (what tells its author of its likes
    /// and comments): one GetItem, eventually consistent; read again
    /// strongly when that finds it gone or unpublished (a post made or
    /// published a moment before the like or comment the record is of may
    /// not have reached the replica read).
    pub async fn published_post(
        &self,
        post: &PostId,
    ) -> Result<Option<super::items::post::PostItem>, StoreError> {
        let key = keys::post_item(post).item();
        let found: Option<super::items::post::PostItem> =
            self.db.get_entity(key.clone(), false).await?;
        if let Some(post) = found.filter(|p| p.listed_id().is_some()) {
            return Ok(Some(post));
        }
        let found: Option<super::items::post::PostItem> = self.db.get_entity(key, true).await?;
        Ok(found.filter(|p| p.listed_id().is_some()))
    }

    /// A batch's changes of one group's actors, in one write: each added
    /// actor among the newest [`KEPT_ACTORS`] (once), each taken back out,
    /// `lastAt` the newest time (which lists the group, at the top), and
    /// `firstAt` the first. Read (strongly) and written on the condition that
    /// no other batch changed the actors in between; nothing is written when
    /// nothing changes; a group left with no actor and no part of the
    /// recipient's own is deleted. `false` when nothing was written.
    pub async fn change_actors(
        &self,
        group: &GroupOf,
        changes: &[ActorChange],
    ) -> Result<bool, StoreError> {
        for _ in 0..ACTOR_ATTEMPTS {
            let held: Option<NotificationGroupItem> =
                self.db.get_entity(group.key().item(), true).await?;
            let (actors, last_at) = match &held {
                Some(h) => (h.actors.clone(), h.last_at.clone()),
                None => (Vec::new(), None),
            };
            let (merged, newest) = merge_actors(&actors, changes);
            let last = match (&last_at, newest) {
                (Some(held), Some(new)) if new.as_str() > held.as_str() => Some(new),
                (Some(held), _) => Some(held.clone()),
                (None, new) => new,
            };
            let first_moves = held
                .as_ref()
                .and_then(|h| h.first_at.as_deref())
                .is_some_and(|f| changes.iter().any(|c| c.added && c.at.as_str() < f));
            if merged == actors && last == last_at && !first_moves {
                return Ok(false);
            }
            let Some(last) = last else {
                // No actor yet and none added: nothing to list.
                return Ok(false);
            };
            let unchanged = match &last_at {
                Some(held) => Expr::new("#last = :held")
                    .name("#last", a::LAST_AT)
                    .value(":held", s(held.clone()))
                    .and_expr(same_actors(&actors)?),
                None => Expr::new("attribute_not_exists(#last)").name("#last", a::LAST_AT),
            };
            // Every actor it kept took back what they did, and the recipient
            // has no part of their own in it: it goes.
            if merged.is_empty() && held.as_ref().is_none_or(|h| h.own() == 0) {
                let delete = Write::delete(group.key().item(), Deleted::Untold).when(unchanged);
                match self.db.write("drop notification group", &delete).await? {
                    Outcome::ConditionFailed { .. } => continue,
                    _ => return Ok(true),
                }
            }
            // The earliest actor's time, whatever order the batches came in.
            let held_first = held.as_ref().and_then(|h| h.first_at.clone());
            let first = changes
                .iter()
                .filter(|c| c.added)
                .map(|c| c.at.as_str())
                .chain(held_first.as_deref())
                .min()
                .unwrap_or(last.as_str())
                .to_owned();
            let place = NotificationGroupItem {
                user_id: group.recipient.clone(),
                kind: group.kind,
                post_id: group.post,
                actors: Vec::new(),
                first_at: None,
                last_at: Some(last.clone()),
                own_like: None,
                own_comments: Vec::new(),
            }
            .gsi1()
            .ok_or_else(|| StoreError::Internal("a listed group has a place".into()))?;
            let change = Expr::new("")
                .name("#actors", a::ACTORS)
                .name("#last", a::LAST_AT)
                .name("#first", a::FIRST_AT)
                .name("#gpk", GSI1PK)
                .name("#gsk", GSI1SK)
                .name("#expires", a::EXPIRES_AT)
                .value(":actors", actors_value(&merged)?)
                .value(":last", s(last.clone()))
                .value(":first", s(first))
                .value(":gpk", s(place.pk))
                .value(":gsk", s(place.sk))
                .value(":expires", signed(expires_after(&last)));
            let change = group_whole(change, group)?.with_text(format!(
                "SET #actors = :actors, #last = :last, #first = :first, \
                 #gpk = :gpk, #gsk = :gsk, #expires = :expires, {}",
                group_whole_sets(group)
            ));
            let write = Write::update(group.key().item(), change, Landed::Untold).when(unchanged);
            match self.db.write("change notification actors", &write).await? {
                Outcome::ConditionFailed { .. } => continue,
                _ => return Ok(true),
            }
        }
        Err(StoreError::busy(
            super::Busy::Conflict,
            "other batches kept changing the group's actors",
        ))
    }

    /// The recipient's own like of their post (`like`), which the group's
    /// count holds and does not show: set when they like it (unless a later
    /// like of theirs is set already: like ids grow with time, and a like
    /// taken back and given again are records of two items, which may come
    /// in either order), taken out when that like is taken back (only that
    /// one).
    pub async fn own_like(
        &self,
        group: &GroupOf,
        like: &str,
        present: bool,
    ) -> Result<bool, StoreError> {
        let write = if present {
            let change = Expr::new("")
                .name("#own", a::OWN_LIKE)
                .value(":like", s(like));
            let change = group_whole(change, group)?
                .with_text(format!("SET #own = :like, {}", group_whole_sets(group)));
            Write::update(group.key().item(), change, Landed::Untold).when(
                Expr::new("attribute_not_exists(#own) OR #own < :like")
                    .name("#own", a::OWN_LIKE)
                    .value(":like", s(like)),
            )
        } else {
            Write::update(
                group.key().item(),
                Expr::new("REMOVE #own").name("#own", a::OWN_LIKE),
                Landed::Untold,
            )
            .when(
                Expr::new("#own = :like")
                    .name("#own", a::OWN_LIKE)
                    .value(":like", s(like)),
            )
        };
        let done = self.db.write("own like", &write).await?.done();
        if done && !present {
            self.drop_group_if_empty(group).await?;
        }
        Ok(done)
    }

    /// `group` out if nothing is left in it: no actor, no part of the
    /// recipient's own.
    async fn drop_group_if_empty(&self, group: &GroupOf) -> Result<(), StoreError> {
        let empty = Expr::new(
            "attribute_not_exists(#actors) AND attribute_not_exists(#like) \
             AND attribute_not_exists(#comments)",
        )
        .name("#actors", a::ACTORS)
        .name("#like", a::OWN_LIKE)
        .name("#comments", a::OWN_COMMENTS);
        let delete = Write::delete(group.key().item(), Deleted::Untold).when(empty);
        self.db.write("drop notification group", &delete).await?;
        Ok(())
    }

    /// The recipient's own comment on their hot post, which the comment
    /// group's count holds and does not show: in its set while it exists.
    pub async fn own_comment(
        &self,
        group: &GroupOf,
        comment: &CommentId,
        present: bool,
    ) -> Result<bool, StoreError> {
        let id = AttributeValue::Ss(vec![comment.to_string()]);
        let write = if present {
            let change = Expr::new("").name("#own", a::OWN_COMMENTS).value(":id", id);
            let change = group_whole(change, group)?
                .with_text(format!("ADD #own :id SET {}", group_whole_sets(group)));
            Write::update(group.key().item(), change, Landed::Untold)
        } else {
            Write::update(
                group.key().item(),
                Expr::new("DELETE #own :id")
                    .name("#own", a::OWN_COMMENTS)
                    .value(":id", id),
                Landed::Untold,
            )
            .when(Expr::item_exists())
        };
        let done = self.db.write("own comment", &write).await?.done();
        if done && !present {
            self.drop_group_if_empty(group).await?;
        }
        Ok(done)
    }

    /// A note (a comment, a mention) put: the same comment or mention is the
    /// same note.
    pub async fn put_note(&self, note: &NotificationItem) -> Result<(), StoreError> {
        let write = Write::put(note, Landed::Untold)?;
        self.db.write("put a notification", &write).await?;
        Ok(())
    }

    /// A note taken out (its comment or mention taken back): `note` as it
    /// was put names it.
    pub async fn delete_note(&self, note: &NotificationItem) -> Result<(), StoreError> {
        let write = Write::delete(note.key().item(), Deleted::IfGone);
        self.db.write("delete a notification", &write).await?;
        Ok(())
    }

    /// A post's notifications out of its author's: its groups (its likes,
    /// its comments) and the notes of its comments, a page of keys at a
    /// time; it was deleted or taken back (its comments' own records, which
    /// come after, find it gone or unpublished and tell no one).
    pub async fn drop_post_groups(&self, author: &UserId, post: &PostId) -> Result<(), StoreError> {
        let keys = [NotificationKind::Like, NotificationKind::Comment]
            .into_iter()
            .map(|kind| NotificationGroupItem::key_of(author, kind, Some(post)).item())
            .collect();
        self.db
            .delete_all("drop post notifications", keys, 2)
            .await?;
        let notes = Query::partition(keys::notify_pk(author))
            .begins_with(&NotificationItem::of_post(NotificationKind::Comment, post))
            .project(
                Expr::new("#pk, #sk")
                    .name("#pk", keys::PK)
                    .name("#sk", keys::SK),
            );
        let mut start = None;
        loop {
            start = self.delete_page("drop post notes", &notes, start).await?;
            if start.is_none() {
                return Ok(());
            }
        }
    }

    /// One page of `query`'s keys (at most 500) from `start`, deleted;
    /// where the next page starts, if one does.
    async fn delete_page(
        &self,
        what: &'static str,
        query: &Query,
        start: Option<Item>,
    ) -> Result<Option<Item>, StoreError> {
        let page = self.db.query_page(what, query, start, Some(500)).await?;
        let keys: Vec<Item> = page
            .items
            .iter()
            .map(|item| Key::of(item).map(|k| k.item()))
            .collect::<Result<_, _>>()?;
        if !keys.is_empty() {
            self.db.delete_all(what, keys, 4).await?;
        }
        Ok(page.next)
    }
}

/// `held` actors with `changes` applied: each added one in (once, at its
/// newest time), each taken back out unless it acted again since (a like
/// taken back and given again are two records, of two items, which may come
/// in either order), newest first, at most [`KEPT_ACTORS`]; and the newest
/// time added.
fn merge_actors(held: &[Actor], changes: &[ActorChange]) -> (Vec<Actor>, Option<String>) {
    let mut actors: Vec<Actor> = held.to_vec();
    let mut newest: Option<String> = None;
    for change in changes {
        if !change.added {
            actors.retain(|a| a.user_id != change.actor || a.at > change.at);
            continue;
        }
        if actors
            .iter()
            .any(|a| a.user_id == change.actor && a.at >= change.at)
        {
            continue;
        }
        actors.retain(|a| a.user_id != change.actor);
        actors.push(Actor {
            user_id: change.actor.clone(),
            at: change.at.clone(),
        });
        if newest.as_deref().is_none_or(|n| change.at.as_str() > n) {
            newest = Some(change.at.clone());
        }
    }
    actors.sort_by(|x, y| y.at.cmp(&x.at));
    actors.truncate(KEPT_ACTORS);
    (actors, newest)
}

fn actors_value(actors: &[Actor]) -> Result<AttributeValue, StoreError> {
    serde_dynamo::to_attribute_value(actors)
        .map_err(|e| StoreError::Internal(format!("actors: {e}")))
}

/// The condition that the group's actors are still `actors`.
fn same_actors(actors: &[Actor]) -> Result<Expr, StoreError> {
    Ok(if actors.is_empty() {
        Expr::new("attribute_not_exists(#actors)").name("#actors", a::ACTORS)
    } else {
        Expr::new("#actors = :held_actors")
            .name("#actors", a::ACTORS)
            .value(":held_actors", actors_value(actors)?)
    })
}

/// One notification as `GET /notifications` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// Its id in the list (stable while it exists).
    pub id: String,
    pub kind: NotificationKind,
    /// Whether it groups several (a post's likes, a hot post's comments,
    /// new followers) or is one (a comment, a mention).
    pub grouped: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_id: Option<PostId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment_id: Option<CommentId>,
    /// How many: a group's count less the recipient's own part; 1 for a note.
    pub count: u64,
    /// The newest actors, newest first, with their usernames as they are
    /// now (an actor whose account is gone is left out).
    pub actors: Vec<NamedActor>,
    /// A note's text: the start of the comment, or of the post's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    pub first_at: String,
    pub last_at: String,
    /// At or before the caller's `seenAt`.
    pub read: bool,
}

/// An actor and their username now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamedActor {
    pub user_id: UserId,
    pub username: crate::text::Username,
}

/// A page of the caller's notifications.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notifications {
    pub items: Vec<Notification>,
    /// Unread notifications, counted up to [`MAX_UNREAD`] (`unreadCount`
    /// equal to it means at least that many).
    pub unread_count: u64,
    /// Until when the caller has read them (`POST /notifications/seen`).
    pub seen_at: Option<String>,
    pub next_cursor: Option<String>,
}

/// What the list reads of an item: a group or a note.
enum Listed {
    Group(NotificationGroupItem),
    Note(NotificationItem),
}

impl Requests<'_> {
    /// `GET /notifications`: a page of `user`'s notifications, newest first.
    /// Calls: one Query of GSI1 (`NOTIFY#u`, newest first, `limit + 1`),
    /// the seen mark (GetItem) and whom the caller blocks (a Query of their
    /// partition, at most 1,000 keys) at once, then the count of the unread (a
    /// Query of GSI1, `Select: COUNT`, at most [`MAX_UNREAD`]), one
    /// BatchGetItem of the page's items, and one of their actors' profiles,
    /// the caller's own and the grouped posts (their counts now: at most
    /// 1 + 300 + 100 keys, up to 5 calls of 100): at most 10.
    pub async fn notifications(
        &self,
        user: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Notifications, StoreError> {
        let list = format!("notifications:{user}");
        let before = cursor
            .map(|c| {
                let raw = cursor::decode(c, &list)?;
                valid_place(&raw)
                    .then_some(raw)
                    .ok_or(StoreError::BadCursor(cursor::CursorError::Malformed))
            })
            .transpose()?;
        let mut query = Query::gsi1(keys::notify_pk(user)).newest_first();
        if let Some(before) = &before {
            query = query.before(before.clone());
        }
        let seen_key = NotificationsSeenItem::key_of(user).item();
        let (places, seen, blocked) = futures::try_join!(
            self.db
                .query_up_to("notifications", &query, None, limit.saturating_add(1)),
            self.db.get_entity::<NotificationsSeenItem>(seen_key, false),
            self.blocked_users(user),
        )?;
        let seen_at = seen.map(|s| s.seen_at);
        let unread_count = self.unread(user, seen_at.as_deref()).await?;
        let more = places.len() > limit;
        let places: Vec<(Key, String)> = places
            .iter()
            .take(limit)
            .map(|item| {
                let key = Key::of(item)?;
                let place = item
                    .get(GSI1SK)
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default();
                Ok((key, place))
            })
            .collect::<Result<_, keys::KeyError>>()?;
        let next_cursor = match places.last() {
            Some((_, place)) if more => Some(cursor::encode(&list, place)),
            _ => None,
        };
        let (found, _) = self
            .db
            .batch_get_with(
                "notifications",
                places.iter().map(|(k, _)| k.item()).collect(),
                false,
            )
            .await?;
        let mut by_key: HashMap<Key, Listed> = HashMap::new();
        for item in found {
            let key = Key::of(&item)?;
            let listed = match ItemType::of(&item) {
                Some(ItemType::NotificationGroup) => Listed::Group(from_item(item)?),
                Some(ItemType::Notification) => Listed::Note(from_item(item)?),
                _ => continue,
            };
            by_key.insert(key, listed);
        }
        // The actors' profiles (their names now), the caller's own (their
        // follower count) and the grouped posts (their counts), in one batch.
        let mut wanted: Vec<Item> = vec![UserItem::key(user)];
        let mut named = HashSet::from([user]);
        let mut posts = HashSet::new();
        for listed in by_key.values() {
            let ids: Vec<&UserId> = match listed {
                Listed::Group(g) => {
                    if let Some(post) = g.post_id.filter(|p| posts.insert(*p)) {
                        wanted.push(keys::post_item(&post).item());
                    }
                    g.actors.iter().map(|a| &a.user_id).collect()
                }
                Listed::Note(note) => vec![&note.actor],
            };
            for id in ids.into_iter().filter(|id| named.insert(*id)) {
                wanted.push(UserItem::key(id));
            }
        }
        let (found, _) = self
            .db
            .batch_get_with("notification actors and targets", wanted, false)
            .await?;
        let mut names: HashMap<UserId, crate::text::Username> = HashMap::new();
        let mut followers = 0;
        let mut counts: HashMap<PostId, (u64, u64)> = HashMap::new();
        for item in found {
            match ItemType::of(&item) {
                Some(ItemType::User) => {
                    let profile: UserItem = from_item(item)?;
                    if &profile.user_id == user {
                        followers = profile.follower_count();
                    }
                    names.insert(profile.user_id, profile.username);
                }
                Some(ItemType::Post) => {
                    let post: super::items::post::PostItem = from_item(item)?;
                    let in_shards = post.added_from_shards(crate::keys::Counter::Comments);
                    counts.insert(post.post_id, (post.like_count, in_shards));
                }
                _ => {}
            }
        }
        // Someone the caller blocks tells them nothing (what they did before
        // the block stays in the counts it is part of).
        let named = |id: &UserId| {
            if blocked.contains(id) {
                return None;
            }
            names.get(id).map(|username| NamedActor {
                user_id: id.clone(),
                username: username.clone(),
            })
        };
        let read = |at: &str| seen_at.as_deref().is_some_and(|seen| at <= seen);
        let mut items = Vec::with_capacity(places.len());
        for (key, _) in &places {
            let Some(listed) = by_key.remove(key) else {
                continue;
            };
            let item = match listed {
                Listed::Group(group) => {
                    // The target's count now (a post gone counts nothing).
                    let target = match (group.kind, group.post_id) {
                        (NotificationKind::Follow, _) => followers,
                        (NotificationKind::Like, Some(post)) => {
                            counts.get(&post).map_or(0, |c| c.0)
                        }
                        (NotificationKind::Comment, Some(post)) => {
                            counts.get(&post).map_or(0, |c| c.1)
                        }
                        _ => 0,
                    };
                    let count = target.saturating_sub(group.own());
                    let Some(last_at) = group.last_at.clone() else {
                        continue;
                    };
                    if count == 0 {
                        continue;
                    }
                    Notification {
                        id: key.sk.clone(),
                        kind: group.kind,
                        grouped: true,
                        post_id: group.post_id,
                        comment_id: None,
                        count,
                        actors: group
                            .actors
                            .iter()
                            .filter_map(|a| named(&a.user_id))
                            .take(GROUP_ACTORS)
                            .collect(),
                        preview: None,
                        first_at: group.first_at.clone().unwrap_or_else(|| last_at.clone()),
                        read: read(&last_at),
                        last_at,
                    }
                }
                Listed::Note(note) => {
                    // A note whose writer is gone goes with them.
                    let Some(actor) = named(&note.actor) else {
                        continue;
                    };
                    Notification {
                        id: key.sk.clone(),
                        kind: note.kind,
                        grouped: false,
                        post_id: Some(note.post_id),
                        comment_id: note.comment_id,
                        count: 1,
                        actors: vec![actor],
                        preview: Some(note.preview),
                        first_at: note.at.clone(),
                        read: read(&note.at),
                        last_at: note.at,
                    }
                }
            };
            items.push(item);
        }
        Ok(Notifications {
            items,
            unread_count,
            seen_at,
            next_cursor,
        })
    }

    /// How many of `user`'s notifications are newer than `seen_at`, up to
    /// [`MAX_UNREAD`]: one counting Query of GSI1.
    async fn unread(&self, user: &UserId, seen_at: Option<&str>) -> Result<u64, StoreError> {
        let mut query = Query::gsi1(keys::notify_pk(user)).count();
        if let Some(seen) = seen_at {
            // Every place after the time: `<at>#…` sorts after `<seen>` and
            // its `#` when `at` is later, and so does one at the very time
            // ('#' is after nothing here), which is read: `~` is after `#`.
            query = query.after(format!("{seen}~"));
        }
        let limit = i32::try_from(MAX_UNREAD).unwrap_or(i32::MAX);
        let page = self
            .db
            .query_page("unread notifications", &query, None, Some(limit))
            .await?;
        Ok(page.count)
    }

    /// `POST /notifications/seen`: `user` has read their notifications up
    /// to `at` (never moved back: an older `at` changes nothing). One
    /// conditional UpdateItem.
    pub async fn mark_seen(&self, user: &UserId, at: &str) -> Result<String, StoreError> {
        let change = Expr::new("SET #seen = :at, #type = :type, #user = :user")
            .name("#seen", "seenAt")
            .name("#type", keys::TYPE)
            .name("#user", a::USER_ID)
            .value(":at", s(at))
            .value(":type", ItemType::NotificationsSeen.attribute()?)
            .value(":user", s(user.as_str()));
        let newer = Expr::new("attribute_not_exists(#seen) OR #seen < :at")
            .name("#seen", "seenAt")
            .value(":at", s(at));
        let key = NotificationsSeenItem::key_of(user).item();
        let write =
            Write::update(key.clone(), change, Landed::When(vec![("seenAt", s(at))])).when(newer);
        if self
            .db
            .write("mark notifications seen", &write)
            .await?
            .done()
        {
            return Ok(at.to_owned());
        }
        let held: Option<NotificationsSeenItem> = self.db.get_entity(key, true).await?;
        Ok(held.map_or_else(|| at.to_owned(), |h| h.seen_at))
    }
}

/// Whether `raw` (a cursor's) is a place in a notifications list: a time,
/// then a group's or a note's sort key.
fn valid_place(raw: &str) -> bool {
    let Some((at, sk)) = raw.split_once('#') else {
        return false;
    };
    timestamp::parse(at).is_some()
        && (sk.starts_with("GROUP#") || sk.starts_with("NOTE#"))
        && sk.len() < 200
        && sk
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '#' || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actor(name: &str, at: &str) -> Actor {
        Actor {
            user_id: UserId::parse(name).expect("id"),
            at: at.to_owned(),
        }
    }

    fn change(name: &str, at: &str, added: bool) -> ActorChange {
        ActorChange {
            actor: UserId::parse(name).expect("id"),
            at: at.to_owned(),
            added,
        }
    }

    #[test]
    fn a_batch_keeps_the_newest_actors_once_and_takes_back_what_was_taken_back() {
        let held = [
            actor("ann", "2026-01-01T00:00:02Z"),
            actor("bob", "2026-01-01T00:00:01Z"),
        ];
        let (merged, newest) = merge_actors(
            &held,
            &[
                change("cat", "2026-01-01T00:00:03Z", true),
                change("dan", "2026-01-01T00:00:04Z", true),
                change("ann", "2026-01-01T00:00:05Z", true),
                change("dan", "2026-01-01T00:00:04Z", false),
            ],
        );
        let names: Vec<&str> = merged.iter().map(|a| a.user_id.as_str()).collect();
        assert_eq!(names, ["ann", "cat", "bob"]);
        assert_eq!(newest.as_deref(), Some("2026-01-01T00:00:05Z"));
        // A like taken back whose record comes after the same liker's next
        // like (two items, two orders): the newer stays.
        let (merged, _) = merge_actors(
            &[actor("ann", "2026-01-01T00:00:09Z")],
            &[change("ann", "2026-01-01T00:00:02Z", false)],
        );
        assert_eq!(merged.len(), 1);
    }

    #[test]
    fn a_cursor_names_a_place_in_the_list_or_nothing() {
        assert!(valid_place(
            "2026-01-01T00:00:05.000Z#GROUP#like#01J00000000000000000000000"
        ));
        assert!(valid_place(
            "2026-01-01T00:00:05.000Z#NOTE#mention#01J0000000"
        ));
        assert!(!valid_place("2026-01-01T00:00:05.000Z#POST#x"));
        assert!(!valid_place("yesterday#GROUP#like"));
        assert!(!valid_place("2026-01-01T00:00:05.000Z#GROUP#a b"));
    }
}
