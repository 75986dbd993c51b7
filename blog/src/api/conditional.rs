//! Entity tags and conditional requests (RFC 9110 §8.8.3, §13) for a post
//! (`GET`, `PUT`, `DELETE /posts/{postId}`) and a profile (`GET`,
//! `PUT /users/{userId}`).
//!
//! An entity tag is `"<revision>-<body>"`: the revision of what an edit
//! changes ([`crate::revision`]: a post's title, content and when it was
//! edited; a profile's username) and a hash of the whole answer. A read's
//! `If-None-Match` compares the whole tag (304 only when the answer would be
//! the same, counts and copied usernames included); a write's `If-Match`
//! compares the revision: a like, a comment or the author's rename since
//! the copy was read changes the answer, but not what an edit would
//! overwrite, so it does not refuse the edit. A weak tag (`W/"…"`) never
//! meets an `If-Match` (strong comparison), and a tag this API did not
//! write meets nothing: the write answers 412 and changes nothing.

use lambda_http::{Request, http::HeaderMap};

use super::{ApiError, ErrorCode};
use crate::revision::{Expected, Revision, stable_hash};

pub const IF_MATCH: &str = "if-match";
pub const IF_NONE_MATCH: &str = "if-none-match";

/// The entity tag of an answer `body` showing `revision`.
pub fn entity_tag(revision: Revision, body: &str) -> String {
    format!(
        "\"{}-{:016x}\"",
        revision.to_hex(),
        stable_hash(body.as_bytes())
    )
}

/// The entity tag of a document nothing edits (an Atom feed): its hash.
pub fn document_tag(body: &str) -> String {
    format!("\"{:016x}\"", stable_hash(body.as_bytes()))
}

/// The revisions a write's `If-Match` requires ([`Expected::Any`] without
/// one, or with `*`). A header that is no list of entity tags is a 400
/// `bad_precondition`.
pub fn if_match(req: &Request) -> Result<Expected, ApiError> {
    let Some(tags) = tags(req.headers(), IF_MATCH)? else {
        return Ok(Expected::Any);
    };
    if tags.iter().any(|tag| tag.opaque == "*") {
        return Ok(Expected::Any);
    }
    let revisions = tags
        .iter()
        .filter(|tag| !tag.weak)
        .filter_map(|tag| {
            let (revision, _) = tag.opaque.split_once('-')?;
            Revision::from_hex(revision)
        })
        .collect();
    Ok(Expected::OneOf(revisions))
}

/// Whether a read's `If-None-Match` names `current` (weak comparison: a
/// `W/` prefix on either side is ignored), or is `*`: then the answer is 304.
/// A header that is no list of entity tags is a 400 `bad_precondition`.
pub fn none_match_fails(req: &Request, current: &str) -> Result<bool, ApiError> {
    let Some(tags) = tags(req.headers(), IF_NONE_MATCH)? else {
        return Ok(false);
    };
    let current = current.trim_start_matches("W/").trim_matches('"');
    Ok(tags
        .iter()
        .any(|tag| tag.opaque == "*" || tag.opaque == current))
}

/// One entity tag of a header's list, without its quotes.
#[derive(Debug, PartialEq, Eq)]
struct Tag {
    weak: bool,
    opaque: String,
}

/// The entity tags of header `name` (every line of it), `None` without one.
fn tags(headers: &HeaderMap, name: &str) -> Result<Option<Vec<Tag>>, ApiError> {
    let mut found = None;
    for value in headers.get_all(name) {
        let text = value.to_str().map_err(|_| bad(name))?;
        // Longer than openapi.yaml allows (`maxLength`): refused whole.
        if text.len() > MAX_HEADER_LEN {
            return Err(bad(name));
        }
        let list: &mut Vec<Tag> = found.get_or_insert_with(Vec::new);
        for raw in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            list.push(parse_tag(raw).ok_or_else(|| bad(name))?);
        }
        // A list this long is no client's: refused before it costs anything.
        if list.len() > MAX_TAGS {
            return Err(bad(name));
        }
    }
    Ok(found)
}

/// More entity tags than any client sends in one header.
const MAX_TAGS: usize = 32;

/// The longest `If-Match` or `If-None-Match` line taken, in bytes (the
/// headers' `maxLength` in openapi.yaml).
const MAX_HEADER_LEN: usize = 2_048;

fn parse_tag(raw: &str) -> Option<Tag> {
    if raw == "*" {
        return Some(Tag {
            weak: false,
            opaque: "*".to_owned(),
        });
    }
    let (weak, quoted) = match raw.strip_prefix("W/") {
        Some(rest) => (true, rest),
        None => (false, raw),
    };
    let opaque = quoted.strip_prefix('"')?.strip_suffix('"')?;
    // RFC 9110 etagc: visible characters but the double quote.
    let valid = opaque
        .bytes()
        .all(|b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80);
    valid.then(|| Tag {
        weak,
        opaque: opaque.to_owned(),
    })
}

fn bad(name: &str) -> ApiError {
    ApiError::bad_request(
        ErrorCode::BadPrecondition,
        format!("{name} must be * or a comma-separated list of entity tags (\"…\" or W/\"…\")"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::Body;

    fn with(name: &'static str, value: &str) -> Request {
        let mut req = Request::new(Body::Empty);
        req.headers_mut()
            .append(name, value.parse().expect("a header value"));
        req
    }

    #[test]
    fn if_match_names_revisions_and_star_names_any() {
        let rev = Revision::of_post("t", "2026-01-01T00:00:00.000Z", None);
        let tag = entity_tag(rev, "{}");
        assert_eq!(
            if_match(&with(IF_MATCH, &tag)).expect("parsed"),
            Expected::OneOf(vec![rev])
        );
        // The answer's hash does not matter to a write.
        let other_body = format!("\"{}-0000000000000000\"", rev.to_hex());
        assert!(
            if_match(&with(IF_MATCH, &other_body))
                .expect("parsed")
                .admits(rev)
        );
        assert_eq!(
            if_match(&with(IF_MATCH, " * ")).expect("parsed"),
            Expected::Any
        );
        assert_eq!(
            if_match(&Request::new(Body::Empty)).expect("none"),
            Expected::Any
        );
        // Weak, or not this API's: nothing matches.
        let weak = format!("W/{tag}");
        assert_eq!(
            if_match(&with(IF_MATCH, &weak)).expect("parsed"),
            Expected::OneOf(vec![])
        );
        assert_eq!(
            if_match(&with(IF_MATCH, "\"abc\", \"\"")).expect("parsed"),
            Expected::OneOf(vec![])
        );
        for bad in ["abc", "\"unclosed", "W/abc", "\"a\"b\"", "\"a\" \"b\""] {
            let err = if_match(&with(IF_MATCH, bad)).expect_err(bad);
            assert_eq!(err.code(), ErrorCode::BadPrecondition, "{bad}");
        }
        let many = vec!["\"a\""; MAX_TAGS + 1].join(",");
        assert!(if_match(&with(IF_MATCH, &many)).is_err());
    }

    #[test]
    fn if_none_match_compares_whole_tags_weakly() {
        let tag = entity_tag(Revision::of_post("t", "x", None), "{\"a\":1}");
        assert!(none_match_fails(&with(IF_NONE_MATCH, &tag), &tag).expect("parsed"));
        let weak = format!("W/{tag}");
        assert!(none_match_fails(&with(IF_NONE_MATCH, &weak), &tag).expect("parsed"));
        assert!(none_match_fails(&with(IF_NONE_MATCH, "*"), &tag).expect("parsed"));
        let changed = entity_tag(Revision::of_post("t", "x", None), "{\"a\":2}");
        assert!(!none_match_fails(&with(IF_NONE_MATCH, &changed), &tag).expect("parsed"));
        // Past the documented length, even of nothing but commas: a 400.
        let long = ",".repeat(MAX_HEADER_LEN + 1);
        assert!(none_match_fails(&with(IF_NONE_MATCH, &long), &tag).is_err());
        let at_most = ",".repeat(MAX_HEADER_LEN);
        assert!(!none_match_fails(&with(IF_NONE_MATCH, &at_most), &tag).expect("parsed"));
        assert!(!none_match_fails(&Request::new(Body::Empty), &tag).expect("none"));
    }
}
