//! An in-process stand-in for API Gateway's HTTP API on a loopback port, for
//! the Rust tests: it routes [`ROUTES`], turns each request into the
//! payload-2.0 event API Gateway would send (non-UTF-8 bodies base64-encoded,
//! query parameters joined with commas, path parameters decoded), parses it
//! with `lambda_http` as a Lambda would, and runs the route's handler. The
//! value of the `jwt_sub_header` the test names becomes the verified JWT `sub`
//! claim, as the authorizer would set it after checking a token (the token
//! checks themselves are [`crate::api_gateway`]'s, tested there and in the
//! test command). Never deployed, and not the local stack's gateway:
//! `blog-admin api-gateway` is.

use std::{collections::HashMap, convert::Infallible, net::SocketAddr};

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::{body::Bytes, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use blog::{
    api::{ApiError, App, respond},
    routes::{ROUTES, Route, dispatch},
};

/// Serves `app` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, app: &'static App, jwt_sub_header: &'static str) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(app, peer, req, jwt_sub_header));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(
    app: &'static App,
    peer: SocketAddr,
    req: hyper::Request<hyper::body::Incoming>,
    jwt_sub_header: &'static str,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let Some((route, params)) = ROUTES
        .iter()
        .find_map(|r| matches(r, parts.method.as_str(), &path))
    else {
        let mut not_found =
            hyper::Response::new(Full::new(Bytes::from(r#"{"message":"Not Found"}"#)));
        *not_found.status_mut() = hyper::StatusCode::NOT_FOUND;
        return Ok(not_found);
    };
    let event = event(route, &parts, &path, params, &body, peer, jwt_sub_header);
    let request_id = event["requestContext"]["requestId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // As on API Gateway, a function that cannot take the event is a 500.
    let result = match lambda_http::request::from_str(&event.to_string()) {
        Ok(request) => {
            blog::store::request_scope(request_id.clone(), dispatch(route.function, app, request))
                .await
        }
        Err(err) => Some(Err(ApiError::Internal(format!(
            "cannot parse the event: {err}"
        )))),
    };
    let response = respond(
        result.unwrap_or_else(|| {
            Err(ApiError::Internal(format!(
                "no handler for {}",
                route.function
            )))
        }),
        &request_id,
    );
    let (parts, body) = response.into_parts();
    let bytes = match body {
        lambda_http::Body::Text(text) => Bytes::from(text),
        lambda_http::Body::Binary(bytes) => Bytes::from(bytes),
        _ => Bytes::new(),
    };
    let mut out = hyper::Response::new(Full::new(bytes));
    *out.status_mut() = parts.status;
    *out.headers_mut() = parts.headers;
    Ok(out)
}

/// The route's path parameters when `method` and `path` match it.
fn matches(
    route: &'static Route,
    method: &str,
    path: &str,
) -> Option<(&'static Route, HashMap<String, String>)> {
    if route.method != method {
        return None;
    }
    path_params(route.path, path).map(|params| (route, params))
}

/// The path parameters (percent-decoded) when `path` matches the route path
/// `template` (`/posts/{postId}`); an empty segment matches no parameter.
pub fn path_params(template: &str, path: &str) -> Option<HashMap<String, String>> {
    let template: Vec<&str> = template.split('/').collect();
    let actual: Vec<&str> = path.split('/').collect();
    if template.len() != actual.len() {
        return None;
    }
    let mut params = HashMap::new();
    for (t, a) in template.iter().zip(&actual) {
        match t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            Some(name) if !a.is_empty() => {
                let decoded = percent_encoding::percent_decode_str(a)
                    .decode_utf8_lossy()
                    .into_owned();
                params.insert(name.to_owned(), decoded);
            }
            Some(_) => return None,
            None if t == a => {}
            None => return None,
        }
    }
    Some(params)
}

/// The event for a request that reached this stand-in over HTTP.
fn event(
    route: &Route,
    parts: &hyper::http::request::Parts,
    path: &str,
    params: HashMap<String, String>,
    body: &Bytes,
    peer: SocketAddr,
    jwt_sub_header: &str,
) -> Value {
    let mut headers = serde_json::Map::new();
    for (name, value) in &parts.headers {
        if name.as_str() == jwt_sub_header {
            continue;
        }
        headers.insert(name.to_string(), json!(value.to_str().unwrap_or_default()));
    }
    let jwt_sub = parts
        .headers
        .get(jwt_sub_header)
        .and_then(|v| v.to_str().ok());
    http_api_event(EventSpec {
        method: route.method,
        route_path: route.path,
        path,
        raw_query: parts.uri.query().unwrap_or_default(),
        headers,
        path_params: params,
        body,
        source_ip: peer.ip().to_string(),
        claims: jwt_sub.map(|sub| serde_json::Map::from_iter([("sub".to_owned(), json!(sub))])),
    })
}

/// What an HTTP API request is made of, before API Gateway turns it into an event.
pub struct EventSpec<'a> {
    /// The route's method and path as the API declares it (`/posts/{postId}`).
    pub method: &'a str,
    pub route_path: &'a str,
    pub path: &'a str,
    pub raw_query: &'a str,
    pub headers: serde_json::Map<String, Value>,
    pub path_params: HashMap<String, String>,
    pub body: &'a [u8],
    pub source_ip: String,
    /// The claims of a JWT the authorizer verified (each a string, as API
    /// Gateway passes them), if the route has the authorizer.
    pub claims: Option<serde_json::Map<String, Value>>,
}

/// The HTTP API's payload format 2.0, as API Gateway sends it.
pub fn http_api_event(spec: EventSpec<'_>) -> Value {
    let EventSpec {
        method,
        route_path,
        path,
        raw_query,
        headers,
        path_params: params,
        body,
        source_ip,
        claims,
    } = spec;
    let mut query: HashMap<String, String> = HashMap::new();
    for (k, v) in form_urlencoded::parse(raw_query.as_bytes()) {
        // API Gateway joins repeated parameters with commas.
        query
            .entry(k.into_owned())
            .and_modify(|e| e.push_str(&format!(",{v}")))
            .or_insert(v.into_owned());
    }
    let route_key = format!("{method} {route_path}");
    let user_agent = headers
        .get("user-agent")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let now = time::OffsetDateTime::now_utc();
    let clock = time::macros::format_description!(
        "[day]/[month repr:short]/[year]:[hour]:[minute]:[second] +0000"
    );
    // As API Gateway: the domain the request came in on (a request for
    // another domain never reaches an API, so its Host is its domain).
    let domain = headers
        .get("host")
        .and_then(Value::as_str)
        .filter(|host| {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
        })
        .unwrap_or("localhost")
        .to_owned();
    let prefix = domain
        .split(['.', ':'])
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut context = json!({
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": domain,
        "domainPrefix": prefix,
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": source_ip,
            "userAgent": user_agent
        },
        "requestId": ulid::Ulid::generate().to_string(),
        "routeKey": route_key,
        "stage": "$default",
        "time": now.format(clock).unwrap_or_default(),
        "timeEpoch": now.unix_timestamp_nanos() / 1_000_000
    });
    if let Some(claims) = claims {
        context["authorizer"] = json!({ "jwt": { "claims": claims, "scopes": null } });
    }
    let (body, encoded) = match std::str::from_utf8(body) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(body), true),
    };
    let mut event = json!({
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": headers,
        "requestContext": context,
        "isBase64Encoded": encoded,
    });
    if !query.is_empty() {
        event["queryStringParameters"] = json!(query);
    }
    if !params.is_empty() {
        event["pathParameters"] = json!(params);
    }
    if !body.is_empty() {
        event["body"] = json!(body);
    }
    event
}
