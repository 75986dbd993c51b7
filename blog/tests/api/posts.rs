//! C2 create / edit a post, Q2 get a post, Q3 list a user's posts.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use blog::{
    ids::PostId,
    keys::{self, FEED_PK, PK, POST_SK, SK},
    store::{
        feed::FEED_CAPACITY,
        size::{item_size, read_units, write_units},
    },
    text::{self, POST_CONTENT_MAX_BYTES, SUMMARY_MAX_BYTES, TITLE_MAX_BYTES},
};
use serde_json::{Value, json};

use crate::support::{TestApi, table_snapshot};

#[tokio::test]
async fn a_created_post_carries_its_author_and_zero_counts() {
    let api = TestApi::start().await;
    let author = api.user("writer").await;
    let (status, post) = api
        .create_post(
            &author,
            json!({ "title": "Hello", "content": "こんにちは、世界" }),
        )
        .await;
    assert_eq!(status, 201, "{post}");
    for (field, expected) in [
        ("userId", json!(author)),
        ("username", json!("writer")),
        ("title", json!("Hello")),
        ("content", json!("こんにちは、世界")),
        ("commentCount", json!(0)),
        ("likeCount", json!(0)),
    ] {
        assert_eq!(post[field], expected, "{field}");
    }
    let id = post["postId"].as_str().unwrap_or_default();
    assert_eq!(id.len(), 26, "a ULID");

    let (status, got) = api.get_post(id).await;
    assert_eq!(status, 200);
    assert_eq!(got, post);
}

#[tokio::test]
async fn posting_needs_an_identity_and_a_profile() {
    let api = TestApi::start().await;
    let body = json!({ "title": "t", "content": "c" });
    let (status, err) = api.call("POST", "/posts", None, Some(body.clone())).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let (status, err) = api.create_post("no-profile", body).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    assert!(table_snapshot(&api).await.is_empty());
}

#[tokio::test]
async fn the_author_edits_title_and_content() {
    let api = TestApi::start().await;
    let author = api.user("editor").await;
    let id = api.post(&author, "Before", "old content").await;

    let (status, edited) = api
        .edit_post(&author, &id, json!({ "title": "After" }))
        .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(
        (edited["title"].as_str(), edited["content"].as_str()),
        (Some("After"), Some("old content"))
    );
    assert_ne!(edited["updatedAt"], edited["createdAt"]);

    let long = "長".repeat(250);
    let (status, edited) = api
        .edit_post(&author, &id, json!({ "content": long }))
        .await;
    assert_eq!(status, 200);
    assert_eq!(edited["content"], json!(long));
    // The short form follows the content.
    let (_, list) = api.user_posts(&author).await;
    assert_eq!(
        list["items"][0]["summary"],
        json!(format!("{}…", "長".repeat(200)))
    );
    assert_eq!(list["items"][0]["title"], "After");
}

#[tokio::test]
async fn only_the_author_edits_and_only_existing_posts() {
    let api = TestApi::start().await;
    let author = api.user("owner").await;
    let other = api.user("intruder").await;
    let id = api.post(&author, "Mine", "content").await;
    let before = table_snapshot(&api).await;

    let (status, _) = api
        .edit_post(&other, &id, json!({ "title": "Yours" }))
        .await;
    assert_eq!(status, 403);
    let missing = ulid::Ulid::generate();
    let (status, _) = api
        .edit_post(&author, &missing.to_string(), json!({ "title": "x" }))
        .await;
    assert_eq!(status, 404);
    let (status, _) = api.edit_post(&author, &id, json!({})).await;
    assert_eq!(status, 400, "an edit must change something");
    let (status, _) = api.edit_post(&author, &id, json!({ "title": "" })).await;
    assert_eq!(status, 400);
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn a_missing_post_is_404_and_a_malformed_id_400() {
    let api = TestApi::start().await;
    assert_eq!(
        api.get(&format!("/posts/{}", ulid::Ulid::generate()))
            .await
            .0,
        404
    );
    for bad in ["abc", "01arz3ndektsv4rrffq69g5fav", "POST%23x", "user-1"] {
        let (status, body) = api.get_post(bad).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("bad_id")),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn a_users_posts_come_newest_first_in_short_form_page_by_page() {
    let api = TestApi::start().await;
    let author = api.user("prolific").await;
    let other = api.user("someone").await;
    api.post(&other, "not mine", "x").await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            api.post(&author, &format!("post {i}"), &"😀".repeat(150 + 20 * i))
                .await,
        );
    }
    ids.reverse();

    let mut seen = Vec::new();
    let listing = api.list(format!("/users/{author}/posts?limit=2"));
    let pages = listing.each_page(|page| {
        for item in page["items"].as_array().into_iter().flatten() {
            let keys: Vec<&str> = item
                .as_object()
                .map(|o| o.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let mut expected = [
                "commentCount",
                "createdAt",
                "likeCount",
                "postId",
                "publishedAt",
                "summary",
                "title",
                "userId",
                "username",
            ];
            expected.sort_unstable();
            let mut keys = keys;
            keys.sort_unstable();
            assert_eq!(keys, expected, "short form only, no content");
            assert_eq!(
                item["publishedAt"], item["createdAt"],
                "published as written"
            );
            seen.push(item["postId"].as_str().unwrap_or_default().to_owned());
        }
    });
    let pages = pages.await;
    assert_eq!(seen, ids);
    assert_eq!(pages, 3, "2 + 2 + 1, and no empty page at the end");

    // 150 emoji fit; 170 are cut to 200 graphemes… only when longer.
    let (_, all) = api.get(&format!("/users/{author}/posts?limit=100")).await;
    let summaries: Vec<&str> = all["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["summary"].as_str())
        .collect();
    assert_eq!(summaries.last().copied(), Some("😀".repeat(150).as_str()));
    assert_eq!(summaries[0], format!("{}…", "😀".repeat(200)));
    assert_eq!(all["nextCursor"], Value::Null);
}

#[tokio::test]
async fn users_without_posts_or_profiles_have_empty_lists() {
    let api = TestApi::start().await;
    let quiet = api.user("quiet").await;
    for user in [quiet.as_str(), "nobody-at-all"] {
        let (status, page) = api.user_posts(user).await;
        assert_eq!(status, 200);
        assert_eq!(page, json!({ "items": [], "nextCursor": null }));
    }
}

#[tokio::test]
async fn cursors_from_other_lists_or_tampered_are_refused() {
    let api = TestApi::start().await;
    let a = api.user("aaa").await;
    let b = api.user("bbb").await;
    for i in 0..3 {
        api.post(&a, &format!("a{i}"), "x").await;
        api.post(&b, &format!("b{i}"), "x").await;
    }
    let (_, page) = api.get(&format!("/users/{a}/posts?limit=1")).await;
    let cursor = page["nextCursor"].as_str().unwrap_or_default().to_owned();
    assert!(!cursor.is_empty());
    assert_eq!(
        api.get(&format!("/users/{a}/posts?limit=1&cursor={cursor}"))
            .await
            .0,
        200
    );

    let (status, body) = api
        .get(&format!("/users/{b}/posts?limit=1&cursor={cursor}"))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_cursor"))
    );
    let mut tampered = cursor.clone().into_bytes();
    tampered[5] = if tampered[5] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap_or_default();
    for bad in [
        tampered.as_str(),
        "%%%",
        "bm90LWpzb24",
        "",
        "eyJsIjoidXNlci1wb3N0czp4IiwiYSI6IiMifQ",
    ] {
        let (status, body) = api.get(&format!("/users/{a}/posts?cursor={bad}")).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("bad_cursor")),
            "{bad:?}: {body}"
        );
    }
}

/// The item under `pk`/`sk` as DynamoDB stores it (what it sizes and bills),
/// read strongly consistent, with the read units DynamoDB charged for it.
async fn raw_item(api: &TestApi, pk: String, sk: String) -> (HashMap<String, AttributeValue>, f64) {
    let store = &api.app.store;
    let out = store
        .client()
        .get_item()
        .table_name(store.table())
        .key(PK, AttributeValue::S(pk))
        .key(SK, AttributeValue::S(sk))
        .consistent_read(true)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .expect("get item");
    let units = out
        .consumed_capacity
        .and_then(|c| c.capacity_units)
        .unwrap_or_default();
    (out.item.expect("the item exists"), units)
}

/// Creates a post and returns it, without printing 200 KB when it fails.
async fn create(api: &TestApi, author: &str, title: &str, content: &str) -> (Value, PostId) {
    let (status, post) = api
        .create_post(author, json!({ "title": title, "content": content }))
        .await;
    assert_eq!(status, 201, "{}", post["error"]);
    let id = PostId::parse(post["postId"].as_str().unwrap_or_default()).expect("a post id");
    (post, id)
}

/// Every byte bound at once: a 30-character username, a title of 200 and a
/// content of 50,000 four-byte scalars still make one item far from 400 KB.
#[tokio::test]
async fn a_post_at_every_limit_fits_one_item_with_room() {
    let api = TestApi::start().await;
    let name = "w".repeat(text::USERNAME_LEN.1);
    let author = api.user(&name).await;
    let title = "😀".repeat(text::TITLE_LEN.1);
    let content = "😀".repeat(text::POST_CONTENT_LEN.1);
    assert_eq!(
        (title.len(), content.len()),
        (TITLE_MAX_BYTES, POST_CONTENT_MAX_BYTES)
    );

    let (post, id) = create(&api, &author, &title, &content).await;
    assert!(
        post["title"] == json!(title)
            && post["content"] == json!(content)
            && post["username"] == json!(name),
        "the post comes back as written"
    );
    let (status, got) = api.get_post(&id.to_string()).await;
    assert_eq!(status, 200);
    assert!(got == post, "read back equal");

    // The content item holds the text; the post item, what lists show.
    let (content, charged) =
        raw_item(&api, keys::post_pk(&id), keys::POST_CONTENT_SK.to_owned()).await;
    let size = item_size(&content);
    println!(
        "a post at every limit: its content is a {size}-byte item: {} WCU to write, {} RCU \
         to read strongly consistent ({charged} charged), {} eventually",
        write_units(size),
        read_units(size, true),
        read_units(size, false)
    );
    assert_eq!(
        charged,
        read_units(size, true),
        "DynamoDB agrees on the size"
    );
    assert!(size > POST_CONTENT_MAX_BYTES);
    assert!(size < 300_000, "{size} bytes leaves too little of 400 KB");
    let (item, _) = raw_item(&api, keys::post_pk(&id), POST_SK.to_owned()).await;
    let small = item_size(&item);
    println!("and its post item {small} bytes");
    assert!(small > TITLE_MAX_BYTES, "{small}");
    assert!(
        small < 3 * 1024,
        "a like rewrites this item: it stays a few KB ({small})"
    );
    let summary = format!("{}…", "😀".repeat(text::SUMMARY_GRAPHEMES));
    assert_eq!(item.get("summary"), Some(&AttributeValue::S(summary)));
}

/// One grapheme cluster can be 200 KB; what is copied of it is not.
#[tokio::test]
async fn summaries_are_bounded_in_bytes_wherever_they_are_copied() {
    let api = TestApi::start().await;
    let author = api.user(&"v".repeat(text::USERNAME_LEN.1)).await;
    let title = "😀".repeat(text::TITLE_LEN.1);
    // One letter and 49,999 variation selectors: one cluster of 199,997 bytes.
    let one_cluster = format!("a{}", "\u{E0100}".repeat(49_999));
    // A first cluster of 1,021 bytes: with `…`, a summary of exactly 1,024.
    let edge_cluster = format!("e{}", "\u{301}".repeat(510));
    let cases = [
        (one_cluster, "…".to_owned()),
        (
            format!("{edge_cluster} and more"),
            format!("{edge_cluster}…"),
        ),
    ];

    let mut expected = Vec::new();
    for (content, summary) in &cases {
        let (post, id) = create(&api, &author, &title, content).await;
        assert!(post["content"] == json!(content), "content kept whole");
        // The response is the full post, which has no summary: the stored
        // item is what GSI1 and the fan-out copy it from.
        let (item, _) = raw_item(&api, keys::post_pk(&id), POST_SK.to_owned()).await;
        assert_eq!(
            item.get("summary"),
            Some(&AttributeValue::S(summary.clone()))
        );
        assert!(summary.len() <= SUMMARY_MAX_BYTES);
        expected.push((id.to_string(), summary.clone()));
    }
    expected.reverse(); // lists are newest first
    let summaries = |page: &Value| -> Vec<(String, String)> {
        page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| {
                let field = |name: &str| i[name].as_str().unwrap_or_default().to_owned();
                (field("postId"), field("summary"))
            })
            .collect()
    };

    // Q3, answered from GSI1's projection.
    let (status, page) = api.user_posts(&author).await;
    assert_eq!(status, 200);
    assert_eq!(summaries(&page), expected);

    // Q6, the fan-out's copies.
    let mut poller = api.poller();
    api.settle(&mut poller).await;
    let (status, feed) = api.get_feed().await;
    assert_eq!(status, 200);
    assert_eq!(summaries(&feed), expected);

    // The largest feed entry there can be (username, title and summary at
    // their byte bounds): a full feed is far below a 1 MB Query page.
    let mut largest = 0;
    for (id, _) in &expected {
        let id = PostId::parse(id).expect("a post id");
        let (entry, _) = raw_item(&api, FEED_PK.to_owned(), keys::feed_sk(&id)).await;
        largest = largest.max(item_size(&entry));
    }
    println!(
        "the largest feed entry is {largest} bytes; {FEED_CAPACITY} of them are {} bytes",
        largest * FEED_CAPACITY
    );
    assert!(largest * FEED_CAPACITY < 1024 * 1024 / 4, "{largest} bytes");
}

#[tokio::test]
async fn content_is_markdown_rendered_safely_and_the_summary_is_its_plain_text() {
    let api = TestApi::start().await;
    let author = api.user("markdown").await;
    let content = "# Hello\n\nSome **bold** and a [link](https://example.com).\n\n\
                   <img src=x onerror=alert(1)> [bad](javascript:alert(1))";
    let body = json!({ "title": "Formatted", "content": content });
    let create = || api.create_post_keyed(&author, "markdown-key", &body);
    let (status, created, _) = create().await;
    assert_eq!(status, 201, "{created}");
    let html = "<h1>Hello</h1>\n<p>Some <strong>bold</strong> and a \
                <a href=\"https://example.com\" rel=\"nofollow ugc noopener\">link</a>.</p>\n\
                <p><img> <a rel=\"nofollow ugc noopener\">bad</a></p>\n";
    assert_eq!(created["content"], content, "the Markdown as written");
    assert_eq!(created["contentHtml"], html);
    let id = created["postId"].as_str().unwrap_or_default().to_owned();
    let (status, got) = api.get_post(&id).await;
    assert_eq!((status, &got), (200, &created));

    // A retry under the same key answers the first answer, HTML included.
    let (status, replayed, was_replayed) = create().await;
    assert_eq!((status, &replayed, was_replayed), (201, &created, true));

    let (_, list) = api.user_posts(&author).await;
    assert_eq!(
        list["items"][0]["summary"], "Hello\nSome bold and a link.\nbad",
        "{list}"
    );

    let (status, edited) = api
        .edit_post(
            &author,
            &id,
            json!({ "content": "~~struck~~\n\n| x | y |\n|---|--:|\n| 1 | 2 |" }),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    let html = edited["contentHtml"].as_str().unwrap_or_default();
    assert!(
        html.starts_with("<p><del>struck</del></p>\n<table>"),
        "{html}"
    );
    assert!(
        html.contains("<th style=\"text-align:right\">y</th>"),
        "{html}"
    );
    assert!(html.contains("<td>1</td>"), "{html}");
    let (_, got) = api.get_post(&id).await;
    assert_eq!(got["contentHtml"], edited["contentHtml"]);
    let (_, list) = api.user_posts(&author).await;
    assert_eq!(list["items"][0]["summary"], "struck\nx y\n1 2");
}
