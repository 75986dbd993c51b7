//! Who is calling: the JWT authorizer's `sub` claim, or locally the X-User-Id
//! stand-in, and only when it is switched on.

use serde_json::json;

use crate::support::{JWT_SUB, TestApi};

#[tokio::test]
async fn the_jwt_sub_claim_identifies_the_caller() {
    let api = TestApi::start_with(false).await;
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

#[tokio::test]
async fn the_local_header_is_ignored_unless_switched_on() {
    let api = TestApi::start_with(false).await;
    let (status, body) = api
        .call(
            "POST",
            "/users",
            Some("header-user"),
            Some(json!({ "username": "sneaky" })),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    assert_eq!(api.get("/users/header-user").await.0, 404);
}

#[tokio::test]
async fn the_jwt_claim_wins_over_the_local_header() {
    let api = TestApi::start().await;
    let resp = api
        .http
        .post(api.url("/users"))
        .header(JWT_SUB, "real-sub")
        .header("x-user-id", "spoofed")
        .body(json!({ "username": "realname" }).to_string())
        .send()
        .await
        .expect("send");
    let (status, body) = crate::support::decode(resp).await;
    assert_eq!((status, body["userId"].as_str()), (201, Some("real-sub")));
}

#[tokio::test]
async fn a_malformed_identity_is_401() {
    let api = TestApi::start().await;
    let (status, _) = api
        .call(
            "POST",
            "/users",
            Some("bad#identity"),
            Some(json!({ "username": "whoever" })),
        )
        .await;
    assert_eq!(status, 401);
}
