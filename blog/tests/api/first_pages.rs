//! A hot post's first pages read from the fan-out's copies
//! (`blog::store::first_pages`): Q4's and Q5's first page cost a few calls
//! and about the units of what they show, whatever the post's shard count;
//! they show what is there now (an unlike, a deleted comment, an erasure,
//! a rename at once where no read instance keeps the entries; within the
//! copy's rebuild and `HOT_ENTRIES_TTL` where one does), read nothing of
//! the post's own partition, and paging on from them lists every entry
//! once.

use std::collections::HashSet;

use blog::{
    keys::Key,
    store::items::{
        counter::HOT_SHARDS,
        first_page::{FirstPageItem, PageList},
    },
};
use futures::StreamExt;
use local::stream_poller::StreamPoller;
use serde_json::{Value, json};

use crate::{
    hot::{audited_then_deleted, every_page, partitions_of},
    scene::SIGN_UPS_AT_ONCE,
    support::{TestApi, post_id},
};

/// A hot post with `shards` shards: likes and comments by `quiet` users
/// while it was quiet, then by the rest of `users` once hot, each user one
/// like and one comment, in order. The comments' ids in the order made.
struct Viral {
    api: TestApi,
    poller: StreamPoller,
    author: String,
    post: String,
    users: Vec<String>,
    comments: Vec<String>,
}

async fn viral(shards: u8, users: usize, quiet: usize) -> Viral {
    viral_on(TestApi::start().await, shards, users, quiet).await
}

/// [`viral`] on `api`.
async fn viral_on(api: TestApi, shards: u8, users: usize, quiet: usize) -> Viral {
    let poller = api.poller();
    let author = api.user("viral").await;
    let post = api.post(&author, "Viral", "read by everyone").await;
    let crowd: Vec<String> = futures::stream::iter(0..users)
        .map(|i| api.user_named(format!("reader{i:03}")))
        .buffered(SIGN_UPS_AT_ONCE)
        .collect()
        .await;
    let mut comments = Vec::new();
    for (i, who) in crowd.iter().enumerate() {
        if i == quiet {
            api.make_hot(&post).await;
            let requests = api.app.store.requests();
            let mut now = HOT_SHARDS;
            while now < shards {
                now = requests.widen(&post_id(&post), now).await.expect("widen");
            }
            assert_eq!(now, shards);
        }
        api.like(who, &post).await;
        comments.push(api.comment(who, &post, &format!("comment {i}")).await);
    }
    Viral {
        api,
        poller,
        author,
        post,
        users: crowd,
        comments,
    }
}

/// What reading `path` cost: its answer, its calls, and the read units
/// they consumed.
async fn metered(api: &TestApi, path: &str) -> (u16, Value, usize, f64) {
    api.meter.take();
    let (status, body) = api.get(path).await;
    let (calls, units) = spent(api);
    (status, body, calls, units)
}

/// The calls made since the meter was last taken, and their read units.
fn spent(api: &TestApi) -> (usize, f64) {
    let calls = api.meter.take();
    let units = calls.iter().filter(|c| c.reads()).map(|c| c.total()).sum();
    (calls.len(), units)
}

fn items(page: &Value) -> Vec<Value> {
    page["items"].as_array().cloned().unwrap_or_default()
}

fn field(list: &[Value], name: &str) -> Vec<String> {
    list.iter()
        .map(|item| item[name].as_str().expect("a string").to_owned())
        .collect()
}

/// A read function's instance of its own, keeping hot posts' answers for
/// 1 s (`HOT_READ_CACHE_SECONDS` as deployed) by a clock the test moves.
fn read_instance(api: &TestApi) -> (blog::store::Store, blog::clock::Clock) {
    let clock = blog::clock::Clock::manual();
    let reads =
        blog::store::memory::HotReads::new(std::time::Duration::from_secs(1), clock.clone());
    let reader = blog::store::Store::new(api.app.store.client().clone(), api.app.store.table())
        .with_hot_reads(reads);
    (reader, clock)
}

/// The stored copy of `post`'s `list`, read strongly behind the store.
async fn stored_copy(api: &TestApi, post: &str, list: PageList) -> Option<FirstPageItem> {
    let key: Key = FirstPageItem::key_of(&post_id(post), list);
    let store = &api.app.store;
    let got = store
        .client()
        .get_item()
        .table_name(store.table())
        .set_key(Some(key.item()))
        .consistent_read(true)
        .send()
        .await
        .expect("get");
    got.item
        .map(|item| blog::keys::from_item(item).expect("a first page"))
}

#[tokio::test]
async fn a_viral_posts_first_pages_cost_a_few_calls_whatever_its_shards() {
    for shards in [128, 16] {
        let Viral {
            api,
            mut poller,
            post,
            ..
        } = viral(shards, 40, 4).await;
        let likes = format!("/posts/{post}/likes");
        let comments = format!("/posts/{post}/comments");
        // Before the copies (a process that has not met the post: today's
        // merge, one Query a partition).
        let fresh = blog::store::Store::new(api.app.store.client().clone(), api.app.store.table());
        let id = post_id(&post);
        api.meter.take();
        let page = fresh.requests().list_likes(&id, 20, None).await;
        assert_eq!(page.expect("a page").items.len(), 20);
        let (before_likes, before_likes_units) = spent(&api);
        assert!(before_likes > usize::from(shards), "{before_likes} calls");
        let page = fresh.requests().list_comments(&id, 20, None).await;
        assert_eq!(page.expect("a page").items.len(), 20);
        let (before_comments, before_comments_units) = spent(&api);
        assert!(before_comments > usize::from(shards), "{before_comments}");

        api.settle(&mut poller).await;
        for list in PageList::ALL {
            let copy = stored_copy(&api, &post, list).await.expect("a copy");
            assert_eq!((copy.entries.len(), copy.more), (40, false), "{list:?}");
            assert_eq!((copy.shards, copy.due), (shards, None), "{list:?}");
        }
        let mut figures = Vec::new();
        for path in [
            likes.clone(),
            comments.clone(),
            format!("{likes}?limit=100"),
            format!("{comments}?limit=100"),
        ] {
            let (status, page, calls, units) = metered(&api, &path).await;
            let shown = items(&page).len();
            assert_eq!(status, 200, "{page}");
            assert!(shown >= 20, "{path}: {shown}");
            // Q5: the copy, then the likes; Q4 as well, and
            // the author's blocks beside the comments.
            let most = if path.contains("/likes") { 2 } else { 3 };
            assert!(calls <= most, "{path}: {calls} calls at {shards} shards");
            // Each entry shown is one eventually consistent read of a small
            // item (0.5 RCU): the page costs at most about twice that.
            let items_units = 0.5 * shown as f64;
            assert!(
                units <= 2.0 * items_units,
                "{path}: {units} RCU for {shown} items at {shards} shards"
            );
            figures.push(format!("{path}: {calls} calls, {units} RCU"));
        }
        // A process that has not read the post (a new instance): its own
        // partition's Query meets the pointer, then the copy, whatever the
        // shard count.
        let new = || blog::store::Store::new(api.app.store.client().clone(), api.app.store.table());
        api.meter.take();
        let page = new().requests().list_likes(&id, 20, None).await;
        assert_eq!(page.expect("a page").items.len(), 20);
        let (new_likes, new_likes_units) = spent(&api);
        assert_eq!(
            new_likes, 3,
            "the Query, then the copy's GetItem and BatchGetItem"
        );
        let page = new().requests().list_comments(&id, 20, None).await;
        assert_eq!(page.expect("a page").items.len(), 20);
        let (new_comments, new_comments_units) = spent(&api);
        assert_eq!(new_comments, 4, "the Query, then the copy's three calls");
        // The own partition's Query (its quiet likes or comments, and the
        // pointer) and the page's 20 entries (0.5 RCU each).
        for units in [new_likes_units, new_comments_units] {
            assert!(
                units <= 2.0 * 0.5 * 20.0 + 3.0,
                "{units} RCU at {shards} shards"
            );
        }
        figures.push(format!(
            "new instance: likes {new_likes} calls {new_likes_units} RCU, \
             comments {new_comments} calls {new_comments_units} RCU"
        ));
        let (status, _, calls, units) = metered(&api, &format!("/posts/{post}")).await;
        assert_eq!((status, calls), (200, 1), "Q2 is one Query");
        eprintln!(
            "{shards} shards: before the copies, likes {before_likes} calls \
             {before_likes_units} RCU, comments {before_comments} calls \
             {before_comments_units} RCU; after: {figures:?}; Q2 {calls} call {units} RCU"
        );
    }
}

/// A hot post's first pages read nothing of its own partition (`POST#p`),
/// which each read instance's miss would otherwise read, so that its
/// readers take it to its read limit: what each read charged where, through
/// the partition-limiting proxy (at DynamoDB's own limits). A copy made
/// before copies named the post's author takes it from the process's
/// memory of authors (else reads it once).
#[tokio::test]
async fn a_hot_posts_first_pages_read_nothing_of_its_own_partition() {
    let (proxy, api) =
        crate::support::behind_proxy_with(blog::store::Backoff::default(), |store| store).await;
    let Viral {
        api,
        mut poller,
        author,
        post,
        ..
    } = viral_on(api, HOT_SHARDS, 12, 0).await;
    api.settle(&mut poller).await;
    for list in PageList::ALL {
        let copy = stored_copy(&api, &post, list).await.expect("a copy");
        let author = crate::support::user_id(&author);
        assert_eq!(copy.author, Some(author), "{list:?}");
    }
    let limits = hostile::PartitionLimits::scaled(1.0).expect("DynamoDB's limits");
    proxy.set_partition_limits(Some(limits));
    let own = format!("/POST#{post}");
    let copies = format!("/POST#{post}#PAGES");
    let read_where = |path: String| {
        let (api, proxy) = (&api, &proxy);
        async move {
            proxy.take_charged();
            let (status, page) = api.get(&path).await;
            assert_eq!((status, items(&page).len()), (200, 12), "{path}: {page}");
            let charged = proxy.take_charged().expect("limits");
            charged
                .reads
                .into_iter()
                .map(|(name, _)| name)
                .collect::<Vec<_>>()
        }
    };
    for path in [
        format!("/posts/{post}/likes"),
        format!("/posts/{post}/comments"),
    ] {
        let read = read_where(path.clone()).await;
        assert!(
            read.iter().any(|name| name.ends_with(&copies)),
            "{path}: {read:?}"
        );
        assert!(
            !read.iter().any(|name| name.ends_with(&own)),
            "{path}: {read:?}"
        );
    }
    // A copy of before: the post item too.
    let key = FirstPageItem::key_of(&post_id(&post), PageList::Likes);
    let store = &api.app.store;
    store
        .client()
        .update_item()
        .table_name(store.table())
        .set_key(Some(key.item()))
        .update_expression("REMOVE author")
        .send()
        .await
        .expect("a copy of before");
    // Its author from this process's memory (a like met it), so again
    // nothing of the post's partition.
    let read = read_where(format!("/posts/{post}/likes")).await;
    assert!(!read.iter().any(|name| name.ends_with(&own)), "{read:?}");
    proxy.set_partition_limits(None);
}

#[tokio::test]
async fn a_first_page_from_its_copy_shows_what_is_there_now_and_pages_on_exactly() {
    let Viral {
        api,
        mut poller,
        author,
        post,
        users,
        comments,
    } = viral(HOT_SHARDS, 30, 3).await;
    let likes = format!("/posts/{post}/likes");
    let listed = format!("/posts/{post}/comments");
    api.settle(&mut poller).await;

    // The whole lists, from the copies' first pages on: every like newest
    // first, every comment oldest first, once each.
    let mut newest_first: Vec<String> = users.iter().rev().cloned().collect();
    let mut oldest_first = comments.clone();
    let walk = |limit: usize| {
        let (api, likes, listed) = (&api, &likes, &listed);
        async move {
            let liked = field(&every_page(api, likes, limit).await, "userId");
            let commented = field(&every_page(api, listed, limit).await, "commentId");
            (liked, commented)
        }
    };
    assert_eq!(walk(7).await, (newest_first.clone(), oldest_first.clone()));
    assert_eq!(
        walk(100).await,
        (newest_first.clone(), oldest_first.clone())
    );

    // Taken back, with the fan-out not running: gone from the first pages
    // at once, which their copies still name, and paging on is exact.
    let made_at = |list| {
        let api = &api;
        let post = &post;
        async move { stored_copy(api, post, list).await.expect("a copy").made_at }
    };
    let (likes_made, comments_made) = (
        made_at(PageList::Likes).await,
        made_at(PageList::Comments).await,
    );
    let newest = newest_first.remove(0);
    let (status, _) = api.unlike(&newest, &post).await;
    assert_eq!(status, 204);
    // The oldest comment (the post's own partition) and one in a shard.
    for comment in [oldest_first.remove(0), oldest_first.remove(5)] {
        let (status, body) = api.take_back_comment(&author, &post, &comment).await;
        assert_eq!(status, 204, "{body}");
    }
    let (_, page) = api.get(&format!("{likes}?limit=5")).await;
    assert_eq!(field(&items(&page), "userId"), newest_first[..5]);
    let (_, page) = api.get(&format!("{listed}?limit=5")).await;
    assert_eq!(field(&items(&page), "commentId"), oldest_first[..5]);
    assert_eq!(walk(7).await, (newest_first.clone(), oldest_first.clone()));
    assert_eq!(made_at(PageList::Likes).await, likes_made, "not made again");
    assert_eq!(made_at(PageList::Comments).await, comments_made);

    // The fan-out makes them again; then a liker renamed shows their new
    // name at once (the copy holds no name, and is not made again for it).
    api.settle(&mut poller).await;
    let renamed = newest_first[0].clone();
    api.rename(&renamed, "renamed_reader").await;
    let copy_then = made_at(PageList::Likes).await;
    assert!(copy_then > likes_made, "made again after the unlike");
    api.settle(&mut poller).await;
    let (_, page) = api.get(&likes).await;
    assert_eq!(items(&page)[0]["userId"], json!(renamed));
    assert_eq!(items(&page)[0]["username"], json!("renamed_reader"));
    assert_eq!(made_at(PageList::Likes).await, copy_then);

    // An erased reader's like and comment leave the first pages (the
    // erasure's walk takes them out).
    let erased = newest_first[1].clone();
    let who = users.iter().position(|u| *u == erased).expect("a reader");
    let erased_comment = comments[who].clone();
    let (status, _) = api.erase(&erased).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    newest_first.retain(|u| *u != erased);
    oldest_first.retain(|c| *c != erased_comment);
    assert_eq!(walk(7).await, (newest_first.clone(), oldest_first.clone()));
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(newest_first.len()), json!(oldest_first.len()))
    );

    // Deleted, the post leaves nothing: its copies neither, and a rebuild
    // late from a batch read before the walk puts none back (its check of
    // the likes pointer fails).
    audited_then_deleted(&api, &mut poller, &author, &post).await;
    assert!(partitions_of(&api, &post).await.is_empty());
    for list in PageList::ALL {
        assert!(stored_copy(&api, &post, list).await.is_none());
        let late = blog::store::items::first_page::FirstPageItem::made(
            crate::support::post_id(&post),
            list,
            [],
            false,
            HOT_SHARDS,
            u64::MAX / 2,
        );
        let put = api.app.store.fanout().put_first_page(&late).await;
        assert!(!put.expect("answered"), "no copy of a deleted post");
        assert!(stored_copy(&api, &post, list).await.is_none());
    }
}

#[tokio::test]
async fn a_cursor_from_a_copys_page_or_forged_reads_no_more_than_the_merge() {
    use blog::store::cursor;
    let Viral {
        api,
        mut poller,
        post,
        ..
    } = viral(HOT_SHARDS, 12, 2).await;
    api.settle(&mut poller).await;
    let likes = format!("/posts/{post}/likes");
    let real = 1 + usize::from(HOT_SHARDS);
    let queries = |api: &TestApi| {
        api.meter
            .take()
            .into_iter()
            .filter(|c| c.operation == "Query")
            .count()
    };
    api.meter.take();
    let (_, page) = api.get(&format!("{likes}?limit=3")).await;
    assert_eq!(queries(&api), 0, "the copy's page reads no partition");
    let next = page["nextCursor"].as_str().expect("more").to_owned();
    let (status, page) = api.get(&format!("{likes}?limit=3&cursor={next}")).await;
    assert_eq!(status, 200, "{page}");
    assert!(queries(&api) <= real);

    // The like its cursor names, with shard counts the post never had.
    let raw = cursor::decode(&next, &format!("likes:{post}")).expect("the server's cursor");
    let like = raw.split('.').next().expect("an id").to_owned();
    let mut seen = HashSet::new();
    for forged in ["1", "255", "0", "17", "128"] {
        let forged = cursor::encode(&format!("likes:{post}"), &format!("{like}.{forged}"));
        assert!(seen.insert(forged.clone()));
        let (status, body) = api.get(&format!("{likes}?cursor={forged}")).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (400, &json!("bad_cursor")),
            "{body}"
        );
        assert!(queries(&api) <= 1);
    }
}

/// A like given while the copy is younger than a second is not copied by
/// its own batch; that batch marks a rebuild due, whose record brings the
/// post back once the copy is a second old: the last like before a quiet
/// spell is on the first page all the same, and the copy is left with no
/// rebuild due.
#[tokio::test]
async fn the_last_like_before_a_quiet_spell_is_copied_once_the_copy_is_a_second_old() {
    let Viral {
        api,
        mut poller,
        post,
        ..
    } = viral(HOT_SHARDS, 6, 2).await;
    api.settle(&mut poller).await;
    let key = FirstPageItem::key_of(&post_id(&post), PageList::Likes);
    // The copy as if made a moment ago.
    let fresh = crate::hot::epoch_millis();
    crate::hot::raw_set_number(&api, &key, "madeAt", fresh).await;
    let last = api.user("last").await;
    api.like(&last, &post).await;
    api.settle(&mut poller).await;
    let copy = stored_copy(&api, &post, PageList::Likes)
        .await
        .expect("a copy");
    assert!(copy.made_at >= fresh + 1_000, "made again a second later");
    assert_eq!(copy.due, None, "nothing left due");
    assert_eq!(copy.entries.len(), 7);
    let (_, page) = api.get(&format!("/posts/{post}/likes")).await;
    assert_eq!(items(&page)[0]["userId"], json!(last), "{page}");
}

/// A read function's instance serves a hot post's Q2 and first pages again
/// for the cache's time to live (`HOT_READ_CACHE_SECONDS`), with no call to
/// DynamoDB: however many readers it serves, the post's partition sees one
/// read of each a time to live. A quiet post is never kept, nor a later
/// page; past the time to live the instance reads again, and shows what
/// changed meanwhile.
#[tokio::test]
async fn a_read_instance_serves_a_hot_posts_reads_again_for_its_time_to_live() {
    use std::time::Duration;

    let Viral {
        api,
        mut poller,
        post,
        author,
        users,
        ..
    } = viral(16, 30, 0).await;
    api.settle(&mut poller).await;
    let (reader, clock) = read_instance(&api);
    let requests = reader.requests();
    let id = post_id(&post);
    // Each read twice: the second costs no call.
    let calls = |api: &TestApi| api.meter.take().len();
    calls(&api);
    let first = requests.get_post(&id).await.expect("read");
    assert!(calls(&api) >= 1);
    let again = requests.get_post(&id).await.expect("read");
    assert_eq!((calls(&api), &again), (0, &first), "Q2 kept");
    let comments = requests.list_comments(&id, 20, None).await.expect("read");
    assert!(calls(&api) >= 1);
    let kept = requests.list_comments(&id, 20, None).await.expect("read");
    assert_eq!((calls(&api), &kept), (0, &comments), "Q4's first page kept");
    let likes = requests.list_likes(&id, 20, None).await.expect("read");
    assert!(calls(&api) >= 1);
    let kept = requests.list_likes(&id, 20, None).await.expect("read");
    assert_eq!((calls(&api), &kept), (0, &likes), "Q5's first page kept");
    // Another limit, and a later page, are read.
    requests.list_likes(&id, 5, None).await.expect("read");
    assert!(calls(&api) >= 1, "by limit");
    let cursor = likes.next_cursor.as_deref().expect("more likes");
    requests
        .list_likes(&id, 20, Some(cursor))
        .await
        .expect("read");
    requests
        .list_likes(&id, 20, Some(cursor))
        .await
        .expect("read");
    assert!(calls(&api) >= 2, "a later page each time");

    // A like and an unlike meanwhile: shown once the time to live is past.
    let fan = api.user("latecomer").await;
    api.like(&fan, &post).await;
    api.unlike(&users[0], &post).await;
    api.settle(&mut poller).await;
    assert_eq!(
        requests.get_post(&id).await.expect("read"),
        first,
        "within it"
    );
    clock.advance(Duration::from_secs(1));
    let now = requests
        .get_post(&id)
        .await
        .expect("read")
        .expect("the post");
    assert_eq!(
        now.like_count,
        first.expect("the post").like_count,
        "one in, one out"
    );
    let likes_now = requests.list_likes(&id, 20, None).await.expect("read");
    assert_eq!(likes_now.items[0].user_id.as_str(), fan, "the newest first");

    // A quiet post is read each time.
    let quiet = api.post(&author, "Quiet", "read each time").await;
    let quiet = post_id(&quiet);
    calls(&api);
    requests.get_post(&quiet).await.expect("read");
    requests.get_post(&quiet).await.expect("read");
    assert_eq!(calls(&api), 2, "never kept");
}

/// Past its time to live, an instance's kept Q2 answer of a hot post is
/// checked by the post item alone (one GetItem of a small item, 0.5 RCU,
/// however long the content), which brings its counts and its author's
/// name; it is read whole again only once the post was edited, and a
/// deleted post is gone at the check.
#[tokio::test]
async fn a_kept_hot_post_is_checked_by_its_item_alone_unless_edited() {
    use std::time::Duration;

    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("longread").await;
    let long = "many words ".repeat(4_000);
    let post = api.post(&author, "A long read", &long).await;
    api.make_hot(&post).await;
    let first_fan = api.user("firstfan").await;
    api.like(&first_fan, &post).await;
    api.settle(&mut poller).await;

    let (reader, clock) = read_instance(&api);
    let requests = reader.requests();
    let id = post_id(&post);
    let read = || async {
        api.meter.take();
        let got = requests.get_post(&id).await.expect("read");
        let calls: Vec<(String, f64)> = api
            .meter
            .take()
            .into_iter()
            .map(|call| (call.operation.clone(), call.total()))
            .collect();
        (got, calls)
    };
    let (first, calls) = read().await;
    let first = first.expect("the post");
    assert_eq!(first.content, long);
    assert_eq!(calls.len(), 1, "one Query: {calls:?}");
    assert!(calls[0].1 >= 5.0, "the content's 44 KB: {calls:?}");

    // A like and a rename meanwhile: past the time to live, the item alone.
    let second_fan = api.user("secondfan").await;
    api.like(&second_fan, &post).await;
    api.rename(&author, "renamed_writer").await;
    api.settle(&mut poller).await;
    clock.advance(Duration::from_secs(1));
    let (now, calls) = read().await;
    let now = now.expect("the post");
    assert_eq!(calls, vec![("GetItem".to_owned(), 0.5)]);
    assert_eq!(now.like_count, first.like_count + 1);
    assert_eq!(now.username.as_str(), "renamed_writer");
    assert_eq!(
        (&now.content, &now.updated_at),
        (&first.content, &first.updated_at)
    );
    let (again, calls) = read().await;
    assert_eq!((again.as_ref(), calls.len()), (Some(&now), 0), "kept again");

    // Edited: read whole again once the time to live is past.
    let edited = "fewer words".to_owned();
    let (status, body) = api
        .call(
            "PUT",
            &format!("/posts/{post}"),
            Some(&author),
            Some(json!({"content": edited})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    clock.advance(Duration::from_secs(1));
    let (now, calls) = read().await;
    let now = now.expect("the post");
    assert_eq!(now.content, edited);
    let operations: Vec<&str> = calls.iter().map(|(op, _)| op.as_str()).collect();
    assert_eq!(operations, ["GetItem", "Query"]);

    // Its title edited alone: the content is older than the item, as a
    // Query that read two edits' halves would find it, so each miss reads
    // the post whole (one Query, no check).
    let (status, body) = api
        .call(
            "PUT",
            &format!("/posts/{post}"),
            Some(&author),
            Some(json!({"title": "A longer read"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for checked in [vec!["GetItem", "Query"], vec!["Query"]] {
        clock.advance(Duration::from_secs(1));
        let (now, calls) = read().await;
        assert_eq!(now.expect("the post").title, "A longer read");
        let operations: Vec<&str> = calls.iter().map(|(op, _)| op.as_str()).collect();
        assert_eq!(operations, checked);
    }

    // Deleted: gone at the check.
    let (status, body) = api
        .call("DELETE", &format!("/posts/{post}"), Some(&author), None)
        .await;
    assert_eq!(status, 204, "{body}");
    clock.advance(Duration::from_secs(1));
    let (gone, calls) = read().await;
    assert_eq!((gone, calls.len()), (None, 1));
}

/// Past the page's time to live, an instance reads a hot post's copied
/// first page again (the copy, and the author's blocks), but of the entries
/// the copy names only those it has not read within
/// `HOT_ENTRIES_TTL`: the oldest comments, which every instance shows, are
/// read once in that time by each, not once a second. A comment taken back
/// leaves the page once the copy is made again; a rename shows once the
/// entries' time to live is past.
#[tokio::test]
async fn a_read_instance_reads_a_copied_pages_entries_once_in_their_time_to_live() {
    use blog::store::memory::HOT_ENTRIES_TTL;
    use std::time::Duration;

    let Viral {
        api,
        mut poller,
        post,
        author,
        users,
        comments,
    } = viral(16, 30, 0).await;
    api.settle(&mut poller).await;
    let (reader, clock) = read_instance(&api);
    let requests = reader.requests();
    let id = post_id(&post);
    let page = || async {
        api.meter.take();
        let page = requests.list_comments(&id, 20, None).await.expect("a page");
        let calls: Vec<String> = api.meter.take().into_iter().map(|c| c.operation).collect();
        (page, calls)
    };
    let (first, _) = page().await;
    assert_eq!(first.items.len(), 20);
    clock.advance(Duration::from_secs(1));
    let (again, calls) = page().await;
    assert_eq!(again, first);
    assert_eq!(calls, ["GetItem", "Query"], "the copy and the blocks only");

    // Taken back: gone once the copy is made again; the 21st is read.
    let (status, body) = api.take_back_comment(&author, &post, &comments[0]).await;
    assert_eq!(status, 204, "{body}");
    api.settle(&mut poller).await;
    clock.advance(Duration::from_secs(1));
    let (now, calls) = page().await;
    let shown: Vec<String> = now.items.iter().map(|c| c.comment_id.to_string()).collect();
    assert_eq!(shown, comments[1..21]);
    assert_eq!(
        calls.iter().filter(|c| *c == "BatchGetItem").count(),
        1,
        "the 21st entry: {calls:?}"
    );

    // Renamed: the old name until the entries' time to live is past.
    api.rename(&users[1], "renamed_commenter").await;
    api.settle(&mut poller).await;
    clock.advance(Duration::from_secs(1));
    let (now, _) = page().await;
    assert_ne!(now.items[0].username.as_str(), "renamed_commenter");
    clock.advance(HOT_ENTRIES_TTL);
    let (now, _) = page().await;
    assert_eq!(now.items[0].username.as_str(), "renamed_commenter");
}
