#!/usr/bin/env bash
# Fuzzes every parser of untrusted input with libFuzzer under ASan + UBSan (docs/reliability.md).
#   scripts/fuzz.sh [seconds] [harness ...]   each harness (default: all) for `seconds` (default 60),
#                                             one process at a time
#   scripts/fuzz.sh 600 png:3600 json         a harness named NAME:SECONDS runs for its own time
#   FUZZ_PARALLEL=N scripts/fuzz.sh ...       N harnesses at a time (one per core for long runs)
# Builds in build-fuzz/ with clang, installing what the fuzz build alone needs when it is missing
# (clang; libclang-rt-14-dev, the fuzzer and sanitizer runtimes; libomp-dev, OpenMP for clang).
# Prints executions and coverage per harness. Inputs that add coverage go to
# build-fuzz/corpus/<name>/ (kept between runs; the committed seeds in fuzz/corpus/ are read, never
# written). A crash, leak or timeout leaves its input in build-fuzz/crashes/<name>/ and fails the
# script: fix it, then commit the input to fuzz/regressions/<name>/, which every build replays.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
if ! [[ $seconds =~ ^[0-9]+$ ]]; then
  echo "fuzz.sh: seconds must be a whole number, got '$seconds' (usage: scripts/fuzz.sh [seconds] [harness[:seconds] ...])" >&2
  exit 2
fi
all=()
for f in fuzz/fuzz_*.cpp; do all+=("$(basename "$f" .cpp | sed 's/^fuzz_//')"); done
args=("$@")
[ ${#args[@]} -gt 0 ] || args=("${all[@]}")
harnesses=()
declare -A duration
for arg in "${args[@]}"; do
  name=${arg%%:*}
  [[ $arg == *:* ]] && secs=${arg#*:} || secs=$seconds
  if [ ! -f "fuzz/fuzz_$name.cpp" ] || ! [[ $secs =~ ^[0-9]+$ ]]; then
    echo "fuzz.sh: '$arg': expected HARNESS or HARNESS:SECONDS, HARNESS one of: ${all[*]}" >&2
    exit 2
  fi
  harnesses+=("$name")
  duration[$name]=$secs
done
bash scripts/setup.sh clang libclang-rt-14-dev libomp-dev
# Build type "Sanitize": TESSERA_SANITIZE's -O1 -g1 and nothing of CMake's own; unity batches as the
# other sanitizer builds (scripts/test.sh). MPI is not a parser;
# oneDNN is built against GCC's OpenMP runtime, not clang's, and computes no parser's output.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DTESSERA_SANITIZE=ON \
  -DTESSERA_NATIVE=OFF -DTESSERA_FUZZ=ON -DTESSERA_MPI=OFF -DTESSERA_ONEDNN=OFF -DCMAKE_UNITY_BUILD=ON \
  -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 --no-warn-unused-cli >/dev/null
ninja -C build-fuzz -j"$(nproc)" "${harnesses[@]/#/fuzz_}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One thread per harness: a parser needs no more, and OpenMP's idle workers spin, so a second
# thread took a fifth of model_kwargs' time and fought the other harnesses under FUZZ_PARALLEL.
export OMP_NUM_THREADS=1 TESSERA_NUM_THREADS=1
# One harness: its log in build-fuzz/fuzz-<name>.log, its exit status in build-fuzz/fuzz-<name>.rc.
fuzz_one() {
  local name=$1 corpus=build-fuzz/corpus/$1 crashes=build-fuzz/crashes/$1 log=build-fuzz/fuzz-$1.log
  mkdir -p "$corpus" "$crashes"
  local inputs=("$corpus" "fuzz/corpus/$name")
  [ -d "fuzz/regressions/$name" ] && inputs+=("fuzz/regressions/$name")
  [ "$name" = model_file ] && inputs+=("models/files")  # the shipped variants' files seed it too
  # -timeout: an input slower than 10 s is a hang; -rss_limit_mb: libFuzzer's default, made explicit.
  # The YAML inputs (model files, configs) are refused before they cost memory or time
  # (io/untrusted_text.h), so for them an input slower than 2 s, a process above 512 MB (ASan's
  # shadow and quarantine included) or one allocation above 64 MB is a finding.
  local limits=(-timeout=10 -rss_limit_mb=2048)
  case $name in model_file | yaml_config) limits=(-timeout=2 -rss_limit_mb=512 -malloc_limit_mb=64) ;; esac
  local rc=0
  "build-fuzz/fuzz/fuzz_$name" -max_total_time="${duration[$name]}" "${limits[@]}" \
    -print_final_stats=1 -artifact_prefix="$crashes/" "${inputs[@]}" >"$log" 2>&1 || rc=$?
  echo "$rc" >"build-fuzz/fuzz-$name.rc"
}
parallel=${FUZZ_PARALLEL:-1}
for name in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  fuzz_one "$name" &
done
wait

printf '%-18s %12s %10s %8s %8s %s\n' harness executions exec/s cov ft corpus
failed=()
for name in "${harnesses[@]}"; do
  log=build-fuzz/fuzz-$name.log
  [ "$(cat "build-fuzz/fuzz-$name.rc")" = 0 ] || failed+=("$name")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  printf '%-18s %12s %10s %8s %8s %s\n' "$name" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
    "$(find "build-fuzz/corpus/$name" -type f | wc -l) files"
done
if [ ${#failed[@]} -gt 0 ]; then
  for name in "${failed[@]}"; do
    echo "fuzz: $name failed; its log is build-fuzz/fuzz-$name.log, the input in build-fuzz/crashes/$name/" >&2
    grep -m5 -E 'ERROR|SUMMARY|runtime error|uncaught' "build-fuzz/fuzz-$name.log" >&2 || true
  done
  exit 1
fi
