//! Quiet posts written fast, seen from the stream. A like or a comment on a
//! quiet post moves the post item's count in its transaction, so the post's
//! MODIFY records are every like and comment it takes, from every instance:
//! where one instance sees only its own requests' share
//! ([`crate::store::memory::WriteRates`]), the fan-out sees the post's whole
//! rate. A batch whose records show a quiet post's counts rising at twice
//! the instance rate ([`Store::hot_rate`]: 50 likes and comments a second,
//! about 300 WCU, 30 % of its partition) makes it hot, a second or two
//! after the rate rose (the stream's batching window), before its partition
//! refuses anything unless the rate climbs faster than that. Best effort:
//! a switch that fails is logged, the batch goes on, and a throttle of the
//! post's partition still turns it hot.

use std::collections::HashMap;

use aws_lambda_events::event::dynamodb::EventRecord;

use super::{Change, post_key, record::decode, rules::Rule};
use crate::{
    ids::PostId,
    keys::PostPartition,
    store::{Store, items::post::PostCountsImage},
};

/// How many times the instance rate the fan-out's threshold is.
const FAN_OUT_FACTOR: f64 = 2.0;

/// Makes hot each quiet post `records` show written at the fan-out's rate
/// ([`fast_posts`]).
pub(super) async fn make_fast_posts_hot(store: &Store, records: &[EventRecord]) {
    let Some(rate) = store.hot_rate() else {
        return;
    };
    let posts = fast_posts(records, rate * FAN_OUT_FACTOR);
    let fanout = store.fanout();
    let switches = posts.iter().map(|post| async move {
        tracing::info!(post_id = %post, "the stream shows a quiet post written fast: turning it hot");
        if let Err(error) = fanout.make_hot_by_rate(post).await {
            tracing::warn!(post_id = %post, %error, "a post written fast not turned hot");
        }
    });
    futures::future::join_all(switches).await;
}

/// The quiet posts whose counts `records` show rising at `threshold` a
/// second or more: each post MODIFY that raises a quiet post's likes and
/// comments is one, over the seconds between the first and the last of
/// them (`ApproximateCreationDateTime`, whole seconds; one at least).
pub(super) fn fast_posts(records: &[EventRecord], threshold: f64) -> Vec<PostId> {
    // Per post: how many rises, the first and the last second.
    let mut rises: HashMap<PostId, (u64, i64, i64)> = HashMap::new();
    for record in records {
        if Change::of(record) != Some(Change::Modify) || Rule::of(record) != Some(Rule::ChangedPost)
        {
            continue;
        }
        let Some(post) = post_key(record)
            .and_then(|key| PostPartition::of_pk(&key.pk))
            .filter(|place| place.shard.is_none())
            .map(|place| place.post)
        else {
            continue;
        };
        let images = (
            decode::<PostCountsImage>(&record.change.old_image, "old"),
            decode::<PostCountsImage>(&record.change.new_image, "new"),
        );
        let (Ok(old), Ok(new)) = images else {
            continue;
        };
        if !new.quiet() || new.counted() <= old.counted() {
            continue;
        }
        let second = record.change.approximate_creation_date_time.timestamp();
        let seen = rises.entry(post).or_insert((0, second, second));
        seen.0 += new.counted() - old.counted();
        seen.1 = seen.1.min(second);
        seen.2 = seen.2.max(second);
    }
    let mut fast: Vec<PostId> = rises
        .into_iter()
        .filter(|(_, (count, first, last))| {
            let seconds = (last - first + 1).max(1) as f64;
            *count as f64 / seconds >= threshold
        })
        .map(|(post, _)| post)
        .collect();
    fast.sort();
    fast
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use aws_lambda_events::event::dynamodb::EventRecord;
    use chrono::{TimeZone, Utc};
    use serde_dynamo::AttributeValue;

    use super::fast_posts;
    use crate::{
        ids::PostId,
        keys::{Key, PostPartition},
    };

    /// A post MODIFY of `post` at `second`, its counts from `was` to `now`,
    /// `hot` or quiet.
    fn modify(post: PostId, was: u64, now: u64, second: i64, hot: bool) -> EventRecord {
        let mut record = EventRecord::default();
        let key = Key::new(PostPartition::own(post).pk(), crate::keys::POST_SK);
        record.change.keys = serde_dynamo::to_item(key).expect("keys");
        record.event_name = "MODIFY".to_owned();
        let image = |likes: u64| {
            let mut image = HashMap::from([
                ("type".to_owned(), AttributeValue::S("post".to_owned())),
                ("likeCount".to_owned(), AttributeValue::N(likes.to_string())),
                ("commentCount".to_owned(), AttributeValue::N("0".to_owned())),
            ]);
            if hot {
                image.insert("shards".to_owned(), AttributeValue::N("16".to_owned()));
            }
            image.into()
        };
        record.change.old_image = image(was);
        record.change.new_image = image(now);
        record.change.approximate_creation_date_time = Utc
            .timestamp_opt(1_800_000_000 + second, 0)
            .single()
            .expect("a time");
        record
    }

    /// `count` likes of `post` spread evenly over `seconds`, from `from`.
    fn likes(post: PostId, from: u64, count: u64, seconds: i64, hot: bool) -> Vec<EventRecord> {
        (0..count)
            .map(|i| {
                let second =
                    i64::try_from(i).unwrap_or(0) * seconds / i64::try_from(count).unwrap_or(1);
                modify(post, from + i, from + i + 1, second, hot)
            })
            .collect()
    }

    #[test]
    fn a_quiet_post_whose_counts_rise_at_the_rate_is_found_and_no_other() {
        let (fast, slow, hot, edited) = (
            PostId::generate(),
            PostId::generate(),
            PostId::generate(),
            PostId::generate(),
        );
        let mut records = likes(fast, 0, 120, 2, false);
        // 30 a second for two seconds: below 50.
        records.extend(likes(slow, 7, 60, 2, false));
        // Hot already: its counts are its shards' business.
        records.extend(likes(hot, 0, 200, 1, true));
        // Edited 100 times, its counts unchanged.
        records.extend((0..100).map(|_| modify(edited, 3, 3, 0, false)));
        assert_eq!(fast_posts(&records, 50.0), vec![fast]);
        // A post's INSERT or REMOVE is no rise.
        let mut made = modify(fast, 0, 1, 0, false);
        made.event_name = "INSERT".to_owned();
        assert_eq!(fast_posts(&[made], 0.5), Vec::<PostId>::new());
        assert_eq!(
            fast_posts(&records[..1], 0.5),
            vec![fast],
            "one rise in a second"
        );
        assert_eq!(fast_posts(&[], 50.0), Vec::<PostId>::new());
    }
}
