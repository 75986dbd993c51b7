#!/usr/bin/env python3
"""Checks the metrics the functions printed under `cargo lambda watch` (its log,
the first argument): every line that carries `_aws` must be a valid CloudWatch
Embedded Metric Format document, and the run must have produced the metrics an
operator reads (docs/operations.md, "Metrics"). Prints one total line; exits 1 on any
breach.

EMF, as CloudWatch Logs reads it: `_aws.Timestamp` in epoch milliseconds;
`_aws.CloudWatchMetrics` a list of directives, each with a `Namespace`, a list
of `Dimensions` sets (each a list of at most 30 names, each a string member of
the document) and a list of `Metrics` (each a `Name` whose member is a number,
and a known `Unit`)."""
import json
import sys
from collections import defaultdict

UNITS = {"Count", "Milliseconds", "Seconds", "Bytes", "None"}

# (function, metric, dimension values it must have been seen with)
EXPECTED = [
    ("create-user", "Created", {}),
    ("create-post", "Created", {}),
    ("create-comment", "Created", {}),
    ("like-post", "Created", {}),
    ("like-post", "WriteCapacityUnits", {"Target": "table"}),
    ("like-post", "WriteCapacityUnits", {"Target": "GSI1"}),
    ("get-post", "ReadCapacityUnits", {"Target": "table"}),
    ("find-user", "ReadCapacityUnits", {"Target": "table"}),
    ("list-user-posts", "ReadCapacityUnits", {"Target": "GSI1"}),
    ("get-feed", "ReadCapacityUnits", {"Target": "table"}),
    ("fan-out", "Records", {}),
    ("fan-out", "Applied", {}),
    ("fan-out", "OldestRecordAge", {}),
    ("fan-out", "RenamesFinished", {}),
    ("park-failures", "Parked", {}),
]


def problems_of(doc):
    aws = doc.get("_aws")
    if not isinstance(aws, dict):
        return ["_aws is not an object"]
    found = []
    if not isinstance(aws.get("Timestamp"), int):
        found.append("Timestamp is not an integer")
    directives = aws.get("CloudWatchMetrics")
    if not isinstance(directives, list) or not directives:
        return found + ["CloudWatchMetrics is not a non-empty list"]
    for directive in directives:
        if not isinstance(directive.get("Namespace"), str) or not directive["Namespace"]:
            found.append("no Namespace")
        for dims in directive.get("Dimensions", []):
            if not isinstance(dims, list) or len(dims) > 30:
                found.append(f"dimension set {dims!r}")
                continue
            for name in dims:
                if not isinstance(doc.get(name), str):
                    found.append(f"dimension {name} has no string value")
        metrics = directive.get("Metrics")
        if not isinstance(metrics, list) or not metrics:
            found.append("no Metrics")
            continue
        for metric in metrics:
            name = metric.get("Name")
            value = doc.get(name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                found.append(f"metric {name} has no numeric value")
            if metric.get("Unit") not in UNITS:
                found.append(f"metric {name} has unit {metric.get('Unit')!r}")
    return found


def main():
    seen = defaultdict(list)
    lines = bad = 0
    with open(sys.argv[1], encoding="utf-8", errors="replace") as log:
        for line in log:
            start = line.find("{")
            if start < 0 or '"_aws"' not in line:
                continue
            try:
                doc = json.loads(line[start:])
            except json.JSONDecodeError:
                continue  # a log line that quotes one, not a document
            if "_aws" not in doc:
                continue
            lines += 1
            problems = problems_of(doc)
            if problems:
                bad += 1
                if bad <= 5:
                    print(f"FAIL not valid EMF ({'; '.join(problems)}): {line.strip()[:200]}")
                continue
            for directive in doc["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    seen[(doc.get("Function"), metric["Name"])].append(doc)
    missing = 0
    for function, metric, dims in EXPECTED:
        docs = seen.get((function, metric), [])
        if not any(all(d.get(k) == v for k, v in dims.items()) for d in docs):
            missing += 1
            print(f"FAIL no {metric} {dims or ''} from {function}")
    print(f"EMF lines: {lines}, invalid {bad}; expected metrics missing: {missing} of {len(EXPECTED)}")
    ok = lines > 0 and bad == 0 and missing == 0
    print(f"metrics: {int(ok)} passed, {int(not ok)} failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
