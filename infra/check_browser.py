#!/usr/bin/env python3
"""A browser page on another origin signs in against the local user pool and
writes through the local API Gateway, in headless Chromium (Debian's, which
infra/lib.sh installs): what a front-end developer does against the local
stack, and then unchanged against AWS.

    check_browser.py API_PORT IDP_URL POOL_FILE

The page (infra/browser/index.html) is served from its own port, so every
call it makes is cross-origin: Cognito's InitiateAuth to the identity
provider, then the API with `Authorization: Bearer <ID token>` after the
gateway's CORS preflight. The user is made first with `blog-admin token`
(signed up and confirmed: confirming needs the admin API, which a browser has
no credentials for). Prints one total line; exits 1 on any failure."""
import base64
import functools
import html
import http.server
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAME = "browser_user"
PASSWORD = "Local-password-1"  # what `blog-admin token` signs users up with


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_page():
    handler = functools.partial(Quiet, directory=str(ROOT / "infra" / "browser"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_chromium(url):
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=60000", "--dump-dom", url],
            capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="result">(.*?)</pre>', out.stdout, re.S)
    if not found:
        raise SystemExit(f"no result in the page:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    text = html.unescape(found.group(1))
    try:
        return json.loads(text)
    except ValueError:
        raise SystemExit(f"the page did not finish: {text}\n{out.stderr[-2000:]}")


def main():
    port, idp, pool_file = int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3]
    pool = json.loads(pathlib.Path(pool_file).read_text())
    token = subprocess.run([str(ROOT / "target/debug/blog-admin"), "token", NAME, "--pool", pool_file],
                           check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    payload = token.split(".")[1]
    sub = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"]

    server = serve_page()
    page = f"http://127.0.0.1:{server.server_address[1]}/index.html?" + urllib.parse.urlencode({
        "idp": idp, "client": pool["clientId"], "api": f"http://127.0.0.1:{port}",
        "username": f"{NAME}@example.com", "password": PASSWORD, "name": NAME})
    steps = {step["step"]: step for step in run_chromium(page)}
    server.shutdown()

    results = []

    def check(what, ok, detail):
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {detail}"))

    def step(name):
        return steps.get(name, {"status": None, "body": None})

    check("no error in the page", "error" not in steps, steps.get("error"))
    signed_in = step("sign in")
    check("the page signs in against the identity provider (cross-origin InitiateAuth): 200",
          signed_in["status"] == 200 and "IdToken" in json.dumps(signed_in["body"]), signed_in)
    check("it reads the feed without a token: 200", step("read the feed without a token")["status"] == 200,
          step("read the feed without a token"))
    profile = step("create my profile")
    check("it creates its profile with the ID token, through the preflight: 201, the token's sub",
          profile["status"] == 201 and (profile["body"] or {}).get("userId") == sub, profile)
    check("it writes a post: 201", step("write a post")["status"] == 201, step("write a post"))
    read = step("read it back")
    check("it reads the post back: 200, by this user",
          read["status"] == 200 and (read["body"] or {}).get("userId") == sub
          and (read["body"] or {}).get("username") == NAME, read)
    check("it likes the post: 201", step("like it")["status"] == 201, step("like it"))

    failed = results.count(False)
    print(f"browser: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
