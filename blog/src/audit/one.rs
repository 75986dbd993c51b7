//! The audit of one user or one post: what an operator runs after a
//! complaint, at a cost in proportion to that user's or that post's items,
//! with no Scan.

use std::collections::HashMap;

use super::{AuditOptions, Finding, Report, Sink, kind, projection, shown, text};
use crate::{
    ids::{PostId, UserId},
    keys,
    store::{
        Item, ItemType, Store, StoreError,
        feed::FeedEntryItem,
        from_item,
        item::Entity,
        posts::{Counter, PostItem},
        table::Query,
        users::UserItem,
    },
};

/// BatchGetItem's limit of keys per call.
const BATCH_GET: usize = 100;

impl Store {
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

    /// [`Store::audit_user`] into `sink`; returns the items read, the read
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
                let written = text(&item, keys::GSI1SK).is_some_and(|sk| {
                    [keys::POST_PREFIX, keys::COMMENT_PREFIX, keys::LIKE_PREFIX]
                        .iter()
                        .any(|prefix| sk.starts_with(prefix))
                });
                let (Some(pk), Some(sk), Some(stored)) = (
                    text(&item, keys::PK),
                    text(&item, keys::SK),
                    text(&item, "username"),
                ) else {
                    continue;
                };
                if written && stored != profile.username {
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
        let query = Query::partition(keys::post_pk(post_id))
            .project(projection())
            .consistent()
            .page_size(options.page_size);
        let mut profiles: HashMap<UserId, Option<(String, u64)>> = HashMap::new();
        let (mut comments, mut likes) = (0_u64, 0_u64);
        let mut post: Option<PostItem> = None;
        let mut start = None;
        loop {
            let page = self.db().query_page("audit post", &query, start, None);
            let page = page.await?;
            report.pages += 1;
            report.read_units += page.read_units;
            // (pk, sk, author, username) of this page's copies.
            let mut copies = Vec::new();
            for item in page.items {
                report.items_read += 1;
                let copy = |item: &Item| {
                    let user = text(item, "userId").and_then(|u| UserId::parse(u).ok())?;
                    Some((
                        text(item, keys::PK)?.to_owned(),
                        text(item, keys::SK)?.to_owned(),
                        user,
                        text(item, "username")?.to_owned(),
                    ))
                };
                match kind(&item) {
                    Some(ItemType::Post) => {
                        copies.extend(copy(&item));
                        post = Some(from_item(item)?);
                    }
                    Some(k @ (ItemType::Comment | ItemType::Like)) => {
                        if k == ItemType::Comment {
                            comments += 1;
                        } else {
                            likes += 1;
                        }
                        copies.extend(copy(&item));
                    }
                    _ => {}
                }
            }
            let unknown: Vec<UserId> = copies
                .iter()
                .map(|(_, _, user, _)| user)
                .filter(|user| !profiles.contains_key(*user))
                .cloned()
                .collect::<std::collections::HashSet<_>>()
                .into_iter()
                .collect();
            let (read, units) = self.read_profiles(&unknown, &mut profiles).await?;
            report.items_read += read;
            report.read_units += units;
            for (pk, sk, user, stored) in copies {
                if let Some(Some((current, version))) = profiles.get(&user)
                    && *current != stored
                {
                    let finding = Finding::Username {
                        pk,
                        sk,
                        user,
                        stored,
                        current: current.clone(),
                        user_version: *version,
                    };
                    sink.found(self, finding, None).await?;
                }
            }
            start = page.next;
            if start.is_none() {
                break;
            }
        }

        let mut expected = None;
        if let Some(mut post) = post {
            for (counter, actual) in [(Counter::Comments, comments), (Counter::Likes, likes)] {
                let stored = counter.of(&post);
                if stored != actual {
                    let finding = Finding::Count {
                        post: post.post_id,
                        counter,
                        stored,
                        actual,
                        version: post.version,
                    };
                    sink.found(self, finding, None).await?;
                }
            }
            post.comment_count = comments;
            post.like_count = likes;
            if let Some(Some((name, _))) = profiles.get(&post.user_id) {
                post.username.clone_from(name);
            }
            expected = Some(FeedEntryItem::from(&post));
        }

        // Its feed entry, if the feed holds one.
        let entry = FeedEntryItem::key_of(post_id).item();
        let entry = self.db().get_entity::<FeedEntryItem>(entry, true).await?;
        report.items_read += usize::from(entry.is_some());
        report.read_units += 1.0;
        if let Some(entry) = entry {
            match &expected {
                None => {
                    let finding = Finding::ExtraFeedEntry { post: *post_id };
                    sink.found(self, finding, None).await?;
                }
                Some(expected) if shown(expected) != shown(&entry) => {
                    let finding = Finding::StaleFeedEntry { post: *post_id };
                    sink.found(self, finding, Some(expected)).await?;
                }
                Some(_) => {}
            }
        }
        sink.fill_report(&mut report);
        Ok(report)
    }

    /// Reads the profiles of `users` (strongly consistent BatchGetItem, 100
    /// at a time) into `profiles`: each user's name and version, or `None`
    /// for a user without a profile. Returns the items read and read units.
    async fn read_profiles(
        &self,
        users: &[UserId],
        profiles: &mut HashMap<UserId, Option<(String, u64)>>,
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
                let profile = UserItem::from_item(item)?;
                profiles.insert(profile.user_id, Some((profile.username, profile.version)));
            }
        }
        Ok((read, read_units))
    }
}
