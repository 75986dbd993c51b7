//! The API and the fan-out on a DynamoDB that behaves like the service under
//! load (the `hostile` proxy in front of DynamoDB Local): transactions
//! cancelled for throttling and conflicts, plain writes refused with
//! `TransactionConflictException`, throttled reads and writes, answers lost
//! after a commit, and a GSI1 that shows new items only a second later.
//!
//! A seeded, concurrent workload whose clients retry 503 as real clients do,
//! in two parts: four fifths at the proxy's default rates (a busy day: the
//! store's retries absorb nearly everything), then a storm that cancels most
//! transactions and writes, so that retries run out and requests get 503.
//! Then, once the fan-out has drained what it had (without starting the
//! stream over): no 5xx but 503, nothing left behind by a 503, every count
//! exact on every copy, the feed exactly the newest 100 posts, every copy of
//! a renamed user's name the latest, and an audit that finds nothing. Two
//! users erase their accounts midway, while they and others are still
//! writing: nothing of theirs is left but the erasure mark.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Mutex,
    time::{Duration, Instant},
};

use aws_lambda_events::event::dynamodb::Event;
use blog::store::Backoff;
use futures::StreamExt;
use hostile::Faults;
use serde_json::{Value, json};

use crate::support::{TestApi, behind_proxy, fast_full_backoff, proxy, table_snapshot};

/// Retries that give up quickly, so that a test sees the 503 soon.
fn impatient() -> Backoff {
    Backoff {
        attempts: 3,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(5),
        budget: Duration::from_secs(2),
        resolve: Duration::ZERO,
    }
}

/// One retry layer: a call DynamoDB throttles on every try is sent 8 times
/// in all (the table layer's attempts; the SDK's own retries are off), for a
/// read as for a transaction, and then answers 503.
#[tokio::test]
async fn a_call_throttled_on_every_attempt_is_sent_eight_times_at_most() {
    let (proxy, api) = behind_proxy(fast_full_backoff()).await;
    let author = api.user("throttled").await;
    let post = api.post(&author, "t", "c").await;
    proxy.set_faults(Faults {
        throttle: 1.0,
        ..Faults::none()
    });
    for (method, path) in [("GET", format!("/posts/{post}")), ("POST", "/posts".into())] {
        let before = proxy.stats();
        let body = (method == "POST").then(|| json!({ "title": "t", "content": "c" }));
        let (status, reply) = api.call(method, &path, Some(&author), body).await;
        assert_eq!(status, 503, "{method} {path}: {reply}");
        let after = proxy.stats();
        assert_eq!(after.throttle - before.throttle, 8, "{method} {path}");
        assert_eq!(after.requests - before.requests, 8, "{method} {path}");
    }
    // The store's own call, below the API: the same.
    let before = proxy.stats();
    let key =
        blog::store::items::post::PostItem::key(&blog::ids::PostId::parse(&post).expect("id"));
    let got = api.app.store.db().get("a post item", key, true).await;
    assert!(
        matches!(got, Err(blog::store::StoreError::Busy { .. })),
        "{got:?}"
    );
    assert_eq!(proxy.stats().requests - before.requests, 8);
}

/// Every write route, on a DynamoDB that commits each write but loses its
/// answer, then cancels every retry of it: the table layer keeps the
/// transaction's token, reads back what the write would have left, and the
/// request answers as if nothing had been lost: the right status, nothing
/// written twice, nothing missing.
#[tokio::test]
async fn a_lost_answer_then_refused_retries_answers_as_if_nothing_was_lost() {
    let proxy = proxy(Faults::none()).await;
    let api = TestApi::start_behind(&proxy.url(), impatient(), Duration::ZERO).await;
    let author = api.user("lossy").await;
    let reader = api.user("reader").await;
    let lossy = Faults {
        lost_response: 1.0,
        replay_cancel: 1.0,
        ..Faults::none()
    };
    let call = async |method: &str, path: &str, user: &str, body: Option<Value>| {
        proxy.set_faults(lossy.clone());
        let before = proxy.stats().lost_response;
        let answer = api.call(method, path, Some(user), body).await;
        let lost = proxy.stats().lost_response - before;
        proxy.set_faults(Faults::none());
        assert!(lost > 0, "{method} {path}: no answer was lost");
        answer
    };

    let (status, reply) = call(
        "POST",
        "/users",
        "newcomer",
        Some(json!({"username": "fresh"})),
    )
    .await;
    assert_eq!(status, 201, "create user: {reply}");
    let (status, reply) = call(
        "PUT",
        &format!("/users/{author}"),
        &author,
        Some(json!({"username": "lossy_two"})),
    )
    .await;
    assert_eq!(
        (status, reply["username"].as_str()),
        (200, Some("lossy_two")),
        "rename: {reply}"
    );
    let (status, reply) = call(
        "PUT",
        &format!("/users/{author}"),
        &author,
        Some(json!({"username": "LOSSY_TWO"})),
    )
    .await;
    assert_eq!(status, 200, "rename, case only: {reply}");

    let (status, reply) = call(
        "POST",
        "/posts",
        &author,
        Some(json!({"title": "t", "content": "c"})),
    )
    .await;
    assert_eq!(status, 201, "create post: {reply}");
    let post = reply["postId"].as_str().expect("postId").to_owned();
    let (_, listed) = api.user_posts(&author).await;
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(1),
        "one post: {listed}"
    );

    let (status, reply) = call(
        "PUT",
        &format!("/posts/{post}"),
        &author,
        Some(json!({"title": "edited"})),
    )
    .await;
    assert_eq!(
        (status, reply["title"].as_str()),
        (200, Some("edited")),
        "edit: {reply}"
    );
    let (status, reply) = call(
        "PUT",
        &format!("/posts/{post}"),
        &author,
        Some(json!({"content": "only the text"})),
    )
    .await;
    assert_eq!(status, 200, "edit the content: {reply}");

    let comments = format!("/posts/{post}/comments");
    let (status, reply) = call("POST", &comments, &reader, Some(json!({"content": "hi"}))).await;
    assert_eq!(status, 201, "comment: {reply}");
    let comment = reply["commentId"].as_str().expect("commentId").to_owned();
    let likes = format!("/posts/{post}/likes");
    let (status, reply) = call("POST", &likes, &reader, None).await;
    assert_eq!(status, 201, "like: {reply}");
    let (_, shown) = api.get_post(&post).await;
    assert_eq!(
        (shown["commentCount"].as_u64(), shown["likeCount"].as_u64()),
        (Some(1), Some(1)),
        "{shown}"
    );

    let (status, reply) = call("DELETE", &likes, &reader, None).await;
    assert_eq!(status, 204, "unlike: {reply}");
    let (status, reply) = call("DELETE", &format!("{comments}/{comment}"), &reader, None).await;
    assert_eq!(status, 204, "delete comment: {reply}");
    let (_, shown) = api.get_post(&post).await;
    assert_eq!(
        (shown["commentCount"].as_u64(), shown["likeCount"].as_u64()),
        (Some(0), Some(0)),
        "{shown}"
    );
    let (status, reply) = call("DELETE", &format!("/posts/{post}"), &author, None).await;
    assert_eq!(status, 204, "delete post: {reply}");
    let (status, _) = api.get_post(&post).await;
    assert_eq!(status, 404);
    let (status, found) = api.get("/users?username=FRESH").await;
    assert_eq!(status, 200, "{found}");
}

/// Every write DynamoDB cancels or refuses, on every try: each write request
/// answers 503 (never 500, never a domain answer such as "already liked"),
/// and leaves the table as it was; once DynamoDB recovers, the same requests
/// succeed.
#[tokio::test]
async fn writes_that_stay_refused_answer_503_and_change_nothing() {
    let proxy = proxy(Faults::none()).await;
    let api = TestApi::start_behind(&proxy.url(), impatient(), Duration::ZERO).await;
    let author = api.user("steady").await;
    let post = api.post(&author, "t", "c").await;
    let requests = every_write(&author, &post);
    let before = table_snapshot(&api).await;
    for (reason, faults) in [
        (
            "cancelled transactions and conflicting writes",
            Faults {
                transaction_cancel: 1.0,
                write_conflict: 1.0,
                ..Faults::none()
            },
        ),
        (
            "throttling",
            Faults {
                throttle: 1.0,
                ..Faults::none()
            },
        ),
    ] {
        proxy.set_faults(faults);
        for (method, path, body, user) in &requests {
            let (status, reply) = api.call(method, path, Some(user), body.clone()).await;
            assert_eq!(status, 503, "{reason}: {method} {path}: {reply}");
            assert_eq!(reply["error"]["code"], "unavailable");
        }
        proxy.set_faults(Faults::none());
        assert_eq!(
            table_snapshot(&api).await,
            before,
            "{reason}: nothing written"
        );
    }
    assert!(proxy.stats().faults() > 0);
    for (method, path, body, user) in &requests {
        let (status, reply) = api.call(method, path, Some(user), body.clone()).await;
        assert!(status == 200 || status == 201, "{method} {path}: {reply}");
    }
}

/// Every kind of write, as `author` of `post` (and a newcomer's sign-up):
/// method, path, body, caller.
fn every_write<'a>(
    author: &'a str,
    post: &str,
) -> Vec<(&'static str, String, Option<Value>, &'a str)> {
    vec![
        (
            "POST",
            "/users".to_owned(),
            Some(json!({ "username": "newcomer" })),
            "new-user",
        ),
        (
            "PUT",
            format!("/users/{author}"),
            Some(json!({ "username": "renamed" })),
            author,
        ),
        (
            "POST",
            "/posts".to_owned(),
            Some(json!({ "title": "t", "content": "c" })),
            author,
        ),
        (
            "PUT",
            format!("/posts/{post}"),
            Some(json!({ "title": "edited" })),
            author,
        ),
        (
            "POST",
            format!("/posts/{post}/comments"),
            Some(json!({ "content": "hi" })),
            author,
        ),
        ("POST", format!("/posts/{post}/likes"), None, author),
    ]
}

/// A write whose every attempt fails with an unknown outcome (DynamoDB's 500,
/// which a lost answer also looks like) and whose write is not there when
/// read back answers 503 `outcome_unknown`, never `unavailable`, which would
/// promise that nothing was written: the lost attempt may yet commit. (Here
/// the proxy never sent them, so the table is as it was.)
#[tokio::test]
async fn writes_whose_outcome_stays_unknown_say_so() {
    let proxy = proxy(Faults::none()).await;
    let api = TestApi::start_behind(&proxy.url(), impatient(), Duration::ZERO).await;
    let author = api.user("steady").await;
    let post = api.post(&author, "t", "c").await;
    let before = table_snapshot(&api).await;
    proxy.set_faults(Faults {
        server_error: 1.0,
        ..Faults::none()
    });
    for (method, path, body, user) in every_write(&author, &post) {
        let (status, reply) = api.call(method, &path, Some(user), body.clone()).await;
        assert_eq!(
            (status, reply["error"]["code"].as_str()),
            (503, Some("outcome_unknown")),
            "{method} {path}: {reply}"
        );
    }
    proxy.set_faults(Faults::none());
    assert!(proxy.stats().server_error > 0);
    assert_eq!(table_snapshot(&api).await, before, "nothing was sent");
}

/// Retries that give up within half a second, then resolve an unknown
/// outcome for up to `resolve`, asking again every 100 ms.
fn resolving(resolve: Duration) -> Backoff {
    Backoff {
        attempts: 8,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(100),
        budget: Duration::from_millis(500),
        resolve,
    }
}

/// A late commit (issue 33): an attempt's answer never comes back, its
/// retries under the same token are told "in progress" until the retries
/// run out, and the attempt commits after that. The request keeps asking
/// under its token until DynamoDB says the transaction committed, and
/// answers what it did: every kind of write, 2xx, each written once.
#[tokio::test]
async fn a_write_that_commits_after_its_retries_ran_out_answers_what_it_did() {
    let proxy = proxy(Faults::none()).await;
    let api = TestApi::start_behind(
        &proxy.url(),
        resolving(Duration::from_secs(4)),
        Duration::ZERO,
    )
    .await;
    let author = api.user("late").await;
    let post = api.post(&author, "t", "c").await;
    proxy.set_faults(Faults {
        late_commit: 1.0,
        late_commit_delay: Duration::from_millis(1500),
        ..Faults::none()
    });
    for (method, path, body, user) in every_write(&author, &post) {
        let (status, reply) = api.call(method, &path, Some(user), body.clone()).await;
        assert!(
            status == 200 || status == 201,
            "{method} {path}: {status} {reply}"
        );
    }
    proxy.set_faults(Faults::none());
    let stats = proxy.stats();
    assert!(stats.late_commit >= 6 && stats.in_progress > 0, "{stats}");
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (
            got["title"].as_str(),
            got["commentCount"].as_i64(),
            got["likeCount"].as_i64()
        ),
        (Some("edited"), Some(1), Some(1)),
        "{got}"
    );
    let (_, posts) = api.user_posts(&author).await;
    assert_eq!(
        posts["items"].as_array().map(Vec::len),
        Some(2),
        "one new post"
    );
    let (status, _) = api.get("/users?username=newcomer").await;
    assert_eq!(status, 200);
    let (_, renamed) = api.get_user(&author).await;
    assert_eq!(renamed["username"], "renamed");
}

/// The same, when the attempt commits later than the request can wait: 503
/// `outcome_unknown` (never `unavailable`), and the write lands afterwards,
/// as the answer warned.
#[tokio::test]
async fn a_write_that_commits_after_the_request_gave_up_says_its_outcome_is_unknown() {
    let proxy = proxy(Faults::none()).await;
    let api = TestApi::start_behind(
        &proxy.url(),
        resolving(Duration::from_millis(300)),
        Duration::ZERO,
    )
    .await;
    let author = api.user("later").await;
    let post = api.post(&author, "t", "c").await;
    proxy.set_faults(Faults {
        late_commit: 1.0,
        late_commit_delay: Duration::from_secs(2),
        ..Faults::none()
    });
    let (status, reply) = api.like_post(&author, &post).await;
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (503, Some("outcome_unknown")),
        "{reply}"
    );
    proxy.set_faults(Faults::none());
    // Bounded: the proxy sends the held attempt 2 s after it came.
    for _ in 0..50 {
        if api.get_post(&post).await.1["likeCount"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(api.get_post(&post).await.1["likeCount"], 1, "it landed");
    let (status, again) = api.like_post(&author, &post).await;
    assert_eq!(status, 200, "liking again finds it: {again}");
}

/// The fan-out on a DynamoDB that keeps refusing: a record it cannot apply is
/// reported failed (never skipped as stale), and applies once DynamoDB
/// recovers and Lambda delivers it again.
#[tokio::test]
async fn the_fan_out_reports_records_it_cannot_apply_and_applies_them_later() {
    let proxy = proxy(Faults::none()).await;
    let api = TestApi::start_behind(&proxy.url(), impatient(), Duration::ZERO).await;
    let author = api.user("writer").await;
    let post = api.post(&author, "t", "c").await;
    let refused = Faults {
        transaction_cancel: 1.0,
        write_conflict: 1.0,
        ..Faults::none()
    };

    // The post's INSERT: its feed entry's transaction keeps being cancelled.
    // (Profile, username claim, post.)
    api.wait_for_stream(3).await;
    let records = api.stream_records().await;
    let event = |records: &[_]| {
        let mut event = Event::default();
        event.records = records.to_vec();
        event
    };
    proxy.set_faults(refused.clone());
    let response = blog::fanout::handle(&api.app.store, event(&records)).await;
    assert_eq!(response.batch_item_failures.len(), 1, "{response:?}");
    proxy.set_faults(Faults::none());
    let (_, feed) = api.get_feed().await;
    assert_eq!(feed["items"], json!([]), "nothing entered the feed");
    let response = blog::fanout::handle(&api.app.store, event(&records)).await;
    assert_eq!(response.batch_item_failures.len(), 0, "{response:?}");
    let (_, feed) = api.get_feed().await;
    assert_eq!(feed["items"][0]["postId"], json!(post));

    // A rename: its copy onto the post keeps conflicting.
    api.rename(&author, "writer2").await;
    api.wait_for_stream(records.len() + 2).await;
    let rename = api.stream_records().await.split_off(records.len());
    proxy.set_faults(refused);
    let response = blog::fanout::handle(&api.app.store, event(&rename)).await;
    assert_eq!(response.batch_item_failures.len(), 1, "{response:?}");
    proxy.set_faults(Faults::none());
    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["username"], "writer", "not copied yet");
    let response = blog::fanout::handle(&api.app.store, event(&rename)).await;
    assert_eq!(response.batch_item_failures.len(), 0, "{response:?}");
    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["username"], "writer2");
}

const USERS: usize = 40;
const POSTS: usize = 130;
const LIKES: usize = 300;
const COMMENTS: usize = 200;
const RENAMED_USERS: usize = 12;
/// Users who only like then take back, and comment then delete: their own,
/// so that no other operation races them on the same like.
const TAKERS: usize = 6;
const TAKE_BACKS: usize = 80;
const READS: usize = 600;
/// Users who post, like and comment, then erase their account, in any order
/// with the rest (their writes after it answer 403; others' on their posts,
/// once those are gone, 404).
const LEAVERS: usize = 2;
const CONCURRENCY: usize = 8;
/// How often a client sends a request that got 503 before it gives up.
const CLIENT_TRIES: usize = 12;
const GSI_LAG: Duration = Duration::from_secs(1);

/// What the clients saw, and what succeeded.
#[derive(Default)]
struct Outcomes {
    statuses: BTreeMap<u16, usize>,
    /// Operations that got 503 every time.
    abandoned: usize,
    /// userId → its latest username.
    names: HashMap<String, String>,
    /// postId → author.
    posts: BTreeMap<String, String>,
    /// postId → comment ids.
    comments: HashMap<String, BTreeSet<String>>,
    /// postId → likers.
    likes: HashMap<String, BTreeSet<String>>,
    /// commentId → its author.
    comment_authors: HashMap<String, String>,
    /// Users whose erasure answered 204.
    erased: BTreeSet<String>,
    /// Answers 503 `outcome_unknown`.
    unknown: usize,
    /// (post, user): a like answered `outcome_unknown` before it was given
    /// and taken back, which may land after all.
    maybe_likes: BTreeSet<(String, String)>,
    /// Requests answered 503 `unavailable` whose write had landed (a retry
    /// with the same key was answered as a replay).
    lies: Vec<String>,
}

impl Outcomes {
    /// Whether `post` is (or was) by a user who leaves.
    fn by_leaver(&self, post: &str, users: &[String]) -> bool {
        self.posts
            .get(post)
            .is_some_and(|author| leavers(users).contains(author))
    }

    /// What is left once the erasures have run: nothing the erased users
    /// wrote, nor anything on their posts.
    fn forget_erased(&mut self) {
        let erased = self.erased.clone();
        let gone: BTreeSet<String> = self
            .posts
            .iter()
            .filter(|(_, author)| erased.contains(*author))
            .map(|(post, _)| post.clone())
            .collect();
        self.posts.retain(|post, _| !gone.contains(post));
        self.comments.retain(|post, _| !gone.contains(post));
        self.likes.retain(|post, _| !gone.contains(post));
        for ids in self.comments.values_mut() {
            ids.retain(|id| {
                !self
                    .comment_authors
                    .get(id)
                    .is_some_and(|author| erased.contains(author))
            });
        }
        for likers in self.likes.values_mut() {
            likers.retain(|liker| !erased.contains(liker));
        }
        self.comments.retain(|_, ids| !ids.is_empty());
        self.likes.retain(|_, likers| !likers.is_empty());
        self.names.retain(|user, _| !erased.contains(user));
    }
}

fn leavers(users: &[String]) -> &[String] {
    &users[USERS + TAKERS..]
}

fn is_leaver(users: &[String], user: &str) -> bool {
    leavers(users).iter().any(|u| u == user)
}

/// One operation of the workload.
#[derive(Debug, Clone)]
enum Op {
    Post {
        author: usize,
        n: usize,
    },
    Like {
        liker: usize,
        pick: usize,
    },
    Comment {
        author: usize,
        pick: usize,
        n: usize,
    },
    /// A taker likes a post and takes the like back, then comments on it and
    /// deletes the comment (or the post's author does).
    TakeBack {
        taker: usize,
        pick: usize,
        n: usize,
    },
    /// Two renames of the same user, one after the other.
    Rename {
        user: usize,
    },
    /// The user erases their account.
    Leave {
        user: usize,
    },
    Read {
        pick: usize,
        kind: u8,
    },
}

/// Most transactions and plain writes refused: the store's retries run out
/// for some requests, which answer 503.
fn storm(faults: &Faults) -> Faults {
    Faults {
        transaction_cancel: 0.7,
        write_conflict: 0.6,
        throttle: 0.2,
        lost_response: 0.3,
        replay_cancel: 0.6,
        // Later than a request's retries and resolution (5 + 3 s): answered
        // `outcome_unknown`, then sent again by the client with its key.
        late_commit: 0.04,
        late_commit_delay: Duration::from_secs(9),
        seed: faults.seed + 1,
        ..faults.clone()
    }
}

fn workload(seed: u64) -> Vec<Op> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut ops = Vec::new();
    ops.extend((0..POSTS).map(|n| Op::Post {
        author: rng.usize(..USERS),
        n,
    }));
    ops.extend((0..LIKES).map(|_| Op::Like {
        liker: rng.usize(..USERS),
        pick: rng.usize(..),
    }));
    ops.extend((0..COMMENTS).map(|n| Op::Comment {
        author: rng.usize(..USERS),
        pick: rng.usize(..),
        n,
    }));
    ops.extend((0..TAKE_BACKS).map(|n| Op::TakeBack {
        taker: USERS + rng.usize(..TAKERS),
        pick: rng.usize(..),
        n,
    }));
    ops.extend((0..RENAMED_USERS).map(|user| Op::Rename { user }));
    ops.extend((0..READS).map(|_| Op::Read {
        pick: rng.usize(..),
        kind: rng.u8(..4),
    }));
    for leaver in USERS + TAKERS..USERS + TAKERS + LEAVERS {
        ops.extend((0..3).map(|n| Op::Post {
            author: leaver,
            n: POSTS + leaver * 3 + n,
        }));
        ops.extend((0..4).map(|_| Op::Like {
            liker: leaver,
            pick: rng.usize(..),
        }));
        ops.extend((0..4).map(|n| Op::Comment {
            author: leaver,
            pick: rng.usize(..),
            n: COMMENTS + leaver * 4 + n,
        }));
        ops.push(Op::Leave { user: leaver });
    }
    // The first posts go first, so likes and comments have something to hit.
    rng.shuffle(&mut ops[8..]);
    ops
}

/// Whether `status` is what an erasure explains: a leaver's write after
/// their erasure (403), or a write on a leaver's post once it is gone (404).
fn erasure_answer(
    status: u16,
    me: &str,
    post: &str,
    users: &[String],
    outcomes: &Outcomes,
) -> bool {
    (status == 403 && is_leaver(users, me)) || (status == 404 && outcomes.by_leaver(post, users))
}

/// Sends a request until it gets something other than 503 (a real client's
/// retry, with backoff), recording every status.
async fn send(
    api: &TestApi,
    outcomes: &Mutex<Outcomes>,
    method: &str,
    path: &str,
    user: Option<&str>,
    body: Option<Value>,
) -> Option<(u16, Value)> {
    send_keyed(api, outcomes, method, path, user, body, None).await
}

/// [`send`], with an `Idempotency-Key` on every attempt when `key` is given
/// (a create). An attempt answered as a replay after one answered 503
/// `unavailable` means that 503 left its write behind: noted as a lie.
async fn send_keyed(
    api: &TestApi,
    outcomes: &Mutex<Outcomes>,
    method: &str,
    path: &str,
    user: Option<&str>,
    body: Option<Value>,
    key: Option<&str>,
) -> Option<(u16, Value)> {
    send_tracked(api, outcomes, method, path, user, body, key)
        .await
        .0
}

/// [`send_keyed`], and whether an attempt was answered `outcome_unknown`.
async fn send_tracked(
    api: &TestApi,
    outcomes: &Mutex<Outcomes>,
    method: &str,
    path: &str,
    user: Option<&str>,
    body: Option<Value>,
    key: Option<&str>,
) -> (Option<(u16, Value)>, bool) {
    // The answers so far: a replay is a lie of an earlier 503 `unavailable`
    // only when no attempt said its outcome was unknown (that one's write
    // may be what is replayed).
    let mut answered: Vec<String> = Vec::new();
    for attempt in 0..CLIENT_TRIES {
        let (status, reply, replayed) =
            api.call_keyed(method, path, user, key, body.as_ref()).await;
        let code = reply["error"]["code"].as_str().unwrap_or_default();
        answered.push(format!("{status} {code}"));
        {
            let mut seen = outcomes.lock().expect("lock");
            *seen.statuses.entry(status).or_default() += 1;
            if replayed
                && answered.iter().any(|a| a == "503 unavailable")
                && !answered.iter().any(|a| a == "503 outcome_unknown")
            {
                seen.lies.push(format!("{method} {path}: {answered:?}"));
            }
            if code == "outcome_unknown" {
                seen.unknown += 1;
            }
        }
        // A key whose first request is still being written: "send it
        // again shortly", as a 503.
        if status != 503 && code != "idempotency_key_in_flight" {
            let unknown = answered.iter().any(|a| a == "503 outcome_unknown");
            return (Some((status, reply)), unknown);
        }
        let backoff = 20u64 << attempt.min(5);
        tokio::time::sleep(Duration::from_millis(fastrand::u64(..=backoff))).await;
    }
    outcomes.lock().expect("lock").abandoned += 1;
    let unknown = answered.iter().any(|a| a == "503 outcome_unknown");
    (None, unknown)
}

async fn run(api: &TestApi, users: &[String], op: Op, outcomes: &Mutex<Outcomes>) {
    let pick_post = |pick: usize| {
        let outcomes = outcomes.lock().expect("lock");
        let posts: Vec<&String> = outcomes.posts.keys().collect();
        (!posts.is_empty()).then(|| posts[pick % posts.len()].clone())
    };
    // A post whose author stays: taking back and reading expect it there.
    let pick_kept = |pick: usize| {
        let outcomes = outcomes.lock().expect("lock");
        let posts: Vec<&String> = outcomes
            .posts
            .keys()
            .filter(|post| !outcomes.by_leaver(post, users))
            .collect();
        (!posts.is_empty()).then(|| posts[pick % posts.len()].clone())
    };
    match op {
        Op::Post { author, n } => {
            let body = json!({ "title": format!("post {n}"), "content": format!("本文 {n} 🎉") });
            let me = &users[author];
            let key = format!("post-{n}");
            if let Some((status, reply)) = send_keyed(
                api,
                outcomes,
                "POST",
                "/posts",
                Some(me),
                Some(body),
                Some(&key),
            )
            .await
            {
                // A leaver's, after their erasure: 403.
                if status == 403 && is_leaver(users, me) {
                    return;
                }
                assert_eq!(status, 201, "{reply}");
                let id = reply["postId"].as_str().expect("postId").to_owned();
                outcomes.lock().expect("lock").posts.insert(id, me.clone());
                // Its author's list at once: a read of one's own write
                // through GSI1, which a lagging index answers without it
                // (what the proxy counts as hidden), however slow the run.
                let mine = format!("/users/{me}/posts");
                let _ = send(api, outcomes, "GET", &mine, None, None).await;
            }
        }
        Op::Like { liker, pick } => {
            let Some(post) = pick_post(pick) else { return };
            let me = &users[liker];
            let path = format!("/posts/{post}/likes");
            if let Some((status, reply)) = send(api, outcomes, "POST", &path, Some(me), None).await
            {
                let mut outcomes = outcomes.lock().expect("lock");
                if erasure_answer(status, me, &post, users, &outcomes) {
                    return;
                }
                assert!(status == 201 || status == 200, "{status}: {reply}");
                outcomes.likes.entry(post).or_default().insert(me.clone());
            }
        }
        Op::Comment { author, pick, n } => {
            let Some(post) = pick_post(pick) else { return };
            let me = &users[author];
            let path = format!("/posts/{post}/comments");
            let body = json!({ "content": format!("comment {n}") });
            let key = format!("comment-{n}");
            if let Some((status, reply)) = send_keyed(
                api,
                outcomes,
                "POST",
                &path,
                Some(me),
                Some(body),
                Some(&key),
            )
            .await
            {
                let mut outcomes = outcomes.lock().expect("lock");
                if erasure_answer(status, me, &post, users, &outcomes) {
                    return;
                }
                assert_eq!(status, 201, "{reply}");
                let id = reply["commentId"].as_str().expect("commentId").to_owned();
                outcomes.comment_authors.insert(id.clone(), me.clone());
                outcomes.comments.entry(post).or_default().insert(id);
            }
        }
        Op::TakeBack { taker, pick, n } => {
            let Some(post) = pick_kept(pick) else { return };
            let me = &users[taker];
            let likes = format!("/posts/{post}/likes");
            let (answer, unknown) =
                send_tracked(api, outcomes, "POST", &likes, Some(me), None, None).await;
            if let Some((status, reply)) = answer {
                assert!(status == 201 || status == 200, "{status}: {reply}");
            }
            if unknown {
                let maybe = (post.clone(), me.clone());
                outcomes.lock().expect("lock").maybe_likes.insert(maybe);
            }
            // Taking back is idempotent: a retry after a lost answer is 204 too.
            if let Some((status, reply)) =
                send(api, outcomes, "DELETE", &likes, Some(me), None).await
            {
                assert_eq!(status, 204, "{reply}");
            }
            let comments = format!("/posts/{post}/comments");
            let body = json!({ "content": format!("taken back {n}") });
            let key = format!("taken-back-{n}");
            let Some((status, reply)) = send_keyed(
                api,
                outcomes,
                "POST",
                &comments,
                Some(me),
                Some(body),
                Some(&key),
            )
            .await
            else {
                return;
            };
            assert_eq!(status, 201, "{reply}");
            let id = reply["commentId"].as_str().expect("commentId");
            // Every other one by the post's author.
            let post_author = outcomes.lock().expect("lock").posts.get(&post).cloned();
            let deleter = if n % 2 == 0 {
                post_author.as_deref()
            } else {
                None
            }
            .unwrap_or(me);
            let path = format!("{comments}/{id}");
            let (answer, unknown) =
                send_tracked(api, outcomes, "DELETE", &path, Some(deleter), None, None).await;
            if let Some((status, reply)) = answer {
                // A deletion whose answer was lost still answers 204; one
                // sent again after `outcome_unknown` finds the first landed.
                assert!(
                    status == 204 || (unknown && status == 404),
                    "{status} {reply}"
                );
            }
        }
        Op::Rename { user } => {
            let me = &users[user];
            for round in 1..=2 {
                let name = format!("renamed_{user}_{round}");
                let path = format!("/users/{me}");
                let body = json!({ "username": name });
                if let Some((status, reply)) =
                    send(api, outcomes, "PUT", &path, Some(me), Some(body)).await
                {
                    assert_eq!(status, 200, "{reply}");
                    outcomes
                        .lock()
                        .expect("lock")
                        .names
                        .insert(me.clone(), name);
                }
            }
        }
        Op::Leave { user } => {
            let me = &users[user];
            let path = format!("/users/{me}");
            if let Some((status, reply)) =
                send(api, outcomes, "DELETE", &path, Some(me), None).await
            {
                // A second erasure after a lost answer: 204 too.
                assert_eq!(status, 204, "{reply}");
                outcomes.lock().expect("lock").erased.insert(me.clone());
            }
        }
        Op::Read { pick, kind } => {
            let post = pick_kept(pick);
            let path = match (kind, post) {
                (0, _) | (_, None) => "/feed?limit=100".to_owned(),
                (1, Some(post)) => format!("/posts/{post}"),
                (2, Some(post)) => format!("/posts/{post}/comments?limit=100"),
                (_, Some(_)) => format!("/users/{}/posts", users[pick % users.len()]),
            };
            if let Some((status, reply)) = send(api, outcomes, "GET", &path, None, None).await {
                assert_eq!(status, 200, "{path}: {reply}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hostile_dynamodb_loses_nothing_and_leaves_every_copy_exact() {
    // Answers lost to committed writes, plain ones too, three times as
    // often as `Faults::hostile`, and their retries often cancelled.
    // And some transactions commit a second and a half after their attempt
    // was answered 500 (a late commit): the retries are told "in progress".
    let faults = Faults {
        seed: 2026,
        gsi_lag: GSI_LAG,
        lost_response: 0.15,
        replay_cancel: 0.3,
        late_commit: 0.03,
        late_commit_delay: Duration::from_millis(1500),
        ..Faults::hostile()
    };
    let proxy = proxy(faults.clone()).await;
    // The rename fan-out allows GSI1 a little more than its lag.
    let api = TestApi::start_behind(&proxy.url(), Backoff::default(), GSI_LAG * 3 / 2).await;

    // Profiles, concurrently, retried through 503s like everything else.
    let outcomes = Mutex::new(Outcomes::default());
    let ids: Vec<String> = (0..USERS + TAKERS + LEAVERS)
        .map(|i| format!("hostile-{i:02}"))
        .collect();
    futures::stream::iter(ids.iter().enumerate())
        .for_each_concurrent(CONCURRENCY, |(i, id)| {
            let (api, outcomes) = (&api, &outcomes);
            async move {
                let name = format!("user_{i:02}");
                let body = json!({ "username": name });
                let key = format!("profile-{i}");
                let sent = send_keyed(
                    api,
                    outcomes,
                    "POST",
                    "/users",
                    Some(id),
                    Some(body),
                    Some(&key),
                );
                let (status, reply) = sent.await.expect("a profile after retries");
                assert_eq!(status, 201, "{reply}");
                outcomes
                    .lock()
                    .expect("lock")
                    .names
                    .insert(id.clone(), name);
            }
        })
        .await;

    // The fan-out runs alongside, through the same hostile DynamoDB.
    let checkpoint = std::env::temp_dir().join(format!("hostile-{}.json", ulid::Ulid::generate()));
    let fan_out = api.run_fan_out(api.poller_with_checkpoint(&checkpoint));

    let started = Instant::now();
    let mut ops = workload(7);
    let storm_ops = ops.split_off(ops.len() * 4 / 5);
    futures::stream::iter(ops)
        .for_each_concurrent(CONCURRENCY, |op| run(&api, &ids, op, &outcomes))
        .await;
    let busy_day = proxy.stats();
    proxy.set_faults(storm(&faults));
    futures::stream::iter(storm_ops)
        .for_each_concurrent(CONCURRENCY, |op| run(&api, &ids, op, &outcomes))
        .await;
    let elapsed = started.elapsed();
    proxy.set_faults(faults.clone());

    // The late commits still held land (or are refused) before anything is
    // checked: a write of this workload may not arrive after the checks.
    for _ in 0..200 {
        if proxy.late_commits_pending() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(proxy.late_commits_pending(), 0);
    // Drain: the fan-out works on what it has, back at the default rates,
    // then carries on from where it stopped (never from the stream's start,
    // which would apply every record again) on a calm DynamoDB.
    tokio::time::sleep(GSI_LAG * 2).await;
    fan_out.stop().await;
    let injected = proxy.stats();
    println!("stopped the fan-out after {:.1?}", started.elapsed());
    proxy.set_faults(Faults::none());
    let mut poller = api.poller_with_checkpoint(&checkpoint);
    api.settle(&mut poller).await;
    let _ = std::fs::remove_file(&checkpoint);
    println!("drained after {:.1?}", started.elapsed());

    let mut outcomes = outcomes.into_inner().expect("lock");
    assert_eq!(outcomes.erased.len(), LEAVERS, "every erasure answered");
    outcomes.forget_erased();
    let sent: usize = outcomes.statuses.values().sum();
    println!(
        "hostile workload: {sent} requests in {elapsed:.1?}, statuses {:?}, {} abandoned; \
         proxy before the storm: {busy_day}; in all: {injected}",
        outcomes.statuses, outcomes.abandoned
    );
    assert!(
        outcomes.statuses.keys().all(|s| *s < 500 || *s == 503),
        "only 503 among 5xx: {:?}",
        outcomes.statuses
    );
    assert!(
        outcomes.statuses.get(&503).is_some_and(|n| *n > 0),
        "the storm's faults outlasted the retries: {:?}",
        outcomes.statuses
    );
    for (kind, count) in [
        ("transaction_cancel", injected.transaction_cancel),
        ("write_conflict", injected.write_conflict),
        ("throttle", injected.throttle),
        ("lost_response", injected.lost_response),
        ("late_commit", injected.late_commit),
        ("gsi_hidden_items", injected.gsi_hidden_items),
    ] {
        assert!(count > 0, "no {kind} was injected: {injected}");
    }
    // A 503 `unavailable` promised that nothing was written: never broken
    // (creates carry keys, so a retry would have found the write).
    assert_eq!(outcomes.lies, Vec::<String>::new());
    println!("{} answers said outcome_unknown", outcomes.unknown);
    assert!(outcomes.posts.len() > 100, "enough posts to trim the feed");

    // A like answered `outcome_unknown` and then given and taken back may
    // have committed after all, as its answer warned: it counts as given.
    let mut landed_late = 0;
    for item in table_snapshot(&api).await {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        if let (Some("like"), Some(post), Some(user)) =
            (text("type").as_deref(), text("postId"), text("userId"))
            && outcomes.maybe_likes.contains(&(post.clone(), user.clone()))
        {
            landed_late += usize::from(outcomes.likes.entry(post).or_default().insert(user));
        }
    }
    println!("{landed_late} likes answered outcome_unknown landed after all");
    check_table(&api, &outcomes).await;
    check_lists(&api, &outcomes).await;
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

/// Every item the table holds is one a successful request made, with exact
/// counts and the author's latest name.
async fn check_table(api: &TestApi, outcomes: &Outcomes) {
    let items = table_snapshot(api).await;
    let text = |item: &HashMap<String, aws_sdk_dynamodb::types::AttributeValue>, name: &str| {
        item.get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    let number = |item: &HashMap<String, aws_sdk_dynamodb::types::AttributeValue>, name: &str| {
        item.get(name)
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse::<usize>().ok())
    };
    let of_type = |kind: &'static str| items.iter().filter(move |i| text(i, "type") == kind);

    let posts: BTreeSet<String> = of_type("post").map(|i| text(i, "postId")).collect();
    let expected: BTreeSet<String> = outcomes.posts.keys().cloned().collect();
    assert_eq!(posts, expected, "exactly the posts that got 201");

    let mut comments: HashMap<String, BTreeSet<String>> = HashMap::new();
    for item in of_type("comment") {
        comments
            .entry(text(item, "postId"))
            .or_default()
            .insert(text(item, "commentId"));
    }
    assert_eq!(
        comments, outcomes.comments,
        "exactly the comments that got 201"
    );

    let mut likers: HashMap<String, BTreeSet<String>> = HashMap::new();
    for item in of_type("like") {
        let new = likers
            .entry(text(item, "postId"))
            .or_default()
            .insert(text(item, "userId"));
        assert!(new, "one like per user and post");
    }
    assert_eq!(
        likers, outcomes.likes,
        "exactly the likes that were answered"
    );
    // Each like unique by its liker's mark, and no mark without its like.
    let pair = |item: &HashMap<String, aws_sdk_dynamodb::types::AttributeValue>| {
        (text(item, "postId"), text(item, "userId"))
    };
    let marked: BTreeSet<(String, String)> = of_type("liked").map(pair).collect();
    let liked: BTreeSet<(String, String)> = of_type("like").map(pair).collect();
    assert_eq!(marked, liked, "a mark per like");
    assert_eq!(of_type("liked").count(), of_type("like").count());
    // Of an erased user, only the mark, its walk done (and its follower
    // counts emptied, closed until they expire).
    let marks: BTreeSet<String> = of_type("erasure").map(|i| text(i, "userId")).collect();
    assert_eq!(marks, outcomes.erased, "a mark per erased user");
    for user in &outcomes.erased {
        let closed = |i: &&HashMap<String, aws_sdk_dynamodb::types::AttributeValue>| {
            text(i, "type") == "followerCount"
                && number(i, "count") == Some(0)
                && i.contains_key("closed")
                && i.contains_key(blog::keys::EXPIRES_AT)
        };
        let theirs: Vec<_> = items
            .iter()
            .filter(|i| text(i, "userId") == *user)
            .filter(|i| !closed(i))
            .collect();
        assert_eq!(theirs.len(), 1, "{user}: only the mark is left: {theirs:?}");
    }

    for post in of_type("post") {
        let id = text(post, "postId");
        let comments = outcomes.comments.get(&id).map_or(0, BTreeSet::len);
        let likes = outcomes.likes.get(&id).map_or(0, BTreeSet::len);
        assert_eq!(number(post, "commentCount"), Some(comments), "{id}");
        assert_eq!(number(post, "likeCount"), Some(likes), "{id}");
    }
    // Every copy of a username, posts, comments, likes and feed entries
    // alike, is its author's latest.
    for item in &items {
        let kind = text(item, "type");
        if ["post", "comment", "like", "feedEntry"].contains(&kind.as_str()) {
            let user = text(item, "userId");
            assert_eq!(
                Some(&text(item, "username")),
                outcomes.names.get(&user),
                "{kind} {:?}",
                item.get(blog::keys::SK)
            );
        }
    }
}

/// What the API lists agrees with the table: the feed is exactly the newest
/// 100 posts, and each list's copies show exact counts.
async fn check_lists(api: &TestApi, outcomes: &Outcomes) {
    let (status, feed) = api.get("/feed?limit=100").await;
    assert_eq!(status, 200, "{feed}");
    let shown: Vec<String> = feed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| p["postId"].as_str().expect("postId").to_owned())
        .collect();
    let newest: Vec<String> = outcomes.posts.keys().rev().take(100).cloned().collect();
    assert_eq!(shown, newest, "the feed is exactly the newest 100 posts");
    let authors: BTreeSet<&String> = outcomes.posts.values().collect();
    for author in authors {
        let (status, page) = api.get(&format!("/users/{author}/posts?limit=100")).await;
        assert_eq!(status, 200, "{page}");
        for post in page["items"].as_array().expect("items") {
            let id = post["postId"].as_str().expect("postId");
            let comments = outcomes.comments.get(id).map_or(0, BTreeSet::len);
            let likes = outcomes.likes.get(id).map_or(0, BTreeSet::len);
            assert_eq!(post["commentCount"], json!(comments), "GSI1 copy of {id}");
            assert_eq!(post["likeCount"], json!(likes), "GSI1 copy of {id}");
            assert_eq!(post["username"], json!(outcomes.names[author]));
        }
    }
    for entry in feed["items"].as_array().expect("items") {
        let id = entry["postId"].as_str().expect("postId");
        let comments = outcomes.comments.get(id).map_or(0, BTreeSet::len);
        let likes = outcomes.likes.get(id).map_or(0, BTreeSet::len);
        assert_eq!(entry["commentCount"], json!(comments), "feed copy of {id}");
        assert_eq!(entry["likeCount"], json!(likes), "feed copy of {id}");
    }
}
