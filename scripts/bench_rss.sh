#!/usr/bin/env bash
# Resident memory per epoch of a full-size training run (docs/reliability.md, "Long runs"): the
# main job's recipe (scripts/run.sh: CoaT-Lite Tiny on all 60,000 Fashion-MNIST images, evaluated
# on the 10,000 test images and checkpointed every epoch) for more epochs than the main job, then
# the resident memory the trainer logs after each epoch, and its growth after the first.
#   scripts/bench_rss.sh [epochs]   default 12; the run goes to a temporary folder, removed after
# A leaked tensor the size of one input batch per step (468 steps an epoch) would add 234 MiB per epoch.
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-12}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bash scripts/run.sh --epochs "$epochs" --output "$out/run" 2>&1 | tee "$out/log" |
  grep -E '^(Epoch|final)' || true
# "Epoch 3 done in 0:01:29 (675.5 img/s, 0.4% waiting for data, 455 MiB resident): ..." -> the
# table and the growth.
sed -nE 's/^Epoch ([0-9]+) done in ([0-9:]+) \([0-9.]+ img\/s, [0-9.]+% waiting for data, ([0-9]+) MiB resident\).*/\1 \2 \3/p' "$out/log" | awk '
  BEGIN { print "\n| epoch | seconds | resident MiB |\n|---:|---:|---:|" }
  { split($2, t, ":"); printf "| %s | %d | %s |\n", $1, t[1] * 3600 + t[2] * 60 + t[3], $3 }
  NR == 1 { first = $3; low = $3; high = $3 }
  { if ($3 < low) low = $3; if ($3 > high) high = $3; last = $3 }
  END {
    if (NR == 0) { print "bench_rss: no epoch lines in the log" > "/dev/stderr"; exit 1 }
    printf "\nafter epoch 0: %d MiB; after the last: %d MiB; range %d-%d MiB; growth after epoch 0: %+d MiB\n",
      first, last, low, high, last - first
  }'
