//! docs/data-model.md's items table, held against this module: every item
//! type has one row, the row's keys match the keys the code builds, and the
//! row names every attribute the item's struct stores (its `type=…, a, b`
//! list names none the struct does not have).

use std::collections::{BTreeMap, BTreeSet};

use serde::de::{self, DeserializeOwned, Visitor};

use super::{
    block::{BlockItem, BlockedByItem},
    comment::CommentItem,
    counter::{CommentShardsItem, LikeShardsItem, ShardCounterItem, ShardGroupItem},
    feed::{FeedEntryItem, TagEntryItem},
    first_page::{FirstPageItem, PageList},
    follow::{FollowItem, FollowerCountItem, FollowerItem},
    home::{DeliveryItem, HomeEntryItem},
    like::{LikeItem, LikedMarker, LikerMarker},
    notification::{
        NotificationGroupItem, NotificationItem, NotificationKind, NotificationsSeenItem,
    },
    parked::ParkedRecordItem,
    post::{PostContentItem, PostItem},
    rename::RenameProgress,
    request_record::{Created, RequestRecordItem},
    schedule::ScheduledItem,
    user::{ErasureMark, UserItem, UsernameClaim},
};
use crate::{
    ids::{BlockId, CommentId, FollowId, IdempotencyKey, LikeId, PostId, UserId},
    keys::{self, ItemType, Key, PostPartition},
    model::PostSummary,
    text::{Tag, Username},
};

/// The names a struct's `Deserialize` asks for (its stored attributes, as
/// renamed), read off the derive without a value: the probe answers every
/// request with an error that carries them.
fn attributes<T: DeserializeOwned>() -> Vec<String> {
    match T::deserialize(Probe) {
        Err(Fields(Some(fields))) => fields.iter().map(|f| (*f).to_owned()).collect(),
        Err(Fields(None)) | Ok(_) => panic!("{} is no plain struct", std::any::type_name::<T>()),
    }
}

/// The names a sample of a struct with a flattened part is stored with
/// (the derive reads such a struct as a map, naming nothing): every
/// optional attribute of the sample is set.
fn stored<T: serde::Serialize>(sample: &T) -> Vec<String> {
    match serde_json::to_value(sample) {
        Ok(serde_json::Value::Object(fields)) => fields.keys().cloned().collect(),
        other => panic!("{} stores no map: {other:?}", std::any::type_name::<T>()),
    }
}

struct Probe;

#[derive(Debug)]
struct Fields(Option<&'static [&'static str]>);

impl std::fmt::Display for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::error::Error for Fields {}

impl de::Error for Fields {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Fields(None)
    }
}

impl<'de> de::Deserializer<'de> for Probe {
    type Error = Fields;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
        Err(Fields(None))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Fields> {
        Err(Fields(Some(fields)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// One item type as the code has it: a key it builds, its GSI1 key if it
/// has one, and its stored attributes.
struct Described {
    what: ItemType,
    key: Key,
    gsi1: Option<Key>,
    attributes: Vec<String>,
}

fn described(what: ItemType, key: Key, attributes: Vec<String>) -> Described {
    Described {
        what,
        key,
        gsi1: None,
        attributes,
    }
}

fn every_item() -> Result<Vec<Described>, Box<dyn std::error::Error>> {
    let user = UserId::parse("user-1")?;
    let post = PostId::parse("01J00000000000000000000000")?;
    let comment = CommentId::parse("01J00000000000000000000001")?;
    let like = LikeId::parse("01J00000000000000000000002")?;
    let follow = FollowId::parse("01J00000000000000000000003")?;
    let block = BlockId::parse("01J00000000000000000000004")?;
    let tag = Tag::parse("rust")?;
    let username = Username::parse("Alice")?;
    let request = IdempotencyKey::parse("0b3f1e2a-8c1d-4f5e-9a7b-2c3d4e5f6a7b")?;
    let shard = PostPartition::shard(post, 3);
    let items_pk = keys::user_items_pk(&user);
    let at = "2026-11-28T12:00:00Z";
    // As a feed or tag entry stores it: its publication time is in its key.
    let summary = PostSummary {
        post_id: post,
        user_id: user.clone(),
        username: username.clone(),
        title: "title".to_owned(),
        summary: "summary".to_owned(),
        comment_count: 0,
        like_count: 0,
        created_at: at.to_owned(),
        published_at: String::new(),
        updated_at: None,
    };
    let mut all = vec![
        described(
            ItemType::User,
            keys::profile(&user),
            attributes::<UserItem>(),
        ),
        described(
            ItemType::Username,
            Key::new(keys::username_pk(&username), keys::USERNAME_SK),
            attributes::<UsernameClaim>(),
        ),
        Described {
            gsi1: Some(Key::new(items_pk.clone(), keys::user_post_sk(&post))),
            ..described(
                ItemType::Post,
                keys::post_item(&post),
                attributes::<PostItem>(),
            )
        },
        described(
            ItemType::PostContent,
            keys::post_content(&post),
            attributes::<PostContentItem>(),
        ),
        Described {
            gsi1: Some(Key::new(items_pk.clone(), keys::user_comment_sk(&comment))),
            ..described(
                ItemType::Comment,
                CommentItem::key_of(PostPartition::own(post), &comment),
                attributes::<CommentItem>(),
            )
        },
        Described {
            gsi1: Some(Key::new(items_pk.clone(), keys::user_like_sk(&like))),
            ..described(
                ItemType::Like,
                LikeItem::key_of(PostPartition::own(post), &like),
                attributes::<LikeItem>(),
            )
        },
        described(
            ItemType::Liker,
            LikerMarker::key_of(PostPartition::own(post), &user),
            attributes::<LikerMarker>(),
        ),
        described(
            ItemType::FeedEntry,
            FeedEntryItem::key_of(&post),
            stored(&FeedEntryItem {
                post: summary.clone(),
                version: 1,
                user_version: 1,
                listed_id: Some(post),
                updated_at: Some(at.to_owned()),
            }),
        ),
        described(
            ItemType::TagEntry,
            TagEntryItem::key_of(&tag, &post),
            stored(&TagEntryItem {
                post: summary,
                tag: tag.clone(),
                version: 1,
                user_version: 1,
                listed_id: Some(post),
                updated_at: Some(at.to_owned()),
            }),
        ),
        described(
            ItemType::Scheduled,
            Key::new(keys::SCHEDULED_PK.to_owned(), keys::scheduled_sk(at, &post)),
            attributes::<ScheduledItem>(),
        ),
        described(
            ItemType::RenameProgress,
            keys::rename_progress(&user),
            attributes::<RenameProgress>(),
        ),
        described(
            ItemType::Erasure,
            keys::erasure(&user),
            attributes::<ErasureMark>(),
        ),
        described(
            ItemType::ShardCounter,
            ShardCounterItem::key_of(post, 3),
            attributes::<ShardCounterItem>(),
        ),
        described(
            ItemType::ShardGroup,
            ShardGroupItem::key_of(post, 2),
            attributes::<ShardGroupItem>(),
        ),
        described(
            ItemType::LikeShards,
            LikeShardsItem::key_of(&post),
            attributes::<LikeShardsItem>(),
        ),
        described(
            ItemType::CommentShards,
            CommentShardsItem::key_of(&post),
            attributes::<CommentShardsItem>(),
        ),
        described(
            ItemType::Liked,
            LikedMarker::key_of(&user, &post),
            attributes::<LikedMarker>(),
        ),
        described(
            ItemType::RequestRecord,
            keys::request_record(&user, &request),
            stored(&RequestRecordItem {
                user_id: user.clone(),
                key: request.clone(),
                request_digest: "digest".to_owned(),
                status: 201,
                response: "{}".to_owned(),
                created: Created::Comment {
                    post_id: post,
                    comment_id: comment,
                },
                created_at: at.to_owned(),
                expires_at: 1,
                user_version: 1,
            }),
        ),
        Described {
            gsi1: Some(Key::new(items_pk.clone(), keys::user_follow_sk(&follow))),
            ..described(
                ItemType::Follow,
                keys::follow(&user, &user),
                attributes::<FollowItem>(),
            )
        },
        Described {
            gsi1: Some(Key::new(items_pk.clone(), keys::user_block_sk(&block))),
            ..described(
                ItemType::Block,
                BlockItem::key_of(&user, &user),
                attributes::<BlockItem>(),
            )
        },
        described(
            ItemType::BlockedBy,
            BlockedByItem::key_of(&user, &user),
            attributes::<BlockedByItem>(),
        ),
        described(
            ItemType::Follower,
            Key::new(keys::followers_pk(&user, 3), keys::follower_sk(&follow)),
            attributes::<FollowerItem>(),
        ),
        described(
            ItemType::FollowerCount,
            Key::new(keys::followers_pk(&user, 3), keys::FOLLOWER_COUNT_SK),
            attributes::<FollowerCountItem>(),
        ),
        described(
            ItemType::FollowerWindow,
            keys::follower_window(&user, &follow),
            // No struct: one attribute a follow (`f<followId>`) beside these.
            vec![
                super::follow::WINDOW_OWNER.to_owned(),
                super::follow::WINDOW_VERSION.to_owned(),
            ],
        ),
        described(
            ItemType::HomeEntry,
            Key::new(keys::home_pk(&user), keys::home_sk(&post)),
            attributes::<HomeEntryItem>(),
        ),
        described(
            ItemType::Delivery,
            keys::delivery(&post, &post, 3),
            attributes::<DeliveryItem>(),
        ),
        Described {
            gsi1: Some(Key::new(
                keys::notify_pk(&user),
                format!("{at}#GROUP#like#{post}"),
            )),
            ..described(
                ItemType::NotificationGroup,
                NotificationGroupItem::key_of(&user, NotificationKind::Like, Some(&post)),
                attributes::<NotificationGroupItem>(),
            )
        },
        Described {
            gsi1: Some(Key::new(
                keys::notify_pk(&user),
                format!("{at}#NOTE#comment#{comment}"),
            )),
            ..described(
                ItemType::Notification,
                NotificationItem::key_of(&user, NotificationKind::Comment, &post, Some(&comment)),
                attributes::<NotificationItem>(),
            )
        },
        described(
            ItemType::FirstPage,
            FirstPageItem::key_of(&post, PageList::Likes),
            stored(&FirstPageItem {
                due: Some(1),
                author: Some(user.clone()),
                ..FirstPageItem::made(post, PageList::Likes, Vec::new(), false, 16, 1)
            }),
        ),
        described(
            ItemType::NotificationsSeen,
            NotificationsSeenItem::key_of(&user),
            attributes::<NotificationsSeenItem>(),
        ),
        described(
            ItemType::ParkedRecord,
            keys::ParkedPartition::of(&"1".repeat(40), "shard-1").key(&"1".repeat(40), "shard-1"),
            attributes::<ParkedRecordItem>(),
        ),
    ];
    // A hot post's comment and like: the same types, in a shard.
    all.push(described(
        ItemType::Comment,
        CommentItem::key_of(shard, &comment),
        attributes::<CommentItem>(),
    ));
    all.push(described(
        ItemType::Like,
        LikeItem::key_of(shard, &like),
        attributes::<LikeItem>(),
    ));
    #[cfg(feature = "bulk")]
    all.push(described(
        ItemType::FeedFloor,
        Key::new(keys::FEED_PK.to_owned(), keys::FEED_FLOOR_SK),
        attributes::<super::feed::FeedFloorItem>(),
    ));
    Ok(all)
}

/// A row of the items table: its cells, a cell that reads "as a like's"
/// standing for that cell of the like's row.
#[derive(Debug, Clone)]
struct Row {
    cells: Vec<String>,
}

impl Row {
    /// The first code span of a cell: the key pattern (`USER#<userId>`).
    fn pattern(&self, column: usize) -> Option<&str> {
        let cell = self.cells.get(column)?;
        let start = cell.find('`')? + 1;
        let end = start + cell[start..].find('`')?;
        Some(&cell[start..end])
    }

    /// The code spans of its attributes cell, split at commas: the names it
    /// gives (`type=user, userId`, `followingCount`, …).
    fn names(&self) -> BTreeSet<String> {
        let cell = self.cells.get(5).map_or("", String::as_str);
        cell.split('`')
            .skip(1)
            .step_by(2)
            .flat_map(|span| span.split(','))
            .map(|name| {
                let name = name.trim();
                name.split(['=', ' ', ':']).next().unwrap_or("").to_owned()
            })
            .filter(|name| !name.is_empty())
            .collect()
    }

    /// The attribute list its cell opens with (`type=user, userId, …`).
    fn listed(&self) -> Vec<String> {
        let cell = self.cells.get(5).map_or("", String::as_str);
        if !cell.starts_with("`type=") {
            return Vec::new();
        }
        cell.split('`')
            .nth(1)
            .unwrap_or("")
            .split(',')
            .map(|name| name.trim().split('=').next().unwrap_or("").to_owned())
            .collect()
    }

    fn type_name(&self) -> Option<String> {
        let cell = self.cells.get(5)?;
        let start = cell.find("type=")? + 5;
        let name: String = cell[start..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        Some(name)
    }

    /// The entity a cell refers to ("as a comment's": `comment`).
    fn refers_to(cell: &str) -> Option<&str> {
        let rest = cell.strip_prefix("as ")?;
        let rest = rest.strip_prefix("a ").unwrap_or(rest);
        rest.split_once("'s").map(|(entity, _)| entity)
    }
}

fn items_table() -> Vec<Row> {
    let doc = include_str!("../../../../docs/data-model.md");
    let section = doc
        .split("\n## Items\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/data-model.md has an Items section");
    let rows: Vec<Row> = section
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| entity"))
        .map(|line| Row {
            cells: line
                .trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_owned())
                .collect(),
        })
        .collect();
    // A cell "as a comment's" reads as the comment row's, and the rest of
    // it after that (", and `shard`") adds to it.
    rows.iter()
        .map(|row| {
            let mut resolved = row.clone();
            for (column, cell) in row.cells.iter().enumerate() {
                let Some(entity) = Row::refers_to(cell) else {
                    continue;
                };
                let of = rows
                    .iter()
                    .find(|other| other.cells.first().is_some_and(|e| e == entity))
                    .unwrap_or_else(|| panic!("no row `{entity}` for {:?}", row.cells[0]));
                resolved.cells[column] = format!("{} {cell}", of.cells[column]);
            }
            resolved
        })
        .collect()
}

/// Whether `key` is one the pattern describes: `<…>` stands for any text.
fn matches(pattern: &str, key: &str) -> bool {
    let mut rest = key;
    let mut parts = pattern.split('<');
    let first = parts.next().unwrap_or("");
    let Some(after) = rest.strip_prefix(first) else {
        return false;
    };
    rest = after;
    for part in parts {
        let literal = part.split_once('>').map_or("", |(_, literal)| literal);
        if literal.is_empty() {
            return !rest.is_empty();
        }
        match rest.find(literal) {
            Some(at) if at > 0 => rest = &rest[at + literal.len()..],
            _ => return false,
        }
    }
    rest.is_empty()
}

fn type_name(what: ItemType) -> String {
    match what.attribute() {
        Ok(aws_sdk_dynamodb::types::AttributeValue::S(name)) => name,
        other => panic!("{what:?} has no name: {other:?}"),
    }
}

#[test]
fn the_items_table_names_every_item_its_keys_and_its_attributes() {
    let rows = items_table();
    let items = every_item().expect("sample ids");
    let mut by_type: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for row in &rows {
        let name = row
            .type_name()
            .unwrap_or_else(|| panic!("row without type=: {:?}", row.cells));
        by_type.entry(name).or_default().push(row);
    }
    // Every type the code knows has a row; every row names a type it knows.
    let known: BTreeSet<String> = ItemType::ALL
        .iter()
        .filter(|t| !matches!(t, ItemType::Other))
        .map(|t| type_name(*t))
        .collect();
    let documented: BTreeSet<String> = by_type.keys().cloned().collect();
    assert_eq!(documented, known, "the items table's types");
    let described: BTreeSet<String> = items.iter().map(|i| type_name(i.what)).collect();
    // The feed floor's struct is compiled with `bulk` only (the fan-out
    // writes it as attributes).
    let undescribed: BTreeSet<String> = known
        .difference(&described)
        .filter(|name| cfg!(feature = "bulk") || name.as_str() != "feedFloor")
        .cloned()
        .collect();
    assert!(undescribed.is_empty(), "no sample here: {undescribed:?}");

    let mut wrong = Vec::new();
    for item in &items {
        let name = type_name(item.what);
        let candidates = &by_type[&name];
        // The row whose keys this key matches (a hot post's comment has a
        // row of its own, of the same type).
        let row = candidates
            .iter()
            .find(|row| {
                row.pattern(1).is_some_and(|pk| matches(pk, &item.key.pk))
                    && row.pattern(2).is_some_and(|sk| matches(sk, &item.key.sk))
            })
            .unwrap_or_else(|| {
                panic!(
                    "{name}: no row's keys match {} / {}: {:?}",
                    item.key.pk,
                    item.key.sk,
                    candidates
                        .iter()
                        .map(|r| &r.cells[1..3])
                        .collect::<Vec<_>>()
                )
            });
        if let Some(gsi1) = &item.gsi1 {
            assert!(
                row.pattern(3).is_some_and(|pk| matches(pk, &gsi1.pk))
                    && row.pattern(4).is_some_and(|sk| matches(sk, &gsi1.sk)),
                "{name}: GSI1 {} / {} against {:?}",
                gsi1.pk,
                gsi1.sk,
                &row.cells[3..5]
            );
        }
        let names = row.names();
        for attribute in &item.attributes {
            if !names.contains(attribute) {
                wrong.push(format!("{name}: the row does not name `{attribute}`"));
            }
        }
        for listed in row.listed() {
            if listed != "type" && !item.attributes.contains(&listed) {
                wrong.push(format!(
                    "{name}: the row lists `{listed}`, which it does not store"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/data-model.md's items table:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_pattern_matches_the_keys_it_describes() {
    assert!(matches("POST#<postId>", "POST#01J"));
    assert!(matches("POST#<postId>#<k>", "POST#01J#03"));
    assert!(!matches("POST#<postId>#<k>", "POST#01J"));
    assert!(matches("COUNTS", "COUNTS"));
    assert!(!matches("COUNTS", "COUNT"));
    assert!(!matches("USER#<userId>", "POST#01J"));
}
