#!/usr/bin/env python3
"""The test command's two builds resolve the same features.

`cargo test --workspace --no-run` resolves features with blog's
dev-dependencies, `cargo build --workspace --bins` without them. Where a
crate both builds compile gets other features in each, it and everything
above it are compiled twice (workspace-hack/Cargo.toml says why and how
that is avoided). This compares the two resolutions, crate by crate, and
names the features workspace-hack lacks.
"""
import subprocess
import sys


def resolved(*edges):
    out = subprocess.run(
        ["cargo", "tree", "--workspace", "--locked", "--prefix", "none", "-f", "{p}|{f}", *edges],
        capture_output=True, text=True, check=True).stdout
    features = {}
    for line in out.splitlines():
        package, _, rest = line.partition("|")
        if not rest and "|" not in line:
            continue
        name = " ".join(package.split()[:2])
        listed = rest.removesuffix(" (*)").strip()
        features.setdefault(name, set()).update(f for f in listed.split(",") if f)
    return features


def main():
    built = resolved("-e", "no-dev")
    tested = resolved()
    differ = {name: sorted(tested[name] - built[name]) for name in built
              if name in tested and tested[name] != built[name]}
    if differ:
        for name, extra in sorted(differ.items()):
            print(f"features: {name}: the tests' build adds {', '.join(extra) or '(fewer features)'}")
        print("features: add them to workspace-hack/Cargo.toml, else the bins' build compiles these crates again")
        sys.exit(1)
    print(f"features: the tests' build and the bins' build resolve the same features for the {len(built)} crates both compile")


if __name__ == "__main__":
    main()
