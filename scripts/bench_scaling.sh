#!/usr/bin/env bash
# Inference time and memory against the image size, batch 1 (docs/benchmarks.md, "Scaling"):
# XCiT's grow linearly with the tokens, CaiT's quadratically. Extra arguments go to
# bench/scaling.py (--models, --sizes, --threads, --seconds). Environment: BUILD_DIR (default
# build-release).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON >/dev/null
ninja -C "$BUILD_DIR" tessera_cli >/dev/null
/usr/bin/python3 bench/scaling.py --tessera "$BUILD_DIR/bin/tessera" "$@"
