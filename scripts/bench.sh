#!/usr/bin/env bash
# Kernel benchmark, Tessera vs PyTorch: builds bench/bench_kernels (Release) if needed, runs it and
# bench/bench_kernels.py ONE AFTER THE OTHER with identical thread settings (concurrent OpenMP
# processes on a small machine slow each other down many times over), and prints the side-by-side
# table from bench/compare.py. With --runs N each side runs N times (alternating) and the best run
# per case is kept, which filters out interference from other work on the machine; --wait-idle
# runs each case in its own process, started (after up to 10 min) once the CPU is idle.
#
# usage: scripts/bench.sh [--threads N] [--reps N] [--runs N] [--filter a,b] [--wait-idle] [--markdown]
# environment: BUILD_DIR (default build-release), JOBS (ninja -j, default: ninja's own),
#              PYTHON (default /usr/bin/python3, Debian's python3-torch),
#              BENCH_OPENBLAS_CORETYPE (PyTorch's GEMM kernels; default: SkylakeX/Haswell by CPU
#              flags, scripts/openblas_coretype.sh)
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
PYTHON=${PYTHON:-/usr/bin/python3}
threads=2 reps=20 runs=1 filter="" markdown="" wait_idle=0

die() { echo "bench.sh: $*" >&2; exit 2; }
is_count() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }

# Busy and total jiffies of all CPUs, from /proc/stat.
cpu_jiffies() {
  local _cpu user nice sys idle iowait irq softirq steal _rest
  read -r _cpu user nice sys idle iowait irq softirq steal _rest </proc/stat
  echo $((user + nice + sys + irq + softirq + steal)) $((user + nice + sys + idle + iowait + irq + softirq + steal))
}
# Waits until the CPUs were at least 90% idle over 5 s (any other process that wakes up while an
# OpenMP benchmark runs costs it whole scheduler ticks); gives up after 10 minutes.
wait_for_idle() {
  local b0 t0 b1 t1 tries
  for ((tries = 0; tries < 120; tries++)); do
    read -r b0 t0 < <(cpu_jiffies); sleep 5; read -r b1 t1 < <(cpu_jiffies)
    ((100 * (b1 - b0) <= 10 * (t1 - t0))) && return 0
  done
  echo "bench.sh: warning: the CPU did not become idle; timing anyway" >&2
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) [[ $# -ge 2 ]] && is_count "$2" || die "--threads expects a positive integer"; threads=$2; shift 2 ;;
    --reps) [[ $# -ge 2 ]] && is_count "$2" || die "--reps expects a positive integer"; reps=$2; shift 2 ;;
    --runs) [[ $# -ge 2 ]] && is_count "$2" || die "--runs expects a positive integer"; runs=$2; shift 2 ;;
    --filter) [[ $# -ge 2 ]] || die "--filter expects a value"; filter=$2; shift 2 ;;
    --markdown) markdown=--markdown; shift ;;
    --wait-idle) wait_idle=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

# ---- build (Release) ---------------------------------------------------------------------------
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$BUILD_DIR/CMakeCache.txt"; then
  die "$BUILD_DIR is not a Release build; set BUILD_DIR to another directory"
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON >/dev/null
ninja -C "$BUILD_DIR" ${JOBS:+-j "$JOBS"} bench_kernels >/dev/null

# ---- same thread settings for both sides: OpenMP (Tessera, libtorch, OpenBLAS-openmp), MKL --------
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads TESSERA_NUM_THREADS=$threads
source scripts/openblas_coretype.sh
out="$BUILD_DIR/bench-results"
mkdir -p "$out"
rm -f "$out"/*.jsonl
args=(--threads "$threads" --reps "$reps")

# Without --wait-idle each side runs all selected cases in one process. With it, each case runs in
# its own process started on an idle CPU: short quiet windows are easier to find than long ones.
if ((wait_idle)); then
  mapfile -t groups < <("$BUILD_DIR/bench_kernels" --list | if [[ -n "$filter" ]]; then grep -F "${filter//,/$'\n'}"; else cat; fi)
  ((${#groups[@]})) || die "--filter matches no case"
else
  groups=("$filter")
fi

# run_side NAME RESULTS_FILE COMMAND...: runs every group through one benchmark program, appending
# its JSON lines to RESULTS_FILE.
run_side() {
  local name=$1 file=$2 group
  shift 2
  for group in "${groups[@]}"; do
    ((wait_idle)) && wait_for_idle
    echo "== run $i/$runs: $name ${group:-all cases}" >&2
    "$@" "${args[@]}" ${group:+--filter "$group"} --json "$out/current.jsonl" >&2
    cat "$out/current.jsonl" >>"$file"
  done
  rm -f "$out/current.jsonl"
}

for ((i = 1; i <= runs; i++)); do
  run_side tessera "$out/tessera-$i.jsonl" "$BUILD_DIR/bench_kernels"
  run_side pytorch "$out/pytorch-$i.jsonl" "$PYTHON" bench/bench_kernels.py
done

echo "== $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $threads thread(s), median of $reps reps, best of $runs run(s) per side; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-auto}"
"$PYTHON" bench/compare.py --tessera "$out"/tessera-*.jsonl --pytorch "$out"/pytorch-*.jsonl $markdown
