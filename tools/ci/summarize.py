#!/usr/bin/env python3
"""Count test results across Meson build directories, TAP subtests included.

usage: summarize.py [--extra-passed N] [--extra-failed N] BUILD_DIR [BUILD_DIR...]

Reads BUILD_DIR/meson-logs/testlog.json (one JSON object per line, as `meson test` writes
it). A test whose stdout holds TAP result lines ("ok N ..." / "not ok N ...") counts each
of those lines; if its process failed without any "not ok" line (a crash, a timeout, a
short plan), that counts as one more failure. A test without TAP lines counts as one.
TAP "# SKIP" lines and "not ok ... # TODO" lines, and tests Meson marked SKIP, count as
skipped. --extra-passed / --extra-failed add checks run outside Meson (fuzz, demo).

Each failed test is shown again just above the tally, where a truncated CI log still has it: its
"not ok" lines with the "#" detail under each, or, when it failed without one, the end of its
stdout and stderr (at most EXCERPT_LINES lines a test).

The last line printed is always `tests: N passed, N failed`. Exit status is 1 when any
test failed or when no test ran at all, else 0.
"""

import argparse
import json
import os
import re
import sys

# Unindented TAP result line; indented lines belong to nested subtests and are not counted.
TAP_LINE = re.compile(r"^(not ok|ok)\b(?:\s+\d+)?(?P<rest>.*)$")
DIRECTIVE = re.compile(r"#\s*(SKIP|TODO)\b", re.IGNORECASE)
BAIL_OUT = re.compile(r"^Bail out!")

FAILED_RESULTS = {"FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS", "INTERRUPT"}
PASSED_RESULTS = {"OK", "EXPECTEDFAIL"}
EXCERPT_LINES = 40


def count_tap(stdout):
    """Return (passed, failed, skipped, has_tap) for one test's stdout."""
    passed = failed = skipped = 0
    has_tap = False
    for line in stdout.splitlines():
        line = line.rstrip("\r")
        if BAIL_OUT.match(line):
            has_tap = True
            failed += 1
            continue
        m = TAP_LINE.match(line)
        if not m:
            continue
        has_tap = True
        directive = DIRECTIVE.search(m.group("rest"))
        kind = directive.group(1).upper() if directive else None
        if m.group(1) == "ok":
            if kind == "SKIP":
                skipped += 1
            else:
                passed += 1
        else:
            if kind in ("TODO", "SKIP"):
                skipped += 1
            else:
                failed += 1
    return passed, failed, skipped, has_tap


def failure_excerpt(stdout, stderr):
    """The lines that say why a test failed: each unindented "not ok" line and the "#" comment
    lines right under it; when there is none, the last lines of stdout and stderr."""
    lines, keep = [], False
    for line in stdout.splitlines():
        m = TAP_LINE.match(line)
        if m:
            keep = m.group(1) == "not ok" and not DIRECTIVE.search(m.group("rest"))
        elif BAIL_OUT.match(line):
            keep = True
        elif not line.startswith("#"):
            keep = False
        if keep:
            lines.append(line)
    if not lines:
        lines = (stdout.splitlines() + stderr.splitlines())[-EXCERPT_LINES:]
    if len(lines) > EXCERPT_LINES:
        lines = lines[:EXCERPT_LINES] + ["... (%d more lines)" % (len(lines) - EXCERPT_LINES)]
    return lines


def summarize_build(build_dir):
    """Return (passed, failed, skipped, programs, failures, error); failures holds
    (name (result), excerpt lines) for each failed test."""
    log = os.path.join(build_dir, "meson-logs", "testlog.json")
    passed = failed = skipped = programs = 0
    failures = []
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        return 0, 0, 0, 0, [], "no test log (%s)" % e.strerror

    for raw in lines:
        raw = raw.strip()
        if not raw:
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict) or "result" not in entry:
            continue
        programs += 1
        name = str(entry.get("name", "?"))
        result = str(entry.get("result", "")).upper()
        stdout = entry.get("stdout") or ""
        p, fl, s, has_tap = count_tap(stdout)
        if has_tap:
            if result in FAILED_RESULTS and fl == 0:
                fl = 1  # crashed, timed out or broke its plan without reporting a failure
            passed += p
            failed += fl
            skipped += s
        elif result in PASSED_RESULTS:
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            fl = 1
            failed += 1
        if fl:
            failures.append(("%s (%s)" % (name, result or "?"),
                             failure_excerpt(stdout, entry.get("stderr") or "")))
    return passed, failed, skipped, programs, failures, None


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build_dirs", nargs="+", metavar="BUILD_DIR")
    ap.add_argument("--extra-passed", type=int, default=0, metavar="N",
                    help="checks passed outside meson test")
    ap.add_argument("--extra-failed", type=int, default=0, metavar="N",
                    help="checks failed outside meson test")
    args = ap.parse_args(argv)

    total_passed = total_failed = 0
    tallies = []
    for build_dir in args.build_dirs:
        p, fl, s, programs, failures, error = summarize_build(build_dir)
        if error:
            tallies.append("[%s] %s" % (build_dir, error))
            continue
        tallies.append("[%s] %d test programs; subtests: %d ok, %d failing, %d skipped"
                       % (build_dir, programs, p, fl, s))
        for name, excerpt in failures:
            tallies.append("[%s]   FAILED: %s" % (build_dir, name))
            print("---- [%s] %s ----" % (build_dir, name))
            for line in excerpt:
                print("    " + line)
        total_passed += p
        total_failed += fl
    for line in tallies:
        print(line)

    if args.extra_passed or args.extra_failed:
        print("[extra] checks outside meson test: %d ok, %d failing"
              % (args.extra_passed, args.extra_failed))
    total_passed += args.extra_passed
    total_failed += args.extra_failed

    sys.stdout.flush()
    print("tests: %d passed, %d failed" % (total_passed, total_failed))
    if total_failed > 0 or total_passed + total_failed == 0:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
