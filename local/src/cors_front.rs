//! The local stand-in for the HTTP API's CORS handling, in front of
//! `cargo lambda watch` (run with `--disable-cors`): preflights answered and
//! responses marked as API Gateway does with template.yaml's
//! `CorsConfiguration`, which it reads at start, so that a browser page that
//! works locally works deployed, and one that fails deployed fails here too.
//!
//! As API Gateway (HTTP API) does:
//! - an `OPTIONS` request with `Origin` and `Access-Control-Request-Method` is
//!   a preflight, answered here with 204 and never forwarded: with the allow
//!   headers when the origin, the method and every requested header are
//!   allowed, without them otherwise;
//! - any other request is forwarded as it came; the answer gets
//!   `Access-Control-Allow-Origin` when the request's origin is allowed, and
//!   loses any CORS header the function set (API Gateway ignores them).

use std::{convert::Infallible, time::Duration};

use http_body_util::{BodyExt, Full};
use hyper::{
    HeaderMap, Method, StatusCode,
    body::Bytes,
    header::{self, HeaderName, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

pub use crate::api_gateway::cors::Cors;

/// The local stand-in for the JWT's `Authorization` header.
const LOCAL_IDENTITY_HEADER: &str = "x-user-id";

/// The configuration template.yaml deploys, its `AllowOrigins` from the
/// `AllowedOrigins` parameter's default unless `origins` is given (the value
/// a deployment would pass). Locally the caller names itself by `X-User-Id`
/// where a deployed page sends `Authorization`, so that header is allowed
/// too.
pub fn cors_from_template(text: &str, origins: Option<&str>) -> Result<Cors, String> {
    let parameters = origins
        .map(|o| ("AllowedOrigins".to_owned(), o.to_owned()))
        .into_iter()
        .collect();
    let mut cors = crate::api_gateway::config::ApiConfig::from_template(text, &parameters)?.cors;
    cors.allow_headers.push(LOCAL_IDENTITY_HEADER.to_owned());
    Ok(cors)
}

/// Serves on `listener` until the task is dropped, forwarding to `upstream`
/// (watch's URL, e.g. `http://127.0.0.1:9001`).
pub async fn serve(listener: TcpListener, upstream: String, cors: Cors) {
    let http = match reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .build()
    {
        Ok(http) => http,
        Err(err) => {
            tracing::error!(error = %err, "cannot build the HTTP client");
            return;
        }
    };
    let upstream = upstream.trim_end_matches('/').to_owned();
    let shared: &'static (reqwest::Client, String, Cors) =
        Box::leak(Box::new((http, upstream, cors)));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(shared, req));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Headers that belong to one connection, not to the request.
const HOP_BY_HOP: [HeaderName; 3] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

async fn handle(
    (http, upstream, cors): &'static (reqwest::Client, String, Cors),
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let text = |h: &HeaderMap, name: HeaderName| {
        h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    };
    let origin = text(&parts.headers, header::ORIGIN);
    let requested = text(&parts.headers, header::ACCESS_CONTROL_REQUEST_METHOD);
    if let (&Method::OPTIONS, Some(origin), Some(method)) = (&parts.method, &origin, &requested) {
        let asked =
            text(&parts.headers, header::ACCESS_CONTROL_REQUEST_HEADERS).unwrap_or_default();
        let mut response = hyper::Response::new(Full::new(Bytes::new()));
        *response.status_mut() = StatusCode::NO_CONTENT;
        for (name, value) in cors.preflight(origin, method, &asked) {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
        return Ok(response);
    }
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = parts.headers.clone();
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    let sent = http
        .request(parts.method.clone(), format!("{upstream}{path}"))
        .headers(headers)
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(err) => {
            // API Gateway's answer when the integration cannot be reached.
            tracing::warn!(error = %err, "upstream unreachable");
            let mut response = hyper::Response::new(Full::new(Bytes::from(
                r#"{"message":"Internal Server Error"}"#,
            )));
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            return Ok(response);
        }
    };
    let status = answer.status();
    let mut headers = answer.headers().clone();
    let body = answer.bytes().await.unwrap_or_default();
    headers.remove(header::CONTENT_LENGTH);
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    // API Gateway ignores the integration's own CORS headers.
    let own: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("access-control-"))
        .cloned()
        .collect();
    for name in own {
        headers.remove(name);
    }
    if let Some(allowed) = origin.as_deref().and_then(|o| cors.allow_origin(o))
        && let Ok(value) = HeaderValue::from_str(&allowed)
    {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
    }
    let mut response = hyper::Response::new(Full::new(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cors(origins: &str) -> Cors {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
                .expect("template.yaml");
        cors_from_template(&text, Some(origins)).expect("the CORS configuration")
    }

    #[test]
    fn the_configuration_is_the_templates() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
                .expect("template.yaml");
        let deployed = cors_from_template(&text, None).expect("cors");
        assert_eq!(deployed.allow_origins, ["*"]);
        assert_eq!(
            deployed.allow_methods,
            ["GET", "POST", "PUT", "DELETE", "OPTIONS"]
        );
        assert_eq!(
            deployed.allow_headers,
            ["authorization", "content-type", "x-user-id"]
        );
        assert_eq!(deployed.max_age, 600);
    }

    #[test]
    fn a_preflight_is_allowed_only_for_an_allowed_origin_method_and_headers() {
        let some = cors("https://blog.example.com");
        let allowed = some.preflight(
            "https://blog.example.com",
            "DELETE",
            "authorization, Content-Type",
        );
        assert_eq!(
            allowed
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
            [
                ("access-control-allow-origin", "https://blog.example.com"),
                (
                    "access-control-allow-methods",
                    "GET,POST,PUT,DELETE,OPTIONS"
                ),
                (
                    "access-control-allow-headers",
                    "authorization,content-type,x-user-id"
                ),
                ("access-control-max-age", "600"),
            ]
        );
        assert!(some.preflight("https://evil.example", "GET", "").is_empty());
        assert!(
            some.preflight("https://blog.example.com", "PATCH", "")
                .is_empty()
        );
        assert!(
            some.preflight("https://blog.example.com", "GET", "x-api-key")
                .is_empty()
        );
        let any = cors("*");
        assert_eq!(
            any.preflight("https://anywhere.example", "GET", "")[0].1,
            "*"
        );
    }
}
