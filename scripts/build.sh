#!/usr/bin/env bash
# Configures and builds Tessera. Usage: scripts/build.sh [build-dir] [extra cmake args...]
# The build directory defaults to build/ (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
# -march=native for local builds (the library default is portable x86-64: CMakeLists.txt, docs/install.md);
# a later -DTESSERA_NATIVE=OFF in the extra arguments wins.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON "$@" >/dev/null
ninja -C "$dir" -j"$(nproc)"
