//! Opaque pagination cursors.
//!
//! A cursor names the list it belongs to and the id of the last item served. It
//! holds no key: the next page's start key is rebuilt from that id through
//! [`crate::keys`] after the id is validated, so a tampered cursor can at most
//! point somewhere else in the same list, and a cursor from another list, or
//! one that does not decode, is rejected.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CursorError {
    #[error("cursor is malformed")]
    Malformed,
    #[error("cursor belongs to another list")]
    OtherList,
    #[error("cursor does not match the list it continues")]
    Mismatch,
}

/// The longest cursor decoded: every cursor the server writes is far
/// shorter (a list's name and one key's worth of ids, about 100 characters),
/// so a longer one was not written here and is refused before any work.
pub const MAX_LEN: usize = 512;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    /// The list: e.g. `comments:<postId>`.
    l: String,
    /// The id of the last item on the previous page.
    a: String,
}

pub fn encode(list: &str, after: &str) -> String {
    let wire = Wire {
        l: list.to_owned(),
        a: after.to_owned(),
    };
    // Serialising two strings to JSON cannot fail.
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).unwrap_or_default())
}

/// Returns the raw id stored in a cursor of `list`; the caller validates it.
pub fn decode(cursor: &str, list: &str) -> Result<String, CursorError> {
    if cursor.len() > MAX_LEN {
        return Err(CursorError::Malformed);
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| CursorError::Malformed)?;
    let wire: Wire = serde_json::from_slice(&bytes).map_err(|_| CursorError::Malformed)?;
    if wire.l != list {
        return Err(CursorError::OtherList);
    }
    Ok(wire.a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_within_its_list() {
        let c = encode("comments:A", "01ARZ3NDEKTSV4RRFFQ69G5FAV");
        assert_eq!(
            decode(&c, "comments:A").as_deref(),
            Ok("01ARZ3NDEKTSV4RRFFQ69G5FAV")
        );
    }

    #[test]
    fn rejects_other_lists_and_garbage() {
        let c = encode("comments:A", "x");
        assert_eq!(decode(&c, "comments:B"), Err(CursorError::OtherList));
        assert_eq!(decode(&c, "likes:A"), Err(CursorError::OtherList));
        assert_eq!(
            decode("not a cursor!", "comments:A"),
            Err(CursorError::Malformed)
        );
        assert_eq!(decode("", "comments:A"), Err(CursorError::Malformed));
        let mut tampered = c.clone().into_bytes();
        tampered[3] ^= 0x01;
        let tampered = String::from_utf8(tampered).unwrap_or_default();
        assert!(decode(&tampered, "comments:A").is_err());
    }

    #[test]
    fn refuses_an_oversized_cursor_before_decoding_it() {
        let long = encode("comments:A", &"x".repeat(MAX_LEN));
        assert!(long.len() > MAX_LEN);
        assert_eq!(decode(&long, "comments:A"), Err(CursorError::Malformed));
        let id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
        let longest = encode(&format!("export:{id}"), &format!("LIKE#{id}#{id}.255"));
        assert!(longest.len() < MAX_LEN / 2, "{}", longest.len());
    }
}
