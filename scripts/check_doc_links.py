#!/usr/bin/env python3
"""Every relative link of README.md and docs/*.md leads somewhere: the file exists, and a
`#anchor` names a heading of that page (GitHub's rule: lower case, punctuation dropped, spaces to
hyphens, a repeated heading gets -1, -2, ...). CTest: "docs: every link between the pages resolves".

Links to web pages (http:, https:, mailto:) are not followed. Text inside code blocks and inline
code is not read as links.
Usage: check_doc_links.py [REPO_ROOT]
"""
import glob
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text):
    """The page without its fenced code blocks and inline code."""
    text = re.sub(r"(?ms)^```.*?^```", "", text)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path):
    found, seen = set(), {}
    text = re.sub(r"(?ms)^```.*?^```", "", open(path, encoding="utf-8").read())
    for heading in re.findall(r"(?m)^#{1,6} +(.+?) *#*$", text):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    cache, broken, checked = {}, [], 0
    for page in pages:
        text = open(page, encoding="utf-8").read()
        for line in prose(text).split("\n"):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                checked += 1
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                rel = os.path.relpath(page, root)
                if not os.path.exists(dest):
                    broken.append(f"{rel}: ({target}): {os.path.relpath(dest, root)} does not exist")
                elif anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        broken.append(f"{rel}: ({target}): {os.path.relpath(dest, root)} has no heading #{anchor}")
    if checked == 0:
        sys.exit("FAIL: no link found in the docs (the check would pass vacuously)")
    if broken:
        print("FAIL: links that lead nowhere:")
        print("\n".join("  " + b for b in broken))
        sys.exit(1)
    print(f"PASS: {checked} links in {len(pages)} pages resolve")


if __name__ == "__main__":
    main()
