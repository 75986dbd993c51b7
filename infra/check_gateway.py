#!/usr/bin/env python3
"""Checks the local stack as run-local.sh runs it: the local API Gateway
(`blog-admin api-gateway`, from template.yaml) in front of `cargo lambda
watch`, with tokens from the local Cognito user pool (moto). A client does
what it would do against AWS: signs up, confirms and signs in with the AWS
CLI (only the endpoint changed) or takes a token from `blog-admin token`,
and sends `Authorization: Bearer <token>` (or the bare token, which API
Gateway takes too). Refused tokens are API Gateway's
401 and write nothing. Arguments: the API's port, the identity provider's
URL, the pool file (identity.json in the stack's data directory). Prints one total line; exits 1 on
any failure."""
import http.client
import json
import os
import subprocess
import sys

AWS = os.path.join(os.path.dirname(sys.executable), "aws")
PASSWORD = "Correct-Horse-9-battery"


def call(port, method, path, token=None, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=sent)
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    try:
        return response.status, json.loads(text) if text else None
    except ValueError:
        return response.status, text


def aws(idp, *args):
    env = dict(os.environ, AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local",
               AWS_DEFAULT_REGION="us-east-1")
    return subprocess.run([AWS, "--endpoint-url", idp, "cognito-idp", *args], env=env,
                          check=True, capture_output=True, text=True).stdout.strip()


def main():
    port, idp, pool_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with open(pool_file) as f:
        pool = json.load(f)
    results = []

    def check(what, ok, detail=""):
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {detail}"))

    # docs/deploying.md's deployed sign-up, with only the endpoint changed: an
    # access token, as the deployed walk uses.
    email = "walker@example.com"
    aws(idp, "sign-up", "--client-id", pool["clientId"], "--username", email, "--password", PASSWORD)
    aws(idp, "admin-confirm-sign-up", "--user-pool-id", pool["userPoolId"], "--username", email)
    access = aws(idp, "initiate-auth", "--client-id", pool["clientId"], "--auth-flow",
                 "USER_PASSWORD_AUTH", "--auth-parameters", f"USERNAME={email},PASSWORD={PASSWORD}",
                 "--query", "AuthenticationResult.AccessToken", "--output", "text")
    status, body = call(port, "POST", "/users", access, {"username": "walker"})
    check("an access token creates the caller's profile: 201", status == 201, f"{status} {body}")
    walker = body.get("userId") if isinstance(body, dict) else None

    # An ID token, from the quick way.
    id_token = subprocess.run(["./target/debug/blog-admin", "token", "reader", "--pool", pool_file],
                              check=True, capture_output=True, text=True).stdout.strip()
    status, body = call(port, "POST", "/users", id_token, {"username": "reader"})
    check("an ID token creates the caller's profile: 201", status == 201, f"{status} {body}")

    status, post = call(port, "POST", "/posts", access, {"title": "Through the gateway", "content": "c"})
    check("a write with a token: 201", status == 201, f"{status} {post}")
    post_id = post.get("postId") if isinstance(post, dict) else None
    status, body = call(port, "GET", f"/posts/{post_id}")
    check("a public read without a token: 200, the author from the token's sub",
          status == 200 and isinstance(body, dict) and body.get("userId") == walker, f"{status} {body}")

    # AWS: "The identitySource can include only the token, or the token
    # prefixed with Bearer."
    status, body = call(port, "POST", "/posts", body={"title": "A bare token", "content": "c"},
                        headers={"Authorization": access})
    check("a bare token, without Bearer: 201", status == 201, f"{status} {body}")

    unauthorized = {"message": "Unauthorized"}
    for what, headers in [("no Authorization header", {}),
                          ("not Bearer", {"Authorization": f"Basic {access}"}),
                          ("a malformed token", {"Authorization": "Bearer not.a.token"}),
                          ("a token one byte changed",
                           {"Authorization": f"Bearer {access[:-4]}{'AAAA' if access[-4:] != 'AAAA' else 'BBBB'}"})]:
        status, body = call(port, "POST", "/posts", body={"title": "no", "content": "no"}, headers=headers)
        check(f"{what}: 401 from the gateway", (status, body) == (401, unauthorized), f"{status} {body}")
    status, body = call(port, "GET", f"/users/{walker}/posts")
    titles = [p.get("title") for p in body.get("items", [])] if isinstance(body, dict) else body
    check("the refused writes wrote nothing", titles == ["A bare token", "Through the gateway"],
          f"{titles}")

    status, body = call(port, "GET", "/nowhere")
    check("an unknown route: 404 from the gateway", (status, body) == (404, {"message": "Not Found"}),
          f"{status} {body}")

    failed = results.count(False)
    print(f"gateway: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
