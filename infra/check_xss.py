#!/usr/bin/env python3
"""Every entry of the hostile Markdown corpus (blog/tests/xss-corpus.json),
posted through the local API Gateway and read back as Q2's `contentHtml`, is
loaded in headless Chromium (Debian's, which infra/lib.sh installs) on one
page; the check fails if any script runs or any request leaves the page.

    check_xss.py API_PORT POOL_FILE

How a script running is seen: the page replaces alert, confirm, prompt and
print (what every corpus entry calls) before any entry is parsed, and counts
the calls; the entries are in the page's HTML as served (scripts in it would
run at parse) and inserted again with innerHTML (as a front end would), and
every element of both copies gets click, focus, mouse and toggle events.
How a request leaving is seen: this script's own server is Chromium's proxy
for every URL (loopback included), and records every request but the
page's own and Chromium's own clock and update checks (BROWSER_OWN); the page also reports its Resource Timing entries and
every URL-bearing attribute the browser parsed to another scheme than http,
https or mailto. A control page with unsanitised payloads (a script, an event
handler, images from elsewhere over http and https) must be caught by both, so that the
check is shown able to fail. Prints one total line; exits 1 on any failure."""
import base64
import concurrent.futures
import html
import http.server
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAME = "xss_checker"

HOOKS = """<script>
window.__ran = [];
for (const name of ["alert", "confirm", "prompt", "print"]) {
  window[name] = function () { window.__ran.push(name); };
}
</script>"""

PROBE = """<script>
window.addEventListener("load", async () => {
  const holder = document.getElementById("again");
  for (const entry of JSON.parse(document.getElementById("entries").textContent)) {
    const box = document.createElement("div");
    box.innerHTML = entry;
    holder.appendChild(box);
  }
  const badUrls = [];
  for (const element of document.querySelectorAll("#served *, #again *")) {
    for (const attr of ["href", "src", "action", "formaction", "data", "poster", "background", "srcset", "xlink:href"]) {
      if (!element.hasAttribute(attr)) continue;
      let scheme = "unparsable";
      try { scheme = new URL(element.getAttribute(attr)).protocol; } catch (_) {}
      if (!["http:", "https:", "mailto:"].includes(scheme)) badUrls.push(element.outerHTML.slice(0, 200));
    }
    // No click within a link (it would leave the page: a link's URL is
    // checked above, as the browser parsed it).
    const inLink = element.closest("a[href]") !== null;
    for (const kind of ["click", "dblclick", "mouseover", "mouseenter", "focus", "focusin", "toggle", "animationstart"]) {
      if (inLink && kind.endsWith("click")) continue;
      element.dispatchEvent(new Event(kind, { bubbles: true }));
    }
    if (!inLink && typeof element.click === "function") element.click();
  }
  await new Promise((done) => setTimeout(done, 2000));
  const own = [location.origin + location.pathname, location.origin + "/favicon.ico"];
  const resources = performance.getEntriesByType("resource").map((r) => r.name).filter((n) => !own.includes(n));
  document.getElementById("result").textContent = JSON.stringify({
    ran: window.__ran, resources, badUrls,
    served: document.querySelectorAll("#served > article").length,
    again: holder.children.length,
  });
});
</script>"""


def page(entries):
    served = "\n".join(f'<article id="e{i}">{entry}</article>' for i, entry in enumerate(entries))
    # The entries for innerHTML, as JSON in a script element: `<` escaped so
    # that no entry can close it.
    as_json = json.dumps(entries).replace("<", "\\u003c")
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>corpus</title>{HOOKS}</head><body>'
            f'<pre id="result">running</pre><div id="served">{served}</div><div id="again"></div>'
            f'<script type="application/json" id="entries">{as_json}</script>{PROBE}</body></html>')


# What Chromium asks for of its own accord whatever the page (its clock and
# its component updates), through the proxy like everything else.
BROWSER_OWN = {"clients2.google.com", "update.googleapis.com", "redirector.gvt1.com",
               "edgedl.me.gvt1.com", "accounts.google.com", "content-autofill.googleapis.com",
               "optimizationguide-pa.googleapis.com", "safebrowsingohttpgateway.googleapis.com"}


class Harness(http.server.BaseHTTPRequestHandler):
    pages = {}
    requests = []

    def log_message(self, *args):
        pass

    def parse_request(self):
        line = self.raw_requestline.decode("latin-1", "replace").strip()
        ok = super().parse_request()
        # Through the proxy, a request names its URL whole (`GET http://host/…`)
        # or its host (`CONNECT host:443`); the page itself too.
        target = self.path if ok else line
        own_prefix = f"http://{self.server.own_host}"
        if ok and target.startswith(own_prefix + "/"):
            self.path = target[len(own_prefix):]
        own = ok and self.command == "GET" and (self.path in self.pages or self.path == "/favicon.ico")
        host = target.split("//", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
        if not own and host not in BROWSER_OWN:
            Harness.requests.append(f"{self.command if ok else '?'} {target[:120]!r}")
        return ok

    def do_CONNECT(self):
        self.send_error(403)

    def do_POST(self):
        self.send_error(403)

    def do_GET(self):
        body = self.pages.get(self.path)
        if body is None:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Harness)
    server.own_host = f"127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def load(server, path):
    """Opens the page in Chromium; its report and what the server saw."""
    port = server.server_address[1]
    Harness.requests.clear()
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--proxy-server=http://127.0.0.1:{port}", "--proxy-bypass-list=<-loopback>",
             f"--user-data-dir={profile}", "--virtual-time-budget=30000", "--dump-dom",
             f"http://127.0.0.1:{port}{path}"],
            capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="result">(.*?)</pre>', out.stdout, re.S)
    if not found:
        raise SystemExit(f"no result in the page:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    try:
        report = json.loads(html.unescape(found.group(1)))
    except ValueError:
        raise SystemExit(f"the page did not finish: {found.group(1)[:500]}\n{out.stderr[-2000:]}")
    return report, list(Harness.requests)


def api_call(port, method, path, token, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    for _ in range(20):
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            if err.code in (429, 503):
                time.sleep(0.2)
                continue
            return err.code, json.loads(err.read() or b"null")
    return 429, None


def main():
    port, pool_file = int(sys.argv[1]), sys.argv[2]
    corpus = json.loads((ROOT / "blog/tests/xss-corpus.json").read_text())
    token = subprocess.run([str(ROOT / "target/debug/blog-admin"), "token", NAME, "--pool", pool_file],
                           check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    results = []

    def check(what, ok, detail):
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {detail}"))

    status, _ = api_call(port, "POST", "/users", token, {"username": NAME})
    check("the checker's profile: 201", status == 201, status)
    def post_and_read(item):
        """One entry posted and read back: its contentHtml, or why not."""
        i, entry = item
        status, created = api_call(port, "POST", "/posts", token, {"title": f"corpus {i}", "content": entry})
        if status != 201:
            return None, (f"corpus entry {i} is posted: 201", (status, created))
        status, got = api_call(port, "GET", f"/posts/{created['postId']}", token)
        if status != 200 or "contentHtml" not in (got or {}):
            return None, (f"corpus entry {i} is read back with contentHtml", (status, got))
        return got["contentHtml"], None

    # As many at once as watch runs functions at once (WATCH_CONCURRENCY,
    # 4 by default).
    rendered = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for html_text, failure in pool.map(post_and_read, enumerate(corpus)):
            if failure is not None:
                check(failure[0], False, failure[1])
                continue
            rendered.append(html_text)
    check(f"every corpus entry posted and read back ({len(rendered)} of {len(corpus)})",
          len(rendered) == len(corpus), len(rendered))

    server = serve()
    control = ['<script>alert(1)</script>', '<img src="x" onerror="confirm(1)">',
               '<img src="http://leak.example/pixel.png">', '<img src="https://leak.example/pixel.png">']
    Harness.pages = {"/corpus.html": page(rendered), "/control.html": page(control)}

    report, requests = load(server, "/control.html")
    check("the control page's script and event handler are seen running",
          "alert" in report["ran"] and "confirm" in report["ran"], report)
    check("the control page's images from elsewhere (http and https) are seen leaving",
          "GET 'http://leak.example/pixel.png'" in requests and "CONNECT 'leak.example:443'" in requests
          and "https://leak.example/pixel.png" in report["resources"], (requests, report))

    report, requests = load(server, "/corpus.html")
    server.shutdown()
    check(f"all {len(rendered)} renderings are on the page, as served and through innerHTML",
          report["served"] == len(rendered) and report["again"] == len(rendered), report)
    check("no script runs from any of them", report["ran"] == [], report["ran"])
    check("no request leaves the page (the server saw none)", requests == [], requests)
    check("no request leaves the page (Resource Timing)", report["resources"] == [], report["resources"])
    check("every URL the browser parsed is http, https or mailto", report["badUrls"] == [], report["badUrls"])

    failed = results.count(False)
    print(f"xss: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
