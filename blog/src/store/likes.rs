//! Likes (C4) and a post's list of likes (Q5), in the post's partition.

use aws_sdk_dynamodb::types::{Delete, ReturnConsumedCapacity};
use serde::{Deserialize, Serialize};

use super::{
    Busy, Cancelled, ItemType, Store, StoreError, from_item, key, posts::PostItem, s,
    users::UserItem,
};
use crate::{
    ids::{LikeId, PostId, UserId},
    keys::{self, LIKE_PREFIX, PK, SK},
    model::{Like, Page},
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
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    #[serde(rename = "GSI1PK")]
    pub gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    pub gsi1sk: String,
    #[serde(rename = "type")]
    pub kind: ItemType,
    pub like_id: LikeId,
    pub post_id: PostId,
    pub user_id: UserId,
    pub username: String,
    pub user_version: u64,
    pub created_at: String,
}

impl LikeItem {
    /// `liker`'s like of `post`, made when `like_id` was.
    pub fn new(post: PostId, like_id: LikeId, liker: &UserItem) -> Self {
        Self {
            pk: keys::post_pk(&post),
            sk: keys::like_sk(&like_id),
            gsi1pk: keys::user_items_pk(&liker.user_id),
            gsi1sk: keys::user_like_sk(&like_id),
            kind: ItemType::Like,
            like_id,
            post_id: post,
            user_id: liker.user_id.clone(),
            username: liker.username.clone(),
            user_version: liker.version,
            created_at: like_id.created_at(),
        }
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
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "type")]
    kind: ItemType,
    like_id: LikeId,
    user_id: UserId,
}

impl LikerMarker {
    /// The marker that guards `like`.
    pub(super) fn for_like(like: &LikeItem) -> Self {
        Self {
            pk: like.pk.clone(),
            sk: keys::liker_sk(&like.user_id),
            kind: ItemType::Liker,
            like_id: like.like_id,
            user_id: like.user_id.clone(),
        }
    }
}

/// What liking did: a new like, or the one the user had already given.
#[derive(Debug)]
pub enum Liked {
    New(Like),
    Already(Like),
}

impl Store {
    /// C4: the marker, the like and the post's `likeCount` change commit
    /// together; a second like by the same user fails on the marker and changes
    /// nothing. The like copies the liker's username as read; a rename racing
    /// with it is caught up by the fan-out's INSERT rule.
    pub async fn like_post(&self, post: &PostId, liker: &UserId) -> Result<Liked, StoreError> {
        let profile = self.author(liker).await?;
        // A like taken back between the refused put and the read of the
        // existing one: like again.
        for _ in 0..UNLIKE_ATTEMPTS {
            let like = LikeItem::new(*post, LikeId::generate(), &profile);
            let mut tx = self.transaction("like");
            let marker = tx.put_new("liker marker", &LikerMarker::for_like(&like))?;
            tx.put_new("like", &like)?;
            let counted = self.count_on_post(&mut tx, post, "likeCount", true)?;
            match tx.commit().await {
                Ok(()) => return Ok(Liked::New(like.into())),
                Err(Cancelled::Conditions(failed)) if failed.failed(counted) => {
                    return Err(StoreError::PostNotFound);
                }
                Err(Cancelled::Conditions(failed)) if failed.failed(marker) => {
                    if let Some(existing) = self.existing_like(post, liker).await? {
                        return Ok(Liked::Already(existing));
                    }
                }
                Err(Cancelled::Conditions(failed)) => return Err(failed.unexpected("like")),
                Err(Cancelled::Store(err)) => return Err(err),
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
        let marker = self
            .get(key(keys::post_pk(post), keys::liker_sk(liker)), true)
            .await?;
        let Some(marker) = marker else {
            return Ok(None);
        };
        let marker: LikerMarker = from_item(marker)?;
        let like = self
            .get(
                key(keys::post_pk(post), keys::like_sk(&marker.like_id)),
                true,
            )
            .await?;
        like.map(|like| from_item::<LikeItem>(like).map(Like::from))
            .transpose()
    }

    /// C4 taken back: the caller's like of `post`, its marker and one off the
    /// post's `likeCount` go together. `false` when there is no like to take
    /// back (answered 204 all the same); an error if there is no such post.
    /// The marker is deleted only if it still names the like read, so a
    /// concurrent unlike and like again are read afresh.
    pub async fn unlike_post(&self, post: &PostId, liker: &UserId) -> Result<bool, StoreError> {
        let marker_key = key(keys::post_pk(post), keys::liker_sk(liker));
        for _ in 0..UNLIKE_ATTEMPTS {
            let Some(marker) = self.get(marker_key.clone(), true).await? else {
                return match self.get(PostItem::key(post), true).await? {
                    Some(_) => Ok(false),
                    None => Err(StoreError::PostNotFound),
                };
            };
            let marker: LikerMarker = from_item(marker)?;
            let unmark = Delete::builder()
                .table_name(self.table())
                .set_key(Some(marker_key.clone()))
                .condition_expression("likeId = :like")
                .expression_attribute_values(":like", s(marker.like_id.to_string()))
                .build()?;
            let remove = Delete::builder()
                .table_name(self.table())
                .set_key(Some(key(
                    keys::post_pk(post),
                    keys::like_sk(&marker.like_id),
                )))
                .condition_expression("attribute_exists(PK)")
                .build()?;
            let mut tx = self.transaction("unlike");
            let unmarked = tx.delete("liker marker", unmark);
            let removed = tx.delete("like", remove);
            let counted = self.count_on_post(&mut tx, post, "likeCount", false)?;
            match tx.commit().await {
                Ok(()) => return Ok(true),
                // Taken back or given again meanwhile: read the marker again.
                Err(Cancelled::Conditions(failed)) if failed.failed(unmarked) => continue,
                Err(Cancelled::Conditions(failed)) if failed.failed(counted) => {
                    return Err(StoreError::PostNotFound);
                }
                Err(Cancelled::Conditions(failed)) if failed.failed(removed) => {
                    return Err(failed.unexpected("unlike: the marked like is missing"));
                }
                Err(Cancelled::Conditions(failed)) => return Err(failed.unexpected("unlike")),
                Err(Cancelled::Store(err)) => return Err(err),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the like kept changing while it was taken back",
        ))
    }

    /// Q5: one Query in the post's partition, newest first.
    pub async fn list_likes(
        &self,
        post: &PostId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Like>, StoreError> {
        let list = format!("likes:{post}");
        let after = super::pages::resume_after(&list, cursor, LikeId::parse)?;
        let start = after.map(|like| key(keys::post_pk(post), keys::like_sk(&like)));
        let query = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(keys::post_pk(post)))
            .expression_attribute_values(":prefix", s(LIKE_PREFIX))
            .scan_index_forward(false)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let page = self
            .list_page(&list, query, start, limit, |l: &LikeItem| {
                l.like_id.to_string()
            })
            .await?;
        Ok(Page {
            items: page.items.into_iter().map(Like::from).collect(),
            next_cursor: page.next_cursor,
        })
    }
}
