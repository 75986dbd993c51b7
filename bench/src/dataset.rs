//! The data set, shaped like the seeds' (each user writes 5–50 posts; each post
//! gets up to 25 comments and up to 100 likes) and generated from fixed seeds,
//! so every run loads the same data.
//!
//! Two choices make the two scales comparable request by request:
//! - every user's data comes from a random stream seeded by the user's index,
//!   so user `i` writes the same posts at every scale (only the ids of who
//!   comments and likes differ, and all ids and usernames have fixed widths);
//! - the first [`COHORT`] users wrote the newest posts, so the feed holds
//!   posts of the same sizes at both scales.
//!
//! The [`REFERENCE_USER`] writes the maximum of 50 posts, and its newest post,
//! the reference post, has the maximum of 25 comments and 100 likes: the
//! costliest targets the lists can have. Calls and capacity are measured on
//! them; latency is measured over targets drawn from the whole data set.

use blog::{
    ids::{CommentId, LikeId, PostId, UserId},
    store::{
        bulk::PostWithReplies,
        items::comment::CommentItem,
        items::user::UserItem,
        items::{
            like::LikeItem,
            post::{PostContentItem, PostItem},
        },
    },
    text::Username,
    timestamp,
};
use fastrand::Rng;
use time::OffsetDateTime;
use ulid::Ulid;

/// The data set's "now": everything happened before 2026-11-01T00:00:00Z.
pub const NOW_MS: u64 = 1_793_491_200_000;
const DAY_MS: u64 = 86_400_000;
const SEED: u64 = 0x5eed_0b10_9000_0001;

/// Users who wrote the newest posts (within the last day), at every scale.
pub const COHORT: usize = 12;
pub const REFERENCE_USER: usize = 0;
pub const MAX_COMMENTS: usize = 25;
pub const MAX_LIKES: usize = 100;

/// A user's id looks like a Cognito `sub` (a UUID), derived from the index.
pub fn user_id(index: usize) -> UserId {
    let mut rng = Rng::with_seed(SEED ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let raw = format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        rng.u32(..),
        rng.u16(..),
        rng.u16(..0x1000),
        rng.u16(0x8000..0xc000),
        rng.u64(..1 << 48)
    );
    UserId::parse(&raw).unwrap_or_else(|_| unreachable!("a UUID is a valid user id"))
}

pub fn username(index: usize) -> Username {
    Username::parse(&format!("writer_{index:06}"))
        .expect("writer_ and six digits is always a valid username")
}

pub fn user(index: usize) -> UserItem {
    let joined = timestamp_at(NOW_MS - 400 * DAY_MS);
    UserItem::new(&user_id(index), &username(index), &joined)
}

/// Everything user `index` wrote as posts, with the replies each post got from
/// a population of `users`.
pub fn threads(index: usize, users: usize) -> Vec<PostWithReplies> {
    let mut rng = Rng::with_seed(SEED.wrapping_add(index as u64));
    let author = user(index);
    let posts = if index == REFERENCE_USER {
        50
    } else {
        rng.usize(5..=50)
    };
    let (from, to) = if index < COHORT {
        (NOW_MS - DAY_MS, NOW_MS)
    } else {
        (NOW_MS - 366 * DAY_MS, NOW_MS - DAY_MS)
    };
    let mut times: Vec<u64> = (0..posts).map(|_| rng.u64(from..to)).collect();
    times.sort_unstable();
    let newest = times.len() - 1;
    times
        .into_iter()
        .enumerate()
        .map(|(n, at)| {
            let reference = index == REFERENCE_USER && n == newest;
            // Each post has its own streams: one for what it says and when,
            // one for who replies (which depends on the population), so
            // the first never shifts with the scale.
            let seed = rng.u64(..);
            let mut what = Rng::with_seed(seed);
            let mut who = Rng::with_seed(seed ^ 0xdead_beef);
            thread(&mut what, &mut who, &author, at, users, reference)
        })
        .collect()
}

fn thread(
    rng: &mut Rng,
    who: &mut Rng,
    author: &UserItem,
    at: u64,
    users: usize,
    reference: bool,
) -> PostWithReplies {
    let post_id = parse_id(PostId::parse, at, rng);
    let (title, content) = post_text(rng);
    let created = timestamp_at(at);
    let post = PostItem::new(
        post_id,
        author,
        &title,
        &content,
        &[],
        blog::model::Status::Published,
        &created,
    );
    let text = PostContentItem::new(post_id, &content, &created);
    // Most posts get little attention and a few get a lot: a skew towards zero
    // that still reaches the maxima.
    let (comments, likes) = if reference {
        (MAX_COMMENTS, MAX_LIKES)
    } else {
        let skewed = |rng: &mut Rng, max: usize, power: i32| {
            ((max + 1) as f64 * rng.f64().powi(power)) as usize
        };
        (
            skewed(rng, MAX_COMMENTS, 3).min(MAX_COMMENTS),
            skewed(rng, MAX_LIKES, 6).min(MAX_LIKES),
        )
    };
    let likes = likes.min(users.saturating_sub(1));
    let comments = (0..comments)
        .map(|_| {
            let commenter = who.usize(..users);
            let when = rng.u64(at..NOW_MS);
            let comment_id = parse_id(CommentId::parse, when, rng);
            let content = comment_text(rng);
            CommentItem::new(post_id, comment_id, &user(commenter), &content)
        })
        .collect();
    let likes = distinct_others(who, users, author_index(author, users), likes)
        .into_iter()
        .map(|liker| {
            let when = rng.u64(at..NOW_MS);
            let like_id = parse_id(LikeId::parse, when, rng);
            LikeItem::new(
                blog::keys::PostPartition::own(post_id),
                like_id,
                &user(liker),
            )
        })
        .collect();
    PostWithReplies::new(post, text, comments, likes)
}

/// A post's title and content: three in ten in Japanese; English posts of
/// 100–1,000 words, Japanese ones of 400–2,500 characters.
pub fn post_text(rng: &mut Rng) -> (String, String) {
    let japanese = rng.f32() < 0.3;
    let title = prose(rng, 20..=90, japanese).replace('\n', " ");
    let content = if japanese {
        prose(rng, 400..=2_500, true)
    } else {
        prose(rng, 600..=6_000, false)
    };
    (title, content)
}

/// A comment: 20–400 characters, three in ten in Japanese.
pub fn comment_text(rng: &mut Rng) -> String {
    let japanese = rng.f32() < 0.3;
    prose(rng, 20..=400, japanese)
}

/// The index of the user who wrote `author` (usernames carry it).
fn author_index(author: &UserItem, users: usize) -> usize {
    author
        .username
        .as_str()
        .trim_start_matches("writer_")
        .parse()
        .unwrap_or(users)
}

/// `count` distinct users out of `users`, never `author`.
fn distinct_others(rng: &mut Rng, users: usize, author: usize, count: usize) -> Vec<usize> {
    let mut chosen = Vec::with_capacity(count);
    while chosen.len() < count {
        let candidate = rng.usize(..users);
        if candidate != author && !chosen.contains(&candidate) {
            chosen.push(candidate);
        }
    }
    chosen
}

/// A time-ordered id at `at` milliseconds, with random bits from `rng`.
fn parse_id<T>(parse: fn(&str) -> Result<T, blog::ids::IdError>, at: u64, rng: &mut Rng) -> T {
    let ulid = Ulid::from_parts(at, rng.u128(..));
    parse(&ulid.to_string()).unwrap_or_else(|_| unreachable!("a ULID is a valid id"))
}

fn timestamp_at(ms: u64) -> String {
    let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    timestamp::format(at)
}

const WORDS: [&str; 48] = [
    "the",
    "serverless",
    "table",
    "partition",
    "request",
    "latency",
    "design",
    "index",
    "stream",
    "lambda",
    "function",
    "read",
    "write",
    "capacity",
    "model",
    "query",
    "scan",
    "cost",
    "user",
    "post",
    "comment",
    "like",
    "feed",
    "short",
    "form",
    "single",
    "every",
    "data",
    "item",
    "key",
    "sort",
    "global",
    "secondary",
    "denormalise",
    "copy",
    "count",
    "today",
    "we",
    "learned",
    "that",
    "a",
    "good",
    "blog",
    "needs",
    "fewer",
    "round",
    "trips",
    "and",
];

const PHRASES: [&str; 16] = [
    "今日はサーバーレスの設計について考えました。",
    "データモデルを見直すと、",
    "読み取りのコストが大きく下がります。",
    "パーティションキーの選び方が重要です。",
    "コメントといいね！の数を",
    "投稿の項目に非正規化しておきます。",
    "フィードには最新の投稿が百件並びます。",
    "ユーザー名が変わったときは、",
    "ストリームで各コピーを更新します。",
    "単一テーブル設計は最初は難しく感じますが、",
    "アクセスパターンを先に洗い出すことが大切です。",
    "東京は今日も晴れでした。",
    "☕ コーヒーを飲みながら書いています。",
    "皆さんのご意見をお待ちしています！",
    "次回はインデックスのオーバーロードについて。",
    "🎉 ついに本番環境にデプロイしました。",
];

/// Text of a length drawn from `chars` characters, in paragraphs: English
/// words, or Japanese sentences (three bytes a character in UTF-8, some emoji).
fn prose(rng: &mut Rng, chars: std::ops::RangeInclusive<usize>, japanese: bool) -> String {
    let chars = rng.usize(chars);
    let mut out = String::with_capacity(chars * if japanese { 3 } else { 1 });
    let mut count = 0;
    let mut since_break = 0;
    while count < chars {
        let piece = if japanese {
            PHRASES[rng.usize(..PHRASES.len())]
        } else {
            WORDS[rng.usize(..WORDS.len())]
        };
        if !japanese && !out.is_empty() {
            out.push(' ');
            count += 1;
        }
        out.push_str(piece);
        let added = piece.chars().count();
        count += added;
        since_break += added;
        if since_break > 400 && count < chars {
            out.push_str("\n\n");
            count += 2;
            since_break = 0;
        }
    }
    match out.char_indices().nth(chars) {
        Some((cut, _)) => out[..cut].trim_end().to_owned(),
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_writes_the_same_posts_at_every_scale() {
        let small = threads(3, 150);
        let large = threads(3, 1_500);
        assert_eq!(small.len(), large.len());
        for (a, b) in small.iter().zip(&large) {
            assert_eq!(a.post.post_id, b.post.post_id);
            assert_eq!(a.post.content, b.post.content);
            assert_eq!(a.comments.len(), b.comments.len());
            assert_eq!(a.likes.len(), b.likes.len());
        }
    }

    #[test]
    fn the_shape_stays_within_the_seeds_bounds() {
        let users = 150;
        for index in 0..users {
            let threads = threads(index, users);
            assert!((5..=50).contains(&threads.len()));
            for t in &threads {
                assert!(t.comments.len() <= MAX_COMMENTS && t.likes.len() <= MAX_LIKES);
                let mut likers: Vec<_> = t.likes.iter().map(|l| l.user_id.clone()).collect();
                likers.sort_by(|a, b| a.as_str().cmp(b.as_str()));
                likers.dedup();
                assert_eq!(likers.len(), t.likes.len(), "one like per user and post");
                assert!(!likers.contains(&t.post.user_id));
                assert!(blog::text::title(&t.post.title).is_ok());
                assert!(blog::text::post_content(&t.content.content).is_ok());
                assert!(
                    t.comments
                        .iter()
                        .all(|c| blog::text::comment_content(&c.content).is_ok())
                );
            }
        }
        let reference = threads(REFERENCE_USER, users);
        assert_eq!(reference.len(), 50);
        let newest = reference
            .iter()
            .max_by_key(|t| t.post.post_id)
            .map(|t| (t.comments.len(), t.likes.len()));
        assert_eq!(newest, Some((MAX_COMMENTS, MAX_LIKES)));
    }
}
