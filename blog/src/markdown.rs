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
//! A mention (`@name`, [`crate::mentions`]) in the prose, outside code
//! spans and blocks, links, images and raw HTML ([`mentioned`]), renders as
//! a link to the profile of the user the post item's `mentions` found for
//! it: `<a href="/users/<userId>" class="mention" rel="nofollow ugc
//! noopener">@name</a>`, its text as the author wrote it, its `href` from
//! the stored id, never from the text. A name no one held stays plain text.
//! The sanitiser is not widened for them: each mention found goes through
//! it as a marker no content can forge (random, per rendering) and becomes
//! its link after, built from a username and a user id, whose rules admit
//! no character HTML treats specially (escaped all the same). So a link
//! written in the content itself never gets a relative URL or a class.
//!
//! Rendered at read time, not stored (docs/benchmarks.md, "Markdown"): a
//! 50,000-character post renders in milliseconds under get-post's CPU share,
//! while storing the HTML would at least double the content item, and every
//! edit's and read's units with it; and a change of the allow-list applies to
//! every post at once, with nothing to migrate.

use std::{borrow::Cow, collections::HashSet, sync::LazyLock};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd, TextMergeStream};

use crate::{
    mentions::{self, Mentions},
    text::{self, Username},
};

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

/// The class of a mention's link.
pub const MENTION_CLASS: &str = "mention";

/// Where a profile is: `/users/` and the user's id.
const PROFILE_PATH: &str = "/users/";

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

/// `markdown` as sanitised HTML, without mentions' links.
pub fn to_html(markdown: &str) -> String {
    to_html_mentioning(markdown, &Mentions::default())
}

/// `markdown` as sanitised HTML (Q2's `contentHtml`), each of its mentions
/// of a user in `mentions` a link to their profile.
pub fn to_html_mentioning(markdown: &str, mentions: &Mentions) -> String {
    let mut unsafe_html = String::with_capacity(markdown.len() + markdown.len() / 2);
    let events = Parser::new_ext(markdown, MARKDOWN);
    if mentions.is_empty() {
        pulldown_cmark::html::push_html(&mut unsafe_html, events);
        return readable(SANITIZER.clean(&unsafe_html).to_string());
    }
    let marker = Marker::new();
    let mut links = Vec::new();
    let mut prose = Prose::default();
    let marked = TextMergeStream::new(events).map(|event| {
        if prose.holds(&event)
            && let Event::Text(text) = &event
        {
            Event::Text(marker.mark(text, mentions, &mut links).into())
        } else {
            event
        }
    });
    pulldown_cmark::html::push_html(&mut unsafe_html, marked);
    readable(marker.linked(SANITIZER.clean(&unsafe_html).to_string(), &links))
}

/// Sanitised `html` without what is not text.
fn readable(html: String) -> String {
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
/// any; and inside how many raw links (`<a>`, until their `</a>`). Reads
/// start and end tags by name as the HTML parser would (inside a raw text
/// element only its own end tag counts; a comment's text is no tag);
/// attributes and the rest are of no matter.
#[derive(Debug, Clone, Copy, Default)]
struct RawHtml {
    inside: Option<&'static str>,
    links: usize,
}

impl RawHtml {
    fn after(mut self, html: &str) -> Self {
        let mut rest = html;
        while let Some(open) = rest.find('<') {
            rest = &rest[open + 1..];
            if self.inside.is_none()
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
            match self.inside {
                Some(element) if closing && name.eq_ignore_ascii_case(element) => {
                    self.inside = None;
                }
                Some(_) => {}
                None if name.eq_ignore_ascii_case("a") => {
                    self.links = if closing {
                        self.links.saturating_sub(1)
                    } else {
                        self.links.saturating_add(1)
                    };
                }
                None if !closing => {
                    self.inside = NOT_PROSE
                        .iter()
                        .find(|element| name.eq_ignore_ascii_case(element))
                        .copied();
                }
                None => {}
            }
        }
        self
    }
}

/// Which of a Markdown's events are prose a mention may stand in: text
/// outside code blocks (a code span is an event of its own), outside a
/// link's or an image's text, and outside raw HTML's links and the
/// elements that are not prose. Fed every event in order.
#[derive(Debug, Default)]
struct Prose {
    links: usize,
    code: bool,
    raw: RawHtml,
}

impl Prose {
    /// Whether `event` is prose, having taken in what it opens or closes.
    fn holds(&mut self, event: &Event<'_>) -> bool {
        match event {
            Event::Start(Tag::Link { .. } | Tag::Image { .. }) => {
                self.links = self.links.saturating_add(1);
            }
            Event::End(TagEnd::Link | TagEnd::Image) => self.links = self.links.saturating_sub(1),
            Event::Start(Tag::CodeBlock(_)) => self.code = true,
            Event::End(TagEnd::CodeBlock) => self.code = false,
            Event::Html(html) | Event::InlineHtml(html) => self.raw = self.raw.after(html),
            Event::Text(_) => {
                return self.links == 0
                    && !self.code
                    && self.raw.inside.is_none()
                    && self.raw.links == 0;
            }
            _ => {}
        }
        false
    }
}

/// The names `markdown` mentions ([`crate::mentions`]): in its prose
/// (outside code, links, images and raw HTML); distinct, at most
/// [`mentions::MAX_MENTIONS`].
pub fn mentioned(markdown: &str) -> Vec<Username> {
    let mut prose = Prose::default();
    // Lazily: the parse stops at the last distinct name that counts.
    let names = TextMergeStream::new(Parser::new_ext(markdown, MARKDOWN)).flat_map(|event| {
        if prose.holds(&event)
            && let Event::Text(text) = &event
        {
            mentions::find(text).map(|m| m.name).collect()
        } else {
            Vec::new()
        }
    });
    mentions::distinct(names)
}

/// What stands for a mention's link while the HTML is sanitised: a random
/// prefix (80 bits, drawn for each rendering: no content can hold it) and
/// the link's number, [`Marker::DIGITS`] digits. ASCII letters and digits
/// only, which the sanitiser keeps as they are.
struct Marker(String);

impl Marker {
    const DIGITS: usize = 8;

    fn new() -> Self {
        Self(format!("mention{:020x}", ulid::Ulid::generate().random()))
    }

    /// `text`, prose, with each mention of a user in `mentions` replaced by
    /// a marker, and its link (its text as written) added to `links`.
    fn mark(&self, text: &str, mentions: &Mentions, links: &mut Vec<String>) -> String {
        let mut marked = String::with_capacity(text.len());
        let mut written = 0;
        for mention in mentions::find(text) {
            let Some(user) = mentions.user(&mention.name) else {
                continue;
            };
            marked.push_str(&text[written..mention.at.start]);
            marked.push_str(&format!(
                "{}{:0width$}",
                self.0,
                links.len(),
                width = Self::DIGITS
            ));
            links.push(format!(
                "<a href=\"{PROFILE_PATH}{}\" class=\"{MENTION_CLASS}\" rel=\"{LINK_REL}\">{}</a>",
                escaped(user.as_str()),
                escaped(&text[mention.at.clone()]),
            ));
            written = mention.at.end;
        }
        marked.push_str(&text[written..]);
        marked
    }

    /// Sanitised `html` with each marker replaced by its link. A marker
    /// that names no link (the sanitiser cut it: none is known to) is left
    /// out.
    fn linked(&self, html: String, links: &[String]) -> String {
        if links.is_empty() {
            return html;
        }
        let mut out =
            String::with_capacity(html.len() + links.iter().map(String::len).sum::<usize>());
        let mut rest = html.as_str();
        while let Some(at) = rest.find(&self.0) {
            out.push_str(&rest[..at]);
            let after = &rest[at + self.0.len()..];
            let digits = after
                .bytes()
                .take(Self::DIGITS)
                .take_while(u8::is_ascii_digit)
                .count();
            let link = (digits == Self::DIGITS)
                .then(|| after[..digits].parse::<usize>().ok())
                .flatten()
                .and_then(|n| links.get(n));
            if let Some(link) = link {
                out.push_str(link);
            }
            rest = &after[digits..];
        }
        out.push_str(rest);
        out
    }
}

/// `raw` with HTML's special characters as references (a user id and a
/// mention have none by their rules: this holds whatever they become).
fn escaped(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What a reader reads of `markdown`, without its markup: the text of its
/// blocks one per line (trimmed, blank ones left out), HTML left out, and
/// the text inside raw HTML elements that is not prose ([`NOT_PROSE`]) too;
/// only readable characters ([`text::is_readable`]: a `&#1;` decodes to
/// U+0001, which is dropped).
pub fn plain_text(markdown: &str) -> String {
    let mut plain = String::with_capacity(markdown.len());
    let mut raw = RawHtml::default();
    for event in Parser::new_ext(markdown, MARKDOWN) {
        match event {
            Event::Html(html) | Event::InlineHtml(html) => raw = raw.after(&html),
            Event::Text(_) | Event::Code(_) if raw.inside.is_some() => {}
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
    use crate::ids::UserId;

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

    /// What the corpus's renderings are held to: nothing that can run or
    /// load, links with their `rel`, and no relative URL or class on a link
    /// but a mention's: `profile`, the one profile mentioned, if any.
    fn assert_safe(entry: &str, html: &str, profile: Option<&str>) {
        for tag in tags(html) {
            assert!(
                !FORBIDDEN_TAGS.contains(&tag.as_str()),
                "<{tag}> from {entry:?}: {html}"
            );
        }
        for (tag, attr, value) in attributes(html) {
            assert!(
                ALLOWED_ATTRIBUTES.contains(&attr.as_str()),
                "{attr} on <{tag}> from {entry:?}: {html}"
            );
            if matches!(attr.as_str(), "href" | "src" | "cite") {
                let lower = value.trim().to_ascii_lowercase();
                assert!(
                    lower.starts_with("http://")
                        || lower.starts_with("https://")
                        || lower.starts_with("mailto:")
                        || (tag == "a" && attr == "href" && Some(value.as_str()) == profile),
                    "{attr}={value:?} from {entry:?}: {html}"
                );
            }
            if attr == "style" {
                assert!(value.starts_with("text-align:"), "{value} from {entry:?}");
                assert!(!value.contains(['(', '\\', '/']), "{value} from {entry:?}");
            }
            if attr == "class" {
                assert!(
                    language_class(&value)
                        || (tag == "a" && value == MENTION_CLASS && profile.is_some()),
                    "{value} on <{tag}> from {entry:?}"
                );
            }
        }
        for (tag, attr, value) in attributes(html) {
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

    #[test]
    fn no_corpus_entry_renders_anything_that_can_run_or_load() {
        let corpus = corpus();
        assert!(
            corpus.len() >= 60,
            "the corpus has {} entries",
            corpus.len()
        );
        for entry in &corpus {
            assert_safe(entry, &to_html(entry), None);
        }
    }

    /// Each entry with mentions around it, of a user found: what is safe
    /// without them is with them, and they link only where they stand.
    #[test]
    fn no_corpus_entry_with_mentions_renders_anything_that_can_run_or_load()
    -> Result<(), Box<dyn std::error::Error>> {
        let ann = Username::parse("ann")?;
        let mentions = Mentions::resolved([(&ann, UserId::parse("auth0|u-1@x.example")?)]);
        for entry in corpus() {
            for mentioned in [
                format!("@ann {entry} @ann"),
                format!("@ann{entry}@ann"),
                format!("{entry}\n\n@ann"),
            ] {
                let html = to_html_mentioning(&mentioned, &mentions);
                assert_safe(&mentioned, &html, Some("/users/auth0|u-1@x.example"));
                // The two it was given, and none from the entry.
                let links = html.matches("class=\"mention\"").count();
                assert!(links <= 2, "{mentioned:?}: {html}");
                assert_eq!(
                    links,
                    html.matches("href=\"/users/auth0|u-1@x.example\"").count(),
                    "{mentioned:?}: {html}"
                );
            }
        }
        Ok(())
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
    fn names(markdown: &str) -> Vec<String> {
        mentioned(markdown)
            .iter()
            .map(|name| name.as_str().to_owned())
            .collect()
    }

    fn found(pairs: &[(&str, &str)]) -> Result<Mentions, Box<dyn std::error::Error>> {
        let pairs: Vec<(Username, UserId)> = pairs
            .iter()
            .map(|(name, id)| Ok((Username::parse(name)?, UserId::parse(id)?)))
            .collect::<Result<_, Box<dyn std::error::Error>>>()?;
        Ok(Mentions::resolved(
            pairs.iter().map(|(n, u)| (n, u.clone())),
        ))
    }

    #[test]
    fn mentions_stand_in_prose_only() {
        assert_eq!(names("Hi @ann, and @Bob."), ["ann", "Bob"]);
        assert_eq!(
            names("# @ann\n\n*@bob* **@cyd** ~~@dee~~"),
            ["ann", "bob", "cyd", "dee"]
        );
        assert_eq!(names("| a |\n|---|\n| @ann |"), ["ann"]);
        assert_eq!(names("> @ann\n\n- @bob"), ["ann", "bob"]);
        for not_prose in [
            "`@ann`",
            "``a @ann b``",
            "```\n@ann\n```",
            "~~~md\n@ann\n~~~",
            "    @ann indented",
            "[@ann](https://example.com)",
            "[text](https://example.com/@ann)",
            "<https://example.com/@ann>",
            "<ann@example.com>",
            "![@ann](https://example.com/p.png)",
            "mail ann@example.com or https://example.social/@ann",
            "<a href=\"https://example.com\">@ann</a>",
            "<A HREF=x>\n\n@ann\n\n</a>",
            "<script>@ann</script>",
            "<textarea>@ann</textarea>",
            "<!-- @ann -->",
            "<span title=\"@ann\">x</span>",
        ] {
            assert_eq!(names(not_prose), Vec::<String>::new(), "{not_prose:?}");
        }
        // After a raw link or a code block, prose again.
        assert_eq!(names("<a href=x>@ann</a> @bob"), ["bob"]);
        assert_eq!(names("```\n@ann\n```\n\n@bob `@cyd` @dee"), ["bob", "dee"]);
        assert_eq!(names("[x](https://x.example) @ann"), ["ann"]);
    }

    #[test]
    fn mentions_are_distinct_ignoring_case_at_most_ten() {
        assert_eq!(names("@Ann @ann @ANN @bob @ann"), ["Ann", "bob"]);
        let eleven: String = (0..11).map(|i| format!("@user{i:02} ")).collect();
        let found = names(&eleven);
        assert_eq!(found.len(), mentions::MAX_MENTIONS);
        assert_eq!(found.last().map(String::as_str), Some("user09"));
        // Repeats and code do not take places.
        let repeated = format!("`@code1` @user00 @USER00 {eleven}");
        assert_eq!(names(&repeated), found);
    }

    #[test]
    fn a_mention_found_links_to_the_profile_by_id() -> Result<(), Box<dyn std::error::Error>> {
        let mentions = found(&[("ann", "u-1"), ("cyd", "auth0|c@x.example")])?;
        let html = to_html_mentioning("Hi @Ann, @bob and **@cyd**!", &mentions);
        assert_eq!(
            html,
            "<p>Hi <a href=\"/users/u-1\" class=\"mention\" rel=\"nofollow ugc noopener\">@Ann</a>, \
             @bob and <strong><a href=\"/users/auth0|c@x.example\" class=\"mention\" \
             rel=\"nofollow ugc noopener\">@cyd</a></strong>!</p>\n"
        );
        // In code, links, addresses and URLs: as without mentions.
        for untouched in [
            "`@ann` and\n\n```\n@ann\n```\n",
            "[@ann](https://example.com/@ann) ann@example.com https://x.example/@ann",
            "<a href=\"https://example.com\">@ann</a>",
            "&lt;@ann&gt; is text",
        ] {
            let html = to_html_mentioning(untouched, &mentions);
            if untouched.starts_with("&lt;") {
                assert!(html.contains("&lt;<a href=\"/users/u-1\""), "{html}");
            } else {
                assert_eq!(html, to_html(untouched), "{untouched:?}");
            }
        }
        // The same text without mentions renders as before.
        assert_eq!(
            to_html_mentioning("Hi @Ann", &Mentions::default()),
            "<p>Hi @Ann</p>\n"
        );
        Ok(())
    }

    #[test]
    fn hostile_text_links_nothing_but_the_mentions_found() -> Result<(), Box<dyn std::error::Error>>
    {
        let mentions = found(&[("ann", "u-1")])?;
        for (markdown, mentioned, links) in [
            // Not names: no link, the text escaped as any.
            ("@<script>alert(1)</script> @ann\"onclick=x", 1, 1),
            ("@ann<img src=x onerror=alert(1)>", 1, 1),
            ("@\"><b>x</b>", 0, 0),
            ("@ann&quot;onmouseover", 1, 1),
            // A mention's link written by hand: neither its URL nor its class.
            (
                "<a href=\"/users/u-1\" class=\"mention\" onclick=\"x\">@ann</a>",
                0,
                1,
            ),
            // Relative URLs, anywhere: gone.
            (
                "<a href=\"/posts/x\">a</a> <a href=\"//evil.example/users/u-1\">b</a>",
                0,
                2,
            ),
            ("<img src=\"/users/u-1\"> ![x](/users/u-1)", 0, 0),
            (
                "<a class=\"mention\" href=\"https://x.example\">@ann</a>",
                0,
                1,
            ),
            // What looks like a marker is text.
            ("mention0000000000000000000000000000 @ann", 1, 1),
        ] {
            let html = to_html_mentioning(markdown, &mentions);
            let profile = (mentioned > 0).then_some("/users/u-1");
            assert_safe(markdown, &html, profile);
            assert_eq!(html.matches("<a ").count(), links, "{markdown:?}: {html}");
            assert_eq!(
                html.matches("class=\"mention\"").count(),
                mentioned,
                "{markdown:?}: {html}"
            );
            assert_eq!(
                html.matches("href=\"/users/u-1\"").count(),
                mentioned,
                "{markdown:?}: {html}"
            );
            // What the text says stays text, and no attribute is made of it.
            for (_, attr, _) in attributes(&html) {
                assert!(
                    matches!(attr.as_str(), "href" | "class" | "rel" | "alt"),
                    "{attr}: {html}"
                );
            }
            assert!(
                !html.contains("<script") && !html.contains("evil.example"),
                "{html}"
            );
            assert!(!html.contains("/posts/x"), "{html}");
        }
        Ok(())
    }

    #[test]
    fn markers_are_drawn_anew_and_stand_only_for_their_links() {
        let (one, two) = (Marker::new(), Marker::new());
        assert_ne!(one.0, two.0);
        assert!(one.0.bytes().all(|b| b.is_ascii_alphanumeric()));
        let links = vec!["<a>0</a>".to_owned()];
        let marked = format!("x {}00000000 y {}00000001 z {}0", one.0, one.0, one.0);
        assert_eq!(one.linked(marked, &links), "x <a>0</a> y  z ");
        // Another rendering's marker is text.
        let other = format!("{}00000000", two.0);
        assert_eq!(one.linked(other.clone(), &links), other);
    }

    #[test]
    fn eleven_mentions_link_the_ten_found() -> Result<(), Box<dyn std::error::Error>> {
        let text: String = (0..12).map(|i| format!("@user{i:02} ")).collect();
        let names = mentioned(&text);
        let ids: Vec<(String, String)> = names
            .iter()
            .map(|n| (n.as_str().to_owned(), format!("id-{n}")))
            .collect();
        let pairs: Vec<(&str, &str)> = ids.iter().map(|(n, i)| (n.as_str(), i.as_str())).collect();
        let html = to_html_mentioning(&text, &found(&pairs)?);
        assert_eq!(
            html.matches("class=\"mention\"").count(),
            mentions::MAX_MENTIONS
        );
        assert!(html.contains("<a href=\"/users/id-user09\""), "{html}");
        assert!(html.contains(" @user10 @user11"), "{html}");
        Ok(())
    }
}
