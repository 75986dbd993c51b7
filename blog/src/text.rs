//! The rules for user-written text, and the short form's summary.
//!
//! Lengths count Unicode scalar values (what JSON Schema's `maxLength` counts),
//! except the summary, which is cut at user-perceived characters (grapheme
//! clusters) so that Japanese text and emoji are never split.

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

pub fn username(raw: &str) -> Result<&str, TextError> {
    let ok_chars = raw.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok_chars {
        return Err(TextError {
            field: "username",
            problem: "may contain only A–Z, a–z, 0–9 and _".into(),
        });
    }
    within("username", raw, USERNAME_LEN)
}

/// A title is one line: no control characters at all.
pub fn title(raw: &str) -> Result<&str, TextError> {
    if raw.chars().any(char::is_control) {
        return Err(TextError {
            field: "title",
            problem: "must not contain control characters".into(),
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

/// The first [`SUMMARY_GRAPHEMES`] user-perceived characters of `content`, with
/// `…` appended only when something was cut.
pub fn summary(content: &str) -> String {
    match content.grapheme_indices(true).nth(SUMMARY_GRAPHEMES) {
        Some((cut_at, _)) => format!("{}…", &content[..cut_at]),
        None => content.to_owned(),
    }
}

/// Multi-line text: line breaks and tabs are fine, other control characters are not.
fn body_text<'a>(
    field: &'static str,
    raw: &'a str,
    bounds: (usize, usize),
) -> Result<&'a str, TextError> {
    if raw
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(TextError {
            field,
            problem: "must not contain control characters other than line breaks and tabs".into(),
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
    use super::*;

    #[test]
    fn usernames_at_their_limits() {
        assert!(username("abc").is_ok());
        assert!(username(&"a".repeat(30)).is_ok());
        assert!(username("ab").is_err());
        assert!(username(&"a".repeat(31)).is_err());
        for bad in ["has space", "dash-ed", "hash#tag", "ünï", "tab\tbed"] {
            assert!(username(bad).is_err(), "{bad:?}");
        }
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
    fn short_content_is_its_own_summary() {
        assert_eq!(summary("hello"), "hello");
        let exactly = "あ".repeat(SUMMARY_GRAPHEMES);
        assert_eq!(summary(&exactly), exactly);
    }

    #[test]
    fn long_content_is_cut_at_grapheme_clusters() {
        // A family emoji is one user-perceived character made of seven scalars.
        let family = "👨‍👩‍👧‍👦";
        let content = family.repeat(SUMMARY_GRAPHEMES + 1);
        let cut = summary(&content);
        assert_eq!(cut, format!("{}…", family.repeat(SUMMARY_GRAPHEMES)));

        let japanese = "日本語のテキスト。".repeat(30);
        let cut = summary(&japanese);
        assert_eq!(cut.graphemes(true).count(), SUMMARY_GRAPHEMES + 1);
        assert!(cut.ends_with('…'));
        assert!(japanese.starts_with(cut.trim_end_matches('…')));
    }
}
