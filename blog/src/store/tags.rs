//! Tag lists (`GET /tags/{tag}/posts`): one partition a tag, `TAG#<tag>`,
//! holding the short form of each post that has the tag, as the feed holds
//! the newest posts. Requests only read it (one Query a page whatever the
//! tag's size); the stream fan-out writes it from the post's images: a new
//! post's tags in, a changed post's entries refreshed (once a batch, so a
//! like adds no write of its own), moved when its tags change, and out with
//! the post.

use crate::store::items::feed::TagEntryItem;

#[cfg(feature = "admin")]
use super::Admin;
use super::{
    FanOut, Requests, StoreError,
    items::post::PostItem,
    n,
    table::{Deleted, Expr, Landed, Query, Write},
};
use crate::{
    ids::PostId,
    keys::{self, POST_PREFIX},
    model::{Page, PostSummary},
    text::Tag,
};

impl Requests<'_> {
    /// `GET /tags/{tag}/posts`: the tag's posts in short form, newest first;
    /// one Query a page.
    pub async fn tag_posts(
        &self,
        tag: &Tag,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<PostSummary>, StoreError> {
        let list = format!("tag-posts:{tag}");
        let after = super::pages::resume_after(&list, cursor, PostId::parse)?;
        let start = after.map(|listed| TagEntryItem::key_of(tag, &listed).item());
        let query = Query::partition(keys::tag_pk(tag))
            .begins_with(POST_PREFIX)
            .newest_first();
        let page = self
            .list_page(&list, &query, start, limit, |e: &TagEntryItem| {
                e.listed().to_string()
            })
            .await?;
        Ok(Page {
            items: page
                .items
                .into_iter()
                .map(|e| {
                    let listed = e.listed();
                    e.post.listed_at(listed).edited_at(e.updated_at)
                })
                .collect(),
            next_cursor: page.next_cursor,
        })
    }
}

impl super::Store {
    /// The post item alone (not its content), strongly consistent: what a
    /// tag entry is checked against.
    pub(crate) async fn post_item(&self, post: &PostId) -> Result<Option<PostItem>, StoreError> {
        self.db
            .get_entity::<PostItem>(PostItem::key(post), true)
            .await
    }
}

impl FanOut<'_> {
    /// The post as `post` shows it, into the list of each of its tags where
    /// the entry is missing or older: a new post's entries, a changed one's
    /// refreshed, an added tag's entry. Then, if it wrote anything, reads the
    /// post item (strongly consistent; 1 RCU) and takes back each entry written for a
    /// tag the post no longer has (or for a post that is gone): a record
    /// delivered again, or replayed, after a newer change cannot bring an
    /// entry back. Returns how many writes it issued.
    pub async fn enter_tags(&self, post: &PostItem) -> Result<usize, StoreError> {
        let Some(listed) = post.listed_id() else {
            return Ok(0);
        };
        let mut written = Vec::new();
        for tag in &post.tags {
            let entry = TagEntryItem::of(post, tag);
            let older = Expr::new(
                "attribute_not_exists(version) OR version < :version OR userVersion < :uv",
            )
            .value(":version", n(entry.version))
            .value(":uv", n(entry.user_version));
            let landed = Landed::When(vec![
                (keys::VERSION, n(entry.version)),
                ("userVersion", n(entry.user_version)),
            ]);
            let put = Write::put(&entry, landed)?.when(older);
            if self.db.write("enter tag list", &put).await?.done() {
                written.push(tag);
            }
        }
        let mut writes = post.tags.len();
        if written.is_empty() {
            return Ok(writes);
        }
        let now = self.post_item(&post.post_id).await?;
        for tag in written {
            let kept = now
                .as_ref()
                .is_some_and(|now| now.tags.contains(tag) && now.listed_id() == Some(listed));
            if !kept {
                self.leave_tag(tag, &listed, None).await?;
                writes += 1;
            }
        }
        Ok(writes + 1)
    }

    /// Takes the post listed under `listed` out of `tag`'s list; with
    /// `as_of`, only an entry no newer than that version (a tag a newer
    /// change gave back keeps its entry). Deleting what is gone is a no-op.
    pub async fn leave_tag(
        &self,
        tag: &Tag,
        listed: &PostId,
        as_of: Option<u64>,
    ) -> Result<(), StoreError> {
        let mut delete = Write::delete(TagEntryItem::key_of(tag, listed).item(), Deleted::IfGone);
        if let Some(version) = as_of {
            delete = delete.when(
                Expr::new("attribute_not_exists(version) OR version <= :version")
                    .value(":version", n(version)),
            );
        }
        self.db.write("leave tag list", &delete).await?;
        Ok(())
    }
}

#[cfg(feature = "admin")]
impl Admin<'_> {
    /// The audit's read of a post's entry under `tag` (strongly consistent).
    pub(crate) async fn tag_entry(
        &self,
        tag: &Tag,
        listed: &PostId,
    ) -> Result<Option<TagEntryItem>, StoreError> {
        self.db
            .get_entity::<TagEntryItem>(TagEntryItem::key_of(tag, listed).item(), true)
            .await
    }

    /// The audit's repair of a post's entry under `tag`, held under
    /// `listed`: the post read again; its short form put there if it still
    /// has the tag and is listed there, else the entry deleted. A fan-out writing meanwhile writes the same or newer.
    pub(crate) async fn repair_tag_entry(
        &self,
        tag: &Tag,
        post: &PostId,
        listed: &PostId,
    ) -> Result<bool, StoreError> {
        let now = self.post_item(post).await?;
        match now.filter(|now| now.tags.contains(tag) && now.listed_id() == Some(*listed)) {
            Some(now) => {
                let put = Write::put(&TagEntryItem::of(&now, tag), Landed::Untold)?;
                self.db.write("repair tag entry", &put).await?;
            }
            None => self.fanout().leave_tag(tag, listed, None).await?,
        }
        Ok(true)
    }
}
