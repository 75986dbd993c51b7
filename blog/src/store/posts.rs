//! Posts (C2, Q2) and a user's list of posts (Q3, through GSI1).

use crate::store::items::post::{
    MENTIONS_ATTRIBUTE, PostContentItem, PostItem, STATUS, StoredPost, Unpublished,
};
use serde::Deserialize;

#[cfg(feature = "admin")]
use super::Admin;
use super::Requests;
use super::{
    Busy, Item, Store, StoreError,
    idempotency::{Answer, Idempotency},
    items::request_record::Created,
    items::schedule::ScheduledItem,
    items::user::UserItem,
    n, s,
    table::{Committing, Deleted, Expr, Landed, Query, TxOutcome, Write},
};
#[cfg(any(feature = "admin", test))]
use crate::keys::Counter;
use crate::{
    ids::{PostId, UserId},
    keys::{self, Entity, GSI1PK, GSI1SK, Key, PK, POST_CONTENT_SK, POST_SK, SK},
    markdown,
    mentions::Mentions,
    model::{Page, Post, PostSummary, Status},
    revision::Expected,
    text::Tag,
    timestamp,
};

/// How often an edit reads the post again when another edit got in first.
const EDIT_ATTEMPTS: usize = 5;

/// An edit's condition on the post item as the edit read it: it exists, it
/// is the editor's, and what lists show is still what the edit read.
fn as_read(item: &PostItem, editor: &UserId) -> Expr {
    let tags = if item.tags.is_empty() {
        Expr::new("attribute_not_exists(tags)")
    } else {
        Expr::new("tags = :tags").value(":tags", tag_list(&item.tags))
    };
    let status = if item.is_published() {
        Expr::new("attribute_not_exists(#read_status)")
    } else {
        Expr::new("attribute_exists(#read_status)")
    }
    .name("#read_status", STATUS);
    Expr::item_exists()
        .and("userId = :editor AND title = :title AND summary = :summary")
        .value(":editor", s(editor.as_str()))
        .value(":title", s(&item.title))
        .value(":summary", s(&item.summary))
        .and_expr(tags)
        .and_expr(status)
}

/// A post's tags as the item holds them: a list of strings, in order.
fn tag_list(tags: &[Tag]) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::L(tags.iter().map(|t| s(t.as_str())).collect())
}

/// A new post, its fields validated.
#[derive(Debug, Clone, Copy)]
pub struct NewPost<'a> {
    pub title: &'a str,
    pub content: &'a str,
    pub tags: &'a [Tag],
    pub status: Status,
    /// A scheduled post's time to publish itself.
    pub publish_at: Option<&'a str>,
}

/// What a post edit changes; `None` keeps the current value.
#[derive(Debug, Default)]
pub struct PostEdit<'a> {
    pub title: Option<&'a str>,
    pub content: Option<&'a str>,
    /// The whole new set of tags (none: `Some(&[])`).
    pub tags: Option<&'a [Tag]>,
    /// Publish a draft, take a published post back to a draft, or schedule
    /// it (with `publish_at`).
    pub status: Option<Status>,
    /// When a scheduled post publishes itself (with `Status::Scheduled`).
    pub publish_at: Option<&'a str>,
}

impl Requests<'_> {
    /// C2 (request): the post item and its content, in one transaction, under the
    /// caller's current username (a rename racing with it is caught up by the
    /// fan-out's INSERT rule).
    pub async fn create_post(
        &self,
        author: &UserId,
        title: &str,
        content: &str,
    ) -> Result<Post, StoreError> {
        let new = NewPost {
            title,
            content,
            tags: &[],
            status: Status::Published,
            publish_at: None,
        };
        match self.create_post_keyed(author, new, None).await? {
            Answer::New(post) => Ok(post),
            Answer::Replayed(_) => Err(StoreError::Internal(
                "a replay without an idempotency key".to_owned(),
            )),
        }
    }

    /// [`crate::store::Requests::create_post`], with an `Idempotency-Key` if the request had
    /// one ([`super::idempotency`]): its record goes in the same transaction,
    /// and a retry gets the first answer (its `contentHtml` rendered from the
    /// post item's mentions, as found by the first). Content that mentions
    /// anyone costs one BatchGetItem first (`Requests::find_mentioned`).
    pub async fn create_post_keyed(
        &self,
        author: &UserId,
        new: NewPost<'_>,
        keyed: Option<&Idempotency>,
    ) -> Result<Answer<Post>, StoreError> {
        let NewPost {
            title,
            content,
            tags,
            status,
            publish_at,
        } = new;
        // The caller's profile (403 for an erased account, or without one):
        // its name goes onto the item.
        let profile = self.writer(author).await?.profile()?;
        // The users it mentions, a draft's too (its notifications wait for
        // its publication).
        let mentions = self
            .find_mentioned(author, &markdown::mentioned(content))
            .await?;
        let post_id = PostId::generate();
        let now = post_id.created_at();
        let mut item = PostItem::new(post_id, &profile, title, content, tags, status, &now);
        item.publish_at = publish_at
            .filter(|_| status == Status::Scheduled)
            .map(str::to_owned);
        item.mentions = mentions;
        let text = PostContentItem::new(post_id, content, &now);
        let mut tx = self.db.transaction("create post");
        tx.add("post", Write::create(&item)?);
        tx.add("post content", Write::create(&text)?);
        if let Some(at) = &item.publish_at {
            tx.add("schedule", Write::create(&ScheduledItem::new(post_id, at))?);
        }
        let answer = Post::from(StoredPost {
            item,
            content: Some(text),
        });
        let created = Created::Post { post_id };
        let record = Idempotency::add_record(keyed, &mut tx, profile.account(), &answer, created)?;
        match tx.commit_watched().await? {
            Committing::Done(TxOutcome::Committed) => Ok(Answer::New(answer)),
            Committing::Done(TxOutcome::ConditionFailed(failed))
                if record.is_some_and(|r| failed.failed(r)) =>
            {
                match keyed {
                    Some(keyed) => Ok(Answer::Replayed(
                        self.replay(profile.account(), keyed).await?,
                    )),
                    None => Err(failed.unexpected("create post")),
                }
            }
            Committing::Done(TxOutcome::ConditionFailed(failed)) => {
                Err(failed.unexpected("create post"))
            }
            Committing::Held => Err(StoreError::IdempotencyKeyInFlight),
            Committing::Throttled => Err(StoreError::Internal("create post: throttled".into())),
        }
    }

    /// Q2 (request): one Query of the post's partition for `begins_with(SK, POST)`: the
    /// post item and its content. One call, and one read charge for both
    /// (DynamoDB rounds a Query's total size up to 4 KB, where two GetItems,
    /// or a BatchGetItem, would round each item up on its own). A hot
    /// post's answer is kept by the instance for its time to live, then
    /// checked by the post item alone (one GetItem) and read whole again
    /// only if the post was edited (`store::memory::HotReads`).
    pub async fn get_post(&self, post: &PostId) -> Result<Option<Post>, StoreError> {
        if let Some(kept) = self.hot_reads.post(post) {
            return Ok(Some(kept));
        }
        // A hot post this instance answered before, its time to live past:
        // the post item alone says whether it changed but for its counts
        // and its author's name (`store::memory::HotReads`).
        if let Some(kept) = self.hot_reads.last_post(post)
            && let Some(read_at) = kept.item_updated_at
        {
            let key = keys::post_item(post).item();
            let Some(item) = self.db.get_entity::<PostItem>(key, false).await? else {
                return Ok(None);
            };
            if item.updated_at == read_at && item.is_published() && item.content.is_none() {
                let answer = Post {
                    username: item.username,
                    comment_count: item.comment_count,
                    like_count: item.like_count,
                    ..kept.answer
                };
                self.hot_reads.keep_post(&answer, Some(&item.updated_at));
                return Ok(Some(answer));
            }
        }
        // A draft is its author's alone: to anyone else, there is none.
        let Some(found) = self.read_post(post, false).await? else {
            return Ok(None);
        };
        if !found.item.is_published() {
            return Ok(None);
        }
        let hot = found.item.shards.is_some();
        // Checked by its item alone later only when read at one edit: its
        // content written with the item (`store::memory::HotReads`).
        let one_edit = match &found.content {
            Some(content) => content.updated_at == found.item.updated_at,
            None => found.item.content.is_none(),
        };
        let item_updated_at = one_edit.then(|| found.item.updated_at.clone());
        let answer = Post::from(found);
        if hot {
            self.hot_reads
                .keep_post(&answer, item_updated_at.as_deref());
        }
        Ok(Some(answer))
    }

    /// C2 (edit; request): the content item, when the content changes, and
    /// the post item, when what lists show (the title or the summary) or the
    /// content changes (its `updatedAt` is the post's last edit, which the
    /// Atom feeds show); one transaction either way. The post item's condition (the
    /// author, and the title and summary as read) makes concurrent edits take
    /// turns, so the summary is always the content's; likes and comments
    /// meanwhile do not disturb it. An erased account's edit is refused
    /// before the post is read ([`crate::store::Requests::writer`]). An
    /// edit of the content writes the users it mentions onto the post item
    /// (one BatchGetItem of the names not found before, when there are
    /// any: `Requests::find_mentioned`).
    pub async fn edit_post(
        &self,
        post: &PostId,
        editor: &UserId,
        edit: PostEdit<'_>,
        expected: &Expected,
    ) -> Result<Post, StoreError> {
        self.refuse_erased(editor).await?;
        for _ in 0..EDIT_ATTEMPTS {
            let current = self
                .read_post(post, true)
                .await?
                .ok_or(StoreError::PostNotFound)?;
            current.item.authored_by(editor)?;
            // Checked against what was read; the write's guard then fails if
            // anything changed since, and the next round reads it again.
            if !expected.admits(current.revision()) {
                return Err(StoreError::PreconditionFailed);
            }
            let at = timestamp::after(current.updated_at());
            // New content mentions anew: the users its names were found for
            // stay (no read, whatever renames since), the others are looked
            // up. The map is written with the content, in its transaction.
            let mentions = match edit.content {
                Some(content) => {
                    let names = markdown::mentioned(content);
                    let (kept, missing) = current.item.mentions.kept_for(&names);
                    Some(kept.and(self.find_mentioned(editor, &missing).await?))
                }
                None => None,
            };
            let plan = EditPlan::new(&current, editor, &edit, mentions, &at)?;
            let mut tx = self.db.transaction("edit post");
            let mut content_guard = None;
            if let Some(content) = &plan.content {
                let updated = Landed::When(vec![("updatedAt", s(&content.updated_at))]);
                // The content as read (or none yet): an edit of it since
                // makes this one read again rather than overwrite it.
                let as_read = match &current.content {
                    Some(read) => {
                        Expr::new("updatedAt = :read").value(":read", s(&read.updated_at))
                    }
                    None => Expr::item_absent(),
                };
                let put = Write::put(content, updated)?.when(as_read);
                content_guard = Some(tx.add("post content", put));
            }
            let guard = tx.add("post", plan.post_write);
            if let Some(marker) = &plan.marker {
                tx.add("schedule", Write::put(marker, Landed::Untold)?);
            }
            if let Some(stale) = &plan.stale_marker {
                // Untold: the marker may be gone already (moved meanwhile,
                // published): its absence would pass for this commit.
                let gone = Write::delete(stale.key().item(), Deleted::Untold);
                tx.add("old schedule", gone);
            }
            match tx.commit().await? {
                TxOutcome::Committed => {
                    let content = plan.content.or(current.content);
                    return Ok(StoredPost {
                        item: plan.item,
                        content,
                    }
                    .into());
                }
                // Deleted, or edited by another request since we read it.
                TxOutcome::ConditionFailed(failed) if failed.failed(guard) => continue,
                TxOutcome::ConditionFailed(failed)
                    if content_guard.is_some_and(|slot| failed.failed(slot)) =>
                {
                    continue;
                }
                TxOutcome::ConditionFailed(failed) => return Err(failed.unexpected("edit post")),
            }
        }
        Err(StoreError::busy(
            Busy::Conflict,
            "the post kept changing during the edit",
        ))
    }

    /// Q3 (request): one Query of GSI1 in the author's partition, newest first. Reads one
    /// item more than the page so that the last page has no cursor.
    pub async fn list_user_posts(
        &self,
        author: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostSummary>, StoreError> {
        let list = format!("user-posts:{author}");
        let after = super::pages::resume_after(&list, cursor, listed_and_post)?;
        // The page after the last one's: its index key (where it is
        // listed) and its table key (its own id).
        let start =
            after.map(|(listed, post)| index_start(author, keys::user_post_sk(&listed), &post));
        let query = Query::gsi1(keys::user_items_pk(author))
            .begins_with(keys::POST_PREFIX)
            .newest_first();
        let page = self
            .list_page(&list, &query, start, limit, |p: &Listed| p.listed())
            .await?;
        Ok(Page {
            items: page
                .items
                .into_iter()
                .map(|p| {
                    let listed = p.listed_id();
                    p.post.listed_at(listed)
                })
                .collect(),
            next_cursor: page.next_cursor,
        })
    }
}

impl Requests<'_> {
    /// When each of `posts` that still exists was last edited (its post
    /// item's `updatedAt`), for the user's Atom feed: Q3's index does not
    /// project it. One BatchGetItem of the post items, eventually consistent
    /// (half a unit each: they are a few hundred bytes).
    pub async fn edit_times(
        &self,
        posts: &[PostId],
    ) -> Result<std::collections::HashMap<PostId, String>, StoreError> {
        let keys = posts.iter().map(PostItem::key).collect();
        let (items, _) = self
            .db
            .batch_get_with("post edit times", keys, false)
            .await?;
        items
            .into_iter()
            .map(|item| {
                let post = PostItem::decode(item)?;
                Ok((post.post_id, post.updated_at))
            })
            .collect()
    }

    /// Whether `post` is a draft (Q4 and Q5 of a post that went back to a
    /// draft, with comments or likes from before: 404). One GetItem of the
    /// post item, eventually consistent, keys and status only.
    pub async fn is_draft(&self, post: &PostId) -> Result<bool, StoreError> {
        let found = self
            .db
            .get("a post item", PostItem::key(post), false)
            .await?;
        Ok(found.is_some_and(|item| item.contains_key(STATUS)))
    }
}

/// How many bytes of content (as written and rendered) one page of drafts
/// carries at most, so that its answer stays within Lambda's 6 MB response:
/// a page stops early (at least one draft) and its cursor goes on.
const DRAFTS_PAGE_BYTES: usize = 2 * 1024 * 1024;

impl Requests<'_> {
    /// `GET /users/{userId}/drafts` (request): the author's drafts, whole
    /// (a draft is read nowhere else), newest first: their profile (strong:
    /// none, or an erased account's, is a 404 as for the export), one Query
    /// of GSI1 under `POSTDRAFT#`, then one BatchGetItem (strong) of their
    /// post and content items.
    pub async fn list_drafts(
        &self,
        author: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<Post>, StoreError> {
        let profile = self
            .db
            .get_entity::<UserItem>(keys::profile(author).item(), true)
            .await?;
        if profile.is_none() {
            return Err(StoreError::UserNotFound);
        }
        let list = format!("drafts:{author}");
        let after = super::pages::resume_after(&list, cursor, PostId::parse)?;
        let start = after.map(|post| index_start(author, keys::user_draft_sk(&post), &post));
        let query = Query::gsi1(keys::user_items_pk(author))
            .begins_with(keys::DRAFT_PREFIX)
            .newest_first();
        let listed: Vec<PostSummary> = super::from_items(
            self.db
                .query_up_to("list drafts", &query, start, limit.saturating_add(1))
                .await?,
        )?;
        let mut more = listed.len() > limit;
        let ids: Vec<PostId> = listed.iter().take(limit).map(|p| p.post_id).collect();
        let wanted: Vec<Item> = ids
            .iter()
            .flat_map(|post| {
                [
                    keys::post_item(post).item(),
                    PostContentItem::key_of(post).item(),
                ]
            })
            .collect();
        let mut found: std::collections::HashMap<Key, Item> = std::collections::HashMap::new();
        if !wanted.is_empty() {
            for item in self.db.batch_get("list drafts", wanted).await?.0 {
                found.insert(Key::of(&item)?, item);
            }
        }
        let (mut items, mut bytes, mut last) = (Vec::new(), 0, None);
        for post in &ids {
            last = Some(*post);
            // Published or deleted since the index was read: not a draft.
            let Some(item) = found.remove(&keys::post_item(post)) else {
                continue;
            };
            let item = PostItem::decode(item)?;
            if item.is_published() {
                continue;
            }
            let content = found
                .remove(&PostContentItem::key_of(post))
                .map(PostContentItem::decode)
                .transpose()?;
            let draft = Post::from(StoredPost { item, content });
            bytes += draft.content.len() + draft.content_html.len();
            items.push(draft);
            if bytes > DRAFTS_PAGE_BYTES && Some(post) != ids.last() {
                more = true;
                break;
            }
        }
        let next_cursor = match last {
            Some(last) if more => Some(super::cursor::encode(&list, &last.to_string())),
            _ => None,
        };
        Ok(Page { items, next_cursor })
    }
}

/// Where a page of `author`'s posts in GSI1 resumes: after the post item
/// `post` under the index's sort key `gsi1sk` (DynamoDB takes both the
/// index's key and the table's).
fn index_start(author: &UserId, gsi1sk: String, post: &PostId) -> Item {
    Item::from([
        (GSI1PK.to_owned(), s(keys::user_items_pk(author))),
        (GSI1SK.to_owned(), s(gsi1sk)),
        (PK.to_owned(), s(keys::post_pk(post))),
        (SK.to_owned(), s(POST_SK)),
    ])
}

/// A post as GSI1 lists it: its short form and the index's sort key, which
/// says where it is listed (the cursor's place).
#[derive(Deserialize)]
struct Listed {
    #[serde(flatten)]
    post: PostSummary,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
}

impl Listed {
    /// Where it is listed ([`PostId::listed_at`]); its own id if the index
    /// key were ever unreadable.
    fn listed_id(&self) -> PostId {
        keys::listed_of_user_post_sk(&self.gsi1sk).unwrap_or(self.post.post_id)
    }

    /// The cursor's id of it: where it is listed and its own id
    /// (`<listedId>.<postId>`, [`listed_and_post`]). An index key of
    /// another shape (none is written) goes into the cursor whole.
    fn listed(&self) -> String {
        let listed = match keys::UserItemsKind::of_sk(&self.gsi1sk) {
            Some((keys::UserItemsKind::Post, listed)) => listed,
            _ => &self.gsi1sk,
        };
        format!("{listed}.{}", self.post.post_id)
    }
}

/// A Q3 cursor's id back: `<listedId>.<postId>`, both validated.
fn listed_and_post(raw: &str) -> Result<(PostId, PostId), crate::ids::IdError> {
    let (listed, post) = raw
        .split_once('.')
        .ok_or(crate::ids::IdError::NotUlid { kind: "cursor" })?;
    Ok((PostId::parse(listed)?, PostId::parse(post)?))
}

impl Store {
    /// The post item and its content, strongly consistent when a write
    /// depends on them (requests, the fan-out and the admin tools).
    pub async fn read_post(
        &self,
        post: &PostId,
        consistent: bool,
    ) -> Result<Option<StoredPost>, StoreError> {
        let mut query = Query::partition(keys::post_pk(post)).begins_with(keys::POST_ITEMS_PREFIX);
        if consistent {
            query = query.consistent();
        }
        let mut item = None;
        let mut content = None;
        for found in self.db.query_up_to("read post", &query, None, 2).await? {
            match Key::of(&found)?.sk.as_str() {
                POST_SK => item = Some(PostItem::decode(found)?),
                POST_CONTENT_SK => content = Some(PostContentItem::decode(found)?),
                _ => {}
            }
        }
        Ok(item.map(|item| StoredPost { item, content }))
    }
}

#[cfg(feature = "admin")]
impl Admin<'_> {
    /// The audit's repair of a count (admin): sets `counter` to `actual` if
    /// the post is still at the `version` it was read at (so a like or a
    /// comment since is never undone), and raises the version so the feed
    /// copy follows.
    pub(crate) async fn set_post_count(
        &self,
        post: &PostId,
        counter: Counter,
        actual: u64,
        version: u64,
    ) -> Result<bool, StoreError> {
        let change = Expr::new("SET #counter = :actual, version = version + :one")
            .name("#counter", counter.attribute())
            .value(":actual", n(actual))
            .value(":one", n(1));
        let seen = Expr::new("version = :seen").value(":seen", n(version));
        let landed = Landed::When(vec![
            (keys::VERSION, n(version + 1)),
            (counter.attribute(), n(actual)),
        ]);
        let write = Write::update(PostItem::key(post), change, landed).when(seen);
        Ok(self.db.write("set post count", &write).await?.done())
    }

    /// Moves a post of the old shape (content on the post item) into the new
    /// one (admin: `blog-admin migrate`): the content item, then the content off the post item, in one
    /// transaction. `false` when there was nothing to move: the post is in
    /// the new shape already, or an edit moved it meanwhile. Safe while the
    /// API serves: an edit always leaves the new shape, and a like or a
    /// comment does not touch the content.
    pub async fn migrate_post(&self, post: &PostId) -> Result<bool, StoreError> {
        let Some(current) = self.read_post(post, true).await? else {
            return Ok(false);
        };
        let Some(text) = current.item.content.clone() else {
            return Ok(false);
        };
        let mut tx = self.db.transaction("migrate post");
        let content = PostContentItem::new(*post, &text, &current.item.updated_at);
        let moved = tx.add("post content", Write::create(&content)?);
        let unchanged = Expr::new("content = :content").value(":content", s(&text));
        // The content's create tells whether the move committed.
        let change = Expr::new("REMOVE content");
        let remove = Write::update(PostItem::key(post), change, Landed::Untold);
        let removed = tx.add("post", remove.when(unchanged));
        match tx.commit().await? {
            TxOutcome::Committed => Ok(true),
            TxOutcome::ConditionFailed(failed)
                if failed.failed(moved) || failed.failed(removed) =>
            {
                Ok(false)
            }
            TxOutcome::ConditionFailed(failed) => Err(failed.unexpected("migrate post")),
        }
    }
}

/// What an edit writes, planned from the post as read (pure: no I/O).
struct EditPlan {
    /// The content item, when the content changes (or moves out of an old
    /// post item).
    content: Option<PostContentItem>,
    /// The post item as it will be.
    item: PostItem,
    /// Its update when what lists show changes, else a check that nothing
    /// did since it was read.
    post_write: Write,
    /// The scheduler's marker of a new time to publish.
    marker: Option<ScheduledItem>,
    /// The marker of the time it no longer has.
    stale_marker: Option<ScheduledItem>,
}

impl EditPlan {
    /// `mentions`: the users new content mentions (`None`: the content is
    /// not edited, and neither is its map).
    fn new(
        current: &StoredPost,
        editor: &UserId,
        edit: &PostEdit<'_>,
        mentions: Option<Mentions>,
        now: &str,
    ) -> Result<Self, StoreError> {
        let post = current.item.post_id;
        let legacy = current.item.content.is_some();
        let text = edit.content.unwrap_or(current.text()).to_owned();
        let content =
            (edit.content.is_some() || legacy).then(|| PostContentItem::new(post, &text, now));
        let mut guard = as_read(&current.item, editor);
        let mut item = current.item.clone();
        item.title = edit.title.unwrap_or(&current.item.title).to_owned();
        item.summary = markdown::summary(&text);
        item.tags = edit.tags.unwrap_or(&current.item.tags).to_vec();
        if let Some(mentions) = &mentions {
            item.mentions = mentions.clone();
        }
        match edit.status {
            // Published now (a draft or a scheduled post): listed from now
            // on, in every list.
            Some(Status::Published) if !current.item.is_published() => {
                item.status = None;
                item.publish_at = None;
                item.published_at = Some(now.to_owned());
            }
            // Out of every list (a published post taken back), or scheduled
            // anew. A hot post's likes go to its shards, which know nothing
            // of drafts: it stays out.
            Some(status @ (Status::Draft | Status::Scheduled)) => {
                if current.item.is_published() {
                    if current.item.shards.is_some() || current.item.closing.is_some() {
                        return Err(StoreError::PostIsHot);
                    }
                    // Not turned hot since it was read (the switch, for its
                    // part, closes only a published post).
                    guard = guard
                        .and("attribute_not_exists(#shards) AND attribute_not_exists(#closing)")
                        .name("#shards", crate::store::items::post::SHARDS_ATTRIBUTE)
                        .name("#closing", crate::store::items::post::CLOSING_ATTRIBUTE);
                }
                item.status = Unpublished::of(status);
                item.published_at = None;
                item.publish_at = match status {
                    Status::Scheduled => edit.publish_at.map(str::to_owned),
                    _ => None,
                };
            }
            _ => {}
        }
        // A new time to publish: the scheduler's marker of it, and the old
        // time's marker out (moved, published now or taken back), in the
        // edit's transaction: no marker is left for a run to read.
        let moved = item.publish_at != current.item.publish_at;
        let marker = item
            .publish_at
            .as_deref()
            .filter(|_| moved)
            .map(|at| ScheduledItem::new(post, at));
        let stale_marker = current
            .item
            .publish_at
            .as_deref()
            .filter(|_| moved)
            .map(|at| ScheduledItem::new(post, at));
        let shown_changes = item.title != current.item.title
            || item.summary != current.item.summary
            || item.tags != current.item.tags
            || item.status != current.item.status
            || item.publish_at != current.item.publish_at;
        // The post item's `updatedAt` is the post's last edit: an edit of the
        // content writes it too (then the fan-out refreshes the copies, whose
        // Atom entries say when the post was updated).
        if !(shown_changes || content.is_some()) {
            let post_write = Write::check(PostItem::key(&post), guard);
            return Ok(Self {
                content,
                item,
                post_write,
                marker,
                stale_marker,
            });
        }
        item.updated_at = now.to_owned();
        item.version += 1;
        item.content = None;
        let gsi1 = item
            .gsi1()
            .ok_or_else(|| StoreError::Internal("a post without GSI1 keys".to_owned()))?;
        let mut set = vec![
            "title = :new_title",
            "summary = :new_summary",
            "updatedAt = :now",
            "version = version + :one",
            "#gsi1sk = :gsi1sk",
        ];
        let mut remove = vec!["content"];
        let mut change = Expr::new("")
            .value(":new_title", s(&item.title))
            .value(":new_summary", s(&item.summary))
            .value(":now", s(now))
            .value(":one", n(1))
            .name("#gsi1sk", GSI1SK)
            .value(":gsi1sk", s(&gsi1.sk))
            .name("#status", STATUS);
        if item.tags.is_empty() {
            remove.push("tags");
        } else {
            set.push("tags = :new_tags");
            change = change.value(":new_tags", tag_list(&item.tags));
        }
        match (&item.status, &item.published_at) {
            (Some(status), _) => {
                set.push("#status = :status");
                remove.push("publishedAt");
                change = change.value(":status", status_value(*status)?);
            }
            (None, Some(at)) => {
                set.push("publishedAt = :published");
                remove.push("#status");
                change = change.value(":published", s(at));
            }
            (None, None) => remove.push("#status"),
        }
        match &item.publish_at {
            Some(at) => {
                set.push("publishAt = :publish_at");
                change = change.value(":publish_at", s(at));
            }
            None => remove.push("publishAt"),
        }
        // An edit of the content writes its mentions (none: the attribute
        // goes); another edit leaves them as they are.
        match &mentions {
            Some(mentions) if mentions.is_empty() => {
                remove.push("#mentions");
                change = change.name("#mentions", MENTIONS_ATTRIBUTE);
            }
            Some(mentions) => {
                set.push("#mentions = :mentions");
                change = change
                    .name("#mentions", MENTIONS_ATTRIBUTE)
                    .value(":mentions", mentions_value(mentions)?);
            }
            None => {}
        }
        let change = change.with_text(format!(
            "SET {} REMOVE {}",
            set.join(", "),
            remove.join(", ")
        ));
        let landed = Landed::When(vec![
            (keys::VERSION, n(item.version)),
            ("title", s(&item.title)),
            ("summary", s(&item.summary)),
        ]);
        Ok(Self {
            content,
            post_write: Write::update(PostItem::key(&post), change, landed).when(guard),
            item,
            marker,
            stale_marker,
        })
    }
}

/// A post's [`Mentions`] as the item holds them: a map of strings.
fn mentions_value(
    mentions: &Mentions,
) -> Result<aws_sdk_dynamodb::types::AttributeValue, StoreError> {
    serde_dynamo::to_attribute_value(mentions)
        .map_err(|e| StoreError::Internal(format!("cannot encode mentions: {e}")))
}

fn status_value(
    status: Unpublished,
) -> Result<aws_sdk_dynamodb::types::AttributeValue, StoreError> {
    serde_dynamo::to_attribute_value(status)
        .map_err(|e| StoreError::Internal(format!("cannot encode a status: {e}")))
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::types::AttributeValue;

    use super::*;
    use crate::store::table::GSI1_PROJECTED;
    use crate::text::Username;

    fn post() -> Result<PostItem, Box<dyn std::error::Error>> {
        let author = UserItem {
            user_id: UserId::parse("user-1")?,
            username: Username::parse("alice")?,
            created_at: timestamp::now(),
            updated_at: timestamp::now(),
            version: 1,
            first_version: 1,
            following_count: 0,
            block_count: 0,
            follower_shards: Default::default(),
            follower_total: None,
            pulls: Default::default(),
        };
        let mut post = PostItem::new(
            PostId::generate(),
            &author,
            "t",
            "c",
            &[],
            Status::Published,
            "now",
        );
        (post.comment_count, post.like_count) = (3, 7);
        Ok(post)
    }

    /// The names the table layer writes counts and projects GSI1 with are
    /// the post item's own: a field renamed on one side only fails here.
    #[test]
    fn the_counters_and_gsi1s_projection_name_the_post_items_attributes()
    -> Result<(), Box<dyn std::error::Error>> {
        let post = post()?;
        let item = post.to_item()?;
        for counter in Counter::ALL {
            let held = item.get(counter.attribute());
            let count = post.count_of(counter).to_string();
            assert_eq!(held, Some(&AttributeValue::N(count)), "{counter:?}");
        }
        for name in GSI1_PROJECTED {
            assert!(
                item.contains_key(name),
                "GSI1 projects {name}, no post attribute"
            );
        }
        Ok(())
    }

    /// A count below 0 (which no write makes while its items exist) reads
    /// as 0, in the post and in its short form: a read answers, not a 500.
    #[test]
    fn a_count_stored_below_zero_reads_as_zero() -> Result<(), Box<dyn std::error::Error>> {
        let mut item = post()?.to_item()?;
        item.insert(
            Counter::Likes.attribute().to_owned(),
            AttributeValue::N("-2".to_owned()),
        );
        let read: PostItem = crate::store::from_item(item.clone())?;
        assert_eq!((read.like_count, read.comment_count), (0, 3));
        let short: crate::model::PostSummary = crate::store::from_item(item)?;
        assert_eq!((short.like_count, short.comment_count), (0, 3));
        Ok(())
    }
}
