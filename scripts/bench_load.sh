#!/usr/bin/env bash
# Checkpoint load time and memory, Tessera against torch.load(weights_only=True) (docs/interop.md):
# a torch.save file of xcit_large_24_p8_384's random weights (~760 MB, the largest official
# checkpoint of the four papers; made once with timm), loaded by tools/bench_load and by
# bench/bench_load.py ONE AFTER THE OTHER, alternated for R rounds (default 5), each in a fresh
# process with the file in the page cache; prints each side's best time, its median, and the peak
# resident memory above the process's own before the load.
#
# usage: scripts/bench_load.sh [--rounds R] [FILE]   FILE default /tmp/tessera-bench/xcit_large_24_p8_384.pth
# Environment: BUILD_DIR (default build-release), TIMM_PATH (default ~/.cache/tessera/timm, installed there by pip --target: no root needed).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
TIMM_PATH=${TIMM_PATH:-$HOME/.cache/tessera/timm}
rounds=5
file=/tmp/tessera-bench/xcit_large_24_p8_384.pth
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) [[ $# -ge 2 ]] || { echo "bench_load.sh: --rounds expects a value" >&2; exit 2; }; rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "bench_load.sh: unknown option '$1'" >&2; exit 2 ;;
    *) file=$1; shift ;;
  esac
done
bash scripts/setup.sh python3-torch python3-torchvision
if [[ ! -f $file ]]; then
  [[ -d $TIMM_PATH/timm ]] || /usr/bin/python3 -m pip install --quiet --no-deps --target "$TIMM_PATH" timm
  mkdir -p "$(dirname "$file")"
  PYTHONPATH=$TIMM_PATH /usr/bin/python3 bench/bench_load.py --make "$file"
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON >/dev/null
ninja -C "$BUILD_DIR" bench_load >/dev/null
cat "$file" > /dev/null  # into the page cache for both sides

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= rounds; r++)); do
  "$BUILD_DIR/bench_load" "$file" >> "$results"
  /usr/bin/python3 bench/bench_load.py "$file" >> "$results"
done
/usr/bin/python3 - "$results" "$file" "$(nproc)" "$(lscpu | sed -n 's/^Model name: *//p')" <<'PY'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
size = os.path.getsize(sys.argv[2]) / 2**20
print(f"{sys.argv[2]}: {size:.0f} MiB, {sys.argv[3]} cores, {sys.argv[4]}\n")
print("| loader | best s | median s | MB/s (best) | peak RSS above start, MiB | × file size |")
print("|---|---:|---:|---:|---:|---:|")
best = {}
for side in ("tessera", "torch"):
    mine = [r for r in rows if r["side"] == side]
    secs = [r["seconds"] for r in mine]
    extra = max(r["peak_rss_mib"] - r["rss_before_mib"] for r in mine)
    best[side] = min(secs)
    name = "Tessera load_weights_file" if side == "tessera" else f"torch.load(weights_only=True) {mine[0]['torch']}"
    print(f"| {name} | {min(secs):.3f} | {statistics.median(secs):.3f} | {size * 1.048576 / min(secs):.0f} | "
          f"{extra:.0f} | {extra / size:.2f} |")
print(f"\nTessera/torch time (best): {best['tessera'] / best['torch']:.2f}; tensors "
      f"{rows[0]['tensors']} vs {rows[1]['tensors']}, bytes {rows[0]['bytes']} vs {rows[1]['bytes']}")
PY
