#!/usr/bin/env bash
# The main job: sets up (Debian packages, including the Fashion-MNIST dataset), builds the
# `tessera` command, and trains CoaT-Lite Tiny on Fashion-MNIST on the CPU to >= 91% test accuracy
# (the measured accuracy and time: docs/results.md#main_job; the recipe: docs/training.md). Extra
# arguments go to `tessera train` and override the recipe's flags (e.g. --epochs 1 for a quick
# look, --amp bf16, --output DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build tessera_cli
exec ./build/bin/tessera train --model coat_lite_tiny --dataset fashion_mnist --img-size 32 \
  --epochs 6 -b 128 --lr 1.5e-3 --warmup-epochs 0.5 --min-lr 1e-5 --weight-decay 0.05 \
  --smoothing 0.1 --primary none --hflip 0.5 --color-jitter 0 --crop-pct 1 \
  --output runs/fashion_mnist_coat_lite_tiny "$@"
