//! Likes (C4) and a post's list of likes (Q5), in the post's partition.

use serde::{Deserialize, Serialize};

use super::{
    Busy, ItemType, Store, StoreError,
    posts::{Counter, PostItem, Step},
    s,
    table::{Expr, Query, TxOutcome, Write},
    users::UserItem,
};
use crate::{
    ids::{LikeId, PostId, UserId},
    keys::{self, Entity, Key, LIKE_PREFIX},
    model::{Like, Page},
    text::Username,
};

/// How often a like or an unlike tries again when the other changed the
/// marker under it.
const UNLIKE_ATTEMPTS: usize = 5;

/// A like. Its sort key is time-ordered (`LIKE#<likeId>`) so that Q5 lists
/// newest first with one Query; it is listed in its author's GSI1 partition for
/// renames.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LikeItem {
    pub like_id: LikeId,
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: Username,
    pub user_version: u64,
    pub created_at: String,
}

impl LikeItem {
    /// `liker`'s like of `post`, made when `like_id` was.
    pub fn new(post: PostId, like_id: LikeId, liker: &UserItem) -> Self {
        Self {
            like_id,
            post_id: post,
            user_id: liker.user_id.clone(),
            username: liker.username.clone(),
            user_version: liker.version,
            created_at: like_id.created_at(),
        }
    }
}

impl Entity for LikeItem {
    const TYPE: ItemType = ItemType::Like;
    /// The key holds a like id made for this like.
    const OWN: &'static [&'static str] = &[];

    fn key(&self) -> Key {
        Key::new(keys::post_pk(&self.post_id), keys::like_sk(&self.like_id))
    }

    fn gsi1(&self) -> Option<Key> {
        let pk = keys::user_items_pk(&self.user_id);
        Some(Key::new(pk, keys::user_like_sk(&self.like_id)))
    }
}

impl From<LikeItem> for Like {
    fn from(item: LikeItem) -> Self {
        Like {
            post_id: item.post_id,
            user_id: item.user_id,
            username: item.username,
            created_at: item.created_at,
        }
    }
}

/// One per (post, user), keyed by the user: its conditional put is what makes a
/// like unique. It points at the like it guards.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LikerMarker {
    post_id: PostId,
    like_id: LikeId,
    user_id: UserId,
}

impl LikerMarker {
    /// The marker that guards `like`.
    pub(super) fn for_like(like: &LikeItem) -> Self {
        Self {
            post_id: like.post_id,
            like_id: like.like_id,
            user_id: like.user_id.clone(),
        }
    }

    fn key_of(post: &PostId, liker: &UserId) -> Key {
        Key::new(keys::post_pk(post), keys::liker_sk(liker))
    }
}

impl Entity for LikerMarker {
    const TYPE: ItemType = ItemType::Liker;
    /// One per (post, user); it names the like it guards.
    const OWN: &'static [&'static str] = &["likeId"];

    fn key(&self) -> Key {
        Self::key_of(&self.post_id, &self.user_id)
    }

    /// Markers written before they carried `postId` take it from their key.
    fn from_item(item: super::Item) -> Result<Self, StoreError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Stored {
            post_id: Option<PostId>,
            like_id: LikeId,
            user_id: UserId,
        }
        let key = Key::of(&item)?;
        let stored: Stored = super::from_item(item)?;
        let post_id = stored.post_id.or_else(|| keys::post_of_pk(&key.pk));
        Ok(Self {
            post_id: post_id
                .ok_or_else(|| StoreError::Internal(format!("a like marker under {}", key.pk)))?,
            like_id: stored.like_id,
            user_id: stored.user_id,
        })
    }
}

/// What liking did: a new like, or the one the user had already given.
#[derive(Debug)]
pub enum Liked {
    New(Like),
    Already(Like),
}

impl Store {
    /// C4 (request): the marker, the like and the post's `likeCount` change
    /// commit together; a second like by the same user fails on the marker
    /// and changes nothing. The like copies the liker's username as read; a
    /// rename racing with it is caught up by the fan-out's INSERT rule.
    pub async fn like_post(&self, post: &PostId, liker: &UserId) -> Result<Liked, StoreError> {
        // The caller's profile (403 for an erased account, or without one):
        // its name goes onto the item.
        let profile = self.writer(liker).await?.profile()?;
        // A like taken back between the refused put and the read of the
        // existing one: like again.
        for _ in 0..UNLIKE_ATTEMPTS {
            let like = LikeItem::new(*post, LikeId::generate(), &profile);
            let mut tx = self.db.transaction("like");
            let marker = tx.add(
                "liker marker",
                Write::create(&LikerMarker::for_like(&like))?,
            );
            tx.add("like", Write::create(&like)?);
            let counted = tx.add("post", PostItem::count(post, Counter::Likes, Step::Up));
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(Liked::New(like.into())),
                TxOutcome::ConditionFailed(failed) if failed.failed(counted) => {
                    return Err(StoreError::PostNotFound);
                }
                TxOutcome::ConditionFailed(failed) if failed.failed(marker) => {
                    if let Some(existing) = self.existing_like(post, liker).await? {
                        return Ok(Liked::Already(existing));
                    }
                }
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("like")),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the like kept being given and taken back",
        ))
    }

    /// The like a user already gave a post: the marker names it. `None` when
    /// it was taken back meanwhile.
    async fn existing_like(
        &self,
        post: &PostId,
        liker: &UserId,
    ) -> Result<Option<Like>, StoreError> {
        let marker_key = LikerMarker::key_of(post, liker).item();
        let Some(marker) = self.db.get_entity::<LikerMarker>(marker_key, true).await? else {
            return Ok(None);
        };
        let like_key = Key::new(keys::post_pk(post), keys::like_sk(&marker.like_id));
        let like = self
            .db
            .get_entity::<LikeItem>(like_key.item(), true)
            .await?;
        Ok(like.map(Like::from))
    }

    /// C4 taken back (request): the caller's like of `post`, its marker and
    /// one off the post's `likeCount` go together. `false` when there is no
    /// like to take back (answered 204 all the same); an error if there is
    /// no such post. The marker is deleted only if it still names the like
    /// read, so a concurrent unlike and like again are read afresh. An
    /// erased account's unlike is refused before anything of the post is
    /// read ([`Store::writer`]).
    pub async fn unlike_post(&self, post: &PostId, liker: &UserId) -> Result<bool, StoreError> {
        self.refuse_erased(liker).await?;
        let marker_key = LikerMarker::key_of(post, liker).item();
        for _ in 0..UNLIKE_ATTEMPTS {
            let marker = self.db.get_entity::<LikerMarker>(marker_key.clone(), true);
            let Some(marker) = marker.await? else {
                return match self.db.get(PostItem::key(post), true).await? {
                    Some(_) => Ok(false),
                    None => Err(StoreError::PostNotFound),
                };
            };
            let names_it =
                Expr::new("likeId = :like").value(":like", s(marker.like_id.to_string()));
            let like_key = Key::new(keys::post_pk(post), keys::like_sk(&marker.like_id));
            let exists = Expr::new("attribute_exists(PK)");
            let mut tx = self.db.transaction("unlike");
            let unmarked = tx.add(
                "liker marker",
                Write::delete(marker_key.clone())
                    .when(names_it)
                    .landed_if_gone(),
            );
            let removed = tx.add("like", Write::delete(like_key.item()).when(exists));
            let counted = tx.add("post", PostItem::count(post, Counter::Likes, Step::Down));
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(true),
                // Taken back or given again meanwhile (or by this very
                // request, its answer lost): read the marker again.
                TxOutcome::ConditionFailed(failed) if failed.failed(unmarked) => continue,
                TxOutcome::ConditionFailed(failed) if failed.failed(counted) => {
                    return Err(StoreError::PostNotFound);
                }
                TxOutcome::ConditionFailed(failed) if failed.failed(removed) => {
                    return Err(failed.unexpected("unlike: the marked like is missing"));
                }
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("unlike")),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the like kept changing while it was taken back",
        ))
    }

    /// Erasure (fan-out): the like `like` of `liker`, its marker (when it
    /// names this like: a new account of the same user may have liked since)
    /// and one off the post's `likeCount`, in one transaction, as unliking
    /// would; `false` when the like is gone already. When the post is gone
    /// (its own deletion clears its partition) the like goes alone.
    pub(super) async fn erase_like(
        &self,
        post: &PostId,
        like: &LikeId,
        liker: &UserId,
    ) -> Result<bool, StoreError> {
        let like_key = Key::new(keys::post_pk(post), keys::like_sk(like)).item();
        let mut with_marker = true;
        let mut with_count = true;
        loop {
            let mut tx = self.db.transaction("erase like");
            let exists = Expr::new("attribute_exists(PK)");
            let remove = Write::delete(like_key.clone())
                .when(exists)
                .landed_if_gone();
            let removed = tx.add("like", remove);
            let marker = with_marker.then(|| {
                let names_it = Expr::new("attribute_not_exists(PK) OR likeId = :like")
                    .value(":like", s(like.to_string()));
                let key = LikerMarker::key_of(post, liker).item();
                tx.add("liker marker", Write::delete(key).when(names_it))
            });
            let counted = with_count
                .then(|| tx.add("post", PostItem::count(post, Counter::Likes, Step::Down)));
            match tx.commit().await? {
                TxOutcome::Committed => return Ok(true),
                TxOutcome::ConditionFailed(failed) if failed.failed(removed) => return Ok(false),
                TxOutcome::ConditionFailed(failed) if marker.is_some_and(|m| failed.failed(m)) => {
                    with_marker = false;
                }
                TxOutcome::ConditionFailed(failed) if counted.is_some_and(|c| failed.failed(c)) => {
                    with_count = false;
                }
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("erase like")),
            }
        }
    }

    /// Q5 (request): one Query in the post's partition, newest first.
    pub async fn list_likes(
        &self,
        post: &PostId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Like>, StoreError> {
        let list = format!("likes:{post}");
        let after = super::pages::resume_after(&list, cursor, LikeId::parse)?;
        let start = after.map(|like| Key::new(keys::post_pk(post), keys::like_sk(&like)).item());
        let query = Query::partition(keys::post_pk(post))
            .begins_with(LIKE_PREFIX)
            .newest_first();
        let page = self
            .list_page(&list, &query, start, limit, |l: &LikeItem| {
                l.like_id.to_string()
            })
            .await?;
        Ok(Page {
            items: page.items.into_iter().map(Like::from).collect(),
            next_cursor: page.next_cursor,
        })
    }
}
