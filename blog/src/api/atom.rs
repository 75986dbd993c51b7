//! Atom 1.0 feeds (RFC 4287) of the lists, for feed readers:
//! `GET /feed.atom` (Q6's newest posts), `GET /users/{userId}/posts.atom`
//! (Q3's first page) and `GET /tags/{tag}/posts.atom` (a tag's first page). Each reads exactly what its JSON list reads (the same
//! Query, the feed through the same per-instance cache) and answers the
//! short forms as entries: title, author, link, published and updated time,
//! and the plain-text summary. Documents are written by `atom_syndication`.
//!
//! An entry's `id` is its post id as a URN ([`crate::ids::PostId::urn`]):
//! the same wherever the API is served from. Its link is the post's URL on
//! the writer's site when `SITE_URL` is set (`<SITE_URL>/posts/<postId>`),
//! else the post's URL on this API. An entry's `published` is when the post
//! was published, its `updated` when it was last edited (its `updatedAt`;
//! its publication when that is later, or when the list's entry predates
//! the edit times the feed's and the tags' entries keep). The feed's own
//! `updated` is its newest entry's; an empty feed's, the time of the answer
//! (it has no entry to tell when it last changed). Answers carry an `ETag`
//! (the document's hash: it changes whenever the document does) and honour
//! `If-None-Match` (304), as feed readers poll with them.
//!
//! Every document is XML 1.0 whatever the posts hold: titles and summaries
//! are readable text ([`crate::text::is_readable`]: what the rules let in,
//! and what an older post may hold is dropped here), and the document
//! itself keeps only XML's characters ([`crate::text::is_xml_char`]), so
//! that no strict reader refuses the feed for one post.

use atom_syndication::{Entry, Feed, FixedDateTime, Link, Person, Text, extension::ExtensionMap};
use lambda_http::Request;

use super::{ApiError, ApiResult, App, ErrorCode, Reply, feed, request};
use crate::{ids::UserId, model::PostSummary, text, timestamp};

/// The environment variable naming the writer's site, whose `/posts/<postId>`
/// pages show the posts (optional).
pub const SITE_URL: &str = "SITE_URL";

/// What a feed document says about itself.
struct Document<'a> {
    title: String,
    /// The feed's own absolute URL: its `id` and its `self` link.
    url: String,
    /// Where a post's page is, `<base>/posts/<postId>`, and its type: the
    /// writer's site's HTML page, or the post on this API.
    post_base: (&'a str, &'static str),
    /// The page the feed stands for, if there is one, and its type.
    alternate: Option<(String, &'static str)>,
}

/// `GET /feed.atom`: the newest posts (all the feed holds, at most 100);
/// it reads no query.
pub async fn get_feed_atom(app: &App, req: Request) -> ApiResult {
    let origin = request::origin(&req);
    let site = site_url();
    let posts = feed::newest(app, app.store.feed_capacity()).await?;
    let document = Document {
        title: "Newest posts".to_owned(),
        url: format!("{origin}/feed.atom"),
        post_base: post_base(site.as_deref(), &origin),
        alternate: site.clone().map(|site| (site, "text/html")),
    };
    let xml = render(&document, &posts, &timestamp::now())?;
    Reply::atom(xml, super::Freshness::Feed).unless_none_match(&req)
}

/// `GET /users/{userId}/posts.atom`: the user's newest posts (Q3's first
/// page, `limit` as there). A user with no posts, or no profile, has an
/// empty feed, as their list is empty.
pub async fn list_user_posts_atom(app: &App, req: Request) -> ApiResult {
    let user = request::path_id(&req, "userId", UserId::parse)?;
    let (limit, cursor) = request::page(&req)?;
    if cursor.is_some() {
        return Err(ApiError::bad_request(
            ErrorCode::BadCursor,
            "a feed takes no cursor: it is the newest posts",
        ));
    }
    let requests = app.store.requests();
    let page = requests.list_user_posts(&user, limit, None).await?;
    // Q3's index holds no edit times: the posts' own items do.
    let ids: Vec<_> = page.items.iter().map(|p| p.post_id).collect();
    let mut edited = requests.edit_times(&ids).await?;
    let posts: Vec<PostSummary> = page
        .items
        .into_iter()
        .map(|p| {
            let at = edited.remove(&p.post_id);
            p.edited_at(at)
        })
        .collect();
    let origin = request::origin(&req);
    let site = site_url();
    let path = format!("/users/{}/posts", iri_segment(user.as_str()));
    let author = posts
        .first()
        .map_or_else(|| user.as_str().to_owned(), |p| p.username.to_string());
    let document = Document {
        title: format!("Posts by {author}"),
        url: format!("{origin}{path}.atom"),
        post_base: post_base(site.as_deref(), &origin),
        // The same list as JSON (Q3).
        alternate: Some((format!("{origin}{path}"), super::JSON)),
    };
    let xml = render(&document, &posts, &timestamp::now())?;
    Reply::atom(xml, super::Freshness::Shared).unless_none_match(&req)
}

/// `GET /tags/{tag}/posts.atom`: the tag's newest posts (its list's first
/// page, `limit` as there). A tag no post has is an empty feed.
pub async fn list_tag_posts_atom(app: &App, req: Request) -> ApiResult {
    let tag = super::tags::path_tag(&req)?;
    let (limit, cursor) = request::page(&req)?;
    if cursor.is_some() {
        return Err(ApiError::bad_request(
            ErrorCode::BadCursor,
            "a feed takes no cursor: it is the newest posts",
        ));
    }
    let page = app.store.requests().tag_posts(&tag, limit, None).await?;
    let origin = request::origin(&req);
    let site = site_url();
    let path = format!("/tags/{tag}/posts");
    let document = Document {
        title: format!("Posts tagged {tag}"),
        url: format!("{origin}{path}.atom"),
        post_base: post_base(site.as_deref(), &origin),
        alternate: Some((format!("{origin}{path}"), super::JSON)),
    };
    let xml = render(&document, &page.items, &timestamp::now())?;
    Reply::atom(xml, super::Freshness::Shared).unless_none_match(&req)
}

/// `SITE_URL` without its trailing `/`, when it is an http(s) URL.
fn site_url() -> Option<String> {
    std::env::var(SITE_URL)
        .ok()
        .map(|url| url.trim_end_matches('/').to_owned())
        .filter(|url| url.starts_with("https://") || url.starts_with("http://"))
}

/// Where posts' pages are: on the writer's site, else on this API (JSON).
fn post_base<'a>(site: Option<&'a str>, origin: &'a str) -> (&'a str, &'static str) {
    match site {
        Some(site) => (site, "text/html"),
        None => (origin, super::JSON),
    }
}

/// A user id as one IRI path segment: its `|` percent-encoded (the other
/// characters a user id may have are allowed as they are).
fn iri_segment(id: &str) -> String {
    id.replace('|', "%7C")
}

/// The Atom document of `posts`, newest first, answered at `now` (an RFC
/// 3339 time: an empty feed's `updated`).
fn render(document: &Document<'_>, posts: &[PostSummary], now: &str) -> Result<String, ApiError> {
    let entries = posts
        .iter()
        .map(|post| entry(document.post_base, post))
        .collect::<Result<Vec<_>, _>>()?;
    // The feed changed when its newest entry did. An empty one has nothing
    // to tell when: it is as of the answer.
    let updated = match entries.iter().map(|e| e.updated).max() {
        Some(newest) => newest,
        None => time_of(now)?,
    };
    let mut links = vec![link("self", &document.url, "application/atom+xml")];
    if let Some((page, mime_type)) = &document.alternate {
        links.push(link("alternate", page, mime_type));
    }
    let feed = Feed {
        title: Text::plain(text::readable(&document.title)),
        id: document.url.clone(),
        updated,
        links,
        entries,
        ..Feed::default()
    };
    Ok(xml_chars(feed.to_string()))
}

/// `document` with only the characters XML 1.0 allows (the markup is
/// ASCII: only text can hold others). The fields are readable text already;
/// this is the last word, whatever a field was given.
fn xml_chars(document: String) -> String {
    if document.chars().all(text::is_xml_char) {
        document
    } else {
        document.chars().filter(|c| text::is_xml_char(*c)).collect()
    }
}

fn entry(post_base: (&str, &'static str), post: &PostSummary) -> Result<Entry, ApiError> {
    let (base, mime_type) = post_base;
    let published = time_of(&post.published_at)?;
    // Published after its last edit: a draft's or a scheduled post's
    // publication is its newest change.
    let updated = match &post.updated_at {
        Some(edited) => time_of(edited)?.max(published),
        None => published,
    };
    Ok(Entry {
        title: Text::plain(text::readable(&post.title)),
        id: post.post_id.urn(),
        updated,
        published: Some(published),
        authors: vec![Person {
            name: text::readable(post.username.as_str()).into_owned(),
            email: None,
            uri: None,
            extensions: ExtensionMap::default(),
        }],
        links: vec![link(
            "alternate",
            &format!("{base}/posts/{}", post.post_id),
            mime_type,
        )],
        summary: Some(Text::plain(text::readable(&post.summary))),
        ..Entry::default()
    })
}

fn link(rel: &str, href: &str, mime_type: &str) -> Link {
    Link {
        href: href.to_owned(),
        rel: rel.to_owned(),
        mime_type: Some(mime_type.to_owned()),
        ..Link::default()
    }
}

/// A stored RFC 3339 time as Atom's date construct.
fn time_of(stored: &str) -> Result<FixedDateTime, ApiError> {
    FixedDateTime::parse_from_rfc3339(stored)
        .map_err(|e| ApiError::Internal(format!("stored time {stored:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{api::JSON, ids::PostId, text::Username};

    fn post(title: &str, summary: &str, at: &str) -> PostSummary {
        PostSummary {
            post_id: PostId::generate(),
            user_id: UserId::parse("user-1").expect("an id"),
            username: Username::parse("writer").expect("a name"),
            title: title.to_owned(),
            summary: summary.to_owned(),
            comment_count: 3,
            like_count: 4,
            created_at: at.to_owned(),
            published_at: at.to_owned(),
            updated_at: None,
        }
    }

    fn document() -> Document<'static> {
        Document {
            title: "Newest posts".to_owned(),
            url: "http://127.0.0.1:9000/feed.atom".to_owned(),
            post_base: ("http://127.0.0.1:9000", JSON),
            alternate: None,
        }
    }

    const NOW: &str = "2026-12-01T08:00:00.000Z";

    #[test]
    fn a_document_escapes_what_posts_say_and_is_newest_first() {
        let posts = [
            post(
                "<b>Newer</b> & more",
                "a < b\n]]>",
                "2026-11-27T10:00:00.123Z",
            ),
            post("Older", "plain", "2026-11-26T10:00:00Z"),
        ];
        let document = Document {
            title: "Posts by writer".to_owned(),
            url: "https://api.example/users/user-1/posts.atom".to_owned(),
            post_base: ("https://blog.example", "text/html"),
            alternate: None,
        };
        let xml = render(&document, &posts, NOW).expect("rendered");
        assert!(
            xml.contains("<title>&lt;b&gt;Newer&lt;/b&gt; &amp; more</title>"),
            "{xml}"
        );
        assert!(xml.contains("a &lt; b\n]]&gt;"), "{xml}");
        assert!(
            xml.contains(&format!("<id>{}</id>", posts[0].post_id.urn())),
            "{xml}"
        );
        assert!(
            xml.contains(&format!(
                "href=\"https://blog.example/posts/{}\"",
                posts[0].post_id
            )),
            "{xml}"
        );
        assert!(
            xml.contains("<updated>2026-11-27T10:00:00.123+00:00</updated>"),
            "{xml}"
        );
        assert!(xml.find("Older").unwrap_or(0) > xml.find("Newer").unwrap_or(usize::MAX));
    }

    #[test]
    fn an_empty_feed_is_dated_at_its_answer() {
        let xml = render(&document(), &[], NOW).expect("rendered");
        assert!(
            xml.contains("<updated>2026-12-01T08:00:00+00:00</updated>"),
            "{xml}"
        );
        assert!(!xml.contains("1970"), "{xml}");
        assert!(
            xml.contains("<id>http://127.0.0.1:9000/feed.atom</id>"),
            "{xml}"
        );
    }

    #[test]
    fn an_entry_is_updated_at_its_last_edit_and_the_feed_at_its_newest() {
        let mut edited = post("Edited", "s", "2026-11-26T10:00:00Z");
        edited.updated_at = Some("2026-11-28T09:30:00.500Z".to_owned());
        let mut newer = post("Newer", "s", "2026-11-27T10:00:00Z");
        // Edited before it was published (a draft): published is newer.
        newer.updated_at = Some("2026-11-20T00:00:00Z".to_owned());
        let xml = render(&document(), &[newer, edited], NOW).expect("rendered");
        let updated: Vec<&str> = xml
            .split("<updated>")
            .skip(1)
            .filter_map(|rest| rest.split('<').next())
            .collect();
        // The feed's, then each entry's.
        assert_eq!(
            updated,
            [
                "2026-11-28T09:30:00.500+00:00",
                "2026-11-27T10:00:00+00:00",
                "2026-11-28T09:30:00.500+00:00"
            ],
            "{xml}"
        );
        assert!(
            xml.contains("<published>2026-11-26T10:00:00+00:00</published>"),
            "{xml}"
        );
    }

    #[test]
    fn a_document_holds_only_xml_characters_whatever_posts_hold() {
        // What posts stored before the rules refused them may hold: control
        // characters, noncharacters (U+FFFF is no XML character at all).
        let hostile =
            "a\u{1}b\u{8}c\u{b}d\u{1f}e\u{7f}f\u{85}g\u{fdd0}h\u{fffe}i\u{ffff}j\u{10ffff}k";
        let xml = render(
            &Document {
                title: format!("Posts by {hostile}"),
                ..document()
            },
            &[post(hostile, hostile, "2026-11-27T10:00:00Z")],
            NOW,
        )
        .expect("rendered");
        assert!(xml.chars().all(text::is_readable), "{xml:?}");
        assert!(xml.contains("<title>Posts by abcdefghijk</title>"), "{xml}");
        assert!(xml.contains("<title>abcdefghijk</title>"), "{xml}");
        assert!(xml.contains("<summary>abcdefghijk</summary>"), "{xml}");
        // Tabs and line breaks are XML, and stay.
        let xml = render(&document(), &[post("t", "one\ttwo\nthree", NOW)], NOW).expect("rendered");
        assert!(xml.contains("<summary>one\ttwo\nthree</summary>"), "{xml}");
    }

    #[test]
    fn the_last_word_on_a_document_is_xml_s_characters() {
        let document = "<a>x\u{0}\u{1}\u{ffff}\u{fffe}y\u{85}\u{fdd0}\t\n\r</a>".to_owned();
        assert_eq!(xml_chars(document), "<a>xy\u{85}\u{fdd0}\t\n\r</a>");
        let clean = "<a>日本\u{10ffff}</a>".to_owned();
        assert_eq!(xml_chars(clean.clone()), clean);
    }

    #[test]
    fn a_user_id_is_one_path_segment() {
        assert_eq!(iri_segment("github|123"), "github%7C123");
        assert_eq!(iri_segment("a.b@c-d_e"), "a.b@c-d_e");
    }
}
