//! The set-up many tests begin with: an author, their post, a crowd of other
//! users to like it, comment on it or follow, and a poller of the table's
//! stream for the fan-out.

use futures::StreamExt;
use local::stream_poller::StreamPoller;

use crate::support::TestApi;

/// The crowd's sign-ups in flight at once (set-up, not what a test is about).
pub const SIGN_UPS_AT_ONCE: usize = 20;

/// Who a [`Scene`] holds, by name: the author, their post's title and
/// content, and the crowd's names, `{crowd}{i}` with `i` zero-padded to
/// `width` digits.
#[derive(Clone, Copy)]
pub struct Cast<'a> {
    pub author: &'a str,
    pub title: &'a str,
    pub content: &'a str,
    pub crowd: &'a str,
    pub width: usize,
}

/// N users, an author's post and a poller, made in that order: the author
/// signs up and posts, then the crowd signs up, [`SIGN_UPS_AT_ONCE`] at a
/// time.
pub struct Scene {
    pub author: String,
    pub post: String,
    /// The crowd, in the order of their names.
    pub users: Vec<String>,
    /// A poller of the test's table (nothing read yet): settle with
    /// [`TestApi::settle`], or run in the background with
    /// [`TestApi::run_fan_out`].
    pub poller: StreamPoller,
}

impl Scene {
    /// `n` users, an author's post and a poller, named by `cast`.
    pub async fn new(api: &TestApi, n: usize, cast: Cast<'_>) -> Self {
        let poller = api.poller();
        let author = api.user(cast.author).await;
        let post = api.post(&author, cast.title, cast.content).await;
        let width = cast.width;
        let users = futures::stream::iter(0..n)
            .map(|i| api.user_named(format!("{}{i:0width$}", cast.crowd)))
            .buffered(SIGN_UPS_AT_ONCE)
            .collect()
            .await;
        Self {
            author,
            post,
            users,
            poller,
        }
    }
}
