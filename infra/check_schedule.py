#!/usr/bin/env python3
"""A scheduled post publishes itself on the local stack as deployed: the
local API Gateway and watch, the stream poller, and `blog-admin scheduler`
running template.yaml's EventBridge schedule (publish-scheduled every
minute).

    check_schedule.py API_PORT POOL_FILE

Writes a post scheduled 10 s ahead, then reads it (Q2) and its tag's list every
second: the post must answer 404 until its time, then be out (Q2 200, status
published) within 60 s of it, listed at the time it was published: its
publishAt when a run waited for it, later (no later than it was seen out)
when a run found it due already; and reach its tag's
list (written by the stream fan-out, as the feed is). The tag is this run's
own, so the check may run beside other writers (test.sh runs it beside the
fuzzer): no other post pushes it out of the list it is looked for in.
Prints one total line; exits 1 on any failure."""
import datetime
import json
import pathlib
import subprocess
import sys
import time
import uuid
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAME = "schedule_checker"
AHEAD = 10


def call(port, method, path, token=None, body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def main():
    port, pool_file = int(sys.argv[1]), sys.argv[2]
    token = subprocess.run([str(ROOT / "target/debug/blog-admin"), "token", NAME, "--pool", pool_file],
                           check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    results = []

    def check(what, ok, detail):
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {detail}"))

    status, _ = call(port, "POST", "/users", token, {"username": NAME})
    check("the checker's profile: 201", status == 201, status)
    due = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=AHEAD)
    publish_at = due.strftime("%Y-%m-%dT%H:%M:%S.") + f"{due.microsecond // 1000:03d}Z"
    tag = f"scheduled-{uuid.uuid4().hex[:12]}"
    status, post = call(port, "POST", "/posts", token,
                        {"title": "Scheduled", "content": "out at its time", "status": "scheduled",
                         "publishAt": publish_at, "tags": [tag]})
    check("a post scheduled 10 s ahead: 201, scheduled",
          status == 201 and post.get("status") == "scheduled" and post.get("publishAt") == publish_at, (status, post))
    post_id = (post or {}).get("postId")
    early, out_at, fed_at = [], None, None
    deadline = due.timestamp() + 90
    while time.time() < deadline and post_id:
        status, got = call(port, "GET", f"/posts/{post_id}")
        now = time.time()
        if status == 200 and out_at is None:
            out_at, out = now, got
        elif status != 404 and out_at is None:
            early.append(status)
        if out_at is None and now < due.timestamp() and status != 404:
            early.append(status)
        _, listed = call(port, "GET", f"/tags/{tag}/posts")
        if fed_at is None and any(p.get("postId") == post_id for p in (listed or {}).get("items", [])):
            fed_at = now
        if out_at is not None and fed_at is not None:
            break
        time.sleep(1)
    check("it answers 404 until its time", out_at is None or out_at >= due.timestamp() - 0.5 and not early,
          (early, out_at and out_at - due.timestamp()))
    lag = None if out_at is None else out_at - due.timestamp()
    published_at = None if out_at is None else out.get("publishedAt")
    listed_at = None
    if published_at:
        listed_at = datetime.datetime.strptime(published_at, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    check("it is out within 60 s of its publishAt (Q2 200, published), listed when it was published "
          "(publishedAt from its publishAt to when it was seen out)",
          lag is not None and lag <= 60 and out.get("status") == "published" and listed_at is not None
          and due.timestamp() - 0.001 <= listed_at <= out_at + 1,
          (lag, published_at, publish_at))
    feed_lag = None if fed_at is None else fed_at - due.timestamp()
    check("it reaches its tag's list through the fan-out", fed_at is not None, feed_lag)
    print(f"scheduled post out {lag if lag is None else round(lag, 1)} s after its time, "
          f"in its tag's list {feed_lag if feed_lag is None else round(feed_lag, 1)} s after")
    failed = results.count(False)
    print(f"schedule: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
