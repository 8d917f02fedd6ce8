#!/usr/bin/env bash
# Configures and builds Tessera. Usage: scripts/build.sh [build-dir] [target ... | -Dcmake-arg ...]
# The build directory defaults to build/ (Release); arguments that start with '-' go to CMake, the
# others name the targets to build (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake_args=() targets=()
for arg in "$@"; do
  if [[ $arg == -* ]]; then cmake_args+=("$arg"); else targets+=("$arg"); fi
done
# -march=native for local builds (the library default is portable x86-64: CMakeLists.txt, docs/install.md);
# a later -DTESSERA_NATIVE=OFF in the extra arguments wins.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON "${cmake_args[@]}" >/dev/null
ninja -C "$dir" -j"$(nproc)" "${targets[@]}"
