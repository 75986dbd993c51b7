#!/usr/bin/env python3
"""Thousands of requests through the local API Gateway and `cargo lambda
watch`, as the README's run command serves them, with the stream fan-out
running: every route, one at a time and then eight at a time, and no answer
may be a 5xx. The 24 users are users of the local Cognito pool: every write
carries `Authorization: Bearer <ID token>` (from `blog-admin token`), which
the gateway's JWT authorizer verifies, as deployed.

    watch_load.py PORT --pool FILE [--requests N]

Each answer's status is checked against what the route must answer (201 for a
new post, 200 for a read, ...), reads' bodies are checked for their shape, and
at the end, once the fan-out has caught up, every post's like and comment
counts must equal the likes and comments this run made on it, and the feed
must list the newest posts with their authors' current names. At the end one
user erases their account (`DELETE /users/{userId}`): their posts must answer
404 and leave the feed, and the counts on everyone else's posts must fall by
their likes and comments, exactly. Responses are
large on purpose (a full feed is about 40 KB, some posts 30 KB): the 500s of
cargo-lambda 1.9.2's watch came from responses over 16 KB.
"""
import base64
import collections
import http.client
import json
import random
import subprocess
import sys
import threading
import time

PORT = int(sys.argv[1])
POOL = sys.argv[sys.argv.index("--pool") + 1]
TOTAL = int(sys.argv[sys.argv.index("--requests") + 1]) if "--requests" in sys.argv else 5000
SEQUENTIAL = TOTAL // 5
THREADS = 8
USERS = 24
POSTS_PER_USER = 5

lock = threading.Lock()
statuses = collections.Counter()
failures = []
likes_made = collections.Counter()
comments_made = collections.Counter()
likes_by = set()  # (post, user) of every like this run made (answered 201 or 200)
# (post, user) -> likes answered 201. Two threads may like the same post as
# the same user at once, and either answer may arrive first: whether a like
# was the first is known only at the end, when every pair liked must have had
# exactly one 201 (none: a 200 answered a like nobody gave; two: a double like).
likes_created = collections.Counter()
comments_by = collections.Counter()  # (post, user) -> comments this run made
posts = []  # (post id, author index)
renames = collections.Counter()
dropped = []  # connections lost, as "METHOD path while sending|reading: error"
local = threading.local()
tokens = []  # user index -> ID token
ids = []  # user index -> user id (the token's sub)


def sign_in():
    """A token for each user, and their ids: the tokens' `sub`."""
    names = [f"load-user-{u:03}" for u in range(USERS)]
    out = subprocess.run(["./target/debug/blog-admin", "token", *names, "--pool", POOL],
                         check=True, capture_output=True, text=True).stdout.split()
    for token in out:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        tokens.append(token)
        ids.append(claims["sub"])


def connection():
    if not hasattr(local, "conn"):
        local.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    return local.conn


def call(method, path, user=None, body=None, expect=(200,)):
    headers = {"content-type": "application/json"}
    if user is not None:
        headers["authorization"] = f"Bearer {tokens[user]}"
    data = None if body is None else json.dumps(body)
    for attempt in range(3):
        phase = "sending"
        try:
            conn = connection()
            conn.request(method, path, body=data, headers=headers)
            phase = "reading"
            response = conn.getresponse()
            status, text = response.status, response.read().decode()
            break
        except (ConnectionError, http.client.HTTPException, OSError) as error:
            local.__dict__.pop("conn", None)
            with lock:
                dropped.append(f"{method} {path} while {phase}: {error!r}")
            # A write sent and then unanswered may have happened: sending it
            # again could make a second comment or post, so it counts as
            # unanswered. A read, or a write the connection refused before it
            # was sent, is tried again.
            if attempt == 2 or (phase == "reading" and method != "GET"):
                status, text = 599, f"no answer: {error}"
                break
    with lock:
        statuses[status] += 1
        if status not in expect:
            failures.append(f"{method} {path} -> {status} (expected {expect}): {text[:300]}")
    try:
        return status, json.loads(text) if text else None
    except json.JSONDecodeError:
        return status, None


def setup():
    for u in range(USERS):
        call("POST", "/users", u, {"username": f"loader_{u:03}"}, expect=(201,))
    for u in range(USERS):
        for p in range(POSTS_PER_USER):
            # Mostly 2,000 characters; one post in ten 30,000 (a 30 KB Q2).
            length = 30_000 if (u + p) % 10 == 0 else 2_000
            content = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 600)[:length]
            status, body = call("POST", "/posts", u, {"title": f"post {p} by {u}", "content": content},
                                expect=(201,))
            if status == 201:
                posts.append((body["postId"], u))


def one_request(rng):
    post, author = rng.choice(posts)
    user = rng.randrange(USERS)
    kind = rng.choices(
        ["feed", "post", "user", "find-user", "user-posts", "comments", "likes",
         "comment", "like", "new-post", "edit-post", "rename"],
        # Renames are rare: each holds the stream's shard for a couple of
        # seconds while it walks what the user wrote (docs/data-model.md).
        weights=[20, 15, 8, 4, 8, 8, 8, 12, 12, 4, 3, 0.2],
    )[0]
    if kind == "feed":
        status, body = call("GET", "/feed?limit=100")
        if status == 200 and not (isinstance(body.get("items"), list) and body["items"]):
            fail(f"feed without items: {str(body)[:200]}")
    elif kind == "post":
        status, body = call("GET", f"/posts/{post}")
        if status == 200 and body.get("postId") != post:
            fail(f"GET /posts/{post} answered {str(body)[:200]}")
    elif kind == "user":
        status, body = call("GET", f"/users/{ids[user]}")
        if status == 200 and not body.get("username", "").startswith("loader_"):
            fail(f"GET /users answered {str(body)[:200]}")
    elif kind == "find-user":
        # By name, in capitals: a rename in flight may have moved it (404).
        with lock:
            name = f"loader_{user:03}" + (f"_{renames[user]}" if renames[user] else "")
        status, body = call("GET", f"/users?username={name.upper()}", expect=(200, 404))
        if status == 200 and body.get("userId") != ids[user]:
            fail(f"GET /users?username={name.upper()} answered {str(body)[:200]}")
    elif kind == "user-posts":
        status, body = call("GET", f"/users/{ids[author]}/posts?limit=100")
        if status == 200 and post not in {p["postId"] for p in body["items"]}:
            fail(f"{post} missing from its author's posts")
    elif kind == "comments":
        call("GET", f"/posts/{post}/comments?limit=100")
    elif kind == "likes":
        call("GET", f"/posts/{post}/likes?limit=100")
    elif kind == "comment":
        status, _ = call("POST", f"/posts/{post}/comments", user, {"content": f"comment by {user}"},
                         expect=(201,))
        if status == 201:
            with lock:
                comments_made[post] += 1
                comments_by[(post, user)] += 1
    elif kind == "like":
        status, _ = call("POST", f"/posts/{post}/likes", user, expect=(200, 201))
        with lock:
            if status in (200, 201):
                likes_by.add((post, user))
            if status == 201:
                likes_made[post] += 1
                likes_created[(post, user)] += 1
    elif kind == "new-post":
        status, body = call("POST", "/posts", user, {"title": "another", "content": "short " * 400},
                            expect=(201,))
        if status == 201:
            with lock:
                posts.append((body["postId"], user))
    elif kind == "edit-post":
        call("PUT", f"/posts/{post}", author, {"title": f"edited by {author}"}, expect=(200,))
    elif kind == "rename":
        with lock:
            renames[user] += 1
            name = f"loader_{user:03}_{renames[user]}"
        call("PUT", f"/users/{ids[user]}", user, {"username": name}, expect=(200,))


def fail(message):
    with lock:
        failures.append(message)


def worker(seed, count):
    rng = random.Random(seed)
    for _ in range(count):
        one_request(rng)


def erase(leaver):
    """`leaver` erases their account: what they wrote leaves the expected
    counts and posts; the posts they wrote are returned, to answer 404."""
    call("DELETE", f"/users/{ids[leaver]}", leaver, expect=(204,))
    gone = [p for p, author in posts if author == leaver]
    posts[:] = [(p, author) for p, author in posts if author != leaver]
    for post, _ in posts:
        likes_made[post] -= int((post, leaver) in likes_by)
        comments_made[post] -= comments_by[(post, leaver)]
    return gone


def settled_erasure(leaver, gone):
    """The erased user and their posts answer 404."""
    wrong = []
    if call("GET", f"/users/{ids[leaver]}", expect=(404,))[0] != 404:
        wrong.append("the erased user's profile is still there")
    for post in gone:
        if call("GET", f"/posts/{post}", expect=(200, 404))[0] != 404:
            wrong.append(f"the erased user's post {post} is still there")
    return wrong


def settled_counts():
    """Every post's counts equal what this run made, once the writes are in."""
    wrong = []
    for post, _ in posts:
        status, body = call("GET", f"/posts/{post}")
        if status != 200:
            wrong.append(f"{post}: {status}")
        elif (body["likeCount"], body["commentCount"]) != (likes_made[post], comments_made[post]):
            wrong.append(f"{post}: {body['likeCount']} likes, {body['commentCount']} comments; "
                         f"made {likes_made[post]} and {comments_made[post]}")
    return wrong


def one_new_like_each():
    """Every (post, user) liked was answered 201 exactly once, 200 every other time."""
    return [f"{post} liked by user {user}: answered 201 {likes_created[(post, user)]} times"
            for post, user in sorted(likes_by) if likes_created[(post, user)] != 1]


def settled_feed():
    """The feed lists the newest posts, each with its author's current name."""
    status, feed = call("GET", "/feed?limit=100")
    if status != 200:
        return [f"feed: {status}"]
    wrong = []
    newest = sorted((p for p, _ in posts), reverse=True)[:100]
    if [i["postId"] for i in feed["items"]] != newest:
        wrong.append("the feed is not the newest 100 posts")
    names = {}
    for item in feed["items"]:
        user = item["userId"]
        if user not in names:
            status, profile = call("GET", f"/users/{user}", expect=(200, 404))
            names[user] = profile["username"] if status == 200 else None
        if names[user] is None:
            wrong.append(f"feed entry {item['postId']} is by an erased user")
        elif item["username"] != names[user]:
            wrong.append(f"feed entry {item['postId']} shows {item['username']}, not {names[user]}")
    return wrong


def main():
    sign_in()
    started = time.time()
    setup()
    made = sum(statuses.values())
    worker(1, SEQUENTIAL - made)
    sequential = sum(statuses.values())
    print(f"watch load: {sequential} requests one at a time in {time.time() - started:.0f} s")
    concurrent_started = time.time()
    threads = [threading.Thread(target=worker, args=(100 + i, (TOTAL - sequential) // THREADS))
               for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"watch load: {sum(statuses.values()) - sequential} requests {THREADS} at a time "
          f"in {time.time() - concurrent_started:.0f} s")
    failures.extend(one_new_like_each())
    leaver = USERS - 1
    gone = erase(leaver)
    print(f"watch load: user {leaver} erased their account ({len(gone)} posts)")
    # The fan-out runs behind the writes: give it time to catch up.
    settling = time.time()
    while True:
        wrong = settled_counts() + settled_feed() + settled_erasure(leaver, gone)
        if not wrong or time.time() > settling + 300:
            break
        time.sleep(2)
    print(f"watch load: counts and feed {'settled' if not wrong else 'still wrong'} "
          f"after {time.time() - settling:.0f} s")
    failures.extend(wrong)
    served = sum(statuses.values())
    fivexx = sum(n for s, n in statuses.items() if s >= 500)
    print(f"watch load: {served} requests, statuses {dict(sorted(statuses.items()))}, "
          f"{fivexx} answered 5xx, {len(posts)} posts, {sum(likes_made.values())} likes, "
          f"{sum(comments_made.values())} comments, {sum(renames.values())} renames")
    print(f"watch load: {len(dropped)} connections lost")
    for drop in dropped[:10]:
        print(f"  lost: {drop}")
    for failure in failures[:20]:
        print(f"FAIL {failure}")
    ok = not failures and fivexx == 0 and served >= TOTAL
    print(f"watch load: {'passed' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
