#!/usr/bin/env python3
"""Checks that the generic model code names no family (issue 61; docs/architecture.md, "Reading XCiT /
CaiT / CoaT / UFO-ViT"): outside comments, models/vision_transformer, blocks and builder hold no
identifier or string that contains xcit, cait, coat or ufo. What a family brings is declared in its
own files and listed in models/kinds.cpp; its names are the model file's `family:` data."""
import pathlib
import re
import sys

GENERIC = ["vision_transformer.h", "vision_transformer.cpp", "blocks.h", "blocks.cpp", "builder.h", "builder.cpp"]
FAMILY = re.compile(r"xcit|cait|coat|ufo", re.IGNORECASE)


def code_lines(text):
    """Each line with its // comment removed (the sources use no block comments)."""
    for number, line in enumerate(text.splitlines(), 1):
        yield number, re.sub(r"//.*", "", line)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    found = []
    for name in GENERIC:
        path = root / "models" / name
        for number, code in code_lines(path.read_text(encoding="utf-8")):
            if FAMILY.search(code):
                found.append(f"models/{name}:{number}: {code.strip()}")
    if found:
        print("FAIL: the generic model code names a family (declare it in the family's file, models/kinds.h):")
        print("\n".join(found))
        return 1
    print(f"PASS: {len(GENERIC)} generic model files name no family outside comments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
