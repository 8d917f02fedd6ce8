#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite.
#   scripts/test.sh             Release build in build/
#   scripts/test.sh --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${1:-}" = "--sanitize" ]; then
  bash scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DTESSERA_SANITIZE=ON -DTESSERA_NATIVE=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # The "parameter counts" tests build every variant up to 356M parameters: they exercise no
  # code the other model tests do not, and take minutes under ASan, so they run only in the
  # Release suite.
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 900 -E "parameter counts"
else
  bash scripts/build.sh build
  ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
fi
