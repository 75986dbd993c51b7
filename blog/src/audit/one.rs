//! The audit of one user or one post: what an operator runs after a
//! complaint, at a cost in proportion to that user's or that post's items,
//! with no Scan.

use std::collections::HashMap;

use super::{AuditOptions, Finding, Report, Sink, kind, projection, shown, text};
use crate::store::Admin;
use crate::{
    ids::{PostId, UserId},
    keys::{self, Entity, UserItemsKind},
    store::{
        Item, ItemType, StoreError, from_item, items::feed::FeedEntryItem, items::post::PostItem,
        items::user::UserItem, table::Query,
    },
    text::Username,
};

/// BatchGetItem's limit of keys per call.
const BATCH_GET: usize = 100;

/// What the audit of a post gathers from its partition.
#[derive(Default)]
struct Partition {
    post: Option<PostItem>,
    comments: u64,
    likes: u64,
    /// A hot post's comments by the shard that counts them.
    counted_in: std::collections::BTreeMap<u8, u64>,
    /// The authors' profiles read so far: name and version, `None` without.
    profiles: HashMap<UserId, Option<(Username, u64)>>,
}

/// A username copy: where it is, whose it is, what it says.
struct Copy {
    pk: String,
    sk: String,
    user: UserId,
    name: String,
}

impl Copy {
    fn of(item: &Item) -> Option<Copy> {
        Some(Copy {
            pk: text(item, keys::PK)?.to_owned(),
            sk: text(item, keys::SK)?.to_owned(),
            user: text(item, "userId").and_then(|u| UserId::parse(u).ok())?,
            name: text(item, "username")?.to_owned(),
        })
    }
}

impl Admin<'_> {
    /// Audits one user: reads their profile (strongly consistent) and
    /// everything GSI1 lists under them (their posts, comments and likes, all
    /// pages), and finds each username copy that is not the profile's.
    ///
    /// GSI1 is eventually consistent: an item written in the last moments may
    /// not be listed yet (and the fan-out copies the name onto it anyway), and
    /// a listed copy may be older than the item. Repairs are conditional on
    /// the value read, so one made from a lagging index changes nothing.
    pub async fn audit_user(
        &self,
        user: &UserId,
        options: &AuditOptions,
    ) -> Result<Report, StoreError> {
        let sink = Sink::new(options);
        let (items_read, read_units, pages) =
            self.audit_user_into(user, options.page_size, &sink).await?;
        let mut report = Report {
            items_read,
            read_units,
            pages,
            ..Report::default()
        };
        sink.fill_report(&mut report);
        Ok(report)
    }

    /// [`crate::store::Admin::audit_user`] into `sink`; returns the items read, the read
    /// units and the calls.
    pub(super) async fn audit_user_into(
        &self,
        user: &UserId,
        page_size: Option<i32>,
        sink: &Sink,
    ) -> Result<(usize, f64, usize), StoreError> {
        let Some(profile) = self.read_profile(user, true).await? else {
            // Nothing to compare the copies with.
            return Ok((0, 1.0, 1));
        };
        let (mut items_read, mut read_units, mut pages) = (1, 1.0, 1);
        let query = Query::gsi1(keys::user_items_pk(user)).page_size(page_size);
        let mut start = None;
        loop {
            let page = self.db().query_page("audit user", &query, start, None);
            let page = page.await?;
            pages += 1;
            read_units += page.read_units;
            for item in page.items {
                items_read += 1;
                // Only what this version knows to carry a copy: posts,
                // comments and likes.
                let written = text(&item, keys::GSI1SK)
                    .and_then(UserItemsKind::of_sk)
                    .is_some_and(|(kind, _)| {
                        matches!(
                            kind,
                            UserItemsKind::Post
                                | UserItemsKind::Draft
                                | UserItemsKind::Comment
                                | UserItemsKind::Like
                        )
                    });
                let (Some(pk), Some(sk), Some(stored)) = (
                    text(&item, keys::PK),
                    text(&item, keys::SK),
                    text(&item, "username"),
                ) else {
                    continue;
                };
                if written && profile.username != *stored {
                    let finding = Finding::Username {
                        pk: pk.to_owned(),
                        sk: sk.to_owned(),
                        user: user.clone(),
                        stored: stored.to_owned(),
                        current: profile.username.clone(),
                        user_version: profile.version,
                    };
                    sink.found(self, finding, None).await?;
                }
            }
            start = page.next;
            if start.is_none() {
                return Ok((items_read, read_units, pages));
            }
        }
    }

    /// Audits one post: reads its partition (strongly consistent, all pages),
    /// and finds a count that is not the number of its comments or likes, a
    /// username on the post, a comment or a like that is not its author's
    /// (the profiles read with BatchGetItem, strongly consistent), and a feed
    /// entry (if the feed holds one) that differs from the post's short form.
    /// It cannot tell whether the post belongs in the feed: the full audit
    /// checks that.
    pub async fn audit_post(
        &self,
        post_id: &PostId,
        options: &AuditOptions,
    ) -> Result<Report, StoreError> {
        let sink = Sink::new(options);
        let mut report = Report::default();
        let partition = self
            .audit_partition(post_id, options.page_size, &sink, &mut report)
            .await?;
        let expected = self.audit_counts(partition, &sink).await?;
        self.audit_feed_entry(post_id, expected.as_ref(), &sink, &mut report)
            .await?;
        sink.fill_report(&mut report);
        Ok(report)
    }

    /// Reads a post's partition, page by page, finding every username copy
    /// that is not its author's; counts the comments and likes.
    async fn audit_partition(
        &self,
        post_id: &PostId,
        page_size: Option<i32>,
        sink: &Sink,
        report: &mut Report,
    ) -> Result<Partition, StoreError> {
        let query = Query::partition(keys::post_pk(post_id))
            .project(projection())
            .consistent()
            .page_size(page_size);
        let mut partition = Partition::default();
        let mut start = None;
        loop {
            let page = self.db().query_page("audit post", &query, start, None);
            let page = page.await?;
            report.pages += 1;
            report.read_units += page.read_units;
            let mut copies = Vec::new();
            for item in page.items {
                report.items_read += 1;
                match kind(&item) {
                    Some(ItemType::Post) => {
                        copies.extend(Copy::of(&item));
                        partition.post = Some(from_item(item)?);
                    }
                    Some(ItemType::Comment) => {
                        partition.comments += 1;
                        if let Some(shard) = super::counted_in(&item) {
                            *partition.counted_in.entry(shard).or_default() += 1;
                        }
                        copies.extend(Copy::of(&item));
                    }
                    Some(ItemType::Like) => {
                        partition.likes += 1;
                        copies.extend(Copy::of(&item));
                    }
                    _ => {}
                }
            }
            self.audit_copies(copies, &mut partition.profiles, sink, report)
                .await?;
            start = page.next;
            if start.is_none() {
                return Ok(partition);
            }
        }
    }

    /// Finds each of `copies` whose name is not its author's current one,
    /// reading the profiles not read yet.
    async fn audit_copies(
        &self,
        copies: Vec<Copy>,
        profiles: &mut HashMap<UserId, Option<(Username, u64)>>,
        sink: &Sink,
        report: &mut Report,
    ) -> Result<(), StoreError> {
        let unknown: Vec<UserId> = copies
            .iter()
            .map(|copy| &copy.user)
            .filter(|user| !profiles.contains_key(*user))
            .cloned()
            .collect::<std::collections::HashSet<_>>()
            .into_iter()
            .collect();
        let (read, units) = self.read_profiles(&unknown, profiles).await?;
        report.items_read += read;
        report.read_units += units;
        for Copy { pk, sk, user, name } in copies {
            if let Some(Some((current, version))) = profiles.get(&user)
                && *current != *name
            {
                let finding = Finding::Username {
                    pk,
                    sk,
                    user,
                    stored: name,
                    current: current.clone(),
                    user_version: *version,
                };
                sink.found(self, finding, None).await?;
            }
        }
        Ok(())
    }

    /// The post's counts against what its partition holds; the feed entry
    /// the post should have, if it exists.
    async fn audit_counts(
        &self,
        partition: Partition,
        sink: &Sink,
    ) -> Result<Option<FeedEntryItem>, StoreError> {
        let Some(mut post) = partition.post else {
            return Ok(None);
        };
        self.audit_shards(&post, &partition.counted_in, sink)
            .await?;
        let (comments, likes) = super::hot::expected_counts(
            &post,
            partition.comments,
            partition.likes,
            &partition.counted_in,
        );
        for finding in Finding::counts(&post, comments, likes) {
            sink.found(self, finding, None).await?;
        }
        post.comment_count = comments;
        post.like_count = likes;
        if let Some(Some((name, _))) = partition.profiles.get(&post.user_id) {
            post.username.clone_from(name);
        }
        // A draft belongs in no list.
        Ok(post.is_published().then(|| FeedEntryItem::from(&post)))
    }

    /// The post's feed entry, if the feed holds one, against `expected`.
    async fn audit_feed_entry(
        &self,
        post_id: &PostId,
        expected: Option<&FeedEntryItem>,
        sink: &Sink,
        report: &mut Report,
    ) -> Result<(), StoreError> {
        // Where the feed would hold it: where it is listed, or (a draft,
        // a deleted post) under its own id.
        let listed = expected.map_or(*post_id, FeedEntryItem::listed);
        let entry = FeedEntryItem::key_of(&listed).item();
        let entry = self.db().get_entity::<FeedEntryItem>(entry, true).await?;
        report.items_read += usize::from(entry.is_some());
        report.read_units += 1.0;
        let Some(entry) = entry else {
            return Ok(());
        };
        match expected {
            None => {
                let finding = Finding::ExtraFeedEntry { post: listed };
                sink.found(self, finding, None).await
            }
            Some(expected) if shown(expected) != shown(&entry) => {
                let finding = Finding::StaleFeedEntry { post: listed };
                sink.found(self, finding, Some(expected)).await
            }
            Some(_) => Ok(()),
        }
    }

    /// Reads the profiles of `users` (strongly consistent BatchGetItem, 100
    /// at a time) into `profiles`: each user's name and version, or `None`
    /// for a user without a profile. Returns the items read and read units.
    async fn read_profiles(
        &self,
        users: &[UserId],
        profiles: &mut HashMap<UserId, Option<(Username, u64)>>,
    ) -> Result<(usize, f64), StoreError> {
        let (mut read, mut read_units) = (0, 0.0);
        for chunk in users.chunks(BATCH_GET) {
            for user in chunk {
                profiles.insert(user.clone(), None);
            }
            let keys = chunk.iter().map(UserItem::key).collect();
            let (found, units) = self.db().batch_get("audit profiles", keys).await?;
            read_units += units;
            for item in found {
                read += 1;
                let profile = UserItem::decode(item)?;
                profiles.insert(profile.user_id, Some((profile.username, profile.version)));
            }
        }
        Ok((read, read_units))
    }
}
