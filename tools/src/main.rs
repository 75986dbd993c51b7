//! `blog-admin`: tools for operators and for the local stack.
//!
//! ```text
//! blog-admin create-table    create the table (TABLE_NAME) if it is missing
//! ```
//! The table and endpoint come from the same environment as the functions:
//! `TABLE_NAME`, and `DYNAMODB_ENDPOINT` for DynamoDB Local.

use std::process::ExitCode;

use blog::store::{self, table};

const USAGE: &str = "usage: blog-admin create-table";

#[tokio::main]
async fn main() -> ExitCode {
    blog::startup::init_tracing();
    let command = std::env::args().nth(1);
    let result = match command.as_deref() {
        Some("create-table") => create_table().await,
        _ => Err(USAGE.into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("blog-admin: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn create_table() -> Result<(), Box<dyn std::error::Error>> {
    let name = std::env::var("TABLE_NAME").map_err(|_| "TABLE_NAME is not set")?;
    let endpoint = std::env::var("DYNAMODB_ENDPOINT").ok();
    let client = store::connect(endpoint.as_deref()).await;
    let created = table::create_if_missing(&client, &name).await?;
    tracing::info!(table = %name, created, "table ready");
    Ok(())
}
