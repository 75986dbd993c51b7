//! `Idempotency-Key` on the creating writes (`POST /users`, `POST /posts`,
//! `POST /posts/{id}/comments`): a retry with the same key gets the first
//! answer and creates nothing, whatever happened to the first
//! (`blog::store::idempotency`).

use std::time::Duration;

use blog::store::Backoff;
use hostile::Faults;
use serde_json::{Value, json};

use crate::support::{TestApi, behind_proxy, proxy, table_snapshot};

/// The answer to a request sent as `user` with `Idempotency-Key: key`, and
/// whether it says it was given again.
async fn keyed(
    api: &TestApi,
    method: &str,
    path: &str,
    user: &str,
    key: Option<&str>,
    body: &Value,
) -> (u16, Value, bool) {
    api.call_keyed(method, path, Some(user), key, Some(body))
        .await
}

/// The three creating routes, for `author` (with a profile) and `newcomer`
/// (without one) on `post`: method, path, caller, body.
fn creates<'a>(
    author: &'a str,
    newcomer: &'a str,
    post: &str,
) -> Vec<(&'static str, String, &'a str, Value)> {
    vec![
        (
            "POST",
            "/users".to_owned(),
            newcomer,
            json!({ "username": "newcomer" }),
        ),
        (
            "POST",
            "/posts".to_owned(),
            author,
            json!({ "title": "t", "content": "long text" }),
        ),
        (
            "POST",
            format!("/posts/{post}/comments"),
            author,
            json!({ "content": "a comment" }),
        ),
    ]
}

/// What each route created: the users, the author's posts, the post's
/// comments.
async fn counts(api: &TestApi, author: &str, post: &str) -> (usize, usize, usize) {
    let users = table_snapshot(api)
        .await
        .iter()
        .filter(|item| {
            item.get("type")
                .and_then(|t| t.as_s().ok())
                .is_some_and(|t| t == "user")
        })
        .count();
    let (_, posts) = api.user_posts(author).await;
    let (_, comments) = api.post_comments(post).await;
    let len = |v: &Value| v["items"].as_array().map_or(0, Vec::len);
    (users, len(&posts), len(&comments))
}

#[tokio::test]
async fn a_retry_with_the_same_key_gets_the_first_answer_and_creates_nothing() {
    let api = TestApi::start().await;
    let author = api.user("keyed").await;
    let post = api.post(&author, "p", "c").await;
    let newcomer = "user-newcomer-1".to_owned();
    for (i, (method, path, user, body)) in
        creates(&author, &newcomer, &post).into_iter().enumerate()
    {
        let key = format!("key-{i}");
        let first = keyed(&api, method, &path, user, Some(&key), &body).await;
        assert_eq!((first.0, first.2), (201, false), "{path}: {}", first.1);
        let before = table_snapshot(&api).await;
        // Fields in another order are the same request.
        let reordered: Value = serde_json::from_str(&body.to_string()).expect("json");
        let again = keyed(&api, method, &path, user, Some(&key), &reordered).await;
        assert_eq!(
            again,
            (201, first.1.clone(), true),
            "{path}: the first answer again"
        );
        assert_eq!(
            table_snapshot(&api).await,
            before,
            "{path}: nothing written"
        );
    }
    assert_eq!(counts(&api, &author, &post).await, (2, 2, 1));

    // Without a key, as before: a second post is a second post, a second
    // profile is refused.
    let (status, _) = api
        .create_post(&author, json!({"title": "t", "content": "long text"}))
        .await;
    assert_eq!(status, 201);
    let (status, body) = api.sign_up(&newcomer, "newcomer").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("profile_exists"))
    );
}

#[tokio::test]
async fn a_key_is_the_callers_own_and_names_one_request() {
    let api = TestApi::start().await;
    let author = api.user("one").await;
    let other = api.user("other").await;
    let post = api.post(&author, "p", "c").await;
    let body = json!({ "title": "t", "content": "c" });
    let (status, first, _) = keyed(&api, "POST", "/posts", &author, Some("k"), &body).await;
    assert_eq!(status, 201);

    // The same key for another body, or another route: 422, nothing written.
    let before = table_snapshot(&api).await;
    let changed = json!({ "title": "t", "content": "other" });
    let comment = format!("/posts/{post}/comments");
    for (path, body) in [
        ("/posts", &changed),
        (comment.as_str(), &json!({"content": "c"})),
    ] {
        let (status, reply, _) = keyed(&api, "POST", path, &author, Some("k"), body).await;
        assert_eq!(
            (status, reply["error"]["code"].as_str()),
            (422, Some("idempotency_key_reused")),
            "{path}: {reply}"
        );
    }
    assert_eq!(table_snapshot(&api).await, before);

    // Another caller's same key is theirs.
    let (status, theirs, replayed) = keyed(&api, "POST", "/posts", &other, Some("k"), &body).await;
    assert_eq!((status, replayed), (201, false));
    assert_ne!(theirs["postId"], first["postId"]);

    // Keys are bounded: 400, nothing written.
    let before = table_snapshot(&api).await;
    for bad in ["has space", "a#b", &"k".repeat(65)] {
        let (status, reply, _) = keyed(&api, "POST", "/posts", &author, Some(bad), &body).await;
        assert_eq!(
            (status, reply["error"]["code"].as_str()),
            (400, Some("bad_idempotency_key")),
            "{bad:?}"
        );
    }
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn a_replay_shows_the_content_as_it_is_and_a_deleted_post_is_gone() {
    let api = TestApi::start().await;
    let author = api.user("replayer").await;
    let content = "x".repeat(5_000);
    let body = json!({ "title": "long", "content": content });
    let (status, first, _) = keyed(&api, "POST", "/posts", &author, Some("long"), &body).await;
    assert_eq!(status, 201);
    let (_, again, replayed) = keyed(&api, "POST", "/posts", &author, Some("long"), &body).await;
    assert!(replayed);
    assert_eq!(again, first, "the content read back from the post");
    let post = first["postId"].as_str().expect("id").to_owned();
    let (status, _) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204);
    let (status, reply, _) = keyed(&api, "POST", "/posts", &author, Some("long"), &body).await;
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
}

/// Retries that give up within half a second; no resolution of unknown
/// outcomes, so that the request answers 503 while its write is held.
fn impatient() -> Backoff {
    Backoff {
        attempts: 4,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(50),
        budget: Duration::from_millis(300),
        resolve: Duration::ZERO,
    }
}

/// After a lost answer, a late commit and a plain 503, the client's retry
/// with its key ends with exactly one of what it asked for.
#[tokio::test]
async fn retrying_with_the_key_after_any_failure_creates_exactly_one() {
    let proxy = proxy(Faults::none()).await;
    let api = TestApi::start_behind(&proxy.url(), impatient(), Duration::ZERO).await;
    let author = api.user("retrier").await;
    let post = api.post(&author, "p", "c").await;
    let faults = [
        // The commit's answer lost: the store reads it back, 201.
        Faults {
            lost_response: 1.0,
            ..Faults::none()
        },
        // Held and committed after the request gave up: 503 outcome_unknown.
        Faults {
            late_commit: 1.0,
            late_commit_delay: Duration::from_millis(800),
            ..Faults::none()
        },
        // Never sent: 503 outcome_unknown (the client cannot tell).
        Faults {
            server_error: 1.0,
            ..Faults::none()
        },
    ];
    let mut newcomers = 0;
    for (round, fault) in faults.into_iter().enumerate() {
        let newcomer = format!("user-newcomer-{round}");
        let mut expected: Vec<(u16, Value)> = Vec::new();
        for (i, (method, path, user, body)) in
            creates(&author, &newcomer, &post).into_iter().enumerate()
        {
            let key = format!("round-{round}-{i}");
            let body = match path.as_str() {
                "/users" => json!({ "username": format!("newcomer{round}") }),
                _ => body,
            };
            proxy.set_faults(fault.clone());
            let (status, reply, _) = keyed(&api, method, &path, user, Some(&key), &body).await;
            proxy.set_faults(Faults::none());
            assert!(
                status == 201 || (status == 503 && reply["error"]["code"] == "outcome_unknown"),
                "round {round} {path}: {status} {reply}"
            );
            // The client retries until it has an answer (a held write lands
            // meanwhile).
            let mut answer = (status, reply);
            for _ in 0..20 {
                if answer.0 != 503 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                let (status, reply, _) = keyed(&api, method, &path, user, Some(&key), &body).await;
                answer = (status, reply);
            }
            assert_eq!(answer.0, 201, "round {round} {path}: {}", answer.1);
            let (status, again, replayed) =
                keyed(&api, method, &path, user, Some(&key), &body).await;
            assert_eq!((status, &again, replayed), (201, &answer.1, true));
            expected.push(answer);
        }
        newcomers += 1;
        // Let a late commit's held attempt arrive: it finds its key taken.
        tokio::time::sleep(Duration::from_millis(900)).await;
        let (users, posts, comments) = counts(&api, &author, &post).await;
        assert_eq!(
            (users, posts, comments),
            (1 + newcomers, 1 + newcomers, newcomers),
            "round {round}: exactly one of each"
        );
        assert_eq!(expected.len(), 3);
    }
}

/// The same key sent twice at once: one creates, the other gets its answer
/// (or, if the first is still being written when its retries run out, 409).
#[tokio::test]
async fn the_same_key_twice_at_once_creates_one() {
    let (_proxy, api) = behind_proxy(Backoff::default()).await;
    let author = api.user("twice").await;
    let body = json!({ "title": "t", "content": "c" });
    let (a, b) = tokio::join!(
        keyed(&api, "POST", "/posts", &author, Some("same"), &body),
        keyed(&api, "POST", "/posts", &author, Some("same"), &body),
    );
    for answer in [&a, &b] {
        assert!(
            answer.0 == 201
                || (answer.0 == 409 && answer.1["error"]["code"] == "idempotency_key_in_flight"),
            "{answer:?}"
        );
    }
    let created: Vec<&Value> = [&a, &b]
        .iter()
        .filter(|x| x.0 == 201)
        .map(|x| &x.1["postId"])
        .collect();
    assert!(
        created.windows(2).all(|w| w[0] == w[1]),
        "one post: {created:?}"
    );
    let (_, posts) = api.user_posts(&author).await;
    assert_eq!(posts["items"].as_array().map(Vec::len), Some(1));
}

/// What a key costs (docs/data-model.md): the create's calls, its
/// transaction one item larger; a replay, the writer read, the cancelled
/// transaction, the record and the post (its content).
#[tokio::test]
async fn a_key_costs_one_more_item_in_the_creates_transaction() {
    let api = TestApi::start().await;
    let author = api.user("costly").await;
    let body = json!({ "title": "t", "content": "c" });
    let calls = |api: &TestApi| -> Vec<(String, f64, f64)> {
        api.meter
            .take()
            .into_iter()
            .map(|c| (c.operation, c.table, c.indexes))
            .collect()
    };
    api.meter.take();
    keyed(&api, "POST", "/posts", &author, None, &body).await;
    let plain = calls(&api);
    keyed(&api, "POST", "/posts", &author, Some("cost"), &body).await;
    let with_key = calls(&api);
    let (status, _, replayed) = keyed(&api, "POST", "/posts", &author, Some("cost"), &body).await;
    assert_eq!((status, replayed), (201, true));
    let replay = calls(&api);
    let owned = |v: &[(&str, f64, f64)]| -> Vec<(String, f64, f64)> {
        v.iter()
            .map(|(o, t, i)| ((*o).to_owned(), *t, *i))
            .collect()
    };
    assert_eq!(
        plain,
        owned(&[("Query", 1.0, 0.0), ("TransactWriteItems", 8.0, 4.0)])
    );
    // DynamoDB Local reports a transaction at a flat rate: the same 8 + 4
    // with the third item; DynamoDB bills it 2 WCU (a small item, twice).
    assert_eq!(with_key, plain);
    // The third item is there: the one record, and no other call for it.
    let records: Vec<_> = table_snapshot(&api)
        .await
        .into_iter()
        .filter(|i| {
            i.get("type")
                .and_then(|t| t.as_s().ok())
                .is_some_and(|t| t == "requestRecord")
        })
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let size: usize = records[0]
        .iter()
        .map(|(name, value)| name.len() + format!("{value:?}").len())
        .sum();
    assert!(
        size < 1024,
        "under 1 KB, so 2 WCU in a transaction: {size} bytes"
    );
    assert_eq!(
        replay,
        owned(&[
            ("Query", 1.0, 0.0),
            ("TransactWriteItems", 0.0, 0.0),
            ("GetItem", 1.0, 0.0),
            ("Query", 1.0, 0.0),
        ])
    );
}

/// An erased account's request records go with it (they hold its name and
/// what it wrote), not a day later by TTL.
#[tokio::test]
async fn an_erasure_forgets_the_accounts_request_records() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let leaver = api.user("forgetful").await;
    let body = json!({ "title": "t", "content": "c" });
    let (status, _, _) = keyed(&api, "POST", "/posts", &leaver, Some("mine"), &body).await;
    assert_eq!(status, 201);
    let records =
        |items: Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>| {
            items
                .iter()
                .filter(|i| {
                    i.get("type")
                        .and_then(|t| t.as_s().ok())
                        .is_some_and(|t| t == "requestRecord")
                })
                .count()
        };
    assert_eq!(records(table_snapshot(&api).await), 1);
    let (status, _) = api.erase(&leaver).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    assert_eq!(records(table_snapshot(&api).await), 0);
}
