//! The local API Gateway: what the deployed HTTP API does between a client
//! and the functions, driven by template.yaml, in front of `cargo lambda
//! watch` (which stays the Lambda runtime, with hot reload). For each request,
//! in API Gateway's order:
//! 1. CORS: a preflight is answered here ([`cors`]);
//! 2. a body over 10 MB is refused, 413;
//! 3. the route, from the template's `HttpApi` events: none matches, 404
//!    `{"message":"Not Found"}` (an HTTP API answers an unknown method on a
//!    known path the same way);
//! 4. the route's throttle (`RouteSettings`, else `DefaultRouteSettings`):
//!    over it, 429 `{"message":"Too Many Requests"}`;
//! 5. on a route with the authorizer, the JWT authorizer ([`jwt`]): 401
//!    `{"message":"Unauthorized"}`;
//! 6. the payload format 2.0 event, with the token's claims, sent to the
//!    route's function through watch's Lambda Invoke API; no answer within
//!    30 s is 503 `{"message":"Service Unavailable"}`, a function error 500
//!    `{"message":"Internal Server Error"}`;
//! 7. the function's answer mapped back to HTTP as payload 2.0 maps it.

pub mod config;
pub mod cors;
pub mod jwt;

use std::{
    collections::HashMap,
    convert::Infallible,
    net::SocketAddr,
    sync::Mutex,
    time::{Duration, Instant},
};

use base64::Engine;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{
    HeaderMap, Method, StatusCode,
    body::Bytes,
    header::{self, HeaderName, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::local_gateway::{EventSpec, http_api_event, path_params};
use config::{ApiConfig, RouteConfig, Throttle};
use jwt::Authorizer;

/// API Gateway's largest request body.
pub const MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
/// API Gateway's integration timeout.
pub const INTEGRATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The gateway: the API it serves, its authorizer, where watch is.
pub struct Gateway {
    api: ApiConfig,
    authorizer: Authorizer,
    /// watch's Invoke API, e.g. `http://127.0.0.1:9001`.
    functions: String,
    http: reqwest::Client,
    buckets: Mutex<HashMap<String, Bucket>>,
    timeout: Duration,
}

impl Gateway {
    pub fn new(api: ApiConfig, authorizer: Authorizer, functions: &str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self {
            api,
            authorizer,
            functions: functions.trim_end_matches('/').to_owned(),
            http,
            buckets: Mutex::new(HashMap::new()),
            timeout: INTEGRATION_TIMEOUT,
        })
    }

    /// A shorter integration timeout (tests).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Serves on `listener` until the task is dropped.
    pub async fn serve(self, listener: TcpListener) {
        let gateway: &'static Gateway = Box::leak(Box::new(self));
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service = service_fn(move |req| async move {
                    Ok::<_, Infallible>(gateway.handle(req, peer).await)
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    async fn handle(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
        peer: SocketAddr,
    ) -> hyper::Response<Full<Bytes>> {
        let headers = req.headers();
        let origin = text(headers, &header::ORIGIN);
        let requested = text(headers, &header::ACCESS_CONTROL_REQUEST_METHOD);
        if let (&Method::OPTIONS, Some(origin), Some(method)) = (req.method(), &origin, &requested)
        {
            return self.preflight(origin, method, headers);
        }
        let mut response = self.answer(req, peer).await;
        if let Some(allowed) = origin
            .as_deref()
            .and_then(|o| self.api.cors.allow_origin(o))
            && let Ok(value) = HeaderValue::from_str(&allowed)
        {
            response
                .headers_mut()
                .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
            let exposed = self.api.cors.expose_headers.join(",");
            if let Ok(value) = HeaderValue::from_str(&exposed)
                && !exposed.is_empty()
            {
                response
                    .headers_mut()
                    .insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, value);
            }
        }
        response
    }

    /// A CORS preflight, answered here: 204, with the allow headers only when
    /// the origin, the method and every requested header are allowed.
    fn preflight(
        &self,
        origin: &str,
        method: &str,
        headers: &HeaderMap,
    ) -> hyper::Response<Full<Bytes>> {
        let asked = text(headers, &header::ACCESS_CONTROL_REQUEST_HEADERS).unwrap_or_default();
        let mut response = reply(StatusCode::NO_CONTENT, Bytes::new());
        for (name, value) in self.api.cors.preflight(origin, method, &asked) {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
        response
    }

    async fn answer(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
        peer: SocketAddr,
    ) -> hyper::Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let Ok(body) = Limited::new(body, MAX_BODY_BYTES).collect().await else {
            return message(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large");
        };
        let body = body.to_bytes();
        let path = parts.uri.path();
        let Some((route, params)) = self.route(parts.method.as_str(), path) else {
            return message(StatusCode::NOT_FOUND, "Not Found");
        };
        if !self.admit(route) {
            return message(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests");
        }
        let claims = if route.authorized {
            let authorization = text(&parts.headers, &header::AUTHORIZATION);
            match self.authorizer.verify(authorization.as_deref()).await {
                Ok(verified) => Some(jwt::event_claims(&verified.claims)),
                Err(refusal) => {
                    tracing::info!(route = %route.key(), %refusal, "unauthorized");
                    let mut refused = message(StatusCode::UNAUTHORIZED, "Unauthorized");
                    refused
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                    return refused;
                }
            }
        } else {
            None
        };
        let event = http_api_event(EventSpec {
            method: &route.method,
            route_path: &route.path,
            path,
            raw_query: parts.uri.query().unwrap_or_default(),
            headers: event_headers(&parts.headers),
            path_params: params,
            body: &body,
            source_ip: peer.ip().to_string(),
            claims,
        });
        self.invoke(route, &event).await
    }

    /// The route `method path` matches, and its path parameters.
    fn route(&self, method: &str, path: &str) -> Option<(&RouteConfig, HashMap<String, String>)> {
        self.api
            .routes
            .iter()
            .filter(|r| r.method == method)
            .find_map(|r| path_params(&r.path, path).map(|params| (r, params)))
    }

    /// Takes a token from the route's bucket; `false` when it is empty.
    fn admit(&self, route: &RouteConfig) -> bool {
        let key = route.key();
        let limit = self.api.throttle(&key);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets
            .entry(key)
            .or_insert_with(|| Bucket::full(limit))
            .take(limit, Instant::now())
    }

    /// The function's answer to `event`, as API Gateway returns it.
    async fn invoke(&self, route: &RouteConfig, event: &Value) -> hyper::Response<Full<Bytes>> {
        let url = format!(
            "{}/2015-03-31/functions/{}/invocations",
            self.functions, route.function
        );
        let sent = self.http.post(url).json(event).timeout(self.timeout).send();
        let answer = match sent.await {
            Ok(answer) => answer,
            Err(err) if err.is_timeout() => {
                tracing::warn!(function = %route.function, "integration timed out");
                return message(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable");
            }
            Err(err) => {
                tracing::warn!(function = %route.function, error = %err, "function unreachable");
                return message(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error");
            }
        };
        let status = answer.status();
        let bytes = answer.bytes().await.unwrap_or_default();
        if !status.is_success() {
            tracing::warn!(function = %route.function, %status, body = %String::from_utf8_lossy(&bytes), "function failed");
            return message(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error");
        }
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(result) => from_result(&result),
            Err(_) => message(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error"),
        }
    }
}

/// A token bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(limit: Throttle) -> Self {
        Self {
            tokens: limit.burst,
            at: Instant::now(),
        }
    }

    fn take(&mut self, limit: Throttle, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * limit.rate;
        self.tokens = (self.tokens + refill).min(limit.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A payload format 2.0 result as an HTTP answer: `statusCode`, `headers`,
/// `cookies` and `body` (base64 when `isBase64Encoded`); a result without
/// `statusCode` is itself the JSON body of a 200.
fn from_result(result: &Value) -> hyper::Response<Full<Bytes>> {
    let Some(status) = result.get("statusCode").and_then(Value::as_u64) else {
        let mut inferred = reply(StatusCode::OK, Bytes::from(result.to_string()));
        inferred.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return inferred;
    };
    let body = result
        .get("body")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let body = if result["isBase64Encoded"].as_bool() == Some(true) {
        match base64::engine::general_purpose::STANDARD.decode(body) {
            Ok(bytes) => Bytes::from(bytes),
            Err(_) => return message(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error"),
        }
    } else {
        Bytes::from(body.to_owned())
    };
    let status = u16::try_from(status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = reply(status, body);
    if let Some(headers) = result.get("headers").and_then(Value::as_object) {
        // API Gateway sets CORS headers itself and drops the function's.
        let own = |name: &str| name.to_ascii_lowercase().starts_with("access-control-");
        for (name, value) in headers.iter().filter(|(name, _)| !own(name)) {
            if let (Ok(name), Some(Ok(value))) = (
                HeaderName::from_bytes(name.as_bytes()),
                value.as_str().map(HeaderValue::from_str),
            ) {
                response.headers_mut().insert(name, value);
            }
        }
    }
    for cookie in result["cookies"].as_array().into_iter().flatten() {
        if let Some(Ok(value)) = cookie.as_str().map(HeaderValue::from_str) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// The request's headers as the event carries them: lower-case names,
/// repeated values joined with commas.
fn event_headers(headers: &HeaderMap) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match out.get_mut(name.as_str()) {
            Some(Value::String(joined)) => {
                joined.push(',');
                joined.push_str(&value);
            }
            _ => {
                out.insert(name.as_str().to_owned(), json!(value));
            }
        }
    }
    out
}

fn text(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn reply(status: StatusCode, body: Bytes) -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(body));
    *response.status_mut() = status;
    response
}

/// API Gateway's own answers: `{"message": "..."}`.
fn message(status: StatusCode, text: &str) -> hyper::Response<Full<Bytes>> {
    let mut response = reply(status, Bytes::from(json!({ "message": text }).to_string()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests;
