#!/usr/bin/env python3
"""Atom feed documents, each checked as a strict feed reader would take it:

    check_atom.py FILE...

1. parsed as XML 1.0 by libxml2 (lxml), strictly: no recovery, so a
   character outside XML's Char production, raw or as a reference (`&#1;`,
   U+FFFF), or anything not well-formed, fails the document;
2. validated against RFC 4287's grammar (infra/atom.rng, RELAX NG);
3. checked for the RFC's rules a grammar cannot state: every Date construct
   an RFC 3339 date-time (3.3), every id an absolute IRI (4.2.6), every link
   href an IRI reference (4.2.7.1), an author for each entry (4.1.1, 4.1.2),
   at most one alternate link per type and hreflang (4.1.1, 4.1.2), an
   entry without content with an alternate link (4.1.2).

Before the files, control documents that each break one of those rules must
fail, and a valid one must pass, so that the check is shown able to fail.
Prints each failure and one total line ("atom: N passed, N failed"); exits 1
on any failure. The API suite runs it on the three feeds
(blog/tests/api/atom.rs)."""
import pathlib
import re
import sys

from lxml import etree

SCHEMA = pathlib.Path(__file__).resolve().parent / "atom.rng"
ATOM = "{http://www.w3.org/2005/Atom}"
# RFC 3339's date-time, with RFC 4287's upper-case T and Z.
DATE_TIME = re.compile(
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    r"T([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?"
    r"(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$"
)
# An absolute IRI: a scheme, then no whitespace or characters IRIs exclude.
ABSOLUTE_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|\\^`]+$")
IRI_REFERENCE = re.compile(r"[^\s<>\"{}|\\^`]*$")


def problems(document: bytes, schema: etree.RelaxNG) -> list[str]:
    """What is wrong with `document`, as a strict reader sees it (nothing: valid)."""
    parser = etree.XMLParser(recover=False, resolve_entities=False, no_network=True, huge_tree=False)
    try:
        root = etree.fromstring(document, parser)
    except etree.XMLSyntaxError as error:
        return [f"not well-formed XML 1.0: {error}"]
    if not schema.validate(root):
        return [f"not Atom 1.0 (RFC 4287's grammar): {e.message} (line {e.line})" for e in schema.error_log]
    found = []
    for date in root.iter(f"{ATOM}updated", f"{ATOM}published"):
        if not DATE_TIME.match(date.text or ""):
            found.append(f"{date.tag[len(ATOM):]} {date.text!r} is no RFC 3339 date-time")
    for ident in root.iter(f"{ATOM}id"):
        if not ABSOLUTE_IRI.match(ident.text or ""):
            found.append(f"id {ident.text!r} is no absolute IRI")
    for link in root.iter(f"{ATOM}link"):
        if not IRI_REFERENCE.match(link.get("href", "")):
            found.append(f"link href {link.get('href')!r} is no IRI reference")
    feed_has_author = root.tag == f"{ATOM}feed" and root.find(f"{ATOM}author") is not None
    entries = root.findall(f"{ATOM}entry") if root.tag == f"{ATOM}feed" else [root]
    for holder in [root, *entries] if root.tag == f"{ATOM}feed" else entries:
        alternates = [
            (link.get("type"), link.get("hreflang"))
            for link in holder.findall(f"{ATOM}link")
            if link.get("rel", "alternate") == "alternate"
        ]
        if len(alternates) != len(set(alternates)):
            found.append(f"{holder.tag[len(ATOM):]} has two alternate links of one type and language")
    for entry in entries:
        name = entry.findtext(f"{ATOM}id")
        if entry.find(f"{ATOM}author") is None and not feed_has_author:
            found.append(f"entry {name} has no author, nor has its feed")
        if entry.find(f"{ATOM}content") is None and not any(
            link.get("rel", "alternate") == "alternate" for link in entry.findall(f"{ATOM}link")
        ):
            found.append(f"entry {name} has neither content nor an alternate link")
    return found


VALID = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>{feed}</id>
<updated>2026-11-27T10:00:00Z</updated>{entry}</feed>"""
ENTRY = """<entry><title>{title}</title><id>urn:uuid:0190f0e4-0000-7000-8000-000000000000</id>
<updated>{updated}</updated><author><name>a</name></author>
<link rel="alternate" href="https://x.example/posts/1"/><summary>{summary}</summary></entry>"""


def control(feed="urn:uuid:0190f0e4-0000-7000-8000-000000000001", title="t", updated="2026-11-27T10:00:00Z", summary="s"):
    entry = ENTRY.format(title=title, updated=updated, summary=summary)
    return VALID.format(feed=feed, entry=entry).encode()


# Each must fail, for the reason named.
CONTROLS = {
    "a character reference to U+0001": control(summary="a &#1; b"),
    "a raw U+0001": control(summary="a \x01 b"),
    "a raw U+FFFF": control(title="a \uffff b"),
    "a reference to U+FFFE": control(title="a &#xFFFE; b"),
    "a reference to a surrogate": control(summary="&#xD800;"),
    "no feed updated": VALID.replace("<updated>2026-11-27T10:00:00Z</updated>", "").format(feed="x:1", entry="").encode(),
    "two entry titles": control(title="t</title><title>u"),
    "an unknown Atom element": control(summary="s</summary><atom-thing xmlns='http://www.w3.org/2005/Atom'/><summary>"),
    "a date without its time zone": control(updated="2026-11-27T10:00:00"),
    "a relative id": control(feed="no-scheme"),
}


def main() -> int:
    schema = etree.RelaxNG(etree.parse(str(SCHEMA)))
    passed = failed = 0
    if found := problems(control(), schema):
        print(f"FAIL the valid control document: {found}")
        failed += 1
    for name, document in CONTROLS.items():
        if not problems(document, schema):
            print(f"FAIL the control with {name} passed: the check cannot fail")
            failed += 1
    if failed == 0:
        print(f"the {len(CONTROLS)} broken control documents fail, the valid one passes")
    for path in sys.argv[1:]:
        found = problems(pathlib.Path(path).read_bytes(), schema)
        for problem in found:
            print(f"FAIL {path}: {problem}")
        if found:
            failed += 1
        else:
            passed += 1
    print(f"atom: {passed} passed, {failed} failed")
    return 1 if failed or not sys.argv[1:] else 0


if __name__ == "__main__":
    sys.exit(main())
