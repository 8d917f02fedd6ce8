#!/usr/bin/env bash
# Sets up, builds and runs the test suite.
#   scripts/test.sh             Release build in build/ with the CUDA backend on the SIMT emulator: every
#                               test, the `cuda` ones included, so they also run optimised (a static
#                               initialisation order or an uninitialised read can differ from -O1's)
#   scripts/test.sh --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/, with
#                               the CUDA backend on the SIMT emulator: every test, the cuda ones included
#   scripts/test.sh --thread-sanitize
#                               ThreadSanitizer build in build-tsan/ of the tests whose threads are
#                               ours: the data loader's workers (test_data_io) and the trainer that
#                               drives them (test_trainer); OpenMP runs one thread (below)
#   scripts/test.sh --cuda-emu  Release build with the CUDA backend on the SIMT emulator, in build-emu/:
#                               the `cuda` tests (every op on device cuda against the CPU, the emulator,
#                               the allocator, library plans)
#   scripts/test.sh --cuda      the real CUDA build (nvcc) in build-cuda/: the `cuda` tests; without a
#                               GPU the device tests report "skipped" and the plan/descriptor tests run
# The --cuda-emu and --cuda builds compile only what the `cuda` tests run (target tessera_cuda_tests).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  # Headless Chromium renders `tessera explain`'s pages in tests/test_explain.cpp (both builds run it).
  "" | --sanitize) bash scripts/setup.sh chromium ;;
  *) bash scripts/setup.sh ;;
esac
# ONNX Runtime for tests/test_onnx_export.cpp, from PyPI into a folder of its own (the CMake cache's
# TESSERA_ONNXRUNTIME_DIR, this folder by default), run by Debian's Python.
ort_dir=${TESSERA_ONNXRUNTIME_DIR:-$HOME/.cache/tessera/onnxruntime}
if [ ! -d "$ort_dir/onnxruntime" ]; then
  /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --target "$ort_dir" onnxruntime
fi
jobs=$(nproc)
# CTest runs $jobs tests at once, each with $jobs compute threads: the compute pool's workers spin
# only briefly before they sleep, and a job never waits for a worker the other test descheduled
# (core/compute_pool.cpp). (OpenMP's spinning workers, before the pool, took the Release suite on 2
# cores from 76 s to 200 s unless OMP_WAIT_POLICY=passive.)
# The sanitizer builds compile the library in unity batches (CMake's UNITY_BUILD, 8 sources per
# file: ~40% less compile time, the same functions instrumented); the Release build compiles file
# by file, which also catches a source that lacks an include (docs/ci.md).
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8)
# TESSERA_WERROR=ON (CI sets it): GCC's warnings in our own code fail the GCC builds.
werror=(-DTESSERA_WERROR="${TESSERA_WERROR:-OFF}")
case "${1:-}" in
  --sanitize)
    # Build type "Sanitize": no flags of CMake's own; TESSERA_SANITIZE sets -O1 -g1.
    bash scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Sanitize -DTESSERA_SANITIZE=ON -DTESSERA_NATIVE=OFF \
      -DTESSERA_CUDA_EMU=ON "${unity[@]}" "${werror[@]}"
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    # The resident-memory test does not run here: ASan keeps freed memory in its quarantine
    # (256 MB) on purpose, so resident memory grows in this build without a leak; here
    # LeakSanitizer is the leak check, over every test.
    ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900 -E "resident memory stays flat" ;;
  --thread-sanitize)
    # Only these tests are built: the compute pool's own, and the two whose other threads are ours
    # (the loader's workers, the trainer that drives them); the rest adds no threads of its own.
    cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DTESSERA_SANITIZE_THREAD=ON \
      -DTESSERA_NATIVE=OFF -DTESSERA_MPI=OFF -DTESSERA_ONEDNN=OFF "${unity[@]}" "${werror[@]}" >/dev/null
    ninja -C build-tsan -j"$jobs" test_parallel test_data_io test_trainer
    # The kernels run on the compute pool's threads (std::threads and atomics, which TSan sees), two
    # of them. OpenMP keeps one thread: GCC's libgomp is not built with TSan, its barriers would be
    # invisible to it (this build has no oneDNN, the one user of OpenMP's threads).
    # A report fails the run (exit code 66) after printing every race found.
    export OMP_NUM_THREADS=1 TESSERA_NUM_THREADS=2 TSAN_OPTIONS=second_deadlock_stack=1
    # TSan cannot run a forked child that starts threads (it dies by design): the fork case runs in
    # the Release and ASan suites.
    build-tsan/tests/test_parallel "~a forked child*"
    build-tsan/tests/test_data_io
    # The resident-memory test runs in the Release suite only: it is about memory, not threads, and
    # at 35 s here it was a tenth of this stage (its trainer and loader paths run in the others).
    build-tsan/tests/test_trainer "~resident memory stays flat*" ;;
  --cuda-emu)
    bash scripts/build.sh build-emu tessera_cuda_tests -DTESSERA_CUDA_EMU=ON
    ctest --test-dir build-emu --output-on-failure -j"$jobs" --timeout 600 -L cuda ;;
  --cuda)
    export PATH="$PATH:/usr/local/cuda/bin"
    bash scripts/build.sh build-cuda tessera_cuda_tests -DTESSERA_CUDA=ON
    ctest --test-dir build-cuda --output-on-failure -j"$jobs" --timeout 600 -L cuda ;;
  "")
    bash scripts/build.sh build -DTESSERA_CUDA_EMU=ON "${werror[@]}"
    ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600 ;;
  *)
    echo "usage: scripts/test.sh [--sanitize | --thread-sanitize | --cuda-emu | --cuda]" >&2
    exit 2 ;;
esac
