//! Drafts: a post created or taken back as a draft is its author's alone,
//! on every read route; publishing puts it in every list in order of
//! publication, not creation.

use serde_json::{Value, json};

use crate::support::{TestApi, post_id};

async fn write(api: &TestApi, author: &str, title: &str, body: Value) -> Value {
    let mut body = body;
    body["title"] = json!(title);
    body["content"] = json!(format!("{title}'s text"));
    let (status, post) = api.create_post(author, body).await;
    assert_eq!(status, 201, "{post}");
    post
}

fn id(post: &Value) -> String {
    post["postId"].as_str().unwrap_or_default().to_owned()
}

/// The post ids a list shows, following its cursors two at a time.
async fn listed(api: &TestApi, path: &str) -> Vec<String> {
    let items = api.list(format!("{path}?limit=2")).items().await;
    items.iter().map(id).collect()
}

async fn feed(api: &TestApi) -> Vec<String> {
    let (_, feed) = api.get("/feed?limit=100").await;
    feed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(id)
        .collect()
}

#[tokio::test]
async fn a_draft_is_its_authors_alone_until_published_then_listed_by_publication() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("drafter").await;
    let reader = api.user("draft_reader").await;

    let draft = write(
        &api,
        &author,
        "draft",
        json!({ "status": "draft", "tags": ["drafts"] }),
    )
    .await;
    assert_eq!(
        (&draft["status"], &draft["publishedAt"]),
        (&json!("draft"), &Value::Null)
    );
    let draft_id = id(&draft);
    let older = write(&api, &author, "older", json!({ "tags": ["drafts"] })).await;
    assert_eq!(older["status"], "published");
    assert_eq!(older["publishedAt"], older["createdAt"]);
    api.settle(&mut poller).await;

    // Nobody else sees it, on any route; it takes no likes or comments.
    let path = format!("/posts/{draft_id}");
    assert_eq!(api.get(&path).await.0, 404);
    assert_eq!(
        listed(&api, &format!("/users/{author}/posts")).await,
        [id(&older)]
    );
    assert_eq!(listed(&api, "/tags/drafts/posts").await, [id(&older)]);
    assert_eq!(feed(&api).await, [id(&older)]);
    assert_eq!(api.like_post(&reader, &draft_id).await.0, 404);
    assert_eq!(api.comment_on(&reader, &draft_id, "hi").await.0, 404);
    // Another user's edit or deletion of it answers exactly as for a post
    // that does not exist: its existence does not leak.
    let missing = blog::ids::PostId::generate().to_string();
    for method in ["PUT", "DELETE"] {
        let edit = || json!({ "title": "mine" });
        let ((status, mut theirs), (_, mut nothing)) = match method {
            "PUT" => (
                api.edit_post(&reader, &draft_id, edit()).await,
                api.edit_post(&reader, &missing, edit()).await,
            ),
            _ => (
                api.delete_post(&reader, &draft_id).await,
                api.delete_post(&reader, &missing).await,
            ),
        };
        assert_eq!(status, 404, "{method}: {theirs}");
        for answer in [&mut theirs, &mut nothing] {
            answer["error"]["requestId"].take();
        }
        assert_eq!(theirs, nothing, "{method}");
    }
    let (status, atom) = api.get(&format!("/users/{author}/posts.atom")).await;
    assert_eq!(status, 200);
    assert!(
        !atom
            .as_str()
            .unwrap_or_default()
            .contains("<title>draft</title>")
    );

    // Its author lists it, whole; nobody else may.
    let (status, drafts) = api.drafts(&author, &author).await;
    assert_eq!(status, 200, "{drafts}");
    assert_eq!(drafts["items"], json!([draft]));
    let (status, _) = api.drafts(&reader, &author).await;
    assert_eq!(status, 403);
    // A page of whole posts: at most 25 of them.
    for (query, expected) in [
        ("limit=25", 200),
        ("limit=26", 400),
        ("limit=0", 400),
        ("cursor=", 400),
    ] {
        let (status, body) = api
            .list(format!("/users/{author}/drafts?{query}"))
            .by(&author)
            .page()
            .await;
        assert_eq!(status, expected, "{query}: {body}");
        if expected == 400 {
            let code = if query.starts_with("cursor") {
                "bad_cursor"
            } else {
                "bad_limit"
            };
            assert_eq!(body["error"]["code"], code, "{query}: {body}");
        }
    }

    // Published now: after `older` in every list, though written before it.
    let (status, published) = api
        .edit_post(&author, &draft_id, json!({ "status": "published" }))
        .await;
    assert_eq!(status, 200, "{published}");
    assert_eq!(published["status"], "published");
    let at = published["publishedAt"].as_str().unwrap_or_default();
    assert!(
        at > draft["createdAt"].as_str().unwrap_or_default(),
        "{published}"
    );
    api.settle(&mut poller).await;
    let newest_first = [draft_id.clone(), id(&older)];
    assert_eq!(
        listed(&api, &format!("/users/{author}/posts")).await,
        newest_first
    );
    assert_eq!(listed(&api, "/tags/drafts/posts").await, newest_first);
    assert_eq!(feed(&api).await, newest_first);
    assert_eq!(api.get(&path).await.0, 200);
    // Each list's short form says when it was published, as Q2 does; the
    // older post's is its creation.
    for list in [
        format!("/users/{author}/posts"),
        "/tags/drafts/posts".to_owned(),
        "/feed".to_owned(),
    ] {
        let (_, page) = api.get(&list).await;
        let times: Vec<(&Value, &Value)> = page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| (&p["publishedAt"], &p["createdAt"]))
            .collect();
        assert_eq!(
            times,
            [
                (&json!(at), &draft["createdAt"]),
                (&older["createdAt"], &older["createdAt"])
            ],
            "{list}"
        );
    }
    // And so does its Atom entry, published and updated.
    let (_, atom) = api.get(&format!("/users/{author}/posts.atom")).await;
    let atom = atom.as_str().unwrap_or_default();
    // As Atom prints it: a whole second without its ".000".
    let atom_time = |time: &str| time.replace(".000Z", "Z").replace('Z', "+00:00");
    let atom_time = atom_time(at);
    assert!(
        atom.contains(&format!("<published>{atom_time}</published>")),
        "{atom}"
    );
    assert!(
        !atom.contains(
            &draft["createdAt"]
                .as_str()
                .unwrap_or("-")
                .replace(".000Z", "Z")
                .replace('Z', "+00:00")
        ),
        "{atom}"
    );
    api.like(&reader, &draft_id).await;

    // An edit keeps its place; back to a draft, it leaves every list.
    let (status, _) = api
        .edit_post(&author, &draft_id, json!({ "title": "edited" }))
        .await;
    assert_eq!(status, 200);
    api.settle(&mut poller).await;
    assert_eq!(feed(&api).await, newest_first);
    let (status, back) = api
        .edit_post(&author, &draft_id, json!({ "status": "draft" }))
        .await;
    assert_eq!((status, &back["publishedAt"]), (200, &Value::Null));
    api.settle(&mut poller).await;
    assert_eq!(feed(&api).await, [id(&older)]);
    assert_eq!(
        listed(&api, &format!("/users/{author}/posts")).await,
        [id(&older)]
    );
    assert_eq!(listed(&api, "/tags/drafts/posts").await, [id(&older)]);
    assert_eq!(api.get(&path).await.0, 404);
    assert_eq!(
        api.get(&format!("{path}/likes")).await.0,
        404,
        "its likes hidden too"
    );
    // Nor can a like be taken back meanwhile: there is no such post.
    assert_eq!(api.unlike(&reader, &draft_id).await.0, 404);

    // The export has it; the audit finds every copy right.
    let (_, export) = api.export_as(&author, &author, "limit=25").await;
    let exported: Vec<&Value> = export["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item.get("post"))
        .collect();
    assert_eq!(exported.len(), 2, "{export}");
    assert!(exported.iter().any(|p| p["status"] == "draft"));
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);

    // The erasure takes drafts too; at once, their list is gone with the
    // profile.
    assert_eq!(api.erase(&author).await.0, 204);
    assert_eq!(api.drafts(&author, &author).await.0, 404);
    api.settle(&mut poller).await;
    let store = &api.app.store;
    assert!(
        store
            .requests()
            .get_post(&crate::support::post_id(&draft_id))
            .await
            .ok()
            .flatten()
            .is_none()
    );
    assert!(
        crate::support::table_snapshot(&api)
            .await
            .iter()
            .all(|item| { item.get("postId").and_then(|v| v.as_s().ok()) != Some(&draft_id) })
    );
}

/// A post turning hot while its author takes it back to a draft: one of the
/// two lands first and the other refuses, however they interleave. Never a
/// hot draft (its likes would go to shards that know nothing of drafts):
/// a draft takes no like or comment, and a hot post stays published.
#[tokio::test]
async fn a_post_turning_hot_while_taken_back_is_never_a_hot_draft() {
    let api = TestApi::start().await;
    let author = api.user("racing_drafter").await;
    let liker = api.user("racing_liker").await;
    let store = &api.app.store;
    let (mut drafts, mut hot) = (0, 0);
    for round in 0..12 {
        let post = api.post(&author, format!("race {round}"), "text").await;
        let id = post_id(&post);
        let path = format!("/posts/{post}");
        let take_back = api.edit_post(&author, &post, json!({ "status": "draft" }));
        let requests = store.requests();
        let switch = requests.make_hot(&id);
        let ((status, body), switched) = tokio::join!(take_back, switch);
        let item = store
            .db()
            .get("a post item", blog::keys::post_item(&id).item(), true)
            .await
            .expect("read")
            .expect("the post");
        let is_draft = item.contains_key("status");
        let is_hot = item.contains_key("shards") || item.contains_key("closing");
        assert!(
            !(is_draft && is_hot),
            "round {round}: a hot draft: {item:?}"
        );
        if is_draft {
            drafts += 1;
            assert_eq!(status, 200, "{body}");
            assert_eq!(switched.expect("the switch answered"), None);
            let (status, _) = api.like_post(&liker, &post).await;
            assert_eq!(status, 404, "round {round}");
        } else {
            hot += 1;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (409, Some("post_is_hot")),
                "round {round}"
            );
            assert_eq!(api.get(&path).await.0, 200);
        }
    }
    assert_eq!(drafts + hot, 12);
}

#[tokio::test]
async fn a_keyed_draft_is_created_once_and_a_hot_post_stays_published() {
    let api = TestApi::start().await;
    let author = api.user("keyed_drafter").await;
    let body = json!({ "title": "t", "content": "c", "status": "draft" });
    let create = || api.create_post_keyed(&author, "draft-key", &body);
    let (status, first, _) = create().await;
    assert_eq!((status, &first["status"]), (201, &json!("draft")));
    let (status, again, replayed) = create().await;
    assert_eq!((status, &again, replayed), (201, &first, true));

    let post = api.post(&author, "viral", "text").await;
    api.make_hot(&post).await;
    let (status, refused) = api
        .edit_post(&author, &post, json!({ "status": "draft" }))
        .await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (409, Some("post_is_hot"))
    );
    assert_eq!(api.get_post(&post).await.0, 200);
    let (status, bad) = api
        .create_post(
            &author,
            json!({ "title": "t", "content": "c", "status": "later" }),
        )
        .await;
    assert_eq!(
        (status, bad["error"]["code"].as_str()),
        (400, Some("bad_json"))
    );
}

/// A time `seconds` from now, as the API takes it.
fn in_seconds(seconds: i64) -> String {
    blog::timestamp::format(time::OffsetDateTime::now_utc() + time::Duration::seconds(seconds))
}

#[tokio::test]
async fn a_scheduled_post_publishes_itself_at_its_time_and_not_before() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("scheduler").await;
    let store = &api.app.store;
    let deadline = blog::store::deadline::Deadline::NONE;

    // Due in 2 s: the run waits for it (within its look-ahead), then it is
    // out, listed at its time.
    let at = in_seconds(2);
    let soon = write(
        &api,
        &author,
        "soon",
        json!({ "status": "scheduled", "publishAt": at }),
    )
    .await;
    assert_eq!(
        (&soon["status"], &soon["publishAt"]),
        (&json!("scheduled"), &json!(at))
    );
    let path = format!("/posts/{}", id(&soon));
    assert_eq!(api.get(&path).await.0, 404, "not before its time");
    // Later than the look-ahead: not this run's.
    let later = write(
        &api,
        &author,
        "later",
        json!({ "status": "scheduled", "publishAt": in_seconds(600) }),
    )
    .await;
    let (_, drafts) = api.drafts(&author, &author).await;
    assert_eq!(
        drafts["items"].as_array().map(Vec::len),
        Some(2),
        "scheduled posts are the author's drafts"
    );

    let run = store.fanout().publish_due(&deadline).await.expect("a run");
    assert_eq!((run.published, run.dropped), (1, 0));
    assert!(time::OffsetDateTime::now_utc() >= blog::timestamp::parse(&at).expect("a time"));
    let (status, out) = api.get(&path).await;
    assert_eq!(
        (
            status,
            &out["status"],
            &out["publishedAt"],
            &out["publishAt"]
        ),
        (200, &json!("published"), &json!(at), &Value::Null)
    );
    api.settle(&mut poller).await;
    assert_eq!(feed(&api).await, [id(&soon)]);
    assert_eq!(api.get(&format!("/posts/{}", id(&later))).await.0, 404);

    // Rescheduled, then taken back to a draft: its old markers publish
    // nothing when their time comes.
    let moved = write(
        &api,
        &author,
        "moved",
        json!({ "status": "scheduled", "publishAt": in_seconds(1) }),
    )
    .await;
    let (status, _) = api
        .edit_post(&author, &id(&moved), json!({ "status": "draft" }))
        .await;
    assert_eq!(status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    // The edits took their markers out: nothing for the run.
    let run = store.fanout().publish_due(&deadline).await.expect("a run");
    assert_eq!((run.published, run.dropped), (0, 0));
    assert_eq!(api.get_post(&id(&moved)).await.0, 404);
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

/// The schedule cannot be starved: 1,000 reschedules by one author leave
/// no marker behind (each edit takes its old one out), a deleted scheduled
/// post's marker goes with the fan-out of its deletion, so a run reads only
/// the live markers and publishes another author's post at its time; a
/// post a run finds already due is listed at the time it is out, not at
/// its past `publishAt`.
#[tokio::test]
async fn the_schedule_holds_only_live_markers_and_a_late_post_is_listed_when_out() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let busy = api.user("busy_rescheduler").await;
    let punctual = api.user("punctual_author").await;
    let store = &api.app.store;
    let busy_id = blog::ids::UserId::parse(&busy).expect("an id");
    const POSTS: usize = 25;
    const EDITS: usize = 40;
    let mut posts = Vec::new();
    for i in 0..POSTS {
        let body = json!({ "status": "scheduled", "publishAt": in_seconds(3_600) });
        posts.push(id(&write(&api, &busy, &format!("busy {i}"), body).await));
    }
    // 25 × 40 = 1,000 reschedules, 25 at once (each post's in turn).
    let chains = posts.iter().enumerate().map(|(i, post)| {
        let (store, busy_id) = (store, &busy_id);
        async move {
            let post = post_id(post);
            for edit in 0..EDITS {
                let at = blog::timestamp::format(
                    time::OffsetDateTime::now_utc()
                        + time::Duration::seconds(3_600)
                        + time::Duration::milliseconds((edit * POSTS + i) as i64),
                );
                let edit = blog::store::posts::PostEdit {
                    status: Some(blog::model::Status::Scheduled),
                    publish_at: Some(&at),
                    ..Default::default()
                };
                let expected = blog::revision::Expected::Any;
                let requests = store.requests();
                let edited = requests.edit_post(&post, busy_id, edit, &expected).await;
                edited.expect("a reschedule");
            }
        }
    });
    futures::future::join_all(chains).await;
    // One deleted; then one scheduled by another author, due in a moment.
    let deleted = &posts[0];
    let (status, _) = api.delete_post(&busy, deleted).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    let at = in_seconds(4);
    let due = id(&write(
        &api,
        &punctual,
        "on time",
        json!({ "status": "scheduled", "publishAt": at }),
    )
    .await);
    let markers = crate::support::partition_items(&api, "SCHEDULED").await;
    // The live ones only: 24 of the busy author's, the punctual one's.
    assert_eq!(markers.len(), POSTS, "{} markers", markers.len());

    // The run reads one page (the one due marker) and publishes it at its
    // time.
    api.meter.take();
    let run = store
        .fanout()
        .publish_due(&blog::store::deadline::Deadline::NONE)
        .await
        .expect("a run");
    assert_eq!((run.published, run.dropped), (1, 0));
    let queries = api
        .meter
        .take()
        .into_iter()
        .filter(|c| c.operation == "Query")
        .count();
    assert_eq!(queries, 1);
    let (status, out) = api.get_post(&due).await;
    assert_eq!((status, &out["publishedAt"]), (200, &json!(at)));

    // Late: due when the run reads it (a run missed it): listed from when it
    // is out, in the lists too.
    let at = in_seconds(1);
    let late = id(&write(
        &api,
        &punctual,
        "late",
        json!({ "status": "scheduled", "publishAt": at }),
    )
    .await);
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    let run = store
        .fanout()
        .publish_due(&blog::store::deadline::Deadline::NONE)
        .await
        .expect("a run");
    assert_eq!(run.published, 1);
    let (_, out) = api.get_post(&late).await;
    let published = out["publishedAt"].as_str().expect("a time").to_owned();
    // The run came at least half a second after its time (the sleep).
    let half_late = blog::timestamp::format(
        blog::timestamp::parse(&at).expect("a time") + time::Duration::milliseconds(500),
    );
    assert!(published >= half_late, "{published} for {at}");
    api.settle(&mut poller).await;
    let (_, listed) = api.user_posts(&punctual).await;
    assert_eq!(listed["items"][0]["postId"], json!(late));
    assert_eq!(listed["items"][0]["publishedAt"], json!(published));
    let (_, feed) = api.get_feed().await;
    assert_eq!(feed["items"][0]["publishedAt"], json!(published));
}

#[tokio::test]
async fn a_schedule_must_be_a_future_time_with_its_status() {
    let api = TestApi::start().await;
    let author = api.user("bad_schedule").await;
    for (body, problem) in [
        (json!({ "status": "scheduled" }), "publishAt is required"),
        (
            json!({ "status": "scheduled", "publishAt": "tomorrow" }),
            "publishAt must be an RFC 3339 time",
        ),
        (
            json!({ "status": "scheduled", "publishAt": in_seconds(-5) }),
            "publishAt must be in the future",
        ),
        (
            json!({ "status": "scheduled", "publishAt": in_seconds(400 * 86_400) }),
            "publishAt must be within a year",
        ),
        (
            json!({ "status": "draft", "publishAt": in_seconds(60) }),
            "publishAt goes with status scheduled",
        ),
    ] {
        let mut body = body;
        body["title"] = json!("t");
        body["content"] = json!("c");
        let (status, error) = api.create_post(&author, body).await;
        assert_eq!(
            (status, error["error"]["code"].as_str()),
            (400, Some("invalid_field")),
            "{error}"
        );
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(problem), "{message}");
    }
    assert!(
        crate::support::table_snapshot(&api)
            .await
            .iter()
            .all(|item| {
                item.get("type")
                    .and_then(|t| t.as_s().ok())
                    .map(String::as_str)
                    != Some("post")
            })
    );
}

#[tokio::test]
async fn the_audit_puts_back_a_scheduled_posts_lost_marker() {
    use blog::audit::Finding;

    let api = TestApi::start().await;
    let author = api.user("lost_marker").await;
    let at = in_seconds(3_600);
    let post = write(
        &api,
        &author,
        "later",
        json!({ "status": "scheduled", "publishAt": at }),
    )
    .await;
    let store = &api.app.store;
    let marker = blog::keys::Key::new(
        blog::keys::SCHEDULED_PK.to_owned(),
        blog::keys::scheduled_sk(&at, &crate::support::post_id(&id(&post))),
    );
    store
        .client()
        .delete_item()
        .table_name(store.table())
        .set_key(Some(marker.item()))
        .send()
        .await
        .expect("delete the marker");
    let found = api.audit(true).await.findings;
    let expected = Finding::Unscheduled {
        post: crate::support::post_id(&id(&post)),
        publish_at: at,
    };
    assert_eq!(found, [expected]);
    assert_eq!(api.audit(false).await.findings, vec![]);
}
