#!/usr/bin/env bash
# The one command for a lent GPU machine (15 minutes in all, start included; at most 10 per
# command): builds Tessera with nvcc from what the tree carries, and brings back, most valuable
# first, whether the `cuda` tests pass on the GPU, where a training step's time goes and what each
# speed lever is worth, how fast it is against timm on the same GPU, and what compute-sanitizer sees.
#
#   scripts/gpu_check.sh OUT_DIR                   env build test sanitize perf, in ~8.5 min
#   scripts/gpu_check.sh OUT_DIR STEP ...          only these (a second call: train bench bench-compile
#                                                  bench-more sanitize-more)
#   scripts/gpu_check.sh --dry-run OUT_DIR [STEP]  the default steps and train on the SIMT emulator at
#                                                  tiny sizes (CI)
#
# Steps: env (GPU, driver, toolkit, where cuDNN, NCCL and the packed libraries come from); build
# (configure and build only what the steps run, scripts/gpu_build_options.sh); test (ctest -L cuda
# on the GPU, failures re-run once with synchronous launches so the failing kernel is named);
# sanitize (compute-sanitizer memcheck over a few CUDA op programs); perf (the event-timed profile of a training step of each bench model, each speed lever of
# core/levers.h off against all on, one alternated round of Tessera eager, Tessera as a CUDA Graph
# and timm eager, then timm under torch.compile while the step's time lasts; its table rewritten
# after every run); train (50 steps of one
# model per family on cuda and on the CPU from one seed, the loss curves compared; one NCCL run of
# one rank); bench (tessera bench eager and with the step as a CUDA Graph against timm's eager
# PyTorch, bf16 autocast, the sides alternated over two rounds, GPU clocks logged); bench-compile
# (the same training runs against timm under torch.compile, the stronger reference, one round);
# bench-more (XCiT inference from 224 to 1024 pixels, both sides: memory linear in the tokens,
# XCiT Table D.5); sanitize-more (racecheck and synccheck).
#
# Every step runs under its own time limit, inside an overall budget (GPU_CHECK_SECONDS, 510 by
# default): a step that no longer fits is skipped and says so. OUT_DIR receives at most 8 files, each
# rewritten after every step so that a call cut off anywhere still brings back all before it:
# summary.md (a row per step and its findings), logs.tar.gz (every log, the JUnit XML, the loss
# curves' logs), bench.jsonl. Run folders and checkpoints stay outside it (GPU_CHECK_WORK).
#
# Needs nvcc, CMake, ninja and a C++ compiler; the rest comes with the tree: .gpu-deps/ (made here by
# scripts/gpu_deps.sh; carry it along) and cuDNN/NCCL from the toolkit or from pip's nvidia-* wheels
# (the Python with torch: GPU_CHECK_PYTHON, else /opt/torch/.venv/bin/python3, else python3).
# With the device tool: bash scripts/gpu_deps.sh here, then
#   run: bash scripts/gpu_check.sh $OUT        carry: [".gpu-deps"]        timeout_s: 570
# CI rehearses the build step on a machine without Debian's development packages
# (scripts/gpu_rehearse.sh) and runs the whole command with --dry-run (docs/cuda.md).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
self="$root/scripts/gpu_check.sh"
usage="usage: scripts/gpu_check.sh [--dry-run] OUT_DIR [env build test sanitize perf train bench bench-compile bench-more sanitize-more]"
all_steps=(env build test sanitize perf train bench bench-compile bench-more sanitize-more)
# perf last: it takes what the call has left (timm compiled, while its time lasts).
default_steps=(env build test sanitize perf)

# ---- the child: one step, run by the parent under `timeout` ------------------------------------
if [ "${1:-}" = --step ]; then
  step=$2
else
  dry=0
  if [ "${1:-}" = --dry-run ]; then dry=1; shift; fi
  [ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
  mkdir -p "$1" || exit 2
  out=$(cd "$1" && pwd)
  shift
  steps=("$@")
  # The dry run rehearses the second call's train step too (its plumbing costs a few seconds here).
  ((${#steps[@]})) || { steps=("${default_steps[@]}"); [ "$dry" -eq 1 ] && steps+=(train); }
  for s in "${steps[@]}"; do
    [[ " ${all_steps[*]} " == *" $s "* ]] || { echo "gpu_check: unknown step '$s'"; echo "$usage"; exit 2; } >&2
  done
  work=${GPU_CHECK_WORK:-${TMPDIR:-/tmp}/tessera-gpu-check}
  rm -rf "$work/status" "$work/sections"
  mkdir -p "$work/logs" "$work/status" "$work/sections" "$work/runs"
  export GPU_CHECK_DRY=$dry GPU_CHECK_OUT=$out GPU_CHECK_WORK_DIR=$work
fi
dry=$GPU_CHECK_DRY out=$GPU_CHECK_OUT work=$GPU_CHECK_WORK_DIR
logs=$work/logs
jobs=$(nproc)
export PATH="$PATH:/usr/local/cuda/bin"
# The dry run may reuse an emulator build made already (GPU_CHECK_DRY_BUILD; CI: its sanitizer
# build) instead of compiling the library once more; its options are then left as they are.
if [ "$dry" -eq 1 ]; then BUILD=${GPU_CHECK_DRY_BUILD:-$root/build-gpu-dry}; else BUILD=$root/build-gpu; fi
BUILD=$(cd "$root" && mkdir -p "$BUILD" && cd "$BUILD" && pwd)
tessera=$BUILD/bin/tessera
deps=$root/.gpu-deps

# The Python that has torch (and pip's nvidia libraries), for timm's side and to find cuDNN/NCCL.
python=${GPU_CHECK_PYTHON:-}
if [ -z "$python" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then python=/opt/torch/.venv/bin/python3; else python=python3; fi
fi
# A pip wheel's folder (nvidia.cudnn, nvidia.nccl), if that Python has it.
nvidia_dir() { "$python" -c "import nvidia.$1 as m; print(list(m.__path__)[0])" 2>/dev/null; }
cudnn_dir="" nccl_dir=""
if [ "$dry" -eq 0 ]; then cudnn_dir=$(nvidia_dir cudnn); nccl_dir=$(nvidia_dir nccl); fi
for d in "$deps/usr/lib/x86_64-linux-gnu" "${cudnn_dir:+$cudnn_dir/lib}" "${nccl_dir:+$nccl_dir/lib}"; do
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
dataset=/usr/share/datasets/fashion-mnist
[ -d "$dataset" ] || dataset=$deps$dataset

# status LINE: the step's one-line result for the summary table ("ok: ...", "FAILED: ...", "skipped: ...").
status() { echo "$*" > "$work/status/$step"; }
# section: the step's part of summary.md, from stdin.
section() { cat > "$work/sections/$(printf '%02d' "$step_index")-$step.md"; }
note() { echo "gpu_check[$step]: $*"; }
gpu_clocks() {  # one CSV line: label, SM and memory clocks, temperature, power
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null |
    sed "s/^/$1, /" >> "$logs/gpu_clocks.csv"
}

# ---- steps -------------------------------------------------------------------------------------
step_env() {
  {
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
    else
      echo "nvidia-smi: not found"
    fi
    nvcc --version 2>&1 | tail -2
    c++ --version 2>&1 | head -1
    cmake --version 2>&1 | head -1
    echo "python: $python: $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1)"
    echo "cuDNN: ${cudnn_dir:-from the toolkit}"
    echo "NCCL: ${nccl_dir:-from the toolkit}"
    if [ -f "$deps/packages.txt" ]; then echo "packed (.gpu-deps): $(tr '\n' ' ' < "$deps/packages.txt")"; else echo "packed: none (the system's libraries)"; fi
    echo "Fashion-MNIST: $dataset"
  } > "$logs/env.txt" 2>&1
  cat "$logs/env.txt"
  { echo "## env"; echo; echo '```'; cat "$logs/env.txt"; echo '```'; } | section
  if [ "$dry" -eq 1 ]; then status "ok: no GPU needed (dry run: cuda is the SIMT emulator)"
  elif command -v nvidia-smi >/dev/null; then status "ok: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
  else status "ok: no GPU on this machine (nvidia-smi not found)"; fi
}

step_build() {
  local args=()
  if [ "$dry" -eq 1 ]; then
    args=(-DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON -DTESSERA_CUDA_EMU=ON)
  else
    source scripts/gpu_build_options.sh
    args=("${gpu_build_options[@]}")
    local arch
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
    args+=(-DCMAKE_CUDA_ARCHITECTURES="${arch:-90}")
    # The host sources as a unity build, as the rehearsal builds them: 52 s on the H100's 16 cores.
    args+=(-DCMAKE_UNITY_BUILD=ON)
    # Every third-party path the build needs, inside the pack, as the build itself recorded it.
    if [ -f "$deps/third_party.txt" ]; then
      local entry file
      while read -r entry file; do
        [ -n "$entry" ] && args+=("-D${entry%%=*}=$deps${entry#*=}")
      done < "$deps/third_party.txt"
    fi
    if [ -n "$cudnn_dir" ]; then
      args+=(-DCUDNN_INCLUDE_DIR="$cudnn_dir/include" -DCUDNN_LIBRARY="$(ls "$cudnn_dir"/lib/libcudnn.so* | head -1)")
    fi
    if [ -n "$nccl_dir" ]; then
      args+=(-DNCCL_INCLUDE_DIR="$nccl_dir/include" -DNCCL_LIBRARY="$(ls "$nccl_dir"/lib/libnccl.so* | head -1)")
    fi
    # The command-line tests train on the dataset the pack carries.
    args+=(-DTESSERA_TEST_FASHION_MNIST="$dataset")
    # scripts/gpu_rehearse.sh: nothing from the system's own prefixes (/usr, /).
    [ -n "${GPU_CHECK_CMAKE_ARGS:-}" ] && read -r -a extra <<< "$GPU_CHECK_CMAKE_ARGS" && args+=("${extra[@]}")
  fi
  local rc=0
  if [ "$dry" -eq 1 ] && [ -n "${GPU_CHECK_DRY_BUILD:-}" ]; then
    args=("(reused: $BUILD)")
    grep -q "^TESSERA_CUDA_EMU:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null ||
      { echo "gpu_check: GPU_CHECK_DRY_BUILD=$BUILD is not a configured emulator build" > "$logs/build.log"; rc=2; }
  else
    printf '%s\n' "cmake ${args[*]}" > "$logs/build.log"
    cmake -S . -B "$BUILD" -G Ninja "${args[@]}" >> "$logs/build.log" 2>&1 || rc=$?
  fi
  [ "$rc" -eq 0 ] && { ninja -C "$BUILD" -j"$jobs" tessera_cuda_tests >> "$logs/build.log" 2>&1 || rc=$?; }
  tail -n 25 "$logs/build.log"
  { echo "## build"; echo; echo "\`${args[*]}\`"; echo; echo '```'; tail -n 12 "$logs/build.log"; echo '```'; } | section
  if [ "$rc" -eq 0 ]; then
    local nccl="no NCCL backend"
    grep -q "^NCCL_LIBRARY:FILEPATH=/" "$BUILD/CMakeCache.txt" && nccl="NCCL backend built"
    if [ "$dry" -eq 1 ]; then status "ok: the emulator build"
    else status "ok: cuDNN $(grep -m1 '^CUDNN_LIBRARY:FILEPATH=' "$BUILD/CMakeCache.txt" | cut -d= -f2); $nccl"; fi
  else
    status "FAILED: exit $rc (logs.tar.gz: build.log)"
  fi
}

step_test() {
  local select=() rc=0
  # The dry run tries the plumbing on a few emulated tests; the GPU runs the whole label.
  [ "$dry" -eq 1 ] && select=(-R "op samples of softmax|op samples of the normalizations")
  ctest --test-dir "$BUILD" -L cuda "${select[@]}" -j"$jobs" --timeout 120 --output-junit "$logs/ctest.xml" \
    > "$logs/test.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    # Once more, each failure alone with synchronous launches: the error names the failing kernel.
    CUDA_LAUNCH_BLOCKING=1 ctest --test-dir "$BUILD" --rerun-failed --output-on-failure --timeout 120 \
      > "$logs/test-rerun.log" 2>&1
  fi
  tail -n 15 "$logs/test.log"
  local line failed
  line=$(grep -E "tests passed|tests failed" "$logs/test.log" | tail -1)
  failed=$(grep -E "^\s+[0-9]+ - " "$logs/test.log" | head -40)
  { echo "## test (ctest -L cuda)"; echo; echo "${line:-no result line}"; echo
    [ -n "$failed" ] && { echo '```'; echo "$failed"; echo '```'; echo; echo "Re-run with CUDA_LAUNCH_BLOCKING=1: test-rerun.log in logs.tar.gz."; }
  } | section
  local skipped
  skipped=$(grep -c "Not Run (Skipped)\|(Skipped)" "$logs/test.log")
  if [ "$rc" -ne 0 ] || [ -z "$line" ]; then status "FAILED: ${line:-exit $rc, no result}"
  elif [ "$skipped" -eq 0 ]; then status "ok: $line"
  # A test skips only where no device answers: on a GPU machine that is a failure, not a pass.
  elif [ "$dry" -eq 0 ] && nvidia-smi -L >/dev/null 2>&1; then status "FAILED: $line, but $skipped skipped with a GPU present"
  else status "ok: $line; $skipped of them need a GPU and skipped (none here)"; fi
}

step_train() {
  local steps=50 batch=32 specs
  specs=("xcit_nano_12_p16_224 --patch-size 4" "cait_xxs24_224 --patch-size 8 --model-kwargs depth=4"
         "coat_lite_tiny" "ufo_vit_t --patch-size 4 --model-kwargs depth=4")
  if [ "$dry" -eq 1 ]; then
    steps=2 batch=4
    specs=("xcit_nano_12_p16_224 --patch-size 8 --model-kwargs depth=1" "cait_xxs24_224 --patch-size 8 --model-kwargs depth=1"
           "ufo_vit_t --patch-size 8 --model-kwargs depth=1")
  fi
  mkdir -p "$logs/train"
  local spec model device failures=0
  for spec in "${specs[@]}"; do
    model=${spec%% *}
    for device in cuda cpu; do
      # shellcheck disable=SC2086
      "$tessera" train --model $spec --data-dir "$dataset" --img-size 32 --epochs 1 -b "$batch" \
        --max-train-batches "$steps" --max-eval-batches 1 --log-interval 1 --primary none --crop-pct 1 --hflip 0 \
        --warmup-epochs 0 --lr 1e-3 --seed 0 --workers 2 --device "$device" --output "$work/runs/$model.$device" \
        > "$logs/train/$model.$device.log" 2>&1 || { failures=$((failures + 1)); note "$model on $device failed (exit $?)"; }
    done
  done
  python3 bench/compare_loss_curves.py "$logs"/train/*.log > "$logs/loss_curves.md" 2>&1
  local nccl="skipped: this build has no NCCL backend"
  if grep -q -e "^NCCL_LIBRARY:FILEPATH=/" -e "^TESSERA_CUDA_EMU:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null; then
    # The NCCL communicator as a job of one rank (two NCCL ranks cannot share a GPU).
    if "$tessera" train --model coat_lite_tiny --data-dir "$dataset" --img-size 32 --epochs 1 -b "$batch" \
        --max-train-batches "$steps" --max-eval-batches 1 --log-interval 1 --primary none --crop-pct 1 --hflip 0 \
        --warmup-epochs 0 --lr 1e-3 --seed 0 --workers 2 --device cuda --dist-backend nccl \
        --output "$work/runs/nccl" > "$logs/train/nccl_one_rank.txt" 2>&1; then nccl="ok"
    else nccl="FAILED (exit $?)"; failures=$((failures + 1)); fi
  fi
  local multi
  multi=$(nccl_ranks "$dataset" "$batch" "$steps")
  cat "$logs/loss_curves.md"
  local worst
  worst=$(grep -o "largest relative difference.*" "$logs/loss_curves.md" | sed 's/largest relative difference over [0-9]* steps: //' | sort -g | tail -1)
  # The share of each cuda run spent waiting for the loader (its batches copied on a side stream).
  local waits="" log
  for log in "$logs"/train/*.cuda.log; do
    waits+="$(basename "$log" .cuda.log): $(grep -o '[0-9.]*% waiting for data' "$log" | tail -1); "
  done
  { echo "## train: $steps steps on cuda and on the CPU from one seed"; echo; cat "$logs/loss_curves.md"
    echo "Waiting for data on cuda: ${waits:-none}"; echo "NCCL, one rank: $nccl"; echo
    echo "### NCCL over every GPU"; echo; echo "$multi"; } | section
  if [ "$failures" -eq 0 ]; then status "ok: ${#specs[@]} families, largest relative loss difference ${worst:-?}; NCCL: $nccl"
  else status "FAILED: $failures runs failed (logs.tar.gz: train/)"; fi
}

# Data-parallel training over NCCL with 1, 2 and all GPUs (one rank per GPU), one model of each
# family: the images/s of each and the share of the step spent waiting on gradient communication
# (its exposed part; the allreduce time hidden behind backward is not measured). Needs more than
# one GPU, mpirun (the nccl communicator bootstraps over MPI) and a build with the nccl backend;
# says which is missing otherwise. The dry run rehearses it on two emulated GPUs.
nccl_ranks() {
  local dataset=$1 batch=$2 steps=$3 gpus=1
  if [ "$dry" -eq 1 ]; then gpus=2; export TESSERA_EMU_DEVICES=2; else gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); fi
  if [ "$gpus" -le 1 ]; then echo "skipped: $gpus GPU on this machine, and NCCL ranks need one GPU each"; return; fi
  if ! command -v mpirun >/dev/null; then echo "skipped: $gpus GPUs but no mpirun here (the nccl communicator bootstraps over MPI)"; return; fi
  if ! grep -q -e "^NCCL_LIBRARY:FILEPATH=/" -e "^TESSERA_CUDA_EMU:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null; then
    echo "skipped: this build has no NCCL backend"; return
  fi
  local specs=("xcit_nano_12_p16_224 --patch-size 4" "cait_xxs24_224 --patch-size 8 --model-kwargs depth=4"
               "coat_lite_tiny" "ufo_vit_t --patch-size 4 --model-kwargs depth=4")
  [ "$dry" -eq 1 ] && specs=("cait_xxs24_224 --patch-size 8 --model-kwargs depth=1")
  local counts=(1 2) spec model n log xenv=()
  [ "$dry" -eq 1 ] && xenv=(-x TESSERA_EMU_DEVICES)
  # Open MPI's plugins keep memory LeakSanitizer cannot name (tests/CMakeLists.txt, the mpi tests):
  # a sanitizer build's ranks check memory errors, not leaks.
  local ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  export ASAN_OPTIONS
  [ "$gpus" -gt 2 ] && counts+=("$gpus")
  echo "| model | GPUs | images/s (all ranks) | waiting on communication |"
  echo "|---|---|---|---|"
  for spec in "${specs[@]}"; do
    model=${spec%% *}
    for n in "${counts[@]}"; do
      log="$logs/train/nccl.$model.$n.log"
      # shellcheck disable=SC2086
      if timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$n" "${xenv[@]}" "$tessera" train \
          --model $spec --data-dir "$dataset" --img-size 32 --epochs 1 -b "$batch" --max-train-batches "$steps" \
          --max-eval-batches 1 --log-interval 1000 --primary none --crop-pct 1 --hflip 0 --warmup-epochs 0 --lr 1e-3 \
          --seed 0 --workers 2 --device cuda --dist-backend nccl --output "$work/runs/nccl.$model.$n" > "$log" 2>&1; then
        echo "| $model | $n | $(grep -o '[0-9.]* img/s, ' "$log" | tail -1 | cut -d' ' -f1) |" \
             "$(grep -o '[0-9.]*% of the training time waiting' "$log" | tail -1 | cut -d' ' -f1) |"
      else
        echo "| $model | $n | FAILED (exit $?; logs.tar.gz: train/nccl.$model.$n.log) | |"
      fi
    done
  done
}

# One side of one benchmark, as a JSON line in bench.jsonl with the side, round and GPU clocks.
# The sides (docs/cuda.md, "Levers"): tessera (bf16 autocast, bf16 activations), tessera-act32
# (bf16 autocast, float32 activations: GEMMs only), tessera-graph (tessera's step as one CUDA
# Graph), timm (eager PyTorch, bf16 autocast) and timm-compile (the same under torch.compile, the
# stronger reference).
bench_one() {
  # bench_timeout (seconds, 0: none): a run still going then is stopped and counts as failed.
  local side=$1 round=$2 model=$3 batch=$4 mode=$5 img=$6 line rc=0 args=() limit=${bench_timeout:-0}
  gpu_clocks "$side $model $mode $img round $round"
  case $side in
    tessera | tessera-act32 | tessera-graph)
      [ "$side" = tessera-act32 ] && args=(--amp-activations float32)
      [ "$side" = tessera-graph ] && args=(--cuda-graph)
      line=$(timeout "$limit" "$tessera" bench --device cuda --amp bf16 "${args[@]}" --model "$model" --batch "$batch" --mode "$mode" \
             --img-size "$img" $bench_sizes --json 2>>"$logs/bench.err" | tail -1) || rc=$? ;;
    timm | timm-compile)
      [ "$side" = timm-compile ] && args=(--compile)
      line=$(timeout "$limit" "$python" bench/bench_models.py --device cuda --amp bf16 "${args[@]}" --model "$model" --batch "$batch" \
             --mode "$mode" --img-size "$img" --threads 8 $bench_sizes 2>>"$logs/bench.err" | tail -1) || rc=$? ;;
  esac
  if [ "$rc" -ne 0 ] || [[ $line != "{"* ]]; then
    echo "{\"side\": \"$side\", \"round\": $round, \"model\": \"$model\", \"mode\": \"$mode\", \"img_size\": $img, \"error\": \"exit $rc\"}"
    return 1
  fi
  echo "{\"side\": \"$side\", \"round\": $round, ${line#\{}"
}

# The sides in bench_sides on the given runs, alternated: odd rounds in bench_sides' order, even
# rounds in reverse, so drift over the call falls on every side alike. timm's sides are left out,
# saying why, when that Python has no torch on a GPU. Appends to bench.jsonl.
bench_runs() {
  local rounds=$1; shift
  local sides=() why="" side
  for side in $bench_sides; do
    if [[ $side == timm* ]] && [ -z "$why" ] &&
       ! why=$("$python" -c 'import torch, timm; assert torch.cuda.is_available(), "torch sees no GPU"' 2>&1); then
      why=${why##*$'\n'}
      note "timm's sides skipped: $why"
      echo "timm's sides skipped: $why" >> "$logs/bench.err"
    fi
    [[ $side == timm* ]] && [ -n "$why" ] && continue
    sides+=("$side")
  done
  local run r i order failures=0
  for ((r = 1; r <= rounds; r++)); do
    for run in "$@"; do
      read -r model batch mode img <<< "$run"
      order=("${sides[@]}")
      if [ $((r % 2)) -eq 0 ]; then order=(); for ((i = ${#sides[@]} - 1; i >= 0; i--)); do order+=("${sides[i]}"); done; fi
      for side in "${order[@]}"; do
        bench_one "$side" "$r" "$model" "$batch" "$mode" "$img" >> "$out/bench.jsonl" || failures=$((failures + 1))
      done
    done
  done
  return "$failures"
}

# A table of the best images/s per model and side, from bench.jsonl: a column per side, each
# Tessera side's ratio to timm eager, and the peak memory of tessera and timm.
bench_table() {
  python3 - "$out/bench.jsonl" <<'PY'
import json, sys
order = ["tessera", "tessera-act32", "tessera-graph", "timm", "timm-compile"]
best = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "images_per_s" not in r:
        continue
    key = (r["model"], r["mode"], r["img_size"], r.get("batch"))
    side = best.setdefault(key, {})
    mem = r.get("tensor_peak_mib") or r.get("peak_memory_mib")
    if r["side"] not in side or r["images_per_s"] > side[r["side"]][0]:
        side[r["side"]] = (r["images_per_s"], mem)
sides = [s for s in order if any(s in v for v in best.values())]
ratios = [s for s in sides if s.startswith("tessera")]
fmt = lambda v: "n/a" if v is None else f"{v:.1f}"
print("| model | mode | img | batch | " + " | ".join(f"{s} img/s" for s in sides) + " | "
      + " | ".join(f"{s} / timm" for s in ratios) + " | tessera peak MiB | timm peak MiB |")
print("|---|---|---:|---:|" + "---:|" * (len(sides) + len(ratios) + 2))
for (model, mode, img, batch), side in sorted(best.items()):
    get = lambda s: side.get(s, (None, None))
    cells = [fmt(get(s)[0]) for s in sides]
    timm = get("timm")[0]
    cells += [f"{get(s)[0] / timm:.2f}x" if get(s)[0] and timm else "n/a" for s in ratios]
    cells += [fmt(get("tessera")[1]), fmt(get("timm")[1])]
    print(f"| {model} | {mode} | {img} | {batch} | " + " | ".join(cells) + " |")
PY
}

# The perf step's findings so far, as its section of summary.md: rewritten after every run, so a
# step cut off at its limit still reports every run that finished.
perf_section() {
  {
    echo "## perf: where a training step's time goes, each lever off against all on, Tessera against timm"; echo
    echo "Event-timed profiles (\`tessera bench --profile --json\`, one step after the timed ones; device time per op"
    echo "from CUDA events, beside the H100 roofline model):"; echo
    python3 bench/perf_tables.py profiles "$logs"/profile-*.json 2>&1; echo
    echo "Each speed lever flipped alone (core/levers.h, docs/cuda.md) against all on, in one process per model"
    echo "(\`tessera bench --lever-sweep\`), all on first and again last:"; echo
    python3 bench/perf_tables.py levers "$out/bench.jsonl" 2>&1; echo
    echo "One alternated round (then timm under torch.compile while time remained), best of each side:"; echo
    bench_table
    [ -s "$logs/bench.err" ] && grep "skipped" "$logs/bench.err" | sort -u | head -3 | sed 's/^/- /'
  } | section
}

# The levers of one model: one tessera bench process that times the step with all levers on, then
# each flipped alone, then all on again (--lever-sweep: one model built, no restart per lever), as
# a line of bench.jsonl (side "tessera-levers").
perf_lever_sweep() {
  local levers=$1 model=$2 batch=$3 mode=$4 img=$5 line rc=0
  gpu_clocks "tessera levers $model"
  line=$("$tessera" bench --device cuda --amp bf16 --model "$model" --batch "$batch" --mode "$mode" \
         --img-size "$img" $bench_sizes --lever-sweep "$levers" --json 2>>"$logs/bench.err" | tail -1) || rc=$?
  if [ "$rc" -ne 0 ] || [[ $line != "{"* ]]; then
    echo "{\"side\": \"tessera-levers\", \"model\": \"$model\", \"error\": \"exit $rc\"}"
    return 1
  fi
  echo "{\"side\": \"tessera-levers\", ${line#\{}"
}

step_perf() {
  local step_deadline=$((SECONDS + ${GPU_CHECK_STEP_LIMIT:-400} - 10))
  local runs=("xcit_small_12_p16_224 128 train 224" "cait_s24_224 64 train 224" "coat_lite_small 128 train 224")
  local lever_runs=("${runs[0]}" "${runs[1]}")
  # Issues 46's and 48's levers (core/levers.h); the older ones were measured on 2026-11-27 or are
  # debugging aids.
  local levers=TESSERA_GEMM_BATCH_COPY,TESSERA_MEMORY_ORDER_WALKS,TESSERA_SPLIT_BACKWARD,TESSERA_ACCUMULATE_IN_PLACE
  levers+=,TESSERA_SPLIT_REDUCTIONS,TESSERA_WARP_ROWS,TESSERA_DEPTHWISE_ANY_LAYOUT,TESSERA_FUSED_XCA
  levers+=,TESSERA_FUSED_TALKING_HEADS,TESSERA_SHARED_OPT_IN,TESSERA_FUSED_FACTOR_ATTENTION
  levers+=,TESSERA_BIAS_GRAD_EPILOGUE,TESSERA_GRADIENT_SINKS,TESSERA_FUSED_DEPTHWISE_GELU
  levers+=,TESSERA_DEPTHWISE_CUDNN_NHWC
  bench_sizes="--warmup 3 --steps 10 --seconds 2"
  local profile_sizes="--warmup 2 --steps 1 --seconds 0"
  if [ "$dry" -eq 1 ]; then
    # The plumbing, not the levers' worth: one model, one lever (a step takes ~6 s on the
    # sanitizer build's emulator; the five levers' sweep was 84 of the dry run's 182 s).
    runs=("xcit_nano_12_p16_224 2 train 32")
    lever_runs=("${runs[0]}")
    levers=TESSERA_SPLIT_REDUCTIONS
    bench_sizes="--warmup 1 --steps 1 --seconds 0"
    profile_sizes=$bench_sizes
  fi
  local run model batch mode img failures=0
  perf_section
  # 1. Where the time goes: an event-timed profile of each model at its bench batch.
  for run in "${runs[@]}"; do
    read -r model batch mode img <<< "$run"
    "$tessera" bench --device cuda --amp bf16 --model "$model" --batch "$batch" --mode "$mode" --img-size "$img" \
      $profile_sizes --profile --json > "$logs/profile-$model.json" 2>>"$logs/bench.err" ||
      { note "the profile of $model failed"; failures=$((failures + 1)); }
    perf_section
  done
  # 2. What each lever is worth: all on, each off alone, all on again, in one process per model.
  for run in "${lever_runs[@]}"; do
    read -r model batch mode img <<< "$run"
    perf_lever_sweep "$levers" "$model" "$batch" "$mode" "$img" >> "$out/bench.jsonl" || failures=$((failures + 1))
    perf_section
  done
  # 3. Against timm: one alternated round, the table rewritten after each run; then timm compiled.
  bench_sides="tessera tessera-graph timm"
  for run in "${runs[@]}"; do
    bench_runs 1 "$run" || failures=$((failures + $?))
    perf_section
  done
  # The step's own deadline (the parent's limit, GPU_CHECK_STEP_LIMIT): compiling takes a minute or
  # more, so each compiled run gets what is left and the step ends on time, not cut off.
  bench_sides="timm-compile"
  local left
  for run in "${runs[@]}"; do
    left=$((step_deadline - SECONDS))
    ((left < 30)) && break
    bench_timeout=$left bench_runs 1 "$run"
    perf_section
  done
  local compiled
  compiled=$(grep -c '"side": "timm-compile", .*"images_per_s"' "$out/bench.jsonl")
  local summary="$(ls "$logs"/profile-*.json 2>/dev/null | wc -l) profiles, $(grep -c '' "$out/bench.jsonl") runs in bench.jsonl, timm compiled for $compiled of ${#runs[@]} models"
  if [ "$failures" -eq 0 ]; then status "ok: $summary"
  else status "FAILED: $failures runs failed (logs.tar.gz: bench.err); $summary"; fi
}

step_bench() {
  local runs=("xcit_small_12_p16_224 128 train 224" "cait_s24_224 64 train 224" "coat_lite_small 128 train 224")
  # (float32 activations, tessera-act32, were no faster on the H100 on 2026-11-27: 811 against 830
  # images/s for XCiT-S12, 210 against 200 for CaiT-S24; docs/gpu-report-2026-11-27.md.)
  bench_sides="tessera tessera-graph timm"
  bench_sizes="--warmup 3 --steps 10 --seconds 2"
  local profile_args=(--model xcit_small_12_p16_224 --batch 64 --mode train --img-size 224)
  if [ "$dry" -eq 1 ]; then
    runs=("xcit_nano_12_p16_224 2 train 32")
    bench_sizes="--warmup 1 --steps 1 --seconds 0"
    profile_args=(--model xcit_nano_12_p16_224 --batch 2 --mode train --img-size 32 --patch-size 8 --model-kwargs depth=1)
  fi
  # Two rounds on the GPU, alternated; one in a dry run, which proves each side runs, not its speed
  # (under ASan on the emulator a side takes 30 s).
  local failures=0 rounds=2
  [ "$dry" -eq 1 ] && rounds=1
  # Time per kernel of one training step, first: a step cut off during the rounds still has it.
  "$tessera" bench --device cuda --amp bf16 "${profile_args[@]}" $bench_sizes --profile > "$logs/profile.txt" 2>&1 ||
    { note "the profile failed"; failures=$((failures + 1)); }
  bench_runs "$rounds" "${runs[@]}" || failures=$((failures + $?))
  bench_table | tee "$logs/bench_table.md"
  { echo "## bench: Tessera (eager, and as a CUDA Graph) and timm, bf16 autocast, same GPU, alternated over 2 rounds (best of each)"; echo
    cat "$logs/bench_table.md"; echo
    [ -s "$logs/bench.err" ] && grep "skipped" "$logs/bench.err" | sort -u | head -3 | sed 's/^/- /'
    echo; echo "Time per kernel of one training step (\`tessera bench --profile\`, ${profile_args[*]}):"; echo; echo '```'
    head -n 30 "$logs/profile.txt"; echo '```'; } | section
  if [ "$failures" -eq 0 ]; then status "ok: $(grep -c '' "$out/bench.jsonl") runs in bench.jsonl"
  else status "FAILED: $failures runs failed (logs.tar.gz: bench.err)"; fi
}

step_bench_compile() {
  local runs=("xcit_small_12_p16_224 128 train 224" "cait_s24_224 64 train 224" "coat_lite_small 128 train 224")
  bench_sides="tessera timm timm-compile"
  bench_sizes="--warmup 3 --steps 10 --seconds 2"
  [ "$dry" -eq 1 ] && runs=("xcit_nano_12_p16_224 2 train 32") && bench_sizes="--warmup 1 --steps 1 --seconds 0"
  local failures=0
  bench_runs 1 "${runs[@]}" || failures=$?
  bench_table | tee "$logs/bench_table.md"
  { echo "## bench-compile: Tessera against timm eager and under torch.compile, bf16 autocast, one round"; echo
    cat "$logs/bench_table.md"; echo
    [ -s "$logs/bench.err" ] && grep "skipped" "$logs/bench.err" | sort -u | head -3 | sed 's/^/- /'; } | section
  if [ "$failures" -eq 0 ]; then status "ok: $(grep -c '' "$out/bench.jsonl") runs in bench.jsonl"
  else status "FAILED: $failures runs failed (logs.tar.gz: bench.err)"; fi
}

step_bench_more() {
  # XCiT's memory must grow linearly with the tokens (XCiT Table D.5): inference up to 1024 pixels.
  local runs=("xcit_small_12_p16_224 64 infer 224" "xcit_small_12_p16_224 64 infer 384"
              "xcit_small_12_p16_224 32 infer 512" "xcit_small_12_p16_224 8 infer 1024")
  bench_sides="tessera timm"
  bench_sizes="--warmup 2 --steps 5 --seconds 2"
  [ "$dry" -eq 1 ] && runs=("xcit_nano_12_p16_224 1 infer 32" "xcit_nano_12_p16_224 1 infer 64") && bench_sizes="--warmup 1 --steps 1 --seconds 0"
  local failures=0
  bench_runs 1 "${runs[@]}" || failures=$?
  bench_table | tee "$logs/bench_table.md"
  { echo "## bench-more: XCiT inference against the image size"; echo; cat "$logs/bench_table.md"; } | section
  if [ "$failures" -eq 0 ]; then status "ok: $(grep -c '' "$out/bench.jsonl") runs in bench.jsonl"
  else status "FAILED: $failures runs failed"; fi
}

# compute-sanitizer's TOOLS over a few CUDA op programs, each under its own time limit (the
# emulator cannot see races between blocks, missing synchronisation on hardware, or what the real
# libraries do).
sanitize_with() {
  if ! command -v compute-sanitizer >/dev/null 2>&1; then
    status "skipped: compute-sanitizer not found"
    echo "## $step"$'\n\n'"compute-sanitizer not found on this machine." | section
    return 0
  fi
  local tool family clean=0 dirty=0 timed_out=0 rc
  # The op table's samples of these families (tests/cuda/test_op_samples.cpp, tagged by family).
  local families=(elementwise reduce normalization softmax fused)
  for tool in "$@"; do
    for family in "${families[@]}"; do
      rc=0
      timeout -k 5 60 compute-sanitizer --tool "$tool" --error-exitcode 1 "$BUILD/tests/cuda_test_op_samples" \
        "[$family]" > "$logs/sanitizer-$tool-$family.log" 2>&1 || rc=$?
      if [ "$rc" -eq 0 ]; then clean=$((clean + 1)); elif [ "$rc" -eq 124 ]; then timed_out=$((timed_out + 1)); else dirty=$((dirty + 1)); fi
      note "$tool $family: exit $rc"
    done
  done
  { echo "## $step: compute-sanitizer $*"; echo; echo "$clean clean, $dirty with errors, $timed_out over 60 s"
    echo; grep -h -m3 "=========" "$logs"/sanitizer-*.log | head -20 | sed 's/^/    /'; } | section
  if [ "$dirty" -eq 0 ]; then status "ok: $clean clean, $timed_out timed out"; else status "FAILED: $dirty with errors"; fi
}
step_sanitize() { sanitize_with memcheck; }
step_sanitize_more() { sanitize_with racecheck synccheck; }

if [ "${1:-}" = --step ]; then
  step_index=$3
  cd "$root"
  "step_${step//-/_}"
  exit 0
fi

# ---- the parent: steps under their limits, summary.md and logs.tar.gz after each ----------------
# The build's limit is sized for the lent machine's 16 cores; a rehearsal on fewer cores
# (scripts/gpu_rehearse.sh) scales it with GPU_CHECK_BUILD_SECONDS.
# Measured on the H100 on 2026-11-27 (16 cores): env 8 s, build 52, test 51, train 62, sanitize 5;
# a bench run takes ~14 s with its start, so the bench step's 18 runs and its profile ~270 s.
# perf: 3 profiles and 2 lever sweeps (~20-30 s each), 9 runs of the round (~19 s each, a model
# built and its algorithms chosen in each: the H100's bench step ran 13 in 251 s), then timm compiled
# until the limit: it fills what the call has left.
declare -A cap=([env]=20 [build]=${GPU_CHECK_BUILD_SECONDS:-240} [test]=150 [perf]=400 [sanitize]=30 [train]=150 [bench]=290 [bench-compile]=360 [bench-more]=240 [sanitize-more]=300)
budget=${GPU_CHECK_SECONDS:-510}
[ "$dry" -eq 1 ] && budget=${GPU_CHECK_SECONDS:-1200}
# The caps are a lent GPU's; on the emulator under ASan the bench step's four sides take ~150 s.
[ "$dry" -eq 1 ] && cap[bench]=400 && cap[perf]=600 && cap[sanitize]=150
start=$SECONDS
# A fresh results folder: the files of an earlier call would mix with this one's.
rm -f "$out/summary.md" "$out/logs.tar.gz" "$out/bench.jsonl"
touch "$out/bench.jsonl"
rows=()
publish() {
  {
    echo "# scripts/gpu_check.sh$([ "$dry" -eq 1 ] && echo " --dry-run (the SIMT emulator, tiny sizes)")"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo "no GPU")"
    echo
    echo "| step | result | seconds |"
    echo "|---|---|---:|"
    printf '%s\n' "${rows[@]}"
    echo
    cat "$work/sections/"*.md 2>/dev/null
  } > "$out/.summary.md.tmp" && mv "$out/.summary.md.tmp" "$out/summary.md"
  tar -czf "$out/.logs.tar.gz.tmp" -C "$work" logs 2>/dev/null && mv "$out/.logs.tar.gz.tmp" "$out/logs.tar.gz"
}
index=0
failed=0
for s in "${steps[@]}"; do
  index=$((index + 1))
  left=$((budget - (SECONDS - start)))
  limit=${cap[$s]}
  ((limit > left - 10)) && limit=$((left - 10))
  if ((limit < 15)); then
    rows+=("| $s | skipped: no time left of the ${budget} s budget | 0 |")
    publish
    continue
  fi
  if [ -n "${build_failed:-}" ] && [ "$s" != env ]; then
    rows+=("| $s | skipped: the build failed | 0 |")
    publish
    continue
  fi
  echo "== gpu_check: $s (limit $limit s, $((SECONDS - start)) s so far)"
  began=$SECONDS
  rc=0
  GPU_CHECK_STEP_LIMIT=$limit timeout -k 10 "$limit" bash "$self" --step "$s" "$index" 2>&1 | tee "$logs/step-$s.txt" ||
    rc=${PIPESTATUS[0]}
  took=$((SECONDS - began))
  result=$(cat "$work/status/$s" 2>/dev/null || true)
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then result="FAILED: cut off at its limit of $limit s${result:+ (it had: $result)}"
  elif [ -z "$result" ]; then result="FAILED: exit $rc before a result"; fi
  [[ $result == FAILED* ]] && failed=$((failed + 1)) && [ "$s" = build ] && build_failed=1
  rows+=("| $s | ${result//|//} | $took |")
  publish
done
echo
cat "$out/summary.md"
if [ "$dry" -eq 1 ]; then
  # What the device tool brings back: at most 8 files, each at most 16 MiB, two folders deep.
  n=$(find "$out" -type f | wc -l)
  big=$(find "$out" -type f -size +16M)
  deep=$(find "$out" -mindepth 3 -type f)
  missing=$(for s in "${steps[@]}"; do grep -q "^| $s |" "$out/summary.md" || echo "$s"; done)
  echo "gpu_check --dry-run: $n files in $out${big:+; over 16 MiB: $big}${deep:+; too deep: $deep}${missing:+; no summary row: $missing}"
  { [ "$n" -le 8 ] && [ -z "$big" ] && [ -z "$deep" ] && [ -z "$missing" ]; } || exit 1
fi
[ "$failed" -eq 0 ]
