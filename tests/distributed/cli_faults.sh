#!/usr/bin/env bash
# `tessera train` under mpirun when things go wrong: ranks launched with different flags, a rank
# that hangs and a rank that is killed mid-epoch. Each must end the whole job with a non-zero exit
# and a message saying what happened, within the timeout, and leave the last checkpoint loadable.
# With BACKEND nccl the ranks train on cuda (the emulator's GPUs in CI: tests/CMakeLists.txt) through
# the nccl communicator, and --cuda-graph must say why it trains eagerly.
# Usage: cli_faults.sh TESSERA MPIEXEC WORKDIR [BACKEND (mpi)]
set -uo pipefail
tessera=$1 mpiexec=$2 work=$3 backend=${4:-mpi}
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
# A small run on Fashion-MNIST: coat_lite_tiny at 32x32, 16 batches of 8 per rank and epoch.
common=(--model coat_lite_tiny --img-size 32 -b 8 --max-train-batches 16 --max-eval-batches 1 --primary none
        --crop-pct 1 --workers 1 --warmup-epochs 0 --log-interval 1000)
[ "$backend" = nccl ] && common+=(--device cuda --dist-backend nccl)
mpi=("$mpiexec" -n 2 --oversubscribe)

echo "== ranks launched with different flags stop at start, naming the difference"
out=$("$mpiexec" --oversubscribe -n 1 "$tessera" train "${common[@]}" --epochs 1 --lr 1e-3 --output "$work/mismatch" : \
      -n 1 "$tessera" train "${common[@]}" --epochs 1 --lr 2e-3 --output "$work/mismatch" 2>&1)
rc=$?
echo "$out" | tail -n 20
[ $rc -ne 0 ] || fail "mismatched flags: exit code 0"
echo "$out" | grep -q "rank 1 has lr = 0.002 where rank 0 has lr = 0.001" || fail "mismatched flags: no message naming lr"
[ ! -e "$work/mismatch/checkpoint-0.safetensors" ] || fail "mismatched flags: training went ahead"

# Starts a 2-epoch run in the background, waits for its first checkpoint and a little of epoch 1,
# then sends SIGNAL to rank 1; checks the job's exit within LIMIT seconds and that its output
# matches PATTERN.
fault() {
  local name=$1 signal=$2 limit=$3 pattern=$4 timeout=$5
  local dir="$work/$name"
  "${mpi[@]}" "$tessera" train "${common[@]}" --epochs 2 --dist-timeout "$timeout" --output "$dir" >"$work/$name.log" 2>&1 &
  local job=$!
  # Up to 300 s for epoch 0: two emulated GPUs beside another test at -j2 took over 60 s on a 2-core Xeon.
  for _ in $(seq 3000); do [ -e "$dir/last.state.safetensors" ] && break; sleep 0.1; done
  [ -e "$dir/last.state.safetensors" ] || { kill -9 $job; fail "$name: no checkpoint after epoch 0"; }
  sleep 1
  local victim=""
  for pid in $(pgrep -P $job); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$pid
  done
  [ -n "$victim" ] || { kill -9 $job; fail "$name: rank 1 not found among mpirun's children"; }
  local start=$SECONDS
  kill -"$signal" "$victim"
  local waited=0
  while kill -0 $job 2>/dev/null && [ $waited -lt $((limit * 10)) ]; do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 $job 2>/dev/null; then
    kill -9 "$victim" $job 2>/dev/null
    fail "$name: the job still runs $limit s after rank 1 got SIG$signal"
  fi
  wait $job
  local rc=$?
  kill -9 "$victim" 2>/dev/null  # a stopped rank MPI_Abort could not reach
  tail -n 15 "$work/$name.log"
  echo "$name: exit code $rc after $((SECONDS - start)) s"
  [ $rc -ne 0 ] || fail "$name: exit code 0"
  grep -Eq "$pattern" "$work/$name.log" || fail "$name: no message matching '$pattern'"
  [ ! -e "$dir/checkpoint-1.safetensors" ] || fail "$name: epoch 1 finished although rank 1 was gone"
  # The last complete checkpoint loads: a single process resumes from it and trains on.
  "$tessera" train "${common[@]}" --epochs 2 --max-train-batches 1 --resume "$dir" --output "$dir" >"$work/$name.resume.log" 2>&1 ||
    { cat "$work/$name.resume.log"; fail "$name: the checkpoint left behind does not resume"; }
  grep -q "resumed from .*checkpoint-0" "$work/$name.resume.log" || fail "$name: did not resume from checkpoint-0"
}

echo "== a rank that hangs: the other gives up after --dist-timeout and ends the job"
fault hang STOP 60 "rank 0: $backend allreduce.* did not complete within --dist-timeout 10 s: another rank has died or hangs" 10
echo "== a rank that is killed: the job ends"
fault kill KILL 60 "exited on signal 9|killed" 300
if [ "$backend" = nccl ]; then
  echo "== --cuda-graph with the nccl backend trains eagerly and says why"
  out=$("${mpi[@]}" "$tessera" train "${common[@]}" --epochs 1 --max-train-batches 2 --cuda-graph \
        --output "$work/graph" 2>&1)
  rc=$?
  echo "$out" | tail -n 5
  [ $rc -eq 0 ] || fail "--cuda-graph with nccl: exit code $rc"
  echo "$out" | grep -q -- "--cuda-graph: data-parallel gradients are reduced in buckets that autograd hooks start" ||
    fail "--cuda-graph with nccl: no message saying why the step is not captured"
  [ -e "$work/graph/checkpoint-0.safetensors" ] || fail "--cuda-graph with nccl: no checkpoint written"
fi
echo "PASS"
