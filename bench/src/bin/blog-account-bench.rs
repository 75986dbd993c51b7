//! `blog-account-bench`: the account requests at S and at 10×S, on the V3
//! table alone (the naive models have no such requests): a page of the
//! reference user's export (`GET /users/{userId}/export?limit=25`, every
//! page metered, then pages timed), and the erasure (`DELETE
//! /users/{userId}`) of the user with the fewest posts and of a median one:
//! the request, then its fan-out drained to the end of the walk. Prints the
//! tables docs/benchmarks.md shows under "Account requests".
//!
//! ```text
//! blog-account-bench --endpoint URL [--users S] [--runs N]
//! ```
//!
//! `infra/bench.sh --account` runs it against its own DynamoDB Local.

use std::time::Instant;

use bench::{
    measure::{self, Clients},
    naive::Error,
    report,
};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default();
    let mut users = 101_usize;
    let mut runs = 300_usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => endpoint = value()?,
            "--users" => users = value()?.parse()?,
            "--runs" => runs = value()?.parse()?,
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    let started = Instant::now();
    let clients = Clients::local(&endpoint).await;
    let run = ulid::Ulid::generate().to_string().to_lowercase();
    let mut results = Vec::new();
    for (label, scale) in [("S", users), ("10×S", users * 10)] {
        let prefix = format!("account-{scale}-{run}");
        results.push(measure::measure_account(&clients, label, &prefix, scale, runs).await?);
    }
    for result in &results {
        println!(
            "{}: {} users, {} V3 items loaded in {:.0} s",
            result.label, result.loaded.users, result.loaded.v3_items, result.loaded.seconds
        );
    }
    println!("\n{}", report::account(&results));
    println!("in {:.1} minutes", started.elapsed().as_secs_f64() / 60.0);
    Ok(())
}
