#!/usr/bin/env bash
# Configures and builds Tessera. Usage: scripts/build.sh [build-dir] [extra cmake args...]
# The build directory defaults to build/ (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$dir" -j"$(nproc)"
