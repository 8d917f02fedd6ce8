#!/usr/bin/env bash
# Every C++ and CUDA source of the tree is formatted as .clang-format says (CTest's "format: ..."
# test). The style is pinned to Debian 12's clang-format 14: another version formats some
# constructs differently, so with none or another one the check reports itself skipped (exit 77),
# never passed. To format a file: clang-format-14 -i FILE. Usage: check_format.sh [SOURCE_ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
tool=$(command -v clang-format-14 || true)
if [ -z "$tool" ]; then
  echo "SKIPPED: clang-format-14 is not installed (scripts/setup.sh installs it)"
  exit 77
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIPPED: not a git checkout (the check formats the files git tracks)"
  exit 77
fi
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu')
bad=()
for f in "${files[@]}"; do
  "$tool" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "FAIL: ${#bad[@]} of ${#files[@]} files differ from .clang-format (clang-format-14 -i FILE):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "PASS: ${#files[@]} files formatted as .clang-format says"
