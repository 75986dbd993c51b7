//! The fan-out's first-pages step ([`crate::store::first_pages`]): once a
//! batch, after the rules, each hot post's copy of its likes' and of its
//! comments' first page kept covering the batch's records of them.
//!
//! A record is a hot post's when its image says so (a like or comment in a
//! shard, `shard`; a comment counted in one, `countedIn`), or when the
//! batch holds a MODIFY of its post that has `shards` (a like or comment
//! given while the post was quiet, taken back once it is hot: its count
//! changed the post item in the same transaction, in the same stream
//! shard). A copy's own INSERT or MODIFY with `due` asks for the rebuild it
//! marks.

use std::collections::{BTreeMap, HashSet};

use aws_lambda_events::event::dynamodb::EventRecord;
use futures::StreamExt;

use super::record::{Change, decode};
use crate::{
    ids::PostId,
    keys::{ItemType, PostPartition},
    store::{
        Store,
        first_pages::{Reach, Wanted},
        items::comment::CommentItem,
        items::first_page::{FirstPageItem, PageList},
        items::like::LikeItem,
        items::post::SHARDS_ATTRIBUTE,
    },
};

/// Copies a batch keeps at once.
const CONCURRENT_COPIES: usize = 16;

/// What the records of a batch `received` then (epoch ms) ask of each hot
/// post's copies, with the index of the first record of each (reported
/// when its copy fails).
fn wanted(records: &[EventRecord], received: u64) -> BTreeMap<(PostId, PageList), (usize, Wanted)> {
    let hot_posts: HashSet<PostId> = records
        .iter()
        .filter(|record| Change::of(record) == Some(Change::Modify))
        .filter(|record| record.change.new_image.contains_key(SHARDS_ATTRIBUTE))
        .filter(|record| kind(&record.change.new_image) == Some(ItemType::Post))
        .filter_map(|record| {
            let pk = record.change.keys.get(crate::keys::PK)?;
            let pk: String = serde_dynamo::from_attribute_value(pk.clone()).ok()?;
            PostPartition::of_pk(&pk)
                .filter(|place| place.shard.is_none())
                .map(|place| place.post)
        })
        .collect();
    let mut wanted: BTreeMap<(PostId, PageList), (usize, Wanted)> = BTreeMap::new();
    for (index, record) in records.iter().enumerate() {
        let Some(asked) = asked(record, &hot_posts, received) else {
            continue;
        };
        let (key, more) = asked;
        wanted
            .entry(key)
            .and_modify(|(_, was)| *was = was.and(more))
            .or_insert((index, more));
    }
    wanted
}

/// What one record of a batch `received` then (epoch ms) asks of a copy,
/// if it is a hot post's like or comment (made or taken back), or a copy's
/// rebuild due.
fn asked(
    record: &EventRecord,
    hot_posts: &HashSet<PostId>,
    received: u64,
) -> Option<((PostId, PageList), Wanted)> {
    let change = Change::of(record)?;
    let image = match change {
        Change::Remove => &record.change.old_image,
        Change::Insert | Change::Modify => &record.change.new_image,
    };
    let reply = |post: PostId, list: PageList, hot: bool, reach: Reach| {
        (hot || hot_posts.contains(&post)).then_some((
            (post, list),
            Wanted {
                need: received,
                due: false,
                added: change == Change::Insert,
                reach,
            },
        ))
    };
    match (kind(image)?, change) {
        (ItemType::Like, Change::Insert | Change::Remove) => {
            let like: LikeItem = decode(image, "like").ok()?;
            let reach = Reach::Likes {
                newest: like.like_id,
            };
            reply(like.post_id, PageList::Likes, like.shard.is_some(), reach)
        }
        (ItemType::Comment, Change::Insert | Change::Remove) => {
            let comment: CommentItem = decode(image, "comment").ok()?;
            let hot = comment.shard.is_some() || comment.counted_in.is_some();
            let reach = Reach::Comments {
                oldest: comment.comment_id,
            };
            reply(comment.post_id, PageList::Comments, hot, reach)
        }
        (ItemType::FirstPage, Change::Insert | Change::Modify) => {
            let copy: FirstPageItem = decode(image, "new").ok()?;
            let due = copy.due?;
            Some((
                (copy.post_id, copy.list),
                Wanted {
                    need: due,
                    due: true,
                    added: false,
                    reach: Reach::Anywhere,
                },
            ))
        }
        _ => None,
    }
}

/// The item type an image says it is.
fn kind(image: &serde_dynamo::Item) -> Option<ItemType> {
    image
        .get(crate::keys::TYPE)
        .and_then(|v| serde_dynamo::from_attribute_value::<_, ItemType>(v.clone()).ok())
}

/// The first-pages step of a batch `received` then (epoch ms: every
/// record of it was written before): the copies its records ask about read in
/// one BatchGetItem (eventually consistent), then each kept
/// ([`crate::store::FanOut::keep_first_page`]), [`CONCURRENT_COPIES`] at
/// once. How many writes landed; on a failure, the index of the first
/// record of the first copy that failed: reported, it and every record
/// after it come again (each write here is conditional, a rebuild repeated
/// is a copy as good).
pub(super) async fn apply_batch(
    store: &Store,
    records: &[EventRecord],
    received: u64,
) -> Result<usize, usize> {
    let wanted = wanted(records, received);
    let Some(first) = wanted.values().map(|(index, _)| *index).min() else {
        return Ok(0);
    };
    let fanout = store.fanout();
    let keys: Vec<(PostId, PageList)> = wanted.keys().copied().collect();
    let mut copies = fanout.first_pages(&keys).await.map_err(|error| {
        tracing::error!(%error, "hot posts' first pages could not be read");
        first
    })?;
    let keeping = wanted.into_iter().map(|((post, list), (index, asked))| {
        let read = copies.remove(&(post, list));
        let fanout = store.fanout();
        async move {
            let kept = fanout.keep_first_page(&post, list, asked, read).await;
            (index, post, kept)
        }
    });
    let kept: Vec<_> = futures::stream::iter(keeping)
        .buffer_unordered(CONCURRENT_COPIES)
        .collect()
        .await;
    let mut writes = 0;
    let mut failed: Option<usize> = None;
    for (index, post, kept) in kept {
        match kept {
            Ok(n) => writes += n,
            Err(error) => {
                tracing::error!(post_id = %post, %error, "a hot post's first page could not be kept");
                failed = Some(failed.map_or(index, |f| f.min(index)));
            }
        }
    }
    failed.map_or(Ok(writes), Err)
}

#[cfg(test)]
mod tests {
    use aws_lambda_events::event::dynamodb::EventRecord;
    use serde_json::json;

    use super::wanted;
    use crate::{
        ids::PostId,
        keys::{Entity, PostPartition},
        store::{
            first_pages::{Reach, Wanted},
            items::first_page::{FirstPageItem, PageList},
        },
    };

    fn record(event: &str, image: serde_json::Value) -> EventRecord {
        let mut record = EventRecord::default();
        record.event_name = event.to_owned();
        let item: serde_dynamo::Item = serde_dynamo::to_item(image).expect("an image");
        let keys: std::collections::HashMap<String, serde_dynamo::AttributeValue> = item
            .iter()
            .filter(|(name, _)| *name == "PK" || *name == "SK")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        record.change.keys = keys.into();
        if event == "REMOVE" {
            record.change.old_image = item;
        } else {
            record.change.new_image = item;
        }
        record
    }

    fn like(post: PostId, shard: Option<u8>) -> serde_json::Value {
        let place = PostPartition { post, shard };
        let mut image = json!({
            "PK": place.pk(), "SK": "LIKE#01J00000000000000000000002", "type": "like",
            "likeId": "01J00000000000000000000002", "postId": post.to_string(),
            "userId": "user-1", "username": "alice", "userVersion": 1,
            "createdAt": "2026-11-28T12:00:00Z",
        });
        if let Some(k) = shard {
            image["shard"] = json!(k);
        }
        image
    }

    fn copy(post: PostId, due: Option<u64>) -> serde_json::Value {
        let copy = FirstPageItem {
            due,
            ..FirstPageItem::made(post, PageList::Likes, Vec::new(), false, 16, 5)
        };
        let item = copy.to_item().expect("an item");
        serde_dynamo::from_item(item).expect("json")
    }

    #[test]
    fn a_batch_asks_about_hot_posts_likes_and_comments_and_due_copies_only() {
        let (hot, quiet, cooled, copied) = (
            PostId::generate(),
            PostId::generate(),
            PostId::generate(),
            PostId::generate(),
        );
        let post_modify = json!({
            "PK": format!("POST#{cooled}"), "SK": "POST", "type": "post", "shards": 16,
        });
        let records = [
            record("INSERT", like(quiet, None)),
            record("INSERT", like(hot, Some(3))),
            // A like given while `cooled` was quiet, taken back once hot:
            // its count changed the post, whose MODIFY has `shards`.
            record("REMOVE", like(cooled, None)),
            record("MODIFY", post_modify),
            record("MODIFY", copy(copied, None)),
            record("MODIFY", copy(copied, Some(9_000))),
        ];
        let asked = wanted(&records, 7_000);
        let like_id = crate::ids::LikeId::parse("01J00000000000000000000002").expect("an id");
        let liked = Reach::Likes { newest: like_id };
        let at = |need, due, added, reach| Wanted {
            need,
            due,
            added,
            reach,
        };
        assert_eq!(
            asked.into_iter().collect::<Vec<_>>(),
            {
                let mut expected = vec![
                    ((hot, PageList::Likes), (1, at(7_000, false, true, liked))),
                    (
                        (cooled, PageList::Likes),
                        (2, at(7_000, false, false, liked)),
                    ),
                    (
                        (copied, PageList::Likes),
                        (5, at(9_000, true, false, Reach::Anywhere)),
                    ),
                ];
                expected.sort_by_key(|(key, _)| *key);
                expected
            },
            "the quiet post's like and the copy without `due` ask nothing"
        );
    }
}
