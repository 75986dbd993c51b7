//! A bounded mixed workload on loopback: many concurrent clients, mostly
//! reading, with bursts of likes and comments on one hot post and renames of
//! active users, while the fan-out runs. No request may get a 5xx, and
//! afterwards the audit must find nothing.

use std::{
    collections::BTreeMap,
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Instant,
};

use futures::future::join_all;
use serde_json::json;

use crate::support::TestApi;

const CLIENTS: usize = 32;
const REQUESTS_PER_CLIENT: usize = 60;
const USERS: usize = 24;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mixed_load_gets_no_5xx_and_leaves_nothing_to_repair() {
    let api = TestApi::start().await;
    let users = join_all((0..USERS).map(|i| api.user_named(format!("loader{i:02}")))).await;
    let mut posts = Vec::new();
    for (i, user) in users.iter().enumerate().take(8) {
        posts.push((
            user.clone(),
            api.post(user, format!("seed {i}"), "seed content").await,
        ));
    }
    let hot = posts[0].1.clone();
    let posts = Mutex::new(posts);
    let renames = AtomicUsize::new(0);
    let statuses: Mutex<BTreeMap<u16, usize>> = Mutex::default();

    // The fan-out runs alongside, as Lambda would.
    let fan_out = api.run_fan_out(api.poller());

    let started = Instant::now();
    join_all((0..CLIENTS).map(|client| {
        let (api, users, posts, hot, renames, statuses) = (&api, &users, &posts, &hot, &renames, &statuses);
        async move {
            let mut rng = fastrand::Rng::with_seed(client as u64);
            for _ in 0..REQUESTS_PER_CLIENT {
                let me = &users[rng.usize(..users.len())];
                let (author, post) = {
                    let posts = posts.lock().expect("lock");
                    posts[rng.usize(..posts.len())].clone()
                };
                let roll = rng.u8(..100);
                let (status, body) = match roll {
                    0..=11 => api.get("/feed?limit=50").await,
                    12..=23 => api.get_post(&post).await,
                    24..=33 => api.get(&format!("/posts/{hot}/comments?limit=100")).await,
                    34..=43 => api.get(&format!("/posts/{hot}/likes?limit=100")).await,
                    44..=53 => api.user_posts(&author).await,
                    54..=59 => api.get_user(me).await,
                    60..=74 => api.like_post(me, hot).await,
                    75..=84 => {
                        let comment = format!("comment from client {client}");
                        api.comment_on(me, hot, comment).await
                    }
                    85..=92 => {
                        let body = json!({ "title": format!("by client {client}"), "content": "日本語の本文 and emoji 🎉" });
                        let reply = api.create_post(me, body).await;
                        if let Some(id) = reply.1["postId"].as_str() {
                            posts.lock().expect("lock").push((me.clone(), id.to_owned()));
                        }
                        reply
                    }
                    93..=96 => {
                        let body = json!({ "title": format!("edited by client {client}") });
                        api.edit_post(&author, &post, body).await
                    }
                    _ => {
                        let n = renames.fetch_add(1, Ordering::SeqCst);
                        api.change_username(me, me, format!("renamed_{n}")).await
                    }
                };
                assert!(status < 500, "{status}: {body}");
                *statuses.lock().expect("lock").entry(status).or_default() += 1;
            }
        }
    }))
    .await;
    let elapsed = started.elapsed();

    fan_out.stop().await;
    let mut poller = api.poller();
    api.settle(&mut poller).await;
    let audit = api.audit(false).await;
    let statuses = statuses.into_inner().expect("lock");
    let sent: usize = statuses.values().sum();
    println!(
        "load: {sent} requests by {CLIENTS} clients in {elapsed:.1?}, statuses {statuses:?}, {} renames; \
         audit read {} items, {} findings",
        renames.load(Ordering::SeqCst),
        audit.items_read,
        audit.findings.len()
    );
    assert_eq!(sent, CLIENTS * REQUESTS_PER_CLIENT);
    assert!(statuses.keys().all(|s| *s < 500));
    assert_eq!(audit.findings, vec![], "{:#?}", audit.findings);
    let (_, post) = api.get_post(&hot).await;
    assert!(post["likeCount"].as_u64().unwrap_or_default() > 0);
}
