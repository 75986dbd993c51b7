//! The HTTP API's JWT authorizer, as template.yaml configures it: the token
//! from `Authorization: Bearer <JWT>`, its RS256 signature checked against
//! the issuer's JWKS (fetched, cached, fetched again for a key id it does not
//! know), `iss`, `exp`, `nbf` and `iat`, and the audience: `aud` when the
//! token has one (an ID token), `client_id` otherwise (an access token).
//! Whatever fails is one answer, 401 `{"message":"Unauthorized"}`; the
//! function is never invoked. The cryptography is `jsonwebtoken`'s.

use std::{
    sync::Mutex,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use jsonwebtoken::{Algorithm, DecodingKey, Validation, jwk::JwkSet};
use serde_json::{Map, Value};

/// A JWKS is fetched again for an unknown key id at most this often.
const REFETCH_AFTER: Duration = Duration::from_secs(30);

/// Why a token was refused (logged; the client sees only 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no Authorization header")]
    NoHeader,
    #[error("the Authorization header is neither `<token>` nor `Bearer <token>`")]
    NoToken,
    #[error("the token cannot be read: {0}")]
    Malformed(String),
    #[error("the token is not signed with RS256")]
    Algorithm,
    #[error("no key {0:?} in the issuer's JWKS")]
    UnknownKey(Option<String>),
    #[error("the issuer's JWKS cannot be read: {0}")]
    Jwks(String),
    #[error("the token does not verify: {0}")]
    Invalid(String),
    #[error("the token's audience or client is not the configured one")]
    Audience,
    #[error("the token was issued in the future")]
    IssuedLater,
}

/// The authorizer's `JwtConfiguration`, and where its keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    pub issuer: String,
    pub audience: Vec<String>,
    /// Where the issuer's keys are published (deployed:
    /// `<issuer>/.well-known/jwks.json`; locally the identity provider's own
    /// address, since its tokens name the AWS issuer).
    pub jwks_url: String,
}

/// A verified token: its claims as API Gateway hands them to the function.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub claims: Map<String, Value>,
}

/// The authorizer: its configuration and the keys it fetched.
pub struct Authorizer {
    config: JwtConfig,
    http: reqwest::Client,
    keys: Mutex<Option<(Instant, JwkSet)>>,
}

impl Authorizer {
    pub fn new(config: JwtConfig, http: reqwest::Client) -> Self {
        Self {
            config,
            http,
            keys: Mutex::new(None),
        }
    }

    /// Keys given rather than fetched (tests).
    pub fn with_keys(config: JwtConfig, keys: JwkSet) -> Self {
        Self {
            config,
            http: reqwest::Client::new(),
            keys: Mutex::new(Some((Instant::now(), keys))),
        }
    }

    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// Checks the request's `Authorization` header value.
    pub async fn verify(&self, authorization: Option<&str>) -> Result<Verified, Refusal> {
        let header = authorization.ok_or(Refusal::NoHeader)?;
        let token = token_of(header).ok_or(Refusal::NoToken)?;
        let head =
            jsonwebtoken::decode_header(token).map_err(|e| Refusal::Malformed(e.to_string()))?;
        if head.alg != Algorithm::RS256 {
            return Err(Refusal::Algorithm);
        }
        let jwk = self.key(head.kid.as_deref()).await?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| Refusal::Jwks(e.to_string()))?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_required_spec_claims(&["exp", "iss"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.leeway = 0;
        // `aud` or `client_id`: checked below, as API Gateway does.
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| Refusal::Invalid(e.to_string()))?;
        let claims = data.claims;
        if !self.audience_matches(&claims) {
            return Err(Refusal::Audience);
        }
        if claims
            .get("iat")
            .and_then(Value::as_u64)
            .is_some_and(|iat| iat > now_secs())
        {
            return Err(Refusal::IssuedLater);
        }
        Ok(Verified { claims })
    }

    /// `aud` (a string or a list) when present, else `client_id`.
    fn audience_matches(&self, claims: &Map<String, Value>) -> bool {
        let allowed = |v: &str| self.config.audience.iter().any(|a| a == v);
        match claims.get("aud") {
            Some(Value::String(aud)) => allowed(aud),
            Some(Value::Array(auds)) => auds.iter().filter_map(Value::as_str).any(allowed),
            Some(_) => false,
            None => claims
                .get("client_id")
                .and_then(Value::as_str)
                .is_some_and(allowed),
        }
    }

    /// The key `kid` names: from the cached JWKS, or from a new fetch when
    /// the cache has none by that id and was not fetched just now.
    async fn key(&self, kid: Option<&str>) -> Result<jsonwebtoken::jwk::Jwk, Refusal> {
        let unknown = || Refusal::UnknownKey(kid.map(str::to_owned));
        let kid = kid.ok_or_else(unknown)?;
        let cached = {
            let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(jwk) = keys.as_ref().and_then(|(_, set)| set.find(kid)) {
                return Ok(jwk.clone());
            }
            keys.as_ref().map(|(fetched, _)| *fetched)
        };
        if cached.is_some_and(|at| at.elapsed() < REFETCH_AFTER) {
            return Err(unknown());
        }
        let set = self.fetch().await?;
        let found = set.find(kid).cloned();
        *self.keys.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), set));
        found.ok_or_else(unknown)
    }

    async fn fetch(&self) -> Result<JwkSet, Refusal> {
        let answer = self
            .http
            .get(&self.config.jwks_url)
            .send()
            .await
            .map_err(|e| Refusal::Jwks(e.to_string()))?;
        let bytes = answer
            .error_for_status()
            .map_err(|e| Refusal::Jwks(e.to_string()))?
            .bytes()
            .await
            .map_err(|e| Refusal::Jwks(e.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|e| Refusal::Jwks(e.to_string()))
    }
}

/// The token of the header: the header itself or what follows `Bearer `
/// (the scheme in any case), as the HTTP API's JWT authorizer takes it ("The
/// identitySource can include only the token, or the token prefixed with
/// Bearer"). Anything else (`Basic …`, two words, nothing) has no token; API
/// Gateway would fail to decode it, so it is refused all the same.
fn token_of(header: &str) -> Option<&str> {
    let header = header.trim();
    let token = match header.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        Some(_) => return None,
        None => header,
    };
    (!token.is_empty() && !token.contains(' ')).then_some(token)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The claims as the event carries them: every value a string (numbers as
/// their digits, lists as `[a b]`), as API Gateway passes them.
pub fn event_claims(claims: &Map<String, Value>) -> Map<String, Value> {
    claims
        .iter()
        .map(|(name, value)| {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Array(items) => format!(
                    "[{}]",
                    items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                other => other.to_string(),
            };
            (name.clone(), Value::String(text))
        })
        .collect()
}
