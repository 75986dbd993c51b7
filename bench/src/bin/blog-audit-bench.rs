//! `blog-audit-bench`: the audit on the benchmark's data set at 10×S (1,010
//! users; `--users` to change it), as an operator runs it: the release
//! `blog-admin audit` as a child process, with each number of segments in
//! `--segments` (1, 4 and 8 by default), then `--user` and `--post` of the
//! reference user and post. Prints, per run, the time, the items read, the
//! findings (0 on this data set), the read units DynamoDB Local reported and
//! the child's peak resident memory (its own `VmHWM`).
//!
//! ```text
//! blog-audit-bench --endpoint URL [--users N] [--segments 1,4,8] [--admin PATH]
//! ```
//!
//! `infra/bench.sh --audit` runs it against its own DynamoDB Local.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use bench::{load, measure::Clients, naive::Error};

/// What one `blog-admin audit` run printed, and its time as seen from here.
#[derive(Debug, Default)]
struct Run {
    what: String,
    wall: Duration,
    items_read: u64,
    findings: u64,
    read_units: f64,
    pages: u64,
    users_held: u64,
    posts_held: u64,
    elapsed: f64,
    peak_kib: u64,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_default();
    let mut users = 1010_usize;
    let mut segments = vec![1_u32, 4, 8];
    let mut admin = std::env::current_exe()?.with_file_name("blog-admin");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => endpoint = value()?,
            "--users" => users = value()?.parse()?,
            "--segments" => {
                segments = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--admin" => admin = PathBuf::from(value()?),
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    let clients = Clients::local(&endpoint).await;
    let table = format!(
        "audit-bench-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    println!("loading {users} users into {table}");
    let loaded = load::load_v3(&clients.plain, &table, users).await?;
    println!(
        "loaded {} users, {} posts, {} comments, {} likes: {} items in {:.0} s",
        loaded.users, loaded.posts, loaded.comments, loaded.likes, loaded.v3_items, loaded.seconds
    );

    let mut runs = Vec::new();
    for n in &segments {
        let run = audit(
            &admin,
            &endpoint,
            &table,
            format!("full, {n} segment(s)"),
            &["--segments", &n.to_string()],
        )
        .await?;
        runs.push(run);
    }
    let user = loaded.reference_user.to_string();
    runs.push(
        audit(
            &admin,
            &endpoint,
            &table,
            "--user (reference user)".into(),
            &["--user", &user],
        )
        .await?,
    );
    let post = loaded.reference_post.to_string();
    runs.push(
        audit(
            &admin,
            &endpoint,
            &table,
            "--post (reference post)".into(),
            &["--post", &post],
        )
        .await?,
    );

    println!(
        "\n{} items ({} users, {} posts, {} comments, {} likes)\n",
        loaded.v3_items, loaded.users, loaded.posts, loaded.comments, loaded.likes
    );
    println!(
        "| audit | time | items read | findings | read units (DynamoDB Local) | calls | users held | posts held at most | peak memory |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for run in &runs {
        println!(
            "| {} | {:.1} s | {} | {} | {:.0} | {} | {} | {} | {:.1} MiB |",
            run.what,
            run.wall.as_secs_f64(),
            run.items_read,
            run.findings,
            run.read_units,
            run.pages,
            run.users_held,
            run.posts_held,
            run.peak_kib as f64 / 1024.0,
        );
    }
    Ok(())
}

/// Runs `blog-admin audit` with `args` on `table` and reads what it printed.
async fn audit(
    admin: &PathBuf,
    endpoint: &str,
    table: &str,
    what: String,
    args: &[&str],
) -> Result<Run, Error> {
    println!("running blog-admin audit {}", args.join(" "));
    let started = Instant::now();
    let output = tokio::process::Command::new(admin)
        .arg("audit")
        .args(args)
        .env("TABLE_NAME", table)
        .env("DYNAMODB_ENDPOINT", endpoint)
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .env("RUST_LOG", "warn")
        .output()
        .await?;
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "blog-admin audit {} failed ({}): {stdout}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let field = |name: &str| -> f64 {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_default()
    };
    let run = Run {
        what,
        wall,
        items_read: field("items read: ") as u64,
        findings: field("findings: ") as u64,
        read_units: field("read units: "),
        pages: field("pages: ") as u64,
        users_held: field("users held: ") as u64,
        posts_held: field("posts held at most: ") as u64,
        elapsed: field("elapsed: "),
        peak_kib: field("peak memory: ") as u64,
    };
    println!(
        "  {:.1} s ({:.1} s inside), {} items, {} findings, {:.0} read units, peak {} KiB",
        run.wall.as_secs_f64(),
        run.elapsed,
        run.items_read,
        run.findings,
        run.read_units,
        run.peak_kib
    );
    Ok(run)
}
