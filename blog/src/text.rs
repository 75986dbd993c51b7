//! The rules for user-written text, and the short form's summary.
//!
//! Lengths count Unicode scalar values (what JSON Schema's `maxLength` counts),
//! except the summary, which is cut at user-perceived characters (grapheme
//! clusters) so that Japanese text and emoji are never split.
//!
//! Every field copied out of a post (into GSI1, the feed and each comment or
//! like) is bounded in bytes as well as characters: DynamoDB's limits (400 KB
//! an item, 1 MB a Query page) count bytes, and one grapheme cluster can be
//! arbitrarily long. The `*_MAX_BYTES` constants state those bounds.
//!
//! What people read, and what the Atom feeds carry, is text: no control
//! character but tab and line breaks, and no noncharacter ([`is_readable`]).
//! A title refuses anything else at input, a post's or a comment's content
//! too when written raw; what Markdown decodes from a character reference
//! (`&#1;`) is dropped from its plain text and HTML ([`crate::markdown`]).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use unicode_segmentation::UnicodeSegmentation;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("{field} {problem}")]
pub struct TextError {
    pub field: &'static str,
    pub problem: String,
}

pub const USERNAME_LEN: (usize, usize) = (3, 30);
pub const TITLE_LEN: (usize, usize) = (1, 200);
pub const POST_CONTENT_LEN: (usize, usize) = (1, 50_000);
pub const COMMENT_CONTENT_LEN: (usize, usize) = (1, 5_000);
pub const SUMMARY_GRAPHEMES: usize = 200;

/// UTF-8 encodes a Unicode scalar value in at most 4 bytes.
const MAX_SCALAR_BYTES: usize = 4;

/// A username is ASCII (checked by [`Username::parse`]), so one byte a character.
pub const USERNAME_MAX_BYTES: usize = USERNAME_LEN.1;
/// A title is at most 200 scalars of at most 4 bytes each.
pub const TITLE_MAX_BYTES: usize = TITLE_LEN.1 * MAX_SCALAR_BYTES;
/// Post content is never copied, but it is most of a post item's size.
pub const POST_CONTENT_MAX_BYTES: usize = POST_CONTENT_LEN.1 * MAX_SCALAR_BYTES;
/// The summary's byte bound, `…` included. 200 CJK characters are 600 bytes and
/// 200 single emoji 800, so ordinary text in any script is cut by
/// [`SUMMARY_GRAPHEMES`]; only runs of long clusters (stacked combining marks,
/// variation selectors, ZWJ emoji sequences of up to 25 bytes) reach this bound
/// first. Without it one cluster of 200 KB would be a 200 KB summary, copied
/// into GSI1 and the feed, and a few such posts would fill a 1 MB Query page.
pub const SUMMARY_MAX_BYTES: usize = 1_024;

const ELLIPSIS: &str = "…";

// Ordinary text must be cut by characters, not bytes, and a cut summary must
// have room for at least its ellipsis.
const _: () = assert!(SUMMARY_GRAPHEMES * MAX_SCALAR_BYTES + ELLIPSIS.len() <= SUMMARY_MAX_BYTES);

/// A username: 3 to 30 of `A–Z a–z 0–9 _`, unique ignoring case. Every copy
/// of a name (on a post, a comment, a like, the feed) has this type, so a
/// name that never passed the rule cannot be written anywhere; one read back
/// that does not pass it is an error, as a bad id is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Username(String);

impl Username {
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        let ok_chars = raw.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok_chars {
            return Err(TextError {
                field: "username",
                problem: "may contain only A–Z, a–z, 0–9 and _".into(),
            });
        }
        Ok(Self(within("username", raw, USERNAME_LEN)?.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The form under which names are unique: `Alice` and `aLICE` are one name.
    pub fn folded(&self) -> String {
        self.0.to_ascii_lowercase()
    }
}

impl std::fmt::Display for Username {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Username {
    type Error = TextError;
    fn try_from(raw: String) -> Result<Self, TextError> {
        Self::parse(&raw)
    }
}

impl From<Username> for String {
    fn from(name: Username) -> String {
        name.0
    }
}

impl From<&Username> for String {
    fn from(name: &Username) -> String {
        name.0.clone()
    }
}

impl PartialEq<str> for Username {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

/// How many tags a post may have.
pub const MAX_TAGS: usize = 5;
/// A tag's length, in characters (all ASCII).
pub const TAG_LEN: (usize, usize) = (1, 30);

/// A tag: 1 to 30 of `a–z 0–9 -`, lower-cased from what the writer sent
/// (`Rust` and `rust` are one tag). Its list is `GET /tags/{tag}/posts`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Tag(String);

impl Tag {
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        let folded = raw.to_ascii_lowercase();
        if !folded
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(TextError {
                field: "tags",
                problem: format!("a tag may contain only a–z, 0–9 and -, not {raw:?}"),
            });
        }
        Ok(Self(within("tags", &folded, TAG_LEN)?.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Tag {
    type Error = TextError;
    fn try_from(raw: String) -> Result<Self, TextError> {
        Self::parse(&raw)
    }
}

impl From<Tag> for String {
    fn from(tag: Tag) -> String {
        tag.0
    }
}

/// A post's tags as sent: at most [`MAX_TAGS`], each a [`Tag`],
/// duplicates (after lower-casing) folded into the first; in the order given.
pub fn tags(raw: &[String]) -> Result<Vec<Tag>, TextError> {
    if raw.len() > MAX_TAGS {
        return Err(TextError {
            field: "tags",
            problem: format!("a post has at most {MAX_TAGS} tags"),
        });
    }
    let mut tags: Vec<Tag> = Vec::with_capacity(raw.len());
    for one in raw {
        let tag = Tag::parse(one)?;
        if !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    Ok(tags)
}

/// Whether `c` is one of Unicode's 66 noncharacters: U+FDD0–U+FDEF and the
/// last two code points of every plane (U+FFFE, U+FFFF, U+1FFFE, …,
/// U+10FFFF). They are for a program's own use, never text: XML 1.0 has no
/// U+FFFE or U+FFFF at all, and discourages the others.
pub fn is_noncharacter(c: char) -> bool {
    let code = u32::from(c);
    (0xFDD0..=0xFDEF).contains(&code) || code & 0xFFFE == 0xFFFE
}

/// Whether `c` may stand in text that people read and feeds carry: not a
/// control character (C0, DEL or C1) other than tab, line feed and carriage
/// return, and not a noncharacter. Every such character is an XML 1.0
/// `Char` ([`is_xml_char`]).
pub fn is_readable(c: char) -> bool {
    (!c.is_control() || matches!(c, '\t' | '\n' | '\r')) && !is_noncharacter(c)
}

/// `text` without the characters [`is_readable`] refuses (borrowed when it
/// has none).
pub fn readable(text: &str) -> Cow<'_, str> {
    if text.chars().all(is_readable) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.chars().filter(|c| is_readable(*c)).collect())
    }
}

/// XML 1.0's `Char` production (§2.2): `#x9 | #xA | #xD | [#x20-#xD7FF] |
/// [#xE000-#xFFFD] | [#x10000-#x10FFFF]`. A document with any other
/// character, raw or as a character reference, is not well-formed. (A `char`
/// is never a surrogate.)
pub fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// A title is one line of text: no control characters at all, and no
/// noncharacters.
pub fn title(raw: &str) -> Result<&str, TextError> {
    if raw.chars().any(|c| c.is_control() || is_noncharacter(c)) {
        return Err(TextError {
            field: "title",
            problem: "must not contain control characters or noncharacters (U+FDD0–U+FDEF, U+FFFE, U+FFFF, …)".into(),
        });
    }
    not_blank("title", raw)?;
    within("title", raw, TITLE_LEN)
}

pub fn post_content(raw: &str) -> Result<&str, TextError> {
    body_text("content", raw, POST_CONTENT_LEN)
}

pub fn comment_content(raw: &str) -> Result<&str, TextError> {
    body_text("content", raw, COMMENT_CONTENT_LEN)
}

/// The short form's text: `content` itself when it has at most
/// [`SUMMARY_GRAPHEMES`] user-perceived characters and [`SUMMARY_MAX_BYTES`]
/// bytes; otherwise its longest prefix of whole grapheme clusters that keeps
/// both bounds with `…` appended. A first cluster too long for the bytes left
/// gives just `…`: better an empty summary than a split character.
pub fn summary(content: &str) -> String {
    // The longest prefix seen so far that leaves room for the ellipsis.
    let budget = SUMMARY_MAX_BYTES - ELLIPSIS.len();
    let mut fits = 0;
    for (count, (start, cluster)) in content.grapheme_indices(true).enumerate() {
        let end = start + cluster.len();
        if count == SUMMARY_GRAPHEMES || end > SUMMARY_MAX_BYTES {
            return format!("{}{ELLIPSIS}", &content[..fits]);
        }
        if end <= budget {
            fits = end;
        }
    }
    content.to_owned()
}

/// Multi-line text: line breaks and tabs are fine, other control characters
/// and noncharacters are not ([`is_readable`]).
fn body_text<'a>(
    field: &'static str,
    raw: &'a str,
    bounds: (usize, usize),
) -> Result<&'a str, TextError> {
    if !raw.chars().all(is_readable) {
        return Err(TextError {
            field,
            problem: "must not contain control characters other than line breaks and tabs, nor noncharacters (U+FDD0–U+FDEF, U+FFFE, U+FFFF, …)".into(),
        });
    }
    not_blank(field, raw)?;
    within(field, raw, bounds)
}

fn not_blank(field: &'static str, raw: &str) -> Result<(), TextError> {
    if !raw.is_empty() && raw.trim().is_empty() {
        return Err(TextError {
            field,
            problem: "must not be blank".into(),
        });
    }
    Ok(())
}

fn within<'a>(
    field: &'static str,
    raw: &'a str,
    (min, max): (usize, usize),
) -> Result<&'a str, TextError> {
    let len = raw.chars().count();
    if len < min || len > max {
        return Err(TextError {
            field,
            problem: format!("must be {min}–{max} characters long (got {len})"),
        });
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn usernames_at_their_limits() {
        assert_eq!(Username::parse("abc").map(String::from), Ok("abc".into()));
        assert!(Username::parse(&"a".repeat(30)).is_ok());
        assert!(Username::parse("ab").is_err());
        assert!(Username::parse(&"a".repeat(31)).is_err());
        for bad in ["has space", "dash-ed", "hash#tag", "ünï", "tab\tbed"] {
            assert!(Username::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            Username::parse("Alice_01").map(|n| n.folded()),
            Username::parse("aLICE_01").map(|n| n.folded())
        );
        // Stored names are held to the rule as they are read back.
        let read: Result<Username, _> = serde_json::from_str("\"no way\"");
        assert!(read.is_err());
    }

    #[test]
    fn titles_and_contents_at_their_limits() {
        assert!(title("").is_err());
        assert!(title("   ").is_err());
        assert!(title(&"字".repeat(200)).is_ok());
        assert!(title(&"字".repeat(201)).is_err());
        assert!(title("two\nlines").is_err());
        assert!(post_content(&"x".repeat(50_000)).is_ok());
        assert!(post_content(&"x".repeat(50_001)).is_err());
        assert!(post_content("line one\nline two\ttabbed").is_ok());
        assert!(post_content("bell\u{7}").is_err());
        assert!(comment_content(&"x".repeat(5_000)).is_ok());
        assert!(comment_content(&"x".repeat(5_001)).is_err());
        assert!(comment_content("").is_err());
    }

    #[test]
    fn titles_and_contents_refuse_what_is_not_text() {
        // C0 (but tab and line breaks in content), DEL, C1, and noncharacters
        // in the BMP and in other planes.
        for bad in [
            '\u{0}',
            '\u{1}',
            '\u{8}',
            '\u{b}',
            '\u{c}',
            '\u{1f}',
            '\u{7f}',
            '\u{80}',
            '\u{85}',
            '\u{9f}',
            '\u{fdd0}',
            '\u{fdef}',
            '\u{fffe}',
            '\u{ffff}',
            '\u{1fffe}',
            '\u{10ffff}',
        ] {
            let raw = format!("a{bad}b");
            assert_eq!(title(&raw).map_err(|e| e.field), Err("title"), "{bad:?}");
            assert_eq!(
                post_content(&raw).map_err(|e| e.field),
                Err("content"),
                "{bad:?}"
            );
            assert!(comment_content(&raw).is_err(), "{bad:?}");
            assert!(!is_readable(bad), "{bad:?}");
        }
        // Their neighbours are text.
        for good in [
            '\u{a0}',
            '\u{fdcf}',
            '\u{fdf0}',
            '\u{fffd}',
            '\u{e000}',
            '\u{10000}',
            '\u{1fffd}',
            '\u{10fffd}',
            '字',
            '😀',
        ] {
            let raw = format!("a{good}b");
            assert_eq!(title(&raw).map(str::len), Ok(raw.len()), "{good:?}");
            assert!(post_content(&raw).is_ok(), "{good:?}");
            assert!(is_readable(good) && is_xml_char(good), "{good:?}");
        }
        for (line_break, in_title, in_content) in [
            ('\n', false, true),
            ('\r', false, true),
            ('\t', false, true),
        ] {
            let raw = format!("a{line_break}b");
            assert_eq!(title(&raw).is_ok(), in_title);
            assert_eq!(post_content(&raw).is_ok(), in_content);
        }
    }

    #[test]
    fn readable_text_drops_what_is_not_and_is_xml() {
        assert!(matches!(readable("plain\ttext\n"), Cow::Borrowed(_)));
        assert_eq!(
            readable("a\u{1}b\u{7f}c\u{85}d\u{ffff}e\u{fdd0}f\u{10ffff}\r\n"),
            "abcdef\r\n"
        );
        // Every readable character is an XML 1.0 Char; the C0 controls but
        // three, U+FFFE and U+FFFF are not.
        for code in (0..=0x10_FFFF).filter_map(char::from_u32) {
            if is_readable(code) {
                assert!(is_xml_char(code), "{code:?}");
            }
        }
        for not_xml in ['\u{0}', '\u{1}', '\u{1f}', '\u{fffe}', '\u{ffff}'] {
            assert!(!is_xml_char(not_xml), "{not_xml:?}");
        }
        for xml in [
            '\t',
            '\n',
            '\r',
            ' ',
            '\u{d7ff}',
            '\u{e000}',
            '\u{fffd}',
            '\u{10000}',
            '\u{10ffff}',
        ] {
            assert!(is_xml_char(xml), "{xml:?}");
        }
    }

    #[test]
    fn tags_are_lower_cased_folded_and_at_most_five() {
        let raw = |list: &[&str]| list.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
        let parsed = tags(&raw(&["Rust", "rust", "web-dev", "2026"]))
            .map(|t| t.iter().map(|t| t.as_str().to_owned()).collect::<Vec<_>>());
        assert_eq!(parsed, Ok(raw(&["rust", "web-dev", "2026"])));
        assert_eq!(tags(&[]), Ok(vec![]));
        let folded = tags(&raw(&["a", "A", "b", "B", "c"])).map(|t| t.len());
        assert_eq!(folded, Ok(3));
        let six = tags(&raw(&["a", "b", "c", "d", "e", "f"]));
        assert_eq!(six.map_err(|e| e.field), Err("tags"));
        for bad in ["", "with space", "under_score", "é", &"x".repeat(31), "a#b"] {
            assert_eq!(Tag::parse(bad).map_err(|e| e.field), Err("tags"), "{bad:?}");
        }
        assert!(Tag::parse(&"x".repeat(30)).is_ok());
    }

    #[test]
    fn short_content_is_its_own_summary() {
        assert_eq!(summary("hello"), "hello");
        let exactly = "あ".repeat(SUMMARY_GRAPHEMES);
        assert_eq!(summary(&exactly), exactly);
    }

    #[test]
    fn long_content_is_cut_at_grapheme_clusters() {
        let japanese = "日本語のテキスト。".repeat(30);
        let cut = summary(&japanese);
        assert_eq!(cut.graphemes(true).count(), SUMMARY_GRAPHEMES + 1);
        assert_eq!(cut.len(), 3 * SUMMARY_GRAPHEMES + ELLIPSIS.len());
        assert!(cut.ends_with('…'));
        assert!(japanese.starts_with(cut.trim_end_matches('…')));
        assert_summary_bounds(&japanese);

        // 200 single emoji (4 bytes each) are still cut by characters.
        let emoji = "😀".repeat(SUMMARY_GRAPHEMES + 1);
        assert_eq!(
            summary(&emoji),
            format!("{}…", "😀".repeat(SUMMARY_GRAPHEMES))
        );
    }

    #[test]
    fn one_huge_cluster_is_summarised_as_an_ellipsis() {
        // One letter and 49,999 variation selectors: one grapheme cluster of
        // 199,997 bytes, yet a valid post of 50,000 characters.
        let content = format!("a{}", "\u{E0100}".repeat(49_999));
        assert!(post_content(&content).is_ok());
        assert_eq!(content.len(), 199_997);
        assert_eq!(content.graphemes(true).count(), 1);
        assert_eq!(summary(&content), "…");
        assert_summary_bounds(&content);
    }

    #[test]
    fn long_clusters_are_cut_by_bytes_never_split() {
        // A family emoji is one user-perceived character of seven scalars, 25 bytes.
        let family = "👨‍👩‍👧‍👦";
        assert_eq!((family.graphemes(true).count(), family.len()), (1, 25));
        let content = family.repeat(SUMMARY_GRAPHEMES + 50);
        let cut = summary(&content);
        // 40 families and the ellipsis are 1,003 bytes; a 41st would be 1,028.
        assert_eq!(cut, format!("{}…", family.repeat(40)));
        assert_summary_bounds(&content);
    }

    #[test]
    fn the_byte_bound_is_exact() {
        // One cluster of 1 + 510 × 2 = 1,021 bytes: with `…`, exactly 1,024.
        let cluster = format!("e{}", "\u{301}".repeat(510));
        assert_eq!(cluster.len(), SUMMARY_MAX_BYTES - ELLIPSIS.len());
        let cut = summary(&format!("{cluster}and more"));
        assert_eq!(cut, format!("{cluster}…"));
        assert_eq!(cut.len(), SUMMARY_MAX_BYTES);

        // Two bytes more and the first cluster no longer fits before `…`.
        let longer = format!("{cluster}\u{301}");
        assert_eq!(summary(&format!("{longer}xy")), "…");
        // Alone, content of exactly the bound is its own summary; one byte more is cut.
        let whole = format!("{longer}\u{2c}");
        assert_eq!(whole.len(), SUMMARY_MAX_BYTES);
        assert_eq!(summary(&whole), whole);
        let over = format!("{longer}\u{301}");
        assert_eq!(over.len(), SUMMARY_MAX_BYTES + 1);
        assert_eq!(summary(&over), "…");
    }

    #[test]
    fn mixed_text_keeps_both_bounds() {
        let mixed = format!(
            "Hello, 世界! 🇯🇵🇫🇷 e\u{301}\u{302} {} 👍🏽 {}",
            "👨‍👩‍👧‍👦".repeat(30),
            "テキスト and text ".repeat(40)
        );
        let cut = summary(&mixed);
        assert!(cut.starts_with("Hello, 世界! 🇯🇵🇫🇷 e\u{301}\u{302} "));
        assert_summary_bounds(&mixed);
        for short in ["", "x", "🇯🇵", "e\u{301}", "👨‍👩‍👧‍👦"] {
            assert_eq!(summary(short), short);
        }
    }

    #[test]
    fn copied_fields_keep_their_byte_bounds_at_their_limits() {
        let widest_title = "😀".repeat(TITLE_LEN.1);
        assert_eq!(title(&widest_title).map(str::len), Ok(TITLE_MAX_BYTES));
        assert_eq!(TITLE_MAX_BYTES, 800);
        let longest_name = "a".repeat(USERNAME_LEN.1);
        assert_eq!(
            Username::parse(&longest_name).map(|n| n.as_str().len()),
            Ok(USERNAME_MAX_BYTES)
        );
        assert_eq!(USERNAME_MAX_BYTES, 30);
        let widest_content = "😀".repeat(POST_CONTENT_LEN.1);
        assert_eq!(
            post_content(&widest_content).map(str::len),
            Ok(POST_CONTENT_MAX_BYTES)
        );
        assert_eq!(POST_CONTENT_MAX_BYTES, 200_000);
    }

    /// What every summary must be: within both bounds; the content itself
    /// when that fits, otherwise a prefix ending on a cluster boundary plus
    /// `…`, as long as the bounds allow.
    fn assert_summary_bounds(content: &str) {
        let got = summary(content);
        assert!(got.len() <= SUMMARY_MAX_BYTES, "{} bytes", got.len());
        let boundaries: Vec<usize> = content
            .grapheme_indices(true)
            .map(|(at, _)| at)
            .chain([content.len()])
            .collect();
        let clusters = boundaries.len() - 1;
        if got == content {
            assert!(clusters <= SUMMARY_GRAPHEMES, "{clusters} clusters uncut");
            return;
        }
        assert!(
            clusters > SUMMARY_GRAPHEMES || content.len() > SUMMARY_MAX_BYTES,
            "cut although it fits"
        );
        let kept = got
            .strip_suffix(ELLIPSIS)
            .expect("a cut summary ends with …");
        assert!(content.starts_with(kept), "not a prefix");
        let kept_clusters = boundaries
            .iter()
            .position(|&at| at == kept.len())
            .expect("cut on a cluster boundary");
        assert!(kept_clusters <= SUMMARY_GRAPHEMES);
        // As long as possible: one more cluster would break a bound.
        let next_end = boundaries[kept_clusters + 1];
        assert!(
            kept_clusters == SUMMARY_GRAPHEMES || next_end + ELLIPSIS.len() > SUMMARY_MAX_BYTES,
            "cut short at {kept_clusters} clusters"
        );
    }

    /// Pieces that make clusters of every shape: plain and wide characters,
    /// arbitrary scalars, and runs that build one long cluster.
    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<char>().prop_map(String::from),
            "[a-z ]{1,12}",
            "[日本語テキスト]{1,12}",
            "[\u{300}-\u{36f}]{1,700}",
            "[\u{E0100}-\u{E01EF}]{1,400}",
            Just("👨‍👩‍👧‍👦".to_owned()),
            Just("🇯🇵".to_owned()),
            Just("\u{600}".to_owned()),
            Just("\r\n".to_owned()),
        ]
    }

    proptest! {
        #[test]
        fn summaries_always_keep_both_bounds(
            pieces in prop::collection::vec(piece(), 0..300),
        ) {
            assert_summary_bounds(&pieces.concat());
        }

        #[test]
        fn summaries_of_arbitrary_strings_keep_both_bounds(content in any::<String>()) {
            assert_summary_bounds(&content);
        }

        #[test]
        fn valid_titles_keep_their_byte_bound(
            chars in prop::collection::vec(any::<char>(), 1..=TITLE_LEN.1),
        ) {
            let raw: String = chars.into_iter().collect();
            if let Ok(valid) = title(&raw) {
                prop_assert!(valid.len() <= TITLE_MAX_BYTES);
            }
        }
    }
}
