//! What each request costs, in DynamoDB calls and capacity units as DynamoDB
//! Local reports them (ReturnConsumedCapacity INDEXES). docs/data-model.md
//! states these figures; here they are asserted, and so is the design's point:
//! a read costs the same however much data the table holds.

use serde_json::{Value, json};

use blog::store::items::counter::{HOT_SHARDS, MAX_SHARDS};

use crate::support::TestApi;

/// `(operation, table units, index units)` of one DynamoDB call.
type Call = (String, f64, f64);

/// Runs one request; returns its status and the DynamoDB calls it made.
async fn measure(
    api: &TestApi,
    method: &str,
    path: &str,
    user: Option<&str>,
    body: Option<Value>,
) -> (u16, Vec<Call>) {
    api.meter.take();
    let (status, _) = api.call(method, path, user, body).await;
    (status, taken(api))
}

/// The DynamoDB calls made since the meter was last taken.
fn taken(api: &TestApi) -> Vec<Call> {
    api.meter
        .take()
        .into_iter()
        .map(|c| (c.operation, c.table, c.indexes))
        .collect()
}

fn calls(expected: &[(&str, f64, f64)]) -> Vec<Call> {
    expected
        .iter()
        .map(|(op, t, i)| ((*op).to_owned(), *t, *i))
        .collect()
}

/// What every write request but `POST /users` reads first: the caller's
/// profile and erasure mark, with one strongly consistent Query of their
/// partition (`Requests::writer`); 1 unit, the profile found or the mark.
const WRITER: (&str, f64, f64) = ("Query", 1.0, 0.0);

/// One request and what it must cost.
struct Case<'a> {
    name: &'a str,
    method: &'a str,
    path: String,
    user: Option<&'a str>,
    body: Option<Value>,
    status: u16,
    calls: &'a [(&'a str, f64, f64)],
    /// Makes some of its calls at once (their order not fixed).
    at_once: bool,
}

impl Case<'_> {
    /// The calls in the order given, or in any order for a request that
    /// makes some at once (the home's Query and profile read).
    async fn check(self, api: &TestApi) {
        let (status, mut measured) =
            measure(api, self.method, &self.path, self.user, self.body).await;
        let mut expected = calls(self.calls);
        if self.at_once {
            let order = |a: &Call, b: &Call| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal);
            measured.sort_by(order);
            expected.sort_by(order);
        }
        assert_eq!((status, measured), (self.status, expected), "{}", self.name);
    }
}

#[tokio::test]
async fn every_request_costs_what_the_data_model_says() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let post = api.post(&author, "title", "content").await;
    let other = api.user("other").await;
    let comment = api.comment(&other, &post, "to be deleted").await;
    let (author, other) = (Some(author.as_str()), Some(other.as_str()));
    let write = |name, method, path: String, user, body: Option<Value>, status, calls| Case {
        name,
        method,
        path,
        user,
        body,
        status,
        calls,
        at_once: false,
    };
    let read = |name, path: String, calls| write(name, "GET", path, None, None, 200, calls);
    // The author's profile and erasure mark (one strongly consistent Query
    // of their partition, `Requests::writer`), then one transaction: DynamoDB
    // Local reports 2 table units per transaction item and 4 index units per
    // transaction touching GSI1 (see billed.rs for what DynamoDB bills).
    let profile_then_two_items: &[(&str, f64, f64)] = &[WRITER, ("TransactWriteItems", 4.0, 4.0)];
    let profile_then_three_items: &[(&str, f64, f64)] = &[WRITER, ("TransactWriteItems", 8.0, 4.0)];
    let cases = [
        write(
            "C1 create",
            "POST",
            "/users".into(),
            Some("newbie"),
            Some(json!({ "username": "newbie" })),
            201,
            // Whether an erasure of the same user is still walking.
            &[("GetItem", 1.0, 0.0), ("TransactWriteItems", 4.0, 0.0)],
        ),
        write(
            "C1 rename",
            "PUT",
            format!("/users/{}", other.unwrap_or_default()),
            other,
            Some(json!({ "username": "renamed" })),
            200,
            &[WRITER, ("TransactWriteItems", 4.0, 0.0)],
        ),
        read(
            "Q1",
            format!("/users/{}", author.unwrap_or_default()),
            &[("GetItem", 0.5, 0.0)],
        ),
        write(
            "C2 create",
            "POST",
            "/posts".into(),
            author,
            Some(json!({ "title": "t", "content": "c" })),
            201,
            profile_then_three_items,
        ),
        write(
            "C2 edit",
            "PUT",
            format!("/posts/{post}"),
            author,
            Some(json!({ "title": "t2" })),
            200,
            // The writer, then the post and its content (one Query).
            &[
                WRITER,
                ("Query", 1.0, 0.0),
                ("TransactWriteItems", 4.0, 4.0),
            ],
        ),
        read("Q2", format!("/posts/{post}"), &[("Query", 0.5, 0.0)]),
        read(
            "Q3",
            format!("/users/{}/posts", author.unwrap_or_default()),
            &[("Query", 0.0, 0.5)],
        ),
        write(
            "C3",
            "POST",
            format!("/posts/{post}/comments"),
            author,
            Some(json!({ "content": "c" })),
            201,
            profile_then_two_items,
        ),
        // A page with comments also reads the post item: a post taken back
        // to a draft shows no one what it had; with another's comment, the
        // author's blocks (none: Local reports 0 for an empty Query, DynamoDB
        // bills 0.5).
        read(
            "Q4",
            format!("/posts/{post}/comments"),
            &[
                ("Query", 0.5, 0.0),
                ("GetItem", 0.5, 0.0),
                ("Query", 0.0, 0.0),
            ],
        ),
        write(
            "C4",
            "POST",
            format!("/posts/{post}/likes"),
            author,
            None,
            201,
            profile_then_three_items,
        ),
        write(
            "C4 repeated",
            "POST",
            format!("/posts/{post}/likes"),
            author,
            None,
            200,
            &[
                WRITER,
                ("TransactWriteItems", 0.0, 0.0),
                ("GetItem", 1.0, 0.0),
                ("GetItem", 1.0, 0.0),
            ],
        ),
        read(
            "Q5",
            format!("/posts/{post}/likes"),
            &[("Query", 0.5, 0.0), ("GetItem", 0.5, 0.0)],
        ),
        read("Q6", "/feed".into(), &[("Query", 0.0, 0.0)]),
        read(
            "Q1 by name",
            "/users?username=AUTHOR".into(),
            // The name's claim, then the profile (the follow counts).
            &[("GetItem", 0.5, 0.0), ("GetItem", 0.5, 0.0)],
        ),
        // The writer, the followed profile (strongly), the caller's follow
        // of them (strongly: none), the mark of a block of them (strongly:
        // none), the backfill (the author's newest posts
        // from GSI1, keys only, into the caller's home), then the follow,
        // the caller's count, the follower entry and its shard's count (not
        // closed by an erasure) and the check of the block's mark (Local
        // reports its flat rate, unchanged) in one transaction: nothing in
        // the followed user's own partition.
        write(
            "follow",
            "POST",
            format!("/users/{}/followers", author.unwrap_or_default()),
            other,
            None,
            201,
            &[
                WRITER,
                ("GetItem", 1.0, 0.0),
                ("GetItem", 1.0, 0.0),
                ("GetItem", 1.0, 0.0),
                ("Query", 0.0, 0.5),
                // The author's two posts (this test's and C2 create's).
                ("BatchWriteItem", 2.0, 0.0),
                ("TransactWriteItems", 8.0, 4.0),
            ],
        ),
        // Followed again: the same reads, the follow found; nothing written.
        write(
            "follow again",
            "POST",
            format!("/users/{}/followers", author.unwrap_or_default()),
            other,
            None,
            200,
            &[WRITER, ("GetItem", 1.0, 0.0), ("GetItem", 1.0, 0.0)],
        ),
        // One Query of GSI1, then the followed user's profile and the
        // user's own.
        read(
            "following",
            format!("/users/{}/following", other.unwrap_or_default()),
            &[("Query", 0.0, 0.5), ("BatchGetItem", 1.0, 0.0)],
        ),
        Case {
            at_once: true,
            ..write(
                "home",
                "GET",
                "/home".into(),
                other,
                None,
                200,
                // The two entries and, at once, the caller's profile (whom
                // they pull: no one), then the two posts, the caller's follow
                // of their author and the author's profile (0.5 each).
                &[
                    ("Query", 0.5, 0.0),
                    ("GetItem", 0.5, 0.0),
                    ("BatchGetItem", 2.0, 0.0),
                ],
            )
        },
        // The followers list: below (its shards are read at once).
        write(
            "unfollow",
            "DELETE",
            format!("/users/{}/followers", author.unwrap_or_default()),
            other,
            None,
            204,
            // The writer, the follow, then one transaction of four items.
            &[
                WRITER,
                ("GetItem", 1.0, 0.0),
                ("TransactWriteItems", 8.0, 4.0),
            ],
        ),
        // The writer, the marker, then one transaction of three items.
        write(
            "C4 unlike",
            "DELETE",
            format!("/posts/{post}/likes"),
            author,
            None,
            204,
            &[
                WRITER,
                ("GetItem", 1.0, 0.0),
                ("TransactWriteItems", 8.0, 4.0),
            ],
        ),
        // No mark: the post, for a 404 if it is missing (its likes are
        // marked: no marker beside a like to look for).
        write(
            "C4 unlike, no like",
            "DELETE",
            format!("/posts/{post}/likes"),
            author,
            None,
            204,
            &[WRITER, ("GetItem", 1.0, 0.0), ("GetItem", 1.0, 0.0)],
        ),
        // The writer, the comment, the post (the caller is the post's
        // author, not the comment's), then one transaction of two items.
        write(
            "C3 delete",
            "DELETE",
            format!("/posts/{post}/comments/{comment}"),
            author,
            None,
            204,
            &[
                WRITER,
                ("GetItem", 1.0, 0.0),
                ("GetItem", 1.0, 0.0),
                ("TransactWriteItems", 4.0, 4.0),
            ],
        ),
        // The writer, the blocked profile (strongly), the caller's block of
        // them (strongly: none), then the block, its mark and the caller's
        // count in one transaction; then each way the follow (strongly:
        // none, so no unfollow).
        write(
            "block",
            "PUT",
            format!("/blocks/{}", other.unwrap_or_default()),
            author,
            None,
            201,
            &[
                WRITER,
                ("GetItem", 1.0, 0.0),
                ("GetItem", 1.0, 0.0),
                ("TransactWriteItems", 8.0, 4.0),
                ("GetItem", 1.0, 0.0),
                ("GetItem", 1.0, 0.0),
            ],
        ),
        // One Query of GSI1, then the blocked user's profile and the
        // caller's own.
        write(
            "blocks",
            "GET",
            "/blocks".into(),
            author,
            None,
            200,
            &[("Query", 0.0, 0.5), ("BatchGetItem", 1.0, 0.0)],
        ),
        // The writer, the block, then one transaction of three items.
        write(
            "unblock",
            "DELETE",
            format!("/blocks/{}", other.unwrap_or_default()),
            author,
            None,
            204,
            &[
                WRITER,
                ("GetItem", 1.0, 0.0),
                ("TransactWriteItems", 8.0, 4.0),
            ],
        ),
        // The writer, the post (for 404 and 403), then the post item alone
        // (and its GSI1 entry); its content and the rest go in the fan-out.
        write(
            "C2 delete",
            "DELETE",
            format!("/posts/{post}"),
            author,
            None,
            204,
            &[WRITER, ("GetItem", 1.0, 0.0), ("DeleteItem", 1.0, 1.0)],
        ),
        // The writer (the profile), then the profile, the name's claim and
        // the erasure mark in one transaction; the rest goes in the fan-out.
        write(
            "erase user",
            "DELETE",
            "/users/newbie".into(),
            Some("newbie"),
            None,
            204,
            &[WRITER, ("TransactWriteItems", 4.0, 0.0)],
        ),
        // Erased already: the writer finds the mark and no profile.
        write(
            "erase user again",
            "DELETE",
            "/users/newbie".into(),
            Some("newbie"),
            None,
            204,
            &[WRITER],
        ),
        // Any write of an erased account: the writer, and nothing else
        // (nothing of the target is read).
        write(
            "erased: edit",
            "PUT",
            format!("/posts/{post}"),
            Some("newbie"),
            Some(json!({ "title": "t3" })),
            403,
            &[WRITER],
        ),
        // A caller who never made a profile: the writer finds nothing
        // (DynamoDB Local reports no units for it; the service bills a
        // strongly consistent Query 1 RCU however little it finds).
        write(
            "no profile: post",
            "POST",
            "/posts".into(),
            Some("nobody"),
            Some(json!({ "title": "t", "content": "c" })),
            403,
            &[("Query", 0.0, 0.0)],
        ),
        write(
            "erased: comment",
            "POST",
            format!("/posts/{post}/comments"),
            Some("newbie"),
            Some(json!({ "content": "c" })),
            403,
            &[WRITER],
        ),
    ];
    for case in cases {
        case.check(&api).await;
    }

    // The followers list: a Query of the user's follower windows (the
    // fan-out's copy, newest first: the one window there is, so no second
    // Query), then one BatchGetItem of the user's profile and the page's
    // follower's (0.5 each). No shard is read.
    let (follower, followed) = (other.unwrap_or_default(), author.unwrap_or_default());
    api.follow_user(follower, followed).await;
    let mut poller = api.poller();
    api.settle(&mut poller).await;
    let (status, made) = measure(
        &api,
        "GET",
        &format!("/users/{}/followers", author.unwrap_or_default()),
        None,
        None,
    )
    .await;
    let expected = calls(&[("Query", 0.5, 0.0), ("BatchGetItem", 1.0, 0.0)]);
    assert_eq!((status, made), (200, expected), "followers");
}

/// A post, an edit of its content and a comment that mention users: one
/// BatchGetItem of the names' claims before the transaction, eventually
/// consistent, 0.5 a name found (DynamoDB Local reports nothing for a name
/// no one holds, which DynamoDB bills 0.5 too); an edit reads only the
/// names the post did not hold (an edit of the content writes the content
/// and the post: 8 + 4 on Local). Without a mention, no such call (the
/// figures above).
#[tokio::test]
async fn mentions_cost_one_batch_get_of_their_names() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    for name in ["ann", "bob", "cyd"] {
        api.user(name).await;
    }
    let post = api.post(&author, "title", "for @ann").await;
    let author = Some(author.as_str());
    let write = |name, method, path: String, body: Value, status, calls| Case {
        name,
        method,
        path,
        user: author,
        body: Some(body),
        status,
        calls,
        at_once: false,
    };
    let cases = [
        write(
            "C2 create, mentioning two users and no one",
            "POST",
            "/posts".into(),
            json!({ "title": "t", "content": "@ann @Bob @ghost" }),
            201,
            &[
                WRITER,
                ("BatchGetItem", 1.0, 0.0),
                // Whether any of them blocks the author: their marks in the
                // author's partition (none: DynamoDB Local reports 0).
                ("BatchGetItem", 0.0, 0.0),
                ("TransactWriteItems", 8.0, 4.0),
            ],
        ),
        write(
            "C2 edit, a name new to the post",
            "PUT",
            format!("/posts/{post}"),
            json!({ "content": "for @ann and @cyd" }),
            200,
            &[
                WRITER,
                ("Query", 1.0, 0.0),
                ("BatchGetItem", 0.5, 0.0),
                ("BatchGetItem", 0.0, 0.0),
                ("TransactWriteItems", 8.0, 4.0),
            ],
        ),
        write(
            "C2 edit, names the post holds",
            "PUT",
            format!("/posts/{post}"),
            json!({ "content": "@CYD, for @ann" }),
            200,
            &[
                WRITER,
                ("Query", 1.0, 0.0),
                ("TransactWriteItems", 8.0, 4.0),
            ],
        ),
        write(
            "C3, mentioning one",
            "POST",
            format!("/posts/{post}/comments"),
            json!({ "content": "thanks @bob" }),
            201,
            &[
                WRITER,
                ("BatchGetItem", 0.5, 0.0),
                ("BatchGetItem", 0.0, 0.0),
                // The post's author, once a process (whom blocks refuse).
                ("GetItem", 0.5, 0.0),
                ("TransactWriteItems", 4.0, 4.0),
            ],
        ),
        write(
            "C3, an address",
            "POST",
            format!("/posts/{post}/comments"),
            json!({ "content": "mail bob@example.com" }),
            201,
            &[WRITER, ("TransactWriteItems", 4.0, 4.0)],
        ),
    ];
    for case in cases {
        case.check(&api).await;
    }
}

/// The same user, post, comments and likes, in a table that holds only them
/// or also `crowd` other users' activity.
async fn scenario(crowd: usize) -> (TestApi, String, String) {
    let api = TestApi::start().await;
    for i in 0..crowd {
        let user = api.user(&format!("crowd{i:04}")).await;
        for p in 0..3 {
            let post = api.post(&user, "crowd post", "crowd content").await;
            if p == 0 {
                api.comment(&user, &post, "x").await;
                api.like(&user, &post).await;
            }
        }
    }
    let target = api.user("target").await;
    let mut post = String::new();
    for _ in 0..3 {
        post = api.post(&target, "title", "content").await;
    }
    for i in 0..3 {
        let fan = api.user(&format!("fan{i}")).await;
        api.comment(&fan, &post, "nice").await;
        api.like(&fan, &post).await;
    }
    (api, target, post)
}

#[tokio::test]
async fn reads_cost_the_same_however_large_the_table() {
    let ((small, small_user, small_post), (large, large_user, large_post)) =
        tokio::join!(scenario(0), scenario(25));
    let reads = |user: &str, post: &str| {
        vec![
            format!("/users/{user}"),
            format!("/posts/{post}"),
            format!("/users/{user}/posts"),
            format!("/posts/{post}/comments"),
            format!("/posts/{post}/likes"),
            "/feed".to_owned(),
        ]
    };
    for (a, b) in reads(&small_user, &small_post)
        .iter()
        .zip(reads(&large_user, &large_post))
    {
        let in_small = measure(&small, "GET", a, None, None).await;
        let in_large = measure(&large, "GET", &b, None, None).await;
        assert_eq!(in_small.0, 200, "{a}");
        // One call; a page of comments or likes also reads the post item
        // (is it a draft?), and a page of comments by others than the
        // post's author the author's blocks (none here).
        let calls = if a.ends_with("/comments") {
            3
        } else if a.ends_with("/likes") {
            2
        } else {
            1
        };
        assert_eq!(in_small.1.len(), calls, "{a}: one call");
        assert_eq!(in_small, in_large, "{a} vs {b}");
    }
}

/// The fan-out's DynamoDB calls while the stream settles, without the poller's
/// own DescribeTable, in a canonical order: records of different items (two
/// posts a rename touched) may reach the fan-out in either order.
async fn fan_out_calls(
    api: &TestApi,
    poller: &mut local::stream_poller::StreamPoller,
) -> Vec<Call> {
    api.meter.take();
    api.settle(poller).await;
    let calls = api
        .meter
        .take()
        .into_iter()
        .filter(|c| c.operation != "DescribeTable")
        .map(|c| (c.operation, c.table, c.indexes))
        .collect::<Vec<_>>();
    sorted(calls)
}

fn sorted(mut calls: Vec<Call>) -> Vec<Call> {
    calls.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    calls
}

#[tokio::test]
async fn the_fan_out_costs_what_the_data_model_says() {
    // A feed of one post, so that the second post trims the first.
    let api = TestApi::start_with_feed_capacity(1).await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        sorted(calls(&[])),
        "new users copy nothing"
    );

    api.post(&author, "first", "content").await;
    // The author's profile (is the copied username current? one
    // BatchGetItem, strong, of the batch's authors), the feed's floor and
    // count, the entry, the count again, the post (is it still there, or was
    // it deleted before this record came?), and the author's eight follower
    // shards' counts (one BatchGetItem, strong: none has followers, so no
    // delivery starts; DynamoDB Local reports no units for items not found,
    // the service bills 1 RCU each).
    let enter = [
        ("BatchGetItem", 0.0, 0.0),
        ("BatchGetItem", 1.0, 0.0),
        ("GetItem", 1.0, 0.0),
        ("PutItem", 1.0, 0.0),
        ("UpdateItem", 1.0, 0.0),
        ("GetItem", 1.0, 0.0),
    ];
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        sorted(calls(&enter)),
        "a post enters the feed"
    );
    let post = api.post(&author, "second", "content").await;
    // Past the capacity (1, no reserve or slack at that size): the trim reads
    // the feed, raises the floor and deletes the oldest.
    let enter_and_trim = [
        ("BatchGetItem", 0.0, 0.0),
        ("BatchGetItem", 1.0, 0.0),
        ("GetItem", 1.0, 0.0),
        ("PutItem", 1.0, 0.0),
        ("UpdateItem", 1.0, 0.0),
        ("GetItem", 1.0, 0.0),
        ("Query", 1.0, 0.0),
        ("UpdateItem", 1.0, 0.0),
        ("DeleteItem", 1.0, 0.0),
    ];
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        sorted(calls(&enter_and_trim)),
        "and trims it"
    );

    // The liker's profile (the batch's authors, one BatchGetItem), then the
    // feed copy of the post's new count; and the author's notification: the
    // post read (eventually: its author), then the likes group read
    // (strongly) and its actors written with its GSI1 place, or the
    // comment's note put with its GSI1 entry.
    let refresh = [("BatchGetItem", 1.0, 0.0), ("UpdateItem", 1.0, 0.0)];
    let liked = [
        ("GetItem", 0.5, 0.0),
        ("GetItem", 1.0, 0.0),
        ("UpdateItem", 1.0, 1.0),
    ];
    api.like(&fan, &post).await;
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        sorted(calls(&[&refresh[..], &liked[..]].concat())),
        "a like refreshes the feed copy and tells the author"
    );
    let commented = [("GetItem", 0.5, 0.0), ("PutItem", 1.0, 1.0)];
    api.comment(&fan, &post, "c").await;
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        sorted(calls(&[&refresh[..], &commented[..]].concat())),
        "so does a comment"
    );

    // A rename: where an earlier invocation left the walk (none) and whether
    // a newer rename exists (a strongly consistent GetItem each); one GSI1
    // page, one update per item (its GSI1 copy too), and for each post still
    // in the feed, one refresh. Then the second pass over what was written
    // just before the rename, one Query per kind of item (posts, drafts,
    // comments, likes): with GSI1 as
    // synchronous as DynamoDB Local's (a lag bound of zero), nothing. Then
    // the walk's place saved as done (no page was saved: one page is the
    // last).
    let (status, reply) = api.change_username(&fan, &fan, "renamed").await;
    assert_eq!(status, 200, "{reply}");
    // (DynamoDB Local reports no units for a Query that finds nothing; the
    // service bills it 0.5.)
    let fan_items = [
        ("GetItem", 1.0, 0.0),
        ("GetItem", 1.0, 0.0),
        ("Query", 0.0, 0.5),
        ("UpdateItem", 1.0, 1.0),
        ("UpdateItem", 1.0, 1.0),
        ("Query", 0.0, 0.0),
        ("Query", 0.0, 0.0),
        ("Query", 0.0, 0.0),
        ("Query", 0.0, 0.0),
        ("PutItem", 1.0, 0.0),
    ];
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        sorted(calls(&fan_items)),
        "a like and a comment"
    );
    api.rename(&author, "author2").await;
    // The trimmed post's refresh fails its condition (Local reports no units
    // for it; DynamoDB charges a failed conditional write 1 WCU).
    let author_items = [
        ("GetItem", 1.0, 0.0),
        ("GetItem", 1.0, 0.0),
        ("Query", 0.0, 0.5),
        ("UpdateItem", 1.0, 1.0),
        ("UpdateItem", 1.0, 1.0),
        ("UpdateItem", 0.0, 0.0),
        ("UpdateItem", 1.0, 0.0),
        ("Query", 0.0, 0.0),
        ("Query", 0.0, 0.0),
        ("Query", 0.0, 0.0),
        ("Query", 0.0, 0.0),
        ("PutItem", 1.0, 0.0),
    ];
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        sorted(calls(&author_items)),
        "two posts, one in the feed"
    );

    // A deletion: the feed entry out and the feed's count down; then one page
    // of the partition's keys, a delete per item (the post's content, the
    // like and its GSI1 entry, its marker, the comment and its GSI1 entry),
    // and a last page that finds nothing. Its author's notifications: the
    // post's two groups deleted (one batch: the likes group and its GSI1
    // entry, and the comments group a hot post would have), a page of its
    // comments' notes and their batch (the one note and its GSI1 entry);
    // the like's and the comment's REMOVEs read the post (once a batch:
    // eventually, then strongly, as it is not found) and find it gone.
    let (status, reply) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204, "{reply}");
    let deletion = [
        ("BatchWriteItem", 3.0, 1.0),
        ("Query", 0.5, 0.0),
        ("BatchWriteItem", 1.0, 1.0),
        ("GetItem", 0.5, 0.0),
        ("GetItem", 1.0, 0.0),
        ("DeleteItem", 1.0, 0.0),
        ("UpdateItem", 1.0, 0.0),
        ("Query", 1.0, 0.0),
        ("DeleteItem", 1.0, 0.0),
        ("DeleteItem", 1.0, 1.0),
        ("DeleteItem", 1.0, 0.0),
        ("DeleteItem", 1.0, 1.0),
        ("Query", 0.0, 0.0),
    ];
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        sorted(calls(&deletion)),
        "a post deleted"
    );
}

/// A hot post (`blog::store::hot`): what the switch costs once, and what
/// each request on it costs after (docs/data-model.md, "A hot post").
#[tokio::test]
async fn a_hot_post_costs_what_the_data_model_says() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("author").await;
    let post = api.post(&author, "title", "content").await;
    let early = api.user("early").await;
    api.like(&early, &post).await;
    let fan = api.user("fan").await;
    fan_out_calls(&api, &mut poller).await;

    // The switch writes one small item at a time (the post's partition is
    // the one DynamoDB is refusing writes in): the post closed (one
    // UpdateItem); the 16 shards' counters, each in its shard, their group
    // counter (in a partition of its own), and the likes pointer and
    // the comments pointer;
    // its likes are marked (`likersMoved` since its creation, in the post as
    // the close found it: the early like put its mark), so nothing is moved
    // nor read; then the post opened hot (one UpdateItem).
    api.meter.take();
    let id = crate::support::post_id(&post);
    api.app.store.requests().make_hot(&id).await.expect("hot");
    let switch = taken(&api);
    let counters = HOT_SHARDS;
    let groups = blog::store::items::counter::ShardGroupItem::groups_of(0..counters).count();
    assert_eq!(groups, 1);
    let mut expected = vec![("PutItem", 1.0, 0.0); usize::from(counters) + groups];
    expected.extend([("UpdateItem", 1.0, 0.0); 4]);
    assert_eq!(sorted(switch), sorted(calls(&expected)));
    // The fan-out finds the switch finished: the post's MODIFYs (closed,
    // opened) coalesce, and the last
    // (finished) refreshes its feed entry, which holds that version already
    // (a failed condition: 0 units).
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        calls(&[("UpdateItem", 0.0, 0.0)])
    );

    let (author, fan, early) = (
        Some(author.as_str()),
        Some(fan.as_str()),
        Some(early.as_str()),
    );
    let likes = format!("/posts/{post}/likes");
    let write = |name, method, path: String, user, body: Option<Value>, status, calls| Case {
        name,
        method,
        path,
        user,
        body,
        status,
        calls,
        at_once: false,
    };
    // The liker's mark, the like and the shard's counter in one
    // transaction: nothing read, nothing written in the post's partition.
    const THREE: (&str, f64, f64) = ("TransactWriteItems", 8.0, 4.0);
    let cases = [
        write(
            "hot C4",
            "POST",
            likes.clone(),
            fan,
            None,
            201,
            &[WRITER, THREE][..],
        ),
        write(
            "hot C4 repeated: the liker's mark, then the like it names",
            "POST",
            likes.clone(),
            fan,
            None,
            200,
            &[
                WRITER,
                ("TransactWriteItems", 0.0, 0.0),
                ("GetItem", 1.0, 0.0),
                ("GetItem", 1.0, 0.0),
            ],
        ),
        write(
            "hot C4 by a user who liked while it was quiet",
            "POST",
            likes.clone(),
            early,
            None,
            200,
            // Their like put its mark: as any repeated like.
            &[
                WRITER,
                ("TransactWriteItems", 0.0, 0.0),
                ("GetItem", 1.0, 0.0),
                ("GetItem", 1.0, 0.0),
            ],
        ),
        write(
            "hot C3: the comment and its shard's counter",
            "POST",
            format!("/posts/{post}/comments"),
            author,
            Some(json!({"content": "c"})),
            201,
            &[WRITER, ("TransactWriteItems", 8.0, 4.0)],
        ),
        write(
            "hot C4 unlike: the liker's mark, one transaction",
            "DELETE",
            likes.clone(),
            fan,
            None,
            204,
            &[WRITER, ("GetItem", 1.0, 0.0), THREE],
        ),
        write(
            "hot C4 unlike of a like given while quiet: its mark and the like, counted down on the post",
            "DELETE",
            likes.clone(),
            early,
            None,
            204,
            &[
                WRITER,
                ("GetItem", 1.0, 0.0),
                ("TransactWriteItems", 8.0, 4.0),
            ],
        ),
        write(
            "hot Q2: one Query, as a quiet post's",
            "GET",
            format!("/posts/{post}"),
            None,
            None,
            200,
            &[("Query", 0.5, 0.0)],
        ),
    ];
    for case in cases {
        case.check(&api).await;
    }

    // Q5: the post's partition (the pointer first), then each shard, one
    // Query each; DynamoDB Local reports 0 for an empty one.
    let late = api.user("late").await;
    api.like(&late, &post).await;
    let (status, q5) = measure(&api, "GET", &likes, None, None).await;
    // This process knows the post is hot (it liked it) and the fan-out has
    // made no copy of its first page yet: one GetItem finds none (0.5),
    // then the merge (store::first_pages).
    let mut expected = vec![
        ("GetItem", 0.5, 0.0),
        ("Query", 0.5, 0.0),
        ("Query", 0.5, 0.0),
        ("GetItem", 0.5, 0.0),
    ];
    expected.extend(std::iter::repeat_n(
        ("Query", 0.0, 0.0),
        usize::from(HOT_SHARDS) - 1,
    ));
    assert_eq!((status, sorted(q5)), (200, sorted(calls(&expected))));

    // The fan-out of one hot like: the liker's profile (the INSERT rule,
    // one BatchGetItem of the batch's authors);
    // its group counter read and its shard's counts added onto it; then the
    // group's MODIFY: the post read and the group's counts added (the post
    // and its GSI1 entry); then the post's MODIFY refreshes its feed copy. The batch's notification:
    // the post read (eventually: its author), the author's likes group
    // read (strongly) and its actors written, its GSI1 place moved (2).
    // And the first-pages step: the copy of the likes' first page read
    // (eventually); older than a second (its `madeAt` set back here), it is
    // made again: the merge, strongly consistent (the post's partition and
    // each shard), with the post's author from the process's memory (the
    // like met it), put in a transaction with a check of the likes
    // pointer.
    fan_out_calls(&api, &mut poller).await;
    let copy = blog::store::items::first_page::FirstPageItem::key_of(
        &crate::support::post_id(&post),
        blog::store::items::first_page::PageList::Likes,
    );
    let store = &api.app.store;
    store
        .client()
        .update_item()
        .table_name(store.table())
        .set_key(Some(copy.item()))
        .update_expression("SET madeAt = :old")
        .expression_attribute_values(
            ":old",
            aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
        )
        .send()
        .await
        .expect("an old copy");
    let another = api.user("another").await;
    api.like(&another, &post).await;
    // The merge reads 1 RCU of the post's partition and of each shard a
    // like is in (`late`'s and `another`'s: one shard or two, as their ids
    // hash), nothing of the others.
    let liked_shards: std::collections::BTreeSet<u8> = [&late, &another]
        .into_iter()
        .map(|who| {
            let id = crate::support::user_id(who);
            blog::store::items::counter::liker_shard(&id, HOT_SHARDS)
        })
        .collect();
    let mut expected = vec![
        ("BatchGetItem", 1.0, 0.0),
        ("GetItem", 1.0, 0.0),
        ("GetItem", 1.0, 0.0),
        ("UpdateItem", 1.0, 0.0),
        ("UpdateItem", 1.0, 1.0),
        ("UpdateItem", 1.0, 0.0),
        ("GetItem", 0.5, 0.0),
        ("GetItem", 1.0, 0.0),
        ("UpdateItem", 1.0, 2.0),
        ("BatchGetItem", 0.5, 0.0),
        ("Query", 1.0, 0.0),
        // Local's flat rate: 2 for the check, 2 for the put (billed: 2 and
        // 2 × the copy's KB).
        ("TransactWriteItems", 4.0, 0.0),
    ];
    expected.extend(std::iter::repeat_n(("Query", 1.0, 0.0), liked_shards.len()));
    expected.extend(std::iter::repeat_n(
        ("Query", 0.0, 0.0),
        usize::from(HOT_SHARDS) - liked_shards.len(),
    ));
    assert_eq!(
        fan_out_calls(&api, &mut poller).await,
        sorted(calls(&expected))
    );

    // A widening reads nothing of the post's partition (it may be at its
    // read limit with its readers): its first shard's counter (strongly:
    // the post is not deleted), then the counters of the new shards and of
    // the next widening's where absent (each in its own shard, with their
    // groups), the two pointers and the post, each conditioned on the
    // shards it must have.
    api.meter.take();
    let requests = api.app.store.requests();
    assert_eq!(
        requests.widen(&id, HOT_SHARDS).await.expect("widen"),
        blog::store::items::counter::MAX_SHARDS
    );
    let widening = taken(&api);
    // (Those the switch made already fail their condition: 0 units on
    // Local, 1 WCU billed.)
    let made = blog::store::items::counter::counters_made(MAX_SHARDS);
    let groups_of = blog::store::items::counter::ShardGroupItem::groups_of;
    let had = |range: std::ops::Range<u8>| {
        let all = groups_of(range.clone()).count();
        let old = groups_of(range).filter(|g| groups_of(0..counters).any(|o| o == *g));
        let old = old.count();
        (all - old, old)
    };
    let (new_groups, old_groups) = had(HOT_SHARDS..made);
    let mut expected = vec![("PutItem", 1.0, 0.0); usize::from(made - counters) + new_groups];
    expected.extend(vec![
        ("PutItem", 0.0, 0.0);
        usize::from(counters - HOT_SHARDS) + old_groups
    ]);
    expected.extend([("UpdateItem", 1.0, 0.0); 3]);
    expected.push(("GetItem", 1.0, 0.0));
    assert_eq!(sorted(widening), sorted(calls(&expected)));
}
