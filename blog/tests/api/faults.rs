//! DynamoDB goes away mid-run and comes back: requests get a 503 (no hang, no
//! partial write), then succeed again, and the fan-out resumes from its
//! checkpoint with nothing lost. This test runs its own DynamoDB Local, with
//! its data on disk so that it survives the restart.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::json;

use crate::support::TestApi;

/// A DynamoDB Local of this test's own, from the copy infra/test.sh fetched.
struct OwnDynamoDb {
    home: PathBuf,
    data: PathBuf,
    port: u16,
    process: Option<Child>,
}

impl OwnDynamoDb {
    fn new() -> Self {
        let home = std::env::var("DYNAMODB_LOCAL_HOME")
            .expect("DYNAMODB_LOCAL_HOME is not set: run the tests through infra/test.sh");
        let data = std::env::temp_dir().join(format!("ddb-{}", ulid::Ulid::generate()));
        std::fs::create_dir_all(&data).expect("data dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        Self {
            home: home.into(),
            data,
            port,
            process: None,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn start(&mut self) {
        let child = Command::new("java")
            .arg(format!(
                "-Djava.library.path={}",
                self.home.join("DynamoDBLocal_lib").display()
            ))
            .arg("-jar")
            .arg(self.home.join("DynamoDBLocal.jar"))
            .args([
                "-port",
                &self.port.to_string(),
                "-sharedDb",
                "-disableTelemetry",
                "-dbPath",
            ])
            .arg(&self.data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start DynamoDB Local");
        self.process = Some(child);
        // Java's start takes seconds, far more on a loaded machine: up to a
        // minute before the test calls it a failure.
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("DynamoDB Local did not start");
    }

    /// Stops it as an operator would (SIGTERM), or kills it if that fails.
    fn stop(&mut self) {
        if let Some(mut child) = self.process.take() {
            let terminated = Command::new("kill").arg(child.id().to_string()).status();
            if !terminated.is_ok_and(|s| s.success()) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

impl Drop for OwnDynamoDb {
    fn drop(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_gives_503s_then_everything_resumes_with_nothing_lost() {
    let mut dynamodb = OwnDynamoDb::new();
    dynamodb.start().await;
    let api = TestApi::start_at(&dynamodb.endpoint()).await;
    let checkpoint =
        std::env::temp_dir().join(format!("checkpoint-{}.json", ulid::Ulid::generate()));
    let store = &api.app.store;
    let deliver = |event| async move { Ok(blog::fanout::handle(store, event).await) };

    let author = api.user("author").await;
    let first = api.post(&author, "before the outage", "text").await;
    let mut poller = api.poller_of(&dynamodb.endpoint(), Some(checkpoint.clone()));
    while poller.poll_once(&deliver).await.expect("poll") > 0 {}
    // Written, but not yet fanned out when DynamoDB goes away.
    let second = api.post(&author, "just before the outage", "text").await;
    // DynamoDB Local moves a write into its stream a moment after the write.
    let mut peek = api.poller_of(&dynamodb.endpoint(), None);
    let records = |_event| async { Ok(Default::default()) };
    for _ in 0..100 {
        if peek.poll_once(&records).await.expect("peek") >= 5 {
            break;
        }
        peek = api.poller_of(&dynamodb.endpoint(), None);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    dynamodb.stop();
    let mut waits = Vec::new();
    for (method, path, body) in [
        ("GET", "/feed".to_owned(), None),
        ("GET", format!("/posts/{first}"), None),
        (
            "POST",
            "/posts".to_owned(),
            Some(json!({ "title": "during the outage", "content": "lost?" })),
        ),
        ("POST", format!("/posts/{first}/likes"), None),
    ] {
        let started = Instant::now();
        // A hang guard, not a performance bound: the SDK's own timeouts end it.
        let (status, body) = tokio::time::timeout(
            Duration::from_secs(60),
            api.call(method, &path, Some(&author), body),
        )
        .await
        .expect("the request hung");
        waits.push(started.elapsed());
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (503, Some("unavailable")),
            "{method} {path}"
        );
    }
    println!("faults: 503s after {waits:.2?}");
    assert!(
        poller.poll_once(&deliver).await.is_err(),
        "the poller cannot read the stream either"
    );

    dynamodb.start().await;
    let (status, _) = api.get_post(&first).await;
    assert_eq!(status, 200, "requests succeed again");
    let mut poller = api.poller_of(&dynamodb.endpoint(), Some(checkpoint.clone()));
    while poller.poll_once(&deliver).await.expect("poll") > 0 {}
    let (_, feed) = api.get_feed().await;
    let titles: Vec<&str> = feed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["title"].as_str())
        .collect();
    assert_eq!(
        titles,
        ["just before the outage", "before the outage"],
        "nothing lost, nothing partial"
    );
    let (_, mine) = api.user_posts(&author).await;
    assert_eq!(
        mine["items"].as_array().map(Vec::len),
        Some(2),
        "the refused post was not written"
    );
    assert_eq!(api.get_post(&first).await.1["likeCount"], 0);
    assert_eq!(api.get_post(&second).await.0, 200);
    let _ = std::fs::remove_file(checkpoint);
}
