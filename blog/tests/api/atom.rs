//! The Atom feeds (`GET /feed.atom`, `GET /users/{userId}/posts.atom`), read
//! over HTTP and parsed by a feed reader's parser (feed-rs), not by the crate
//! that wrote them.

use feed_rs::model::{Feed, FeedType};

use crate::support::TestApi;

/// A feed as a reader gets it: status, content type, `ETag`, and the
/// parsed document (`None` for a 304 or an error).
async fn read_feed(
    api: &TestApi,
    path: &str,
    etag: Option<&str>,
) -> (u16, String, String, Option<Feed>) {
    let mut req = api.http.get(api.url(path));
    if let Some(etag) = etag {
        req = req.header("if-none-match", etag);
    }
    let resp = req.send().await.expect("the gateway answers");
    let status = resp.status().as_u16();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (content_type, tag) = (header("content-type"), header("etag"));
    let body = resp.bytes().await.expect("a body");
    let feed = (status == 200).then(|| feed_rs::parser::parse(&body[..]).expect("a valid feed"));
    (status, content_type, tag, feed)
}

#[tokio::test]
async fn a_users_posts_feed_is_atom_a_reader_parses_newest_first() {
    let api = TestApi::start().await;
    let author = api.user("atom_writer").await;
    let first = api
        .post(&author, "First & <best>", "Hello **world**.")
        .await;
    let second = api.post(&author, "Second", "# Heading\n\nBody").await;

    let path = format!("/users/{author}/posts.atom");
    let (status, content_type, etag, feed) = read_feed(&api, &path, None).await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "application/atom+xml")
    );
    let feed = feed.expect("parsed");
    assert_eq!(feed.feed_type, FeedType::Atom);
    assert_eq!(
        feed.title.map(|t| t.content).as_deref(),
        Some("Posts by atom_writer")
    );
    assert_eq!(feed.id, format!("{}{path}", api.base));
    let entries = &feed.entries;
    assert_eq!(entries.len(), 2);
    let titles: Vec<_> = entries
        .iter()
        .map(|e| e.title.as_ref().map(|t| t.content.as_str()))
        .collect();
    assert_eq!(
        titles,
        [Some("Second"), Some("First & <best>")],
        "newest first, text as written"
    );
    for (entry, id) in entries.iter().zip([&second, &first]) {
        let (_, post) = api.get(&format!("/posts/{id}")).await;
        assert_eq!(
            entry.authors.first().and_then(|a| a.name.as_deref()),
            Some("atom_writer")
        );
        assert_eq!(
            entry.links.first().map(|l| l.href.as_str()),
            Some(format!("{}/posts/{id}", api.base).as_str())
        );
        let published = entry
            .published
            .expect("published")
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        assert_eq!(published, post["createdAt"].as_str().unwrap_or_default());
        assert_eq!(entry.updated, entry.published);
        assert!(entry.id.starts_with("urn:uuid:"), "{}", entry.id);
    }
    let summaries: Vec<_> = entries
        .iter()
        .map(|e| e.summary.as_ref().map(|t| t.content.as_str()))
        .collect();
    assert_eq!(
        summaries,
        [Some("Heading\nBody"), Some("Hello world.")],
        "the plain-text summaries"
    );

    // A reader polling with the ETag: 304 until a post is added.
    let (status, _, again, feed) = read_feed(&api, &path, Some(&etag)).await;
    assert_eq!(
        (status, again.as_str(), feed.is_none()),
        (304, etag.as_str(), true)
    );
    api.post(&author, "Third", "more").await;
    let (status, _, newer, feed) = read_feed(&api, &path, Some(&etag)).await;
    assert_eq!(status, 200);
    assert_ne!(newer, etag);
    assert_eq!(feed.map(|f| f.entries.len()), Some(3));

    // `limit` as Q3; a cursor is refused.
    let (status, _, _, feed) = read_feed(&api, &format!("{path}?limit=1"), None).await;
    assert_eq!((status, feed.map(|f| f.entries.len())), (200, Some(1)));
    let (status, body) = api.get(&format!("{path}?cursor=abc")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_cursor"))
    );
    let (status, body) = api.get("/users/bad%23id/posts.atom").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_id"))
    );
}

#[tokio::test]
async fn a_user_without_posts_has_an_empty_valid_feed() {
    let api = TestApi::start().await;
    let (status, _, _, feed) = read_feed(&api, "/users/nobody/posts.atom", None).await;
    assert_eq!(status, 200);
    let feed = feed.expect("parsed");
    assert!(feed.entries.is_empty());
    assert_eq!(
        feed.title.map(|t| t.content).as_deref(),
        Some("Posts by nobody")
    );
}

#[tokio::test]
async fn the_front_page_feed_is_the_json_feed_as_atom() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let (status, _, _, feed) = read_feed(&api, "/feed.atom", None).await;
    assert_eq!((status, feed.map(|f| f.entries.len())), (200, Some(0)));

    let writer = api.user("front_writer").await;
    let other = api.user("front_other").await;
    api.post(&writer, "One", "one").await;
    api.post(&other, "Two", "two").await;
    api.settle(&mut poller).await;

    let (_, json) = api.get("/feed?limit=100").await;
    let (status, _, _, feed) = read_feed(&api, "/feed.atom", None).await;
    assert_eq!(status, 200);
    let feed = feed.expect("parsed");
    let from_json: Vec<_> = json["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["title"].as_str().unwrap_or_default().to_owned(),
                p["username"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let from_atom: Vec<_> = feed
        .entries
        .iter()
        .map(|e| {
            (
                e.title
                    .as_ref()
                    .map(|t| t.content.clone())
                    .unwrap_or_default(),
                e.authors
                    .first()
                    .and_then(|a| a.name.clone())
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(from_atom, from_json);
    assert_eq!(from_atom.len(), 2);

    // It reads no query: a limit changes nothing.
    let (status, _, _, limited) = read_feed(&api, "/feed.atom?limit=1", None).await;
    assert_eq!((status, limited.map(|f| f.entries.len())), (200, Some(2)));
}

#[tokio::test]
async fn a_tags_feed_lists_its_posts_as_atom() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("atom_tagger").await;
    let (status, _) = api
        .call(
            "POST",
            "/posts",
            Some(&author),
            Some(serde_json::json!({ "title": "Tagged", "content": "x", "tags": ["Feeds"] })),
        )
        .await;
    assert_eq!(status, 201);
    api.settle(&mut poller).await;
    let (status, content_type, _, feed) = read_feed(&api, "/tags/feeds/posts.atom", None).await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "application/atom+xml")
    );
    let feed = feed.expect("parsed");
    assert_eq!(
        feed.title.map(|t| t.content).as_deref(),
        Some("Posts tagged feeds")
    );
    let titles: Vec<_> = feed
        .entries
        .iter()
        .filter_map(|e| e.title.as_ref())
        .map(|t| t.content.as_str())
        .collect();
    assert_eq!(titles, ["Tagged"]);
    let (status, _, _, empty) = read_feed(&api, "/tags/none/posts.atom", None).await;
    assert_eq!((status, empty.map(|f| f.entries.len())), (200, Some(0)));
}
