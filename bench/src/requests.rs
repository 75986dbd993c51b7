//! The requests, each as V3 answers it (the real handler, given the event API
//! Gateway would send) and, for the seeds' ten, as the naive models answer it.

use std::{collections::HashMap, time::Instant};

use blog::{
    api::{self, App},
    ids::{CommentId, LikeId, PostId, UserId},
    routes::{ROUTES, dispatch},
    text::Username,
    timestamp,
};
use local::local_gateway::{EventSpec, http_api_event};
use serde_json::json;

use crate::naive::{Error, NaiveStore};

/// The seeds' requests, in the seeds' order, then the ones the seeds lack:
/// finding a user by name (Q7) and taking back a like, a comment and a post
/// (D4, D3, D2: each undoes the command of its number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Request {
    C1,
    Q1,
    C2,
    Q2,
    Q3,
    C3,
    Q4,
    C4,
    Q5,
    Q6,
    Q7,
    D4,
    D3,
    D2,
}

impl Request {
    /// In the order they are measured: a post's deletion comes last, as it
    /// takes posts out of the data set.
    pub const ALL: [Request; 14] = [
        Request::C1,
        Request::Q1,
        Request::C2,
        Request::Q2,
        Request::Q3,
        Request::C3,
        Request::Q4,
        Request::C4,
        Request::Q5,
        Request::Q6,
        Request::Q7,
        Request::D4,
        Request::D3,
        Request::D2,
    ];

    pub fn is_command(self) -> bool {
        !matches!(
            self,
            Request::Q1
                | Request::Q2
                | Request::Q3
                | Request::Q4
                | Request::Q5
                | Request::Q6
                | Request::Q7
        )
    }

    /// One of the seeds' ten, which the naive models answer too. The seeds'
    /// models have no way to find a user by name or to take anything back:
    /// the others are measured on V3 alone.
    pub fn in_seeds(self) -> bool {
        !matches!(self, Request::Q7 | Request::D4 | Request::D3 | Request::D2)
    }

    /// Takes back something that must exist first.
    pub fn takes_back(self) -> bool {
        matches!(self, Request::D4 | Request::D3 | Request::D2)
    }

    /// The Lambda function that serves it.
    pub fn function(self) -> &'static str {
        match self {
            Request::C1 => "create-user",
            Request::Q1 => "get-user",
            Request::C2 => "create-post",
            Request::Q2 => "get-post",
            Request::Q3 => "list-user-posts",
            Request::C3 => "create-comment",
            Request::Q4 => "list-comments",
            Request::C4 => "like-post",
            Request::Q5 => "list-likes",
            Request::Q6 => "get-feed",
            Request::Q7 => "find-user",
            Request::D4 => "unlike-post",
            Request::D3 => "delete-comment",
            Request::D2 => "delete-post",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Request::C1 => "create a user",
            Request::Q1 => "get a user",
            Request::C2 => "create a post",
            Request::Q2 => "get a post",
            Request::Q3 => "a user's posts, short form",
            Request::C3 => "comment on a post",
            Request::Q4 => "a post's comments",
            Request::C4 => "like a post",
            Request::Q5 => "a post's likes",
            Request::Q6 => "feed: newest 100 posts",
            Request::Q7 => "find a user by name",
            Request::D4 => "unlike a post",
            Request::D3 => "delete a comment",
            Request::D2 => "delete a post",
        }
    }
}

/// What a request acts on.
#[derive(Debug, Clone)]
pub enum Target {
    User(UserId),
    Post(PostId),
    Feed,
    NewUser {
        user: UserId,
        username: Username,
    },
    NewPost {
        /// The id a naive model writes it under (V3's handler makes its own).
        post: PostId,
        author: UserId,
        title: String,
        content: String,
    },
    NewComment {
        post: PostId,
        author: UserId,
        content: String,
    },
    NewLike {
        post: PostId,
        liker: UserId,
    },
    /// A username, in any case.
    Username(String),
    /// A like that exists, to take back.
    Like {
        post: PostId,
        liker: UserId,
    },
    /// A comment that exists, to delete as its author.
    Comment {
        post: PostId,
        comment: CommentId,
        author: UserId,
    },
    /// A post that exists, to delete as its author.
    OwnPost {
        post: PostId,
        author: UserId,
    },
}

/// The HTTP API event for `function` with these path parameters, query and body,
/// from the caller `sub` (a verified JWT claim) if given, as a handler gets it.
pub fn event(
    function: &str,
    params: &[(&str, String)],
    raw_query: &str,
    body: Option<serde_json::Value>,
    sub: Option<&str>,
) -> Result<lambda_http::Request, Error> {
    let event = event_json(function, params, raw_query, body, sub)?;
    Ok(lambda_http::request::from_str(&event.to_string())?)
}

/// The same event as JSON, as the Runtime API hands it to a function.
pub fn event_json(
    function: &str,
    params: &[(&str, String)],
    raw_query: &str,
    body: Option<serde_json::Value>,
    sub: Option<&str>,
) -> Result<serde_json::Value, Error> {
    let route = ROUTES
        .iter()
        .find(|r| r.function == function)
        .ok_or_else(|| format!("no route for {function}"))?;
    let mut path = route.path.to_owned();
    for (name, value) in params {
        path = path.replace(&format!("{{{name}}}"), value);
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut headers = serde_json::Map::new();
    headers.insert("content-type".into(), json!("application/json"));
    let event = http_api_event(EventSpec {
        method: route.method,
        route_path: route.path,
        path: &path,
        raw_query,
        headers,
        path_params: params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect::<HashMap<_, _>>(),
        body: body.as_bytes(),
        source_ip: "127.0.0.1".into(),
        claims: sub.map(|sub| serde_json::Map::from_iter([("sub".to_owned(), json!(sub))])),
    });
    Ok(event)
}

/// The event that asks V3 for `request` on `target`. Lists ask for up to 100
/// items: everything V1 returns for the same target.
pub fn v3_event(request: Request, target: &Target) -> Result<lambda_http::Request, Error> {
    let function = request.function();
    match target {
        Target::User(user) => {
            let query = if request == Request::Q3 {
                "limit=100"
            } else {
                ""
            };
            event(function, &[("userId", user.to_string())], query, None, None)
        }
        Target::Post(post) => {
            let query = if request == Request::Q2 {
                ""
            } else {
                "limit=100"
            };
            event(function, &[("postId", post.to_string())], query, None, None)
        }
        Target::Feed => event(function, &[], "limit=100", None, None),
        Target::NewUser { user, username } => event(
            function,
            &[],
            "",
            Some(json!({ "username": username })),
            Some(user.as_str()),
        ),
        Target::NewPost {
            author,
            title,
            content,
            ..
        } => event(
            function,
            &[],
            "",
            Some(json!({ "title": title, "content": content })),
            Some(author.as_str()),
        ),
        Target::NewComment {
            post,
            author,
            content,
        } => event(
            function,
            &[("postId", post.to_string())],
            "",
            Some(json!({ "content": content })),
            Some(author.as_str()),
        ),
        Target::NewLike { post, liker } | Target::Like { post, liker } => event(
            function,
            &[("postId", post.to_string())],
            "",
            None,
            Some(liker.as_str()),
        ),
        Target::Username(name) => event(function, &[], &format!("username={name}"), None, None),
        Target::Comment {
            post,
            comment,
            author,
        } => event(
            function,
            &[
                ("postId", post.to_string()),
                ("commentId", comment.to_string()),
            ],
            "",
            None,
            Some(author.as_str()),
        ),
        Target::OwnPost { post, author } => event(
            function,
            &[("postId", post.to_string())],
            "",
            None,
            Some(author.as_str()),
        ),
    }
}

/// Runs the handler on `req` as its Lambda would and returns the seconds it
/// took (the event's parsing excluded) and the body; an error unless it
/// answered 2xx.
pub async fn run_v3(
    app: &App,
    function: &str,
    req: lambda_http::Request,
) -> Result<(f64, String), Error> {
    let started = Instant::now();
    let result = dispatch(function, app, req)
        .await
        .ok_or_else(|| format!("no handler for {function}"))?;
    let response = api::respond(result, "");
    let seconds = started.elapsed().as_secs_f64();
    let body = match response.body() {
        lambda_http::Body::Text(text) => text.clone(),
        _ => String::new(),
    };
    if !response.status().is_success() {
        return Err(format!("{function} answered {}: {body}", response.status()).into());
    }
    Ok((seconds, body))
}

/// Runs `request` on `target` the V1 way and returns the seconds it took.
pub async fn run_naive(
    naive: &NaiveStore,
    request: Request,
    target: &Target,
) -> Result<f64, Error> {
    let started = Instant::now();
    let found = match (request, target) {
        (Request::Q1, Target::User(user)) => naive.get_user(user).await?.is_some(),
        (Request::Q2, Target::Post(post)) => naive.get_post(post).await?.is_some(),
        (Request::Q3, Target::User(user)) => !naive.list_user_posts(user).await?.is_empty(),
        (Request::Q4, Target::Post(post)) => {
            naive.list_comments(post).await?;
            true
        }
        (Request::Q5, Target::Post(post)) => {
            naive.list_likes(post).await?;
            true
        }
        (Request::Q6, Target::Feed) => !naive.feed().await?.is_empty(),
        (Request::C1, Target::NewUser { user, username }) => {
            naive.create_user(user, username).await?;
            true
        }
        (
            Request::C2,
            Target::NewPost {
                post,
                author,
                title,
                content,
            },
        ) => {
            let now = timestamp::now();
            naive
                .create_post(post, author, title, content, &now)
                .await?;
            true
        }
        (
            Request::C3,
            Target::NewComment {
                post,
                author,
                content,
            },
        ) => {
            let id = CommentId::generate().to_string();
            let now = timestamp::now();
            naive.reply(post, &id, author, Some(content), &now).await?;
            true
        }
        (Request::C4, Target::NewLike { post, liker }) => {
            let id = LikeId::generate().to_string();
            naive
                .reply(post, &id, liker, None, &timestamp::now())
                .await?;
            true
        }
        (request, target) => return Err(format!("{request:?} cannot act on {target:?}").into()),
    };
    let seconds = started.elapsed().as_secs_f64();
    if !found {
        return Err(format!("V1 {request:?} found nothing for {target:?}").into());
    }
    Ok(seconds)
}
