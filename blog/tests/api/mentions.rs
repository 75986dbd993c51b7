//! Mentions: `@username` in a post or a comment, found when it is written
//! and kept on its item as `mentions` (folded name → user id: what the
//! notifications read from the stream's images); Q2's `contentHtml` links
//! each one found to `/users/<userId>`.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use blog::{
    ids::CommentId,
    keys::{self, PK, POST_SK, PostPartition, SK},
    store::size::{item_size, value_size},
    text::{self, TITLE_MAX_BYTES},
};
use serde_json::{Value, json};

use crate::support::{TestApi, post_id, table_snapshot};

/// The item under `key`, as stored, if any.
async fn stored(api: &TestApi, key: keys::Key) -> Option<HashMap<String, AttributeValue>> {
    table_snapshot(api).await.into_iter().find(|item| {
        item.get(PK) == Some(&AttributeValue::S(key.pk.clone()))
            && item.get(SK) == Some(&AttributeValue::S(key.sk.clone()))
    })
}

/// The `mentions` of the post item of `post`, as stored: folded name → id
/// (empty when the attribute is absent).
async fn post_mentions(api: &TestApi, post: &str) -> HashMap<String, String> {
    let key = keys::Key::new(keys::post_pk(&post_id(post)), POST_SK);
    let item = stored(api, key).await.expect("the post item");
    mentions_of(&item)
}

/// An item's `mentions`: a map of strings, or nothing at all.
fn mentions_of(item: &HashMap<String, AttributeValue>) -> HashMap<String, String> {
    match item.get("mentions") {
        None => HashMap::new(),
        Some(AttributeValue::M(map)) => {
            assert!(!map.is_empty(), "an empty map is left out: {item:?}");
            map.iter()
                .map(|(name, id)| match id {
                    AttributeValue::S(id) => (name.clone(), id.clone()),
                    other => panic!("{name} → {other:?}: not a string"),
                })
                .collect()
        }
        Some(other) => panic!("mentions is no map: {other:?}"),
    }
}

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(name, id)| ((*name).to_owned(), (*id).to_owned()))
        .collect()
}

/// The link a mention of `user` written as `written` renders as.
fn link(user: &str, written: &str) -> String {
    format!(
        "<a href=\"/users/{user}\" class=\"mention\" rel=\"nofollow ugc noopener\">{written}</a>"
    )
}

fn html(post: &Value) -> &str {
    post["contentHtml"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_post_links_only_the_users_it_mentions_who_exist() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let ann = api.user("ann").await;
    let content = "Thanks @Ann and @ghost! Not `@ann`, nor ann@example.com, \
                   nor https://example.social/@ann, nor [@ann](https://example.com).";
    let (status, post) = api
        .create_post(&author, json!({ "title": "t", "content": content }))
        .await;
    assert_eq!(status, 201, "{post}");
    assert_eq!(post["content"], content, "the Markdown as written");
    let html = html(&post);
    assert!(html.contains(&link(&ann, "@Ann")), "{html}");
    assert_eq!(html.matches("class=\"mention\"").count(), 1, "{html}");
    assert!(html.contains(" @ghost!"), "no one's name is text: {html}");
    assert!(html.contains("<code>@ann</code>"), "{html}");

    let id = post["postId"].as_str().unwrap_or_default();
    assert_eq!(post_mentions(&api, id).await, map(&[("ann", &ann)]));
    let (status, got) = api.get_post(id).await;
    assert_eq!((status, &got), (200, &post));

    // Without a mention, no attribute.
    let plain = api.post(&author, "plain", "no one @ all").await;
    assert!(post_mentions(&api, &plain).await.is_empty());
}

#[tokio::test]
async fn an_edit_of_the_content_mentions_anew() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let ann = api.user("ann").await;
    let bob = api.user("bob").await;
    let id = api.post(&author, "t", "hello @ann").await;
    assert_eq!(post_mentions(&api, &id).await, map(&[("ann", &ann)]));

    let (status, edited) = api
        .edit_post(&author, &id, json!({ "content": "hello @BOB, bye @ann" }))
        .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(
        post_mentions(&api, &id).await,
        map(&[("ann", &ann), ("bob", &bob)])
    );
    assert!(html(&edited).contains(&link(&bob, "@BOB")), "{edited}");
    assert!(html(&edited).contains(&link(&ann, "@ann")), "{edited}");

    // An edit of the title alone leaves them.
    let (status, _) = api.edit_post(&author, &id, json!({ "title": "t2" })).await;
    assert_eq!(status, 200);
    assert_eq!(
        post_mentions(&api, &id).await,
        map(&[("ann", &ann), ("bob", &bob)])
    );

    // Content that mentions one: the other goes.
    let (status, _) = api
        .edit_post(&author, &id, json!({ "content": "only @bob" }))
        .await;
    assert_eq!(status, 200);
    assert_eq!(post_mentions(&api, &id).await, map(&[("bob", &bob)]));

    // Content that mentions no one: the attribute goes.
    let (status, edited) = api
        .edit_post(&author, &id, json!({ "content": "no one, `@bob`" }))
        .await;
    assert_eq!(status, 200);
    assert!(post_mentions(&api, &id).await.is_empty());
    assert!(!html(&edited).contains("mention"), "{edited}");
    let (_, got) = api.get_post(&id).await;
    assert_eq!(got, edited);
}

#[tokio::test]
async fn a_draft_keeps_its_mentions_through_its_publication() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let ann = api.user("ann").await;
    let body = json!({ "title": "later", "content": "for @ann", "status": "draft" });
    let (status, draft) = api.create_post(&author, body).await;
    assert_eq!(status, 201, "{draft}");
    assert!(html(&draft).contains(&link(&ann, "@ann")), "{draft}");
    let id = draft["postId"].as_str().unwrap_or_default().to_owned();
    assert_eq!(post_mentions(&api, &id).await, map(&[("ann", &ann)]));

    let (status, drafts) = api.drafts(&author, &author).await;
    assert_eq!(status, 200);
    assert_eq!(drafts["items"][0]["contentHtml"], draft["contentHtml"]);

    let (status, published) = api
        .edit_post(&author, &id, json!({ "status": "published" }))
        .await;
    assert_eq!(status, 200, "{published}");
    assert_eq!(published["contentHtml"], draft["contentHtml"]);
    assert_eq!(post_mentions(&api, &id).await, map(&[("ann", &ann)]));
}

#[tokio::test]
async fn a_comment_keeps_its_mentions_and_shows_them_as_text() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let ann = api.user("ann").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "t", "c").await;
    let content = "thanks @Ann, @ghost and @AUTHOR <b>@ann</b>";
    let (status, comment) = api.comment_on(&fan, &post, content).await;
    assert_eq!(status, 201, "{comment}");
    assert_eq!(comment["content"], content, "as written: no HTML");

    let comment_id =
        CommentId::parse(comment["commentId"].as_str().unwrap_or_default()).expect("a comment id");
    let key = keys::comment(PostPartition::own(post_id(&post)), &comment_id);
    let item = stored(&api, key).await.expect("the comment item");
    assert_eq!(
        mentions_of(&item),
        map(&[("ann", &ann), ("author", &author)])
    );
    let (_, page) = api.post_comments(&post).await;
    assert_eq!(page["items"][0]["content"], content);

    let plain = api.comment(&fan, &post, "ann@example.com").await;
    let plain = CommentId::parse(&plain).expect("a comment id");
    let key = keys::comment(PostPartition::own(post_id(&post)), &plain);
    let item = stored(&api, key).await.expect("the comment item");
    assert!(!item.contains_key("mentions"), "{item:?}");
}

#[tokio::test]
async fn a_rename_keeps_the_link_which_goes_by_id() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let ann = api.user("ann").await;
    let id = api.post(&author, "t", "hi @ann").await;

    api.rename(&ann, "anna").await;
    // Someone else takes the name afterwards.
    let other = api.user("ann").await;
    let (_, got) = api.get_post(&id).await;
    assert!(html(&got).contains(&link(&ann, "@ann")), "{got}");
    assert!(!html(&got).contains(&other), "{got}");

    // An edit that still mentions the name keeps whom it was found for;
    // a name new to the post is looked up as it is now.
    let (status, edited) = api
        .edit_post(&author, &id, json!({ "content": "hi @ann and @anna" }))
        .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(
        post_mentions(&api, &id).await,
        map(&[("ann", &ann), ("anna", &ann)])
    );
    assert!(html(&edited).contains(&link(&ann, "@anna")), "{edited}");
}

#[tokio::test]
async fn a_keyed_create_replays_its_mentions() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let ann = api.user("ann").await;
    let body = json!({ "title": "t", "content": "@ann first" });
    let (status, first, replayed) = api.create_post_keyed(&author, "mentions-key", &body).await;
    assert_eq!((status, replayed), (201, false), "{first}");
    assert!(html(&first).contains(&link(&ann, "@ann")), "{first}");
    let (status, again, replayed) = api.create_post_keyed(&author, "mentions-key", &body).await;
    assert_eq!((status, &again, replayed), (201, &first, true));
}

#[tokio::test]
async fn eleven_names_mention_the_first_ten() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let mut users = Vec::new();
    for i in 0..11 {
        users.push(api.user(&format!("user{i:02}")).await);
    }
    let content: String = (0..11).map(|i| format!("@user{i:02} ")).collect();
    let (status, post) = api
        .create_post(&author, json!({ "title": "t", "content": content }))
        .await;
    assert_eq!(status, 201, "{post}");
    let id = post["postId"].as_str().unwrap_or_default();
    let stored = post_mentions(&api, id).await;
    assert_eq!(stored.len(), 10);
    assert_eq!(stored.get("user09"), Some(&users[9]));
    assert!(!stored.contains_key("user10"));
    assert_eq!(html(&post).matches("class=\"mention\"").count(), 10);
    assert!(html(&post).contains(" @user10</p>"), "{post}");
}

/// The post item at every limit (as `posts::a_post_at_every_limit…`) with
/// ten mentions at theirs (30-character names, 128-character ids): the map
/// is 1,601 bytes, and the item stays within one 4 KB read unit.
#[tokio::test]
async fn ten_mentions_at_every_limit_keep_the_post_item_within_4_kb() {
    let api = TestApi::start().await;
    let author = api.user(&"w".repeat(text::USERNAME_LEN.1)).await;
    let mut content = "😀".repeat(text::POST_CONTENT_LEN.1 - 10 * 32);
    for i in 0..10 {
        let name = format!("{i}{}", "m".repeat(text::USERNAME_LEN.1 - 1));
        let id = format!("{i}{}", "u".repeat(blog::ids::UserId::MAX_LEN - 1));
        let (status, body) = api.sign_up(&id, name.as_str()).await;
        assert_eq!(status, 201, "{body}");
        content.push_str(&format!(" @{name}"));
    }
    let title = "😀".repeat(text::TITLE_LEN.1);
    let (status, post) = api
        .create_post(&author, json!({ "title": title, "content": content }))
        .await;
    assert_eq!(status, 201, "{}", post["error"]);
    let id = post["postId"].as_str().unwrap_or_default();
    let key = keys::Key::new(keys::post_pk(&post_id(id)), POST_SK);
    let item = stored(&api, key).await.expect("the post item");
    let mentions = item.get("mentions").expect("mentions");
    assert_eq!("mentions".len() + value_size(mentions), 1_601);
    let size = item_size(&item);
    println!("a post item at every limit with ten mentions at theirs: {size} bytes");
    assert!(size > TITLE_MAX_BYTES + 1_601, "{size}");
    assert!(size <= 4 * 1024, "{size} bytes: more than one read unit");
}
