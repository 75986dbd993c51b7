//! Every stored item's shape, below every operation: its struct, its
//! [`Entity`](crate::keys::Entity) impl (type, key, GSI1 key), its one key
//! constructor and the names of the attributes operations read or
//! condition on. Operations import these and the table layer, never each
//! other's shapes; an item file imports only `keys`, the table layer's
//! expression types and, where one item names another's shard, `counter`.

pub mod block;
pub mod comment;
pub mod counter;
#[cfg(test)]
mod docs;
pub mod feed;
pub mod first_page;
pub mod follow;
pub mod home;
pub mod like;
pub mod notification;
pub mod parked;
pub mod post;
pub mod rename;
pub mod request_record;
pub mod schedule;
pub mod user;
