#!/usr/bin/env bash
# Model benchmark, Tessera against timm on PyTorch (docs/benchmarks.md): for each model, mode and
# thread count, `tessera bench` and bench/bench_models.py run ONE AFTER THE OTHER (never at the same
# time), alternated round by round, each side's best round kept (bench/compare_models.py); prints a
# markdown table of images/s and peak memory with the ratios.
#
# usage: scripts/bench_models.sh [--threads "1 2"] [--batch B] [--seconds S] [--rounds R]
#                                [--modes "infer train"] [--grad-checkpointing] [MODEL ...]
# default models: the XCiT Nano/Tiny/Small, CaiT-XXS24, CoaT-Lite Tiny/Small and UFO-ViT-T rows of
# docs/benchmarks.md. Environment: BUILD_DIR (default build-release), TIMM_PATH (default ~/.cache/tessera/timm, installed there by pip --target: no root needed).
#
# PyTorch is set up at its best on this machine: Debian's python3-torch with OpenBLAS's OpenMP
# build (with the pthread build beside PyTorch's own OpenMP threads, the two thread pools fight
# and PyTorch trains 3x slower), OpenBLAS's AVX-512 (or AVX2) kernels forced (Debian's 0.3.21 does
# not recognise recent CPUs and falls back to SSE3 kernels, 3-4x slower), and jemalloc.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
TIMM_PATH=${TIMM_PATH:-$HOME/.cache/tessera/timm}
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    --threads|--batch|--seconds|--rounds|--modes) [[ $# -ge 2 ]] || { echo "bench_models.sh: $1 expects a value" >&2; exit 2; }
      args+=("$1" "$2"); shift 2 ;;
    --grad-checkpointing) args+=("$1"); shift ;;
    -*) echo "bench_models.sh: unknown option '$1'" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

bash scripts/setup.sh python3-torch python3-torchvision libopenblas0-openmp libjemalloc2
if [[ ! -d $TIMM_PATH/timm ]]; then
  /usr/bin/python3 -m pip install --quiet --no-deps --target "$TIMM_PATH" timm
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON >/dev/null
ninja -C "$BUILD_DIR" tessera_cli >/dev/null

torch_env="LD_PRELOAD=$(ls /usr/lib/x86_64-linux-gnu/libjemalloc.so.2)"
# OpenBLAS's OpenMP build first, whichever build the libblas.so.3 alternative points to.
torch_env+=" LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source scripts/openblas_coretype.sh
torch_env+="${OPENBLAS_CORETYPE:+ OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE}"
mkdir -p "$BUILD_DIR/bench-results"
PYTHONPATH=$TIMM_PATH /usr/bin/python3 bench/compare_models.py --tessera "$BUILD_DIR/bin/tessera" \
  --torch-env "$torch_env" --jsonl "$BUILD_DIR/bench-results/models-$(date -u +%Y%m%dT%H%M%S).jsonl" "${args[@]}"
