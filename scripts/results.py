#!/usr/bin/env python3
"""Every published figure has one home: docs/results.yaml. This script writes what the docs show
from it, and checks that they show nothing else (CTest: "docs: every published figure ...").

It writes three things:
  - the README's results table, between `<!-- results-table:begin -->` and `<!-- results-table:end -->`,
    one row per key of `readme` in the results file;
  - docs/results.md, every figure with its command, machine, baseline, date and commit;
  - each inline figure `<!-- result:KEY -->...<!-- /result -->` in README.md and docs/*.md, which
    becomes the figure of KEY (so a page quotes a figure without retyping it).
A figure whose code changed after it was measured is marked stale: each entry lists the paths it
measures (`depends`), and git says whether a commit after the entry's one touched them.

Usage:
  python3 scripts/results.py [--root DIR]           check: exit 1 and a diff if a page differs
  python3 scripts/results.py --write [--root DIR]   rewrite the pages from the results file
  python3 scripts/results.py --stale [--root DIR]   list the stale figures and the commits after them
Exits 77 (CTest: skipped) where git or the history it needs is absent, for example in a tarball
or a shallow clone: staleness cannot be told there, and a guess would be a false figure.
"""
import argparse
import difflib
import glob
import os
import re
import subprocess
import sys

import yaml

SKIP = 77
FIELDS = ("claim", "figure", "baseline", "machine", "date", "commit", "command", "depends", "page")
INLINE = re.compile(r"<!-- result:([a-z0-9_]+) -->(.*?)<!-- /result -->", re.S)
TABLE_BEGIN, TABLE_END = "<!-- results-table:begin -->", "<!-- results-table:end -->"


class Skip(Exception):
    pass


def fail(message):
    sys.exit(f"results.py: {message}")


def load(root):
    path = os.path.join(root, "docs", "results.yaml")
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    for section in ("machines", "baselines", "results", "readme"):
        if section not in data:
            fail(f"{path}: no '{section}' section")
    for key, entry in data["results"].items():
        if not re.fullmatch(r"[a-z0-9_]+", key):
            fail(f"{path}: result key '{key}' is not lower_snake_case")
        missing = [f for f in FIELDS if f not in entry]
        if missing:
            fail(f"{path}: result '{key}' lacks {', '.join(missing)}")
        if entry["machine"] not in data["machines"]:
            fail(f"{path}: result '{key}': machine '{entry['machine']}' is not under 'machines'")
        if entry["baseline"] is not None and entry["baseline"] not in data["baselines"]:
            fail(f"{path}: result '{key}': baseline '{entry['baseline']}' is not under 'baselines'")
        if not re.fullmatch(r"\d{4}-\d\d-\d\d", str(entry["date"])):
            fail(f"{path}: result '{key}': date '{entry['date']}' is not YYYY-MM-DD")
        if not entry["depends"]:
            fail(f"{path}: result '{key}': 'depends' names no path, so staleness could not be told")
        for dep in entry["depends"]:
            if not os.path.exists(os.path.join(root, dep)):
                fail(f"{path}: result '{key}': depends on '{dep}', which does not exist")
    for key in data["readme"]:
        if key not in data["results"]:
            fail(f"{path}: readme lists '{key}', which is not a result")
    return data


def git(root, *args):
    try:
        out = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise Skip("git is not installed")
    if out.returncode != 0:
        raise Skip(f"git {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def changes_since(root, entry):
    """The commits after the entry's commit that touch what it measures (newest first)."""
    commit = str(entry["commit"])
    try:
        git(root, "cat-file", "-e", f"{commit}^{{commit}}")
    except Skip:
        fail(f"commit {commit} is not in this repository's history")
    out = git(root, "log", "--format=%h", f"{commit}..HEAD", "--", *entry["depends"])
    return out.split()


def readme_table(data, stale):
    rows = ["| claim | figure | baseline | machine | date | commit |", "|---|---|---|---|---|---|"]
    for key in data["readme"]:
        e = data["results"][key]
        baseline = data["baselines"][e["baseline"]]["short"] if e["baseline"] else "—"
        commit = f"`{e['commit']}`" + (" (stale†)" if stale[key] else "")
        rows.append(f"| [{e['claim']}](docs/results.md#{key}) | **{e['figure']}** | {baseline} | "
                    f"{data['machines'][e['machine']]['short']} | {e['date']} | {commit} |")
    note = ("† measured before a later change to the code it measures "
            "(`python3 scripts/results.py --stale` lists the commits)."
            if any(stale[k] for k in data["readme"]) else "")
    return "\n".join(rows) + ("\n\n" + note if note else "")


def results_page(data, stale):
    out = ["# Results", "",
           "<!-- Written by scripts/results.py from docs/results.yaml: edit that file, then run",
           "     python3 scripts/results.py --write. CTest fails while this page differs. -->", "",
           "Every figure Tessera publishes, with the command that measures it, the machine, the",
           "baseline, the date and the commit of the code measured. A figure marked *stale* was",
           "measured before a later commit changed the code it measures (`python3",
           "scripts/results.py --stale` lists those commits). Other pages quote these figures by key; the history of earlier figures is in",
           "[history.md](history.md).", "",
           "| key | claim | figure | machine | date | commit |", "|---|---|---|---|---|---|"]
    for key, e in data["results"].items():
        state = " (stale)" if stale[key] else ""
        out.append(f"| [`{key}`](#{key}) | {e['claim']} | {e['figure']} | "
                   f"{data['machines'][e['machine']]['short']} | {e['date']} | `{e['commit']}`{state} |")
    for key, e in data["results"].items():
        out += ["", f"### {key}", "", f"**{e['claim']}**: {e['figure']}.", ""]
        if e.get("detail"):
            out += [e["detail"].strip(), ""]
        baseline = data["baselines"][e["baseline"]]["full"] if e["baseline"] else "none"
        out += [f"- Machine: {data['machines'][e['machine']]['full']}.",
                f"- Baseline: {baseline}.",
                f"- Measured {e['date']} on commit `{e['commit']}`"
                + ("; **stale**: later commits touch the code it measures (`--stale` lists them)."
                   if stale[key] else "."),
                f"- Depends on: {', '.join('`' + d + '`' for d in e['depends'])}.",
                f"- Tables and method: [{e['page']}]({os.path.relpath(e['page'], 'docs')}).", "",
                "```sh", e["command"].strip(), "```"]
    out += ["", "## Machines", ""]
    out += [f"- `{k}`: {m['full']}." for k, m in data["machines"].items()]
    out += ["", "## Baselines", ""]
    out += [f"- `{k}`: {b['full']}." for k, b in data["baselines"].items()]
    return "\n".join(out) + "\n"


def render(root, data, stale, path, text):
    if os.path.basename(path) == "README.md" and os.path.dirname(path) == root:
        start, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
        if start < 0 or end < start:
            fail(f"README.md: no {TABLE_BEGIN} ... {TABLE_END} block for the results table")
        text = text[:start + len(TABLE_BEGIN)] + "\n" + readme_table(data, stale) + "\n" + text[end:]

    def inline(match):
        key = match.group(1)
        if key not in data["results"]:
            fail(f"{os.path.relpath(path, root)}: inline result '{key}' is not in docs/results.yaml")
        e = data["results"][key]
        return (f"<!-- result:{key} -->{e['figure']}"
                + (" (stale: measured before a later code change)" if stale[key] else "")
                + "<!-- /result -->")

    return INLINE.sub(inline, text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--stale", action="store_true")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    data = load(root)
    try:
        if git(root, "rev-parse", "--is-shallow-repository").strip() == "true":
            raise Skip("this clone is shallow: the commits of the figures may be missing")
        stale = {key: changes_since(root, e) for key, e in data["results"].items()}
    except Skip as why:
        print(f"SKIP: {why}; the results pages need git history to mark stale figures")
        sys.exit(SKIP)
    if args.stale:
        for key, commits in stale.items():
            if commits:
                print(f"{key}: measured at {data['results'][key]['commit']}; since then "
                      f"{' '.join(commits)}")
        return
    pages = {os.path.join(root, "docs", "results.md"): results_page(data, stale)}
    for path in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        if path in pages:
            continue
        with open(path, encoding="utf-8") as f:
            pages[path] = f.read()
    differ = []
    used = set()
    for path, text in pages.items():
        new = render(root, data, stale, path, text) if not path.endswith("results.md") else text
        used.update(m.group(1) for m in INLINE.finditer(new))
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if new != old:
            differ.append((path, old, new))
            if args.write:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
    if args.write:
        for path, _, _ in differ:
            print(f"wrote {os.path.relpath(path, root)}")
        return
    if differ:
        for path, old, new in differ:
            rel = os.path.relpath(path, root)
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       f"{rel} (as it is)", f"{rel} (from docs/results.yaml)"))
        print(f"FAIL: {len(differ)} page(s) differ from docs/results.yaml; "
              "run python3 scripts/results.py --write")
        sys.exit(1)
    count = len(data["results"])
    print(f"PASS: the README's table ({len(data['readme'])} rows), docs/results.md ({count} figures) "
          f"and {len(used)} inline figure keys agree with docs/results.yaml; "
          f"{sum(1 for k in stale if stale[k])} figures stale")


if __name__ == "__main__":
    main()
