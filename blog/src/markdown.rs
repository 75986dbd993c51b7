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
//! and every link gets `rel="nofollow ugc noopener"`. What is inside the
//! elements whose content is not prose ([`NOT_PROSE`]: scripts, styles and
//! the like) goes with them, from the HTML and from the plain text alike.
//! Neither keeps a character that is not text ([`text::is_readable`]), such
//! as the U+0001 that `&#1;` decodes to.
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

/// The raw HTML elements whose content is not prose: what the HTML parser
/// reads as raw text (`script`, `style`, `xmp`, `iframe`, `noembed`,
/// `noframes`, and `noscript` where scripts run), as escapable raw text
/// (`textarea`, `title`), and `template`'s inert content. Neither the
/// sanitised HTML nor the plain text keeps what they hold: a summary is
/// never a script's source.
pub const NOT_PROSE: [&str; 10] = [
    "iframe", "noembed", "noframes", "noscript", "script", "style", "template", "textarea",
    "title", "xmp",
];

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
        .clean_content_tags(HashSet::from(NOT_PROSE))
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
    let html = SANITIZER.clean(&unsafe_html).to_string();
    // A character reference to a control character (`&#1;`, in Markdown
    // text or in raw HTML) reaches the output decoded: dropped here, where
    // the markup is all ASCII and only text and attribute values can hold it.
    match text::readable(&html) {
        Cow::Borrowed(_) => html,
        Cow::Owned(clean) => clean,
    }
}

/// Where a run of raw HTML leaves the text after it: inside the
/// [`NOT_PROSE`] element `inside` names (until its end tag), or outside
/// any. Reads start and end tags by name as the HTML parser would (inside a
/// raw text element only its own end tag counts; a comment's text is no
/// tag); attributes and the rest are of no matter.
fn not_prose_after(html: &str, mut inside: Option<&'static str>) -> Option<&'static str> {
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        rest = &rest[open + 1..];
        if inside.is_none()
            && let Some(comment) = rest.strip_prefix("!--")
        {
            rest = comment.find("-->").map_or("", |end| &comment[end + 3..]);
            continue;
        }
        let (closing, named) = match rest.strip_prefix('/') {
            Some(named) => (true, named),
            None => (false, rest),
        };
        let length = named
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(named.len());
        let (name, after) = named.split_at(length);
        if !(after.is_empty()
            || after.starts_with(|c: char| c.is_ascii_whitespace() || c == '/' || c == '>'))
        {
            continue;
        }
        match inside {
            Some(element) if closing && name.eq_ignore_ascii_case(element) => inside = None,
            Some(_) => {}
            None if !closing => {
                inside = NOT_PROSE
                    .iter()
                    .find(|element| name.eq_ignore_ascii_case(element))
                    .copied();
            }
            None => {}
        }
    }
    inside
}

/// What a reader reads of `markdown`, without its markup: the text of its
/// blocks one per line (trimmed, blank ones left out), HTML left out, and
/// the text inside raw HTML elements that is not prose ([`NOT_PROSE`]) too;
/// only readable characters ([`text::is_readable`]: a `&#1;` decodes to
/// U+0001, which is dropped).
pub fn plain_text(markdown: &str) -> String {
    let mut plain = String::with_capacity(markdown.len());
    let mut inside: Option<&'static str> = None;
    for event in Parser::new_ext(markdown, MARKDOWN) {
        match event {
            Event::Html(html) | Event::InlineHtml(html) => inside = not_prose_after(&html, inside),
            Event::Text(_) | Event::Code(_) if inside.is_some() => {}
            Event::Text(text) | Event::Code(text) => {
                plain.extend(text.chars().filter(|c| text::is_readable(*c)));
            }
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
    fn plain_text_keeps_no_control_character_or_noncharacter() {
        for (markdown, plain) in [
            ("a&#1;b", "ab"),
            ("a&#x1F;b&#127;c&#x85;d", "abcd"),
            ("a&#xFFFF;b&#xFFFE;c&#xFDD0;d&#x10FFFF;e", "abcde"),
            // Not Unicode scalar values: CommonMark makes them U+FFFD.
            ("a&#xD800;b&#0;c&#x110000;d", "a\u{FFFD}b\u{FFFD}c\u{FFFD}d"),
            ("`co&#1;de`", "co&#1;de"),
            ("```\nx\u{1}y\n```", "xy"),
            ("# T&#x1;itle\n\n| a&#2; |\n|---|\n| b&#3; |", "Title\na\nb"),
        ] {
            assert_eq!(plain_text(markdown), plain, "{markdown:?}");
            assert!(summary(markdown).chars().all(text::is_readable));
        }
    }

    #[test]
    fn html_keeps_no_control_character_or_noncharacter() {
        for markdown in [
            "a&#1;b",
            "<b>a&#1;b&#x7f;c&#x9f;</b>",
            "[x](https://x.example/&#1;)",
            "a&#xFFFF;b&#xFDD0;c",
            "<span title=\"&#1;&#xffff;\">t</span>",
        ] {
            let html = to_html(markdown);
            assert!(
                html.chars().all(text::is_readable),
                "{markdown:?}: {html:?}"
            );
            assert!(
                html.contains('a') || html.contains('t'),
                "{markdown:?}: {html:?}"
            );
        }
        assert_eq!(to_html("a&#1;b\u{85}c"), "<p>abc</p>\n");
    }

    #[test]
    fn what_is_not_prose_is_in_neither_the_plain_text_nor_the_html() {
        for (markdown, plain) in [
            ("a <script>alert(1)</script> b", "a  b"),
            ("a <SCRIPT type=x>alert(1)</SCRIPT > b", "a  b"),
            ("a <style>p { color: red }</style> b", "a  b"),
            ("<style>\n\np { color: red }\n\n</style>\n\nafter", "after"),
            ("<template>\n\nhidden\n\n</template>\n\nshown", "shown"),
            (
                "a <textarea>t</textarea><title>t</title><xmp>x</xmp> b",
                "a  b",
            ),
            (
                "a <iframe>i</iframe><noscript>n</noscript><noembed>e</noembed> b",
                "a  b",
            ),
            // Inside a script, only its own end tag ends it.
            ("a <script>x <style> y</script> b", "a  b"),
            // A script never closed hides the rest, as a browser would.
            ("a <script>x\n\nnever closed", "a"),
            // Not a script: a longer name, a comment, an end tag alone.
            ("a <scripts>s</scripts> <script-x>x</script-x> b", "a s x b"),
            ("a <!-- <script> --> b", "a  b"),
            ("a </script> b", "a  b"),
            // Prose inside other HTML stays.
            ("a <span>kept</span> <div>also</div>", "a kept also"),
        ] {
            assert_eq!(plain_text(markdown), plain, "{markdown:?}");
            let html = to_html(markdown);
            for hidden in ["alert", "color", "hidden", "never"] {
                assert!(!html.contains(hidden), "{markdown:?}: {html}");
            }
        }
        assert_eq!(
            summary("Intro <script>steal()</script> text"),
            "Intro  text"
        );
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
