//! `blog-admin`: tools for operators and for the local stack.
//!
//! ```text
//! blog-admin create-table
//!     create the table (TABLE_NAME) if it is missing
//! blog-admin audit [--repair]
//!     check every denormalised value against its source (a full Scan: an
//!     offline tool); with --repair, rewrite what is wrong. Exits 1 while
//!     anything is left unrepaired.
//! blog-admin gateway PORT
//!     serve every route on 127.0.0.1:PORT through `blog::local_gateway` (an
//!     API Gateway stand-in, for the fuzzer); the local stack itself runs
//!     under `cargo lambda watch`
//! blog-admin stream-poller [--checkpoint FILE] [--invoke URL]
//!     deliver the table's stream to the fan-out until Ctrl-C: in this process,
//!     or, with --invoke, through a Lambda Invoke API such as
//!     `cargo lambda watch`'s http://127.0.0.1:9000/2015-03-31/functions/fan-out/invocations
//! ```
//! The table and endpoint come from the same environment as the functions:
//! `TABLE_NAME`, and `DYNAMODB_ENDPOINT` for DynamoDB Local.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use aws_lambda_events::event::{dynamodb::Event, streams::DynamoDbEventResponse};
use blog::{
    fanout,
    store::{self, Store, table},
    stream_poller::StreamPoller,
};

type Error = Box<dyn std::error::Error>;

const USAGE: &str =
    "usage: blog-admin create-table | stream-poller [--checkpoint FILE] [--invoke URL]";

#[tokio::main]
async fn main() -> ExitCode {
    blog::startup::init_tracing();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("create-table") => create_table().await,
        Some("stream-poller") => stream_poller(&args[1..]).await,
        Some("audit") => audit(&args[1..]).await,
        Some("gateway") => gateway(&args[1..]).await,
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

struct Env {
    table: String,
    endpoint: Option<String>,
    sdk: aws_config::SdkConfig,
}

async fn env() -> Result<Env, Error> {
    Ok(Env {
        table: std::env::var("TABLE_NAME").map_err(|_| "TABLE_NAME is not set")?,
        endpoint: std::env::var("DYNAMODB_ENDPOINT").ok(),
        sdk: store::sdk_config().await,
    })
}

async fn create_table() -> Result<(), Error> {
    let env = env().await?;
    let client = store::dynamodb_client(&env.sdk, env.endpoint.as_deref());
    let created = table::create_if_missing(&client, &env.table).await?;
    tracing::info!(table = %env.table, created, "table ready");
    Ok(())
}

async fn audit(args: &[String]) -> Result<(), Error> {
    let repair = match args {
        [] => false,
        [flag] if flag == "--repair" => true,
        _ => return Err(USAGE.into()),
    };
    let env = env().await?;
    let store = Store::new(
        store::dynamodb_client(&env.sdk, env.endpoint.as_deref()),
        env.table,
    );
    let report = store.audit(repair).await?;
    for finding in &report.findings {
        println!("{finding}");
    }
    tracing::info!(
        items_read = report.items_read,
        findings = report.findings.len(),
        repaired = report.repaired,
        "audit finished"
    );
    let left = report.findings.len() - report.repaired;
    if left > 0 {
        return Err(format!(
            "{left} finding(s) left; run with --repair, or again if values changed meanwhile"
        )
        .into());
    }
    Ok(())
}

async fn gateway(args: &[String]) -> Result<(), Error> {
    let [port] = args else {
        return Err(USAGE.into());
    };
    let port: u16 = port.parse().map_err(|_| USAGE)?;
    let app = blog::startup::app_from_env()
        .await
        .map_err(|e| e.to_string())?;
    let app: &'static blog::api::App = Box::leak(Box::new(app));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    tracing::info!(port, "gateway listening");
    tokio::select! {
        () = blog::local_gateway::serve(listener, app, None) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

async fn stream_poller(args: &[String]) -> Result<(), Error> {
    let mut checkpoint = None;
    let mut invoke = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match (flag.as_str(), rest.next()) {
            ("--checkpoint", Some(path)) => checkpoint = Some(PathBuf::from(path)),
            ("--invoke", Some(url)) => invoke = Some(url.clone()),
            _ => return Err(USAGE.into()),
        }
    }
    let env = env().await?;
    let store = Store::new(
        store::dynamodb_client(&env.sdk, env.endpoint.as_deref()),
        env.table.clone(),
    );
    let streams = store::streams_client(&env.sdk, env.endpoint.as_deref());
    let poller = StreamPoller::new(store.clone(), streams, checkpoint);
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let idle = Duration::from_millis(200);
    tracing::info!(table = %env.table, invoke = invoke.as_deref().unwrap_or("in-process"), "stream poller started");
    match invoke {
        None => {
            let deliver = |event: Event| {
                let store = &store;
                async move { Ok(fanout::handle(store, event).await) }
            };
            poller.run(deliver, idle, stop).await;
        }
        Some(url) => {
            let http = reqwest::Client::new();
            let deliver = |event: Event| invoke_function(&http, &url, event);
            poller.run(deliver, idle, stop).await;
        }
    }
    Ok(())
}

/// Invokes the fan-out through the Lambda Invoke API, as the event source
/// mapping does, and reads its partial-batch response.
async fn invoke_function(
    http: &reqwest::Client,
    url: &str,
    event: Event,
) -> Result<DynamoDbEventResponse, String> {
    let response = http
        .post(url)
        .json(&event)
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("invoke returned {status}: {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("unexpected fan-out response {body:?}: {e}"))
}
