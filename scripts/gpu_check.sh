#!/usr/bin/env bash
# One command for a (rarely lent) GPU machine: builds Tessera with nvcc, runs the whole test suite
# with the `cuda` tests on the GPU, runs compute-sanitizer over the CUDA op tests, trains 50 steps
# of one model per family on the GPU and on the CPU from the same seed and compares the loss
# curves, benchmarks against timm on PyTorch on the same GPU, and writes a report and its raw logs
# into OUT_DIR. GPU time is scarce (ten minutes per command), so it runs in stages that can be
# called one by one; each fits in one command.
#
#   scripts/gpu_check.sh OUT_DIR [STAGE ...]     stages, in order: env build test sanitize train
#                                                bench report (default: all of them)
#
# The machine needs nvcc, CMake, ninja and a host compiler. Build dependencies it lacks come from
# .gpu-deps/ (made here by scripts/gpu_deps.sh, carried along); cuDNN is taken from the toolkit or
# from PyTorch's site-packages (nvidia/cudnn). With the device tool:
#   bash scripts/gpu_deps.sh      (here, once)
#   run: bash scripts/gpu_check.sh $OUT env build test      carry: [".gpu-deps"]
#   run: bash scripts/gpu_check.sh $OUT sanitize train      carry: [".gpu-deps", "build-gpu"]
#   run: bash scripts/gpu_check.sh $OUT bench report        carry: [".gpu-deps", "build-gpu"]
# (build-gpu/ is the build folder of the earlier command: carried, it spares a rebuild.)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu_check.sh OUT_DIR [env build test sanitize train bench report]}
shift
mkdir -p "$out"
stages=("$@")
((${#stages[@]})) || stages=(env build test sanitize train bench report)
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
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON "${args[@]}" 2>&1 | tee "$out/build.log"
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

# 50 steps of one model per family on Fashion-MNIST (32x32), on the GPU and on the CPU from the
# same seed: the loss curves must stay together (the same arithmetic but for summation order).
stage_train() {
  mkdir -p "$out/train"
  local specs=("xcit_nano_12_p16_224 --patch-size 4" "cait_xxs24_224 --patch-size 8 --model-kwargs depth=4"
               "coat_lite_tiny" "ufo_vit_t --patch-size 4 --model-kwargs depth=4")
  for spec in "${specs[@]}"; do
    local model=${spec%% *}
    for device in cuda cpu; do
      # shellcheck disable=SC2086
      "$BUILD/bin/tessera" train --model $spec --dataset fashion_mnist --img-size 32 --epochs 1 -b 32 \
        --max-train-batches 50 --max-eval-batches 4 --log-interval 1 --primary none --crop-pct 1 --hflip 0 \
        --warmup-epochs 0 --lr 1e-3 --seed 0 --workers 4 --device "$device" --output "$out/train/$model.$device" \
        > "$out/train/$model.$device.log" 2>&1 || echo "train $model on $device failed (exit $?)"
    done
  done
  python3 bench/compare_loss_curves.py "$out"/train/*.log | tee "$out/train_curves.md"
  # The NCCL communicator as a job of one rank (two NCCL ranks cannot share a GPU): the gradient
  # buckets go through ncclAllReduce; the run must train as the plain cuda run above.
  "$BUILD/bin/tessera" train --model coat_lite_tiny --dataset fashion_mnist --img-size 32 --epochs 1 -b 32 \
    --max-train-batches 50 --max-eval-batches 4 --log-interval 1 --primary none --crop-pct 1 --hflip 0 \
    --warmup-epochs 0 --lr 1e-3 --seed 0 --workers 4 --device cuda --dist-backend nccl \
    --output "$out/train/coat_lite_tiny.nccl" > "$out/train/nccl_one_rank.log" 2>&1 ||
    echo "train coat_lite_tiny with --dist-backend nccl failed (exit $?)"
  tail -n 3 "$out/train/nccl_one_rank.log"
}

# The issue's benchmarks against timm on PyTorch on the same GPU, bf16 autocast, the two sides one
# after the other: training images/s and peak memory of three models, and XCiT's inference at
# growing resolutions (memory must grow linearly with the tokens: XCiT Table D.5).
stage_bench() {
  local timm_py="python3 bench/bench_models.py --device cuda --amp bf16 --threads 8 --warmup 3 --steps 10 --seconds 10"
  local tessera="$BUILD/bin/tessera bench --device cuda --amp bf16 --warmup 3 --steps 10 --seconds 10 --json"
  : > "$out/bench.jsonl"
  for run in "xcit_small_12_p16_224 128 train 224" "cait_s24_224 64 train 224" "coat_lite_small 128 train 224" \
             "xcit_small_12_p16_224 64 infer 224" "xcit_small_12_p16_224 64 infer 384" \
             "xcit_small_12_p16_224 64 infer 512" "xcit_small_12_p16_224 16 infer 1024"; do
    read -r model batch mode img <<< "$run"
    for side in tessera timm; do
      if [ "$side" = tessera ]; then
        $tessera --model "$model" --batch "$batch" --mode "$mode" --img-size "$img" 2>>"$out/bench.err"
      else
        $timm_py --model "$model" --batch "$batch" --mode "$mode" --img-size "$img" 2>>"$out/bench.err"
      fi | sed "s/^{/{\"side\": \"$side\", /" >> "$out/bench.jsonl" || echo "bench $side $model failed"
    done
  done
  cat "$out/bench.jsonl"
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
    echo
    echo "## Loss curves, GPU and CPU from one seed"
    [ -f "$out/train_curves.md" ] && cat "$out/train_curves.md"
    echo
    echo "## Benchmarks (bf16 autocast, same GPU, one side after the other)"
    echo '```'
    [ -f "$out/bench.jsonl" ] && cat "$out/bench.jsonl"
    echo '```'
  } > "$out/report.md"
  cat "$out/report.md"
}

for s in "${stages[@]}"; do
  case "$s" in
    env|build|test|sanitize|train|bench|report) echo "== gpu_check: $s"; "stage_$s" ;;
    *) echo "gpu_check: unknown stage '$s' (env build test sanitize train bench report)" >&2; exit 2 ;;
  esac
done
