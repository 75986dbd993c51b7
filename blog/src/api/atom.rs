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
//! else the post's URL on this API. The short form carries no edit time, so
//! an entry's `updated` is its publication time. Answers carry an `ETag` and
//! honour `If-None-Match` (304), as feed readers poll with them.

use atom_syndication::{Entry, Feed, FixedDateTime, Link, Person, Text, extension::ExtensionMap};
use lambda_http::Request;

use super::{ApiError, ApiResult, App, ErrorCode, Reply, feed, request};
use crate::{ids::UserId, model::PostSummary};

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
    Reply::atom(render(&document, &posts)?, super::Freshness::Feed).unless_none_match(&req)
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
    let page = app
        .store
        .requests()
        .list_user_posts(&user, limit, None)
        .await?;
    let origin = request::origin(&req);
    let site = site_url();
    let path = format!("/users/{}/posts", iri_segment(user.as_str()));
    let author = page
        .items
        .first()
        .map_or_else(|| user.as_str().to_owned(), |p| p.username.to_string());
    let document = Document {
        title: format!("Posts by {author}"),
        url: format!("{origin}{path}.atom"),
        post_base: post_base(site.as_deref(), &origin),
        // The same list as JSON (Q3).
        alternate: Some((format!("{origin}{path}"), super::JSON)),
    };
    Reply::atom(render(&document, &page.items)?, super::Freshness::Shared).unless_none_match(&req)
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
    Reply::atom(render(&document, &page.items)?, super::Freshness::Shared).unless_none_match(&req)
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

/// The Atom document of `posts`, newest first.
fn render(document: &Document<'_>, posts: &[PostSummary]) -> Result<String, ApiError> {
    let entries = posts
        .iter()
        .map(|post| entry(document.post_base, post))
        .collect::<Result<Vec<_>, _>>()?;
    // The feed changed when its newest entry did; an empty one, never.
    let updated = match entries.iter().map(|e| e.updated).max() {
        Some(newest) => newest,
        None => time_of("1970-01-01T00:00:00Z")?,
    };
    let mut links = vec![link("self", &document.url, "application/atom+xml")];
    if let Some((page, mime_type)) = &document.alternate {
        links.push(link("alternate", page, mime_type));
    }
    let feed = Feed {
        title: Text::plain(document.title.clone()),
        id: document.url.clone(),
        updated,
        links,
        entries,
        ..Feed::default()
    };
    Ok(feed.to_string())
}

fn entry(post_base: (&str, &'static str), post: &PostSummary) -> Result<Entry, ApiError> {
    let (base, mime_type) = post_base;
    let published = time_of(&post.published_at)?;
    Ok(Entry {
        title: Text::plain(post.title.clone()),
        id: post.post_id.urn(),
        updated: published,
        published: Some(published),
        authors: vec![Person {
            name: post.username.to_string(),
            email: None,
            uri: None,
            extensions: ExtensionMap::default(),
        }],
        links: vec![link(
            "alternate",
            &format!("{base}/posts/{}", post.post_id),
            mime_type,
        )],
        summary: Some(Text::plain(post.summary.clone())),
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
        }
    }

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
        let xml = render(&document, &posts).expect("rendered");
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
    fn an_empty_feed_is_a_valid_document_dated_at_the_epoch() {
        let document = Document {
            title: "Newest posts".to_owned(),
            url: "http://127.0.0.1:9000/feed.atom".to_owned(),
            post_base: ("http://127.0.0.1:9000", JSON),
            alternate: None,
        };
        let xml = render(&document, &[]).expect("rendered");
        assert!(
            xml.contains("<updated>1970-01-01T00:00:00+00:00</updated>"),
            "{xml}"
        );
        assert!(
            xml.contains("<id>http://127.0.0.1:9000/feed.atom</id>"),
            "{xml}"
        );
    }

    #[test]
    fn a_user_id_is_one_path_segment() {
        assert_eq!(iri_segment("github|123"), "github%7C123");
        assert_eq!(iri_segment("a.b@c-d_e"), "a.b@c-d_e");
    }
}
