//! What the deployed HTTP API is, read from template.yaml: its routes (each
//! function's `HttpApi` event, the function named by its build's `Binary`),
//! which of them the JWT authorizer guards, the authorizer's issuer and
//! audience, the CORS configuration and the route throttles, with the
//! template's parameter defaults (or the values a deployment would pass).

use std::collections::HashMap;

use serde_yaml_ng::Value;

use super::cors::Cors;

/// One route of the HTTP API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteConfig {
    pub method: String,
    /// As the template writes it: `/posts/{postId}`.
    pub path: String,
    /// The function's binary, which `cargo lambda watch` serves under that
    /// name.
    pub function: String,
    /// Whether the JWT authorizer guards it.
    pub authorized: bool,
}

impl RouteConfig {
    /// `GET /posts/{postId}`: API Gateway's route key.
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// A route's throttle: a token bucket of `burst` tokens refilled at `rate`
/// a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttle {
    pub rate: f64,
    pub burst: f64,
}

/// The HTTP API as the template deploys it.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    pub routes: Vec<RouteConfig>,
    pub cors: Cors,
    /// The authorizer's `issuer` with `${AWS::Region}` and `${UserPool}`
    /// still to fill in, and whether its audience is the template's app
    /// client (`!Ref UserPoolClient`).
    pub issuer_template: String,
    pub default_throttle: Throttle,
    pub route_throttles: HashMap<String, Throttle>,
}

impl ApiConfig {
    /// The template's HTTP API, with `parameters` in place of the
    /// parameters' defaults where given (e.g. `AllowedOrigins`).
    pub fn from_template(text: &str, parameters: &HashMap<String, String>) -> Result<Self, String> {
        let template: Value =
            serde_yaml_ng::from_str(text).map_err(|e| format!("template.yaml: {e}"))?;
        let param = |name: &str| -> Option<String> {
            parameters.get(name).cloned().or_else(|| {
                let default = &template["Parameters"][name]["Default"];
                default
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| default.as_f64().map(|n| n.to_string()))
            })
        };
        let resources = template["Resources"]
            .as_mapping()
            .ok_or("template.yaml has no Resources")?;
        let api = resources
            .values()
            .find(|r| r["Type"].as_str() == Some("AWS::Serverless::HttpApi"))
            .ok_or("template.yaml has no HTTP API")?;
        let props = &api["Properties"];
        let cors = Cors::from_api(props, param("AllowedOrigins").as_deref())?;
        let routes = routes(resources)?;
        let issuer_template = issuer(props)?;
        let throttle = |settings: &Value| -> Result<Throttle, String> {
            let number = |v: &Value| -> Result<f64, String> {
                let text = match v {
                    Value::Tagged(t) if t.tag == "Ref" => {
                        let name = t.value.as_str().unwrap_or_default();
                        param(name).ok_or(format!("no parameter {name}"))?
                    }
                    Value::Number(n) => n.to_string(),
                    _ => return Err(format!("a throttle setting the gateway cannot read: {v:?}")),
                };
                text.parse().map_err(|_| format!("not a number: {text}"))
            };
            Ok(Throttle {
                rate: number(&settings["ThrottlingRateLimit"])?,
                burst: number(&settings["ThrottlingBurstLimit"])?,
            })
        };
        let default_throttle = throttle(&props["DefaultRouteSettings"])?;
        let mut route_throttles = HashMap::new();
        if let Some(settings) = props["RouteSettings"].as_mapping() {
            for (key, value) in settings {
                let key = key.as_str().ok_or("a RouteSettings key is not text")?;
                route_throttles.insert(key.to_owned(), throttle(value)?);
            }
        }
        Ok(Self {
            routes,
            cors,
            issuer_template,
            default_throttle,
            route_throttles,
        })
    }

    /// The authorizer's issuer for a user pool `pool` in `region`.
    pub fn issuer(&self, region: &str, pool: &str) -> String {
        self.issuer_template
            .replace("${AWS::Region}", region)
            .replace("${UserPool}", pool)
    }

    /// The throttle of the route with key `key`.
    pub fn throttle(&self, key: &str) -> Throttle {
        self.route_throttles
            .get(key)
            .copied()
            .unwrap_or(self.default_throttle)
    }
}

/// Every function's `HttpApi` events.
fn routes(resources: &serde_yaml_ng::Mapping) -> Result<Vec<RouteConfig>, String> {
    let mut routes = Vec::new();
    for resource in resources.values() {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let Some(events) = resource["Properties"]["Events"].as_mapping() else {
            continue;
        };
        for event in events.values() {
            if event["Type"].as_str() != Some("HttpApi") {
                continue;
            }
            let function = resource["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .ok_or("a function with an HttpApi event names no Binary")?;
            let props = &event["Properties"];
            routes.push(RouteConfig {
                method: props["Method"]
                    .as_str()
                    .ok_or("an HttpApi event without Method")?
                    .to_ascii_uppercase(),
                path: props["Path"]
                    .as_str()
                    .ok_or("an HttpApi event without Path")?
                    .to_owned(),
                function: function.to_owned(),
                authorized: props["Auth"]["Authorizer"]
                    .as_str()
                    .is_some_and(|a| a != "NONE"),
            });
        }
    }
    Ok(routes)
}

/// The issuer the template gives its authorizer when it creates the user
/// pool: the `!Sub` of `!If [CreateUserPool, !Sub "…", !Ref JwtIssuer]`.
fn issuer(props: &Value) -> Result<String, String> {
    let authorizers = props["Auth"]["Authorizers"]
        .as_mapping()
        .ok_or("the HTTP API has no authorizers")?;
    let jwt = authorizers
        .values()
        .find(|a| !a["JwtConfiguration"].is_null())
        .ok_or("the HTTP API has no JWT authorizer")?;
    let issuer = &jwt["JwtConfiguration"]["issuer"];
    let choice = match issuer {
        Value::Tagged(t) if t.tag == "If" => t.value.as_sequence().and_then(|s| s.get(1)),
        other => Some(other),
    };
    match choice {
        Some(Value::Tagged(t)) if t.tag == "Sub" => t
            .value
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| "the issuer's !Sub is not text".to_owned()),
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(format!("an issuer the gateway cannot read: {issuer:?}")),
    }
}
