#!/usr/bin/env bash
# Resident memory per epoch of a full-size training run (docs/reliability.md, "Long runs"): the
# main job's recipe (scripts/run.sh: CoaT-Lite Tiny on all 60,000 Fashion-MNIST images, evaluated
# on the 10,000 test images and checkpointed every epoch) for more epochs than the main job, then
# the resident memory the trainer logs after each epoch, and its growth after the first.
#   scripts/bench_rss.sh [epochs]   default 12; the run goes to a temporary folder, removed after
# A leak of one activation per step (468 steps an epoch) would add tens of MiB per epoch.
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-12}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bash scripts/run.sh --epochs "$epochs" --output "$out/run" 2>&1 | tee "$out/log" |
  grep -E '^(Epoch|final)' || true
echo
echo "| epoch | seconds | resident MiB |"
echo "|---:|---:|---:|"
sed -nE 's/^Epoch ([0-9]+) done in ([0-9:]+) \([0-9.]+ img\/s, ([0-9]+) MiB resident\).*/\1 \2 \3/p' "$out/log" |
  awk '{ split($2, t, ":"); printf "| %s | %d | %s |\n", $1, t[1] * 3600 + t[2] * 60 + t[3], $3 }'
sed -nE 's/^Epoch ([0-9]+) done in .*, ([0-9]+) MiB resident\).*/\2/p' "$out/log" | awk '
  NR == 1 { first = $1; low = $1; high = $1 }
  { if ($1 < low) low = $1; if ($1 > high) high = $1; last = $1 }
  END {
    if (NR == 0) { print "bench_rss: no epoch lines in the log" > "/dev/stderr"; exit 1 }
    printf "\nafter epoch 0: %d MiB; after the last: %d MiB; range %d-%d MiB; growth after epoch 0: %+d MiB\n",
      first, last, low, high, last - first
  }'
