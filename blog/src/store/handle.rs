//! The store's handle: the table and the settings its operations share, and
//! the views that group its operations by caller. Nothing below it (the
//! table layer, `keys.rs`) imports this file.

use std::time::Duration;

use aws_sdk_dynamodb::Client;

use std::collections::HashMap;

use super::table::{Backoff, Table};
use crate::ids::PostId;

/// How many posts the feed shows (Q6). The partition keeps a reserve below
/// them ([`super::items::feed::feed_reserve`]: the next newest, shown when one of
/// them is deleted) and a slack of older ones until the next trim
/// ([`super::items::feed::feed_slack`]). Here, as every store's default.
pub const FEED_CAPACITY: usize = 100;

/// How many hot posts a process remembers (past it, it forgets them all and
/// learns again: one refused transaction per post).
const REMEMBERED: usize = 4096;

/// How long the rename fan-out allows GSI1 to catch up with a write. DynamoDB
/// documents GSI propagation as usually under a second; twice that leaves room.
pub const GSI_LAG_BOUND: Duration = Duration::from_secs(2);

/// How many followers a post's delivery into their homes reads and writes
/// a page, unless set otherwise ([`Store::with_delivery_page`]).
pub const DELIVERY_PAGE: usize = 100;

/// From how many followers (when a follow is made) a follow is a pull
/// follow: a post is delivered into at most about this many homes (about
/// 3.4 s of writes within the stack's 1,500 WCU a second,
/// `MaxWriteRequestUnits`: within 5 s of its publication).
pub const PULL_FOLLOWERS: u64 = 5_000;

/// The table, and the settings its operations share.
#[derive(Clone, Debug)]
pub struct Store {
    pub(super) db: Table,
    pub(super) feed_capacity: usize,
    pub(super) gsi_lag_bound: Duration,
    /// How many followers a post's delivery reads and writes a page
    /// ([`DELIVERY_PAGE`]).
    pub(super) delivery_page: usize,
    /// From how many followers a new follow is a pull follow
    /// ([`PULL_FOLLOWERS`]).
    pub(super) pull_threshold: u64,
    /// The pulled authors' lists this instance read for the home
    /// ([`super::memory::PulledLists`]; off unless set).
    pub(super) pulled: std::sync::Arc<super::memory::PulledLists>,
    /// The hot posts this process has met ([`super::hot`]).
    pub(super) hot: std::sync::Arc<HotPosts>,
    /// Whether a throttled quiet post is made hot (always, but in the
    /// viral benchmark's run of the design before hot posts).
    pub(super) hot_switch: bool,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            db: Table::new(client, table),
            feed_capacity: FEED_CAPACITY,
            gsi_lag_bound: GSI_LAG_BOUND,
            delivery_page: DELIVERY_PAGE,
            pull_threshold: PULL_FOLLOWERS,
            pulled: std::sync::Arc::default(),
            hot: std::sync::Arc::default(),
            hot_switch: true,
        }
    }

    /// The design before hot posts: a throttled post stays quiet, its
    /// requests retried into its partition. Only the viral benchmark runs it,
    /// to measure what the switch changes.
    #[cfg(feature = "bulk")]
    pub fn never_hot(mut self) -> Self {
        self.hot_switch = false;
        self
    }

    /// Replaces the retry policy (tests make it fast, or give up at once).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.db = self.db.with_backoff(backoff);
        self
    }

    /// How long GSI1 may take to show a write: the rename fan-out waits this
    /// long after a rename before its second pass. DynamoDB Local's index is
    /// synchronous, so tests against it may set zero.
    pub fn with_gsi_lag_bound(mut self, bound: Duration) -> Self {
        self.gsi_lag_bound = bound;
        self
    }

    pub fn gsi_lag_bound(&self) -> Duration {
        self.gsi_lag_bound
    }

    /// Caps the feed at `capacity` posts instead of [`FEED_CAPACITY`]:
    /// lets tests exercise trimming with a few posts.
    pub fn with_feed_capacity(mut self, capacity: usize) -> Self {
        self.feed_capacity = capacity;
        self
    }

    pub fn feed_capacity(&self) -> usize {
        self.feed_capacity
    }

    /// Delivers a post to `page` followers a page instead of
    /// [`DELIVERY_PAGE`]: lets tests walk a delivery page by page with
    /// a few followers.
    pub fn with_delivery_page(mut self, page: usize) -> Self {
        self.delivery_page = page.max(1);
        self
    }

    /// Makes a follow a pull follow from `followers` followers instead of
    /// [`PULL_FOLLOWERS`]: lets tests and the home benchmark
    /// follow a famous author with a few followers.
    pub fn with_pull_threshold(mut self, followers: u64) -> Self {
        self.pull_threshold = followers;
        self
    }

    /// Keeps the pulled authors' lists a home read reads for `lists`' time
    /// to live (`get-home` as deployed; off by default).
    pub fn with_pulled_lists(mut self, lists: super::memory::PulledLists) -> Self {
        self.pulled = std::sync::Arc::new(lists);
        self
    }

    /// The table layer, through which every operation reaches DynamoDB.
    pub fn db(&self) -> &Table {
        &self.db
    }

    pub fn client(&self) -> &Client {
        self.db.client()
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        self.db.name()
    }

    pub fn backoff(&self) -> &Backoff {
        self.db.backoff()
    }
}

/// Declares a view of the [`Store`] named after the one caller whose
/// operations it carries. A view borrows the store and derefs to it, so its
/// operations reach the table and the writes every caller shares, which stay
/// on `Store` in each entity's module.
macro_rules! view {
    ($(#[$meta:meta])* $name:ident, $open:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name<'s>(&'s Store);

        impl std::ops::Deref for $name<'_> {
            type Target = Store;

            fn deref(&self) -> &Store {
                self.0
            }
        }

        impl Store {
            #[doc = concat!("The operations [`", stringify!($name), "`] carries.")]
            pub fn $open(&self) -> $name<'_> {
                $name(self)
            }
        }
    };
}

view! {
    /// What the request handlers call (`api`): C1–C4, Q1–Q6, the take-backs,
    /// the export and the erasure request. Each entity's module holds its
    /// `impl Requests` block.
    Requests,
    requests
}

view! {
    /// What the stream fan-out calls (`fanout`, and `recovery`, which parks
    /// and replays its records): the feed's writes, username copies, a
    /// deleted post's walk, an erased account's walk, the hot posts' sums.
    /// The admin tools' repairs call two of its walks too (an erasure's, a
    /// deleted post's), as the fan-out would.
    FanOut,
    fanout
}

#[cfg(feature = "admin")]
view! {
    /// What only the admin tools call (`blog-admin`: the audit and its
    /// repairs, the migration, the replay of parked records), compiled only
    /// with the `admin` feature.
    Admin,
    admin
}

/// What a process knows of a hot post: how many shards it has, whether the
/// fan-out has moved its likers' marks into their own partitions (until
/// then a like also reads the post's partition: [`super::likes`]), and when
/// it learned this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hot {
    pub shards: u8,
    pub likers_moved: bool,
    /// Its new comments go to its shards (a post made hot before they did
    /// keeps them in its own partition until `blog-admin migrate`).
    pub comments_sharded: bool,
    learned: std::time::Instant,
    /// A request of this process is widening the post.
    widening: bool,
}

/// How long a process believes a hot post's likers are still being moved
/// before it reads the post again (one request of it: the others go on):
/// each read is one strongly consistent unit in the post's partition, and
/// until it learns the move is done each of its likes reads a marker there.
const RELEARN_MOVING: Duration = Duration::from_millis(250);

impl Hot {
    pub fn new(shards: u8, likers_moved: bool, comments_sharded: bool) -> Self {
        Self {
            shards,
            likers_moved,
            comments_sharded,
            learned: std::time::Instant::now(),
            widening: false,
        }
    }

    /// Whether it is worth reading the post again: its likers were being
    /// moved when this was learned, a while ago.
    pub fn stale(&self) -> bool {
        !self.likers_moved && self.learned.elapsed() >= RELEARN_MOVING
    }
}

/// How long a process believes a post is still turning hot before one of
/// its requests reads the post again (the others wait without reading: the
/// post's partition is the one that was refusing them).
const RELEARN_CLOSING: Duration = Duration::from_millis(250);

/// What a process knows of a post turning hot ([`super::hot`]: closed to
/// new likes and comments while its quiet likers are moved).
#[derive(Debug, Clone, Copy)]
struct Closing {
    /// This process's own request is switching it (nobody reads it again:
    /// that request says when it is done).
    own: bool,
    learned: std::time::Instant,
}

/// The hot posts a process has met, so that it goes to their shards at once,
/// and those it knows are turning hot, so that it waits for them.
#[derive(Debug, Default)]
pub struct HotPosts {
    known: std::sync::Mutex<HashMap<PostId, Hot>>,
    closing: std::sync::Mutex<HashMap<PostId, Closing>>,
    /// Posts this process found deleted: a post id is never used again, so
    /// their likes and comments answer 404 at once, rather than each trying
    /// the deleted post's partition (which its walk may be keeping busy).
    gone: std::sync::Mutex<std::collections::HashSet<PostId>>,
}

impl HotPosts {
    pub(super) fn get(&self, post: &PostId) -> Option<Hot> {
        self.known.lock().ok()?.get(post).copied()
    }

    pub(super) fn remember(&self, post: PostId, hot: Hot) {
        self.opened(&post);
        if let Ok(mut known) = self.known.lock() {
            if known.len() >= REMEMBERED {
                known.clear();
            }
            known.insert(post, hot);
        }
    }

    /// Whether the caller is the one request of this process to read the
    /// post again: what it knows is [`Hot::stale`], and no other request
    /// has claimed the read in the last [`RELEARN_MOVING`] (the others go
    /// on with what is known, rather than all reading the post's partition
    /// at once).
    pub(super) fn claim_relearn(&self, post: &PostId) -> bool {
        let Ok(mut known) = self.known.lock() else {
            return false;
        };
        match known.get_mut(post) {
            Some(hot) if hot.stale() => {
                hot.learned = std::time::Instant::now();
                true
            }
            _ => false,
        }
    }

    /// Whether the caller is the one request of this process to widen the
    /// post from `from` shards; the others retry where they are.
    pub(super) fn claim_widening(&self, post: &PostId, from: u8) -> bool {
        let Ok(mut known) = self.known.lock() else {
            return false;
        };
        match known.get_mut(post) {
            Some(hot) if hot.shards == from && !hot.widening => {
                hot.widening = true;
                true
            }
            _ => false,
        }
    }

    /// The widening of `post` this process's request is making has its
    /// counters and pointers: its likes and comments go to `wider` shards
    /// from now on (the request still holds the widening until the post item
    /// says so).
    pub(super) fn widened(&self, post: &PostId, wider: u8) {
        if let Ok(mut known) = self.known.lock()
            && let Some(hot) = known.get_mut(post)
        {
            hot.shards = hot.shards.max(wider);
        }
    }

    /// Whether a request of this process is widening `post`.
    pub(super) fn is_widening(&self, post: &PostId) -> bool {
        self.get(post).is_some_and(|hot| hot.widening)
    }

    /// A widening that failed: another request may try.
    pub(super) fn widening_failed(&self, post: &PostId) {
        if let Ok(mut known) = self.known.lock()
            && let Some(hot) = known.get_mut(post)
        {
            hot.widening = false;
        }
    }

    /// `post` is not hot, nor turning hot, as far as this process knows.
    pub(super) fn forget(&self, post: &PostId) {
        self.opened(post);
        if let Ok(mut known) = self.known.lock() {
            known.remove(post);
        }
    }

    /// `post` is gone (its item read so, strongly consistent): forgotten as
    /// hot or turning hot, and remembered as gone.
    pub(super) fn gone(&self, post: &PostId) {
        self.forget(post);
        if let Ok(mut gone) = self.gone.lock() {
            if gone.len() >= REMEMBERED {
                gone.clear();
            }
            gone.insert(*post);
        }
    }

    /// Whether this process found `post` deleted.
    pub(super) fn is_gone(&self, post: &PostId) -> bool {
        self.gone.lock().is_ok_and(|gone| gone.contains(post))
    }

    /// Whether the caller is the one request of this process to switch
    /// `post` to hot: none is, and the process does not know it hot or
    /// turning hot. The others then wait ([`HotPosts::is_closing`]) until
    /// it is done ([`HotPosts::remember`]) or has failed
    /// ([`HotPosts::opened`]).
    pub(super) fn claim_switch(&self, post: &PostId) -> bool {
        if self.get(post).is_some() {
            return false;
        }
        let Ok(mut closing) = self.closing.lock() else {
            return false;
        };
        if closing.len() >= REMEMBERED {
            closing.clear();
        }
        if closing.contains_key(post) {
            return false;
        }
        let learned = std::time::Instant::now();
        closing.insert(*post, Closing { own: true, learned });
        true
    }

    /// The post item says `post` is turning hot (another process's
    /// switch): this process's likes and comments of it wait.
    pub(super) fn closed(&self, post: PostId) {
        if let Ok(mut closing) = self.closing.lock() {
            if closing.len() >= REMEMBERED {
                closing.clear();
            }
            let learned = std::time::Instant::now();
            let own = closing.get(&post).is_some_and(|c| c.own);
            closing.insert(post, Closing { own, learned });
        }
    }

    /// Whether the caller is the one request of this process to take over
    /// the switch of a post closed too long ([`crate::store::items::post::CLOSING_STALE`]):
    /// no request of it is switching it.
    pub(super) fn claim_switch_over(&self, post: &PostId) -> bool {
        let Ok(mut closing) = self.closing.lock() else {
            return false;
        };
        match closing.get_mut(post) {
            Some(c) if !c.own => {
                c.own = true;
                true
            }
            _ => false,
        }
    }

    /// This process's request stopped switching `post`, which the item says
    /// is turning hot all the same (another's switch, or its own left
    /// unfinished): a request reads it again now and then.
    pub(super) fn switch_released(&self, post: &PostId) {
        if let Ok(mut closing) = self.closing.lock()
            && let Some(c) = closing.get_mut(post)
        {
            c.own = false;
        }
    }

    /// Not (or no longer) turning hot, as far as this process knows: its
    /// switch failed, or it is hot or gone.
    pub(super) fn opened(&self, post: &PostId) {
        if let Ok(mut closing) = self.closing.lock() {
            closing.remove(post);
        }
    }

    /// Whether this process knows `post` is turning hot: its likes and
    /// comments wait rather than write.
    pub(super) fn is_closing(&self, post: &PostId) -> bool {
        self.closing
            .lock()
            .is_ok_and(|closing| closing.contains_key(post))
    }

    /// Whether the caller is the one request of this process to read a post
    /// turning hot again: another process is switching it, and no request
    /// of this one read it in the last [`RELEARN_CLOSING`].
    pub(super) fn claim_closing_relearn(&self, post: &PostId) -> bool {
        let Ok(mut closing) = self.closing.lock() else {
            return false;
        };
        match closing.get_mut(post) {
            Some(c) if !c.own && c.learned.elapsed() >= RELEARN_CLOSING => {
                c.learned = std::time::Instant::now();
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(n: u8) -> PostId {
        PostId::parse(&format!("01J0000000000000000000000{n}")).expect("an id")
    }

    #[test]
    fn one_request_of_a_process_switches_and_the_others_wait() {
        let hot = HotPosts::default();
        let p = post(1);
        assert!(!hot.is_closing(&p));
        assert!(hot.claim_switch(&p), "the first");
        assert!(!hot.claim_switch(&p), "one at a time");
        assert!(hot.is_closing(&p), "the others wait");
        // Its own switch is never read again by the others.
        assert!(!hot.claim_closing_relearn(&p));
        // Another process's switch: read again, once a while.
        hot.switch_released(&p);
        std::thread::sleep(RELEARN_CLOSING);
        assert!(hot.claim_closing_relearn(&p));
        assert!(!hot.claim_closing_relearn(&p), "once a while");
        assert!(hot.claim_switch_over(&p), "a stale one is taken over once");
        assert!(!hot.claim_switch_over(&p));
        // Opened hot: nobody waits, nobody switches.
        hot.remember(p, Hot::new(16, true, true));
        assert!(!hot.is_closing(&p));
        assert!(!hot.claim_switch(&p));
        // A failed switch lets another request try.
        let q = post(2);
        assert!(hot.claim_switch(&q));
        hot.opened(&q);
        assert!(!hot.is_closing(&q));
        assert!(hot.claim_switch(&q));
    }

    #[test]
    fn a_widening_spreads_at_once_and_only_a_read_says_a_post_is_gone() {
        let hot = HotPosts::default();
        let p = post(3);
        hot.remember(p, Hot::new(16, true, true));
        assert!(hot.claim_widening(&p, 16));
        assert!(hot.is_widening(&p));
        assert!(!hot.claim_widening(&p, 16), "one at a time");
        hot.widened(&p, 64);
        assert_eq!(hot.get(&p).map(|h| h.shards), Some(64));
        assert!(hot.is_widening(&p), "held until the post says so");
        hot.remember(p, Hot::new(64, true, true));
        assert!(!hot.is_widening(&p));

        hot.forget(&p);
        assert!(hot.get(&p).is_none());
        assert!(!hot.is_gone(&p), "forgotten is not gone");
        hot.gone(&p);
        assert!(hot.is_gone(&p));
    }
}
