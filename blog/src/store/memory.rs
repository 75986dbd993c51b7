//! What a function instance keeps between the requests it serves (process
//! memory, never shared between instances): a `get-home` instance's lists
//! of the pulled authors' newest posts ([`PulledLists`]). Below every
//! operation: the store's handle holds it, `home` reads through it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use serde::Deserialize;

use crate::{
    clock::Clock,
    ids::{PostId, UserId},
};

/// How long a `get-home` instance serves a pulled author's newest posts it
/// read, unless `HOME_CACHE_SECONDS` says otherwise. A pull follower sees a
/// new post this much later than GSI1 shows it, at most.
pub const PULLED_CACHE_TTL: Duration = Duration::from_secs(2);

/// How many pulled authors an instance keeps lists of (each at most a first
/// page and one more of pointers, under 5 KB): beyond it, the stale ones go,
/// then all.
const PULLED_AUTHORS: usize = 4_096;

/// A home entry as a page reads it: what it points at.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pointer {
    pub post_id: PostId,
    pub user_id: UserId,
    pub listed_id: PostId,
}

/// The newest posts of each pulled author an instance read, and when. Every
/// home read of a pull follower reads their pulled authors' lists (one
/// GSI1 partition each, `USER#a`): a million readers of one author would
/// exceed that partition's 3,000 RCU a second. With the lists kept for the
/// time to live, an author's partition sees at most one Query per `get-home`
/// instance per time to live, however many of its followers read (the
/// feed's cache, `api::feed`, does the same for the feed). Only the first
/// page's reads are kept; the posts themselves, the follows and the
/// profiles are read at every request, so a deleted or un-published post,
/// an unfollow or an erasure still leaves the home at the next read.
#[derive(Debug)]
pub struct PulledLists {
    ttl: Duration,
    clock: Clock,
    lists: Mutex<HashMap<UserId, Listed>>,
}

/// A pulled author's newest posts, and when they were read.
type Listed = (Instant, Arc<[Pointer]>);

impl Default for PulledLists {
    fn default() -> Self {
        Self::off()
    }
}

impl PulledLists {
    /// Keeps each list for `ttl` as `clock` measures it; zero keeps none.
    pub fn new(ttl: Duration, clock: Clock) -> Self {
        Self {
            ttl,
            clock,
            lists: Mutex::new(HashMap::new()),
        }
    }

    /// Every read goes to the table.
    pub fn off() -> Self {
        Self::new(Duration::ZERO, Clock::default())
    }

    pub(super) fn is_on(&self) -> bool {
        !self.ttl.is_zero()
    }

    /// `author`'s list read less than the time to live ago.
    pub(super) fn fresh(&self, author: &UserId) -> Option<Arc<[Pointer]>> {
        let lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now();
        lists
            .get(author)
            .filter(|(read, _)| now.duration_since(*read) < self.ttl)
            .map(|(_, list)| list.clone())
    }

    pub(super) fn keep(&self, author: &UserId, list: Vec<Pointer>) -> Arc<[Pointer]> {
        let list: Arc<[Pointer]> = list.into();
        let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now();
        if lists.len() >= PULLED_AUTHORS {
            lists.retain(|_, (read, _)| now.duration_since(*read) < self.ttl);
            if lists.len() >= PULLED_AUTHORS {
                lists.clear();
            }
        }
        lists.insert(author.clone(), (now, list.clone()));
        list
    }
}
