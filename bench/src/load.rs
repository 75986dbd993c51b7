//! Loading one scale of the data set into every model: the V3 single table (in
//! the state the API and the fan-out would have left it), the V1 tables (which
//! both V1 variants read) and the V2 tables.
//!
//! The V3 table's stream is off while loading: a million load records are not
//! what the fan-out benchmark wants to read. It is switched back on at the end,
//! which starts a new stream holding only what the benchmark writes.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use aws_sdk_dynamodb::{
    Client,
    types::{StreamSpecification, StreamViewType},
};
use blog::{
    ids::{PostId, UserId},
    store::{Item, bulk, items::post::PostItem, table},
};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc;

use crate::{
    dataset,
    naive::{Error, NaiveStore},
};

/// BatchWriteItem calls in flight.
const WRITERS: usize = 8;
const BATCH: usize = 25;

/// What was loaded, and what the measurements pick their targets from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub users: usize,
    pub posts: usize,
    pub comments: usize,
    pub likes: usize,
    pub v3_items: usize,
    pub v1_items: usize,
    pub v2_items: usize,
    pub seconds: f64,
    /// Every post and the index of its author.
    pub post_ids: Vec<(PostId, usize)>,
    /// The reference post: 25 comments and 100 likes.
    pub reference_post: PostId,
    pub reference_user: UserId,
}

/// Creates the V3 table `v3_table` and the tables of `v1` and `v2`, and loads
/// `users` users' data into all three.
pub async fn load(
    client: &Client,
    v3_table: &str,
    v1: &NaiveStore,
    v2: &NaiveStore,
    users: usize,
) -> Result<Loaded, Error> {
    v1.create_tables().await?;
    v2.create_tables().await?;
    load_models(client, v3_table, vec![v1.clone(), v2.clone()], users).await
}

/// Creates the V3 table `v3_table` and loads `users` users' data into it
/// alone (the audit's benchmark).
pub async fn load_v3(client: &Client, v3_table: &str, users: usize) -> Result<Loaded, Error> {
    load_models(client, v3_table, Vec::new(), users).await
}

/// Loads V3 and the naive models in `naive` (V1, then V2; their tables
/// created).
async fn load_models(
    client: &Client,
    v3_table: &str,
    naive: Vec<NaiveStore>,
    users: usize,
) -> Result<Loaded, Error> {
    table::create_if_missing(client, v3_table).await?;
    set_stream(client, v3_table, false).await?;

    let started = Instant::now();
    let bar = ProgressBar::new(users as u64).with_style(
        ProgressStyle::with_template(
            "  loading {pos}/{len} users [{bar:30}] {elapsed_precise} (eta {eta}) {msg}",
        )?
        .progress_chars("=> "),
    );
    let (chunks, receiver) = mpsc::channel::<(String, Vec<Item>)>(64);
    let v3 = v3_table.to_owned();
    let generator_bar = bar.clone();
    // Generating and encoding is CPU work: off the async threads.
    let generator =
        tokio::task::spawn_blocking(move || generate(users, &v3, &naive, &chunks, &generator_bar));
    let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writes = futures::stream::unfold(receiver, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    })
    .map(|(table, items)| {
        let written = written.clone();
        let bar = bar.clone();
        async move {
            let n = items.len();
            bulk::put_items(client, &table, items).await?;
            let total = written.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
            let rate = total as f64 / started.elapsed().as_secs_f64().max(0.001);
            bar.set_message(format!("{total} items, {rate:.0}/s"));
            Ok::<_, Error>(())
        }
    })
    .buffer_unordered(WRITERS);
    futures::pin_mut!(writes);
    while let Some(result) = writes.next().await {
        result?;
    }
    let mut loaded = generator.await??;

    // The feed, as the fan-out's entries and trims would have left it.
    let newest: Vec<&PostItem> = loaded.newest.values().collect();
    let feed = bulk::feed_items(&newest, blog::store::feed::FEED_CAPACITY)?;
    loaded.summary.v3_items += feed.len();
    bulk::put_items(client, v3_table, feed).await?;
    set_stream(client, v3_table, true).await?;
    bar.finish();
    loaded.summary.seconds = started.elapsed().as_secs_f64();
    Ok(loaded.summary)
}

struct Generated {
    summary: Loaded,
    /// The newest posts, enough to fill the feed and set its floor.
    newest: BTreeMap<PostId, PostItem>,
}

fn generate(
    users: usize,
    v3: &str,
    naive: &[NaiveStore],
    chunks: &mpsc::Sender<(String, Vec<Item>)>,
    bar: &ProgressBar,
) -> Result<Generated, Error> {
    let mut summary = Loaded {
        users,
        posts: 0,
        comments: 0,
        likes: 0,
        v3_items: 0,
        v1_items: 0,
        v2_items: 0,
        seconds: 0.0,
        post_ids: Vec::new(),
        reference_post: PostId::generate(), // set below
        reference_user: dataset::user_id(dataset::REFERENCE_USER),
    };
    let mut newest = BTreeMap::new();
    let mut reference_posts = Vec::new();
    let send = |table: &str, items: Vec<Item>| -> Result<(), Error> {
        for chunk in items.chunks(BATCH) {
            chunks
                .blocking_send((table.to_owned(), chunk.to_vec()))
                .map_err(|_| "the writers stopped")?;
        }
        Ok(())
    };
    for index in 0..users {
        let user = dataset::user(index);
        let v3_user = bulk::user_items(&user)?;
        summary.v3_items += v3_user.len();
        send(v3, v3_user)?;
        for model in naive {
            send(model.users_table(), NaiveStore::user_rows(&user)?)?;
        }
        summary.v1_items += usize::from(!naive.is_empty());
        summary.v2_items += usize::from(naive.len() > 1);
        let mut v3_items = Vec::new();
        let mut naive_items = vec![Vec::new(); naive.len()];
        for thread in dataset::threads(index, users) {
            summary.posts += 1;
            summary.comments += thread.comments.len();
            summary.likes += thread.likes.len();
            summary.post_ids.push((thread.post.post_id, index));
            if index == dataset::REFERENCE_USER {
                reference_posts.push(thread.post.post_id);
            }
            v3_items.extend(bulk::post_items(&thread)?);
            for (model, items) in naive.iter().zip(&mut naive_items) {
                items.extend(model.post_rows(&thread)?);
            }
            newest.insert(thread.post.post_id, thread.post);
            if newest.len() > blog::store::feed::FEED_CAPACITY + 1 {
                newest.pop_first();
            }
        }
        summary.v3_items += v3_items.len();
        summary.v1_items += naive_items.first().map_or(0, Vec::len);
        summary.v2_items += naive_items.get(1).map_or(0, Vec::len);
        send(v3, v3_items)?;
        for (model, items) in naive.iter().zip(naive_items) {
            send(model.posts_table(), items)?;
        }
        bar.inc(1);
    }
    // The reference post is the reference user's newest.
    summary.reference_post = reference_posts
        .into_iter()
        .max()
        .ok_or("the reference user wrote nothing")?;
    Ok(Generated { summary, newest })
}

async fn set_stream(client: &Client, table: &str, enabled: bool) -> Result<(), Error> {
    let mut spec = StreamSpecification::builder().stream_enabled(enabled);
    if enabled {
        spec = spec.stream_view_type(StreamViewType::NewAndOldImages);
    }
    client
        .update_table()
        .table_name(table)
        .stream_specification(spec.build()?)
        .send()
        .await?;
    Ok(())
}
