//! No code: this crate's dependencies unify features between the test
//! command's two builds (its `Cargo.toml` says why).
