//! Counts kept by shards (one home for the protocol): a counter item with a
//! `version`, stepped one up or down in the transaction of what it counts;
//! the fan-out copies each counter's count and version onto its owner only
//! where newer, so a record delivered twice or late counts nothing twice;
//! the owner's deletion or erasure closes its counters; the audit holds
//! each counter to what it counts.
//!
//! - [`post`]: a post's `likeCount` and `commentCount`: on the post item
//!   while it is quiet, in one of its shard counters (`POST#p#k / COUNTS`)
//!   once it is hot, summed onto the post item by the fan-out
//!   (`shardCounts`); the loop every like and comment counts up through.
//! - [`followers`]: a user's followers, in one counter a follower shard
//!   (`FOLLOWERS#v#k / COUNT`), copied onto the profile by the fan-out
//!   (`followerShards`, summed when read).
//!
//! The two differ where their owners do: a post's counts are read on every
//! Q2 and list entry, so the fan-out adds the shards' changes into the
//! post's own counts (one number each, exact-version conditions); a
//! profile's follower count is read with the profile alone, so it keeps
//! each shard's copy and sums them when read.

pub mod followers;
pub mod post;
