#!/usr/bin/env python3
"""Rewrite docs/onnx.md's conformance figures from a run of
tests/e2e/test_conformance.sh: the three count lines (from the run's log)
and the list of failures by reason (from tests/onnx/conformance_failures.txt).

Usage: scripts/conformance_doc.py LOG   (LOG: the test's output)
"""
import re
import sys
from collections import defaultdict

DOC = "docs/onnx.md"
FAILURES = "tests/onnx/conformance_failures.txt"


def by_reason():
    groups = defaultdict(list)
    for line in open(FAILURES):
        if line.startswith("#") or not line.strip():
            continue
        name, why = line.rstrip("\n").split(" ", 1)
        groups[why[0].upper() + why[1:]].append(name)
    return "".join(f"- {why} ({len(names)}): "
                   + ", ".join(f"`{n}`" for n in sorted(names)) + ".\n"
                   for why, names in sorted(groups.items()))


def main():
    counts = [l for l in open(sys.argv[1]) if l.startswith("onnx node tests")]
    if len(counts) != 3:
        sys.exit(f"{sys.argv[1]}: expected the three 'onnx node tests' lines "
                 "of a whole test_conformance.sh run")
    doc = open(DOC).read()
    doc, n = re.subn(r"```\nonnx node tests: .*?```\n",
                     lambda m: "```\n" + "".join(counts) + "```\n", doc,
                     count=1, flags=re.S)
    doc, k = re.subn(r"(By reason:\n\n)(?:- .*\n)+",
                     lambda m: m.group(1) + by_reason(), doc, count=1)
    if n != 1 or k != 1:
        sys.exit(f"{DOC}: the counts block or the 'By reason:' list is gone")
    open(DOC, "w").write(doc)


main()
