//! `blog-bench`: runs the benchmark and writes its tables into
//! `docs/benchmarks.md` (between the `bench:begin` and `bench:end` markers).
//! Run it through `infra/bench.sh`, which builds the functions, starts
//! DynamoDB Local and passes these options:
//!
//! ```text
//! blog-bench --endpoint URL [--users S] [--functions DIR] [--zips DIR]
//!            [--events DIR] [--out FILE] [--quick] [--functions-only]
//! ```
//!
//! `--functions-only` loads S in the V3 table alone and measures the
//! functions in `--functions` (start-up, first answer, warm invocations,
//! memory), printing their table and writing nothing: how a build profile
//! is compared (`infra/measure.sh profiles`).

use std::{path::PathBuf, time::Duration};

use bench::{
    dataset, lambda,
    measure::{self, Clients, Settings},
    naive::Error,
    report,
    requests::{event_json, run_v3},
};
use blog::{
    api::{App, FeedCache},
    routes::functions,
    store::Store,
};
use serde_json::json;

/// S: enough users for a post to get its 100 likes from 100 other users.
const DEFAULT_USERS: usize = 101;
const INVOCATIONS: usize = 1_000;
const STARTS: usize = 25;

struct Options {
    endpoint: String,
    users: usize,
    functions: PathBuf,
    zips: PathBuf,
    events: PathBuf,
    out: PathBuf,
    quick: bool,
    functions_only: bool,
}

fn options() -> Result<Options, Error> {
    let mut options = Options {
        endpoint: std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default(),
        users: DEFAULT_USERS,
        functions: "target/release".into(),
        zips: "target/lambda".into(),
        events: "events".into(),
        out: "docs/benchmarks.md".into(),
        quick: false,
        functions_only: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => options.endpoint = value()?,
            "--users" => options.users = value()?.parse()?,
            "--functions" => options.functions = value()?.into(),
            "--zips" => options.zips = value()?.into(),
            "--events" => options.events = value()?.into(),
            "--out" => options.out = value()?.into(),
            "--quick" => options.quick = true,
            "--functions-only" => options.functions_only = true,
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if options.endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let options = options()?;
    let started = std::time::Instant::now();
    let clients = Clients::local(&options.endpoint).await;
    let settings = if options.quick {
        Settings {
            metered_reads: 1,
            metered_commands: 3,
            timed_reads: 10,
            timed_commands: 5,
            v1_budget: Duration::from_secs(2),
            floor_runs: 20,
            lag_samples: 3,
        }
    } else {
        Settings {
            metered_reads: 3,
            metered_commands: 20,
            timed_reads: 300,
            timed_commands: 100,
            v1_budget: Duration::from_secs(20),
            floor_runs: 1_000,
            lag_samples: 50,
        }
    };
    let small_prefix = format!("bench-{}", options.users);
    if options.functions_only {
        let table = format!("{small_prefix}-v3");
        let loaded = bench::load::load_v3(&clients.plain, &table, options.users).await?;
        let figures = measure_functions(&clients, &table, &loaded, &options).await?;
        let mut out = String::new();
        report::functions(&mut out, &figures);
        println!("{out}");
        return Ok(());
    }
    let small =
        measure::measure_scale(&clients, "S", &small_prefix, options.users, &settings).await?;
    let large_settings = Settings {
        lag_samples: 0,
        ..settings
    };
    let large_prefix = format!("bench-{}", options.users * 10);
    let large = measure::measure_scale(
        &clients,
        "10×S",
        &large_prefix,
        options.users * 10,
        &large_settings,
    )
    .await?;
    let figures = measure_functions(
        &clients,
        &format!("{small_prefix}-v3"),
        &small.loaded,
        &options,
    )
    .await?;

    let run = report::Run {
        small: &small,
        large: &large,
        functions: &figures,
        machine: machine(),
        command: "./infra/bench.sh".into(),
        seconds: started.elapsed().as_secs_f64(),
    };
    let tables = report::markdown(&run);
    write_between_markers(&options.out, &tables)?;
    println!("{tables}");
    println!("wrote {}", options.out.display());
    Ok(())
}

/// Each function's start-ups, first answers, warm invocations and memory, as
/// built in `options.functions`, against the S data set in `table`.
async fn measure_functions(
    clients: &Clients,
    table: &str,
    loaded: &bench::load::Loaded,
    options: &Options,
) -> Result<Vec<lambda::FunctionFigures>, Error> {
    println!("functions: {STARTS} starts and {INVOCATIONS} invocations each");
    let env = lambda::Environment {
        table,
        endpoint: &options.endpoint,
    };
    // Makes what the take-backs' events delete.
    let app = App {
        store: Store::new(clients.plain.clone(), table),
        feed_cache: FeedCache::off(),
    };
    let invocations = if options.quick { 20 } else { INVOCATIONS };
    let starts = if options.quick { 3 } else { STARTS };
    let mut figures = Vec::new();
    for name in functions() {
        // Distinct events for the cold starts, so that none repeats one the
        // 1,000 invocations make (a second create-user of the same id is 409).
        let mut events =
            invocation_events(name, invocations + starts, loaded, &app, options).await?;
        let cold = events.split_off(invocations);
        let binary = options.functions.join(name);
        let zip = options.zips.join(name).join("bootstrap.zip");
        let measured = lambda::measure(name, &binary, &zip, &env, cold, events).await?;
        println!(
            "  {name}: start-up {:.1} ms, first answer {:.1} ms, peak {:?} KiB, {} failed",
            measured.startup.p50, measured.first_answer.p50, measured.peak_kib, measured.failed
        );
        figures.push(measured);
    }
    Ok(figures)
}

/// The events a function serves in the memory run: real requests on the S
/// data set (new users, then likes by them and their take-backs; reads of the
/// reference targets and the reference user's export; deletions of comments,
/// posts and users made for them), and for
/// the fan-out and park-failures their samples in `events/`.
async fn invocation_events(
    name: &str,
    count: usize,
    loaded: &bench::load::Loaded,
    app: &App,
    options: &Options,
) -> Result<Vec<String>, Error> {
    let user = loaded.reference_user.to_string();
    let post = loaded.reference_post.to_string();
    let writer = dataset::user_id(1).to_string();
    let member = |i: usize| format!("lambda-user-{i:06}");
    if name == "update-post" {
        return update_post_events(name, count, &writer, loaded);
    }
    let mut to_delete = match name {
        "delete-post" => {
            let fields = ["title", "content"];
            made(app, "create-post", &[], &fields, &writer, "postId", count).await?
        }
        "delete-comment" => {
            let on = [("postId", post.clone())];
            made(
                app,
                "create-comment",
                &on,
                &["content"],
                &writer,
                "commentId",
                count,
            )
            .await?
        }
        // Users of their own, made through create-user, each then erased.
        "delete-user" => {
            let mut made = Vec::with_capacity(count);
            for i in 0..count {
                let leaver = format!("lambda-leaver-{i:06}");
                let body = json!({ "username": format!("leaver_{i:06}") });
                let req =
                    bench::requests::event("create-user", &[], "", Some(body), Some(&leaver))?;
                run_v3(app, "create-user", req).await?;
                made.push(leaver);
            }
            made
        }
        _ => Vec::new(),
    }
    .into_iter();
    let mut events = Vec::with_capacity(count);
    for i in 0..count {
        let event = match name {
            "create-user" => event_json(
                name,
                &[],
                "",
                Some(json!({ "username": format!("lambda_{i:06}") })),
                Some(&member(i)),
            )?,
            "update-user" => event_json(
                name,
                &[("userId", member(0))],
                "",
                Some(json!({ "username": format!("lambda_renamed_{i:06}") })),
                Some(&member(0)),
            )?,
            "get-user" => event_json(name, &[("userId", user.clone())], "", None, None)?,
            "delete-user" => {
                let leaver = to_delete.next().ok_or("too few users made")?;
                event_json(name, &[("userId", leaver.clone())], "", None, Some(&leaver))?
            }
            // The first page of the reference user's export.
            "export-user" => event_json(
                name,
                &[("userId", user.clone())],
                "limit=25",
                None,
                Some(&user),
            )?,
            // A member create-user made (its events run first) and
            // update-user does not rename, asked for in capitals.
            "find-user" => event_json(name, &[], "username=LAMBDA_000001", None, None)?,
            "list-user-posts" => {
                event_json(name, &[("userId", user.clone())], "limit=100", None, None)?
            }
            "create-post" => event_json(
                name,
                &[],
                "",
                Some(json!({ "title": format!("post {i}"), "content": "x".repeat(2_000) })),
                Some(&writer),
            )?,
            "get-post" => event_json(name, &[("postId", post.clone())], "", None, None)?,
            "delete-post" => event_json(
                name,
                &[("postId", to_delete.next().ok_or("too few posts made")?)],
                "",
                None,
                Some(&writer),
            )?,
            "list-comments" | "list-likes" => {
                event_json(name, &[("postId", post.clone())], "limit=100", None, None)?
            }
            "create-comment" => event_json(
                name,
                &[("postId", post.clone())],
                "",
                Some(json!({ "content": format!("comment {i}") })),
                Some(&writer),
            )?,
            "like-post" => event_json(
                name,
                &[("postId", post.clone())],
                "",
                None,
                Some(&member(i)),
            )?,
            "get-feed" => event_json(name, &[], "limit=100", None, None)?,
            "get-feed-atom" => event_json(name, &[], "", None, None)?,
            "list-drafts" => event_json(
                name,
                &[("userId", writer.clone())],
                "limit=10",
                None,
                Some(&writer),
            )?,
            "list-tag-posts" | "list-tag-posts-atom" => event_json(
                name,
                &[("tag", "bench".to_owned())],
                "limit=100",
                None,
                None,
            )?,
            "list-user-posts-atom" => {
                event_json(name, &[("userId", user.clone())], "limit=100", None, None)?
            }
            // The members take back the likes like-post gave (its events run first).
            "unlike-post" => event_json(
                name,
                &[("postId", post.clone())],
                "",
                None,
                Some(&member(i)),
            )?,
            "delete-comment" => event_json(
                name,
                &[
                    ("postId", post.clone()),
                    (
                        "commentId",
                        to_delete.next().ok_or("too few comments made")?,
                    ),
                ],
                "",
                None,
                Some(&writer),
            )?,
            // Their samples: a stream batch, and a failure notice (of another
            // table's stream, which park-failures reports back as failed).
            "fan-out" | "park-failures" => {
                let sample = std::fs::read_to_string(options.events.join(format!("{name}.json")))?;
                serde_json::from_str(&sample)?
            }
            other => return Err(format!("no events for {other}").into()),
        };
        events.push(event.to_string());
    }
    Ok(events)
}

/// `count` posts or comments (`function`: create-post or create-comment) by
/// `writer`, made through the handler with a short text in each of `fields`:
/// the `id` field of each answer.
async fn made(
    app: &App,
    function: &str,
    params: &[(&str, String)],
    fields: &[&str],
    writer: &str,
    id: &str,
    count: usize,
) -> Result<Vec<String>, Error> {
    let mut ids = Vec::with_capacity(count);
    for i in 0..count {
        let text = json!(format!("to delete {i}"));
        let body: serde_json::Map<_, _> = fields
            .iter()
            .map(|field| ((*field).to_owned(), text.clone()))
            .collect();
        let body = serde_json::Value::Object(body);
        let req = bench::requests::event(function, params, "", Some(body), Some(writer))?;
        let (_, answer) = run_v3(app, function, req).await?;
        let answer: serde_json::Value = serde_json::from_str(&answer)?;
        let made = answer[id].as_str().ok_or("no id in the answer")?;
        ids.push(made.to_owned());
    }
    Ok(ids)
}

/// Edits of one of the writer's posts.
fn update_post_events(
    name: &str,
    count: usize,
    writer: &str,
    loaded: &bench::load::Loaded,
) -> Result<Vec<String>, Error> {
    let (post, _) = loaded
        .post_ids
        .iter()
        .find(|(_, author)| *author == 1)
        .ok_or("the writer has no post")?;
    (0..count)
        .map(|i| {
            event_json(
                name,
                &[("postId", post.to_string())],
                "",
                Some(json!({ "title": format!("edited {i}") })),
                Some(writer),
            )
            .map(|e| e.to_string())
        })
        .collect()
}

/// The CPU, cores and memory this ran on.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "an unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or_else(String::new, |kib| format!(", {} GiB", kib / 1024 / 1024));
    format!("{cores} cores of {model}{memory}")
}

const BEGIN: &str = "<!-- bench:begin -->";
const END: &str = "<!-- bench:end -->";

/// Replaces what lies between the markers of `path` (appends them if absent).
fn write_between_markers(path: &PathBuf, tables: &str) -> Result<(), Error> {
    let current = std::fs::read_to_string(path).unwrap_or_default();
    let block = format!("{BEGIN}\n{tables}{END}");
    let updated = match (current.find(BEGIN), current.find(END)) {
        (Some(begin), Some(end)) if begin < end => {
            format!(
                "{}{block}{}",
                &current[..begin],
                &current[end + END.len()..]
            )
        }
        _ => format!("{current}\n{block}\n"),
    };
    std::fs::write(path, updated)?;
    Ok(())
}
