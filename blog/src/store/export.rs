//! A user's export (request: `GET /users/{userId}/export`): their profile and
//! everything they wrote, a page at a time, with no Scan. A page is three
//! calls whatever the account's size: GetItem the profile, Query their GSI1
//! partition (`USER#u`, everything they wrote) after the cursor, and one
//! BatchGetItem of the table items behind that page (a post's item and its
//! content, a comment, a like, a follow, a block), so that every field is the table's own
//! (GSI1 projects no content and may lag).

use std::collections::HashMap;

use super::Requests;
use super::{
    Item, StoreError, cursor,
    items::post::{PostContentItem, PostItem, StoredPost},
    items::user::UserItem,
    table::Query,
};
use crate::{
    ids::{BlockId, CommentId, FollowId, LikeId, PostId, UserId},
    keys::{self, Entity, Key, PostPartition, UserItemsKind},
    model::{Block, ExportPage, Exported, Follow, Post},
    store::items::{block::BlockItem, comment::CommentItem, follow::FollowItem, like::LikeItem},
};

/// What a GSI1 entry of the user's partition stands for.
enum Entry {
    Post(PostId),
    Comment(PostId, CommentId),
    /// A like, in the partition the entry's table key names: the post's own,
    /// or one of a hot post's shards (`POST#<postId>#<k>`).
    Like(String, LikeId),
    /// A follow: its table key (the follower's partition, whom).
    Follow(Key),
    /// A block: its table key (the blocker's partition, whom).
    Block(Key),
}

impl Entry {
    /// From the index item, with its GSI1 sort key (the cursor's place): the
    /// key names the kind and the id, the projected `postId` the post a
    /// comment is on, and the table's partition key (every index holds it) the
    /// partition a like is in.
    fn of(item: &Item) -> Result<(String, Self), StoreError> {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok());
        let sk = text(keys::GSI1SK).ok_or_else(|| StoreError::Internal("no GSI1SK".into()))?;
        let post = || {
            text("postId")
                .and_then(|p| PostId::parse(p).ok())
                .ok_or_else(|| StoreError::Internal(format!("{sk}: no postId")))
        };
        let bad = |_| StoreError::Internal(format!("bad GSI1SK {sk}"));
        // A post is under where it is listed (a published one) or its own
        // id (a draft): its projected `postId` is its own either way.
        let (kind, id) = UserItemsKind::of_sk(sk)
            .ok_or_else(|| StoreError::Internal(format!("unexpected GSI1SK {sk}")))?;
        let entry = match kind {
            UserItemsKind::Post | UserItemsKind::Draft => {
                PostId::parse(id).map_err(bad)?;
                Entry::Post(post()?)
            }
            UserItemsKind::Comment => Entry::Comment(post()?, CommentId::parse(id).map_err(bad)?),
            UserItemsKind::Like => {
                let pk =
                    text(keys::PK).ok_or_else(|| StoreError::Internal(format!("{sk}: no PK")))?;
                Entry::Like(pk.clone(), LikeId::parse(id).map_err(bad)?)
            }
            UserItemsKind::Follow => {
                FollowId::parse(id).map_err(bad)?;
                let key = Key::of(item)?;
                Entry::Follow(key)
            }
            UserItemsKind::Block => {
                BlockId::parse(id).map_err(bad)?;
                Entry::Block(Key::of(item)?)
            }
        };
        Ok((sk.clone(), entry))
    }

    /// The table item that holds it: the post item, the comment, the like.
    fn item_key(&self) -> Key {
        match self {
            Entry::Post(post) => keys::post_item(post),
            Entry::Comment(post, comment) => {
                CommentItem::key_of(PostPartition::own(*post), comment)
            }
            Entry::Like(pk, like) => Key::new(pk.clone(), keys::like_sk(like)),
            Entry::Follow(key) | Entry::Block(key) => key.clone(),
        }
    }

    /// A post's content item, beside it.
    fn content_key(&self) -> Option<Key> {
        match self {
            Entry::Post(post) => Some(PostContentItem::key_of(post)),
            Entry::Comment(..) | Entry::Like(..) | Entry::Follow(..) | Entry::Block(..) => None,
        }
    }
}

/// The cursor's namespace: one user's export.
fn list(user: &UserId) -> String {
    format!("export:{user}")
}

/// The Query of `user`'s GSI1 partition, after `cursor` if there is one.
fn index_query(user: &UserId, cursor: Option<&str>) -> Result<Query, StoreError> {
    let query = Query::gsi1(keys::user_items_pk(user));
    let Some(cursor) = cursor else {
        return Ok(query);
    };
    let after = cursor::decode(cursor, &list(user))?;
    // Validated as any client id: a GSI1 sort key of one of the kinds.
    let valid = UserItemsKind::of_sk(&after).is_some_and(|(_, id)| !id.contains('#'));
    if !valid {
        return Err(StoreError::BadCursor(cursor::CursorError::Malformed));
    }
    Ok(query.after(after))
}

/// The page's things as the export shows them, from the table items `found`
/// behind `entries`, in the index's order. Something that went between the
/// index and the table read (deleted just now) is left out.
fn exported(
    entries: &[(String, Entry)],
    mut found: HashMap<Key, Item>,
) -> Result<Vec<Exported>, StoreError> {
    let mut items = Vec::with_capacity(entries.len());
    for (_, entry) in entries {
        // Gone since the index was read: deleted just now.
        let Some(item) = found.remove(&entry.item_key()) else {
            continue;
        };
        items.push(match entry {
            Entry::Post(_) => {
                let content = entry
                    .content_key()
                    .and_then(|key| found.remove(&key))
                    .map(PostContentItem::decode)
                    .transpose()?;
                let item = PostItem::decode(item)?;
                Exported::Post(Post::from(StoredPost { item, content }))
            }
            Entry::Comment(..) => Exported::Comment(CommentItem::decode(item)?.into()),
            Entry::Like(..) => Exported::Like(LikeItem::decode(item)?.into()),
            Entry::Follow(..) => {
                let follow = FollowItem::decode(item)?;
                Exported::Follow(Follow {
                    user_id: follow.followed_id,
                    followed_at: follow.created_at,
                })
            }
            Entry::Block(..) => {
                let block = BlockItem::decode(item)?;
                Exported::Block(Block {
                    user_id: block.blocked_id,
                    blocked_at: block.created_at,
                })
            }
        });
    }
    Ok(items)
}

impl Requests<'_> {
    /// One page of `user`'s export: up to `limit` things they wrote after
    /// `cursor`, or `None` when they have no profile. Something that went
    /// between the index and the table read (deleted just now) is left out.
    pub async fn export_page(
        &self,
        user: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Option<ExportPage>, StoreError> {
        let Some(profile) = self
            .db
            .get_entity::<UserItem>(keys::profile(user).item(), true)
            .await?
        else {
            return Ok(None);
        };
        let query = index_query(user, cursor)?;
        let index = self
            .db
            .query_up_to("export", &query, None, limit.saturating_add(1))
            .await?;
        let more = index.len() > limit;
        let entries: Vec<(String, Entry)> = index
            .iter()
            .take(limit)
            .map(Entry::of)
            .collect::<Result<_, _>>()?;
        let found = self.table_items(&entries).await?;
        let items = exported(&entries, found)?;
        let next_cursor = match entries.last() {
            Some((sk, _)) if more => Some(cursor::encode(&list(user), sk)),
            _ => None,
        };
        Ok(Some(ExportPage {
            profile: profile.into(),
            items,
            next_cursor,
        }))
    }

    /// The table items behind `entries` (a post's item and its content, a
    /// comment, a like) by their keys, in one BatchGetItem; none for an
    /// empty page.
    async fn table_items(
        &self,
        entries: &[(String, Entry)],
    ) -> Result<HashMap<Key, Item>, StoreError> {
        let wanted: Vec<Item> = entries
            .iter()
            .flat_map(|(_, entry)| std::iter::once(entry.item_key()).chain(entry.content_key()))
            .map(|key| key.item())
            .collect();
        let mut found: HashMap<Key, Item> = HashMap::new();
        if !wanted.is_empty() {
            let (items, _) = self.db.batch_get("export", wanted).await?;
            for item in items {
                found.insert(Key::of(&item)?, item);
            }
        }
        Ok(found)
    }
}
