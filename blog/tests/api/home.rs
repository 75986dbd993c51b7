//! The home: the posts of the people the caller follows, delivered by the
//! fan-out as they are published, shown with their counts as they are,
//! gone at the next read when unfollowed, deleted, un-published or erased;
//! a delivery goes on from its saved place and writes each entry once.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::support::{TestApi, post_id, user_id};

/// The post ids of the caller's home, every page `page` at a time.
async fn home(api: &TestApi, reader: &str, page: usize) -> Vec<String> {
    let items = api
        .list(format!("/home?limit={page}"))
        .by(reader)
        .items()
        .await;
    items
        .iter()
        .map(|p| p["postId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn first_item(api: &TestApi, reader: &str) -> Value {
    let (status, body) = api.home(reader).await;
    assert_eq!(status, 200, "{body}");
    body["items"][0].clone()
}

#[tokio::test]
async fn a_home_shows_the_followed_posts_fresh_and_drops_what_is_taken_back() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let reader = api.user("home_reader").await;
    let writer = api.user("home_writer").await;
    let other = api.user("home_other").await;

    // Written before the follow: there at the next read (the follow's
    // backfill), without waiting for the fan-out.
    let old = api
        .post(&writer, "before", "written before the follow")
        .await;
    api.post(&other, "not followed", "never in the home").await;
    api.follow(&reader, &writer).await;
    assert_eq!(home(&api, &reader, 20).await, vec![old.clone()]);

    // Published after: delivered by the fan-out, newest first.
    let new = api.post(&writer, "after", "written after the follow").await;
    api.settle(&mut poller).await;
    assert_eq!(home(&api, &reader, 1).await, [new.clone(), old.clone()]);
    // Counts and names as they are now, with the short form's fields.
    api.like(&other, &new).await;
    api.comment(&other, &new, "nice").await;
    api.rename(&writer, "home_writer_2").await;
    api.settle(&mut poller).await;
    let shown = first_item(&api, &reader).await;
    assert_eq!(
        (
            &shown["likeCount"],
            &shown["commentCount"],
            &shown["username"],
            &shown["title"]
        ),
        (
            &json!(1),
            &json!(1),
            &json!("home_writer_2"),
            &json!("after")
        )
    );
    assert_eq!(shown["publishedAt"], shown["createdAt"]);
    // Nobody else's home has them; a home needs a token.
    assert_eq!(home(&api, &other, 20).await, Vec::<String>::new());
    assert_eq!(api.get("/home").await.0, 401);
    let (status, body) = api.list("/home?limit=26").by(&reader).page().await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!("bad_limit")));

    // Un-published, then deleted: gone at the next read, before any fan-out.
    let (status, _) = api
        .edit_post(&writer, &new, json!({ "status": "draft" }))
        .await;
    assert_eq!(status, 200);
    assert_eq!(home(&api, &reader, 20).await, vec![old.clone()]);
    let (status, _) = api.delete_post(&writer, &old).await;
    assert_eq!(status, 204);
    assert_eq!(home(&api, &reader, 20).await, Vec::<String>::new());

    // Unfollowed: gone at the next read; followed again: back.
    let third = api.post(&writer, "third", "after the deletions").await;
    api.settle(&mut poller).await;
    assert_eq!(home(&api, &reader, 20).await, vec![third.clone()]);
    assert_eq!(api.unfollow(&reader, &writer).await.0, 204);
    assert_eq!(home(&api, &reader, 20).await, Vec::<String>::new());
    api.follow(&reader, &writer).await;
    assert_eq!(home(&api, &reader, 20).await, vec![third.clone()]);

    // The author's account erased: gone at the next read.
    let (status, _) = api.erase(&writer).await;
    assert_eq!(status, 204);
    assert_eq!(home(&api, &reader, 20).await, Vec::<String>::new());
    // And the erasure takes the follow out, with the counts.
    api.settle(&mut poller).await;
    let (_, profile) = api.get_user(&reader).await;
    assert_eq!(profile["followingCount"], 0, "{profile}");
}

/// Sets a post's status through the API (its author's `PUT`).
async fn set_status(api: &TestApi, author: &str, post: &str, status: &str) {
    let (code, body) = api
        .edit_post(author, post, json!({ "status": status }))
        .await;
    assert_eq!(code, 200, "{status}: {body}");
}

/// A post taken back and published again, any number of times, is
/// delivered again at its new place, and shown once; entries of it at its
/// earlier places (and a follow's backfill of it) never make two of it, nor
/// a 5xx.
#[tokio::test]
async fn a_post_published_again_is_in_the_home_once_each_time() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let reader = api.user("again_reader").await;
    let writer = api.user("again_writer").await;
    api.follow(&reader, &writer).await;
    let post = api
        .post(&writer, "again", "published, taken back, again")
        .await;
    api.settle(&mut poller).await;
    assert_eq!(home(&api, &reader, 20).await, vec![post.clone()]);

    for round in 0..3 {
        set_status(&api, &writer, &post, "draft").await;
        api.settle(&mut poller).await;
        assert_eq!(
            home(&api, &reader, 20).await,
            Vec::<String>::new(),
            "{round}"
        );
        set_status(&api, &writer, &post, "published").await;
        api.settle(&mut poller).await;
        // Delivered at its new place: there, once, on every page size.
        assert_eq!(home(&api, &reader, 20).await, vec![post.clone()], "{round}");
        assert_eq!(home(&api, &reader, 1).await, vec![post.clone()], "{round}");
        let shown = first_item(&api, &reader).await;
        assert_ne!(shown["publishedAt"], shown["createdAt"], "{shown}");
    }

    // Followed again: the backfill writes it at its place beside the
    // entries of its earlier places; still one of it, 200.
    assert_eq!(api.unfollow(&reader, &writer).await.0, 204);
    api.follow(&reader, &writer).await;
    assert_eq!(home(&api, &reader, 20).await, vec![post.clone()]);
    assert_eq!(home(&api, &reader, 1).await, vec![post.clone()]);
    // A follower since the last publication has it once too.
    let late = api.user("again_late").await;
    api.follow(&late, &writer).await;
    assert_eq!(home(&api, &late, 20).await, vec![post.clone()]);
    // The reader's home holds it at four places: each publication's.
    let entries = crate::support::partition_items(&api, &format!("HOME#{reader}")).await;
    assert_eq!(entries.len(), 4, "{entries:?}");
}

/// A delivery stopped at its deadline goes on from its saved place: the
/// redelivered record neither starts over nor skips, and every follower
/// gets the entry exactly once.
#[tokio::test]
async fn a_delivery_goes_on_from_its_place_and_writes_each_entry_once() {
    let api = TestApi::start_with_delivery_page(2).await;
    let mut poller = api.poller();
    let author = api.user("deliver_author").await;
    let mut followers = Vec::new();
    for i in 0..24 {
        let follower = api.user_named(format!("deliver_{i:02}")).await;
        api.follow(&follower, &author).await;
        followers.push(follower);
    }
    api.settle(&mut poller).await;
    let (_, profile) = api.get_user(&author).await;
    assert_eq!(profile["followerCount"], 24);

    // The post's INSERT starts the deliveries; each walks one page, then
    // its deadline is near: it saves its place and hands off.
    let post = api.post(&author, "delivered", "to 24 homes").await;
    let records = api.stream_records().await;
    let insert = records
        .iter()
        .rev()
        .find(|r| {
            let pk = serde_dynamo::AttributeValue::S(format!("POST#{post}"));
            let sk = serde_dynamo::AttributeValue::S("POST".to_owned());
            r.event_name == "INSERT"
                && r.change.keys.get("PK") == Some(&pk)
                && r.change.keys.get("SK") == Some(&sk)
        })
        .expect("the post's INSERT")
        .clone();
    let store = &api.app.store;
    let near = blog::store::deadline::Deadline::after_checks(0);
    blog::fanout::apply(store, &insert, &near)
        .await
        .expect("start");
    let mut started = Vec::new();
    for shard in 0..blog::keys::PUSH_SHARDS {
        let paused = store
            .fanout()
            .deliver(
                &blog::keys::delivery(&post_id(&post), &post_id(&post), shard),
                &near,
            )
            .await
            .expect("walk");
        started.push((shard, paused));
    }
    let walked: Vec<_> = started
        .iter()
        .filter(|(_, d)| *d != blog::store::home::Delivering::Stale)
        .collect();
    assert!(!walked.is_empty(), "{started:?}");
    assert!(
        walked
            .iter()
            .any(|(_, d)| matches!(d, blog::store::home::Delivering::Paused { written: 2 })),
        "some shard holds more than a page: {started:?}"
    );
    let partly: usize = homes_holding(&api, &followers, &post).await;
    assert!(partly < 24, "{partly}");

    // Every record again (the INSERT redelivered, the handoffs), through the
    // poller as Lambda would: the walks go on from their places.
    blog::fanout::apply(store, &insert, &blog::store::deadline::Deadline::NONE)
        .await
        .expect("again");
    api.settle(&mut poller).await;
    assert_eq!(homes_holding(&api, &followers, &post).await, 24);
    // Delivered once each: the deliveries' counts add up to the followers.
    let mut delivered = 0;
    for shard in 0..blog::keys::PUSH_SHARDS {
        let key = blog::keys::delivery(&post_id(&post), &post_id(&post), shard).item();
        if let Some(item) = store.db().get("a delivery", key, true).await.expect("read") {
            assert_eq!(item.get("done").and_then(|d| d.as_bool().ok()), Some(&true));
            delivered += item
                .get("delivered")
                .and_then(|d| d.as_n().ok())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or_default();
        }
    }
    assert_eq!(delivered, 24);
    // A replay after the end writes nothing.
    let before = crate::support::table_snapshot(&api).await;
    blog::fanout::apply(store, &insert, &blog::store::deadline::Deadline::NONE)
        .await
        .expect("replay");
    for shard in 0..blog::keys::PUSH_SHARDS {
        let none = blog::store::deadline::Deadline::NONE;
        let again = store
            .fanout()
            .deliver(
                &blog::keys::delivery(&post_id(&post), &post_id(&post), shard),
                &none,
            )
            .await;
        assert_eq!(again.expect("replay"), blog::store::home::Delivering::Stale);
    }
    let after = crate::support::table_snapshot(&api).await;
    assert_eq!(after.len(), before.len());
}

/// How many of `readers`' homes hold `post`, each at most once.
async fn homes_holding(api: &TestApi, readers: &[String], post: &str) -> usize {
    let mut holding = HashMap::new();
    for reader in readers {
        let key = blog::keys::home_pk(&user_id(reader));
        let query = api
            .app
            .store
            .client()
            .query()
            .table_name(api.app.store.table())
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(key));
        let items = query.send().await.expect("query").items.unwrap_or_default();
        let held = items
            .iter()
            .filter(|i| i.get("postId").and_then(|v| v.as_s().ok()) == Some(&post.to_owned()))
            .count();
        assert!(held <= 1, "{reader} holds {post} {held} times");
        holding.insert(reader.clone(), held);
    }
    holding.values().sum()
}

/// A post's delivery costs what data-model.md says: the author's eight
/// counts read once, one delivery a shard with followers, 1 WCU a follower
/// (an entry is under 1 KB), and one save of its place a page.
#[tokio::test]
async fn a_delivery_costs_one_write_a_follower() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("costly_author").await;
    let mut shards = std::collections::BTreeSet::new();
    for i in 0..12 {
        let follower = api.user_named(format!("costly_{i:02}")).await;
        api.follow(&follower, &author).await;
        shards.insert(blog::store::items::follow::follower_shard(
            &user_id(&follower),
            false,
        ));
    }
    api.settle(&mut poller).await;
    api.meter.take();
    api.post(&author, "costed", "one write a follower").await;
    api.settle(&mut poller).await;
    let calls = api.meter.take();
    let units = |op: &str| -> (usize, f64) {
        let of: Vec<_> = calls.iter().filter(|c| c.operation == op).collect();
        (of.len(), of.iter().map(|c| c.table + c.indexes).sum())
    };
    // The entries: 12 followers, 1 WCU each, in one BatchWriteItem a shard.
    assert_eq!(units("BatchWriteItem"), (shards.len(), 12.0));
    // The counts read once (Local reports units for the found ones only),
    // and the post's author (the batch's authors, read together).
    assert_eq!(units("BatchGetItem").0, 2);
    let puts = calls
        .iter()
        .filter(|c| c.operation == "PutItem" && c.error.is_none())
        .count();
    // The post's feed entry and one delivery a shard with followers.
    assert_eq!(puts, 1 + shards.len());
}

/// The celebrity path (pull follows, the threshold at 1 follower here): a
/// follow of an author who already has followers is a pull follow, up to
/// the follower's [`PULL_LIMIT`]; a post is written into its push
/// followers' homes only, yet every follower's home shows it at the next
/// read, newest first across pushed and pulled posts, each once; a home
/// read costs at most 3 + [`PULL_LIMIT`] calls; an unfollow of a pulled
/// author takes their posts out at the next read; the audit finds the pull
/// shards' counts right.
#[tokio::test]
async fn a_famous_authors_posts_are_pulled_by_the_follows_made_after_its_threshold() {
    use blog::store::follows::PULL_LIMIT;
    let api = TestApi::start_with(|store| store.with_pull_threshold(1)).await;
    let mut poller = api.poller();
    let first = api.user("first_fan").await;
    let reader = api.user("pull_reader").await;
    let mut stars = Vec::new();
    for i in 0..=PULL_LIMIT {
        let star = api.user_named(format!("star_{i:02}")).await;
        // Their first follower is a push follow (no followers yet).
        api.follow(&first, &star).await;
        stars.push(star);
    }
    let early = api
        .post(&stars[0], "early", "before the reader followed")
        .await;
    api.settle(&mut poller).await;
    for star in &stars {
        api.follow(&reader, star).await;
    }
    let profile = api.profile(&reader).await;
    assert_eq!(profile.following_count, stars.len() as u64);
    let mut pulled: Vec<String> = profile.pulls.iter().map(|u| u.to_string()).collect();
    pulled.sort();
    let mut wanted: Vec<String> = stars[..PULL_LIMIT].to_vec();
    wanted.sort();
    // The first PULL_LIMIT are pulled, the last one pushed.
    assert_eq!(pulled, wanted);
    // A pull follow backfills nothing: the early post shows at once, from
    // the star's own list, with no entry in the reader's home.
    assert_eq!(home(&api, &reader, 20).await, vec![early.clone()]);
    assert_eq!(
        homes_holding(&api, std::slice::from_ref(&reader), &early).await,
        0
    );

    // Every star posts: delivered into the first fan's home (push) and, of
    // the reader's, only the last star's; the reader's home shows all.
    let mut posts = Vec::new();
    for star in &stars {
        posts.push(api.post(star, "famous", "read by the pulls").await);
    }
    api.settle(&mut poller).await;
    for (i, post) in posts.iter().enumerate() {
        assert_eq!(
            homes_holding(&api, std::slice::from_ref(&first), post).await,
            1
        );
        let pushed = usize::from(i == PULL_LIMIT);
        assert_eq!(
            homes_holding(&api, std::slice::from_ref(&reader), post).await,
            pushed
        );
    }
    let mut newest_first: Vec<String> = posts.iter().rev().cloned().collect();
    newest_first.push(early.clone());
    for page in [1, 3, 20] {
        assert_eq!(
            home(&api, &reader, page).await,
            newest_first,
            "pages of {page}"
        );
    }
    // One page's calls: the home's Query and the profile, a Query a pulled
    // author, one BatchGetItem.
    api.meter.take();
    home(&api, &reader, 20).await;
    let calls = api.meter.take();
    assert_eq!(calls.len(), 3 + PULL_LIMIT, "{calls:?}");

    // The followers count the pull shards too.
    let (_, star) = api.get_user(&stars[0]).await;
    assert_eq!(star["followerCount"], json!(2), "{star}");
    // An unfollow of a pulled author: their posts gone at the next read,
    // their place in the reader's pulls free again.
    let (status, _) = api.unfollow(&reader, &stars[0]).await;
    assert_eq!(status, 204);
    let shown = home(&api, &reader, 20).await;
    assert!(
        !shown.contains(&posts[0]) && !shown.contains(&early),
        "{shown:?}"
    );
    assert_eq!(shown.len(), PULL_LIMIT);
    assert_eq!(api.profile(&reader).await.pulls.len(), PULL_LIMIT - 1);
    api.settle(&mut poller).await;
    let (_, star) = api.get_user(&stars[0]).await;
    assert_eq!(star["followerCount"], json!(1), "{star}");
    assert!(api.audit(false).await.findings.is_empty());
}

/// What a deployed `get-home` instance does for a reader who pulls an
/// author: one Query of that author's list, then none for first pages
/// within the cache's time to live (a new post of theirs waits for it),
/// while the posts, follows and profiles are read at every request (a
/// deletion shows at once); pages past the first query the list; after
/// the time to live, one Query again.
#[tokio::test]
async fn an_instance_reads_a_pulled_authors_list_once_per_time_to_live() {
    use blog::{api::feed::Clock, store::memory::PulledLists};
    use std::time::Duration;
    let ttl = Duration::from_secs(2);
    let clock = Clock::manual();
    let lists = PulledLists::new(ttl, clock.clone());
    let api =
        TestApi::start_with(|store| store.with_pull_threshold(1).with_pulled_lists(lists)).await;
    let mut poller = api.poller();
    let first = api.user("first_fan").await;
    let reader = api.user("cached_reader").await;
    let star = api.user("cached_star").await;
    // Their first follower pushes (no followers yet); the reader's pulls.
    api.follow(&first, &star).await;
    api.settle(&mut poller).await;
    api.follow(&reader, &star).await;
    assert_eq!(api.profile(&reader).await.pulls.len(), 1);
    let older = api.post(&star, "older", "read once").await;
    let kept = api.post(&star, "kept", "read once").await;
    api.settle(&mut poller).await;

    let operations = |calls: Vec<blog::store::meter::Call>| {
        let mut names: Vec<String> = calls.into_iter().map(|c| c.operation).collect();
        names.sort();
        names
    };
    api.meter.take();
    assert_eq!(home(&api, &reader, 20).await, [kept.clone(), older.clone()]);
    assert_eq!(
        operations(api.meter.take()),
        ["BatchGetItem", "GetItem", "Query", "Query"],
        "the home, the profile, the star's list, the page's items"
    );

    // Within the time to live (its last millisecond): the list as read,
    // without its Query; the new post not yet shown.
    let newer = api.post(&star, "newer", "after the list was read").await;
    api.settle(&mut poller).await;
    clock.advance(ttl - Duration::from_millis(1));
    api.meter.take();
    assert_eq!(home(&api, &reader, 20).await, [kept.clone(), older.clone()]);
    assert_eq!(
        operations(api.meter.take()),
        ["BatchGetItem", "GetItem", "Query"]
    );
    // The posts are read at every request: a deleted one is gone at once.
    let (status, _) = api.delete_post(&star, &older).await;
    assert_eq!(status, 204);
    assert_eq!(home(&api, &reader, 20).await, std::slice::from_ref(&kept));
    // A page past the first reads the list (before its cursor) itself.
    api.meter.take();
    assert_eq!(home(&api, &reader, 1).await, std::slice::from_ref(&kept));
    let queries = operations(api.meter.take())
        .into_iter()
        .filter(|o| o == "Query")
        .count();
    assert_eq!(
        queries, 3,
        "a first page from the cache (its home's Query), a second with the list's Query too"
    );

    // The time to live passed: one Query again, the new post shown.
    clock.advance(Duration::from_millis(1));
    api.meter.take();
    assert_eq!(home(&api, &reader, 20).await, [newer, kept]);
    assert_eq!(
        operations(api.meter.take()),
        ["BatchGetItem", "GetItem", "Query", "Query"]
    );
}
