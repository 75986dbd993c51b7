//! Who is calling: the JWT authorizer's `sub` claim, and nothing a client can
//! put in a header.

use serde_json::json;

use crate::support::{JWT_SUB, TestApi};

#[tokio::test]
async fn the_jwt_sub_claim_identifies_the_caller() {
    let api = TestApi::start().await;
    let resp = api
        .http
        .post(api.url("/users"))
        .header(JWT_SUB, "cognito-sub-1")
        .body(json!({ "username": "jwt_user" }).to_string())
        .send()
        .await
        .expect("send");
    let (status, body) = crate::support::decode(resp).await;
    assert_eq!(
        (status, body["userId"].as_str()),
        (201, Some("cognito-sub-1"))
    );
}

/// Headers that proxies or older versions of APIs use to name a user are
/// never an identity: without the authorizer's claim the request is 401 and
/// writes nothing.
#[tokio::test]
async fn an_identity_header_without_a_claim_is_401() {
    let api = TestApi::start().await;
    for header in ["remote-user", "x-forwarded-user", "x-amzn-oidc-identity"] {
        let resp = api
            .http
            .post(api.url("/users"))
            .header(header, "header-user")
            .body(json!({ "username": "sneaky" }).to_string())
            .send()
            .await
            .expect("send");
        let (status, body) = crate::support::decode(resp).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (401, Some("unauthorized")),
            "{header}"
        );
    }
    assert_eq!(api.get("/users/header-user").await.0, 404);
}

#[tokio::test]
async fn the_jwt_claim_wins_over_an_identity_header() {
    let api = TestApi::start().await;
    let resp = api
        .http
        .post(api.url("/users"))
        .header(JWT_SUB, "real-sub")
        .header("x-forwarded-user", "spoofed")
        .body(json!({ "username": "realname" }).to_string())
        .send()
        .await
        .expect("send");
    let (status, body) = crate::support::decode(resp).await;
    assert_eq!((status, body["userId"].as_str()), (201, Some("real-sub")));
    assert_eq!(api.get("/users/spoofed").await.0, 404);
}

#[tokio::test]
async fn a_malformed_identity_is_401() {
    let api = TestApi::start().await;
    let (status, _) = api.sign_up("bad#identity", "whoever").await;
    assert_eq!(status, 401);
}
