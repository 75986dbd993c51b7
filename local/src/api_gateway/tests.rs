//! The gateway against template.yaml, with a stand-in for watch's Invoke API
//! that records every event it is sent, and tokens signed by the tests' own
//! key (`tests/fixtures/issuer-key.der`, published in `issuer-jwks.json`;
//! `other-key.der` stands for another user pool's).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header, jwk::JwkSet};
use serde_json::{Value, json};

use super::{
    config::ApiConfig,
    jwt::{Authorizer, JwtConfig},
    *,
};

const ISSUER: &str = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_local";
const CLIENT: &str = "local-app-client";

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn template() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
        .expect("template.yaml")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// An ID token of `sub` for the app client, valid for an hour.
fn id_claims(sub: &str) -> Value {
    json!({
        "sub": sub, "iss": ISSUER, "aud": CLIENT, "token_use": "id",
        "cognito:username": "alice", "iat": now(), "auth_time": now(),
        "exp": now() + 3600,
    })
}

/// An access token of `sub` for the app client (no `aud`: `client_id`).
fn access_claims(sub: &str) -> Value {
    json!({
        "sub": sub, "iss": ISSUER, "client_id": CLIENT, "token_use": "access",
        "scope": "aws.cognito.signin.user.admin", "username": "alice",
        "iat": now(), "exp": now() + 3600,
    })
}

fn sign(claims: &Value, key: &str, kid: &str) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let path = format!("{}/tests/fixtures/{key}", env!("CARGO_MANIFEST_DIR"));
    let der = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let key = EncodingKey::from_rsa_der(&der);
    jsonwebtoken::encode(&header, claims, &key).expect("sign")
}

fn token(claims: &Value) -> String {
    sign(claims, "issuer-key.der", "test-issuer-key")
}

/// What the stand-in for watch was sent, and what it answers.
#[derive(Clone, Default)]
struct Functions {
    invoked: Arc<Mutex<Vec<(String, Value)>>>,
    answer: Arc<Mutex<Option<(u16, Value, u64)>>>,
}

impl Functions {
    fn invocations(&self) -> Vec<(String, Value)> {
        self.invoked.lock().expect("lock").clone()
    }

    /// From now on: `status` from watch with `body`, after `delay_ms`.
    fn answer(&self, status: u16, body: Value, delay_ms: u64) {
        *self.answer.lock().expect("lock") = Some((status, body, delay_ms));
    }

    async fn serve(self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let functions = self.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let functions = functions.clone();
                        async move {
                            let name = req
                                .uri()
                                .path()
                                .trim_start_matches("/2015-03-31/functions/")
                                .trim_end_matches("/invocations")
                                .to_owned();
                            let body = req.into_body().collect().await.expect("body").to_bytes();
                            let event: Value = serde_json::from_slice(&body).expect("event");
                            functions.invoked.lock().expect("lock").push((name, event));
                            let answer = functions.answer.lock().expect("lock").clone();
                            let (status, body, delay) = answer.unwrap_or((
                                200,
                                json!({"statusCode": 200, "headers": {"content-type": "application/json"}, "body": "{\"ok\":true}"}),
                                0,
                            ));
                            tokio::time::sleep(Duration::from_millis(delay)).await;
                            let mut response = reply(
                                StatusCode::from_u16(status).expect("status"),
                                Bytes::from(body.to_string()),
                            );
                            response.headers_mut().insert(
                                header::CONTENT_TYPE,
                                HeaderValue::from_static("application/json"),
                            );
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        url
    }
}

struct Running {
    url: String,
    functions: Functions,
    http: reqwest::Client,
}

impl Running {
    async fn start(parameters: &[(&str, &str)], timeout: Duration) -> Self {
        let parameters: HashMap<String, String> = parameters
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let api = ApiConfig::from_template(&template(), &parameters).expect("the API");
        let config = JwtConfig {
            issuer: api.issuer("us-east-1", "us-east-1_local"),
            audience: vec![CLIENT.to_owned()],
            jwks_url: "http://127.0.0.1:9/unreachable".to_owned(),
        };
        let keys: JwkSet = serde_json::from_str(&fixture("issuer-jwks.json")).expect("jwks");
        let functions = Functions::default();
        let watch = functions.clone().serve().await;
        let gateway = Gateway::new(api, Authorizer::with_keys(config, keys), &watch)
            .expect("gateway")
            .with_timeout(timeout);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(gateway.serve(listener));
        Self {
            url,
            functions,
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
        }
    }

    async fn default() -> Self {
        Self::start(&[], INTEGRATION_TIMEOUT).await
    }

    async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> (u16, reqwest::header::HeaderMap, String) {
        let answer = req.send().await.expect("send");
        let status = answer.status().as_u16();
        let headers = answer.headers().clone();
        (status, headers, answer.text().await.expect("body"))
    }

    /// `POST /posts` with `authorization` as the header, if any.
    async fn create_post(&self, authorization: Option<String>) -> (u16, String) {
        let mut req = self
            .http
            .post(format!("{}/posts", self.url))
            .body(r#"{"title":"t","content":"c"}"#);
        if let Some(value) = authorization {
            req = req.header("authorization", value);
        }
        let (status, _, body) = self.send(req).await;
        (status, body)
    }
}

#[test]
fn the_routes_and_the_authorizer_are_the_templates() {
    let api = ApiConfig::from_template(&template(), &HashMap::new()).expect("the API");
    assert_eq!(api.routes.len(), blog::routes::ROUTES.len());
    let key = |method: &str, path: &str| {
        api.routes
            .iter()
            .find(|r| r.method == method && r.path == path)
            .map(|r| (r.function.as_str(), r.authorized))
    };
    assert_eq!(key("POST", "/posts"), Some(("create-post", true)));
    assert_eq!(key("GET", "/posts/{postId}"), Some(("get-post", false)));
    assert_eq!(
        key("DELETE", "/posts/{postId}/likes"),
        Some(("unlike-post", true))
    );
    assert_eq!(
        key("GET", "/users/{userId}/export"),
        Some(("export-user", true))
    );
    assert_eq!(
        api.issuer("eu-west-1", "eu-west-1_abc"),
        "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc"
    );
    // The template's defaults: 100 a second a write route (and the export),
    // 1,000 a public read route, 5,000 the feed.
    assert_eq!(api.throttle("POST /posts").rate, 100.0);
    assert_eq!(api.throttle("GET /users/{userId}/export").rate, 100.0);
    assert_eq!(api.throttle("GET /posts/{postId}").rate, 1000.0);
    assert_eq!(api.throttle("GET /feed").burst, 5000.0);
    assert_eq!(
        api.cors.allow_headers,
        [
            "authorization",
            "content-type",
            "idempotency-key",
            "if-match",
            "if-none-match"
        ]
    );
    assert_eq!(api.cors.expose_headers, ["idempotent-replayed", "etag"]);
}

/// Every refusal is API Gateway's 401, and the function is never invoked.
#[tokio::test]
async fn tokens_the_authorizer_refuses_never_reach_a_function() {
    let gateway = Running::default().await;
    let good = token(&id_claims("alice-sub"));
    let mut tampered = good.clone().into_bytes();
    let at = tampered.len() - 10;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let unsigned = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&id_claims("alice-sub"))
    );
    let mut hs256 = Header::new(Algorithm::HS256);
    hs256.kid = Some("test-issuer-key".into());
    let confused = jsonwebtoken::encode(
        &hs256,
        &id_claims("alice-sub"),
        &EncodingKey::from_secret(fixture("issuer-jwks.json").as_bytes()),
    )
    .expect("hs256");
    let with = |change: Value| {
        let mut claims = id_claims("alice-sub");
        for (k, v) in change.as_object().expect("object") {
            claims[k] = v.clone();
        }
        token(&claims)
    };
    let refused: Vec<(&str, Option<String>)> = vec![
        ("no header", None),
        ("another scheme", Some(format!("Basic {good}"))),
        ("Bearer and nothing", Some("Bearer ".into())),
        ("two tokens", Some(format!("Bearer {good} {good}"))),
        ("a bare malformed token", Some("not.a.token".into())),
        ("a bare tampered token", Some(tampered.clone())),
        ("malformed", Some("Bearer not.a.token".into())),
        ("one byte changed", Some(format!("Bearer {tampered}"))),
        ("alg none", Some(format!("Bearer {unsigned}"))),
        (
            "HS256 with a public secret",
            Some(format!("Bearer {confused}")),
        ),
        (
            "expired",
            Some(format!("Bearer {}", with(json!({"exp": now() - 1})))),
        ),
        (
            "not yet valid",
            Some(format!("Bearer {}", with(json!({"nbf": now() + 600})))),
        ),
        (
            "issued later",
            Some(format!("Bearer {}", with(json!({"iat": now() + 600})))),
        ),
        (
            "wrong issuer",
            Some(format!(
                "Bearer {}",
                with(json!({"iss": "https://evil.example"}))
            )),
        ),
        (
            "wrong audience",
            Some(format!("Bearer {}", with(json!({"aud": "another-client"})))),
        ),
        (
            "wrong client",
            Some(format!("Bearer {}", {
                let mut claims = access_claims("alice-sub");
                claims["client_id"] = json!("another-client");
                token(&claims)
            })),
        ),
        (
            "another pool's key",
            Some(format!(
                "Bearer {}",
                sign(&id_claims("alice-sub"), "other-key.der", "other-pool-key")
            )),
        ),
        (
            "another key under this pool's key id",
            Some(format!(
                "Bearer {}",
                sign(&id_claims("alice-sub"), "other-key.der", "test-issuer-key")
            )),
        ),
    ];
    for (what, authorization) in refused {
        let (status, body) = gateway.create_post(authorization).await;
        assert_eq!(
            (status, body.as_str()),
            (401, r#"{"message":"Unauthorized"}"#),
            "{what}"
        );
    }
    assert_eq!(gateway.functions.invocations(), [], "nothing invoked");
}

/// The authorizer takes the token alone or after `Bearer ` (in any case),
/// as AWS documents the HTTP API's identity source: a client written for the
/// deployed API works unchanged.
#[tokio::test]
async fn a_token_is_accepted_bare_or_after_bearer() {
    let gateway = Running::default().await;
    let good = token(&id_claims("alice-sub"));
    for authorization in [
        good.clone(),
        format!("Bearer {good}"),
        format!("bearer {good}"),
        format!("  BEARER   {good}  "),
    ] {
        let (status, body) = gateway.create_post(Some(authorization.clone())).await;
        assert_eq!(
            (status, body.as_str()),
            (200, r#"{"ok":true}"#),
            "{authorization:?}"
        );
    }
    let invoked = gateway.functions.invocations();
    assert_eq!(invoked.len(), 4, "each one invoked the function");
    for (_, event) in &invoked {
        assert_eq!(
            event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"],
            "alice-sub"
        );
    }
}

/// An ID token and an access token, as the template configures the
/// authorizer: the function gets the claims, every one a string.
#[tokio::test]
async fn id_and_access_tokens_reach_the_function_with_their_claims() {
    let gateway = Running::default().await;
    for claims in [id_claims("alice-sub"), access_claims("bob-sub")] {
        let (status, body) = gateway
            .create_post(Some(format!("Bearer {}", token(&claims))))
            .await;
        assert_eq!((status, body.as_str()), (200, r#"{"ok":true}"#));
    }
    let invoked = gateway.functions.invocations();
    assert_eq!(invoked.len(), 2);
    let (function, event) = &invoked[0];
    assert_eq!(function, "create-post");
    assert_eq!(event["version"], "2.0");
    assert_eq!(event["routeKey"], "POST /posts");
    let jwt = &event["requestContext"]["authorizer"]["jwt"];
    assert_eq!(jwt["claims"]["sub"], "alice-sub");
    assert_eq!(jwt["claims"]["token_use"], "id");
    // Numbers as their digits, as API Gateway passes every claim.
    let exp = jwt["claims"]["exp"].as_str().expect("exp as text");
    assert!(exp.parse::<u64>().is_ok_and(|exp| exp > now()), "{jwt}");
    assert_eq!(
        invoked[1].1["requestContext"]["authorizer"]["jwt"]["claims"]["sub"],
        "bob-sub"
    );
    assert!(
        event["requestContext"]["timeEpoch"]
            .as_i64()
            .is_some_and(|ms| ms > 1_000_000_000_000)
    );
}

/// Public reads need no token; the event has no authorizer, its path
/// parameters and query as API Gateway gives them.
#[tokio::test]
async fn public_routes_are_invoked_without_a_token_and_unknown_ones_are_404() {
    let gateway = Running::default().await;
    let req = gateway.http.get(format!(
        "{}/posts/01ABC/comments?limit=5&limit=6",
        gateway.url
    ));
    let (status, _, _) = gateway.send(req).await;
    assert_eq!(status, 200);
    let invoked = gateway.functions.invocations();
    let (function, event) = &invoked[0];
    assert_eq!(function, "list-comments");
    assert_eq!(event["pathParameters"]["postId"], "01ABC");
    assert_eq!(event["rawQueryString"], "limit=5&limit=6");
    assert_eq!(event["queryStringParameters"]["limit"], "5,6");
    assert!(event["requestContext"]["authorizer"].is_null());

    for (method, path) in [("GET", "/nowhere"), ("PATCH", "/posts"), ("GET", "/posts/")] {
        let req = gateway.http.request(
            method.parse().expect("method"),
            format!("{}{path}", gateway.url),
        );
        let (status, _, body) = gateway.send(req).await;
        assert_eq!(
            (status, body.as_str()),
            (404, r#"{"message":"Not Found"}"#),
            "{method} {path}"
        );
    }
    assert_eq!(gateway.functions.invocations().len(), 1);
}

/// The route's throttle from the template (here `WriteRateLimit` = 2): the
/// burst passes, the next is 429 and invokes nothing; other routes have
/// their own bucket.
#[tokio::test]
async fn a_route_over_its_throttle_is_answered_429_without_invoking() {
    let gateway = Running::start(&[("WriteRateLimit", "2")], INTEGRATION_TIMEOUT).await;
    let bearer = format!("Bearer {}", token(&id_claims("alice-sub")));
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(gateway.create_post(Some(bearer.clone())).await);
    }
    assert_eq!(statuses[0].0, 200);
    assert_eq!(statuses[1].0, 200);
    assert_eq!(
        statuses[2],
        (429, r#"{"message":"Too Many Requests"}"#.to_owned())
    );
    assert_eq!(gateway.functions.invocations().len(), 2);
    let (status, _, _) = gateway
        .send(gateway.http.get(format!("{}/feed", gateway.url)))
        .await;
    assert_eq!(status, 200);
}

/// API Gateway's limits: a body over 10 MB is 413, no answer in the
/// integration timeout is 503, a function error 500; none invokes twice.
#[tokio::test]
async fn limits_and_failures_answer_as_api_gateway_does() {
    let gateway = Running::start(&[], Duration::from_millis(300)).await;
    let bearer = format!("Bearer {}", token(&id_claims("alice-sub")));
    let big = gateway
        .http
        .post(format!("{}/posts", gateway.url))
        .header("authorization", &bearer)
        .body(vec![b'x'; MAX_BODY_BYTES + 1]);
    let (status, _, body) = gateway.send(big).await;
    assert_eq!(
        (status, body.as_str()),
        (413, r#"{"message":"Request Entity Too Large"}"#)
    );
    assert_eq!(gateway.functions.invocations().len(), 0);

    gateway
        .functions
        .answer(200, json!({"statusCode": 200, "body": "late"}), 1_000);
    let (status, body) = gateway.create_post(Some(bearer.clone())).await;
    assert_eq!(
        (status, body.as_str()),
        (503, r#"{"message":"Service Unavailable"}"#)
    );

    gateway.functions.answer(
        500,
        json!({"errorType": "Panic", "errorMessage": "boom"}),
        0,
    );
    let (status, body) = gateway.create_post(Some(bearer)).await;
    assert_eq!(
        (status, body.as_str()),
        (500, r#"{"message":"Internal Server Error"}"#)
    );
    assert_eq!(gateway.functions.invocations().len(), 2);
}

/// Payload 2.0's answer: status, headers (the function's CORS headers
/// dropped, the gateway's own added), cookies, base64 bodies; an answer
/// without `statusCode` is a JSON 200.
#[tokio::test]
async fn the_functions_answer_is_mapped_as_payload_2_0_maps_it() {
    let gateway = Running::default().await;
    gateway.functions.answer(
        200,
        json!({
            "statusCode": 201,
            "headers": {"content-type": "text/plain", "access-control-allow-origin": "https://evil.example"},
            "cookies": ["a=1", "b=2"],
            "body": base64::engine::general_purpose::STANDARD.encode("hello"),
            "isBase64Encoded": true,
        }),
        0,
    );
    let req = gateway
        .http
        .get(format!("{}/feed", gateway.url))
        .header("origin", "https://app.example");
    let (status, headers, body) = gateway.send(req).await;
    assert_eq!((status, body.as_str()), (201, "hello"));
    assert_eq!(headers["content-type"], "text/plain");
    assert_eq!(headers["access-control-allow-origin"], "*");
    // What a browser may read of the answer: the template's ExposeHeaders.
    assert_eq!(
        headers["access-control-expose-headers"],
        "idempotent-replayed,etag"
    );
    let cookies: Vec<_> = headers.get_all("set-cookie").iter().collect();
    assert_eq!(cookies, ["a=1", "b=2"]);

    gateway.functions.answer(200, json!({"items": []}), 0);
    let (status, headers, body) = gateway
        .send(gateway.http.get(format!("{}/feed", gateway.url)))
        .await;
    assert_eq!((status, body.as_str()), (200, r#"{"items":[]}"#));
    assert_eq!(headers["content-type"], "application/json");
}

/// A preflight is answered by the gateway, before routing and the
/// authorizer: the allow headers for what the template allows, none for a
/// header it does not; no function is invoked either way.
#[tokio::test]
async fn preflights_are_answered_by_the_gateway_from_the_template() {
    let gateway = Running::start(
        &[("AllowedOrigins", "https://app.example")],
        INTEGRATION_TIMEOUT,
    )
    .await;
    let preflight = |headers: &'static str, origin: &'static str| {
        gateway
            .http
            .request(reqwest::Method::OPTIONS, format!("{}/posts", gateway.url))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", headers)
    };
    let (status, headers, _) = gateway
        .send(preflight(
            "authorization,content-type,idempotency-key",
            "https://app.example",
        ))
        .await;
    assert_eq!(status, 204);
    assert_eq!(
        headers["access-control-allow-origin"],
        "https://app.example"
    );
    assert_eq!(
        headers["access-control-allow-headers"],
        "authorization,content-type,idempotency-key,if-match,if-none-match"
    );
    assert_eq!(headers["access-control-max-age"], "600");
    for (asked, origin) in [
        ("x-custom-header", "https://app.example"),
        ("authorization", "https://evil.example"),
    ] {
        let (status, headers, _) = gateway.send(preflight(asked, origin)).await;
        assert_eq!(status, 204);
        assert!(
            !headers.contains_key("access-control-allow-origin"),
            "{asked} from {origin}"
        );
    }
    assert_eq!(gateway.functions.invocations(), [], "nothing invoked");
}
