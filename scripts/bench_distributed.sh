#!/usr/bin/env bash
# Data-parallel speed on one machine: 2 ranks x 1 thread (mpirun) against 1 rank x 2 threads, the
# same global batch, for each model given (default: xcit_nano_12_p16_224 coat_lite_tiny) at 224x224
# on Fashion-MNIST (upscaled). Prints each run's "Epoch ... img/s" line and, for 2 ranks, the share
# of the training time spent waiting on gradient communication. Refuses to time while a compiler
# or ninja runs (docs/distributed.md has the measured table).
# Usage: scripts/bench_distributed.sh [BUILD_DIR] [MODEL ...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(xcit_nano_12_p16_224 coat_lite_tiny)
tessera=$build/bin/tessera
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
idle() { ! pgrep -x cc1plus >/dev/null && ! pgrep -x ninja >/dev/null; }
out=$(mktemp -d)
for m in "${models[@]}"; do
  flags=(--model "$m" --img-size 224 --epochs 1 --max-train-batches "${BATCHES:-12}" --max-eval-batches 1 --primary none
         --crop-pct 1 --workers 1 --warmup-epochs 0 --log-interval 1000)
  for config in "1x2" "2x1"; do
    idle || { echo "a build is running: not timing $m $config" >&2; exit 1; }
    if [ "$config" = 1x2 ]; then
      "$tessera" train "${flags[@]}" -b 16 --threads 2 --output "$out/$m-$config" 2>&1 | grep -E "^Epoch|waiting"
    else
      mpirun --oversubscribe -np 2 "$tessera" train "${flags[@]}" -b 8 --output "$out/$m-$config" 2>&1 |
        grep -E "^Epoch|waiting"
    fi | sed "s/^/$m $config: /"
    idle || { echo "a build started during $m $config: discard it" >&2; exit 1; }
  done
done
rm -rf "$out"
