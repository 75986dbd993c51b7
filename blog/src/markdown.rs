//! Post content is Markdown: CommonMark with GitHub's tables and
//! strikethrough. Q2 answers it rendered (`contentHtml`), and the short form's
//! `summary` is its plain text, cut as [`text::summary`] cuts.
//!
//! Rendering is pulldown-cmark's, then ammonia's allow-list sanitiser over
//! the result: raw HTML in Markdown is allowed through the parser, and
//! whatever survives is what the allow-list lets through, whichever way it
//! was written. No script can run from the output: no `<script>`, `<style>`,
//! `<iframe>`, `<object>`, `<embed>`, `<form>` or `<svg>`, no event-handler
//! or `style` attribute (but a table cell's `text-align`), only `http`,
//! `https` and `mailto` URLs and no relative ones (a post is shown on pages
//! this API doesn't know, where a relative URL would mean something else),
//! and every link gets `rel="nofollow ugc noopener"`.
//!
//! Rendered at read time, not stored (docs/benchmarks.md, "Markdown"): a
//! 50,000-character post renders in milliseconds under get-post's CPU share,
//! while storing the HTML would at least double the content item, and every
//! edit's and read's units with it; and a change of the allow-list applies to
//! every post at once, with nothing to migrate.

use std::{borrow::Cow, collections::HashSet, sync::LazyLock};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::text;

/// CommonMark with GitHub's tables and strikethrough.
const MARKDOWN: Options = Options::ENABLE_TABLES.union(Options::ENABLE_STRIKETHROUGH);

/// What every link gets: search engines don't credit it (`nofollow`), it is
/// user-generated (`ugc`), and the page it opens can't reach back (`noopener`).
pub const LINK_REL: &str = "nofollow ugc noopener";

/// The one sanitiser, built once per process.
static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::default();
    builder
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(Some(LINK_REL))
        // A fenced block's language, for a reader's highlighter; a table
        // column's alignment. Nothing else of either attribute.
        .add_tag_attributes("code", ["class"])
        .add_tag_attributes("th", ["style"])
        .add_tag_attributes("td", ["style"])
        .filter_style_properties(HashSet::from(["text-align"]))
        .attribute_filter(|element, attribute, value| match (element, attribute) {
            ("code", "class") => language_class(value).then_some(Cow::Borrowed(value)),
            _ => Some(Cow::Borrowed(value)),
        });
    builder
});

/// `language-x`, with x made of letters, digits and `+#._-` only.
fn language_class(value: &str) -> bool {
    value.strip_prefix("language-").is_some_and(|name| {
        !name.is_empty()
            && name.len() <= 32
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '#' | '.' | '_' | '-'))
    })
}

/// `markdown` as sanitised HTML (Q2's `contentHtml`).
pub fn to_html(markdown: &str) -> String {
    let mut unsafe_html = String::with_capacity(markdown.len() + markdown.len() / 2);
    pulldown_cmark::html::push_html(&mut unsafe_html, Parser::new_ext(markdown, MARKDOWN));
    SANITIZER.clean(&unsafe_html).to_string()
}

/// What a reader reads of `markdown`, without its markup: the text of its
/// blocks one per line (trimmed, blank ones left out), HTML left out.
pub fn plain_text(markdown: &str) -> String {
    let mut plain = String::with_capacity(markdown.len());
    for event in Parser::new_ext(markdown, MARKDOWN) {
        match event {
            Event::Text(text) | Event::Code(text) => plain.push_str(&text),
            Event::SoftBreak | Event::HardBreak => plain.push('\n'),
            Event::Start(Tag::TableCell) if !plain.ends_with(['\n', ' ']) && !plain.is_empty() => {
                plain.push(' ');
            }
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::CodeBlock
                | TagEnd::TableHead
                | TagEnd::TableRow,
            ) if !plain.ends_with('\n') && !plain.is_empty() => plain.push('\n'),
            Event::Rule if !plain.ends_with('\n') && !plain.is_empty() => plain.push('\n'),
            _ => {}
        }
    }
    // One line a block, without the spaces markup left around it.
    let lines: Vec<&str> = plain
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    lines.join("\n")
}

/// The short form's `summary` of a post whose content is `markdown`.
pub fn summary(markdown: &str) -> String {
    text::summary(&plain_text(markdown))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hostile corpus: what a post's content can try to run a script or
    /// make a request with. The browser check (infra/check_browser.py) loads
    /// every entry's rendering from the local API in Chromium.
    const CORPUS: &str = include_str!("../tests/xss-corpus.json");

    fn corpus() -> Vec<String> {
        serde_json::from_str(CORPUS).expect("the corpus is a JSON array of strings")
    }

    /// Every attribute of every tag in `html`, lower-cased, with its value
    /// entity-decoded: what a browser would see.
    fn attributes(html: &str) -> Vec<(String, String, String)> {
        let mut found = Vec::new();
        let mut rest = html;
        while let Some(open) = rest.find('<') {
            rest = &rest[open + 1..];
            let end = rest.find('>').expect("the sanitiser closes every tag");
            let tag = &rest[..end];
            rest = &rest[end + 1..];
            if tag.starts_with('/') {
                continue;
            }
            let mut parts = tag.splitn(2, char::is_whitespace);
            let name = parts.next().unwrap_or_default().to_ascii_lowercase();
            let mut attrs = parts.next().unwrap_or_default().trim();
            while !attrs.is_empty() {
                let eq = attrs.find('=').expect("the sanitiser quotes every value");
                let attr = attrs[..eq].trim().to_ascii_lowercase();
                let quoted = &attrs[eq + 1..];
                assert!(quoted.starts_with('"'), "unquoted value in {tag}");
                let close = quoted[1..].find('"').expect("a closed quote") + 1;
                let value = quoted[1..close]
                    .replace("&quot;", "\"")
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&");
                found.push((name.clone(), attr, value));
                attrs = quoted[close + 1..].trim_start();
            }
        }
        found
    }

    /// The tags of `html`, lower-cased.
    fn tags(html: &str) -> Vec<String> {
        html.split('<')
            .skip(1)
            .filter(|tag| !tag.starts_with('/'))
            .map(|tag| {
                tag.split(|c: char| c.is_whitespace() || c == '>' || c == '/')
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase()
            })
            .collect()
    }

    const ALLOWED_ATTRIBUTES: &[&str] = &[
        "href", "rel", "src", "alt", "title", "lang", "start", "class", "style", "align", "width",
        "height", "colspan", "rowspan", "scope", "headers", "hreflang", "cite", "datetime", "dir",
        "span", "char", "charoff", "size", "summary",
    ];

    const FORBIDDEN_TAGS: &[&str] = &[
        "script",
        "style",
        "iframe",
        "frame",
        "frameset",
        "object",
        "embed",
        "form",
        "input",
        "button",
        "textarea",
        "select",
        "svg",
        "math",
        "link",
        "meta",
        "base",
        "applet",
        "audio",
        "video",
        "source",
        "track",
        "template",
        "noscript",
        "xmp",
        "plaintext",
        "portal",
        "image",
        "animate",
        "set",
        "use",
        "foreignobject",
        "isindex",
        "param",
    ];

    #[test]
    fn no_corpus_entry_renders_anything_that_can_run_or_load() {
        let corpus = corpus();
        assert!(
            corpus.len() >= 60,
            "the corpus has {} entries",
            corpus.len()
        );
        for entry in &corpus {
            let html = to_html(entry);
            for tag in tags(&html) {
                assert!(
                    !FORBIDDEN_TAGS.contains(&tag.as_str()),
                    "<{tag}> from {entry:?}: {html}"
                );
            }
            for (tag, attr, value) in attributes(&html) {
                assert!(
                    ALLOWED_ATTRIBUTES.contains(&attr.as_str()),
                    "{attr} on <{tag}> from {entry:?}: {html}"
                );
                if matches!(attr.as_str(), "href" | "src" | "cite") {
                    let lower = value.trim().to_ascii_lowercase();
                    assert!(
                        lower.starts_with("http://")
                            || lower.starts_with("https://")
                            || lower.starts_with("mailto:"),
                        "{attr}={value:?} from {entry:?}: {html}"
                    );
                }
                if attr == "style" {
                    assert!(value.starts_with("text-align:"), "{value} from {entry:?}");
                    assert!(!value.contains(['(', '\\', '/']), "{value} from {entry:?}");
                }
                if attr == "class" {
                    assert!(language_class(&value), "{value} from {entry:?}");
                }
            }
            for (tag, attr, value) in attributes(&html) {
                if tag == "a" && attr == "rel" {
                    assert_eq!(value, LINK_REL);
                }
            }
            assert_eq!(
                html.matches("<a ").count(),
                html.matches(&format!("rel=\"{LINK_REL}\"")).count(),
                "a link without rel from {entry:?}: {html}"
            );
        }
    }

    #[test]
    fn the_corpus_would_be_dangerous_unsanitised() {
        // The check above can fail: most entries carry something the
        // allow-list removes (rendered by the parser alone, they would fail it).
        let dangerous = corpus()
            .iter()
            .filter(|entry| {
                let mut raw = String::new();
                pulldown_cmark::html::push_html(&mut raw, Parser::new_ext(entry, MARKDOWN));
                let lower = raw.to_ascii_lowercase();
                [
                    "<script",
                    "javascript:",
                    "onerror",
                    "onload",
                    "<iframe",
                    "<svg",
                    "data:",
                ]
                .iter()
                .any(|bad| lower.contains(bad))
            })
            .count();
        assert!(
            dangerous >= 50,
            "only {dangerous} entries are dangerous raw"
        );
    }

    #[test]
    fn markdown_renders_as_github_does() {
        let html = to_html(
            "# Title\n\nSome *emphasis*, **strong**, ~~gone~~ and `code`.\n\n\
             | a | b |\n|:--|:-:|\n| 1 | 2 |\n\n\
             ```rust\nfn main() {}\n```\n\n\
             [a link](https://example.com/x?y=1&z=2 \"t\") ![pic](https://example.com/p.png)\n\n\
             > quoted\n\n- one\n- two\n",
        );
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<em>emphasis</em>"), "{html}");
        assert!(html.contains("<strong>strong</strong>"), "{html}");
        assert!(html.contains("<del>gone</del>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(
            html.contains("<th style=\"text-align:left\">a</th>"),
            "{html}"
        );
        assert!(
            html.contains("<td style=\"text-align:center\">2</td>"),
            "{html}"
        );
        assert!(
            html.contains("<code class=\"language-rust\">fn main() {}"),
            "{html}"
        );
        assert!(
            html.contains(
                "<a href=\"https://example.com/x?y=1&amp;z=2\" title=\"t\" rel=\"nofollow ugc noopener\">a link</a>"
            ),
            "{html}"
        );
        assert!(
            html.contains("<img src=\"https://example.com/p.png\" alt=\"pic\">"),
            "{html}"
        );
        assert!(
            html.contains("<blockquote>\n<p>quoted</p>\n</blockquote>"),
            "{html}"
        );
        assert!(html.contains("<li>one</li>"), "{html}");
    }

    #[test]
    fn a_language_class_is_kept_only_when_it_names_a_language() {
        assert!(to_html("```c++\nx\n```").contains("class=\"language-c++\""));
        let odd = to_html("```x\" onclick=\"alert(1)\nx\n```");
        assert!(!odd.contains("onclick"), "{odd}");
        assert!(!language_class("language-"));
        assert!(!language_class("lang-rust"));
        assert!(!language_class("language-a b"));
    }

    #[test]
    fn plain_text_is_what_a_reader_reads() {
        assert_eq!(plain_text("hello"), "hello");
        assert_eq!(plain_text("line one\nline two"), "line one\nline two");
        assert_eq!(
            plain_text(
                "# Title\n\nSome *emphasis* and a [link](https://x.example).\n\n- one\n- two"
            ),
            "Title\nSome emphasis and a link.\none\ntwo"
        );
        assert_eq!(plain_text("a <b>bold</b> word"), "a bold word");
        assert_eq!(plain_text("<script>alert(1)</script>\n\nafter"), "after");
        assert_eq!(plain_text("| a | b |\n|---|---|\n| 1 | 2 |"), "a b\n1 2");
        assert_eq!(plain_text("```\nlet x = 1;\n```"), "let x = 1;");
        assert_eq!(plain_text("   "), "");
        assert_eq!(plain_text("<img src=x> after\n\n\n  next  "), "after\nnext");
    }

    #[test]
    fn the_summary_is_the_plain_text_cut() {
        assert_eq!(summary("**bold** start"), "bold start");
        let long = format!("*{}*", "あ".repeat(text::SUMMARY_GRAPHEMES + 10));
        assert_eq!(
            summary(&long),
            text::summary(&"あ".repeat(text::SUMMARY_GRAPHEMES + 10))
        );
    }
}
