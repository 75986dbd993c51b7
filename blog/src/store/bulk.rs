//! Loading a whole data set at once, in the state that the write paths and the
//! fan-out would have left it: every count equal to its items, every username
//! copied, the feed holding the newest posts above its floor. For benchmarks
//! and large fixtures, where a transaction per like would take hours. The
//! audit finds nothing to repair in what these items describe (a test checks).

use aws_sdk_dynamodb::Client;

use super::{
    Item, StoreError,
    items::comment::CommentItem,
    items::feed::{FeedEntryItem, FeedFloorItem},
    items::like::{LikeItem, LikedMarker},
    items::post::{PostContentItem, PostItem},
    items::user::{UserItem, UsernameClaim},
    table::Table,
};
use crate::keys::Entity;

fn to_item<E: Entity>(entity: &E) -> Result<Item, StoreError> {
    Ok(entity.to_item()?)
}

/// A post with everything written under it.
#[derive(Debug, Clone)]
pub struct PostWithReplies {
    pub post: PostItem,
    pub content: PostContentItem,
    pub comments: Vec<CommentItem>,
    pub likes: Vec<LikeItem>,
}

impl PostWithReplies {
    /// Sets the post's counts and version from its replies, as one transaction
    /// per reply would have.
    pub fn new(
        mut post: PostItem,
        content: PostContentItem,
        comments: Vec<CommentItem>,
        likes: Vec<LikeItem>,
    ) -> Self {
        post.comment_count = comments.len() as u64;
        post.like_count = likes.len() as u64;
        post.version = 1 + post.comment_count + post.like_count;
        Self {
            post,
            content,
            comments,
            likes,
        }
    }
}

/// A profile and its username claim.
pub fn user_items(user: &UserItem) -> Result<Vec<Item>, StoreError> {
    Ok(vec![to_item(user)?, to_item(&UsernameClaim::of(user))?])
}

/// A post, its comments, its likes and their likers' marks.
pub fn post_items(thread: &PostWithReplies) -> Result<Vec<Item>, StoreError> {
    let mut items = Vec::with_capacity(2 + thread.comments.len() + 2 * thread.likes.len());
    items.push(to_item(&thread.post)?);
    items.push(to_item(&thread.content)?);
    for comment in &thread.comments {
        items.push(to_item(comment)?);
    }
    for like in &thread.likes {
        items.push(to_item(like)?);
        items.push(to_item(&LikedMarker::for_like(like))?);
    }
    Ok(items)
}

/// The feed partition for these posts: entries for the newest `capacity`, and
/// a floor at the newest of the rest, as the fan-out's trims would leave it.
/// Each post must carry its final counts and version ([`PostWithReplies::new`]).
pub fn feed_items(posts: &[&PostItem], capacity: usize) -> Result<Vec<Item>, StoreError> {
    let mut newest: Vec<&PostItem> = posts.to_vec();
    newest.sort_by_key(|post| std::cmp::Reverse(post.post_id));
    let mut items = Vec::with_capacity(capacity.min(newest.len()) + 1);
    for post in newest.iter().take(capacity) {
        items.push(to_item(&FeedEntryItem::from(*post))?);
    }
    if let Some(floor) = newest.get(capacity) {
        let entries = capacity as u64;
        items.push(to_item(&FeedFloorItem::at(floor.post_id, entries))?);
    }
    Ok(items)
}

/// Writes `items` into `table` with BatchWriteItem, 25 at a time, resending
/// whatever DynamoDB leaves unprocessed. Unconditional: for loading only.
pub async fn put_items(client: &Client, table: &str, items: Vec<Item>) -> Result<(), StoreError> {
    Table::new(client.clone(), table).batch_put(items).await
}
