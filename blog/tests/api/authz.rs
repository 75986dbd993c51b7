//! The authorization matrix, as deployed: identity comes only from the JWT
//! authorizer's verified `sub`, never from a header. Every
//! write route is tried with no identity, as another user and as the owner;
//! a rejected request leaves the table as it was.

use serde_json::{Value, json};

use crate::support::{JWT_SUB, TestApi, table_snapshot};

/// Who calls and the status they get: no identity, another user, the owner.
type Callers<'a> = [(Option<&'a str>, u16); 3];

/// A write as `who` (`None`: no token).
async fn write(
    api: &TestApi,
    method: &str,
    path: &str,
    who: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let headers: Vec<(&str, &str)> = who.map(|sub| (JWT_SUB, sub)).into_iter().collect();
    api.call_with(method, path, &headers, body).await
}

#[tokio::test]
async fn every_write_route_admits_only_its_owner() {
    let api = TestApi::start().await;
    // owner: has a profile and owns the post; other: has a profile; stranger: has none.
    let (owner, other, stranger) = ("owner-sub", "other-sub", "stranger-sub");
    for (sub, name) in [(owner, "owner"), (other, "other")] {
        assert_eq!(
            write(
                &api,
                "POST",
                "/users",
                Some(sub),
                Some(json!({ "username": name }))
            )
            .await
            .0,
            201
        );
    }
    let (status, post) = write(
        &api,
        "POST",
        "/posts",
        Some(owner),
        Some(json!({ "title": "t", "content": "c" })),
    )
    .await;
    assert_eq!(status, 201, "{post}");
    let post = post["postId"].as_str().unwrap_or_default().to_owned();

    let (status, said) = write(
        &api,
        "POST",
        &format!("/posts/{post}/comments"),
        Some(other),
        Some(json!({ "content": "mine" })),
    )
    .await;
    assert_eq!(status, 201, "{said}");
    let said = said["commentId"].as_str().unwrap_or_default().to_owned();
    let rename = json!({ "username": "taken_over" });
    let edit = json!({ "title": "defaced" });
    let new_post = json!({ "title": "t", "content": "c" });
    let comment = json!({ "content": "c" });
    // (route, body, [no identity, another user, the owner])
    let matrix: Vec<(&str, String, Option<Value>, Callers)> = vec![
        (
            "PUT",
            format!("/users/{owner}"),
            Some(rename.clone()),
            [(None, 401), (Some(other), 403), (Some(owner), 200)],
        ),
        (
            "PUT",
            format!("/posts/{post}"),
            Some(edit.clone()),
            [(None, 401), (Some(other), 403), (Some(owner), 200)],
        ),
        (
            "POST",
            "/posts".into(),
            Some(new_post.clone()),
            [(None, 401), (Some(stranger), 403), (Some(owner), 201)],
        ),
        (
            "POST",
            format!("/posts/{post}/comments"),
            Some(comment.clone()),
            [(None, 401), (Some(stranger), 403), (Some(other), 201)],
        ),
        (
            "POST",
            format!("/posts/{post}/likes"),
            None,
            [(None, 401), (Some(stranger), 403), (Some(other), 201)],
        ),
        (
            "POST",
            "/users".into(),
            Some(json!({ "username": "second" })),
            [(None, 401), (Some(other), 409), (Some(stranger), 201)],
        ),
        // Taking back only ever touches the caller's own like: another
        // caller's is a no-op (204), checked unchanged in likes.rs.
        (
            "DELETE",
            format!("/posts/{post}/likes"),
            None,
            [(None, 401), (Some(owner), 204), (Some(other), 204)],
        ),
        // The comment's author or the post's author; the stranger (now with a
        // profile) is neither.
        (
            "DELETE",
            format!("/posts/{post}/comments/{said}"),
            None,
            [(None, 401), (Some(stranger), 403), (Some(owner), 204)],
        ),
        (
            "DELETE",
            format!("/posts/{post}"),
            None,
            [(None, 401), (Some(other), 403), (Some(owner), 204)],
        ),
        // A block is the caller's own: the stranger (now with a profile)
        // blocks someone of theirs, never on the owner's behalf.
        (
            "PUT",
            format!("/blocks/{other}"),
            None,
            [(None, 401), (Some(other), 400), (Some(owner), 201)],
        ),
        (
            "DELETE",
            format!("/blocks/{other}"),
            None,
            [(None, 401), (Some(other), 204), (Some(owner), 204)],
        ),
        // Last: an account goes; only its owner may erase it.
        (
            "DELETE",
            format!("/users/{other}"),
            None,
            [(None, 401), (Some(owner), 403), (Some(other), 204)],
        ),
    ];
    for (method, path, body, cases) in matrix {
        for (who, expected) in cases {
            let before = table_snapshot(&api).await;
            let (status, reply) = write(&api, method, &path, who, body.clone()).await;
            assert_eq!(status, expected, "{method} {path} as {who:?}: {reply}");
            if status >= 400 {
                assert!(reply["error"]["code"].is_string(), "{reply}");
                assert_eq!(
                    table_snapshot(&api).await,
                    before,
                    "{method} {path} as {who:?} changed the table"
                );
            }
        }
    }
}

#[tokio::test]
async fn identity_never_comes_from_the_body_the_path_or_a_header() {
    let api = TestApi::start().await;
    let (status, body) = write(
        &api,
        "POST",
        "/users",
        Some("victim-sub"),
        Some(json!({ "username": "victim" })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let before = table_snapshot(&api).await;
    let attempts = [
        // The body names someone else.
        (
            "POST",
            "/posts".to_owned(),
            json!({ "title": "t", "content": "c", "userId": "victim-sub" }),
        ),
        (
            "POST",
            "/users".to_owned(),
            json!({ "username": "imposter", "userId": "victim-sub" }),
        ),
        // The path names someone else; no token at all.
        (
            "PUT",
            "/users/victim-sub".to_owned(),
            json!({ "username": "imposter" }),
        ),
    ];
    for (method, path, body) in attempts {
        for headers in [
            vec![],
            vec![("x-forwarded-user", "victim-sub")],
            vec![("authorization", "Bearer victim-sub")],
        ] {
            let (status, _) = api
                .call_with(method, &path, &headers, Some(body.clone()))
                .await;
            assert!(
                status == 400 || status == 401,
                "{method} {path} {headers:?}: {status}"
            );
        }
    }
    assert_eq!(table_snapshot(&api).await, before);
}
