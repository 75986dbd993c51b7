//! The HTTP contract: every route, the function that serves it, and whether it
//! needs an identity. The HTTP API (template.yaml, which the local API Gateway
//! also reads) and openapi.yaml must list exactly these; tests hold them to it.

#[cfg(feature = "admin")]
use {
    crate::api::{self, ApiResult, App},
    lambda_http::Request,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    /// API Gateway's path template, with `{param}`s.
    pub path: &'static str,
    /// The Lambda function (and binary) that serves the route.
    pub function: &'static str,
    /// Write routes sit behind the JWT authorizer.
    pub needs_identity: bool,
}

const fn route(
    method: &'static str,
    path: &'static str,
    function: &'static str,
    needs_identity: bool,
) -> Route {
    Route {
        method,
        path,
        function,
        needs_identity,
    }
}

pub const ROUTES: [Route; 33] = [
    route("POST", "/users", "create-user", true),
    route("GET", "/users", "find-user", false),
    route("PUT", "/users/{userId}", "update-user", true),
    route("GET", "/users/{userId}", "get-user", false),
    route("DELETE", "/users/{userId}", "delete-user", true),
    route("GET", "/users/{userId}/export", "export-user", true),
    route("POST", "/posts", "create-post", true),
    route("PUT", "/posts/{postId}", "update-post", true),
    route("GET", "/posts/{postId}", "get-post", false),
    route("DELETE", "/posts/{postId}", "delete-post", true),
    route("GET", "/users/{userId}/posts", "list-user-posts", false),
    route("GET", "/users/{userId}/drafts", "list-drafts", true),
    route("POST", "/posts/{postId}/comments", "create-comment", true),
    route("GET", "/posts/{postId}/comments", "list-comments", false),
    route(
        "DELETE",
        "/posts/{postId}/comments/{commentId}",
        "delete-comment",
        true,
    ),
    route("POST", "/posts/{postId}/likes", "like-post", true),
    route("DELETE", "/posts/{postId}/likes", "unlike-post", true),
    route("GET", "/posts/{postId}/likes", "list-likes", false),
    route("GET", "/feed", "get-feed", false),
    route("GET", "/feed.atom", "get-feed-atom", false),
    route(
        "GET",
        "/users/{userId}/posts.atom",
        "list-user-posts-atom",
        false,
    ),
    route("GET", "/tags/{tag}/posts", "list-tag-posts", false),
    route("POST", "/users/{userId}/followers", "follow-user", true),
    route("DELETE", "/users/{userId}/followers", "unfollow-user", true),
    route("GET", "/users/{userId}/followers", "list-followers", false),
    route("GET", "/users/{userId}/following", "list-following", false),
    route("GET", "/home", "get-home", true),
    route("GET", "/notifications", "list-notifications", true),
    route(
        "POST",
        "/notifications/seen",
        "mark-notifications-seen",
        true,
    ),
    route(
        "GET",
        "/tags/{tag}/posts.atom",
        "list-tag-posts-atom",
        false,
    ),
    route("PUT", "/blocks/{userId}", "block-user", true),
    route("DELETE", "/blocks/{userId}", "unblock-user", true),
    route("GET", "/blocks", "list-blocks", true),
];

/// Functions that serve no route and read the table's stream: the fan-out,
/// and `park-failures`, which reads back the records the fan-out gave up on
/// (`crate::recovery`).
pub const STREAM_FUNCTIONS: [&str; 2] = ["fan-out", "park-failures"];

/// Functions an EventBridge schedule runs (template.yaml's `Schedule`
/// events; locally `blog-admin scheduler`): the scheduled publisher.
pub const SCHEDULED_FUNCTIONS: [&str; 1] = ["publish-scheduled"];

/// Every function: one per route, then the stream's readers, then the
/// scheduled ones.
pub fn functions() -> impl Iterator<Item = &'static str> {
    ROUTES
        .iter()
        .map(|r| r.function)
        .chain(STREAM_FUNCTIONS)
        .chain(SCHEDULED_FUNCTIONS)
}

#[cfg(feature = "admin")]
/// Runs the handler of `function`, as its Lambda would. For harnesses that
/// serve all routes from one process (tests, benchmarks); each deployed
/// function calls its own handler directly.
pub async fn dispatch(function: &str, app: &App, req: Request) -> Option<ApiResult> {
    let result = match function {
        "create-user" => api::users::create_user(app, req).await,
        "update-user" => api::users::update_user(app, req).await,
        "get-user" => api::users::get_user(app, req).await,
        "export-user" => api::users::export_user(app, req).await,
        "delete-user" => api::users::delete_user(app, req).await,
        "find-user" => api::users::find_user(app, req).await,
        "create-post" => api::posts::create_post(app, req).await,
        "update-post" => api::posts::update_post(app, req).await,
        "get-post" => api::posts::get_post(app, req).await,
        "delete-post" => api::posts::delete_post(app, req).await,
        "list-user-posts" => api::posts::list_user_posts(app, req).await,
        "list-drafts" => api::posts::list_drafts(app, req).await,
        "create-comment" => api::comments::create_comment(app, req).await,
        "list-comments" => api::comments::list_comments(app, req).await,
        "delete-comment" => api::comments::delete_comment(app, req).await,
        "like-post" => api::likes::like_post(app, req).await,
        "list-likes" => api::likes::list_likes(app, req).await,
        "unlike-post" => api::likes::unlike_post(app, req).await,
        "get-feed" => api::feed::get_feed(app, req).await,
        "get-feed-atom" => api::atom::get_feed_atom(app, req).await,
        "list-user-posts-atom" => api::atom::list_user_posts_atom(app, req).await,
        "list-tag-posts" => api::tags::list_tag_posts(app, req).await,
        "list-tag-posts-atom" => api::atom::list_tag_posts_atom(app, req).await,
        "follow-user" => api::follows::follow_user(app, req).await,
        "unfollow-user" => api::follows::unfollow_user(app, req).await,
        "list-followers" => api::follows::list_followers(app, req).await,
        "list-following" => api::follows::list_following(app, req).await,
        "get-home" => api::home::home(app, req).await,
        "list-notifications" => api::notifications::list_notifications(app, req).await,
        "mark-notifications-seen" => api::notifications::mark_notifications_seen(app, req).await,
        "block-user" => api::blocks::block_user(app, req).await,
        "unblock-user" => api::blocks::unblock_user(app, req).await,
        "list-blocks" => api::blocks::list_blocks(app, req).await,
        _ => return None,
    };
    Some(result)
}
