//! The Atom feeds (`GET /feed.atom`, `GET /users/{userId}/posts.atom`,
//! `GET /tags/{tag}/posts.atom`), read over HTTP and parsed by a feed
//! reader's parser (feed-rs), not by the crate that wrote them; and, with
//! posts holding what is not text, by a strict XML 1.0 parser and RFC 4287's
//! grammar (infra/check_atom.py, lxml).

use std::{path::PathBuf, process::Command};

use feed_rs::model::{Feed, FeedType};
use serde_json::json;

use crate::support::{JWT_SUB, TestApi, decode};

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
        let (_, post) = api.get_post(id).await;
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
        .create_post(
            &author,
            serde_json::json!({ "title": "Tagged", "content": "x", "tags": ["Feeds"] }),
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

/// The workspace's root (the tools' virtualenv and infra/ are there).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// infra/check_atom.py on `documents`: its output, and whether they all
/// passed. It runs with `ATOM_CHECK_PYTHON` if set, else the tools'
/// virtualenv's Python, which has lxml (infra/test.sh installs it before the
/// tests; by hand: `source infra/lib.sh && ensure_tools lxml`).
fn strict_atom_check(documents: &[(String, Vec<u8>)]) -> (String, bool) {
    let python = std::env::var_os("ATOM_CHECK_PYTHON")
        .map_or_else(|| root().join(".local/venv/bin/python"), PathBuf::from);
    let dir = std::env::temp_dir().join(format!("atom-check-{}", ulid::Ulid::generate()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let mut files = Vec::new();
    for (name, body) in documents {
        let file = dir.join(format!("{name}.xml"));
        std::fs::write(&file, body).expect("a document written");
        files.push(file);
    }
    let output = Command::new(&python)
        .arg(root().join("infra/check_atom.py"))
        .args(&files)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (the tools' Python with lxml: `source infra/lib.sh && ensure_tools lxml`)",
                python.display()
            )
        });
    let _ = std::fs::remove_dir_all(&dir);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (said, output.status.success())
}

/// Whether `text` is text a reader reads: no control character but tab and
/// line breaks, no noncharacter.
fn readable(text: &str) -> bool {
    text.chars().all(|c| {
        let code = u32::from(c);
        let control = c.is_control() && !matches!(c, '\t' | '\n' | '\r');
        !control && !(0xFDD0..=0xFDEF).contains(&code) && code & 0xFFFE != 0xFFFE
    })
}

/// A document as a reader gets it: its bytes and its `ETag`.
async fn raw_feed(api: &TestApi, path: &str) -> (Vec<u8>, String) {
    let resp = api.http.get(api.url(path)).send().await.expect("answered");
    assert_eq!(resp.status().as_u16(), 200, "{path}");
    let etag = resp
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (resp.bytes().await.expect("a body").to_vec(), etag)
}

/// Characters that are not text, as Markdown character references: C0 and
/// C1 controls, DEL, noncharacters, a surrogate, NUL and past Unicode.
const NOT_TEXT: &str = "&#1;&#x8;&#xB;&#xC;&#x1F;&#x7F;&#x80;&#x85;&#x9F;\
                        &#xFDD0;&#xFDEF;&#xFFFE;&#xFFFF;&#x1FFFF;&#x10FFFF;&#xD800;&#0;&#x110000;";

#[tokio::test]
async fn every_feed_is_strict_xml_and_valid_atom_whatever_posts_hold() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("hostile_writer").await;

    // Refused at input, nothing written: what is not text, written raw.
    for (field, title, content) in [
        ("title", "a\u{ffff}b", "x"),
        ("title", "a\u{fffe}b", "x"),
        ("title", "a\u{fdd0}b", "x"),
        ("title", "a\u{1}b", "x"),
        ("title", "a\u{85}b", "x"),
        ("content", "t", "a\u{1}b"),
        ("content", "t", "a\u{ffff}b"),
        ("content", "t", "a\u{10ffff}b"),
    ] {
        let body = json!({ "title": title, "content": content, "tags": ["hostile"] });
        let (status, answer) = api.create_post(&author, body).await;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(
            (
                status,
                answer["error"]["code"].as_str(),
                message.starts_with(field)
            ),
            (400, Some("invalid_field"), true),
            "{title:?} {content:?}: {answer}"
        );
    }
    // A lone surrogate is no Unicode text at all: the JSON is refused.
    for raw in [
        r#"{"title": "a\ud800b", "content": "x"}"#,
        r#"{"title": "t", "content": "a\udfffb"}"#,
    ] {
        let resp = api
            .http
            .post(api.url("/posts"))
            .header(JWT_SUB, &author)
            .body(raw)
            .send()
            .await
            .expect("answered");
        let (status, answer) = decode(resp).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (400, Some("bad_json")),
            "{raw}: {answer}"
        );
    }
    let (status, answer) = api.sign_up("odd-user", "a\u{1}bc").await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (400, Some("invalid_field"))
    );
    let (_, listed) = api.user_posts(&author).await;
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(0),
        "{listed}"
    );

    // What Markdown decodes, and what is not prose: accepted, left out.
    let title = "<Feeds> & \"quotes\" ]]> \u{2028} \u{10fffd} \u{fffd} 字";
    let content = format!(
        "Hello {NOT_TEXT} <script>steal(document.cookie)</script><style>p {{ x: y }}</style> world\n\n\
         <b title=\"{NOT_TEXT}\">bold {NOT_TEXT}</b>\n\n```\ncode {NOT_TEXT}\n```"
    );
    let (status, created) = api
        .create_post(
            &author,
            json!({ "title": title, "content": content, "tags": ["hostile", "feeds"] }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let post = created["postId"].as_str().unwrap_or_default().to_owned();
    let (_, read) = api.get_post(&post).await;
    assert_eq!(
        read["content"].as_str(),
        Some(content.as_str()),
        "as written"
    );
    let html = read["contentHtml"].as_str().unwrap_or_default();
    assert!(readable(html) && html.contains("world"), "{html:?}");
    assert!(!html.contains("steal"), "{html:?}");

    // Edited (the content alone): its entries' `updated` moves, `published`
    // does not.
    let edited_content = format!("{content}\n\nEdited {NOT_TEXT}.");
    let (_, etag_before) = raw_feed(&api, &format!("/users/{author}/posts.atom")).await;
    let (status, edited) = api
        .edit_post(&author, &post, json!({ "content": edited_content }))
        .await;
    assert_eq!(status, 200, "{edited}");
    let (_, read) = api.get_post(&post).await;
    let (published, updated) = (
        read["publishedAt"].as_str().unwrap_or_default().to_owned(),
        read["updatedAt"].as_str().unwrap_or_default().to_owned(),
    );
    assert!(updated > published, "{read}");
    api.settle(&mut poller).await;

    let feeds = [
        ("front", "/feed.atom".to_owned()),
        ("user", format!("/users/{author}/posts.atom")),
        ("tag", "/tags/hostile/posts.atom".to_owned()),
        ("empty", "/tags/no-post-has-it/posts.atom".to_owned()),
    ];
    let mut documents = Vec::new();
    for (name, path) in &feeds {
        let (body, etag) = raw_feed(&api, path).await;
        if *name == "user" {
            assert_ne!(etag, etag_before, "an edit is a new document");
        }
        let feed = feed_rs::parser::parse(&body[..]).expect("a feed");
        if *name != "empty" {
            assert_eq!(feed.entries.len(), 1, "{name}");
            let entry = &feed.entries[0];
            let at = |t: Option<chrono::DateTime<chrono::Utc>>| {
                t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            };
            assert_eq!(
                at(entry.published).as_deref(),
                Some(published.as_str()),
                "{name}"
            );
            assert_eq!(
                at(entry.updated).as_deref(),
                Some(updated.as_str()),
                "{name}"
            );
            assert_eq!(
                at(feed.updated).as_deref(),
                Some(updated.as_str()),
                "{name}"
            );
            let summary = entry
                .summary
                .as_ref()
                .map(|s| s.content.clone())
                .unwrap_or_default();
            assert!(
                summary.starts_with("Hello") && summary.contains("world"),
                "{name}: {summary:?}"
            );
            assert!(
                !summary.contains("steal") && !summary.contains("x: y"),
                "{name}: {summary:?}"
            );
            let text = String::from_utf8_lossy(&body);
            assert!(readable(&text), "{name}: {text:?}");
        } else {
            assert!(feed.entries.is_empty());
            let text = String::from_utf8_lossy(&body);
            assert!(!text.contains("1970-01-01"), "{text}");
        }
        documents.push(((*name).to_owned(), body));
    }
    // The JSON lists' summaries are the feeds': no control character.
    for list in [
        "/feed?limit=100",
        "/tags/hostile/posts",
        &format!("/users/{author}/posts"),
    ] {
        let (_, page) = api.get(list).await;
        let summary = page["items"][0]["summary"].as_str().unwrap_or_default();
        assert!(
            readable(summary) && summary.starts_with("Hello"),
            "{list}: {summary:?}"
        );
    }

    let (said, passed) = strict_atom_check(&documents);
    assert!(passed, "{said}");
    assert!(said.contains("atom: 4 passed, 0 failed"), "{said}");
}
