//! Reading what a request carries: who calls, its path ids, its query and its
//! JSON body, each validated before anything else looks at it.

use lambda_http::{Body, Request, RequestExt, request::RequestContext};
use serde::de::DeserializeOwned;

use super::{ApiError, ErrorCode};
use crate::{
    ids::{IdError, IdempotencyKey, UserId},
    store::idempotency::Idempotency,
};

/// The header a client names a creating write's retries by.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Bodies above this are refused before parsing (413).
pub const MAX_BODY_BYTES: usize = 256 * 1024;
pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 100;

/// The caller's id: the `sub` claim that API Gateway's JWT authorizer verified,
/// and nothing else (no header, deployed or local: the local API Gateway runs
/// the same authorizer, `local::api_gateway`).
pub fn caller(req: &Request) -> Result<UserId, ApiError> {
    let raw = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx
            .authorizer
            .as_ref()
            .and_then(|a| a.jwt.as_ref())
            .and_then(|jwt| jwt.claims.get("sub"))
            .cloned(),
        _ => None,
    }
    .ok_or(ApiError::Unauthorized)?;
    UserId::parse(&raw).map_err(|_| ApiError::Unauthorized)
}

/// Where this API is, as its clients reach it: `https://` and the domain
/// API Gateway received the request on (its request context's `domainName`,
/// which the client cannot choose: a request for another domain never
/// reaches the API), or `http://` for a loopback one (the local stack). For
/// the absolute links and ids an Atom feed needs.
pub fn origin(req: &Request) -> String {
    let domain = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx.domain_name.as_deref(),
        _ => None,
    }
    .filter(|domain| {
        !domain.is_empty()
            && domain.len() <= 253
            && domain
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
    })
    .unwrap_or("localhost");
    let host = domain.split(':').next().unwrap_or_default();
    let scheme = if matches!(host, "localhost" | "127.0.0.1") {
        "http"
    } else {
        "https"
    };
    format!("{scheme}://{domain}")
}

/// A path parameter, parsed into its id type (400 when it does not match).
pub fn path_id<T>(
    req: &Request,
    name: &str,
    parse: fn(&str) -> Result<T, IdError>,
) -> Result<T, ApiError> {
    let params = req.path_parameters();
    let raw = params.first(name).ok_or_else(|| {
        ApiError::bad_request(ErrorCode::BadId, format!("missing path parameter {name}"))
    })?;
    Ok(parse(raw)?)
}

/// A query-string parameter the request must have: a 400 with `code`
/// without it.
pub fn required_query(
    req: &Request,
    name: &'static str,
    code: ErrorCode,
) -> Result<String, ApiError> {
    req.query_string_parameters()
        .first(name)
        .map(str::to_owned)
        .ok_or_else(|| ApiError::bad_request(code, format!("give ?{name}=<value>")))
}

/// The request's `Idempotency-Key`, if it has one (400 when it is not 1–64
/// characters of `A-Za-z0-9._:-`), with the digest of what it asks: its
/// method and path, and its body.
pub fn idempotency(req: &Request) -> Result<Option<Idempotency>, ApiError> {
    let Some(raw) = req.headers().get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let raw = raw.to_str().map_err(|_| IdError::BadIdempotencyKey)?;
    let key = IdempotencyKey::parse(raw)?;
    let route = format!("{} {}", req.method(), req.uri().path());
    Ok(Some(Idempotency::new(key, &route, body_bytes(req)?)))
}

/// `limit` (1–100, default 20) and the opaque `cursor` of a list request.
pub fn page(req: &Request) -> Result<(usize, Option<String>), ApiError> {
    page_within(req, MAX_LIMIT, DEFAULT_LIMIT)
}

/// [`page`] with a list's own bounds: `limit` from 1 to `max`, `default`
/// when absent (a list whose page reads more than its entries: the home,
/// the drafts' whole posts).
pub fn page_within(
    req: &Request,
    max: usize,
    default: usize,
) -> Result<(usize, Option<String>), ApiError> {
    let query = req.query_string_parameters();
    let limit = match query.first("limit") {
        None => default,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(
                    ErrorCode::BadLimit,
                    format!("limit must be an integer from 1 to {max}"),
                )
            })?,
    };
    let cursor = query.first("cursor").map(str::to_owned);
    if cursor.as_deref() == Some("") {
        return Err(ApiError::bad_request(
            ErrorCode::BadCursor,
            "cursor is malformed",
        ));
    }
    Ok((limit, cursor))
}

/// The JSON body as `T`. Types that deny unknown fields make those a 400 too.
pub fn json_body<T: DeserializeOwned>(req: &Request) -> Result<T, ApiError> {
    let bytes = body_bytes(req)?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request(
            ErrorCode::BadJson,
            "a JSON body is required",
        ));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(ErrorCode::BadJson, format!("invalid JSON body: {e}")))
}

/// For requests that take no body: nothing, or an empty JSON object.
pub fn no_body(req: &Request) -> Result<(), ApiError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Empty {}

    if body_bytes(req)?.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    json_body::<Empty>(req).map(|_| ())
}

fn body_bytes(req: &Request) -> Result<&[u8], ApiError> {
    let bytes: &[u8] = match req.body() {
        Body::Empty => &[],
        Body::Text(text) => text.as_bytes(),
        Body::Binary(bytes) => bytes,
        _ => &[],
    };
    if bytes.len() > MAX_BODY_BYTES {
        return Err(ApiError::PayloadTooLarge {
            limit: MAX_BODY_BYTES,
        });
    }
    Ok(bytes)
}
