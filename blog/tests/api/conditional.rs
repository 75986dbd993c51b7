//! Conditional requests (`blog::api::conditional`): a post's and a
//! profile's `ETag`, 304 to a read whose `If-None-Match` names it, and 412
//! (nothing written) to an edit or a deletion whose `If-Match` names a
//! revision that is no longer current: two tabs never overwrite each other.

use serde_json::{Value, json};

use crate::support::{JWT_SUB, TestApi, decode};

/// An answer: its status, its `ETag` (if any) and its body.
struct Answer {
    status: u16,
    etag: Option<String>,
    body: Value,
}

/// `method path` as `user` with `headers`, and a JSON body if any.
async fn send(
    api: &TestApi,
    method: &str,
    path: &str,
    user: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Answer {
    let mut req = api
        .http
        .request(method.parse().expect("method"), api.url(path));
    if let Some(user) = user {
        req = req.header(JWT_SUB, user);
    }
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    if let Some(body) = body {
        req = req.body(body.to_string());
    }
    let response = req.send().await.expect("send");
    let etag = response
        .headers()
        .get("etag")
        .map(|v| v.to_str().expect("ascii").to_owned());
    let (status, body) = decode(response).await;
    Answer { status, etag, body }
}

async fn read(api: &TestApi, path: &str, headers: &[(&str, &str)]) -> Answer {
    send(api, "GET", path, None, headers, None).await
}

/// `PUT path` as `user` with `If-Match: tag` and `body`.
async fn put_if(api: &TestApi, path: &str, user: &str, tag: &str, body: Value) -> Answer {
    send(
        api,
        "PUT",
        path,
        Some(user),
        &[("If-Match", tag)],
        Some(body),
    )
    .await
}

#[tokio::test]
async fn a_post_read_again_unchanged_answers_304_and_changed_counts_change_its_tag() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("tagged").await;
    let fan = api.user("tagfan").await;
    let post = api.post(&author, "Tagged", "body").await;
    let path = format!("/posts/{post}");

    let first = read(&api, &path, &[]).await;
    assert_eq!(first.status, 200);
    let tag = first.etag.expect("an ETag");
    assert!(tag.starts_with('"') && tag.ends_with('"'), "{tag}");
    let again = read(&api, &path, &[("If-None-Match", &tag)]).await;
    assert_eq!(again.status, 304);
    assert_eq!(again.body, Value::Null, "no body");
    assert_eq!(again.etag.as_deref(), Some(tag.as_str()));
    // Weak comparison, lists and `*`.
    let weak = format!("W/{tag}");
    for header in [weak.as_str(), "*", &format!("\"other\", {tag}")] {
        let read = read(&api, &path, &[("If-None-Match", header)]).await;
        assert_eq!(read.status, 304, "{header}");
    }

    // A like changes the answer (its count): the old tag no longer matches.
    api.like(&fan, &post).await;
    api.settle(&mut poller).await;
    let liked = read(&api, &path, &[("If-None-Match", &tag)]).await;
    assert_eq!(liked.status, 200);
    assert_eq!(liked.body["likeCount"], json!(1));
    assert_ne!(liked.etag.as_deref(), Some(tag.as_str()));

    let bad = read(&api, &path, &[("If-None-Match", "not-a-tag")]).await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["error"]["code"], json!("bad_precondition"));
}

#[tokio::test]
async fn an_edit_from_a_stale_copy_is_refused_and_changes_nothing() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("twotabs").await;
    let fan = api.user("tabfan").await;
    let post = api.post(&author, "First", "the first body").await;
    let path = format!("/posts/{post}");
    let edit = |title: &str| json!({ "title": title });

    // Two tabs read the same copy.
    let tab = read(&api, &path, &[]).await.etag.expect("an ETag");
    // A like meanwhile changes the answer, not what an edit overwrites.
    api.like(&fan, &post).await;
    api.settle(&mut poller).await;
    let first = put_if(&api, &path, &author, &tab, edit("Second")).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["title"], json!("Second"));
    let newer = first.etag.expect("the edit's ETag");
    assert_ne!(newer, tab);

    // The other tab, from the first copy: 412, nothing written.
    let stale = put_if(
        &api,
        &path,
        &author,
        &tab,
        json!({ "content": "the other tab's body" }),
    )
    .await;
    assert_eq!(stale.status, 412, "{}", stale.body);
    assert_eq!(stale.body["error"]["code"], json!("precondition_failed"));
    let now = read(&api, &path, &[]).await;
    assert_eq!(now.body["title"], json!("Second"));
    assert_eq!(now.body["content"], json!("the first body"));
    assert_eq!(now.etag.as_deref(), Some(newer.as_str()));

    // An edit of the content alone is a new revision too.
    let content = put_if(&api, &path, &author, &newer, json!({ "content": "edited" })).await;
    assert_eq!(content.status, 200, "{}", content.body);
    let stale = put_if(&api, &path, &author, &newer, edit("Lost")).await;
    assert_eq!(stale.status, 412);

    // A weak tag never meets If-Match; a malformed header is a 400; `*`
    // and a list holding the current tag are met.
    let current = content.etag.expect("an ETag");
    let weak = format!("W/{current}");
    for (header, status) in [
        (weak.as_str(), 412),
        ("\"not-ours\"", 412),
        ("unquoted", 400),
        ("*", 200),
    ] {
        let answer = put_if(
            &api,
            &path,
            &author,
            header,
            edit(&format!("With {status}")),
        )
        .await;
        assert_eq!(answer.status, status, "{header}: {}", answer.body);
    }
    let current = read(&api, &path, &[]).await.etag.expect("an ETag");
    let list = format!("\"other\", {current}");
    let listed = put_if(&api, &path, &author, &list, edit("Listed")).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let kept = read(&api, &path, &[]).await;
    assert_eq!(kept.body["title"], json!("Listed"));
    assert_eq!(kept.body["content"], json!("edited"));
}

#[tokio::test]
async fn a_deletion_from_a_stale_copy_is_refused() {
    let api = TestApi::start().await;
    let author = api.user("deltabs").await;
    let post = api.post(&author, "Keep me", "body").await;
    let path = format!("/posts/{post}");
    let tab = read(&api, &path, &[]).await.etag.expect("an ETag");
    let edited = send(
        &api,
        "PUT",
        &path,
        Some(&author),
        &[],
        Some(json!({ "content": "edited in another tab" })),
    )
    .await;
    assert_eq!(edited.status, 200);
    let refused = send(
        &api,
        "DELETE",
        &path,
        Some(&author),
        &[("If-Match", &tab)],
        None,
    )
    .await;
    assert_eq!(refused.status, 412, "{}", refused.body);
    assert_eq!(read(&api, &path, &[]).await.status, 200, "still there");
    let current = edited.etag.expect("an ETag");
    let deleted = send(
        &api,
        "DELETE",
        &path,
        Some(&author),
        &[("If-Match", &current)],
        None,
    )
    .await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    assert_eq!(read(&api, &path, &[]).await.status, 404);
}

#[tokio::test]
async fn a_profile_is_tagged_and_a_stale_rename_is_refused() {
    let api = TestApi::start().await;
    let user = api.user("profiletag").await;
    let path = format!("/users/{user}");
    let first = read(&api, &path, &[]).await;
    let tag = first.etag.expect("an ETag");
    assert_eq!(
        read(&api, &path, &[("If-None-Match", &tag)]).await.status,
        304
    );
    let renamed = put_if(
        &api,
        &path,
        &user,
        &tag,
        json!({ "username": "profiletag2" }),
    )
    .await;
    assert_eq!(renamed.status, 200, "{}", renamed.body);
    let stale = put_if(
        &api,
        &path,
        &user,
        &tag,
        json!({ "username": "profiletag3" }),
    )
    .await;
    assert_eq!(stale.status, 412, "{}", stale.body);
    let now = read(&api, &path, &[]).await;
    assert_eq!(now.body["username"], json!("profiletag2"));
    assert_eq!(now.etag, renamed.etag);
    assert_ne!(now.etag.as_deref(), Some(tag.as_str()));
}

/// The scheduler's publication changes the post's revision: an edit made
/// from the copy the author had before it (an edit's answer) is
/// refused with 412, and the `ETag` a read shows afterwards is another.
#[tokio::test]
async fn a_scheduled_posts_publication_changes_its_tag() {
    let api = TestApi::start().await;
    let author = api.user("scheduledtag").await;
    let at = blog::timestamp::format(
        time::OffsetDateTime::now_utc() + time::Duration::milliseconds(1_500),
    );
    let made = send(
        &api,
        "POST",
        "/posts",
        Some(&author),
        &[],
        Some(json!({ "title": "Later", "content": "c", "status": "scheduled", "publishAt": at })),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let path = format!("/posts/{}", made.body["postId"].as_str().expect("an id"));
    // The author's copy: an edit's answer, while it is scheduled.
    let edited = send(
        &api,
        "PUT",
        &path,
        Some(&author),
        &[],
        Some(json!({ "content": "edited while scheduled" })),
    )
    .await;
    assert_eq!(edited.status, 200, "{}", edited.body);
    let before = edited.etag.expect("an ETag");
    let run = api
        .app
        .store
        .fanout()
        .publish_due(&blog::store::deadline::Deadline::NONE)
        .await
        .expect("a run");
    assert_eq!(run.published, 1);
    let out = read(&api, &path, &[]).await;
    assert_eq!(out.status, 200, "{}", out.body);
    let after = out.etag.expect("an ETag");
    assert_ne!(after, before);
    let stale = put_if(&api, &path, &author, &before, json!({ "title": "Stale" })).await;
    assert_eq!(stale.status, 412, "{}", stale.body);
    assert_eq!(read(&api, &path, &[]).await.body["title"], json!("Later"));
    let fresh = put_if(&api, &path, &author, &after, json!({ "title": "Fresh" })).await;
    assert_eq!(fresh.status, 200, "{}", fresh.body);
}
