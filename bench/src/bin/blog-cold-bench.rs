//! `blog-cold-bench`: every function's cold start as Lambda runs it (issue
//! 34's first part): the process confined to the CPU share of its memory size
//! (a cgroup v1 `cpu` quota of period × MB / 1,769: Lambda gives one vCPU at
//! 1,769 MB) and to that memory (`memory` cgroup), told its memory size, and
//! reaching DynamoDB over TLS: a TLS endpoint in front of DynamoDB Local whose
//! certificate a test CA signed, the CA handed to the function as
//! `SSL_CERT_FILE` (where the SDK's HTTPS client, rustls with the platform's
//! roots, reads its trust roots). Each start serves the function's sample
//! event (`events/<name>.json`) twice.
//!
//! ```text
//! blog-cold-bench --endpoint URL --functions DIR --events DIR
//!     [--starts 5] [--memory 128,256,512,1024,0] [--only a,b]
//! ```
//!
//! `--memory 0` is the machine's whole CPU, unconfined. Before measuring, each
//! share is checked to be in force: a busy loop in its cgroup must run about
//! 1,769 / MB times slower than outside. Needs root (cgroups).
//! `infra/measure.sh cold` runs it against a DynamoDB Local of its own.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use bench::{
    lambda::{self, Confinement, Environment},
    measure::Clients,
    naive::Error,
};
use blog::store::table;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, rustls};

/// The CPU period of the quota, in microseconds.
const PERIOD_US: u64 = 100_000;
/// Lambda gives one vCPU at this memory size.
const ONE_VCPU_MB: u64 = 1_769;

struct Options {
    endpoint: String,
    functions: PathBuf,
    events: PathBuf,
    starts: usize,
    memory: Vec<u32>,
    only: Vec<String>,
}

fn options() -> Result<Options, Error> {
    let mut options = Options {
        endpoint: String::new(),
        functions: PathBuf::from("target/release"),
        events: PathBuf::from("events"),
        starts: 5,
        memory: vec![128, 256, 512, 1024, 0],
        only: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--endpoint" => options.endpoint = value()?,
            "--functions" => options.functions = value()?.into(),
            "--events" => options.events = value()?.into(),
            "--starts" => options.starts = value()?.parse()?,
            "--memory" => {
                options.memory = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--only" => options.only = value()?.split(',').map(str::to_owned).collect(),
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
    let scratch = std::env::temp_dir().join(format!("blog-cold-{}", ulid::Ulid::generate()));
    std::fs::create_dir_all(&scratch)?;
    let ca = test_ca(&scratch)?;
    let upstream = options
        .endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let tls = serve_tls(&scratch, upstream).await?;
    println!(
        "DynamoDB Local behind TLS at {tls}, its CA in {}",
        ca.display()
    );

    let clients = Clients::local(&options.endpoint).await;
    let table = format!(
        "cold-bench-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    table::create_if_missing(&clients.plain, &table).await?;
    let env = Environment {
        table: &table,
        endpoint: &tls,
    };

    let mut rows = Vec::new();
    for memory in &options.memory {
        let cgroups = confine(*memory)?;
        if let Some(slowdown) = check_share(&cgroups)? {
            let expected = ONE_VCPU_MB as f64 / f64::from(*memory);
            println!(
                "{memory} MB: a busy loop runs {slowdown:.1} times slower (expected {expected:.1})"
            );
            // Below one vCPU the quota must show; well above it, it cannot.
            if expected > 1.5 && slowdown < expected / 2.0 {
                return Err(format!("the {memory} MB CPU share is not in force").into());
            }
        }
        let confinement = Confinement {
            cgroups: cgroups.clone(),
            memory_mb: (*memory > 0).then_some(*memory),
            ca_file: Some(ca.clone()),
        };
        for name in blog::routes::functions() {
            if !options.only.is_empty() && !options.only.iter().any(|o| o == name) {
                continue;
            }
            let event = std::fs::read_to_string(options.events.join(format!("{name}.json")))?;
            let binary = options.functions.join(name);
            let figures = lambda::measure_cold(
                name,
                &binary,
                &env,
                &confinement,
                &[event.clone(), event],
                options.starts,
            )
            .await?;
            let row = row(name, *memory, &figures);
            println!("{row}");
            rows.push(row);
        }
        release(&cgroups);
    }
    println!();
    println!(
        "| function | memory (CPU share) | init p50 / max ms | first answer p50 / max ms | second answer p50 / max ms | peak memory MiB | failed |"
    );
    println!("|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// The table row of one function at one memory size.
fn row(name: &str, memory: u32, figures: &lambda::ColdFigures) -> String {
    let ms = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        let p50 = v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
        let max = v.last().copied().unwrap_or(f64::NAN);
        format!("{:.1} / {:.1}", p50 * 1000.0, max * 1000.0)
    };
    let share = if memory == 0 {
        "unconfined".to_owned()
    } else {
        format!(
            "{memory} MB ({:.0} %)",
            100.0 * f64::from(memory) / ONE_VCPU_MB as f64
        )
    };
    let peak = figures.peak_kib.iter().max().map_or("–".to_owned(), |kib| {
        format!("{:.1}", *kib as f64 / 1024.0)
    });
    format!(
        "| {name} | {share} | {} | {} | {} | {peak} | {} |",
        ms(&figures.init),
        ms(&figures.first_answer),
        ms(&figures.second_answer),
        figures.failed
    )
}

/// The cgroups (v1 `cpu` and `memory`) of a `memory` MB function: its CPU
/// quota and memory limit set; none for 0 (unconfined).
fn confine(memory: u32) -> Result<Vec<PathBuf>, Error> {
    if memory == 0 {
        return Ok(Vec::new());
    }
    let cpu = PathBuf::from(format!("/sys/fs/cgroup/cpu/blog-cold-{memory}"));
    let mem = PathBuf::from(format!("/sys/fs/cgroup/memory/blog-cold-{memory}"));
    for group in [&cpu, &mem] {
        std::fs::create_dir_all(group)
            .map_err(|e| format!("{}: {e} (cgroup v1, as root)", group.display()))?;
    }
    let quota = PERIOD_US * u64::from(memory) / ONE_VCPU_MB;
    std::fs::write(cpu.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
    std::fs::write(cpu.join("cpu.cfs_quota_us"), quota.to_string())?;
    let bytes = u64::from(memory) * 1024 * 1024;
    std::fs::write(mem.join("memory.limit_in_bytes"), bytes.to_string())?;
    Ok(vec![cpu, mem])
}

fn release(cgroups: &[PathBuf]) {
    for group in cgroups {
        let _ = std::fs::remove_dir(group);
    }
}

/// How many times slower a busy loop runs in `cgroups` than outside them:
/// the check that the CPU share is in force. `None` when unconfined.
fn check_share(cgroups: &[PathBuf]) -> Result<Option<f64>, Error> {
    if cgroups.is_empty() {
        return Ok(None);
    }
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
    Ok(Some(confined / free))
}

/// A test CA and a certificate it signed for `localhost` and 127.0.0.1, made
/// with openssl in `dir`; the CA's PEM file.
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
    let key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    run(
        &format!("req -x509 {key} -keyout ca.key -out ca.pem -days 2"),
        Some("/CN=blog cold bench CA"),
    )?;
    run(
        &format!("req {key} -keyout server.key -out server.csr"),
        Some("/CN=localhost"),
    )?;
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )?;
    run(
        "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
         -out server.pem -days 2 -extfile san.ext",
        None,
    )?;
    Ok(dir.join("ca.pem"))
}

/// A TLS endpoint on a loopback port that forwards every connection, once
/// its handshake is done, to `upstream` (DynamoDB Local's host:port); its
/// `https://localhost:PORT` URL.
async fn serve_tls(dir: &Path, upstream: String) -> Result<String, Error> {
    let certs =
        CertificateDer::pem_file_iter(dir.join("server.pem"))?.collect::<Result<Vec<_>, _>>()?;
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
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = plain.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    Ok(format!("https://localhost:{port}"))
}
