//! A hot post (`blog::store::hot`): its likes and counts spread over shard
//! partitions once its own partition is throttled. Here the switch is made
//! directly (DynamoDB Local throttles nothing); `fault_proxy.rs` drives it
//! through a DynamoDB that enforces the partition limits.

use std::collections::HashSet;

use blog::{
    keys::{PK, PostPartition, SK},
    store::items::counter::HOT_SHARDS,
};
use serde_json::{Value, json};

use crate::{
    scene::{Cast, Scene},
    support::{TestApi, post_id, table_snapshot},
};

/// Every item of `path` (a list), `limit` at a time, in order.
pub(crate) async fn every_page(api: &TestApi, path: &str, limit: usize) -> Vec<Value> {
    let mut seen = Vec::new();
    api.list(format!("{path}?limit={limit}"))
        .each_page(|page| {
            let items = page["items"].as_array().cloned().unwrap_or_default();
            assert!(items.len() <= limit);
            seen.extend(items);
        })
        .await;
    seen
}

/// The partitions of `post` that hold anything.
pub(crate) async fn partitions_of(api: &TestApi, post: &str) -> HashSet<String> {
    table_snapshot(api)
        .await
        .iter()
        .filter_map(|item| item.get(PK).and_then(|pk| pk.as_s().ok()).cloned())
        .filter(|pk| pk.starts_with(&format!("POST#{post}")))
        .collect()
}

#[tokio::test]
async fn a_hot_post_counts_every_like_and_comment_exactly_on_every_copy() {
    let api = TestApi::start().await;
    let cast = Cast {
        author: "hotauthor",
        title: "Viral",
        content: "everyone likes it",
        crowd: "early",
        width: 1,
    };
    let Scene {
        author,
        post,
        users: early,
        mut poller,
    } = Scene::new(&api, 3, cast).await;
    let likes = format!("/posts/{post}/likes");
    // Given while the post is quiet: in its own partition, counted on it.
    for who in &early {
        api.like(who, &post).await;
    }
    let quiet_comment = api.comment(&early[0], &post, "first").await;

    let shards = api
        .app
        .store
        .requests()
        .make_hot(&post_id(&post))
        .await
        .expect("hot");
    assert_eq!(shards, Some(HOT_SHARDS));
    assert_eq!(
        api.app
            .store
            .requests()
            .make_hot(&post_id(&post))
            .await
            .expect("hot"),
        shards,
        "made hot once"
    );

    // An early liker likes again: the like given while quiet answers.
    let (status, again) = api.like_post(&early[1], &post).await;
    assert_eq!((status, again["userId"].clone()), (200, json!(early[1])));
    // New likers go to their shards; each likes once.
    let late: Vec<String> =
        futures::future::join_all((0..24).map(|i| api.user_named(format!("late{i:02}")))).await;
    for who in &late {
        let (status, like) = api.like_post(who, &post).await;
        assert_eq!(status, 201, "{like}");
        let (status, _) = api.like_post(who, &post).await;
        assert_eq!(status, 200, "a second like by the same user");
    }
    let hot_comments: Vec<String> = futures::future::join_all(
        late.iter()
            .take(5)
            .map(|who| api.comment(who, &post, "me too")),
    )
    .await;
    // Taken back: one like of each kind, one comment of each kind.
    for who in [&early[2], &late[3]] {
        let (status, _) = api.unlike(who, &post).await;
        assert_eq!(status, 204);
    }
    let (status, _) = api.unlike(&late[3], &post).await;
    assert_eq!(status, 204, "no like left to take back");
    for comment in [&quiet_comment, &hot_comments[0]] {
        let (status, body) = api.take_back_comment(&author, &post, comment).await;
        assert_eq!(status, 204, "{body}");
    }
    // The post's partition, its 16 shards (the switch puts their counters,
    // the widening its own) and their group's partition, past the shards.
    let partitions = partitions_of(&api, &post).await;
    assert_eq!(
        partitions.len(),
        1 + usize::from(HOT_SHARDS) + 1,
        "{partitions:?}"
    );
    assert!(partitions.contains(&format!("POST#{post}#128")));

    api.settle(&mut poller).await;
    let (expected_likes, expected_comments) = (2 + 23, 4);
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(expected_likes), json!(expected_comments)),
        "Q2 counts every like and comment: {got}"
    );
    let (_, mine) = api.user_posts(&author).await;
    assert_eq!(
        mine["items"][0]["likeCount"],
        json!(expected_likes),
        "Q3's copy"
    );
    assert_eq!(mine["items"][0]["commentCount"], json!(expected_comments));
    let (_, feed) = api.get_feed().await;
    assert_eq!(
        feed["items"][0]["likeCount"],
        json!(expected_likes),
        "the feed's copy"
    );
    assert_eq!(feed["items"][0]["commentCount"], json!(expected_comments));

    // Q5 merges the post's partition and its shards, newest first, each
    // like once, whatever the page size.
    for limit in [1, 7, 25, 100] {
        let listed = every_page(&api, &likes, limit).await;
        let ids: Vec<&str> = listed.iter().filter_map(|l| l["userId"].as_str()).collect();
        assert_eq!(ids.len(), expected_likes, "limit {limit}: {ids:?}");
        let unique: HashSet<&&str> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "each like once");
        let times: Vec<&str> = listed
            .iter()
            .filter_map(|l| l["createdAt"].as_str())
            .collect();
        assert!(
            times.windows(2).all(|w| w[0] >= w[1]),
            "newest first: {times:?}"
        );
        assert_eq!(ids.last(), Some(&early[0].as_str()), "the oldest like last");
    }
    let comments = every_page(&api, &format!("/posts/{post}/comments"), 3).await;
    assert_eq!(comments.len(), expected_comments);

    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");
}

#[tokio::test]
async fn a_deleted_hot_post_leaves_nothing_in_any_shard_and_takes_no_like() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("gone").await;
    let fan = api.user("fan").await;
    let post = api.post(&author, "Short-lived", "viral").await;
    api.like(&fan, &post).await;
    api.make_hot(&post).await;
    let late = api.user("late").await;
    api.like(&late, &post).await;
    api.comment(&late, &post, "wow").await;

    let (status, _) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204);
    let other = api.user("other").await;
    let (status, body) = api.like_post(&other, &post).await;
    assert_eq!(status, 404, "a like on the deleted hot post: {body}");
    let (status, _) = api.unlike(&late, &post).await;
    assert_eq!(status, 404);

    api.settle(&mut poller).await;
    assert!(
        partitions_of(&api, &post).await.is_empty(),
        "every shard emptied"
    );
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");
}

#[tokio::test]
async fn an_erased_account_takes_its_likes_and_comments_out_of_a_hot_post() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("stays").await;
    let leaver = api.user("leaver").await;
    let post = api.post(&author, "Hot", "post").await;
    api.like(&leaver, &post).await;
    api.comment(&leaver, &post, "quiet").await;
    api.make_hot(&post).await;
    let fan = api.user("fan").await;
    api.like(&fan, &post).await;
    // The leaver's like is in the post's partition; a comment counted in a shard.
    api.comment(&leaver, &post, "hot").await;
    api.settle(&mut poller).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(2), json!(2))
    );

    let (status, _) = api.erase(&leaver).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(1), json!(0)),
        "{got}"
    );
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");

    // A hot like of an account erased afterwards lives in a shard.
    let (status, _) = api.erase(&fan).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["likeCount"], json!(0), "{got}");
    let shard = PostPartition::shard(post_id(&post), 0).pk();
    assert!(shard.starts_with(&format!("POST#{post}#")));
    // Neither erased account keeps a mark of a like (the leaver's was
    // given while the post was quiet and moved; the fan's, while hot).
    assert_eq!(marks_of(&api, &post).await.len(), 0);
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");
}

/// Part of the point of a hot post: a batch of the stream writes each post
/// once, however many of its likes the batch holds. 1,000 likes on 10 hot
/// posts, delivered as one batch, write 10 group counters (16 shards each:
/// one group a post) and their authors' 10 likes groups (their newest
/// actors) and nothing else; the 10 group changes that makes then write 10
/// post items (each with its GSI1 entry, Q3's copy), and those 10 feed
/// entries.
#[tokio::test]
async fn a_batch_of_likes_on_hot_posts_writes_each_post_and_its_copies_once() {
    use futures::StreamExt;

    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("popular").await;
    let mut posts = Vec::new();
    for i in 0..10 {
        let post = api.post(&author, format!("post {i}"), "c").await;
        api.make_hot(&post).await;
        posts.push(post_id(&post));
    }
    let fans: Vec<String> =
        futures::future::join_all((0..100).map(|i| api.user_named(format!("fan{i:03}")))).await;
    api.settle(&mut poller).await;

    let likes = fans.iter().flat_map(|fan| {
        posts
            .iter()
            .map(move |post| (post, crate::support::user_id(fan)))
    });
    let liked: Vec<_> = futures::stream::iter(likes)
        .map(|(post, fan)| async move { api.app.store.requests().like_post(post, &fan).await })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(liked.iter().all(Result::is_ok), "1,000 likes");

    // Everything the stream holds now, filtered as deployed, as one batch.
    let records = std::sync::Mutex::new(Vec::new());
    let collect = |event: aws_lambda_events::event::dynamodb::Event| {
        records.lock().expect("lock").extend(event.records);
        async { Ok(Default::default()) }
    };
    while poller.poll_once(&collect).await.expect("read the stream") > 0 {}
    let mut batch = aws_lambda_events::event::dynamodb::Event::default();
    batch.records = records.into_inner().expect("lock");
    assert!(
        batch.records.len() >= 2000,
        "the likes and the counters' changes"
    );
    api.meter.take();
    let response = blog::fanout::handle(&api.app.store, batch).await;
    assert!(response.batch_item_failures.is_empty());
    // The first-pages step apart (store::first_pages): the copies read in
    // one BatchGetItem (the other: the likers' profiles, read together by
    // the rules), and each post's likes' first page (none yet) made once,
    // by the merge (Queries), in one transaction.
    let (paged, rest): (Vec<_>, Vec<_>) = api
        .meter
        .take()
        .into_iter()
        .filter(|c| c.operation != "GetItem")
        .partition(|c| {
            ["BatchGetItem", "Query", "TransactWriteItems"].contains(&c.operation.as_str())
        });
    let count = |op: &str| paged.iter().filter(|c| c.operation == op).count();
    assert_eq!(
        (count("BatchGetItem"), count("TransactWriteItems")),
        (2, 10),
        "each post's first page copied once"
    );
    let writes = |calls: Vec<blog::store::meter::Call>| {
        let mut writes: Vec<_> = calls
            .into_iter()
            .filter(|c| {
                !["DescribeTable", "GetItem", "BatchGetItem", "Query"]
                    .contains(&c.operation.as_str())
            })
            .map(|c| (c.operation, c.table, c.indexes))
            .collect();
        writes.sort_by(|a, b| a.partial_cmp(b).expect("numbers"));
        writes
    };
    let update = |indexes: f64| ("UpdateItem".to_owned(), 1.0, indexes);
    let expected: Vec<_> = [vec![update(0.0); 10], vec![update(1.0); 10]].concat();
    assert_eq!(
        writes(rest),
        expected,
        "each post's group counter once, and its author's likes group once, \
         however many of its likes the batch holds (its newest actors, with \
         its GSI1 place in the author's notifications)"
    );

    api.meter.take();
    api.settle(&mut poller).await;
    assert_eq!(
        writes(api.meter.take()),
        expected,
        "each post once, with its GSI1 entry (Q3's copy), and each feed entry once"
    );
    for post in &posts {
        let (_, got) = api.get_post(&post.to_string()).await;
        assert_eq!(got["likeCount"], json!(100));
    }
}

/// A like given while a post is hot lives in one of its shards: the liker's
/// export finds it there, beside one given while the post was quiet.
#[tokio::test]
async fn an_export_holds_the_likes_a_user_gave_hot_posts() {
    let api = TestApi::start().await;
    let author = api.user("author").await;
    let fan = api.user("fan").await;
    let quiet = api.post(&author, "Quiet", "post").await;
    let hot = api.post(&author, "Hot", "post").await;
    api.like(&fan, &quiet).await;
    api.make_hot(&hot).await;
    api.like(&fan, &hot).await;
    let own = format!("POST#{hot}");
    let sharded: Vec<_> = table_snapshot(&api)
        .await
        .into_iter()
        .filter(|item| {
            item.get("type")
                .and_then(|t| t.as_s().ok())
                .map(String::as_str)
                == Some("like")
        })
        .filter_map(|item| item.get(PK).and_then(|pk| pk.as_s().ok()).cloned())
        .filter(|pk| pk.starts_with(&format!("{own}#")))
        .collect();
    assert_eq!(sharded.len(), 1, "the hot like is in a shard");

    let (status, page) = api.export_as(&fan, &fan, "limit=25").await;
    assert_eq!(status, 200, "{page}");
    let mut liked: Vec<_> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|item| item["like"]["postId"].as_str())
        .collect();
    liked.sort_unstable();
    let mut expected = vec![quiet.as_str(), hot.as_str()];
    expected.sort_unstable();
    assert_eq!(liked, expected, "{page}");
}

/// GETs `path`, returning its status, body and the Query calls it made.
async fn queried(api: &TestApi, path: &str) -> (u16, Value, usize) {
    api.meter.take();
    let (status, body) = api.get(path).await;
    let queries = api
        .meter
        .take()
        .into_iter()
        .filter(|c| c.operation == "Query")
        .count();
    (status, body, queries)
}

#[tokio::test]
async fn a_forged_likes_cursor_is_refused_and_never_decides_how_much_is_read() {
    use blog::store::cursor;
    let api = TestApi::start().await;
    let author = api.user("cursors").await;
    let (quiet, hot) = (
        api.post(&author, "Quiet", "q").await,
        api.post(&author, "Hot", "h").await,
    );
    let likers: Vec<String> =
        futures::future::join_all((0..4).map(|i| api.user_named(format!("liker{i}")))).await;
    for who in &likers {
        api.like(who, &quiet).await;
    }
    api.like(&likers[0], &hot).await;
    api.make_hot(&hot).await;
    for who in &likers[1..] {
        api.like(who, &hot).await;
    }
    let real = 1 + usize::from(HOT_SHARDS);

    // The server's own cursors: a quiet post's page continues in one Query,
    // a hot post's in its own partition and each shard.
    let (status, page, q) = queried(&api, &format!("/posts/{quiet}/likes?limit=1")).await;
    assert_eq!((status, q), (200, 1), "{page}");
    let quiet_cursor = page["nextCursor"].as_str().expect("more").to_owned();
    let (status, page, q) = queried(&api, &format!("/posts/{hot}/likes?limit=1")).await;
    assert_eq!((status, q), (200, real), "{page}");
    let hot_cursor = page["nextCursor"].as_str().expect("more").to_owned();
    for (post, cursor) in [(&quiet, &quiet_cursor), (&hot, &hot_cursor)] {
        let path = format!("/posts/{post}/likes?limit=1&cursor={cursor}");
        let (status, page, q) = queried(&api, &path).await;
        assert_eq!(status, 200, "{page}");
        assert!(q <= real, "{q} Queries");
    }

    // The like id a cursor of each post names, with a forged shard count.
    let after = |c: &str, list: &str| cursor::decode(c, list).expect("the server's cursor");
    let quiet_after = after(&quiet_cursor, &format!("likes:{quiet}"));
    let hot_after = after(&hot_cursor, &format!("likes:{hot}"));
    let hot_like = hot_after.split('.').next().expect("an id").to_owned();
    let forged = [
        (&quiet, format!("{quiet_after}.{HOT_SHARDS}")),
        (&quiet, format!("{quiet_after}.255")),
        (&quiet, format!("{quiet_after}.1")),
        (&quiet, format!("{quiet_after}.0")),
        (&hot, format!("{hot_like}.1")),
        (&hot, format!("{hot_like}.255")),
        (&hot, format!("{hot_like}.0")),
        (&hot, format!("{hot_like}.-16")),
        (&hot, format!("{hot_like}.{}", HOT_SHARDS + 1)),
    ];
    for (post, raw) in forged {
        let cursor = cursor::encode(&format!("likes:{post}"), &raw);
        let path = format!("/posts/{post}/likes?cursor={cursor}");
        let (status, body, q) = queried(&api, &path).await;
        assert_eq!(status, 400, "{raw}: {body}");
        assert_eq!(body["error"]["code"], json!("bad_cursor"), "{raw}");
        assert!(q <= 1, "{raw}: a refused cursor made {q} Queries");
    }
    // Another post's cursor, another list's, and one past any the server
    // writes: refused before any read.
    let comments = cursor::encode(&format!("comments:{hot}"), &hot_like);
    let oversized = cursor::encode(&format!("likes:{hot}"), &"7".repeat(600));
    for (post, cursor) in [
        (&quiet, hot_cursor.clone()),
        (&hot, quiet_cursor.clone()),
        (&hot, comments),
        (&hot, oversized),
    ] {
        let path = format!("/posts/{post}/likes?cursor={cursor}");
        let (status, body, q) = queried(&api, &path).await;
        assert_eq!(
            (status, body["error"]["code"].clone(), q),
            (400, json!("bad_cursor"), 0),
            "{cursor}: {body}"
        );
    }
}

/// `delta` added to `counter` of the item at `key`, as a fault would.
async fn damage(api: &TestApi, key: blog::keys::Key, counter: blog::keys::Counter, delta: i64) {
    use aws_sdk_dynamodb::types::AttributeValue;
    use blog::store::table::{Expr, Landed, Write};
    let change = Expr::new("SET #c = #c + :d")
        .name("#c", counter.attribute())
        .value(":d", AttributeValue::N(delta.to_string()));
    let write = Write::update(key.item(), change, Landed::Untold);
    let written = api.app.store.db().write("damage", &write).await;
    assert!(written.expect("written").done());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_audit_repairs_a_live_hot_post_exactly_while_its_fan_out_is_behind() {
    use blog::{keys::Counter, store::items::counter::ShardCounterItem};
    let api = TestApi::start().await;
    let cast = Cast {
        author: "audited",
        title: "Hot, audited",
        content: "live",
        crowd: "reader",
        width: 2,
    };
    let Scene {
        post,
        users,
        mut poller,
        ..
    } = Scene::new(&api, 30, cast).await;
    // Quiet: 5 likes and 2 comments on the post item; then hot: 10 likes
    // and 3 comments in its shards, all added by the fan-out.
    for who in &users[..5] {
        api.like(who, &post).await;
    }
    api.comment(&users[0], &post, "quiet").await;
    api.comment(&users[1], &post, "quiet too").await;
    api.make_hot(&post).await;
    for who in &users[5..15] {
        api.like(who, &post).await;
    }
    for who in &users[5..8] {
        api.comment(who, &post, "hot").await;
    }
    api.settle(&mut poller).await;
    // Damage: the post's likes 4 too many, shard 3's 3 too many.
    let id = post_id(&post);
    damage(&api, blog::keys::post_item(&id), Counter::Likes, 4).await;
    damage(&api, ShardCounterItem::key_of(id, 3), Counter::Likes, 3).await;

    // With the fan-out stopped: likes, unlikes (quiet and hot) and comments
    // before the audit and while it repairs.
    let likes = format!("/posts/{post}/likes");
    let before = async {
        for who in &users[15..20] {
            api.like(who, &post).await;
        }
        api.comment(&users[15], &post, "pending").await;
    };
    before.await;
    let writes = async {
        for (i, who) in users[20..30].iter().enumerate() {
            api.like(who, &post).await;
            // Every quiet liker's like (users 0–4) and five hot ones.
            let taken_back = if i % 2 == 0 {
                &users[i / 2]
            } else {
                &users[5 + i]
            };
            let (status, _) = api.unlike(taken_back, &post).await;
            assert_eq!(status, 204);
            api.comment(who, &post, "meanwhile").await;
        }
    };
    let (report, ()) = futures::join!(api.audit(true), writes);
    assert!(report.repaired >= 1, "{:?}", report.findings);

    // The fan-out resumes; then the counts are the items, and a second
    // audit (repairing what the first was refused for) leaves them so.
    api.settle(&mut poller).await;
    api.audit(true).await;
    api.settle(&mut poller).await;
    let liked = every_page(&api, &likes, 100).await.len();
    let commented = every_page(&api, &format!("/posts/{post}/comments"), 100)
        .await
        .len();
    assert_eq!((liked, commented), (30 - 10, 2 + 3 + 1 + 10));
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(liked), json!(commented)),
        "{got}"
    );
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "exact after the repair");
}

/// The fan-out lost every record of a hot post's likes (the stream read
/// and dropped): the audit finds the shards their groups have not added,
/// adds them onto the groups; then finds the groups the post has not added,
/// and adds those: the post counts every like, and nothing is added twice.
#[tokio::test]
async fn the_audit_adds_what_the_fan_out_lost_shard_to_group_to_post() {
    use blog::audit::Finding;

    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("lossy").await;
    let post = api.post(&author, "Lost records", "x").await;
    api.make_hot(&post).await;
    api.settle(&mut poller).await;
    let fans: Vec<String> =
        futures::future::join_all((0..6).map(|i| api.user_named(format!("lost{i}")))).await;
    api.settle(&mut poller).await;
    let drop_records = |event: aws_lambda_events::event::dynamodb::Event| {
        drop(event);
        async { Ok(Default::default()) }
    };
    for fan in &fans {
        api.like(fan, &post).await;
    }
    while poller
        .poll_once(&drop_records)
        .await
        .expect("read the stream")
        > 0
    {}
    let kinds = |findings: &[Finding]| {
        let shards = findings
            .iter()
            .filter(|f| matches!(f, Finding::ShardNotAdded { .. }))
            .count();
        let groups = findings
            .iter()
            .filter(|f| matches!(f, Finding::GroupNotAdded { .. }))
            .count();
        (shards, groups)
    };
    let shards = api.audit(true).await;
    let (lost, groups) = kinds(&shards.findings);
    assert!(lost >= 1 && groups == 0, "{:?}", shards.findings);
    assert_eq!(shards.repaired, shards.findings.len());
    // The groups' MODIFYs from those repairs, dropped too.
    while poller
        .poll_once(&drop_records)
        .await
        .expect("read the stream")
        > 0
    {}
    let groups = api.audit(true).await;
    assert_eq!(kinds(&groups.findings), (0, 1), "{:?}", groups.findings);
    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["likeCount"], json!(6), "{got}");
    api.settle(&mut poller).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["likeCount"], json!(6), "nothing added twice: {got}");
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "exact");
}

#[tokio::test]
async fn a_post_made_hot_between_its_deletions_read_and_write_is_read_again() {
    use blog::store::{deletion::Deleting, items::post::PostItem};
    let api = TestApi::start().await;
    let author = api.user("racing").await;
    let post = api.post(&author, "Racing", "the switch").await;
    let id = post_id(&post);
    let read = || async {
        let key = blog::keys::post_item(&id).item();
        let found = api.app.store.db().get_entity::<PostItem>(key, true);
        found.await.expect("read").expect("the post")
    };
    // The deletion read it quiet; a like's switch made it hot; then the
    // deletion's write: refused, nothing deleted.
    let quiet = read().await;
    api.make_hot(&post).await;
    let deleting = api.app.store.delete_post_as_read(&quiet).await;
    assert_eq!(deleting.expect("answered"), Deleting::Changed);
    assert_eq!(api.get_post(&post).await.0, 200);

    // Read again, it is deleted with its shards closed: no like or comment
    // answers 201 after.
    let hot = read().await;
    let deleting = api.app.store.delete_post_as_read(&hot).await;
    assert_eq!(deleting.expect("answered"), Deleting::Done);
    let fan = api.user("late_fan").await;
    let (status, body) = api.like_post(&fan, &post).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = api.comment_on(&fan, &post, "too late").await;
    assert_eq!(status, 404, "{body}");
    let counters = table_snapshot(&api)
        .await
        .into_iter()
        .filter(|item| {
            item.get("type").and_then(|t| t.as_s().ok()) == Some(&"shardCounter".to_owned())
        })
        .count();
    assert_eq!(counters, 0, "every shard closed");
}

#[tokio::test]
async fn a_quiet_likers_like_of_a_deleted_hot_post_answers_404() {
    let api = TestApi::start().await;
    let author = api.user("deleter").await;
    let early = api.user("early_bird").await;
    let post = api.post(&author, "Liked early", "x").await;
    api.like(&early, &post).await;
    api.make_hot(&post).await;
    // This process knows the post is hot; the early like's mark was put
    // with it, and stays until the walk.
    let late = api.user("late_bird").await;
    api.like(&late, &post).await;
    let (status, _) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204);
    // The fan-out has not walked it: the quiet-era like and its mark are
    // still there, but the post's counters are not.
    let (status, body) = api.like_post(&early, &post).await;
    assert_eq!(status, 404, "{body}");
}

/// The users whose partitions hold a mark of a like of `post`
/// (`USER#u / ~LIKED#p`), and the like each names.
pub(crate) async fn marks_of(
    api: &TestApi,
    post: &str,
) -> std::collections::BTreeMap<String, String> {
    let sk = format!("{}{post}", blog::keys::LIKED_PREFIX);
    table_snapshot(api)
        .await
        .iter()
        .filter(|item| item.get(SK).and_then(|v| v.as_s().ok()) == Some(&sk))
        .map(|item| {
            let field = |name: &str| item[name].as_s().expect("a string").clone();
            (field("userId"), field("likeId"))
        })
        .collect()
}

/// The item at `key` deleted behind the store's back, as a version that
/// never wrote it would have left the table.
async fn raw_delete(api: &TestApi, key: &blog::keys::Key) {
    let store = &api.app.store;
    let delete = store.client().delete_item().table_name(store.table());
    delete
        .set_key(Some(key.item()))
        .send()
        .await
        .expect("delete");
}

/// `attribute` removed from the item at `key`, behind the store's back.
async fn raw_remove(api: &TestApi, key: &blog::keys::Key, attribute: &str) {
    let store = &api.app.store;
    let update = store.client().update_item().table_name(store.table());
    update
        .set_key(Some(key.item()))
        .update_expression(format!("REMOVE {attribute}"))
        .send()
        .await
        .expect("update");
}

/// An item at `key` with the string attributes `fields`, put behind the
/// store's back.
async fn raw_put(api: &TestApi, key: &blog::keys::Key, fields: &[(&str, &str)]) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let mut item = key.item();
    for (name, value) in fields {
        item.insert((*name).to_owned(), AttributeValue::S((*value).to_owned()));
    }
    let store = &api.app.store;
    let put = store.client().put_item().table_name(store.table());
    put.set_item(Some(item)).send().await.expect("put");
}

/// `post` as a version before quiet likes were marked created it: no
/// `likersMoved`, so its quiet likes put their marker beside them (this
/// process has not read it yet: the first like reads it so).
async fn created_unmarked(api: &TestApi, post: &str) {
    raw_remove(api, &blog::keys::post_item(&post_id(post)), "likersMoved").await;
}

/// As if the move of `post`'s likers had not run: no marks, no
/// `likersMoved`, no place on the pointer; and this process learns it.
async fn unmove(api: &TestApi, post: &str) {
    let id = post_id(post);
    for user in marks_of(api, post).await.keys() {
        let user = blog::ids::UserId::parse(user).expect("id");
        raw_delete(api, &blog::keys::liked(&user, &id)).await;
    }
    raw_remove(api, &blog::keys::post_item(&id), "likersMoved").await;
    let pointer = blog::store::items::counter::LikeShardsItem::key_of(&id);
    raw_remove(api, &pointer, "movedTo").await;
    api.make_hot(post).await;
}

/// The users whose likes of `post` are marked beside them in its own
/// partition (`POST#p / LIKER#u`).
async fn markers_of(api: &TestApi, post: &str) -> HashSet<String> {
    table_snapshot(api)
        .await
        .iter()
        .filter(|item| item.get(PK).and_then(|v| v.as_s().ok()) == Some(&format!("POST#{post}")))
        .filter_map(|item| {
            item.get(SK)?
                .as_s()
                .ok()?
                .strip_prefix("LIKER#")
                .map(String::from)
        })
        .collect()
}

/// A hot post's likes are unique through a mark in the liker's own
/// partition, so a like reads and writes nothing in the post's partition
/// (`capacity.rs` counts the calls); the likes it had while quiet get their
/// marks from the fan-out's move. Before the move and after it, a quiet
/// liker's like answers 200 with the like they gave, and their unlike takes
/// the like, its marker and its mark; a mark whose like is gone (what the
/// move leaves if a like is taken back as it is copied, for a moment) never
/// stops a like nor an unlike.
#[tokio::test]
async fn a_hot_posts_likes_are_marked_in_their_likers_partitions() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("marked").await;
    let post = api.post(&author, "Marked", "likes").await;
    created_unmarked(&api, &post).await;
    let likes = format!("/posts/{post}/likes");
    let [a, b, c] = [
        api.user("quieta").await,
        api.user("quietb").await,
        api.user("quietc").await,
    ];
    let a_like = api.like(&a, &post).await;
    api.like(&b, &post).await;
    api.like(&c, &post).await;
    api.make_hot(&post).await;
    // The switch's request moves the likes' marks; as if it had not got
    // to it (its time ran out, DynamoDB was busy), the fan-out will.
    unmove(&api, &post).await;

    // Before the move: the marker beside the like answers.
    let (status, again) = api.like_post(&a, &post).await;
    assert_eq!((status, &again["createdAt"]), (200, &a_like["createdAt"]));
    let (status, _) = api.unlike(&b, &post).await;
    assert_eq!(status, 204);
    assert_eq!(marks_of(&api, &post).await.len(), 0, "nothing moved yet");

    // The move: a mark for each like the post still had, none for b's.
    api.settle(&mut poller).await;
    let marks = marks_of(&api, &post).await;
    assert_eq!(
        marks.keys().cloned().collect::<Vec<_>>(),
        {
            let mut v = vec![a.clone(), c.clone()];
            v.sort();
            v
        },
        "{marks:?}"
    );
    // The API's process learns the post's likers are moved (it would by
    // itself a second after it learned the post was hot).
    api.make_hot(&post).await;
    let fan = api.user("hotfan").await;
    let (status, _) = api.like_post(&fan, &post).await;
    assert_eq!(status, 201);
    let (status, again) = api.like_post(&a, &post).await;
    assert_eq!((status, &again["createdAt"]), (200, &a_like["createdAt"]));
    let (status, _) = api.unlike(&c, &post).await;
    assert_eq!(status, 204);
    assert!(marks_of(&api, &post).await.contains_key(&fan));
    assert!(
        !marks_of(&api, &post).await.contains_key(&c),
        "c's mark went"
    );
    assert!(
        !markers_of(&api, &post).await.contains(&c),
        "c's marker went"
    );

    // A mark naming a like that is gone: d likes (201) and unlikes as if
    // it were not there.
    let d = api.user("stalemark").await;
    let stale = blog::ids::LikeId::generate().to_string();
    let key = blog::keys::liked(&blog::ids::UserId::parse(&d).expect("id"), &post_id(&post));
    let fields = [
        ("type", "liked"),
        ("postId", post.as_str()),
        ("likeId", stale.as_str()),
        ("userId", d.as_str()),
    ];
    raw_put(&api, &key, &fields).await;
    let (status, _) = api.like_post(&d, &post).await;
    assert_eq!(status, 201, "a stale mark stops no like");
    assert_ne!(marks_of(&api, &post).await[&d], stale);
    let (status, _) = api.unlike(&d, &post).await;
    assert_eq!(status, 204);
    assert!(!marks_of(&api, &post).await.contains_key(&d));

    api.settle(&mut poller).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["likeCount"], json!(2), "a and the fan: {got}");
    let mut listed: Vec<String> = every_page(&api, &likes, 10)
        .await
        .iter()
        .map(|like| like["userId"].as_str().expect("id").to_owned())
        .collect();
    listed.sort();
    let mut expected = vec![a.clone(), fan.clone()];
    expected.sort();
    assert_eq!(listed, expected);
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");

    // Deleting the post takes every mark with it.
    let (status, _) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    assert_eq!(marks_of(&api, &post).await.len(), 0);
    assert!(partitions_of(&api, &post).await.is_empty());
}

/// Every like this version gives is unique by its liker's mark alone: a
/// quiet like puts no marker beside it (its count conditions on the post's
/// `likersMoved`, which a post has from its creation), the switch to hot
/// has no likers to move, and a quiet liker's like of the hot post answers
/// 200 from the mark. A post created before (no `likersMoved`) keeps a
/// marker beside each quiet like, even when this process had read it marked:
/// the count refuses a like without a marker there, and the process learns.
#[tokio::test]
async fn a_quiet_like_is_unique_by_its_likers_mark_and_an_older_posts_by_its_marker() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("markedauthor").await;
    let post = api.post(&author, "Marked from the start", "x").await;
    let [a, b] = [api.user("markeda").await, api.user("markedb").await];
    let first = api.like(&a, &post).await;
    assert!(markers_of(&api, &post).await.is_empty(), "no marker beside");
    let marks = marks_of(&api, &post).await;
    assert_eq!(marks.keys().collect::<Vec<_>>(), vec![&a]);
    let (status, again) = api.like_post(&a, &post).await;
    assert_eq!((status, &again["createdAt"]), (200, &first["createdAt"]));
    let (status, _) = api.unlike(&a, &post).await;
    assert_eq!(status, 204);
    assert!(marks_of(&api, &post).await.is_empty(), "the mark went");
    let first = api.like(&a, &post).await;

    // An older post, which this process read as marked (a's like).
    let older = api.post(&author, "Older", "y").await;
    api.like(&a, &older).await;
    created_unmarked(&api, &older).await;
    let (status, body) = api.like_post(&b, &older).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        markers_of(&api, &older).await,
        HashSet::from([b.clone()]),
        "b's like has its marker"
    );
    let (status, _) = api.like_post(&b, &older).await;
    assert_eq!(status, 200, "b liked already");
    let (status, _) = api.unlike(&b, &older).await;
    assert_eq!(status, 204);
    assert!(markers_of(&api, &older).await.is_empty());
    assert!(
        !marks_of(&api, &older).await.contains_key(&b),
        "mark and marker went"
    );

    // The switch moves nothing; a's like, given while quiet, answers from
    // its mark; b's goes to a shard.
    let id = post_id(&post);
    let store = &api.app.store;
    store.requests().make_hot(&id).await.expect("hot");
    let pointer = blog::store::items::counter::LikeShardsItem::key_of(&id);
    let moved_to = table_snapshot(&api).await.into_iter().find(|item| {
        item.get(PK).and_then(|v| v.as_s().ok()) == Some(&pointer.pk)
            && item.get(SK).and_then(|v| v.as_s().ok()) == Some(&pointer.sk)
    });
    let moved_to = moved_to.expect("the pointer");
    assert!(!moved_to.contains_key("movedTo"), "no move: {moved_to:?}");
    let (status, again) = api.like_post(&a, &post).await;
    assert_eq!((status, &again["createdAt"]), (200, &first["createdAt"]));
    let (status, _) = api.like_post(&b, &post).await;
    assert_eq!(status, 201);
    let (status, _) = api.unlike(&a, &post).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    for (post, count) in [(&post, 1), (&older, 1)] {
        let (_, got) = api.get_post(post).await;
        assert_eq!(got["likeCount"], json!(count), "{got}");
    }
    assert_eq!(
        marks_of(&api, &post).await.keys().collect::<Vec<_>>(),
        vec![&b]
    );
    let report = api.audit(false).await;
    assert_eq!(report.findings, vec![], "the audit finds nothing");
}

/// A post made hot by a version before liked marks kept its hot likes'
/// markers in their shards and has no `likersMoved`: its likes stay unique
/// (they read both places a marker may be), and `blog-admin migrate` gives
/// every like it has a mark, after which they read neither.
#[tokio::test]
async fn migrate_marks_the_likers_of_a_post_made_hot_before_liked_marks() {
    use blog::{ids::UserId, keys, store::items::counter::liker_shard};

    let api = TestApi::start().await;
    let author = api.user("older").await;
    let post = api.post(&author, "Hot before", "marks").await;
    created_unmarked(&api, &post).await;
    let quiet = api.user("quietone").await;
    api.like(&quiet, &post).await;
    api.make_hot(&post).await;
    // An earlier version's switch moved nothing, and kept the comments in
    // the post's partition (counted in shards).
    unmove(&api, &post).await;
    let id = post_id(&post);
    raw_delete(
        &api,
        &blog::store::items::counter::CommentShardsItem::key_of(&id),
    )
    .await;
    raw_remove(&api, &keys::post_item(&id), "commentsSharded").await;
    api.make_hot(&post).await;
    let before = api
        .comment(&quiet, &post, "hot, kept beside the post")
        .await;
    // A hot like as the earlier version kept it: its marker in its shard,
    // no mark (the fan-out, which would move the likers, is not running).
    let old = api.user("oldhot").await;
    let old_like = api.like(&old, &post).await;
    let old_id = UserId::parse(&old).expect("id");
    let mark = marks_of(&api, &post).await[&old].clone();
    let store = &api.app.store;
    raw_delete(&api, &keys::liked(&old_id, &post_id(&post))).await;
    let shard = liker_shard(&old_id, HOT_SHARDS);
    let place = PostPartition::shard(post_id(&post), shard);
    let fields = [
        ("type", "liker"),
        ("postId", post.as_str()),
        ("likeId", mark.as_str()),
        ("userId", old.as_str()),
    ];
    raw_put(&api, &keys::liker(place, &old_id), &fields).await;

    // Before the migration: both likes are found where they are marked.
    let (status, again) = api.like_post(&old, &post).await;
    assert_eq!((status, &again["createdAt"]), (200, &old_like["createdAt"]));
    let (status, _) = api.like_post(&quiet, &post).await;
    assert_eq!(status, 200);

    let done = store.admin().migrate().await.expect("migrate");
    assert_eq!(done.likers_moved, 1, "{done:?}");
    // Its comments go to its shards from now on, and list after the others.
    api.make_hot(&post).await;
    let after = api.comment(&quiet, &post, "hot, in a shard").await;
    let in_shard = table_snapshot(&api).await.iter().any(|item| {
        item.get(SK).and_then(|v| v.as_s().ok()) == Some(&format!("COMMENT#{after}"))
            && item
                .get(PK)
                .and_then(|v| v.as_s().ok())
                .is_some_and(|pk| pk.starts_with(&format!("POST#{post}#")))
    });
    assert!(in_shard, "the new comment is in a shard");
    let listed: Vec<Value> = every_page(&api, &format!("/posts/{post}/comments"), 1).await;
    let listed: Vec<&str> = listed
        .iter()
        .filter_map(|c| c["commentId"].as_str())
        .collect();
    assert_eq!(listed, vec![before.as_str(), after.as_str()]);
    let marks = marks_of(&api, &post).await;
    assert_eq!(marks.get(&old), Some(&mark), "{marks:?}");
    assert!(marks.contains_key(&quiet), "{marks:?}");
    let again = store.admin().migrate().await.expect("migrate");
    assert_eq!(again.likers_moved, 0, "once");

    // After: the marks answer, and taking the like back takes its marker.
    api.make_hot(&post).await;
    let (status, again) = api.like_post(&old, &post).await;
    assert_eq!((status, &again["createdAt"]), (200, &old_like["createdAt"]));
    let (status, _) = api.unlike(&old, &post).await;
    assert_eq!(status, 204);
    let left: Vec<String> = table_snapshot(&api)
        .await
        .iter()
        .filter(|item| item.get(PK).and_then(|v| v.as_s().ok()) == Some(&place.pk()))
        .filter_map(|item| item.get(SK)?.as_s().ok().cloned())
        // The comment made after the migration may have gone to this shard.
        .filter(|sk| !sk.starts_with("COMMENT#"))
        .collect();
    assert_eq!(
        left,
        vec!["COUNTS".to_owned()],
        "the shard keeps no like nor marker, only its counter"
    );
    assert!(!marks_of(&api, &post).await.contains_key(&old));
}

/// A hot post whose shards are throttled widens them
/// (`Requests::widen`; `viral.rs` drives it through partition limits):
/// likes given after spread over the new shards, every count and list
/// follows, a cursor made before the widening goes on, a forged shard
/// count stays refused, and the post's deletion empties every shard.
#[tokio::test]
async fn a_widened_hot_post_keeps_every_like_count_and_page() {
    use blog::store::cursor;

    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("widens").await;
    let post = api.post(&author, "Wider", "and wider").await;
    let likes = format!("/posts/{post}/likes");
    api.make_hot(&post).await;
    let first: Vec<String> =
        futures::future::join_all((0..20).map(|i| api.user_named(format!("before{i:02}")))).await;
    for who in &first {
        api.like(who, &post).await;
    }
    let (_, page) = api.get(&format!("{likes}?limit=5")).await;
    let before = page["nextCursor"].as_str().expect("more").to_owned();

    let id = post_id(&post);
    let requests = api.app.store.requests();
    let widest = blog::store::items::counter::MAX_SHARDS;
    assert_eq!(
        requests.widen(&id, HOT_SHARDS).await.expect("widen"),
        widest,
        "16 shards to 128 at once"
    );
    assert_eq!(
        requests.widen(&id, HOT_SHARDS).await.expect("widen"),
        widest,
        "a second widening from the same count changes nothing"
    );
    let then: Vec<String> =
        futures::future::join_all((0..40).map(|i| api.user_named(format!("after{i:02}")))).await;
    for who in &then {
        api.like(who, &post).await;
    }
    api.settle(&mut poller).await;
    let wider: HashSet<String> = partitions_of(&api, &post)
        .await
        .into_iter()
        .filter(|pk| {
            pk.rsplit('#')
                .next()
                .and_then(|k| k.parse::<u8>().ok())
                .is_some_and(|k| k >= HOT_SHARDS)
        })
        .collect();
    assert!(
        wider.len() > 5,
        "likes spread over the new shards: {wider:?}"
    );

    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["likeCount"], json!(60), "{got}");
    let listed: Vec<String> = every_page(&api, &likes, 7)
        .await
        .iter()
        .map(|like| like["userId"].as_str().expect("id").to_owned())
        .collect();
    let unique: HashSet<&String> = listed.iter().collect();
    assert_eq!((listed.len(), unique.len()), (60, 60));

    // The cursor made before: the rest of the first twenty, nothing else.
    let rest = api
        .list(format!("{likes}?limit=4"))
        .after(&before)
        .items()
        .await;
    assert_eq!(rest.len(), 15);
    assert!(
        rest.iter()
            .all(|like| first.iter().any(|u| like["userId"] == json!(u)))
    );

    // A count the post never had, or past the one it has: refused.
    let after = cursor::decode(&before, &format!("likes:{post}")).expect("a cursor");
    let like = after.split('.').next().expect("an id").to_owned();
    for forged in [17, 24, 255] {
        let forged = cursor::encode(&format!("likes:{post}"), &format!("{like}.{forged}"));
        let (status, body, queries) = queried(&api, &format!("{likes}?cursor={forged}")).await;
        assert_eq!(
            (status, &body["error"]["code"], queries <= 1),
            (400, &json!("bad_cursor"), true)
        );
    }
    audited_then_deleted(&api, &mut poller, &author, &post).await;
}

/// A hot post's comments go to its shards (each comment's id names its
/// shard), so no partition takes them all; Q4 is still one ordered page:
/// the post's own partition (its comments from before, then the pointer),
/// then each shard after the same comment, merged oldest first. Deleting,
/// erasing, auditing and deleting the post all find them there.
#[tokio::test]
async fn a_hot_posts_comments_spread_over_its_shards_and_list_in_order() {
    let api = TestApi::start().await;
    let cast = Cast {
        author: "discussed",
        title: "Discussed",
        content: "a lot",
        crowd: "talker",
        width: 1,
    };
    let Scene {
        author,
        post,
        users: talkers,
        mut poller,
    } = Scene::new(&api, 6, cast).await;
    let comments = format!("/posts/{post}/comments");
    let mut made = Vec::new();
    for (i, who) in talkers.iter().take(3).enumerate() {
        made.push(api.comment(who, &post, &format!("quiet {i}")).await);
    }
    api.make_hot(&post).await;
    for i in 0..40 {
        let who = &talkers[i % talkers.len()];
        made.push(api.comment(who, &post, &format!("hot {i}")).await);
    }
    let in_shards: HashSet<String> = table_snapshot(&api)
        .await
        .iter()
        .filter(|item| {
            item.get(SK)
                .and_then(|v| v.as_s().ok())
                .is_some_and(|sk| sk.starts_with("COMMENT#0"))
        })
        .filter_map(|item| item.get(PK)?.as_s().ok().cloned())
        .filter(|pk| pk.starts_with(&format!("POST#{post}#")))
        .collect();
    assert!(
        in_shards.len() >= 10,
        "spread over the shards: {in_shards:?}"
    );

    // One ordered list, every page within 1 + 16 Queries and a few shards
    // read deeper (store/merge.rs), and one of the post's author's blocks
    // (others commented).
    let ids = |list: &[Value]| -> Vec<String> {
        list.iter()
            .map(|c| c["commentId"].as_str().expect("id").to_owned())
            .collect()
    };
    let mut expected = made.clone();
    expected.sort();
    assert_eq!(made[..3], expected[..3], "the quiet ones first");
    let mut listed = Vec::new();
    // Each page's Queries counted alone.
    api.meter.take();
    api.list(format!("{comments}?limit=7"))
        .each_page(|page| {
            let calls = api.meter.take().into_iter();
            let queries = calls.filter(|c| c.operation == "Query").count();
            assert!(
                queries <= 2 + 2 * usize::from(HOT_SHARDS),
                "{queries} Queries"
            );
            listed.extend(page["items"].as_array().cloned().unwrap_or_default());
        })
        .await;
    assert_eq!(ids(&listed), expected);

    // Taken back by its author, and by the post's author.
    let (first_hot, second_hot) = (made[3].clone(), made[4].clone());
    for (comment, by, expected) in [
        (&first_hot, &talkers[0], 204),
        (&second_hot, &author, 204),
        (&second_hot, &author, 404),
    ] {
        let (status, body) = api.take_back_comment(by, &post, comment).await;
        assert_eq!(status, expected, "{comment} by {by}: {body}");
    }
    // A commenter erased: their comments go, wherever they are.
    let (status, _) = api.erase(&talkers[5]).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    let left = every_page(&api, &comments, 100).await;
    let expected_left = 43 - 2 - 6; // talker5 wrote hot 5, 11, …, 35: 6 of them
    assert_eq!(left.len(), expected_left);
    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["commentCount"], json!(expected_left), "{got}");
    audited_then_deleted(&api, &mut poller, &author, &post).await;
}

/// The audit finds nothing on `post`'s table; then its author deletes it,
/// and once the fan-out has walked, nothing of it is left: no partition, no
/// liker's mark.
pub(crate) async fn audited_then_deleted(
    api: &TestApi,
    poller: &mut local::stream_poller::StreamPoller,
    author: &str,
    post: &str,
) {
    assert_eq!(
        api.audit(false).await.findings,
        vec![],
        "the audit finds nothing"
    );
    let (status, _) = api.delete_post(author, post).await;
    assert_eq!(status, 204);
    api.settle(poller).await;
    assert!(
        partitions_of(api, post).await.is_empty(),
        "every shard emptied"
    );
    assert_eq!(marks_of(api, post).await.len(), 0, "no mark left");
}

/// The number attribute `attribute` of the item at `key` set to `value`,
/// behind the store's back.
pub(crate) async fn raw_set_number(
    api: &TestApi,
    key: &blog::keys::Key,
    attribute: &str,
    value: u64,
) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let store = &api.app.store;
    let update = store.client().update_item().table_name(store.table());
    update
        .set_key(Some(key.item()))
        .update_expression("SET #a = :v")
        .expression_attribute_names("#a", attribute)
        .expression_attribute_values(":v", AttributeValue::N(value.to_string()))
        .send()
        .await
        .expect("update");
}

pub(crate) fn epoch_millis() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    u64::try_from(since.as_millis()).expect("millis")
}

/// A post turning hot is closed (`store::hot`: `closing`, which every quiet
/// like's and comment's count conditions on): while it is, a like and a
/// comment write nothing and wait, an unlike of a like given while it was
/// quiet goes through (its mark with it);
/// a switch whose request stopped (closed longer than `CLOSING_STALE`) is
/// taken over by the next request that waits for it, which opens the post
/// hot (its quiet likers were marked as they liked: none to move); then the
/// waiting like and comment land in its shards, each counted once.
#[tokio::test]
async fn a_post_turning_hot_takes_nothing_until_it_is_and_a_stopped_switch_is_taken_over() {
    let api = std::sync::Arc::new(TestApi::start().await);
    let mut poller = api.poller();
    let author = api.user("closer").await;
    let post = api.post(&author, "Turning hot", "closed a moment").await;
    let [a, b, c] = [
        api.user("closeda").await,
        api.user("closedb").await,
        api.user("closedc").await,
    ];
    api.like(&a, &post).await;
    api.like(&b, &post).await;
    api.settle(&mut poller).await;
    // A switch closed it a second ago and stopped there (its request
    // timed out): stale in two more seconds.
    let stale_in = blog::store::items::post::CLOSING_STALE - std::time::Duration::from_secs(2);
    let since = epoch_millis() - u64::try_from(stale_in.as_millis()).expect("millis");
    let item = blog::keys::post_item(&post_id(&post));
    raw_set_number(&api, &item, "closing", since).await;

    // b takes their quiet like back: answered at once, mark and count.
    let (status, body) = api.unlike(&b, &post).await;
    assert_eq!(status, 204, "{body}");
    let marks = marks_of(&api, &post).await;
    assert_eq!(marks.keys().collect::<Vec<_>>(), vec![&a]);
    assert!(markers_of(&api, &post).await.is_empty(), "no marker beside");

    let before = table_snapshot(&api).await;
    let waiting = {
        let (api, post, c) = (api.clone(), post.clone(), c.clone());
        tokio::spawn(async move { api.like_post(&c, &post).await })
    };
    let commenting = {
        let (api, post, a) = (api.clone(), post.clone(), a.clone());
        tokio::spawn(async move { api.comment_on(&a, &post, "while it turned").await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert_eq!(
        table_snapshot(&api).await,
        before,
        "nothing written while the post is closed"
    );
    assert!(!waiting.is_finished() && !commenting.is_finished());

    let (status, body) = waiting.await.expect("the like");
    assert_eq!(status, 201, "{body}");
    let (status, body) = commenting.await.expect("the comment");
    assert_eq!(status, 201, "{body}");
    // Taken over: hot, its likers marked, its comments in its shards.
    let stored = table_snapshot(&api).await;
    let post_item = stored
        .iter()
        .find(|i| {
            i.get(PK).and_then(|v| v.as_s().ok()) == Some(&item.pk)
                && i.get(SK).and_then(|v| v.as_s().ok()) == Some(&item.sk)
        })
        .expect("the post");
    assert!(!post_item.contains_key("closing"), "{post_item:?}");
    assert_eq!(
        post_item["shards"].as_n().ok(),
        Some(&HOT_SHARDS.to_string())
    );
    assert_eq!(post_item["likersMoved"].as_bool().ok(), Some(&true));
    assert_eq!(post_item["commentsSharded"].as_bool().ok(), Some(&true));
    let marks = marks_of(&api, &post).await;
    assert_eq!(
        marks.keys().cloned().collect::<HashSet<_>>(),
        HashSet::from([a.clone(), c.clone()])
    );
    let comment = body["commentId"].as_str().expect("an id").to_owned();
    let comments = every_page(&api, &format!("/posts/{post}/comments"), 5).await;
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0]["commentId"], json!(comment));
    assert!(
        partitions_of(&api, &post).await.len() > 1,
        "the like and the comment are in shards"
    );
    // a liked already (200, the same like); b can like again.
    let (status, _) = api.like_post(&a, &post).await;
    assert_eq!(status, 200);
    let (status, _) = api.like_post(&b, &post).await;
    assert_eq!(status, 201);
    api.settle(&mut poller).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(got["likeCount"], json!(3), "{got}");
    assert_eq!(got["commentCount"], json!(1), "{got}");
    assert_eq!(api.audit(false).await.findings, vec![]);
}

/// A post deleted while it turns hot: its deletion closes the shards its
/// switch made counters in, its walk leaves nothing in any of them, and a
/// like after it answers 404.
#[tokio::test]
async fn a_post_deleted_while_it_turns_hot_leaves_nothing() {
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("closedel").await;
    let fan = api.user("closedfan").await;
    let post = api.post(&author, "Gone while turning", "x").await;
    api.like(&fan, &post).await;
    let item = blog::keys::post_item(&post_id(&post));
    raw_set_number(&api, &item, "closing", epoch_millis()).await;
    let counter = blog::store::items::counter::ShardCounterItem::key_of(post_id(&post), 3);
    raw_put(
        &api,
        &counter,
        &[("type", "shardCounter"), ("postId", &post)],
    )
    .await;
    let (status, body) = api.delete_post(&author, &post).await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = api.like_post(&fan, &post).await;
    assert_eq!(status, 404, "{body}");
    api.settle(&mut poller).await;
    assert_eq!(partitions_of(&api, &post).await, HashSet::new());
    assert!(marks_of(&api, &post).await.is_empty());
}

/// The widest post (128 shards) whose every shard counted at once: the
/// fan-out adds them onto their 8 group counters (16 shards each, one
/// update of a few hundred bytes each, its expression within 4 KB), then
/// the groups onto the post in one update of its 8 entries; a batch
/// delivered again adds nothing twice. Billed as DynamoDB bills them (from
/// the items' sizes): 1 WCU a group, and the post's 1 on the table and 1 on
/// GSI1, where 128 entries on the post made every add rewrite about 4 KB.
#[tokio::test]
async fn the_fan_out_adds_128_shards_counts_through_their_groups_onto_the_widest_post() {
    use blog::store::{
        counts::Summed,
        items::counter::{ShardCounterItem, ShardGroupItem},
    };
    use local::billing::{Rate, Shape, Snapshot, billed_writes};

    let api = TestApi::start().await;
    let alice = api.user("alice").await;
    let post = api.post(&alice, "Viral", "everyone").await;
    api.make_hot(&post).await;
    let requests = api.app.store.requests();
    let widest = requests.widen(&post_id(&post), HOT_SHARDS).await;
    assert_eq!(widest.expect("widened"), 128);
    let counters: Vec<ShardCounterItem> = (0..128)
        .map(|shard| ShardCounterItem {
            like_count: 2,
            comment_count: u64::from(shard % 2),
            version: 3,
            ..ShardCounterItem::new(post_id(&post), shard)
        })
        .collect();
    let shape = Shape::single_table();
    let snapshot = || async { Snapshot::new(&shape, table_snapshot(&api).await) };
    let before = snapshot().await;
    let fanout = api.app.store.fanout();
    let summed = fanout.add_shard_counts(&counters).await;
    assert_eq!(summed.expect("added"), Summed::Written);
    let again = fanout.add_shard_counts(&counters).await;
    assert_eq!(again.expect("read"), Summed::Stale, "nothing twice");
    let grouped = snapshot().await;
    assert_eq!(billed_writes(&shape, &before, &grouped, Rate::Standard), 8);
    let groups: Vec<ShardGroupItem> = table_snapshot(&api)
        .await
        .into_iter()
        .filter(|item| {
            item.get("type").and_then(|t| t.as_s().ok()) == Some(&"shardGroup".to_owned())
        })
        .map(|item| serde_dynamo::from_item(item).expect("a group"))
        .collect();
    assert_eq!(groups.len(), 8);
    assert!(
        groups
            .iter()
            .all(|g| g.like_count == 32 && g.comment_count == 8)
    );
    let summed = fanout.add_shard_counts(&groups).await;
    assert_eq!(summed.expect("added"), Summed::Written);
    let again = fanout.add_shard_counts(&groups).await;
    assert_eq!(again.expect("read"), Summed::Stale, "nothing twice");
    let added = snapshot().await;
    assert_eq!(billed_writes(&shape, &grouped, &added, Rate::Standard), 2);
    let (status, read) = api.get(&format!("/posts/{post}")).await;
    assert_eq!(status, 200);
    assert_eq!(read["likeCount"], 256);
    assert_eq!(read["commentCount"], 64);

    // A post made hot before groups: its counters onto the post itself, in
    // updates DynamoDB takes (all 128 in one would be refused).
    let old = api.post(&alice, "Viral before groups", "everyone").await;
    api.make_hot(&old).await;
    let counters: Vec<ShardCounterItem> = (0..128)
        .map(|shard| ShardCounterItem {
            like_count: 2,
            comment_count: u64::from(shard % 2),
            version: 3,
            grouped: false,
            ..ShardCounterItem::new(post_id(&old), shard)
        })
        .collect();
    let summed = fanout.add_shard_counts(&counters).await;
    assert_eq!(summed.expect("added"), Summed::Written);
    let again = fanout.add_shard_counts(&counters).await;
    assert_eq!(again.expect("read"), Summed::Stale, "nothing twice");
    let (status, read) = api.get(&format!("/posts/{old}")).await;
    assert_eq!(status, 200);
    assert_eq!(read["likeCount"], 256);
    assert_eq!(read["commentCount"], 64);
}

/// A post made hot by the version before groups had partitions of their
/// own: its counters without `groupApart`, its groups (numbered 0–7) in
/// their first shard's partition. Liked and commented after the upgrade,
/// its counts go through those groups as before and come out exact, the
/// audit finds nothing, and its deletion leaves nothing behind.
#[tokio::test]
async fn a_post_made_hot_with_its_groups_in_its_shards_counts_exactly_and_goes() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use blog::store::{
        items::counter::{ShardCounterItem, ShardGroupItem},
        table::{Deleted, Expr, Landed, Write},
    };
    let counters_made_before = 64;
    let api = TestApi::start().await;
    let mut poller = api.poller();
    let author = api.user("before").await;
    let post = api.post(&author, "Hot before", "groups in shards").await;
    api.make_hot(&post).await;
    let id = post_id(&post);
    // As the version before made it: 64 counters (its 16 shards' and the
    // first widening's) without `groupApart`, and 4 groups, each in its
    // first shard's partition.
    let db = api.app.store.db();
    for shard in 0..HOT_SHARDS {
        let change = Expr::new("REMOVE groupApart");
        let key = ShardCounterItem::key_of(id, shard).item();
        let write = Write::update(key, change, Landed::Untold);
        assert!(
            db.write("the layout before", &write)
                .await
                .expect("written")
                .done()
        );
    }
    for shard in HOT_SHARDS..counters_made_before {
        let counter = ShardCounterItem {
            group_apart: false,
            ..ShardCounterItem::new(id, shard)
        };
        let put = Write::create(&counter).expect("a counter");
        assert!(
            db.write("the layout before", &put)
                .await
                .expect("put")
                .done()
        );
    }
    let apart = ShardGroupItem::key_of(id, 128).item();
    db.write("the layout before", &Write::delete(apart, Deleted::IfGone))
        .await
        .expect("deleted");
    for group in ShardGroupItem::groups_of(0..counters_made_before) {
        let put = Write::create(&ShardGroupItem::new(id, group)).expect("a group");
        assert!(
            db.write("the layout before", &put)
                .await
                .expect("put")
                .done()
        );
    }
    let key = ShardGroupItem::key_of(id, 2);
    assert_eq!(key.pk, format!("POST#{post}#32"));
    let stored = db.get("a group before", key.item(), true);
    let stored = stored.await.expect("read").expect("there");
    assert_eq!(
        stored.get("group"),
        Some(&AttributeValue::N("2".to_owned()))
    );

    let fans: Vec<String> =
        futures::future::join_all((0..30).map(|i| api.user_named(format!("fan{i:02}")))).await;
    for (i, fan) in fans.iter().enumerate() {
        api.like(fan, &post).await;
        if i % 3 == 0 {
            api.comment(fan, &post, "still counted").await;
        }
    }
    let (status, _) = api.unlike(&fans[7], &post).await;
    assert_eq!(status, 204);
    api.settle(&mut poller).await;
    let (_, got) = api.get_post(&post).await;
    assert_eq!(
        (got["likeCount"].clone(), got["commentCount"].clone()),
        (json!(29), json!(10)),
        "{got}"
    );
    // Nothing was put in a partition apart.
    let partitions = partitions_of(&api, &post).await;
    assert!(
        (128..136).all(|g| !partitions.contains(&format!("POST#{post}#{g}"))),
        "{partitions:?}"
    );
    audited_then_deleted(&api, &mut poller, &author, &post).await;
}
