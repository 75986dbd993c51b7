//! Tags: a post's 0–5 tags, and each tag's list (`GET /tags/{tag}/posts`),
//! kept by the fan-out through creates, edits, likes, renames, deletions and
//! erasures.

use serde_json::{Value, json};

use crate::support::{TestApi, table_snapshot};

/// The post ids of a tag's list (every page), newest first, and their
/// (title, username, likeCount) as listed.
async fn tag_list(api: &TestApi, tag: &str) -> Vec<(String, String, String, u64)> {
    let items = api.list(format!("/tags/{tag}/posts?limit=2")).items().await;
    items
        .iter()
        .map(|item| {
            let text = |field: &str| item[field].as_str().unwrap_or_default().to_owned();
            let likes = item["likeCount"].as_u64().unwrap_or(u64::MAX);
            (text("postId"), text("title"), text("username"), likes)
        })
        .collect()
}

fn ids(list: &[(String, String, String, u64)]) -> Vec<&str> {
    list.iter().map(|(id, ..)| id.as_str()).collect()
}

async fn tagged_post(api: &TestApi, author: &str, title: &str, tags: Value) -> String {
    let (status, post) = api
        .create_post(
            author,
            json!({ "title": title, "content": "text", "tags": tags }),
        )
        .await;
    assert_eq!(status, 201, "{post}");
    post["postId"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn tag_lists_follow_creates_edits_likes_renames_and_deletes() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("tagger").await;
    let fan = api.user("tag_fan").await;
    let first = tagged_post(&api, &author, "first", json!(["Rust", "rust", "web"])).await;
    let second = tagged_post(&api, &author, "second", json!(["rust"])).await;
    let untagged = tagged_post(&api, &author, "third", json!([])).await;
    let (_, got) = api.get_post(&first).await;
    assert_eq!(got["tags"], json!(["rust", "web"]), "lower-cased, folded");
    let (_, got) = api.get_post(&untagged).await;
    assert_eq!(got["tags"], json!([]));
    api.settle(&mut poller).await;

    let rust = tag_list(&api, "rust").await;
    assert_eq!(
        ids(&rust),
        [second.as_str(), first.as_str()],
        "newest first"
    );
    assert_eq!(ids(&tag_list(&api, "web").await), [first.as_str()]);
    assert_eq!(ids(&tag_list(&api, "RUST").await), ids(&rust), "any case");
    assert!(tag_list(&api, "nothing-here").await.is_empty());

    // A like reaches every copy; an edit moves the post between lists.
    api.like(&fan, &first).await;
    let (status, edited) = api
        .edit_post(
            &author,
            &first,
            json!({ "title": "first, edited", "tags": ["web", "go"] }),
        )
        .await;
    assert_eq!((status, &edited["tags"]), (200, &json!(["web", "go"])));
    api.settle(&mut poller).await;
    assert_eq!(ids(&tag_list(&api, "rust").await), [second.as_str()]);
    let web = tag_list(&api, "web").await;
    assert_eq!(
        web,
        [(
            first.clone(),
            "first, edited".to_owned(),
            "tagger".to_owned(),
            1
        )]
    );
    assert_eq!(tag_list(&api, "go").await, web);

    // A rename reaches the entries; a deletion takes them out.
    api.rename(&author, "tagger_renamed").await;
    api.settle(&mut poller).await;
    let go = tag_list(&api, "go").await;
    assert_eq!(go.first().map(|e| e.2.as_str()), Some("tagger_renamed"));
    let (status, _) = api.delete_post(&author, &first).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    assert!(tag_list(&api, "web").await.is_empty());
    assert!(tag_list(&api, "go").await.is_empty());

    // Clearing the tags takes the post out; the erasure takes the rest.
    let (status, _) = api.edit_post(&author, &second, json!({ "tags": [] })).await;
    assert_eq!(status, 200);
    api.settle(&mut poller).await;
    assert!(tag_list(&api, "rust").await.is_empty());
    let last = tagged_post(&api, &author, "last", json!(["rust"])).await;
    api.settle(&mut poller).await;
    assert_eq!(ids(&tag_list(&api, "rust").await), [last.as_str()]);
    let (status, _) = api.erase(&author).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    assert!(tag_list(&api, "rust").await.is_empty());
    let audit = api.audit(false).await;
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
}

#[tokio::test]
async fn bad_tags_are_refused_with_the_field_named_and_nothing_written() {
    let api = TestApi::start().await;
    let author = api.user("bad_tags").await;
    let before = table_snapshot(&api).await;
    for (tags, code) in [
        (json!(["a", "b", "c", "d", "e", "f"]), "invalid_field"),
        (json!(["with space"]), "invalid_field"),
        (json!(["under_score"]), "invalid_field"),
        (json!([""]), "invalid_field"),
        (json!(["x".repeat(31)]), "invalid_field"),
        (json!([1]), "bad_json"),
        (json!("rust"), "bad_json"),
    ] {
        let (status, body) = api
            .create_post(
                &author,
                json!({ "title": "t", "content": "c", "tags": tags }),
            )
            .await;
        assert_eq!(status, 400, "{tags}: {body}");
        assert_eq!(body["error"]["code"], code, "{tags}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            code == "bad_json" || message.starts_with("tags"),
            "{tags}: {body}"
        );
    }
    assert_eq!(table_snapshot(&api).await, before);
    let (status, body) = api.tag_posts("not_a_tag").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_id"))
    );
}

#[tokio::test]
async fn a_late_record_does_not_bring_back_a_tag_the_post_no_longer_has() {
    let api = TestApi::start().await;
    let author = api.user("late_tags").await;
    let post = tagged_post(&api, &author, "moving", json!(["old"])).await;
    // The edit's record and the create's, applied in the wrong order (a
    // replay of a parked record after newer ones): the entry for `old` is
    // put, then taken back because the post no longer has the tag.
    let (status, _) = api
        .edit_post(&author, &post, json!({ "tags": ["new"] }))
        .await;
    assert_eq!(status, 200);
    let records = api.stream_records().await;
    for record in records.iter().rev() {
        blog::fanout::apply(
            &api.app.store,
            record,
            &blog::store::deadline::Deadline::NONE,
        )
        .await
        .expect("applied");
    }
    assert!(tag_list(&api, "old").await.is_empty());
    assert_eq!(ids(&tag_list(&api, "new").await), [post.as_str()]);
}

#[tokio::test]
async fn the_audit_finds_and_repairs_tag_lists() {
    use blog::{audit::Finding, store::items::feed::TagEntryItem, text::Tag};

    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("audited_tags").await;
    let post = tagged_post(&api, &author, "audited", json!(["kept", "lost"])).await;
    api.settle(&mut poller).await;
    let store = &api.app.store;
    let tag = |t: &str| Tag::parse(t).expect("a tag");
    // The `lost` entry deleted, a `stray` entry put for a tag the post lacks.
    let key = |t: &str| TagEntryItem::key_of(&tag(t), &crate::support::post_id(&post));
    let lost = key("lost");
    store
        .client()
        .delete_item()
        .table_name(store.table())
        .set_key(Some(lost.item()))
        .send()
        .await
        .expect("delete");
    let mut stray = store
        .client()
        .get_item()
        .table_name(store.table())
        .set_key(Some(key("kept").item()))
        .send()
        .await
        .expect("get")
        .item
        .expect("the kept entry");
    let stray_key = key("stray");
    stray.insert(
        "PK".into(),
        aws_sdk_dynamodb::types::AttributeValue::S(stray_key.pk),
    );
    stray.insert(
        "tag".into(),
        aws_sdk_dynamodb::types::AttributeValue::S("stray".into()),
    );
    store
        .client()
        .put_item()
        .table_name(store.table())
        .set_item(Some(stray))
        .send()
        .await
        .expect("put");

    let post_id = crate::support::post_id(&post);
    let mut found = api.audit(true).await.findings;
    found.sort_by_key(|f| f.to_string());
    assert_eq!(
        found,
        [
            Finding::StaleTagEntry {
                tag: tag("lost"),
                post: post_id,
                listed: post_id,
            },
            Finding::ExtraTagEntry {
                tag: tag("stray"),
                post: post_id,
                listed: post_id,
            },
        ]
    );
    assert_eq!(api.audit(false).await.findings, vec![]);
    assert_eq!(ids(&tag_list(&api, "lost").await), [post.as_str()]);
    assert!(tag_list(&api, "stray").await.is_empty());
}

/// `(operation, table units, index units)` of each DynamoDB call made since
/// the last take.
fn calls_since(api: &TestApi) -> Vec<(String, f64, f64)> {
    api.meter
        .take()
        .into_iter()
        .map(|c| (c.operation, c.table, c.indexes))
        .collect()
}

fn calls(expected: &[(&str, f64, f64)]) -> Vec<(String, f64, f64)> {
    expected
        .iter()
        .map(|(op, t, i)| ((*op).to_owned(), *t, *i))
        .collect()
}

/// What a tagged post costs to create, edit and delete, request and fan-out
/// (docs/data-model.md and docs/benchmarks.md state these figures), and
/// what a tag's page costs at two sizes of the tag: the same.
#[tokio::test]
async fn a_tagged_post_costs_what_the_data_model_says_and_a_tag_page_the_same_at_any_size() {
    use blog::{keys::Entity, store::items::feed::TagEntryItem};

    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("cost_tags").await;
    let five = json!(["a", "b", "c", "d", "e"]);
    let mut figures = Vec::new();
    for tags in [json!([]), five.clone()] {
        calls_since(&api);
        let post = tagged_post(&api, &author, "costed", tags.clone()).await;
        let create = calls_since(&api);
        api.settle(&mut poller).await;
        let create_fan_out = calls_since(&api);
        let edit_body = json!({ "tags": if tags == five { json!(["f", "g", "h", "i", "j"]) } else { json!([]) }, "title": "edited" });
        let (status, _) = api.edit_post(&author, &post, edit_body).await;
        assert_eq!(status, 200);
        let edit = calls_since(&api);
        api.settle(&mut poller).await;
        let edit_fan_out = calls_since(&api);
        let (status, _) = api.delete_post(&author, &post).await;
        assert_eq!(status, 204);
        let delete = calls_since(&api);
        api.settle(&mut poller).await;
        let delete_fan_out = calls_since(&api);
        figures.push((
            tags,
            create,
            create_fan_out,
            edit,
            edit_fan_out,
            delete,
            delete_fan_out,
        ));
    }
    for figure in &figures {
        eprintln!("{figure:?}");
    }
    // The request side: the same calls with or without tags (the tags add
    // bytes to the post item, not calls).
    let (untagged, tagged) = (&figures[0], &figures[1]);
    assert_eq!(untagged.1, tagged.1, "create");
    assert_eq!(untagged.3, tagged.3, "edit");
    assert_eq!(untagged.5, tagged.5, "delete");
    // The fan-out: a put a tag and one read of the post on create; a delete
    // a tag left, a put a tag entered and one read on an edit; a delete a tag
    // on deletion.
    let count = |calls: &[(String, f64, f64)], op: &str| calls.iter().filter(|c| c.0 == op).count();
    assert_eq!(
        count(&tagged.2, "PutItem") - count(&untagged.2, "PutItem"),
        5
    );
    assert_eq!(
        count(&tagged.2, "GetItem") - count(&untagged.2, "GetItem"),
        1
    );
    assert_eq!(
        count(&tagged.4, "DeleteItem") - count(&untagged.4, "DeleteItem"),
        5
    );
    assert_eq!(
        count(&tagged.4, "PutItem") - count(&untagged.4, "PutItem"),
        5
    );
    assert_eq!(
        count(&tagged.6, "DeleteItem") - count(&untagged.6, "DeleteItem"),
        5
    );

    // A tag's page: one Query of 21 entries, whatever the tag holds.
    let mut page_units = Vec::new();
    for size in [100usize, 1_000] {
        let have = page_units.len() * 100;
        let mut items = Vec::new();
        for _ in have..size {
            let post = blog::ids::PostId::generate();
            let mut entry = json!({
                "postId": post.to_string(), "userId": author, "username": "cost_tags",
                "title": "a title of some length", "summary": "a summary ".repeat(20),
                "commentCount": 3, "likeCount": 7, "createdAt": post.created_at(),
                "tag": "big", "version": 1, "userVersion": 1,
            });
            entry["type"] = json!("tagEntry");
            let entry: TagEntryItem = serde_json::from_value(entry).expect("an entry");
            items.push(entry.to_item().expect("an item"));
        }
        crate::support::load(&api, items).await;
        calls_since(&api);
        let (status, page) = api.get("/tags/big/posts?limit=20").await;
        assert_eq!(
            (status, page["items"].as_array().map(Vec::len)),
            (200, Some(20))
        );
        page_units.push(calls_since(&api));
    }
    eprintln!("tag page at 100 and 1,000: {page_units:?}");
    assert_eq!(
        page_units[0], page_units[1],
        "the same Query, the same units"
    );
    assert_eq!(page_units[0], calls(&[("Query", 1.5, 0.0)]));
}

#[tokio::test]
async fn likes_on_a_tagged_post_reach_its_tag_lists_once_a_batch_not_once_a_like() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("liked_tags").await;
    let post = tagged_post(&api, &author, "liked", json!(["a", "b", "c", "d", "e"])).await;
    api.settle(&mut poller).await;
    let mut fans = Vec::new();
    for i in 0..40 {
        fans.push(api.user(&format!("tag_fan_{i}")).await);
    }
    let before = api.stream_records().await.len();
    for fan in &fans {
        api.like(fan, &post).await;
    }
    // Each like is three records (the like, its marker, the post's count):
    // all of them in the stream before the poller reads, so one batch.
    api.wait_for_stream(before + 3 * fans.len()).await;
    calls_since(&api);
    api.settle(&mut poller).await;
    let fan_out = calls_since(&api);
    let puts = fan_out.iter().filter(|c| c.0 == "PutItem").count();
    // One batch (the poller reads up to the mapping's 1,000 records): the
    // post's 40 MODIFYs coalesced into one, its five entries put once.
    assert_eq!(puts, 5, "{fan_out:?}");
    for tag in ["a", "e"] {
        assert_eq!(tag_list(&api, tag).await.first().map(|e| e.3), Some(40));
    }
}
