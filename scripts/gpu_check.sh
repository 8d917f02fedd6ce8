#!/usr/bin/env bash
# One command for a (rarely lent) GPU machine: builds Tessera with nvcc, runs the whole test suite
# with the `cuda` tests on the GPU, runs compute-sanitizer over the CUDA op tests, and writes a
# report and its raw logs into OUT_DIR. GPU time is scarce (ten minutes per command), so it runs in
# stages that can be called one by one; each fits in one command.
#
#   scripts/gpu_check.sh OUT_DIR [STAGE ...]     stages, in order: env build test sanitize report
#                                                (default: all of them)
#
# The machine needs nvcc, CMake, ninja and a host compiler. Build dependencies it lacks come from
# .gpu-deps/ (made here by scripts/gpu_deps.sh, carried along); cuDNN is taken from the toolkit or
# from PyTorch's site-packages (nvidia/cudnn). With the device tool:
#   bash scripts/gpu_deps.sh      (here, once)
#   run: bash scripts/gpu_check.sh $OUT env build test      carry: [".gpu-deps"]
#   run: bash scripts/gpu_check.sh $OUT sanitize report    carry: [".gpu-deps", "build-gpu"]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu_check.sh OUT_DIR [env build test sanitize report]}
shift
mkdir -p "$out"
stages=("$@")
((${#stages[@]})) || stages=(env build test sanitize report)
export PATH="$PATH:/usr/local/cuda/bin"
BUILD=build-gpu
jobs=$(nproc)

# Library paths of the carried dependencies and of pip's cuDNN, for the build and at run time.
deps_prefix=""
if [ -d .gpu-deps/usr ]; then
  deps_prefix="$PWD/.gpu-deps/usr"
  export LD_LIBRARY_PATH="$deps_prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
# The data tests read Fashion-MNIST where Debian's package puts it.
if [ ! -d /usr/share/datasets/fashion-mnist ] && [ -d .gpu-deps/usr/share/datasets/fashion-mnist ]; then
  mkdir -p /usr/share/datasets && ln -s "$PWD/.gpu-deps/usr/share/datasets/fashion-mnist" /usr/share/datasets/
fi
cudnn_dir=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null || true)
[ -n "$cudnn_dir" ] && export LD_LIBRARY_PATH="$cudnn_dir/lib:${LD_LIBRARY_PATH:-}"

stage_env() {
  {
    date -u
    nvidia-smi || echo "nvidia-smi: not available"
    nvcc --version
    c++ --version | head -1
    cmake --version | head -1
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    echo "cudnn from pip: ${cudnn_dir:-none}"
    echo "carried dependencies: ${deps_prefix:-none}"
  } > "$out/env.txt" 2>&1
  cat "$out/env.txt"
}

stage_build() {
  local arch
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
  local args=(-DTESSERA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}")
  [ -n "$deps_prefix" ] && args+=(-DCMAKE_PREFIX_PATH="$deps_prefix" -DEigen3_DIR="$deps_prefix/share/eigen3/cmake")
  if [ -n "$cudnn_dir" ] && ! ls /usr/local/cuda/lib64/libcudnn.so* >/dev/null 2>&1; then
    args+=(-DCUDNN_LIBRARY="$(ls "$cudnn_dir"/lib/libcudnn.so* | head -1)" -DCUDNN_INCLUDE_DIR="$cudnn_dir/include")
  fi
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "${args[@]}" 2>&1 | tee "$out/build.log"
  ninja -C "$BUILD" -j"$jobs" 2>&1 | tee -a "$out/build.log" | tail -5
}

stage_test() {
  ctest --test-dir "$BUILD" -j"$jobs" --timeout 600 --output-on-failure --output-junit "$PWD/$out/ctest.xml" \
    2>&1 | tee "$out/test.log" | tail -15
}

# compute-sanitizer's three checkers over the CUDA op tests (the emulator cannot see races between
# blocks, missing synchronisation on real hardware, or what the real libraries do).
stage_sanitize() {
  for tool in memcheck racecheck synccheck; do
    : > "$out/sanitizer-$tool.log"
    for exe in "$BUILD"/tests/cuda_test_ops_* "$BUILD"/tests/cuda_test_device; do
      [ -x "$exe" ] || continue
      echo "== $tool $(basename "$exe")" >> "$out/sanitizer-$tool.log"
      compute-sanitizer --tool "$tool" --error-exitcode 1 "$exe" >> "$out/sanitizer-$tool.log" 2>&1 \
        && echo "ok" >> "$out/sanitizer-$tool.log" || echo "FAILED (exit $?)" >> "$out/sanitizer-$tool.log"
    done
    echo "$tool: $(grep -c '^ok' "$out/sanitizer-$tool.log") clean, $(grep -c '^FAILED' "$out/sanitizer-$tool.log") with errors"
  done
}

stage_report() {
  {
    echo "# scripts/gpu_check.sh report"
    echo
    echo '```'
    head -20 "$out/env.txt" 2>/dev/null
    echo '```'
    echo
    echo "## Test suite"
    echo '```'
    grep -E "tests passed|tests failed|Not Run|Failed|\*\*\*" "$out/test.log" 2>/dev/null | head -40
    echo '```'
    echo
    echo "## compute-sanitizer"
    for tool in memcheck racecheck synccheck; do
      [ -f "$out/sanitizer-$tool.log" ] || continue
      echo "- $tool: $(grep -c '^ok' "$out/sanitizer-$tool.log") test programs clean, $(grep -c '^FAILED' "$out/sanitizer-$tool.log") with errors"
    done
  } > "$out/report.md"
  cat "$out/report.md"
}

for s in "${stages[@]}"; do
  case "$s" in
    env|build|test|sanitize|report) echo "== gpu_check: $s"; "stage_$s" ;;
    *) echo "gpu_check: unknown stage '$s' (env build test sanitize report)" >&2; exit 2 ;;
  esac
done
