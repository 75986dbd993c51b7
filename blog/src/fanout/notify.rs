//! The fan-out's notifications ([`crate::store::notifications`]): what each
//! record tells a post's author, a followed user or a mentioned one.
//!
//! A group holds no count (the list reads its target's own); its actors and
//! the notes come from the like, comment and follower records themselves,
//! applied once a batch by [`apply_batch`] after the rules: one write a
//! group a batch, so a viral post's thousands of likes a second make a
//! bounded number of writes on its author's partition: one a batch of each
//! stream shard its records are on (the mapping's batching window of 1 s
//! holds a shard to about one batch a second until its batches fill at
//! 1,000 records).

use std::collections::HashMap;

use aws_lambda_events::event::dynamodb::EventRecord;
use futures::StreamExt;

use super::{
    FanoutError,
    record::{Change, decode},
};
use crate::{
    ids::{PostId, UserId},
    keys::ItemType,
    store::{
        Store,
        items::comment::CommentItem,
        items::follow::FollowerItem,
        items::like::LikeItem,
        items::notification::{NotificationItem, NotificationKind},
        items::post::PostItem,
        notifications::{ActorChange, GroupOf},
    },
};

/// A batch's notification groups written at once, at most.
const CONCURRENT_GROUPS: usize = 16;

/// The mentions of a post, between its image `before` a change (`None`: it
/// is new) and `after` it (`None`: deleted): a user it mentions once it is
/// published (or mentions anew in an edit of a published post) gets a
/// note; one it no longer mentions, or all of them when it is deleted or
/// taken back, loses it. The author never notifies themselves.
pub(super) async fn post_mentions(
    store: &Store,
    before: Option<&PostItem>,
    after: Option<&PostItem>,
) -> Result<usize, FanoutError> {
    let told = |post: Option<&PostItem>| -> Vec<UserId> {
        post.filter(|p| p.listed_id().is_some())
            .map(|p| {
                p.mentions
                    .iter()
                    .map(|(_, user)| user.clone())
                    .filter(|user| *user != p.user_id)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (was, now) = (told(before), told(after));
    let fanout = store.fanout();
    let mut writes = 0;
    if let Some(post) = after {
        for user in now.iter().filter(|u| !was.contains(u)) {
            fanout
                .put_note(&NotificationItem::mention_in_post(user, post))
                .await?;
            writes += 1;
        }
    }
    if let Some(post) = before.or(after) {
        for user in was.iter().filter(|u| !now.contains(u)) {
            fanout
                .delete_note(&NotificationItem::mention_in_post(user, post))
                .await?;
            writes += 1;
        }
    }
    Ok(writes)
}

/// A post taken back to a draft (a post MODIFY): its groups out of its
/// author's notifications, as its deletion takes them.
pub(super) async fn post_taken_back(store: &Store, post: &PostItem) -> Result<usize, FanoutError> {
    post_removed(store, post).await?;
    Ok(2)
}

/// A deleted post's groups out of its author's notifications.
pub(super) async fn post_removed(store: &Store, post: &PostItem) -> Result<(), FanoutError> {
    store
        .fanout()
        .drop_post_groups(&post.user_id, &post.post_id)
        .await?;
    Ok(())
}

/// What one record tells, before the post's author is known.
enum Told {
    Like {
        post: PostId,
        actor: UserId,
        like: String,
        at: String,
        added: bool,
    },
    Comment {
        item: CommentItem,
        added: bool,
    },
    Follower {
        item: FollowerItem,
        added: bool,
    },
}

/// What a record tells, if it is a like's, a comment's or a follower's
/// INSERT or REMOVE.
fn told(record: &EventRecord) -> Result<Option<Told>, FanoutError> {
    let Some(change) = Change::of(record) else {
        return Ok(None);
    };
    let (image, which) = match change {
        Change::Insert => (&record.change.new_image, "new"),
        Change::Remove => (&record.change.old_image, "old"),
        Change::Modify => return Ok(None),
    };
    let added = change == Change::Insert;
    let kind = image
        .get(crate::keys::TYPE)
        .and_then(|v| serde_dynamo::from_attribute_value::<_, ItemType>(v.clone()).ok());
    Ok(match kind {
        Some(ItemType::Like) => {
            let like: LikeItem = decode(image, which)?;
            Some(Told::Like {
                post: like.post_id,
                actor: like.user_id,
                like: like.like_id.to_string(),
                at: like.created_at,
                added,
            })
        }
        Some(ItemType::Comment) => Some(Told::Comment {
            item: decode(image, which)?,
            added,
        }),
        Some(ItemType::Follower) => Some(Told::Follower {
            item: decode(image, which)?,
            added,
        }),
        _ => None,
    })
}

/// The batch's notifications from its like, comment and follower records:
/// each group's actor changes in one write (the groups at once), each note
/// put or taken out, the author's own likes and comments kept apart. The
/// posts the records are about are read once each (their authors; a post
/// gone or not published notifies no one). On a failure, the index of the
/// first record whose notification failed (of a group's, its first):
/// reported, it and every record after it come again (each write here is
/// idempotent).
pub(super) async fn apply_batch(store: &Store, records: &[EventRecord]) -> Result<usize, usize> {
    let mut groups: HashMap<GroupOf, (usize, Vec<ActorChange>)> = HashMap::new();
    let mut authors: HashMap<PostId, Option<PostItem>> = HashMap::new();
    let mut writes = 0;
    let fanout = store.fanout();
    for (index, record) in records.iter().enumerate() {
        let told = match told(record) {
            Ok(Some(told)) => told,
            Ok(None) => continue,
            Err(error) => {
                tracing::error!(%error, "a notification's record does not decode");
                return Err(index);
            }
        };
        // A comment's mentions, whatever became of its post: a note each
        // for the users it names (not the commenter), taken back with it.
        if let Told::Comment { item, added } = &told {
            for (_, user) in item.mentions.iter().filter(|(_, u)| **u != item.user_id) {
                let note = NotificationItem::mention_in_comment(user, item);
                let done = if *added {
                    fanout.put_note(&note).await
                } else {
                    fanout.delete_note(&note).await
                };
                if let Err(error) = done {
                    tracing::error!(%error, "a mention's notification could not be written");
                    return Err(index);
                }
                writes += 1;
            }
        }
        let post = match &told {
            Told::Like { post, .. } => Some(*post),
            Told::Comment { item, .. } => Some(item.post_id),
            Told::Follower { .. } => None,
        };
        let author = match post {
            Some(post) => {
                if let std::collections::hash_map::Entry::Vacant(slot) = authors.entry(post) {
                    let read = fanout.published_post(&post).await.map_err(|error| {
                        tracing::error!(%error, "a notified post could not be read");
                        index
                    })?;
                    slot.insert(read);
                }
                match authors.get(&post) {
                    Some(Some(post)) => Some(post.user_id.clone()),
                    // Gone or not published: nobody is told.
                    _ => continue,
                }
            }
            None => None,
        };
        let done = match told {
            Told::Like {
                post,
                actor,
                like,
                at,
                added,
            } => {
                let Some(author) = author else { continue };
                let group = GroupOf {
                    recipient: author.clone(),
                    kind: NotificationKind::Like,
                    post: Some(post),
                };
                if actor == author {
                    fanout.own_like(&group, &like, added).await.map(|_| 1)
                } else {
                    let slot = groups.entry(group).or_insert((index, Vec::new()));
                    slot.1.push(ActorChange { actor, at, added });
                    Ok(0)
                }
            }
            Told::Comment { item, added } => {
                let Some(author) = author else { continue };
                if item.counted_in.is_some() {
                    let group = GroupOf {
                        recipient: author.clone(),
                        kind: NotificationKind::Comment,
                        post: Some(item.post_id),
                    };
                    if item.user_id == author {
                        fanout
                            .own_comment(&group, &item.comment_id, added)
                            .await
                            .map(|_| 1)
                    } else {
                        let slot = groups.entry(group).or_insert((index, Vec::new()));
                        slot.1.push(ActorChange {
                            actor: item.user_id,
                            at: item.created_at,
                            added,
                        });
                        Ok(0)
                    }
                } else if item.user_id == author {
                    continue;
                } else {
                    let note = NotificationItem::comment_on_post(&author, &item);
                    let done = if added {
                        fanout.put_note(&note).await
                    } else {
                        fanout.delete_note(&note).await
                    };
                    done.map(|()| 1)
                }
            }
            Told::Follower { item, added } => {
                let group = GroupOf {
                    recipient: item.user_id.clone(),
                    kind: NotificationKind::Follow,
                    post: None,
                };
                let slot = groups.entry(group).or_insert((index, Vec::new()));
                slot.1.push(ActorChange {
                    actor: item.follower_id,
                    at: item.created_at,
                    added,
                });
                Ok(0)
            }
        };
        match done {
            Ok(n) => writes += n,
            Err(error) => {
                tracing::error!(%error, "a notification could not be written");
                return Err(index);
            }
        }
    }
    // The groups at once (each its own item): of those that fail, the one
    // with the lowest first record is reported.
    let changing = groups.into_iter().map(|(group, (first, changes))| {
        let fanout = store.fanout();
        async move { (first, fanout.change_actors(&group, &changes).await) }
    });
    let changed: Vec<_> = futures::stream::iter(changing)
        .buffer_unordered(CONCURRENT_GROUPS)
        .collect()
        .await;
    let mut failed: Option<usize> = None;
    for (first, changed) in changed {
        match changed {
            Ok(written) => writes += usize::from(written),
            Err(error) => {
                tracing::error!(%error, "a notification group could not be written");
                failed = Some(failed.map_or(first, |f| f.min(first)));
            }
        }
    }
    failed.map_or(Ok(writes), Err)
}
