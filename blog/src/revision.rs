//! Revisions: what a writer's edit changes of a post or a profile, as one
//! number, so that an edit made from a stale copy is refused instead of
//! silently overwriting the edit it never saw (`If-Match`, RFC 9110 §13.1.1;
//! the HTTP side is `api::conditional`).
//!
//! A post's revision covers its title, `updatedAt` and publication, a profile's its
//! username and `updatedAt`: every edit sets `updatedAt` later than the one
//! it replaces ([`crate::timestamp::after`]), so two edits never share a
//! revision. Likes, comments and the fan-out's copies change neither: a like
//! given meanwhile does not refuse an author's edit.

/// FNV-1a, 64 bits: the same in every build and on every machine (a
/// revision is compared with one a client got from another process).
pub fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One revision of a post or a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Revision(u64);

impl Revision {
    /// The revision of the values `parts` (each ended by a byte no UTF-8
    /// text holds, so that the parts cannot run into each other).
    fn of(parts: &[&str]) -> Self {
        let mut bytes = Vec::new();
        for part in parts {
            bytes.extend_from_slice(part.as_bytes());
            bytes.push(0xff);
        }
        Self(stable_hash(&bytes))
    }

    /// A post's: its title, when it was last edited, and when it was
    /// published (none while a draft or scheduled): the scheduler's
    /// publication edits nothing, yet a copy read before it is not the post.
    pub fn of_post(title: &str, updated_at: &str, published_at: Option<&str>) -> Self {
        Self::of(&["post", title, updated_at, published_at.unwrap_or("")])
    }

    /// A profile's: its username and when it was last edited.
    pub fn of_profile(username: &str, updated_at: &str) -> Self {
        Self::of(&["profile", username, updated_at])
    }

    /// As an entity tag carries it: 16 lower-case hex digits.
    pub fn to_hex(self) -> String {
        format!("{:016x}", self.0)
    }

    /// From [`Revision::to_hex`]'s form; `None` for anything else.
    pub fn from_hex(raw: &str) -> Option<Self> {
        let lower = raw.len() == 16 && raw.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        lower
            .then(|| u64::from_str_radix(raw, 16).ok())
            .flatten()
            .map(Self)
    }
}

/// What an edit or a deletion requires of the current revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Any (no `If-Match`, or `If-Match: *`: it exists).
    Any,
    /// One of these (`If-Match` with entity tags; none at all when every tag
    /// given was one this API never wrote, which nothing matches).
    OneOf(Vec<Revision>),
}

impl Expected {
    /// Whether `current` meets it.
    pub fn admits(&self, current: Revision) -> bool {
        match self {
            Self::Any => true,
            Self::OneOf(revisions) => revisions.contains(&current),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_is_stable_and_parts_do_not_run_together() {
        let a = Revision::of_post("ab", "2026-01-01T00:00:00.000Z", None);
        assert_eq!(a, Revision::of_post("ab", "2026-01-01T00:00:00.000Z", None));
        assert_ne!(a, Revision::of_post("a", "b2026-01-01T00:00:00.000Z", None));
        assert_ne!(a, Revision::of_profile("ab", "2026-01-01T00:00:00.000Z"));
        // Published since (the scheduler's publication edits nothing else).
        let out = Revision::of_post(
            "ab",
            "2026-01-01T00:00:00.000Z",
            Some("2026-01-02T00:00:00.000Z"),
        );
        assert_ne!(a, out);
        assert_eq!(Revision::from_hex(&a.to_hex()), Some(a));
        assert_eq!(Revision::from_hex("ABCDEF0123456789"), None);
        assert_eq!(Revision::from_hex("0123"), None);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn only_a_listed_revision_is_admitted() {
        let a = Revision::of_post("a", "t", None);
        let b = Revision::of_post("b", "t", None);
        assert!(Expected::Any.admits(a));
        assert!(Expected::OneOf(vec![b, a]).admits(a));
        assert!(!Expected::OneOf(vec![b]).admits(a));
        assert!(!Expected::OneOf(vec![]).admits(a));
    }
}
