"""Turns each client suite's own report into one line per test, and compares the two servers.

    results.py pytest REPORT.xml OUT.tsv     JUnit XML from pytest --junitxml
    results.py gotest REPORT.json OUT.tsv    `go test -json` events (tests and subtests)
    results.py tap DIR OUT.tsv               DIR/NAME.tap: the TAP output of one .t file each
    results.py compare DIR OUT.md            DIR/SUITE.slapd.tsv + DIR/SUITE.linden.tsv
                                             -> DIR/comparison.tsv and the summary OUT.md

A result line is `test<TAB>pass|fail|skip<TAB>note`. A test missing from one server's report
counts as failed there (the run stopped before it).
"""
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET


def write(out, rows):
    with open(out, "w") as f:
        for test, status, note in rows:
            note = " ".join(str(note).split())[:200]
            f.write("%s\t%s\t%s\n" % (test, status, note))


def from_pytest(report, out):
    rows = []
    for case in ET.parse(report).getroot().iter("testcase"):
        test = "%s::%s" % (case.get("classname", ""), case.get("name", ""))
        status, note = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status, note = "fail", child.get("message", "")
                break
            if child.tag == "skipped":
                status, note = "skip", child.get("message", "")
        rows.append((test, status, note))
    write(out, rows)


def from_gotest(report, out):
    rows, output = {}, {}
    with open(report) as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            test = ev.get("Test")
            if not test:
                continue
            action = ev.get("Action")
            if action == "output":
                text = ev.get("Output", "").strip()
                if text and not text.startswith(("=== ", "--- ")):
                    # The first line that names an error, else the first line at all.
                    if test not in output or ("rror" in text and "rror" not in output[test]):
                        output[test] = text
            elif action in ("pass", "fail", "skip"):
                rows[test] = {"pass": "pass", "fail": "fail", "skip": "skip"}[action]
    write(out, [(t, s, output.get(t, "") if s != "pass" else "") for t, s in sorted(rows.items())])


TAP_LINE = re.compile(r"^(not )?ok (\d+)\s*(?:-\s*)?(.*)$")


def ldif_records(path):
    """The lines of an LDIF file, continuations joined, userPassword values left out."""
    out = []
    with open(path, errors="replace") as f:
        for line in f.read().replace("\n ", "").splitlines():
            if not line.lower().startswith("userpassword:"):
                out.append(line)
    return out


def cmp_note(folder, name, desc):
    """For a failed comparison with data/N-cmp.ldif: whether the LDIF the test wrote differs
    only in userPassword values (Linden stores them hashed, the suite's slapd as sent)."""
    m = re.match(r"^data/(\w+)-cmp\.ldif$", desc)
    data = os.environ.get("NETLDAP_DATA")
    if not m or not data:
        return desc
    got = os.path.join(folder, "%s.%s-out.ldif" % (name, m.group(1)))
    want = os.path.join(data, "%s-cmp.ldif" % m.group(1))
    if os.path.exists(got) and os.path.exists(want) and ldif_records(got) == ldif_records(want):
        return desc + " (differs only in userPassword values)"
    return desc


def from_tap(folder, out):
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "*.tap"))):
        name = os.path.basename(path)[:-4]
        planned, seen, skip_all = None, 0, None
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                m = re.match(r"^1\.\.(\d+)(?:\s*#\s*(?:skip|SKIP)\w*\s*(.*))?", line)
                if m:
                    planned = int(m.group(1))
                    if planned == 0:
                        skip_all = m.group(2) or "skipped"
                    continue
                m = TAP_LINE.match(line)
                if not m:
                    continue
                seen += 1
                desc = m.group(3)
                # The test number is the identity: descriptions can be server messages.
                test = "%s #%s" % (name, m.group(2))
                if re.search(r"#\s*skip", desc, re.I):
                    rows.append((test, "skip", desc))
                elif m.group(1):
                    rows.append((test, "fail", cmp_note(folder, name, desc)))
                else:
                    rows.append((test, "pass", desc))
        if skip_all is not None:
            rows.append(("%s (file)" % name, "skip", skip_all))
        elif planned is None or seen < planned:
            rows.append(("%s (plan)" % name, "fail", "ran %d of %s planned tests" % (seen, planned)))
        else:
            rows.append(("%s (plan)" % name, "pass", ""))
    write(out, rows)


def load(path):
    rows = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 2:
                    rows[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return rows


def compare(folder, out):
    suites = sorted({os.path.basename(p).split(".")[0] for p in glob.glob(os.path.join(folder, "*.slapd.tsv"))})
    summary = ["| suite | tests | pass on slapd | pass on Linden | pass on both | slapd only | Linden only |",
               "|---|---|---|---|---|---|---|"]
    details = []
    with open(os.path.join(folder, "comparison.tsv"), "w") as table:
        table.write("suite\ttest\tslapd\tlinden\n")
        for suite in suites:
            slapd = load(os.path.join(folder, "%s.slapd.tsv" % suite))
            linden = load(os.path.join(folder, "%s.linden.tsv" % suite))
            tests = sorted(set(slapd) | set(linden))
            counts = dict(s=0, l=0, both=0, sonly=0, lonly=0)
            for t in tests:
                s = slapd.get(t, ("fail", "not run"))
                l = linden.get(t, ("fail", "not run"))
                table.write("%s\t%s\t%s\t%s\n" % (suite, t, s[0], l[0]))
                counts["s"] += s[0] == "pass"
                counts["l"] += l[0] == "pass"
                counts["both"] += s[0] == "pass" and l[0] == "pass"
                if s[0] == "pass" and l[0] != "pass":
                    counts["sonly"] += 1
                    details.append("- %s `%s`: slapd pass, Linden %s: %s" % (suite, t, l[0], l[1]))
                elif l[0] == "pass" and s[0] != "pass":
                    counts["lonly"] += 1
                    details.append("- %s `%s`: Linden pass, slapd %s: %s" % (suite, t, s[0], s[1]))
            summary.append("| %s | %d | %d | %d | %d | %d | %d |" % (
                suite, len(tests), counts["s"], counts["l"], counts["both"], counts["sonly"], counts["lonly"]))
    with open(out, "w") as f:
        f.write("\n".join(summary) + "\n\n")
        f.write("Differences (per test in comparison.tsv):\n\n")
        f.write("\n".join(details or ["- none"]) + "\n")


if __name__ == "__main__":
    kind, src, dst = sys.argv[1:4]
    {"pytest": from_pytest, "gotest": from_gotest, "tap": from_tap, "compare": compare}[kind](src, dst)
