#!/usr/bin/env python3
"""Checks the local stack's CORS answers against what the deployed HTTP API
answers with template.yaml's CorsConfiguration (AllowedOrigins left at its
default, "*"): a browser's preflight for every route's method is allowed with
the configured methods, headers and max age; a preflight for a method the API
does not allow gets no allow headers; an actual request from a page carries
Access-Control-Allow-Origin. The first argument is the API's port. Prints one
total line; exits 1 on any breach."""
import http.client
import sys

ORIGIN = "https://blog.example.com"
# Every route's method on a path it serves (ids need not exist: a preflight
# never reaches a function).
ROUTES = [
    ("GET", "/feed"),
    ("GET", "/users?username=someone"),
    ("POST", "/users"),
    ("PUT", "/users/someone"),
    ("POST", "/posts"),
    ("PUT", "/posts/01JD5Z8Q6N3W4X5Y6Z7A8B9C0D"),
    ("DELETE", "/posts/01JD5Z8Q6N3W4X5Y6Z7A8B9C0D"),
    ("POST", "/posts/01JD5Z8Q6N3W4X5Y6Z7A8B9C0D/likes"),
    ("DELETE", "/posts/01JD5Z8Q6N3W4X5Y6Z7A8B9C0D/likes"),
    ("DELETE", "/posts/01JD5Z8Q6N3W4X5Y6Z7A8B9C0D/comments/01JD5Z9A1B2C3D4E5F6G7H8J9K"),
]


def request(port, method, path, headers):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, headers=headers)
    response = conn.getresponse()
    response.read()
    found = {k.lower(): v for k, v in response.getheaders()}
    conn.close()
    return response.status, found


def main():
    port = int(sys.argv[1])
    failures = []
    checks = 0
    for method, path in ROUTES:
        checks += 1
        status, headers = request(port, "OPTIONS", path, {
            "Origin": ORIGIN,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization,content-type",
        })
        expected = {
            "access-control-allow-origin": "*",
            "access-control-max-age": "600",
        }
        wrong = {k: headers.get(k) for k, v in expected.items() if headers.get(k) != v}
        if status != 204 or wrong or method not in headers.get("access-control-allow-methods", ""):
            failures.append(f"preflight {method} {path}: {status} {headers}")
    checks += 1
    status, headers = request(port, "OPTIONS", "/feed", {
        "Origin": ORIGIN, "Access-Control-Request-Method": "PATCH"})
    if "access-control-allow-origin" in headers:
        failures.append(f"preflight PATCH allowed: {headers}")
    checks += 1
    status, headers = request(port, "GET", "/feed", {"Origin": ORIGIN})
    if status != 200 or headers.get("access-control-allow-origin") != "*":
        failures.append(f"GET /feed from a page: {status} {headers}")
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"cors: {checks - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
