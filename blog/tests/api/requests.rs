//! The product's requests by name, so that a test reads as what a person
//! does: `api.comment_on(&fan, &post, "nice")`, `api.unfollow(&fan, &star)`,
//! `api.export(&me)`. Each answers the status and the body as [`TestApi::call`]
//! decodes them (the contract checks included) and asserts nothing: the test
//! says what it expects. [`TestApi::call`] stays for the requests a test
//! makes malformed or hostile on purpose, and for tables of routes.
//!
//! [`Listing`] reads a list to its end, following `nextCursor`.

use serde_json::{Value, json};

use crate::support::TestApi;

/// The most pages a [`Listing`] reads unless told otherwise: a list whose
/// cursor never runs out fails its test rather than looping forever.
pub const MAX_PAGES: usize = 100;

impl TestApi {
    /// `user` signs up as `username` (POST /users).
    pub async fn sign_up(&self, user: &str, username: impl Into<Value>) -> (u16, Value) {
        let body = json!({ "username": username.into() });
        self.call("POST", "/users", Some(user), Some(body)).await
    }

    /// `caller` asks that `user` be called `username` (PUT /users/{user}).
    pub async fn change_username(
        &self,
        caller: &str,
        user: &str,
        username: impl Into<Value>,
    ) -> (u16, Value) {
        let body = json!({ "username": username.into() });
        let path = format!("/users/{user}");
        self.call("PUT", &path, Some(caller), Some(body)).await
    }

    /// `user` erases their account (DELETE /users/{user}).
    pub async fn erase(&self, user: &str) -> (u16, Value) {
        let path = format!("/users/{user}");
        self.call("DELETE", &path, Some(user), None).await
    }

    /// `user`'s public profile (GET /users/{user}).
    pub async fn get_user(&self, user: &str) -> (u16, Value) {
        self.get(&format!("/users/{user}")).await
    }

    /// `author` writes a post: `body` holds its title, content, tags, status
    /// (POST /posts).
    pub async fn create_post(&self, author: &str, body: Value) -> (u16, Value) {
        self.call("POST", "/posts", Some(author), Some(body)).await
    }

    /// [`Self::create_post`] with an `Idempotency-Key`; also whether the
    /// answer says it was given again.
    pub async fn create_post_keyed(
        &self,
        author: &str,
        key: &str,
        body: &Value,
    ) -> (u16, Value, bool) {
        self.call_keyed("POST", "/posts", Some(author), Some(key), Some(body))
            .await
    }

    /// `caller` edits `post` with `body`'s fields (PUT /posts/{post}).
    pub async fn edit_post(&self, caller: &str, post: &str, body: Value) -> (u16, Value) {
        let path = format!("/posts/{post}");
        self.call("PUT", &path, Some(caller), Some(body)).await
    }

    /// `caller` deletes `post` (DELETE /posts/{post}).
    pub async fn delete_post(&self, caller: &str, post: &str) -> (u16, Value) {
        let path = format!("/posts/{post}");
        self.call("DELETE", &path, Some(caller), None).await
    }

    /// `post` as anyone reads it (GET /posts/{post}).
    pub async fn get_post(&self, post: &str) -> (u16, Value) {
        self.get(&format!("/posts/{post}")).await
    }

    /// `user` comments `content` on `post` (POST /posts/{post}/comments).
    pub async fn comment_on(
        &self,
        user: &str,
        post: &str,
        content: impl Into<Value>,
    ) -> (u16, Value) {
        let body = json!({ "content": content.into() });
        let path = format!("/posts/{post}/comments");
        self.call("POST", &path, Some(user), Some(body)).await
    }

    /// `caller` takes back `comment` on `post` (DELETE
    /// /posts/{post}/comments/{comment}).
    pub async fn take_back_comment(&self, caller: &str, post: &str, comment: &str) -> (u16, Value) {
        let path = format!("/posts/{post}/comments/{comment}");
        self.call("DELETE", &path, Some(caller), None).await
    }

    /// `user` likes `post`, whatever the answer (POST /posts/{post}/likes);
    /// [`Self::like`] is a first like, asserted.
    pub async fn like_post(&self, user: &str, post: &str) -> (u16, Value) {
        let path = format!("/posts/{post}/likes");
        self.call("POST", &path, Some(user), None).await
    }

    /// `user` takes back their like of `post` (DELETE /posts/{post}/likes).
    pub async fn unlike(&self, user: &str, post: &str) -> (u16, Value) {
        let path = format!("/posts/{post}/likes");
        self.call("DELETE", &path, Some(user), None).await
    }

    /// `follower` follows `followed`, whatever the answer (POST
    /// /users/{followed}/followers); [`Self::follow`] is a new follow,
    /// asserted.
    pub async fn follow_user(&self, follower: &str, followed: &str) -> (u16, Value) {
        let path = format!("/users/{followed}/followers");
        self.call("POST", &path, Some(follower), None).await
    }

    /// `follower` stops following `followed` (DELETE
    /// /users/{followed}/followers).
    pub async fn unfollow(&self, follower: &str, followed: &str) -> (u16, Value) {
        let path = format!("/users/{followed}/followers");
        self.call("DELETE", &path, Some(follower), None).await
    }

    /// `blocker` blocks `blocked`, whatever the answer (PUT
    /// /blocks/{blocked}).
    pub async fn block(&self, blocker: &str, blocked: &str) -> (u16, Value) {
        let path = format!("/blocks/{blocked}");
        self.call("PUT", &path, Some(blocker), None).await
    }

    /// `blocker` takes back their block of `blocked` (DELETE
    /// /blocks/{blocked}).
    pub async fn unblock(&self, blocker: &str, blocked: &str) -> (u16, Value) {
        let path = format!("/blocks/{blocked}");
        self.call("DELETE", &path, Some(blocker), None).await
    }

    /// Whom `caller` blocks, first page (GET /blocks, their own list).
    pub async fn blocks(&self, caller: &str) -> (u16, Value) {
        self.call("GET", "/blocks", Some(caller), None).await
    }

    /// The front page's feed, first page (GET /feed).
    pub async fn get_feed(&self) -> (u16, Value) {
        self.get("/feed").await
    }

    /// `reader`'s home, first page (GET /home).
    pub async fn home(&self, reader: &str) -> (u16, Value) {
        self.call("GET", "/home", Some(reader), None).await
    }

    /// `user`'s published posts, first page (GET /users/{user}/posts).
    pub async fn user_posts(&self, user: &str) -> (u16, Value) {
        self.get(&format!("/users/{user}/posts")).await
    }

    /// `author`'s drafts and scheduled posts as `caller` asks for them, first
    /// page (GET /users/{author}/drafts).
    pub async fn drafts(&self, caller: &str, author: &str) -> (u16, Value) {
        let path = format!("/users/{author}/drafts");
        self.call("GET", &path, Some(caller), None).await
    }

    /// `post`'s comments, first page (GET /posts/{post}/comments).
    pub async fn post_comments(&self, post: &str) -> (u16, Value) {
        self.get(&format!("/posts/{post}/comments")).await
    }

    /// `post`'s likes, first page (GET /posts/{post}/likes).
    pub async fn post_likes(&self, post: &str) -> (u16, Value) {
        self.get(&format!("/posts/{post}/likes")).await
    }

    /// Who follows `user`, first page (GET /users/{user}/followers).
    pub async fn followers(&self, user: &str) -> (u16, Value) {
        self.get(&format!("/users/{user}/followers")).await
    }

    /// Whom `user` follows, first page (GET /users/{user}/following).
    pub async fn following(&self, user: &str) -> (u16, Value) {
        self.get(&format!("/users/{user}/following")).await
    }

    /// The posts tagged `tag`, first page (GET /tags/{tag}/posts).
    pub async fn tag_posts(&self, tag: &str) -> (u16, Value) {
        self.get(&format!("/tags/{tag}/posts")).await
    }

    /// `user`'s export of their own data, first page (GET
    /// /users/{user}/export).
    pub async fn export(&self, user: &str) -> (u16, Value) {
        self.export_as(user, user, "").await
    }

    /// The export of `user`'s data as `caller` asks for it, with `query`
    /// (`limit=25`, `cursor=…`, or nothing).
    pub async fn export_as(&self, caller: &str, user: &str, query: &str) -> (u16, Value) {
        let path = with_query(&format!("/users/{user}/export"), query);
        self.call("GET", &path, Some(caller), None).await
    }

    /// `user`'s notifications, first page (GET /notifications), with `query`
    /// (`limit=…`, `cursor=…`, or nothing).
    pub async fn notifications(&self, user: &str, query: &str) -> (u16, Value) {
        let path = with_query("/notifications", query);
        self.call("GET", &path, Some(user), None).await
    }

    /// `user` has read their notifications up to `seen_at` (now when
    /// `None`: POST /notifications/seen).
    pub async fn mark_seen(&self, user: &str, seen_at: Option<&str>) -> (u16, Value) {
        let body = seen_at.map(|at| json!({ "seenAt": at }));
        self.call("POST", "/notifications/seen", Some(user), body)
            .await
    }

    /// The list at `path` (with its query, if any), read page by page:
    /// see [`Listing`].
    pub fn list(&self, path: impl Into<String>) -> Listing<'_> {
        Listing {
            api: self,
            path: path.into(),
            caller: None,
            cursor: None,
            at_most: MAX_PAGES,
        }
    }
}

/// The answer of `send`, sent again after a 503 (nothing written: the store
/// ran out of retries under contention, as on DynamoDB), as a client would,
/// up to five times in all: the last answer.
pub async fn until_answered<F, Fut>(send: F) -> (u16, Value)
where
    F: Fn() -> Fut,
    Fut: Future<Output = (u16, Value)>,
{
    let mut answer = (0, Value::Null);
    for _ in 0..5 {
        answer = send().await;
        if answer.0 != 503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    answer
}

/// `path` with `query` added to whatever query it has.
fn with_query(path: &str, query: &str) -> String {
    match (query.is_empty(), path.contains('?')) {
        (true, _) => path.to_owned(),
        (false, true) => format!("{path}&{query}"),
        (false, false) => format!("{path}?{query}"),
    }
}

/// A list read to its end: the first page, then each page its cursor
/// (`nextCursor`) names, until one says `null`. Every page must answer 200
/// and name its next page as a string or `null`; more than
/// [`Listing::at_most`] pages (100 unless told) fail the test.
#[must_use = "a listing reads nothing until asked for its pages"]
pub struct Listing<'a> {
    api: &'a TestApi,
    path: String,
    caller: Option<String>,
    cursor: Option<String>,
    at_most: usize,
}

impl Listing<'_> {
    /// Read as `caller` (the home, drafts, an export), not anonymously.
    pub fn by(mut self, caller: &str) -> Self {
        self.caller = Some(caller.to_owned());
        self
    }

    /// Starts at the page `cursor` names rather than at the first.
    pub fn after(mut self, cursor: &str) -> Self {
        self.cursor = Some(cursor.to_owned());
        self
    }

    /// Fails the test if the list has more than `pages` pages.
    pub fn at_most(mut self, pages: usize) -> Self {
        self.at_most = pages;
        self
    }

    /// One page (the first, or the one [`Listing::after`] names), whatever
    /// it answers.
    pub async fn page(self) -> (u16, Value) {
        self.read(self.cursor.as_deref()).await.1
    }

    /// The page `cursor` names (the first without one): its path, and the
    /// answer.
    async fn read(&self, cursor: Option<&str>) -> (String, (u16, Value)) {
        let path = match cursor {
            Some(cursor) => with_query(&self.path, &format!("cursor={cursor}")),
            None => self.path.clone(),
        };
        let caller = self.caller.as_deref();
        let answer = self.api.call("GET", &path, caller, None).await;
        (path, answer)
    }

    /// Every page's body, in order.
    pub async fn pages(self) -> Vec<Value> {
        let mut pages = Vec::new();
        self.each_page(|page| pages.push(page.clone())).await;
        pages
    }

    /// Every page's items, in order.
    pub async fn items(self) -> Vec<Value> {
        let mut items = Vec::new();
        self.each_page(|page| {
            items.extend(page["items"].as_array().cloned().unwrap_or_default());
        })
        .await;
        items
    }

    /// Hands each page's body to `on_page` as it comes (before the next is
    /// asked for); the number of pages.
    pub async fn each_page(self, mut on_page: impl FnMut(&Value)) -> usize {
        let mut cursor = self.cursor.clone();
        for read in 1..=self.at_most {
            let (path, (status, page)) = self.read(cursor.as_deref()).await;
            assert_eq!(status, 200, "GET {path}: {page}");
            on_page(&page);
            match &page["nextCursor"] {
                Value::String(next) => cursor = Some(next.clone()),
                Value::Null => return read,
                other => panic!("GET {path}: nextCursor is {other}"),
            }
        }
        panic!(
            "{} has more than {} pages: its cursor never ran out",
            self.path, self.at_most
        );
    }
}
