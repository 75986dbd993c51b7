//! Mentions: `@username` in a post's Markdown or a comment's text, and the
//! map of the users they name that a post item and a comment item keep.
//!
//! A mention is an `@` and a username by its rule ([`Username::parse`]: 3 to
//! 30 of `A–Z a–z 0–9 _`), standing on its own: the `@` begins the text or
//! follows a space or punctuation that cannot be part of an address or a URL
//! (`a@b.com`, `https://example.com/@ann` and `?u=@ann` mention no one), and
//! the name is followed by the end of the text or by anything but a letter,
//! a digit or another `@` (`@ann,` and `@ann.` mention `ann`; `@ann@b.com`
//! and `@annë` do not). A run of name characters longer than a username is no
//! mention, rather than a mention of its first 30. Names are matched
//! ignoring case, by their folded form ([`Username::folded`]), as the
//! username claims are.
//!
//! At most [`MAX_MENTIONS`] distinct users a post or a comment, the first
//! ones written: what follows stays plain text (no error). Which parts of a
//! post's Markdown can hold a mention (not code, links or raw HTML) is
//! [`crate::markdown::mentioned`]'s; a comment is plain text, all of it.
//!
//! The users are found when the post or comment is written (its username
//! claims, one BatchGetItem: `store::users`), and kept on its item as
//! [`Mentions`]: the folded name → the user's id. A name no one holds is left
//! out and stays plain text; a rename afterwards changes nothing, since the
//! link goes by the id.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::{
    ids::UserId,
    text::{TextError, Username},
};

/// The most users a post or a comment mentions; further names stay plain
/// text.
pub const MAX_MENTIONS: usize = 10;

/// What may stand right before an `@` and make it part of something else:
/// an address, a URL, a path or a query, another name.
const GLUE: &[char] = &[
    '@', '_', '.', '/', '\\', ':', '-', '+', '=', '&', '?', '#', '%', '~', '|', '$',
];

/// One `@name` as written: where it stands in its text (the `@` included)
/// and the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    pub at: Range<usize>,
    pub name: Username,
}

/// Whether `before`, the character before an `@` (if any), lets it begin a
/// mention: the start of the text, a space, or punctuation that is not
/// [`GLUE`].
fn may_begin(before: Option<char>) -> bool {
    before.is_none_or(|c| c.is_whitespace() || !(c.is_alphanumeric() || GLUE.contains(&c)))
}

/// Whether `after`, the character after a name (if any), ends it: the end of
/// the text, or anything but a letter, a digit, `_` or `@`.
fn may_end(after: Option<char>) -> bool {
    after.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '@'))
}

/// Every mention in `text`, one run of prose, in order (repeats included).
pub fn find(text: &str) -> impl Iterator<Item = Mention> + '_ {
    text.match_indices('@').filter_map(move |(at, _)| {
        if !may_begin(text[..at].chars().next_back()) {
            return None;
        }
        let rest = &text[at + 1..];
        let length = rest
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        if length == 0 || !may_end(rest[length..].chars().next()) {
            return None;
        }
        let name = Username::parse(&rest[..length]).ok()?;
        Some(Mention {
            at: at..at + 1 + length,
            name,
        })
    })
}

/// The distinct names (ignoring case) among `names`, in the order first
/// written, at most [`MAX_MENTIONS`]: the names a post or comment mentions.
pub fn distinct(names: impl IntoIterator<Item = Username>) -> Vec<Username> {
    let mut kept: Vec<Username> = Vec::new();
    for name in names {
        if !kept.iter().any(|k| k.folded() == name.folded()) {
            kept.push(name);
            if kept.len() == MAX_MENTIONS {
                break;
            }
        }
    }
    kept
}

/// The names a comment mentions: its content is plain text, shown as
/// written, so every part of it may.
pub fn in_comment(content: &str) -> Vec<Username> {
    distinct(find(content).map(|m| m.name))
}

/// The users a post or a comment mentions, as its item keeps them
/// (`mentions`): each folded name → the id of the user who held it when
/// the text was written. At most [`MAX_MENTIONS`]; absent from the item
/// when empty. The notifications read it from the stream's images.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, UserId>",
    into = "BTreeMap<String, UserId>"
)]
pub struct Mentions(BTreeMap<String, UserId>);

impl Mentions {
    /// The users found for names, each under its name's folded form.
    pub fn resolved<'a>(found: impl IntoIterator<Item = (&'a Username, UserId)>) -> Self {
        Self(
            found
                .into_iter()
                .map(|(name, user)| (name.folded(), user))
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The user `name` mentions, if it was found.
    pub fn user(&self, name: &Username) -> Option<&UserId> {
        self.0.get(&name.folded())
    }

    /// Each folded name and the user it names.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &UserId)> {
        self.0.iter().map(|(name, user)| (name.as_str(), user))
    }

    /// What of these is still mentioned by `names` (an edit keeps the user a
    /// name was found for, without reading its claim again), and the names
    /// it does not hold, to look up.
    pub fn kept_for(&self, names: &[Username]) -> (Self, Vec<Username>) {
        let mut kept = BTreeMap::new();
        let mut missing = Vec::new();
        for name in names {
            match self.0.get_key_value(&name.folded()) {
                Some((folded, user)) => {
                    kept.insert(folded.clone(), user.clone());
                }
                None => missing.push(name.clone()),
            }
        }
        (Self(kept), missing)
    }

    /// These and `more` (which names none of these).
    pub fn and(mut self, more: Self) -> Self {
        self.0.extend(more.0);
        self
    }
}

/// A stored map is held to the rules as it is read back: folded usernames,
/// at most [`MAX_MENTIONS`] of them.
impl TryFrom<BTreeMap<String, UserId>> for Mentions {
    type Error = TextError;

    fn try_from(map: BTreeMap<String, UserId>) -> Result<Self, TextError> {
        if map.len() > MAX_MENTIONS {
            return Err(TextError {
                field: "mentions",
                problem: format!("may name at most {MAX_MENTIONS} users"),
            });
        }
        for name in map.keys() {
            if Username::parse(name)?.folded() != *name {
                return Err(TextError {
                    field: "mentions",
                    problem: "must be keyed by folded usernames".to_owned(),
                });
            }
        }
        Ok(Self(map))
    }
}

impl From<Mentions> for BTreeMap<String, UserId> {
    fn from(mentions: Mentions) -> Self {
        mentions.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        find(text).map(|m| m.name.to_string()).collect()
    }

    #[test]
    fn a_mention_stands_on_its_own() {
        assert_eq!(names("@ann"), ["ann"]);
        assert_eq!(names("hi @ann and @Bob_2!"), ["ann", "Bob_2"]);
        for punctuated in [
            "@ann,", "@ann.", "@ann!", "@ann?", "@ann:", "@ann's", "(@ann)",
        ] {
            assert_eq!(names(punctuated), ["ann"], "{punctuated}");
        }
        assert_eq!(names("\"@ann\" «@ann» 「@ann」"), ["ann", "ann", "ann"]);
        assert_eq!(names("line\n@ann\ttab\t@bob"), ["ann", "bob"]);
        let found: Vec<Mention> = find("to @ann.").collect();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].at, 3..7);
    }

    #[test]
    fn addresses_urls_and_glued_text_mention_no_one() {
        for text in [
            "a@b.com",
            "write to ann@example.com",
            "first.last@example.com",
            "https://example.social/@ann",
            "https://example.com/?u=@ann",
            "x:@ann y-@ann z+@ann w=@ann",
            "@@ann",
            "_@ann",
            "mail@ann",
            "こんにちは@ann",
            "@ann@example.com",
            "@annë",
            "@ab",
            "@",
            "@ @ann_",
        ] {
            let found = names(text);
            // `@ann_` is the name `ann_`, not `ann`.
            let expected: &[&str] = if text == "@ @ann_" { &["ann_"] } else { &[] };
            assert_eq!(found, expected, "{text}");
        }
        // One character too many is no name at all, not a cut one.
        assert_eq!(names(&format!("@{}", "a".repeat(31))), Vec::<String>::new());
        assert_eq!(names(&format!("@{}", "a".repeat(30))).len(), 1);
    }

    #[test]
    fn hostile_names_are_no_names() {
        for text in [
            "@<script>",
            "@ann<b>",
            "@\"onmouseover=x",
            "@an&amp;n",
            "@ann\u{0}",
        ] {
            for mention in find(text) {
                assert!(
                    mention
                        .name
                        .as_str()
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "{text}"
                );
            }
        }
        assert_eq!(names("@<script>"), Vec::<String>::new());
        assert_eq!(names("@ann<b>"), ["ann"]);
    }

    #[test]
    fn names_are_distinct_ignoring_case_and_at_most_ten() {
        let mentioned = in_comment("@Ann @ann @ANN @bob @ann");
        let folded: Vec<String> = mentioned.iter().map(Username::folded).collect();
        assert_eq!(folded, ["ann", "bob"]);
        // The first as written stands for the name.
        assert_eq!(mentioned[0].as_str(), "Ann");

        let many: String = (0..15).map(|i| format!("@user{i:02} ")).collect();
        let mentioned = in_comment(&format!("{many} @user00"));
        assert_eq!(mentioned.len(), MAX_MENTIONS);
        assert_eq!(mentioned[9].as_str(), "user09");
    }

    #[test]
    fn the_map_keeps_folded_names_and_reads_back_only_those()
    -> Result<(), Box<dyn std::error::Error>> {
        let ann = Username::parse("Ann")?;
        let bob = Username::parse("bob")?;
        let mentions = Mentions::resolved([(&ann, UserId::parse("u-ann")?)]);
        assert_eq!(
            mentions.user(&Username::parse("ANN")?).map(UserId::as_str),
            Some("u-ann")
        );
        assert_eq!(mentions.user(&bob), None);

        let item = serde_dynamo::to_attribute_value::<_, serde_dynamo::AttributeValue>(&mentions)?;
        let serde_dynamo::AttributeValue::M(map) = &item else {
            panic!("a map: {item:?}");
        };
        assert_eq!(
            map.get("ann"),
            Some(&serde_dynamo::AttributeValue::S("u-ann".to_owned()))
        );
        let back: Mentions = serde_dynamo::from_attribute_value(item)?;
        assert_eq!(back, mentions);

        let unfolded = serde_json::json!({ "Ann": "u-ann" });
        assert!(serde_json::from_value::<Mentions>(unfolded).is_err());
        let not_a_name = serde_json::json!({ "a<b": "u" });
        assert!(serde_json::from_value::<Mentions>(not_a_name).is_err());
        let too_many: serde_json::Map<String, serde_json::Value> = (0..=MAX_MENTIONS)
            .map(|i| (format!("user{i:02}"), serde_json::json!("u")))
            .collect();
        assert!(serde_json::from_value::<Mentions>(too_many.into()).is_err());
        Ok(())
    }

    #[test]
    fn an_edit_keeps_what_was_found_and_looks_up_the_rest() -> Result<(), Box<dyn std::error::Error>>
    {
        let (ann, bob, cy) = (
            Username::parse("ann")?,
            Username::parse("bob")?,
            Username::parse("cyd")?,
        );
        let stored = Mentions::resolved([
            (&ann, UserId::parse("u-ann")?),
            (&bob, UserId::parse("u-bob")?),
        ]);
        let (kept, missing) = stored.kept_for(&[Username::parse("ANN")?, cy.clone()]);
        assert_eq!(kept, Mentions::resolved([(&ann, UserId::parse("u-ann")?)]));
        assert_eq!(missing, std::slice::from_ref(&cy));
        let all = kept.and(Mentions::resolved([(&cy, UserId::parse("u-cy")?)]));
        assert_eq!(all.len(), 2);
        assert!(all.user(&bob).is_none());
        Ok(())
    }
}
