//! The HTTP API's CORS handling, from template.yaml's `CorsConfiguration`,
//! as API Gateway applies it: a preflight (`OPTIONS` with `Origin` and
//! `Access-Control-Request-Method`) is answered 204 and never reaches a
//! function, with the allow headers only when the origin, the method and
//! every requested header are allowed; any other answer gets
//! `Access-Control-Allow-Origin` for an allowed origin and loses whatever
//! CORS header the function set.

use hyper::header::{self, HeaderName};
use serde_yaml_ng::Value;

/// The HTTP API's `CorsConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cors {
    /// Lower-cased origins, or `*`.
    pub allow_origins: Vec<String>,
    /// Upper-cased methods.
    pub allow_methods: Vec<String>,
    /// Lower-cased header names.
    pub allow_headers: Vec<String>,
    /// Lower-cased names of response headers a browser may read.
    pub expose_headers: Vec<String>,
    pub max_age: u64,
}

impl Cors {
    /// The `CorsConfiguration` of the HTTP API's `props`, its `AllowOrigins`
    /// being `origins` (the `AllowedOrigins` parameter, comma-separated;
    /// `*` when none).
    pub fn from_api(props: &Value, origins: Option<&str>) -> Result<Self, String> {
        let cors = &props["CorsConfiguration"];
        if cors.is_null() {
            return Err("the HTTP API has no CorsConfiguration".into());
        }
        let list = |v: &Value| -> Vec<String> {
            v.as_sequence()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        let origins = origins.unwrap_or("*");
        Ok(Self {
            allow_origins: origins
                .split(',')
                .map(|o| o.trim().to_ascii_lowercase())
                .filter(|o| !o.is_empty())
                .collect(),
            allow_methods: list(&cors["AllowMethods"])
                .into_iter()
                .map(|m| m.to_ascii_uppercase())
                .collect(),
            allow_headers: list(&cors["AllowHeaders"])
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            expose_headers: list(&cors["ExposeHeaders"])
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            max_age: cors["MaxAge"].as_u64().unwrap_or(0),
        })
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`,
    /// if it is allowed.
    pub fn allow_origin(&self, origin: &str) -> Option<String> {
        if self.allow_origins.iter().any(|o| o == "*") {
            return Some("*".to_owned());
        }
        let origin = origin.to_ascii_lowercase();
        self.allow_origins.contains(&origin).then_some(origin)
    }

    /// The headers of the answer to a preflight: empty when refused.
    pub fn preflight(
        &self,
        origin: &str,
        method: &str,
        headers: &str,
    ) -> Vec<(HeaderName, String)> {
        let Some(allowed_origin) = self.allow_origin(origin) else {
            return Vec::new();
        };
        if !self.allow_methods.iter().any(|m| m == method) {
            return Vec::new();
        }
        let headers_allowed = headers
            .split(',')
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .all(|h| self.allow_headers.contains(&h));
        if !headers_allowed {
            return Vec::new();
        }
        vec![
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed_origin),
            (
                header::ACCESS_CONTROL_ALLOW_METHODS,
                self.allow_methods.join(","),
            ),
            (
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                self.allow_headers.join(","),
            ),
            (header::ACCESS_CONTROL_MAX_AGE, self.max_age.to_string()),
        ]
    }
}
