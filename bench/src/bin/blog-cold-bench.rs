//! `blog-cold-bench`: every function's cold start as Lambda runs it (issue
//! 34): the process confined to the CPU share of its memory size (a cgroup v1
//! `cpu` quota of period × MB / 1,769: Lambda gives one vCPU at 1,769 MB) and
//! to that memory (`memory` cgroup), told its memory size, and reaching
//! DynamoDB over TLS as deployed: a TLS endpoint in front of DynamoDB Local
//! presenting an RSA 2048 certificate and its intermediate (DynamoDB's chain
//! has that shape), whose root is appended to this machine's whole trust
//! bundle (about 140 roots, as Lambda's) in the file the function is given as
//! `SSL_CERT_FILE` (where the SDK's HTTPS client, rustls with the platform's
//! roots, reads its trust roots). Each start serves the function's sample
//! event (`events/<name>.json`) twice, on a table holding the user, post and
//! comment the events name.
//!
//! ```text
//! blog-cold-bench --endpoint URL --functions DIR --events DIR
//!     [--baseline DIR] [--starts 5] [--memory 128,256,512,1024,0]
//!     [--only a,b] [--warm N] [--root-only] [--latency-ms 0]
//! ```
//!
//! `--memory 0` is the machine's whole CPU, unconfined. Before measuring, each
//! share is checked to be in force: a busy loop in its cgroup must run about
//! 1,769 / MB times slower than outside. `--baseline DIR` measures a second
//! build of the functions beside the first, start by start in turn, so that
//! both meet the same machine. `--warm N` measures, instead of cold starts,
//! N warm invocations of one process at each size: their p50 and p99, and
//! what a million of them cost at arm64 prices. `--root-only` trusts the test
//! root alone (what loading the platform's bundle costs shows against a run
//! without it). `--latency-ms` delays each of DynamoDB Local's answers by
//! that much, as the network and DynamoDB itself would. Needs root (cgroups).
//! `infra/measure.sh cold` runs it against a DynamoDB Local of its own.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use bench::{
    lambda::{self, ColdFigures, Confinement, Environment},
    measure::{Clients, Stats},
    naive::Error,
};
use blog::{
    ids::{CommentId, PostId, UserId},
    store::{
        bulk::{self, PostWithReplies},
        comments::CommentItem,
        posts::{PostContentItem, PostItem},
        table,
        users::UserItem,
    },
    text::Username,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::{TlsAcceptor, rustls};

/// The CPU period of the quota, in microseconds.
const PERIOD_US: u64 = 100_000;
/// Lambda gives one vCPU at this memory size.
const ONE_VCPU_MB: u64 = 1_769;
/// Lambda's arm64 price in us-east-1: per GB-second (the first 6 billion a
/// month) and per request.
const ARM64_GB_SECOND_USD: f64 = 0.000_013_333_4;
const REQUEST_USD: f64 = 0.000_000_2;
/// The machine's trust bundle: the function trusts all of it, as deployed.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Invocations of each function, unconfined, before anything is measured:
/// DynamoDB Local's JVM compiles its hot paths in them, so the first
/// function measured does not pay for that.
const WARM_UP: usize = 40;

struct Options {
    endpoint: String,
    functions: PathBuf,
    baseline: Option<PathBuf>,
    events: PathBuf,
    starts: usize,
    memory: Vec<u32>,
    only: Vec<String>,
    warm: Option<usize>,
    /// Trust the test root alone, not the platform's bundle with it: what
    /// loading the platform's roots costs a start.
    root_only: bool,
    /// Added to each answer of DynamoDB Local's, which answers in well under
    /// a millisecond on loopback where DynamoDB takes a few from a Lambda
    /// function in its region.
    latency: Duration,
}

fn options() -> Result<Options, Error> {
    let mut options = Options {
        endpoint: String::new(),
        functions: PathBuf::from("target/release"),
        baseline: None,
        events: PathBuf::from("events"),
        starts: 5,
        memory: vec![128, 256, 512, 1024, 0],
        only: Vec::new(),
        warm: None,
        root_only: false,
        latency: Duration::ZERO,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => options.endpoint = value()?,
            "--functions" => options.functions = value()?.into(),
            "--baseline" => options.baseline = Some(value()?.into()),
            "--events" => options.events = value()?.into(),
            "--starts" => options.starts = value()?.parse()?,
            "--memory" => {
                options.memory = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--only" => options.only = value()?.split(',').map(str::to_owned).collect(),
            "--warm" => options.warm = Some(value()?.parse()?),
            "--root-only" => options.root_only = true,
            "--latency-ms" => {
                options.latency = Duration::from_secs_f64(value()?.parse::<f64>()? / 1e3)
            }
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if options.endpoint.is_empty() {
        return Err("give DynamoDB Local's URL with --endpoint".into());
    }
    Ok(options)
}

/// The builds measured: `(label, directory)`, the label the directory's
/// name when there are two.
fn builds(options: &Options) -> Vec<(String, PathBuf)> {
    let label = |dir: &Path| {
        dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    match &options.baseline {
        Some(baseline) => vec![
            (label(baseline), baseline.clone()),
            (label(&options.functions), options.functions.clone()),
        ],
        None => vec![(String::new(), options.functions.clone())],
    }
}

/// The functions measured, those that take the sample user's account or
/// content away last, so that the others find it.
fn functions(options: &Options) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = blog::routes::functions()
        .filter(|name| options.only.is_empty() || options.only.iter().any(|o| o == name))
        .collect();
    names.sort_by_key(|name| match *name {
        "delete-comment" => 1,
        "delete-post" => 2,
        "delete-user" => 3,
        _ => 0,
    });
    names
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let options = options()?;
    let scratch = std::env::temp_dir().join(format!("blog-cold-{}", ulid::Ulid::generate()));
    std::fs::create_dir_all(&scratch)?;
    let mut bundle = test_ca(&scratch)?;
    if options.root_only {
        bundle = scratch.join("root.pem");
    }
    let upstream = options
        .endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let tls = serve_tls(&scratch, upstream, options.latency).await?;
    println!(
        "DynamoDB Local behind TLS at {tls}; trust bundle {}",
        bundle.display()
    );

    let clients = Clients::local(&options.endpoint).await;
    let table = format!(
        "cold-bench-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    table::create_if_missing(&clients.plain, &table).await?;
    seed(&clients.plain, &table).await?;
    let env = Environment {
        table: &table,
        endpoint: &tls,
    };
    let names = functions(&options);
    let events = names
        .iter()
        .map(|name| std::fs::read_to_string(options.events.join(format!("{name}.json"))))
        .collect::<Result<Vec<_>, _>>()?;
    let builds = builds(&options);
    warm_up(&names, &events, &builds, &env, &bundle).await?;

    let mut rows = Vec::new();
    for memory in &options.memory {
        let confinement = confine(*memory, &bundle)?;
        for (name, event) in names.iter().zip(&events) {
            let case = Case {
                name,
                memory: *memory,
                builds: &builds,
                env: &env,
                confinement: &confinement,
                event,
            };
            let measured = match options.warm {
                Some(invocations) => warm(&case, invocations).await?,
                None => cold(&case, options.starts).await?,
            };
            for row in measured {
                println!("{row}");
                rows.push(row);
            }
        }
        release(&confinement.cgroups);
    }
    println!();
    if options.warm.is_some() {
        println!(
            "| function | memory (CPU share) | build | warm p50 / p99 ms | billed ms (mean) | USD per million |"
        );
        println!("|---|---|---|---|---|---|");
    } else {
        println!(
            "| function | memory (CPU share) | build | init p50 / max ms | first answer p50 / max ms | CPU to first answer p50 / max ms | held by the quota p50 / max ms | second answer p50 / max ms | peak memory MiB | failed |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
    }
    for row in rows {
        println!("{row}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// The user, post and comment the sample events name.
async fn seed(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<(), Error> {
    let at = "2026-11-22T09:00:00.000Z";
    let user = UserItem::new(
        &UserId::parse("0b3f1e2a-8c1d-4f5e-9a7b-2c3d4e5f6a7b")?,
        &Username::parse("alice")?,
        at,
    );
    let post_id = PostId::parse("01JD5Z8Q6N3W4X5Y6Z7A8B9C0D")?;
    let content = "My first post.";
    let post = PostItem::new(post_id, &user, "Hello", content, at);
    let comment = CommentItem::new(
        post_id,
        CommentId::parse("01JD5Z9A1B2C3D4E5F6G7H8J9K")?,
        &user,
        "Nice post!",
    );
    let thread = PostWithReplies::new(
        post,
        PostContentItem::new(post_id, content, at),
        vec![comment],
        Vec::new(),
    );
    let mut items = bulk::user_items(&user)?;
    items.extend(bulk::post_items(&thread)?);
    bulk::put_items(client, table, items).await?;
    Ok(())
}

/// Serves each function's event [`WARM_UP`] times, unconfined, discarding
/// the figures.
async fn warm_up(
    names: &[&str],
    events: &[String],
    builds: &[(String, PathBuf)],
    env: &Environment<'_>,
    bundle: &Path,
) -> Result<(), Error> {
    let free = Confinement {
        ca_file: Some(bundle.to_owned()),
        ..Confinement::default()
    };
    for (name, event) in names.iter().zip(events) {
        for (_, dir) in builds {
            let binary = dir.join(name);
            lambda::serve(name, &binary, env, &free, vec![event.clone(); WARM_UP]).await?;
        }
    }
    Ok(())
}

/// One function at one memory size, in each build.
struct Case<'a> {
    name: &'a str,
    memory: u32,
    builds: &'a [(String, PathBuf)],
    env: &'a Environment<'a>,
    confinement: &'a Confinement,
    event: &'a str,
}

/// One function's cold starts at one size, the builds' starts in turn.
async fn cold(case: &Case<'_>, starts: usize) -> Result<Vec<String>, Error> {
    let mut figures = vec![ColdFigures::default(); case.builds.len()];
    for _ in 0..starts {
        for ((_, dir), figures) in case.builds.iter().zip(figures.iter_mut()) {
            let events = vec![case.event.to_owned(); 2];
            let served = lambda::serve(
                case.name,
                &dir.join(case.name),
                case.env,
                case.confinement,
                events,
            )
            .await?;
            figures.add(&served);
            // The next start begins with a full quota, as a new Lambda
            // environment would: two periods pass first.
            tokio::time::sleep(Duration::from_micros(2 * PERIOD_US)).await;
        }
    }
    Ok(case
        .builds
        .iter()
        .zip(&figures)
        .map(|((build, _), figures)| row(case.name, case.memory, build, figures))
        .collect())
}

/// One function's warm invocations at one size: one process, its first
/// (cold) invocation left out.
async fn warm(case: &Case<'_>, invocations: usize) -> Result<Vec<String>, Error> {
    let mut rows = Vec::new();
    for (build, dir) in case.builds {
        let served = lambda::serve(
            case.name,
            &dir.join(case.name),
            case.env,
            case.confinement,
            vec![case.event.to_owned(); invocations + 1],
        )
        .await?;
        let warm: Vec<f64> = served.invocations.iter().skip(1).copied().collect();
        let stats = Stats::of(warm.clone());
        // Lambda bills each invocation's duration rounded up to the
        // millisecond, at the memory size's GB-second price.
        let billed_ms = warm.iter().map(|s| (s * 1000.0).ceil()).sum::<f64>() / warm.len() as f64;
        let size_mb = if case.memory == 0 { 1769 } else { case.memory };
        let per_million = 1e6
            * (REQUEST_USD
                + billed_ms / 1000.0 * f64::from(size_mb) / 1024.0 * ARM64_GB_SECOND_USD);
        rows.push(format!(
            "| {} | {} | {build} | {:.2} / {:.2} | {billed_ms:.2} | {per_million:.4} |",
            case.name,
            share(case.memory),
            stats.p50,
            stats.p99
        ));
    }
    Ok(rows)
}

fn share(memory: u32) -> String {
    if memory == 0 {
        "unconfined".to_owned()
    } else {
        format!(
            "{memory} MB ({:.0} %)",
            100.0 * f64::from(memory) / ONE_VCPU_MB as f64
        )
    }
}

/// The table row of one function at one memory size.
fn row(name: &str, memory: u32, build: &str, figures: &ColdFigures) -> String {
    let ms = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        let p50 = v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
        let max = v.last().copied().unwrap_or(f64::NAN);
        format!("{:.1} / {:.1}", p50 * 1000.0, max * 1000.0)
    };
    let peak = figures.peak_kib.iter().max().map_or("–".to_owned(), |kib| {
        format!("{:.1}", *kib as f64 / 1024.0)
    });
    format!(
        "| {name} | {} | {build} | {} | {} | {} | {} | {} | {peak} | {} |",
        share(memory),
        ms(&figures.init),
        ms(&figures.first_answer),
        ms(&figures.cpu),
        ms(&figures.throttled),
        ms(&figures.second_answer),
        figures.failed
    )
}

/// The cgroups of a `memory` MB function (v1 `cpu` with its quota,
/// `cpuacct` to count its CPU time, `memory` with its limit), the share
/// checked to be in force; none for 0 (unconfined). The function trusts
/// `bundle`.
fn confine(memory: u32, bundle: &Path) -> Result<Confinement, Error> {
    let mut confinement = Confinement {
        memory_mb: (memory > 0).then_some(memory),
        ca_file: Some(bundle.to_owned()),
        ..Confinement::default()
    };
    if memory == 0 {
        return Ok(confinement);
    }
    let group =
        |controller: &str| PathBuf::from(format!("/sys/fs/cgroup/{controller}/blog-cold-{memory}"));
    let (cpu, cpuacct, mem) = (group("cpu"), group("cpuacct"), group("memory"));
    for group in [&cpu, &cpuacct, &mem] {
        std::fs::create_dir_all(group)
            .map_err(|e| format!("{}: {e} (cgroup v1, as root)", group.display()))?;
    }
    let quota = PERIOD_US * u64::from(memory) / ONE_VCPU_MB;
    std::fs::write(cpu.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
    std::fs::write(cpu.join("cpu.cfs_quota_us"), quota.to_string())?;
    let bytes = u64::from(memory) * 1024 * 1024;
    std::fs::write(mem.join("memory.limit_in_bytes"), bytes.to_string())?;
    confinement.cgroups = vec![cpu.clone(), cpuacct.clone(), mem];
    confinement.cpu = Some(cpu);
    confinement.cpuacct = Some(cpuacct);
    let slowdown = check_share(&confinement.cgroups)?;
    let expected = ONE_VCPU_MB as f64 / f64::from(memory);
    println!("{memory} MB: a busy loop runs {slowdown:.1} times slower (expected {expected:.1})");
    // Below one vCPU the quota must show; well above it, it cannot.
    if expected > 1.5 && slowdown < expected / 2.0 {
        return Err(format!("the {memory} MB CPU share is not in force").into());
    }
    // The busy loop spent this period's quota: the first start must not
    // inherit what is left of it.
    std::thread::sleep(Duration::from_micros(2 * PERIOD_US));
    Ok(confinement)
}

fn release(cgroups: &[PathBuf]) {
    for group in cgroups {
        let _ = std::fs::remove_dir(group);
    }
}

/// How many times slower a busy loop runs in `cgroups` than outside them:
/// the check that the CPU share is in force.
fn check_share(cgroups: &[PathBuf]) -> Result<f64, Error> {
    let time = |confined: bool| -> Result<f64, Error> {
        let mut command = std::process::Command::new("/bin/sh");
        let busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
        if confined {
            let script =
                format!(r#"for g; do echo $$ > "$g/cgroup.procs" || exit 97; done; {busy}"#);
            command.arg("-c").arg(script).arg("sh").args(cgroups);
        } else {
            command.arg("-c").arg(busy);
        }
        let started = Instant::now();
        let status = command.status()?;
        if !status.success() {
            return Err(format!("the busy loop failed: {status}").into());
        }
        Ok(started.elapsed().as_secs_f64())
    };
    let free = time(false)?;
    let confined = time(true)?;
    Ok(confined / free)
}

/// A test root, an intermediate it signed and a certificate the intermediate
/// signed for `localhost` and 127.0.0.1, made with openssl in `dir`; the
/// trust bundle the function is given (the platform's and the test root).
fn test_ca(dir: &Path) -> Result<PathBuf, Error> {
    // Each call: its arguments, and the subject (which holds spaces) last.
    let run = |args: &str, subject: Option<&str>| -> Result<(), Error> {
        let mut command = std::process::Command::new("openssl");
        command.args(args.split_whitespace());
        if let Some(subject) = subject {
            command.arg("-subj").arg(subject);
        }
        let status = command
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("openssl {args}: {status}").into())
        }
    };
    // DynamoDB's chain has this shape: an RSA 2048 leaf, an RSA 2048
    // intermediate, a root in the platform's bundle.
    let key = "-newkey rsa:2048 -nodes";
    run(
        &format!("req -x509 {key} -keyout root.key -out root.pem -days 2"),
        Some("/CN=blog cold bench root CA"),
    )?;
    let extensions = [
        (
            "intermediate.ext",
            "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n",
        ),
        (
            "server.ext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        ),
    ];
    for (file, text) in extensions {
        std::fs::write(dir.join(file), text)?;
    }
    for (name, subject, signer) in [
        ("intermediate", "/CN=blog cold bench RSA 2048 M01", "root"),
        ("server", "/CN=localhost", "intermediate"),
    ] {
        run(
            &format!("req {key} -keyout {name}.key -out {name}.csr"),
            Some(subject),
        )?;
        run(
            &format!(
                "x509 -req -in {name}.csr -CA {signer}.pem -CAkey {signer}.key \
                 -CAcreateserial -out {name}.pem -days 2 -extfile {name}.ext"
            ),
            None,
        )?;
    }
    // The endpoint presents the leaf and its intermediate.
    let chain = [
        std::fs::read_to_string(dir.join("server.pem"))?,
        std::fs::read_to_string(dir.join("intermediate.pem"))?,
    ]
    .concat();
    std::fs::write(dir.join("chain.pem"), chain)?;
    // The function trusts the whole platform bundle and the test root.
    let bundle = [
        std::fs::read_to_string(SYSTEM_BUNDLE)
            .map_err(|e| format!("{SYSTEM_BUNDLE}: {e}: the platform's trust bundle"))?,
        std::fs::read_to_string(dir.join("root.pem"))?,
    ]
    .concat();
    std::fs::write(dir.join("bundle.pem"), bundle)?;
    Ok(dir.join("bundle.pem"))
}

/// A TLS endpoint on a loopback port that forwards every connection, once
/// its handshake is done, to `upstream` (DynamoDB Local's host:port), each
/// answer held back `latency`; its `https://localhost:PORT` URL.
async fn serve_tls(dir: &Path, upstream: String, latency: Duration) -> Result<String, Error> {
    let certs =
        CertificateDer::pem_file_iter(dir.join("chain.pem"))?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key"))?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            // No Nagle on either leg: a proxy of its own must not add the
            // 40 ms of a delayed ACK to what it measures.
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(plain) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = plain.set_nodelay(true);
                let (mut tls_in, mut tls_out) = tokio::io::split(tls);
                let (mut plain_in, mut plain_out) = plain.into_split();
                let requests = tokio::io::copy(&mut tls_in, &mut plain_out);
                let answers = async {
                    let mut buffer = vec![0; 64 * 1024];
                    loop {
                        let read = plain_in.read(&mut buffer).await?;
                        if read == 0 {
                            return Ok::<_, std::io::Error>(());
                        }
                        if !latency.is_zero() {
                            tokio::time::sleep(latency).await;
                        }
                        tls_out.write_all(&buffer[..read]).await?;
                        tls_out.flush().await?;
                    }
                };
                let _ = tokio::try_join!(requests, answers);
            });
        }
    });
    Ok(format!("https://localhost:{port}"))
}
