//! C1 create / edit a user, Q1 get a user.

use blog::keys::{self, PK, SK, USERNAME_SK};
use blog::text::Username;
use serde_json::json;

use crate::support::{TestApi, table_snapshot};

#[tokio::test]
async fn a_created_user_can_be_read_back() {
    let api = TestApi::start().await;
    let (status, created) = api.sign_up("u-1", "Alice_1").await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["userId"], "u-1");
    assert_eq!(created["username"], "Alice_1");
    assert_eq!(created["createdAt"], created["updatedAt"]);
    assert!(
        created["createdAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );

    let (status, got) = api.get("/users/u-1").await;
    assert_eq!(status, 200);
    assert_eq!(got, created);
}

#[tokio::test]
async fn a_second_profile_for_the_same_caller_is_a_conflict() {
    let api = TestApi::start().await;
    let id = api.user("first").await;
    let before = table_snapshot(&api).await;
    let (status, body) = api.sign_up(&id, "second").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("profile_exists"))
    );
    assert_eq!(
        table_snapshot(&api).await,
        before,
        "a refused create writes nothing"
    );
}

#[tokio::test]
async fn usernames_are_unique_ignoring_case() {
    let api = TestApi::start().await;
    api.user("Bob").await;
    let before = table_snapshot(&api).await;
    let (status, body) = api.sign_up("other", "bOB").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("username_taken"))
    );
    assert_eq!(table_snapshot(&api).await, before);
    assert_eq!(api.get("/users/other").await.0, 404);
}

#[tokio::test]
async fn renaming_frees_the_old_name() {
    let api = TestApi::start().await;
    let carol = api.user("carol").await;
    let renamed = api.rename(&carol, "caroline").await;
    assert_eq!(renamed["username"], "caroline");
    assert_ne!(renamed["updatedAt"], renamed["createdAt"]);
    assert_eq!(api.get_user(&carol).await.1["username"], "caroline");

    // The old name is free for someone else; the new one is not.
    let (status, _) = api.sign_up("dave", "CAROL").await;
    assert_eq!(status, 201);
    let (status, _) = api.sign_up("erin", "Caroline").await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn a_change_of_case_keeps_the_name_claimed() {
    let api = TestApi::start().await;
    let frank = api.user("frank").await;
    let body = api.rename(&frank, "Frank").await;
    assert_eq!(body["username"], "Frank");
    let (status, _) = api.sign_up("other", "frank").await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn renaming_to_a_taken_name_changes_nothing() {
    let api = TestApi::start().await;
    api.user("gina").await;
    let hank = api.user("hank").await;
    let before = table_snapshot(&api).await;
    let (status, body) = api.change_username(&hank, &hank, "GINA").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("username_taken"))
    );
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn only_the_user_may_rename_themselves() {
    let api = TestApi::start().await;
    let ivy = api.user("ivy").await;
    let jack = api.user("jack").await;
    let (status, body) = api.change_username(&jack, &ivy, "hacked").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    assert_eq!(api.get_user(&ivy).await.1["username"], "ivy");

    let (status, _) = api.change_username("nobody", "nobody", "ghost").await;
    assert_eq!(status, 404, "renaming a profile that does not exist");
}

#[tokio::test]
async fn unknown_and_malformed_user_ids() {
    let api = TestApi::start().await;
    assert_eq!(api.get("/users/no-such-user").await.0, 404);
    let (status, body) = api.get("/users/USER%23x").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_id"))
    );
}

#[tokio::test]
async fn usernames_outside_the_rules_are_refused() {
    let api = TestApi::start().await;
    for bad in [
        json!("ab"),
        json!("a".repeat(31)),
        json!("has space"),
        json!("dash-ed"),
        json!(42),
        json!(null),
    ] {
        let (status, body) = api.sign_up("u", bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    for ok in ["abc", &"z".repeat(30)] {
        let id = format!("ok-{ok}");
        let (status, _) = api.sign_up(&id, ok).await;
        assert_eq!(status, 201, "{ok}");
    }
}

#[tokio::test]
async fn a_user_is_found_by_name_ignoring_case_and_across_renames() {
    let api = TestApi::start().await;
    let (status, created) = api.sign_up("u-find", "Alice_Find").await;
    assert_eq!(status, 201, "{created}");
    for asked in ["Alice_Find", "alice_find", "ALICE_FIND"] {
        let (status, found) = api.get(&format!("/users?username={asked}")).await;
        assert_eq!(status, 200, "{asked}: {found}");
        assert_eq!(found, created, "{asked}: the profile as created");
    }

    // A rename moves the name: the old one is free, the new one finds her.
    let (status, renamed) = api
        .change_username("u-find", "u-find", "Alice_Renamed")
        .await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(api.get("/users?username=alice_find").await.0, 404);
    let (status, found) = api.get("/users?username=alice_renamed").await;
    assert_eq!((status, &found), (200, &renamed));

    // A change of case keeps the claim; what it shows follows.
    let (status, recased) = api
        .change_username("u-find", "u-find", "ALICE_renamed")
        .await;
    assert_eq!(status, 200, "{recased}");
    assert_eq!(recased["username"], "ALICE_renamed");
    let (status, found) = api.get("/users?username=Alice_Renamed").await;
    assert_eq!((status, &found), (200, &recased));
    assert_eq!(found, api.get("/users/u-find").await.1, "the same as by id");
}

#[tokio::test]
async fn finding_a_user_refuses_what_no_name_can_be_and_changes_nothing() {
    let api = TestApi::start().await;
    api.user("someone").await;
    let before = table_snapshot(&api).await;
    let (status, body) = api.get("/users?username=nobody_here").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    for (query, code) in [
        ("", "missing_username"),
        ("?user=someone", "missing_username"),
        ("?username=", "invalid_field"),
        ("?username=has%20space", "invalid_field"),
        ("?username=USERNAME%23someone", "invalid_field"),
        (&format!("?username={}", "a".repeat(31)), "invalid_field"),
    ] {
        let (status, body) = api.get(&format!("/users{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
    }
    assert_eq!(table_snapshot(&api).await, before);
}

#[tokio::test]
async fn a_claim_written_before_it_copied_the_profile_still_finds_it() {
    let api = TestApi::start().await;
    let (status, created) = api.sign_up("u-old", "Old_Timer").await;
    assert_eq!(status, 201, "{created}");
    // The claim as earlier versions wrote it: the user id and the name only.
    let store = &api.app.store;
    store
        .client()
        .update_item()
        .table_name(store.table())
        .key(
            PK,
            aws_sdk_dynamodb::types::AttributeValue::S(keys::username_pk(
                &Username::parse("Old_Timer").expect("name"),
            )),
        )
        .key(
            SK,
            aws_sdk_dynamodb::types::AttributeValue::S(USERNAME_SK.into()),
        )
        .update_expression("REMOVE createdAt, updatedAt, version")
        .send()
        .await
        .expect("strip the copy");
    let (status, found) = api.get("/users?username=old_timer").await;
    assert_eq!(
        (status, &found),
        (200, &created),
        "read through to the profile"
    );
}
