#!/usr/bin/env bash
# Input-pipeline benchmark, Tessera against timm on the same image folder (docs/benchmarks.md):
# `tessera bench-data --json` (its JPEGs decoded reduced for the crop, and with --full-decode as
# the baseline) and bench/bench_data.py (timm's transforms on PIL, PyTorch's DataLoader), run ONE
# AFTER THE OTHER, alternated over the rounds (the order reversed every other round: these VMs
# drift), then a table of each stage's best images/s per side and the ratios to timm.
# usage: scripts/bench_data.sh DIR [--rounds N] [--workers 1,2] [--seconds S] [--max-images N]
#   DIR: an image folder (DIR/<class>/<image>); scripts/make_bench_images.sh makes one.
# environment: BUILD_DIR (default build-release), TIMM_PATH (default ~/.cache/tessera/timm, installed there by pip --target: no root needed), PYTHON
#              (default /usr/bin/python3, Debian's python3-torch and python3-torchvision)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
TIMM_PATH=${TIMM_PATH:-$HOME/.cache/tessera/timm}
PYTHON=${PYTHON:-/usr/bin/python3}
die() { echo "bench_data.sh: $*" >&2; exit 2; }
[[ $# -ge 1 && -d $1 ]] || die "usage: scripts/bench_data.sh DIR [--rounds N] [--workers 1,2] [--seconds S] [--max-images N]"
dir=$1; shift
rounds=2 common=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || die "--rounds expects a positive count"; rounds=$2; shift 2 ;;
    --workers|--seconds|--max-images) [[ $# -ge 2 ]] || die "$1 expects a value"; common+=("$1" "$2"); shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done

bash scripts/setup.sh python3-torch python3-torchvision python3-pil
if [[ ! -d $TIMM_PATH/timm ]]; then
  "$PYTHON" -m pip install --quiet --no-deps --target "$TIMM_PATH" timm
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON >/dev/null
ninja -C "$BUILD_DIR" tessera_cli >/dev/null

results=$(mktemp)
trap 'rm -f "$results"' EXIT
sides=(tessera tessera-full-decode timm)
run_side() {
  case $1 in
    tessera) "$BUILD_DIR/bin/tessera" bench-data --data-dir "$dir" "${common[@]}" --json ;;
    tessera-full-decode) "$BUILD_DIR/bin/tessera" bench-data --data-dir "$dir" "${common[@]}" --full-decode --json ;;
    timm) OMP_NUM_THREADS=1 PYTHONPATH="$TIMM_PATH" "$PYTHON" bench/bench_data.py --data-dir "$dir" "${common[@]}" ;;
  esac
}
for ((r = 1; r <= rounds; r++)); do
  order=("${sides[@]}")
  ((r % 2 == 0)) && order=(timm tessera-full-decode tessera)
  for side in "${order[@]}"; do
    echo "bench_data.sh: round $r, $side" >&2
    run_side "$side" >> "$results"
  done
done

"$PYTHON" - "$results" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores" <<'PY'
import json, sys
best = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["stage"], r["workers"])
    cell = best.setdefault(key, {})
    if r["images_per_s"] > cell.get(r["side"], {"images_per_s": -1})["images_per_s"]:
        cell[r["side"]] = r
print(f"best of the rounds, {sys.argv[2]}\n")
print("| stage | workers | Tessera img/s | Tessera, full decode | timm img/s | Tessera / timm |")
print("|---|---:|---:|---:|---:|---:|")
for (stage, workers), cell in best.items():
    get = lambda side: cell.get(side, {}).get("images_per_s")
    t, f, m = get("tessera"), get("tessera-full-decode"), get("timm")
    ratio = f"{t / m:.2f}x" if t and m else "n/a"
    print(f"| {stage} | {workers} | {t} | {f} | {m} | {ratio} |")
split = {k: v["tessera"]["ms_per_image"] for k, v in best.items() if "tessera" in v and "ms_per_image" in v["tessera"]}
print("\nTessera, one thread's time per image (ms):\n")
for (stage, _), ms in split.items():
    print(f"- {stage}: " + ", ".join(f"{k} {v}" for k, v in ms.items() if v))
PY
