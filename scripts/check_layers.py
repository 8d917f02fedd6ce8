#!/usr/bin/env python3
"""The library's folders are layers, and an #include may only point down (docs/architecture.md).

Reads every C++/CUDA source and header under the library's folders and fails, listing each
offending line, when a file includes a header of its own layer's superiors or of a folder it may not
see. Runs as a CTest test ("layers: ...") in every suite. Usage: check_layers.py [SOURCE_ROOT]
"""
import os
import re
import sys

# Bottom to top. A folder may include its own layer and every layer below it, nothing above.
LAYERS = [
    ("core",),
    ("ops/kernels",),            # kernel interfaces, the one list of kernel tables
    ("ops/cpu",),                # CPU kernels, and the tables' definitions with their CPU slots
    ("autograd",),
    ("ops",),                    # op front ends: checks, dispatch, gradient formulas
    ("testing",),                # checks of ops and modules: finite-difference gradients
    ("nn",),
    ("io",),
    ("models",),
    ("data",),
    ("train/distributed",),
    ("train",),
    ("tools/cli",),
    # Programs: each may include any layer below it, none includes another, nothing includes them.
    ("tools", "bench", "fuzz", "examples"),
]
PROGRAMS = {"tools", "bench", "fuzz", "examples"}
# Backends register themselves with a layer below; only the files listed may include them.
BACKENDS = {
    # The CUDA backend: core, the kernel interfaces and itself.
    "cuda": {"may_include": {"core", "ops/kernels", "cuda"},
             "included_by": {"train/distributed/backends"}},
}
# Communicator backends, like cuda/, sit above what they serve.
SUBFOLDERS = {"train/distributed/backends": "train/distributed"}

# "tessera/core/tensor.h" or <tessera/core/tensor.h> (the examples build against the installed
# package), or a path from the source root ("tools/cli/args.h").
INCLUDE = re.compile(r'^\s*#\s*include\s+["<](?:tessera/)?([^">]+)[">]')
SUFFIXES = (".h", ".cpp", ".cu", ".cuh")


def folder_of(path):
    """The layer folder a source path belongs to (the longest listed prefix), or None."""
    candidates = [f for layer in LAYERS for f in layer] + list(BACKENDS) + list(SUBFOLDERS)
    best = None
    for f in candidates:
        if path == f or path.startswith(f + "/"):
            if best is None or len(f) > len(best):
                best = f
    return best


def rank(folder):
    folder = SUBFOLDERS.get(folder, folder)
    for i, layer in enumerate(LAYERS):
        if folder in layer:
            return i
    return None


def allowed(src, dst):
    if src == dst:
        return True
    if dst in BACKENDS:
        return src in BACKENDS[dst]["included_by"] or src == dst
    if src in BACKENDS:
        return dst in BACKENDS[src]["may_include"]
    if src in SUBFOLDERS and dst == SUBFOLDERS[src]:
        return True
    if src in PROGRAMS and dst in PROGRAMS:
        return False  # sideways between programs (src == dst returned above)
    rs, rd = rank(src), rank(dst)
    return rs is not None and rd is not None and rd <= rs


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    os.chdir(root)
    top = {f.split("/")[0] for layer in LAYERS for f in layer} | set(BACKENDS)
    problems, checked = [], 0
    for base in sorted(top):
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                src = folder_of(path)
                if src is None:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or not os.path.exists(m.group(1)):
                            continue  # a system header, or one relative to its own folder
                        checked += 1
                        dst = folder_of(m.group(1))
                        if dst is not None and not allowed(src, dst):
                            problems.append(f"{path}:{number}: {src}/ includes {m.group(1)} ({dst}/ is not below it)")
    for p in problems:
        print("FAIL: " + p)
    if problems:
        print(f"FAIL: {len(problems)} includes point up or sideways (docs/architecture.md, 'Layers of the code')")
        return 1
    print(f"PASS: {checked} includes between the library's folders, every one pointing down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
