//! Hostile and broken input: each gets its 4xx and a clear JSON error, and the
//! table is unchanged afterwards. And a dependency that is down: 503.

use serde_json::{Value, json};

use crate::support::{TestApi, table_snapshot};

/// Sends a raw body to a write route as `user`.
async fn raw(api: &TestApi, method: &str, path: &str, user: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = api
        .http
        .request(method.parse().expect("method"), api.url(path))
        .header(crate::support::JWT_SUB, user)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("send");
    let (status, reply) = crate::support::decode(resp).await;
    crate::contract::check_answer(method, path, status, &reply);
    (status, reply)
}

#[tokio::test]
async fn malformed_bodies_are_400_and_change_nothing() {
    let api = TestApi::start().await;
    let author = api.user("target").await;
    let post = api.post(&author, "t", "c").await;
    let before = table_snapshot(&api).await;

    let cases: Vec<(&str, String, Vec<u8>)> = vec![
        ("POST", "/posts".into(), b"{not json".to_vec()),
        ("POST", "/posts".into(), b"[]".to_vec()),
        ("POST", "/posts".into(), b"".to_vec()),
        ("POST", "/posts".into(), br#"{"title":"t"}"#.to_vec()),
        (
            "POST",
            "/posts".into(),
            br#"{"title":1,"content":"c"}"#.to_vec(),
        ),
        (
            "POST",
            "/posts".into(),
            br#"{"title":"t","content":"c","admin":true}"#.to_vec(),
        ),
        (
            "POST",
            "/posts".into(),
            b"{\"title\":\"\xff\xfe\",\"content\":\"c\"}".to_vec(),
        ),
        (
            "POST",
            "/posts".into(),
            br#"{"title":"tab\there","content":"c"}"#.to_vec(),
        ),
        (
            "POST",
            "/posts".into(),
            json!({ "title": "x".repeat(201), "content": "c" })
                .to_string()
                .into_bytes(),
        ),
        (
            "POST",
            "/posts".into(),
            json!({ "title": "t", "content": "x".repeat(50_001) })
                .to_string()
                .into_bytes(),
        ),
        (
            "PUT",
            format!("/posts/{post}"),
            br#"{"title":null,"content":null}"#.to_vec(),
        ),
        (
            "PUT",
            format!("/posts/{post}"),
            br#"{"content":"   "}"#.to_vec(),
        ),
        (
            "POST",
            format!("/posts/{post}/comments"),
            br#"{"content":"c","postId":"x"}"#.to_vec(),
        ),
        (
            "PUT",
            format!("/users/{author}"),
            br#"{"username":"a#b"}"#.to_vec(),
        ),
        (
            "POST",
            "/users".into(),
            br#"{"username":"x","extra":1}"#.to_vec(),
        ),
    ];
    for (method, path, body) in cases {
        let shown = String::from_utf8_lossy(&body)
            .chars()
            .take(60)
            .collect::<String>();
        let (status, reply) = raw(&api, method, &path, &author, body).await;
        assert_eq!(status, 400, "{method} {path} {shown}: {reply}");
        // The invocation's id too, which its log lines carry.
        assert!(
            reply["error"]["code"].is_string()
                && reply["error"]["message"].is_string()
                && reply["error"]["requestId"]
                    .as_str()
                    .is_some_and(|id| !id.is_empty()),
            "{reply}"
        );
    }
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let api = TestApi::start().await;
    let author = api.user("big").await;
    let before = table_snapshot(&api).await;
    let huge = json!({ "title": "t", "content": "x".repeat(300 * 1024) })
        .to_string()
        .into_bytes();
    let (status, reply) = raw(&api, "POST", "/posts", &author, huge).await;
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (413, Some("payload_too_large"))
    );
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn ids_with_key_prefixes_or_of_other_entities_are_400() {
    let api = TestApi::start().await;
    let user = api.user("prober").await;
    let post = api.post(&user, "t", "c").await;
    let before = table_snapshot(&api).await;
    let comment_path = |id: &str| format!("/posts/{id}/comments");
    for path in [
        comment_path("POST%23x"),
        comment_path(&format!("{post}%23COMMENT")),
        comment_path(&user),
        format!("/posts/{}", "A".repeat(27)),
        "/users/USER%23prober".to_owned(),
        "/users/a%2Fb".to_owned(),
        format!("/users/{}", "u".repeat(129)),
    ] {
        let (status, reply) = api.get(&path).await;
        assert_eq!(
            (status, reply["error"]["code"].as_str()),
            (400, Some("bad_id")),
            "{path}"
        );
    }
    let (status, _) = raw(
        &api,
        "POST",
        &comment_path("FEED"),
        &user,
        br#"{"content":"c"}"#.to_vec(),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn bad_limits_are_400_on_every_list() {
    let api = TestApi::start().await;
    let post = ulid::Ulid::generate();
    for list in [
        format!("/posts/{post}/comments"),
        format!("/posts/{post}/likes"),
        "/users/u1/posts".into(),
    ] {
        for limit in ["0", "101", "-1", "abc", "1.5", ""] {
            let (status, reply) = api.get(&format!("{list}?limit={limit}")).await;
            assert_eq!(
                (status, reply["error"]["code"].as_str()),
                (400, Some("bad_limit")),
                "{list} {limit}"
            );
        }
        for limit in ["1", "100"] {
            assert_eq!(api.get(&format!("{list}?limit={limit}")).await.0, 200);
        }
    }
}

#[tokio::test]
async fn an_unreachable_database_is_503_with_a_json_error() {
    // A port that nothing listens on: the connection is refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port");
    let api = TestApi::start_against(&format!("http://{closed}")).await;
    for (method, path, user, body) in [
        ("GET", "/users/u1".to_owned(), None, None),
        (
            "POST",
            "/users".to_owned(),
            Some("u1"),
            Some(json!({ "username": "offline" })),
        ),
        (
            "GET",
            format!("/posts/{}/comments", ulid::Ulid::generate()),
            None,
            None,
        ),
        ("GET", "/feed".to_owned(), None, None),
    ] {
        let (status, reply) = api.call(method, &path, user, body).await;
        assert_eq!(
            (status, reply["error"]["code"].as_str()),
            (503, Some("unavailable")),
            "{method} {path}"
        );
    }
}
