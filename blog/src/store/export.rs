//! A user's export (request: `GET /users/{userId}/export`): their profile and
//! everything they wrote, a page at a time, with no Scan. A page is three
//! calls whatever the account's size: GetItem the profile, Query their GSI1
//! partition (`USER#u`, everything they wrote) after the cursor, and one
//! BatchGetItem of the table items behind that page (a post's item and its
//! content, a comment, a like), so that every field is the table's own
//! (GSI1 projects no content and may lag).

use std::collections::HashMap;

use super::{
    Item, Store, StoreError, cursor,
    posts::{PostContentItem, PostItem, StoredPost},
    table::Query,
    users::UserItem,
};
use crate::{
    ids::{CommentId, LikeId, PostId, UserId},
    keys::{self, COMMENT_PREFIX, Entity, Key, LIKE_PREFIX, POST_PREFIX},
    model::{ExportPage, Exported, Post},
    store::{comments::CommentItem, likes::LikeItem},
};

/// What a GSI1 entry of the user's partition stands for.
enum Entry {
    Post(PostId),
    Comment(PostId, CommentId),
    Like(PostId, LikeId),
}

impl Entry {
    /// From the index item: its GSI1 sort key names the kind and the id, and
    /// the projected `postId` the post a comment or a like is on.
    fn of(item: &Item) -> Result<Self, StoreError> {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok());
        let sk = text(keys::GSI1SK).ok_or_else(|| StoreError::Internal("no GSI1SK".into()))?;
        let post = || {
            text("postId")
                .and_then(|p| PostId::parse(p).ok())
                .ok_or_else(|| StoreError::Internal(format!("{sk}: no postId")))
        };
        let bad = |_| StoreError::Internal(format!("bad GSI1SK {sk}"));
        if let Some(id) = sk.strip_prefix(POST_PREFIX) {
            Ok(Entry::Post(PostId::parse(id).map_err(bad)?))
        } else if let Some(id) = sk.strip_prefix(COMMENT_PREFIX) {
            Ok(Entry::Comment(post()?, CommentId::parse(id).map_err(bad)?))
        } else if let Some(id) = sk.strip_prefix(LIKE_PREFIX) {
            Ok(Entry::Like(post()?, LikeId::parse(id).map_err(bad)?))
        } else {
            Err(StoreError::Internal(format!("unexpected GSI1SK {sk}")))
        }
    }

    /// The table items that hold it in full.
    fn keys(&self) -> Vec<Key> {
        match self {
            Entry::Post(post) => vec![
                Key::new(keys::post_pk(post), keys::POST_SK),
                Key::new(keys::post_pk(post), keys::POST_CONTENT_SK),
            ],
            Entry::Comment(post, comment) => {
                vec![Key::new(keys::post_pk(post), keys::comment_sk(comment))]
            }
            Entry::Like(post, like) => vec![Key::new(keys::post_pk(post), keys::like_sk(like))],
        }
    }
}

/// The one table item of a comment or a like, if it is still there.
fn one<E: Entity>(
    entry: &Entry,
    take: &mut impl FnMut(Key) -> Option<Item>,
) -> Result<Option<E>, StoreError> {
    entry
        .keys()
        .pop()
        .and_then(take)
        .map(E::from_item)
        .transpose()
}

/// The cursor's namespace: one user's export.
fn list(user: &UserId) -> String {
    format!("export:{user}")
}

impl Store {
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
        let mut query = Query::gsi1(keys::user_items_pk(user));
        if let Some(cursor) = cursor {
            let after = cursor::decode(cursor, &list(user))?;
            // Validated as any client id: a GSI1 sort key of one of the kinds.
            let valid = [POST_PREFIX, COMMENT_PREFIX, LIKE_PREFIX]
                .iter()
                .any(|prefix| {
                    after
                        .strip_prefix(prefix)
                        .is_some_and(|id| !id.contains('#'))
                });
            if !valid {
                return Err(StoreError::BadCursor(cursor::CursorError::Malformed));
            }
            query = query.after(after);
        }
        let index = self
            .db
            .query_up_to("export", &query, None, limit.saturating_add(1))
            .await?;
        let more = index.len() > limit;
        let entries: Vec<(String, Entry)> = index
            .iter()
            .take(limit)
            .map(|item| {
                let sk = item
                    .get(keys::GSI1SK)
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default();
                Entry::of(item).map(|entry| (sk, entry))
            })
            .collect::<Result<_, _>>()?;
        let wanted: Vec<Item> = entries
            .iter()
            .flat_map(|(_, entry)| entry.keys())
            .map(|key| key.item())
            .collect();
        let mut found: HashMap<Key, Item> = HashMap::new();
        if !wanted.is_empty() {
            let (items, _) = self.db.batch_get("export", wanted).await?;
            for item in items {
                found.insert(Key::of(&item)?, item);
            }
        }
        let mut items = Vec::with_capacity(entries.len());
        for (_, entry) in &entries {
            let mut take = |key: Key| found.remove(&key);
            let exported = match entry {
                Entry::Post(post) => {
                    let [item, content] = <[Key; 2]>::try_from(entry.keys())
                        .map_err(|_| StoreError::Internal("post keys".into()))?;
                    match take(item) {
                        Some(item) => {
                            let content =
                                take(content).map(PostContentItem::from_item).transpose()?;
                            let item = PostItem::from_item(item)?;
                            debug_assert_eq!(&item.post_id, post);
                            Some(Exported::Post(Post::from(StoredPost { item, content })))
                        }
                        None => None,
                    }
                }
                Entry::Comment(..) => {
                    one::<CommentItem>(entry, &mut take)?.map(|c| Exported::Comment(c.into()))
                }
                Entry::Like(..) => {
                    one::<LikeItem>(entry, &mut take)?.map(|l| Exported::Like(l.into()))
                }
            };
            items.extend(exported);
        }
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
}
