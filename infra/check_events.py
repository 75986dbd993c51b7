#!/usr/bin/env python3
"""Invokes every function with its sample event, as a user would:
`cargo lambda invoke <function> --data-file events/<function>.json`, against
`cargo lambda watch` wired to DynamoDB Local, and checks each response.

The samples share one user (the JWT `sub` in the write events) and one post id;
the post is seeded first, then the functions run in an order in which every
sample succeeds.

It also sends create-user an event without the authorizer's claims that
names a caller by headers instead, and expects 401: identity comes from the
claims only.
"""
import json
import subprocess
import sys

import boto3

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent

# function, expected status (or None for the stream function), a check of the body
SEQUENCE = [
    ("create-user", 201, lambda b: b["username"] == "alice"),
    ("update-user", 200, lambda b: b["username"] == "alice_2"),
    ("get-user", 200, lambda b: b["username"] == "alice_2"),
    ("find-user", 200, lambda b: b["username"] == "alice_2"),
    ("create-post", 201, lambda b: b["username"] == "alice_2" and b["tags"] == ["rust", "serverless"]),
    ("update-post", 200, lambda b: b["title"] == "Hello again"),
    ("get-post", 200, lambda b: b["title"] == "Hello again"),
    ("list-user-posts", 200, lambda b: len(b["items"]) == 2),
    # Alice has no drafts: an empty page of her own.
    ("list-drafts", 200, lambda b: b["items"] == [] and b["nextCursor"] is None),
    ("create-comment", 201, lambda b: b["content"] == "Nice post!"),
    ("list-comments", 200, lambda b: len(b["items"]) == 1),
    ("like-post", 201, lambda b: b["username"] == "alice_2"),
    ("list-likes", 200, lambda b: len(b["items"]) == 1),
    # Alice's export: her comment, her like and her two posts, in full.
    ("export-user", 200, lambda b: b["profile"]["username"] == "alice_2"
     and sorted(next(iter(i)) for i in b["items"]) == ["comment", "like", "post", "post"]
     and b["nextCursor"] is None),
    ("unlike-post", 204, lambda b: b is None),
    ("delete-comment", 204, lambda b: b is None),
    ("get-feed", 200, lambda b: isinstance(b["items"], list)),
    # The Atom feeds answer XML: the body is checked as text.
    ("get-feed-atom", 200, lambda b: b.startswith("<?xml") and "<feed xmlns=\"http://www.w3.org/2005/Atom\"" in b),
    ("list-tag-posts", 200, lambda b: isinstance(b["items"], list) and "nextCursor" in b),
    ("list-tag-posts-atom", 200, lambda b: "<title>Posts tagged rust</title>" in b),
    ("list-user-posts-atom", 200, lambda b: "<title>Posts by alice_2</title>" in b and b.count("<entry>") == 2),
    # Alice's own notifications: none of her own doing tells her anything.
    ("list-notifications", 200, lambda b: b["items"] == [] and b["unreadCount"] == 0),
    ("mark-notifications-seen", 200, lambda b: b["seenAt"] == "2026-11-22T08:59:00.000Z"),
    ("fan-out", None, lambda b: b["batchItemFailures"] == []),
    # Nothing scheduled in the samples: a run that publishes nothing.
    ("publish-scheduled", None, lambda b: b == {"published": 0, "dropped": 0}),
    ("park-failures", None, lambda b: b["batchItemFailures"] == []),
    ("delete-post", 204, lambda b: b is None),
    ("get-post", 404, lambda b: b["error"]["code"] == "not_found"),
    # Alice leaves: her profile and name go at once, the rest in the fan-out.
    ("delete-user", 204, lambda b: b is None),
    ("get-user", 404, lambda b: b["error"]["code"] == "not_found"),
]


def sample(name):
    return json.loads((ROOT / "events" / f"{name}.json").read_text())


def seed_post(endpoint, table):
    """The post the samples name, written as create-post would write it."""
    post = sample("fan-out")["Records"][0]["dynamodb"]["NewImage"]
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    client.put_item(TableName=table, Item=post)


def failure_notice(endpoint, table):
    """The park-failures sample, its notice pointed at this table's stream:
    the first shard's first record, as the fan-out's failure queue would
    deliver it had the fan-out given that record up."""
    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name="us-east-1")
    arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    first = streams.get_records(ShardIterator=iterator["ShardIterator"], Limit=1)["Records"][0]
    sequence = first["dynamodb"]["SequenceNumber"]
    event = sample("park-failures")
    notice = json.loads(event["Records"][0]["body"])
    notice["DDBStreamBatchInfo"].update(
        streamArn=arn, shardId=shard, startSequenceNumber=sequence, endSequenceNumber=sequence)
    event["Records"][0]["body"] = json.dumps(notice)
    return event


def invoke(name, port, data=None):
    source = ["--data-file", f"events/{name}.json"] if data is None else ["--data-ascii", json.dumps(data)]
    out = subprocess.run(
        ["cargo", "lambda", "invoke", "--invoke-address", "127.0.0.1", "--invoke-port", str(port),
         name, *source],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    if out.returncode != 0:
        raise SystemExit(f"cargo lambda invoke {name} failed:\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout)


def main():
    port, endpoint, table = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    seed_post(endpoint, table)
    failures = 0
    comment_id = None
    for name, status, check in SEQUENCE:
        data = None
        if name == "park-failures":
            data = failure_notice(endpoint, table)
        elif name == "delete-comment":
            # The sample names a comment; delete the one create-comment made.
            data = sample(name)
            data["pathParameters"]["commentId"] = comment_id
            data["rawPath"] = data["requestContext"]["http"]["path"] = (
                f"/posts/{data['pathParameters']['postId']}/comments/{comment_id}")
        response = invoke(name, port, data)
        if status is None:
            got, body = None, response
        else:
            got, raw = response.get("statusCode"), response.get("body") or "null"
            body = raw if name.endswith("-atom") else json.loads(raw)
        if name == "create-comment" and isinstance(body, dict):
            comment_id = body.get("commentId")
        ok = got == status and (body is not None or status == 204) and check(body)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {got if got is not None else ''} {json.dumps(body)[:160]}")
    checks = len(SEQUENCE)
    event = sample("create-user")
    event["requestContext"].pop("authorizer", None)
    event["headers"].pop("authorization", None)
    event["headers"].update({"x-forwarded-user": "mallory", "remote-user": "mallory"})
    event["body"] = json.dumps({"username": "mallory"})
    response = invoke("create-user", port, event)
    ok = response.get("statusCode") == 401
    failures += not ok
    checks += 1
    print(f"{'ok  ' if ok else 'FAIL'} create-user without the authorizer's claims, a caller named by headers: "
          f"{response.get('statusCode')}")
    print(f"invoke: {checks - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
