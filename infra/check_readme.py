#!/usr/bin/env python3
"""Runs the shell blocks of README.md and the docs pages it links that are
marked for it (an HTML comment,
`<!-- infra/check_readme.py runs this block as written (test.sh) -->`, on
the line before the fence: docs/local.md's walk through the requests, local
sign-up with the AWS CLI and sample events through `cargo lambda invoke`,
then docs/operations.md's `blog-admin` with only the two variables the page
names), as written, one after the other in one bash, from the repository's
root, against the stack the test command started, as a new user's shell
would: no variable of the test command's (its PATH without .local/venv/bin,
no AWS credentials), only the stack's settings docs/local.md says the blocks
read (BLOG_PORT, IDP_PORT, WATCH_PORT, DYNAMODB_PORT, TABLE_NAME,
BLOG_DATA_DIR). The pages are read in the order of PAGES, each page's blocks
in its order: the walk's block comes first, and the blocks after it may use
what it defines (`API`).

Checks: every Markdown page of README.md and docs/ that holds a marked block
is one of PAGES; the blocks run to their end under `set -euo pipefail` (a
command that fails fails the check); every request curl makes answers below
400 but those a comment on its line names (`# 404`), each of those seen; and
run-local.sh installs every pinned tool the blocks run from .local/venv.
Arguments: the API's port, the Cognito emulator's port, watch's port,
DynamoDB's port, the table, the pool file (the stack's identity.json).
Prints one line per check and a total line; exits 1 on any failure."""
import collections
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARKER = "<!-- infra/check_readme.py runs this block as written (test.sh) -->"
# The pages whose marked blocks run, in the order they run: the walk
# (docs/local.md) defines what the blocks after it use.
PAGES = ("README.md", "docs/local.md", "docs/operations.md")
# What each pinned tool is run as in a block, by its name in TOOLS_PACKAGES.
TOOL_USES = {"awscli": r"\.local/venv/bin/aws\b", "cargo-lambda": r"\bcargo lambda\b"}
# A status a request is expected to answer: a comment after a command.
EXPECTED = re.compile(r"^[^#]*\S[^#]*#\s*([45]\d\d)\b")


def marked_blocks(page, text):
    """The marked blocks of one page: (where, "page:line" of the block's first
    line, and its body), in the page's order."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```sh":
            raise SystemExit(f"{page}:{i + 1}: the marker is not followed by a ```sh fence")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise SystemExit(f"{page}:{i + 2}: the block never closes")
        blocks.append((f"{page}:{i + 3}", "\n".join(lines[i + 2:end])))
    return blocks


def all_marked_blocks():
    """Every page's marked blocks, in the order of PAGES."""
    return [block for page in PAGES for block in marked_blocks(page, (ROOT / page).read_text())]


def pages_with_markers():
    """Every Markdown page of README.md and docs/ that holds the marker."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [str(p.relative_to(ROOT)) for p in pages if MARKER in p.read_text()]


def main():
    api_port, idp_port, watch_port, ddb_port, table, pool_file = sys.argv[1:7]
    blocks = all_marked_blocks()
    results = []

    def check(what, ok, detail=""):
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {detail}"))

    unread = [page for page in pages_with_markers() if page not in PAGES]
    check("every page with a marked block is one this check reads", not unread,
          f"{', '.join(unread)} not in PAGES")

    text = "\n".join(body for _, body in blocks)
    check("the pages mark the walk, the local sign-up, the invokes and blog-admin for this check",
          len(blocks) >= 4 and all(s in text for s in ("blog-admin token", "cognito-idp sign-up",
                                                        "cargo lambda invoke", "blog-admin replay")),
          f"{len(blocks)} marked blocks")

    # What run-local.sh installs (`ensure_tools NAME...`) covers what the
    # blocks run from .local/venv: the walk needs only run-local.sh.
    installs = re.search(r"^ensure_tools ([^&\n]*)", (ROOT / "infra/run-local.sh").read_text(), re.M)
    installed = set(installs.group(1).split()) if installs else set()
    needed = {tool for tool, use in TOOL_USES.items() if re.search(use, text)}
    check("run-local.sh installs every pinned tool the blocks run", needed <= installed,
          f"needs {sorted(needed)}, installs {sorted(installed)}")

    expected = collections.Counter(
        m.group(1) for _, body in blocks for line in body.splitlines() if (m := EXPECTED.match(line)))

    with tempfile.TemporaryDirectory(prefix="readme-check-") as scratch:
        scratch = pathlib.Path(scratch)
        data = scratch / "data"
        data.mkdir()
        shutil.copy(pool_file, data / "identity.json")
        statuses = scratch / "statuses"
        statuses.mkdir()
        # Observes, changes nothing: each curl also writes its response's
        # headers to a file of its own (the status line first).
        preamble = ('set -euo pipefail\n'
                    'curl() { command curl -D "$(mktemp "$README_CHECK_STATUSES/XXXXXXXX")" "$@"; }\n')
        script = preamble + "".join(f"\n# {where}\n{body}\n" for where, body in blocks)
        venv = str(ROOT / ".local" / "venv" / "bin")
        path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                               if p and os.path.abspath(p) != venv)
        env = {"PATH": path, "HOME": os.environ.get("HOME", str(scratch)), "LANG": "C.UTF-8",
               "BLOG_PORT": api_port, "IDP_PORT": idp_port, "WATCH_PORT": watch_port,
               "DYNAMODB_PORT": ddb_port, "TABLE_NAME": table, "BLOG_DATA_DIR": str(data),
               "README_CHECK_STATUSES": str(statuses)}
        # Where the shell finds Rust (cargo lambda runs under cargo), if set.
        env.update({k: os.environ[k] for k in ("CARGO_HOME", "RUSTUP_HOME") if k in os.environ})
        run = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=600)
        print(run.stdout, end="")
        print(run.stderr, end="", file=sys.stderr)
        check("the blocks run to their end, every command succeeding", run.returncode == 0,
              f"bash exited {run.returncode}: {run.stderr.strip()[-500:]}")

        answered = []
        for headers in sorted(statuses.iterdir()):
            # The last status line: after a 100 Continue, the final answer.
            lines = [l for l in headers.read_text().splitlines() if l.startswith("HTTP/")]
            if lines:
                answered.append(lines[-1].split()[1])
        failed = collections.Counter(s for s in answered if int(s) >= 400)
        check(f"{len(answered)} requests answered below 400 but those a comment names "
              f"({', '.join(sorted(expected.elements())) or 'none'})",
              bool(answered) and failed == expected,
              f"answered {dict(failed)}, the pages name {dict(expected)}")

    failed = results.count(False)
    print(f"readme: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
