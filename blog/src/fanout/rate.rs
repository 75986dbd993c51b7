//! Posts written fast, seen from the stream. A like or a comment on a
//! quiet post moves the post item's count in its transaction, so the post's
//! MODIFY records are every like and comment it takes, from every instance:
//! where one instance sees only its own requests' share
//! ([`crate::store::memory::WriteRates`]), the fan-out sees the post's whole
//! rate. A batch whose records show a quiet post's counts rising at twice
//! the instance rate ([`Store::hot_rate`]: 50 likes and comments a second,
//! about 300 WCU, 30 % of its partition) makes it hot, a second or two
//! after the rate rose (the stream's batching window), before its partition
//! refuses anything unless the rate climbs faster than that.
//!
//! Once hot, each like, unlike and comment moves its shard's counter
//! (`version` one up), so the shard counters' MODIFY records are the hot
//! post's whole rate: a batch whose records show them written at that same
//! rate a shard (16 shards: 800 writes a second) widens the post to 128
//! shards before its shards refuse anything; a deployed instance never sees
//! that much of one post (its own share), so a widening otherwise waits for
//! a shard's throttle.
//!
//! Best effort: a switch or a widening that fails is logged, the batch goes
//! on, and a throttle of the post's partition or of a shard still does it.

use std::collections::HashMap;

use aws_lambda_events::event::dynamodb::EventRecord;

use super::{Change, post_key, record::decode, rules::Rule};
use crate::{
    ids::PostId,
    keys::PostPartition,
    store::{
        Store,
        items::{counter::ShardCounterItem, post::PostCountsImage},
    },
};

/// How many times the instance rate the fan-out's threshold is.
const FAN_OUT_FACTOR: f64 = 2.0;

/// Makes hot each quiet post `records` show written at the fan-out's rate
/// ([`fast_posts`]), and widens each hot post whose shards they show
/// written at that rate a shard ([`shard_rates`]).
pub(super) async fn make_fast_posts_hot(store: &Store, records: &[EventRecord]) {
    let Some(rate) = store.hot_rate() else {
        return;
    };
    let threshold = rate * FAN_OUT_FACTOR;
    let posts = fast_posts(records, threshold);
    let fanout = store.fanout();
    let switches = posts.iter().map(|post| async move {
        tracing::info!(post_id = %post, "the stream shows a quiet post written fast: turning it hot");
        if let Err(error) = fanout.make_hot_by_rate(post).await {
            tracing::warn!(post_id = %post, %error, "a post written fast not turned hot");
        }
    });
    // How many partitions each hot post's writes would fill at the rate.
    let hot = shard_rates(records)
        .into_iter()
        .map(|(post, written)| (post, written / threshold))
        .filter(|(_, partitions)| {
            *partitions >= f64::from(crate::store::items::counter::HOT_SHARDS)
        });
    let widenings = hot.map(|(post, partitions)| async move {
        if let Err(error) = fanout.widen_by_rate(&post, partitions).await {
            tracing::warn!(post_id = %post, %error, "a hot post written fast not widened");
        }
    });
    futures::join!(
        futures::future::join_all(switches),
        futures::future::join_all(widenings)
    );
}

/// Per post: how many writes, over which seconds (the first and the last,
/// `ApproximateCreationDateTime`, whole seconds).
#[derive(Default)]
struct Rises(HashMap<PostId, (u64, i64, i64)>);

impl Rises {
    fn add(&mut self, post: PostId, count: u64, record: &EventRecord) {
        let second = record.change.approximate_creation_date_time.timestamp();
        let seen = self.0.entry(post).or_insert((0, second, second));
        seen.0 += count;
        seen.1 = seen.1.min(second);
        seen.2 = seen.2.max(second);
    }

    /// Each post's writes a second, over the seconds from its first record
    /// to its last (one at least).
    fn rates(self) -> impl Iterator<Item = (PostId, f64)> {
        self.0.into_iter().map(|(post, (count, first, last))| {
            let seconds = (last - first + 1).max(1) as f64;
            (post, count as f64 / seconds)
        })
    }
}

/// The quiet posts whose counts `records` show rising at `threshold` a
/// second or more: each post MODIFY that raises a quiet post's likes and
/// comments is one, over the seconds between the first and the last of
/// them.
pub(super) fn fast_posts(records: &[EventRecord], threshold: f64) -> Vec<PostId> {
    let mut rises = Rises::default();
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
        rises.add(post, new.counted() - old.counted(), record);
    }
    let mut fast: Vec<PostId> = rises
        .rates()
        .filter(|(_, rate)| *rate >= threshold)
        .map(|(post, _)| post)
        .collect();
    fast.sort();
    fast
}

/// The hot posts whose shard counters `records` show written, and at how
/// many writes a second: each counter MODIFY is as many likes, unlikes,
/// comments and comment deletions as its `version` rose, over the seconds
/// between the first and the last of them, all the post's shards together.
pub(super) fn shard_rates(records: &[EventRecord]) -> Vec<(PostId, f64)> {
    let mut rises = Rises::default();
    for record in records {
        if Rule::of(record) != Some(Rule::ShardCounts) {
            continue;
        }
        let images = (
            decode::<ShardCounterItem>(&record.change.old_image, "old"),
            decode::<ShardCounterItem>(&record.change.new_image, "new"),
        );
        let (Ok(old), Ok(new)) = images else {
            continue;
        };
        if new.version <= old.version {
            continue;
        }
        rises.add(new.post_id, new.version - old.version, record);
    }
    let mut rates: Vec<(PostId, f64)> = rises.rates().collect();
    rates.sort_by_key(|(post, _)| *post);
    rates
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use aws_lambda_events::event::dynamodb::EventRecord;
    use chrono::{TimeZone, Utc};
    use serde_dynamo::AttributeValue;

    use super::{fast_posts, shard_rates};
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

    /// A write on `post`'s shard `shard` at `second`, its counter's
    /// version from `was` to `was + writes`.
    fn shard_write(post: PostId, shard: u8, was: u64, writes: u64, second: i64) -> EventRecord {
        let mut record = EventRecord::default();
        let key = Key::new(
            PostPartition::shard(post, shard).pk(),
            crate::keys::SHARD_COUNTS_SK,
        );
        record.change.keys = serde_dynamo::to_item(key).expect("keys");
        record.event_name = "MODIFY".to_owned();
        let image = |version: u64| {
            HashMap::from([
                (
                    "type".to_owned(),
                    AttributeValue::S("shardCounter".to_owned()),
                ),
                ("postId".to_owned(), AttributeValue::S(post.to_string())),
                ("shard".to_owned(), AttributeValue::N(shard.to_string())),
                (
                    "likeCount".to_owned(),
                    AttributeValue::N(version.to_string()),
                ),
                ("commentCount".to_owned(), AttributeValue::N("0".to_owned())),
                ("version".to_owned(), AttributeValue::N(version.to_string())),
                ("grouped".to_owned(), AttributeValue::Bool(true)),
            ])
            .into()
        };
        record.change.old_image = image(was);
        record.change.new_image = image(was + writes);
        record.change.approximate_creation_date_time = Utc
            .timestamp_opt(1_800_000_000 + second, 0)
            .single()
            .expect("a time");
        record
    }

    #[test]
    fn a_hot_posts_rate_is_its_shards_writes_together_and_nothing_else() {
        let (fast, slow) = (PostId::generate(), PostId::generate());
        // 16 shards, 60 writes each over two seconds (one record may carry
        // several: a shard's MODIFYs coalesce in a batch), 480 a second.
        let mut records: Vec<EventRecord> = (0..16)
            .flat_map(|shard| {
                [
                    shard_write(fast, shard, 0, 20, 0),
                    shard_write(fast, shard, 20, 40, 1),
                ]
            })
            .collect();
        // 10 writes over 3 seconds.
        records.extend(
            (0..10)
                .map(|i| shard_write(slow, 3, i, 1, i64::from(u8::try_from(i % 3).unwrap_or(0)))),
        );
        // A counter written by nothing (its version unchanged) counts nothing;
        // the post's own MODIFYs are the quiet rate's, not this one's.
        records.push(shard_write(slow, 4, 7, 0, 1));
        records.push(modify(slow, 3, 4, 1, true));
        let rates = shard_rates(&records);
        let mut expected = vec![(fast, 480.0), (slow, 10.0 / 3.0)];
        expected.sort_by_key(|(post, _)| *post);
        assert_eq!(rates, expected);
        assert_eq!(shard_rates(&[]), vec![]);
    }
}
