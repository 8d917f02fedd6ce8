#!/usr/bin/env bash
# Model benchmark, Tessera vs timm on PyTorch: for each model and mode, runs `tessera bench` and
# bench/bench_models.py ONE AFTER THE OTHER (never concurrently) with the same batch, resolution,
# thread count and timing rule, and prints a markdown table of images/s and peak memory with the
# ratios. UFO-ViT has no timm implementation; its row compares with xcit_tiny_24_p16_224.
#
# usage: scripts/bench_models.sh [--threads N] [--batch B] [--seconds S] [--modes "infer train"]
#                                [MODEL ...]
# environment: BUILD_DIR (default build-release), PYTHON (default /usr/bin/python3),
#              TIMM_PATH (default /opt/timm: `pip install --no-deps --target /opt/timm timm`)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
PYTHON=${PYTHON:-/usr/bin/python3}
TIMM_PATH=${TIMM_PATH:-/opt/timm}
threads=2 batch=8 seconds=10 modes="infer train"
models=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "bench_models.sh: unknown option '$1'" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
((${#models[@]})) || models=(xcit_nano_12_p16_224 xcit_tiny_12_p16_224 cait_xxs24_224 coat_lite_tiny ufo_vit_t)

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON >/dev/null
ninja -C "$BUILD_DIR" tessera_cli >/dev/null
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# PyTorch's BLAS: see scripts/bench.sh (Debian's OpenBLAS falls back to SSE3 kernels on new Xeons).
if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell
  fi
fi

field() { "$PYTHON" -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])"; }
echo "$(lscpu | sed -n 's/^Model name: *//p'), $threads threads, batch $batch, >= ${seconds} s per measurement, $(date -u +%F)"
echo
echo "| model | mode | Tessera img/s | PyTorch img/s | ratio | Tessera peak MiB | PyTorch peak MiB | ratio |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for m in "${models[@]}"; do
  ref=$m
  [[ $m == ufo_vit_* ]] && ref=xcit_tiny_24_p16_224
  for mode in $modes; do
    common=(--model "$m" --batch "$batch" --mode "$mode" --seconds "$seconds")
    ours=$("$BUILD_DIR/bin/tessera" bench "${common[@]}" --threads "$threads" --json)
    theirs=$(PYTHONPATH=$TIMM_PATH "$PYTHON" bench/bench_models.py --model "$ref" --batch "$batch" --mode "$mode" \
             --seconds "$seconds" --threads "$threads")
    oi=$(field images_per_s <<<"$ours"); ti=$(field images_per_s <<<"$theirs")
    om=$(field peak_memory_mib <<<"$ours"); tm=$(field peak_memory_mib <<<"$theirs")
    label=$m; [[ $ref != "$m" ]] && label="$m (vs $ref)"
    "$PYTHON" -c "print(f'| $label | $mode | {$oi:.2f} | {$ti:.2f} | {$oi/$ti:.2f}x | {$om:.0f} | {$tm:.0f} | {$om/$tm:.2f}x |')"
  done
done
