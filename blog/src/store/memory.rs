//! What a function instance keeps between the requests it serves (process
//! memory, never shared between instances): what it knows of the posts it
//! met hot, turning hot or gone ([`HotPosts`], one map), the authors of the
//! posts it liked or commented on ([`PostAuthors`]), a `get-home`
//! instance's lists of the pulled authors' newest posts ([`PulledLists`]),
//! and a read function's answers about hot posts ([`HotReads`]).
//! Below every operation: the store's handle holds both, `hot` and `home`
//! read through them.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use serde::Deserialize;

use crate::{
    clock::Clock,
    ids::{PostId, UserId},
    keys::Key,
    model::{Comment, Like, Page, Post},
};

/// How many posts a process remembers hot, turning hot or gone (past it, it
/// forgets them all and learns again: one refused transaction per post).
const REMEMBERED: usize = 4096;

/// How long a process believes a hot post's likers are still being moved
/// before it reads the post again (one request of it: the others go on):
/// each read is one strongly consistent unit in the post's partition, and
/// until it learns the move is done each of its likes reads a marker there.
const RELEARN_MOVING: Duration = Duration::from_millis(250);

/// How long a process believes a post is still turning hot before one of
/// its requests reads the post again (the others wait without reading: the
/// post's partition is the one that was refusing them).
const RELEARN_CLOSING: Duration = Duration::from_millis(250);

/// How long a process reads a hot post's first pages by the merge after it
/// found no copy of them (the fan-out makes one with the post's next like
/// or comment), rather than look for one at every page.
pub const NO_COPY_FOR: Duration = Duration::from_secs(2);

/// The posts a process has found hot on a list read, whose first pages it
/// reads from the fan-out's copies ([`super::first_pages`]): a read
/// function likes nothing, so [`HotPosts`] does not learn them there. A
/// post whose copy was missing is read by the merge for [`NO_COPY_FOR`]
/// (the post gone, or not copied yet).
#[derive(Debug, Default)]
pub struct PagedPosts {
    /// Found hot; when its copy was last found missing, if it was.
    known: Mutex<HashMap<PostId, Option<Instant>>>,
}

impl PagedPosts {
    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<PostId, Option<Instant>>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a first page of `post` looks for its copy: found hot here,
    /// or `hot` (this process's likes or comments found it hot), and no
    /// copy found missing in the last [`NO_COPY_FOR`].
    pub(super) fn reads_copy(&self, post: &PostId, hot: bool) -> bool {
        match self.known().get(post) {
            Some(Some(missed)) => missed.elapsed() >= NO_COPY_FOR,
            Some(None) => true,
            None => hot,
        }
    }

    /// `post` was found hot (past [`REMEMBERED`] posts, all are forgotten
    /// first); what is known of its copy stays.
    pub(super) fn saw(&self, post: PostId) {
        let mut known = self.known();
        if known.len() >= REMEMBERED && !known.contains_key(&post) {
            known.clear();
        }
        known.entry(post).or_insert(None);
    }

    /// `post`'s copy was found missing now.
    pub(super) fn missed(&self, post: PostId) {
        let mut known = self.known();
        if known.len() >= REMEMBERED && !known.contains_key(&post) {
            known.clear();
        }
        known.insert(post, Some(Instant::now()));
    }

    /// `post`'s copy was found.
    pub(super) fn found(&self, post: PostId) {
        if let Some(missed) = self.known().get_mut(&post) {
            *missed = None;
        }
    }
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
    learned: Instant,
    /// A request of this process is widening the post.
    widening: bool,
}

impl Hot {
    pub fn new(shards: u8, likers_moved: bool, comments_sharded: bool) -> Self {
        Self {
            shards,
            likers_moved,
            comments_sharded,
            learned: Instant::now(),
            widening: false,
        }
    }

    /// Whether it is worth reading the post again: its likers were being
    /// moved when this was learned, a while ago.
    pub fn stale(&self) -> bool {
        !self.likers_moved && self.learned.elapsed() >= RELEARN_MOVING
    }
}

/// What a process knows of a post turning hot ([`super::hot`]: closed to
/// new likes and comments while its quiet likers are moved).
#[derive(Debug, Clone, Copy)]
struct Closing {
    /// This process's own request is switching it (nobody reads it again:
    /// that request says when it is done).
    own: bool,
    learned: Instant,
}

/// One post a process has met: hot (its likes and comments go to its shards
/// at once), turning hot (they wait), or gone (found deleted: a post id is
/// never used again, so its likes and comments answer 404 at once, rather
/// than each trying the deleted post's partition, which its walk may be
/// keeping busy).
#[derive(Debug, Clone, Copy)]
enum Known {
    Hot(Hot),
    Closing(Closing),
    Gone,
}

/// The posts a process has met hot, turning hot or gone: one map, one lock.
#[derive(Debug, Default)]
pub struct HotPosts {
    known: Mutex<HashMap<PostId, Known>>,
}

impl HotPosts {
    /// The map, to change (a poisoned lock is taken as it is: every change
    /// leaves it whole).
    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<PostId, Known>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts what is known of `post`, making room first.
    fn put(known: &mut HashMap<PostId, Known>, post: PostId, what: Known) {
        if known.len() >= REMEMBERED && !known.contains_key(&post) {
            known.clear();
        }
        known.insert(post, what);
    }

    pub(super) fn get(&self, post: &PostId) -> Option<Hot> {
        match self.known().get(post) {
            Some(Known::Hot(hot)) => Some(*hot),
            _ => None,
        }
    }

    /// `post` is hot, as its item says: no longer turning hot. A post found
    /// gone stays gone.
    pub(super) fn remember(&self, post: PostId, hot: Hot) {
        let mut known = self.known();
        if !matches!(known.get(&post), Some(Known::Gone)) {
            Self::put(&mut known, post, Known::Hot(hot));
        }
    }

    /// Whether the caller is the one request of this process to read the
    /// post again: what it knows is [`Hot::stale`], and no other request
    /// has claimed the read in the last [`RELEARN_MOVING`] (the others go
    /// on with what is known, rather than all reading the post's partition
    /// at once).
    pub(super) fn claim_relearn(&self, post: &PostId) -> bool {
        match self.known().get_mut(post) {
            Some(Known::Hot(hot)) if hot.stale() => {
                hot.learned = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// Whether the caller is the one request of this process to widen the
    /// post from `from` shards; the others retry where they are.
    pub(super) fn claim_widening(&self, post: &PostId, from: u8) -> bool {
        match self.known().get_mut(post) {
            Some(Known::Hot(hot)) if hot.shards == from && !hot.widening => {
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
        if let Some(Known::Hot(hot)) = self.known().get_mut(post) {
            hot.shards = hot.shards.max(wider);
        }
    }

    /// Whether a request of this process is widening `post`.
    pub(super) fn is_widening(&self, post: &PostId) -> bool {
        self.get(post).is_some_and(|hot| hot.widening)
    }

    /// A widening that failed: another request may try.
    pub(super) fn widening_failed(&self, post: &PostId) {
        if let Some(Known::Hot(hot)) = self.known().get_mut(post) {
            hot.widening = false;
        }
    }

    /// `post` is not hot, nor turning hot, as far as this process knows.
    pub(super) fn forget(&self, post: &PostId) {
        let mut known = self.known();
        if !matches!(known.get(post), Some(Known::Gone)) {
            known.remove(post);
        }
    }

    /// `post` is gone (its item read so, strongly consistent): forgotten as
    /// hot or turning hot, and remembered as gone.
    pub(super) fn gone(&self, post: &PostId) {
        Self::put(&mut self.known(), *post, Known::Gone);
    }

    /// Whether this process found `post` deleted.
    pub(super) fn is_gone(&self, post: &PostId) -> bool {
        matches!(self.known().get(post), Some(Known::Gone))
    }

    /// Whether the caller is the one request of this process to switch
    /// `post` to hot: none is, and the process does not know it hot,
    /// turning hot or gone. The others then wait ([`HotPosts::is_closing`])
    /// until it is done ([`HotPosts::remember`]) or has failed
    /// ([`HotPosts::opened`]).
    pub(super) fn claim_switch(&self, post: &PostId) -> bool {
        let mut known = self.known();
        if known.contains_key(post) {
            return false;
        }
        let closing = Closing {
            own: true,
            learned: Instant::now(),
        };
        Self::put(&mut known, *post, Known::Closing(closing));
        true
    }

    /// The post item says `post` is turning hot (another process's
    /// switch): this process's likes and comments of it wait.
    pub(super) fn closed(&self, post: PostId) {
        let mut known = self.known();
        let own = match known.get(&post) {
            Some(Known::Gone) => return,
            Some(Known::Closing(c)) => c.own,
            _ => false,
        };
        let closing = Closing {
            own,
            learned: Instant::now(),
        };
        Self::put(&mut known, post, Known::Closing(closing));
    }

    /// Whether the caller is the one request of this process to take over
    /// the switch of a post closed too long
    /// ([`CLOSING_STALE`](crate::store::items::post::CLOSING_STALE)): no
    /// request of it is switching it.
    pub(super) fn claim_switch_over(&self, post: &PostId) -> bool {
        match self.known().get_mut(post) {
            Some(Known::Closing(c)) if !c.own => {
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
        if let Some(Known::Closing(c)) = self.known().get_mut(post) {
            c.own = false;
        }
    }

    /// Not (or no longer) turning hot, as far as this process knows: its
    /// switch failed.
    pub(super) fn opened(&self, post: &PostId) {
        let mut known = self.known();
        if matches!(known.get(post), Some(Known::Closing(_))) {
            known.remove(post);
        }
    }

    /// Whether this process knows `post` is turning hot: its likes and
    /// comments wait rather than write.
    pub(super) fn is_closing(&self, post: &PostId) -> bool {
        matches!(self.known().get(post), Some(Known::Closing(_)))
    }

    /// Whether the caller is the one request of this process to read a post
    /// turning hot again: another process is switching it, and no request
    /// of this one read it in the last [`RELEARN_CLOSING`].
    pub(super) fn claim_closing_relearn(&self, post: &PostId) -> bool {
        match self.known().get_mut(post) {
            Some(Known::Closing(c)) if !c.own && c.learned.elapsed() >= RELEARN_CLOSING => {
                c.learned = Instant::now();
                true
            }
            _ => false,
        }
    }
}

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
    on: bool,
    lists: Kept<UserId, Arc<[Pointer]>>,
}

impl Default for PulledLists {
    fn default() -> Self {
        Self::off()
    }
}

impl PulledLists {
    /// Keeps each list for `ttl` as `clock` measures it; zero keeps none.
    pub fn new(ttl: Duration, clock: Clock) -> Self {
        Self {
            on: !ttl.is_zero(),
            lists: Kept::new(ttl, clock, PULLED_AUTHORS),
        }
    }

    /// Every read goes to the table.
    pub fn off() -> Self {
        Self::new(Duration::ZERO, Clock::default())
    }

    pub(super) fn is_on(&self) -> bool {
        self.on
    }

    /// `author`'s list read less than the time to live ago.
    pub(super) fn fresh(&self, author: &UserId) -> Option<Arc<[Pointer]>> {
        self.lists.fresh(author)
    }

    pub(super) fn keep(&self, author: &UserId, list: Vec<Pointer>) -> Arc<[Pointer]> {
        let list: Arc<[Pointer]> = list.into();
        self.lists.keep(author.clone(), list.clone());
        list
    }
}

/// How long a read function's instance serves a hot post's answers it read
/// (`HOT_READ_CACHE_SECONDS`, [`crate::startup`]; [`HotReads`]).
pub const HOT_READ_TTL: Duration = Duration::from_secs(1);

/// How many hot posts' Q2 answers a `get-post` instance keeps (past it,
/// the stale ones go, then all): a post's content (50,000 characters) and
/// its HTML are at most about 500 KB, so about 32 MB of a 256 MB instance
/// at most.
const HOT_POSTS_KEPT: usize = 64;

/// How many first pages a `list-comments` or `list-likes` instance keeps
/// (by post and `limit`, which the caller chooses: the bound holds whatever
/// limits are asked): a page of 100 comments of 5,000 characters and their
/// HTML is at most about 5 MB, so about 40 MB at most.
const HOT_PAGES_KEPT: usize = 8;

/// How long a read function's instance serves the entries of a hot post's
/// copied first page (its likes, its comments, by key) it read, while the
/// copy still names them ([`HotReads`]): a name changed since shows this
/// much later at most.
pub const HOT_ENTRIES_TTL: Duration = Duration::from_secs(10);

/// How many entries an instance keeps ([`HOT_ENTRIES_TTL`]): a comment of
/// 5,000 characters is at most about 20 KB (4 bytes a character), so
/// about 40 MB at most, and a like a few hundred bytes.
const HOT_ENTRIES_KEPT: usize = 2_000;

/// Answers kept for a time to live, by key, as `clock` measures it, at
/// most `most` of them (past it, the stale ones go, then all).
#[derive(Debug)]
struct Kept<K, V> {
    ttl: Duration,
    clock: Clock,
    most: usize,
    answers: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: std::hash::Hash + Eq, V: Clone> Kept<K, V> {
    fn new(ttl: Duration, clock: Clock, most: usize) -> Self {
        Self {
            ttl,
            clock,
            most,
            answers: Mutex::new(HashMap::new()),
        }
    }

    fn fresh(&self, key: &K) -> Option<V> {
        if self.ttl.is_zero() {
            return None;
        }
        let answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now();
        answers
            .get(key)
            .filter(|(read, _)| now.duration_since(*read) < self.ttl)
            .map(|(_, answer)| answer.clone())
    }

    /// The last answer kept for `key`, however old (none when nothing is
    /// kept).
    fn last(&self, key: &K) -> Option<V> {
        if self.ttl.is_zero() {
            return None;
        }
        let answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        answers.get(key).map(|(_, answer)| answer.clone())
    }

    fn keep(&self, key: K, answer: V) {
        if self.ttl.is_zero() {
            return;
        }
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now();
        if answers.len() >= self.most {
            answers.retain(|_, (read, _)| now.duration_since(*read) < self.ttl);
            if answers.len() >= self.most {
                answers.clear();
            }
        }
        answers.insert(key, (now, answer));
    }
}

/// What a read function's instance answered about hot posts, served again
/// for a time to live ([`HOT_READ_TTL`]; off unless set): Q2 (`get-post`),
/// and the first pages of Q4 (`list-comments`) and Q5 (`list-likes`) by
/// `limit`. A viral post's readers outnumber its likers, and every Q2 reads
/// its own partition (and every first page its copies' partition): 100,000
/// reads a second of one post would be about 50,000 RCU a second in one
/// partition, which takes 3,000. Kept for a second, each instance reads
/// each of them at most once a second whatever its readers' rate, so the
/// partition sees about as many reads a second as there are instances
/// serving them. Only a hot post's answers are kept (a quiet post's reads
/// cost what they did, and stay exact); a kept answer is up to the time to
/// live older than the post (its counts already trail a hot post's likes
/// by the fan-out's delay), a deleted or unpublished hot post's included.
///
/// Past its time to live, a Q2 answer is not read whole again unless the
/// post changed: the post item alone (one GetItem of a small item, 0.5 RCU,
/// however long the content) says whether it did (an edit of anything but
/// its counts and its author's name writes its `updatedAt`, the content's
/// in the same transaction), so each instance's miss costs the post's
/// partition what a short post's read costs, whatever the post's size.
/// Only an answer whose content has the item's `updatedAt` is checked so
/// (one written with the item: a Query may read the item and the content
/// of two edits while the later one commits, and a title's edit leaves the
/// content older); another is read whole at each miss, as before.
///
/// A first page read from its copy ([`super::first_pages`]) reads the
/// entries the copy names by key: every instance's miss reads the same ones
/// (a viral post's oldest comments, in the few shards they were written
/// to), which would take those shards to their read limit. So the entries
/// read are kept for [`HOT_ENTRIES_TTL`] (only those found: one missing is
/// read again), and a page reads only those it has not kept: which entries
/// a page shows is still the copy's (read at each miss), so an entry taken
/// back leaves it once the copy is made again (about 2 s); a rename shows
/// within [`HOT_ENTRIES_TTL`].
#[derive(Debug)]
pub struct HotReads {
    posts: Kept<PostId, KeptPost>,
    comments: Kept<(PostId, usize), Page<Comment>>,
    likes: Kept<(PostId, usize), Page<Like>>,
    entries: Kept<Key, super::Item>,
}

/// A hot post's Q2 answer as an instance keeps it, and the post item's
/// `updatedAt` it was read with, when the item alone can check it later
/// ([`HotReads`]; `None`: read whole again).
#[derive(Debug, Clone)]
pub(super) struct KeptPost {
    pub(super) answer: Post,
    pub(super) item_updated_at: Option<String>,
}

impl Default for HotReads {
    fn default() -> Self {
        Self::off()
    }
}

impl HotReads {
    /// Keeps each answer for `ttl` as `clock` measures it; zero keeps none.
    pub fn new(ttl: Duration, clock: Clock) -> Self {
        Self {
            posts: Kept::new(ttl, clock.clone(), HOT_POSTS_KEPT),
            comments: Kept::new(ttl, clock.clone(), HOT_PAGES_KEPT),
            likes: Kept::new(ttl, clock.clone(), HOT_PAGES_KEPT),
            entries: Kept::new(
                if ttl.is_zero() { ttl } else { HOT_ENTRIES_TTL },
                clock,
                HOT_ENTRIES_KEPT,
            ),
        }
    }

    /// Every read goes to the table.
    pub fn off() -> Self {
        Self::new(Duration::ZERO, Clock::default())
    }

    pub(super) fn post(&self, post: &PostId) -> Option<Post> {
        self.posts.fresh(post).map(|kept| kept.answer)
    }

    /// The last answer kept for `post`, however old, and the post item's
    /// `updatedAt` it was read at.
    pub(super) fn last_post(&self, post: &PostId) -> Option<KeptPost> {
        self.posts.last(post)
    }

    /// Keeps `answer`, read with a post item of `updatedAt`
    /// `item_updated_at` if its item alone may check it later.
    pub(super) fn keep_post(&self, answer: &Post, item_updated_at: Option<&str>) {
        let kept = KeptPost {
            answer: answer.clone(),
            item_updated_at: item_updated_at.map(str::to_owned),
        };
        self.posts.keep(answer.post_id, kept);
    }

    pub(super) fn comments(&self, post: &PostId, limit: usize) -> Option<Page<Comment>> {
        self.comments.fresh(&(*post, limit))
    }

    pub(super) fn keep_comments(&self, post: &PostId, limit: usize, page: &Page<Comment>) {
        self.comments.keep((*post, limit), page.clone());
    }

    pub(super) fn likes(&self, post: &PostId, limit: usize) -> Option<Page<Like>> {
        self.likes.fresh(&(*post, limit))
    }

    pub(super) fn keep_likes(&self, post: &PostId, limit: usize, page: &Page<Like>) {
        self.likes.keep((*post, limit), page.clone());
    }

    /// The copied first pages' entry at `key`, if read within
    /// [`HOT_ENTRIES_TTL`].
    pub(super) fn entry(&self, key: &Key) -> Option<super::Item> {
        self.entries.fresh(key)
    }

    pub(super) fn keep_entry(&self, key: Key, item: super::Item) {
        self.entries.keep(key, item);
    }
}

/// How many likes and comments a second one process writes on one quiet
/// post before it turns the post hot, unless set otherwise
/// (`HOT_WRITES_PER_SECOND`, [`crate::startup`]): a quiet like writes 4 WCU in
/// the post's partition (the like and the post's count, each twice in the
/// transaction; its mark is in the liker's), a comment 4, and the partition
/// takes about 1,000 a second, so 25 from one process is about 10 % of it:
/// the switch runs while the partition still has room, before any request
/// meets its limit. A throttle of the partition still turns it hot (the
/// fallback: likes spread over many instances, each below the rate).
pub const HOT_WRITES_PER_SECOND: f64 = 25.0;

/// The likes and comments a second this process has written on each post it
/// met, as a decaying estimate (a quiet post turns hot at the threshold; a
/// hot one widens at the threshold times its shards, each shard a partition
/// of its own): each write adds `1 / tau` to the
/// post's rate, which decays by `e^(-t / tau)`, so at a steady rate `r` the
/// estimate tends to `r` (within `tau`). `tau` is a second, or longer when
/// the threshold is below 3 a second (at DynamoDB's limits scaled down, in
/// the benchmarks and the local stack's partition-limiting proxy): three
/// writes within `tau` at least, so one like never turns a post hot.
#[derive(Debug)]
pub struct WriteRates {
    /// The rate that turns a post hot; `None`: none does.
    threshold: Option<f64>,
    rates: Mutex<HashMap<PostId, (Instant, f64)>>,
}

impl Default for WriteRates {
    fn default() -> Self {
        Self::new(Some(HOT_WRITES_PER_SECOND))
    }
}

impl WriteRates {
    /// Turns a post hot at `threshold` writes a second (`None`, or not
    /// above 0: never by its rate).
    pub fn new(threshold: Option<f64>) -> Self {
        Self {
            threshold: threshold.filter(|t| t.is_finite() && *t > 0.0),
            rates: Mutex::default(),
        }
    }

    /// The rate that turns a post hot, if any.
    pub fn threshold(&self) -> Option<f64> {
        self.threshold
    }

    /// The time constant of the estimate, in seconds.
    fn tau(threshold: f64) -> f64 {
        (2.0 / threshold).max(1.0)
    }

    /// Notes one write now on `post`, spread over `partitions` (1 while
    /// it is quiet, its shard count once hot); whether the post's rate has
    /// reached the threshold for that many partitions (then it is
    /// forgotten: the caller turns it hot or widens it, and the count starts
    /// again).
    pub(super) fn note(&self, post: &PostId, partitions: u8) -> bool {
        self.note_at(post, partitions, Instant::now())
    }

    fn note_at(&self, post: &PostId, partitions: u8, now: Instant) -> bool {
        let Some(threshold) = self.threshold else {
            return false;
        };
        let threshold = threshold * f64::from(partitions.max(1));
        let tau = Self::tau(threshold);
        let mut rates = self.rates.lock().unwrap_or_else(PoisonError::into_inner);
        if rates.len() >= REMEMBERED && !rates.contains_key(post) {
            rates.clear();
        }
        let (at, rate) = rates.entry(*post).or_insert((now, 0.0));
        let elapsed = now.saturating_duration_since(*at).as_secs_f64();
        *rate = *rate * (-elapsed / tau).exp() + 1.0 / tau;
        *at = now;
        if *rate >= threshold {
            rates.remove(post);
            return true;
        }
        false
    }
}

/// What a process knows of a post it has liked or commented on: its
/// author (what a like's or a comment's block check needs,
/// [`super::blocks`]), and whether its likes are marked in their likers'
/// partitions (`likersMoved`: a quiet like then puts no marker beside
/// itself, [`super::likes`]).
#[derive(Debug, Clone)]
pub struct PostHead {
    pub author: UserId,
    pub likes_marked: bool,
}

/// The [`PostHead`]s of the posts a process has liked or commented on. A
/// post's author never changes and a post id is never used again; a post's
/// likes, once marked, stay so (a head read as unmarked may be marked since:
/// its likes put a marker they need not, and nothing else). So what is
/// kept is never wrong; past `REMEMBERED` posts it forgets them all (one
/// read of a post item each to learn them again).
#[derive(Debug, Default)]
pub struct PostAuthors {
    known: Mutex<HashMap<PostId, PostHead>>,
}

impl PostAuthors {
    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<PostId, PostHead>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn get(&self, post: &PostId) -> Option<PostHead> {
        self.known().get(post).cloned()
    }

    pub(super) fn remember(&self, post: PostId, head: PostHead) {
        let mut known = self.known();
        if known.len() >= REMEMBERED && !known.contains_key(&post) {
            known.clear();
        }
        known.insert(post, head);
    }

    /// Whether `post`'s likes are marked, as far as this process knows
    /// (a post it never read: yes, the shape this version creates; a like's
    /// count conditions on it, [`super::counts`]).
    pub(super) fn likes_marked(&self, post: &PostId) -> bool {
        self.known().get(post).is_none_or(|head| head.likes_marked)
    }

    /// `post` found with likes not marked (created by a version before quiet
    /// likes were).
    pub(super) fn unmarked(&self, post: &PostId) {
        if let Some(head) = self.known().get_mut(post) {
            head.likes_marked = false;
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
    fn kept_answers_expire_and_stay_within_their_bound_whatever_the_keys() {
        let clock = Clock::manual();
        let kept: Kept<(PostId, usize), u64> = Kept::new(Duration::from_secs(1), clock.clone(), 8);
        kept.keep((post(1), 20), 7);
        assert_eq!(kept.fresh(&(post(1), 20)), Some(7));
        assert_eq!(kept.fresh(&(post(1), 21)), None, "by limit");
        clock.advance(Duration::from_secs(1));
        assert_eq!(kept.fresh(&(post(1), 20)), None, "past its time to live");
        // A caller asking every limit keeps at most 8 answers.
        for limit in 1..=100 {
            kept.keep((post(2), limit), 1);
            let held = kept.answers.lock().map(|a| a.len()).unwrap_or(usize::MAX);
            assert!(held <= 8, "{held} answers");
        }
        let off: Kept<PostId, u64> = Kept::new(Duration::ZERO, clock, 8);
        off.keep(post(3), 1);
        assert_eq!(off.fresh(&post(3)), None, "off keeps nothing");
    }

    #[test]
    fn a_post_turns_hot_at_its_rate_and_not_below() {
        let p = post(3);
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        // 25 a second: 20 a second for ten seconds never reaches it.
        let rates = WriteRates::new(Some(25.0));
        assert!((0..200).all(|i| !rates.note_at(&p, 1, at(i * 50))));
        // 50 a second reaches it within a second of starting.
        let rates = WriteRates::new(Some(25.0));
        let first = (0..100).find(|i| rates.note_at(&p, 1, at(i * 20)));
        assert!(
            matches!(first, Some(i) if (20..50).contains(&i)),
            "{first:?}"
        );
        // Reached, it is forgotten: the count starts again.
        assert!(!rates.note_at(&p, 1, at(2_000)));
        // Scaled down (0.25 a second, tau 8 s): one like is not a rate,
        // three within seconds are.
        let rates = WriteRates::new(Some(0.25));
        assert!(!rates.note_at(&p, 1, at(0)));
        assert!(!rates.note_at(&p, 1, at(60_000)), "a minute later");
        assert!(!rates.note_at(&p, 1, at(61_000)));
        assert!(rates.note_at(&p, 1, at(62_000)));
        // Hot over 16 shards: 16 times the rate.
        let rates = WriteRates::new(Some(25.0));
        assert!(
            (0..100).all(|i| !rates.note_at(&p, 16, at(i * 10))),
            "100 a second"
        );
        let first = (0..1_000).find(|i| rates.note_at(&p, 16, at(1_000 + i * 2)));
        assert!(first.is_some(), "500 a second");
        // Off: never.
        let rates = WriteRates::new(None);
        assert!((0..1_000).all(|i| !rates.note_at(&p, 1, at(i))));
        assert!(WriteRates::new(Some(0.0)).threshold.is_none());
        assert!(WriteRates::new(Some(f64::NAN)).threshold.is_none());
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
    fn a_post_found_gone_stays_gone_whatever_a_late_read_says() {
        let hot = HotPosts::default();
        let p = post(4);
        hot.gone(&p);
        hot.remember(p, Hot::new(16, true, true));
        hot.closed(p);
        hot.forget(&p);
        hot.opened(&p);
        assert!(hot.is_gone(&p));
        assert!(hot.get(&p).is_none() && !hot.is_closing(&p));
        assert!(!hot.claim_switch(&p), "no switch of a deleted post");
        // Known one way at a time: hot ends turning hot, and back.
        let q = post(5);
        hot.closed(q);
        assert!(hot.is_closing(&q) && hot.get(&q).is_none());
        hot.remember(q, Hot::new(16, false, true));
        assert!(!hot.is_closing(&q) && hot.get(&q).is_some());
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
