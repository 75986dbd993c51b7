//! The HTTP contract, request by request (C1–C4, Q1–Q6), over HTTP against
//! DynamoDB Local. One test binary with modules keeps build time down.

mod atom;
mod audit;
mod authz;
mod billed;
mod capacity;
mod comments;
mod conditional;
mod conflicts;
mod contract;
mod deletes;
mod erasure;
mod errors;
mod exactness;
mod export;
mod fanout;
mod fault_proxy;
mod faults;
mod feed;
mod hot;
mod idempotency;
mod identity;
mod likes;
mod load;
mod migration;
mod pages;
mod poller;
mod posts;
mod recovery;
mod renames;
mod stream_filter;
mod support;
mod tags;
mod template;
mod users;
mod viral;
